// SPDX-License-Identifier: Apache-2.0
// The Google Benchmark side of the shared helpers (kernels/harness/harness.hpp holds the rest):
// registration per runnable variant and the rate counters. The kernels' benchmarks come from
// their harness cases (bench/harness_bench.cc); this header serves those and the benchmarks
// that are not kernel cases (bench_peak.cc, bench/dev).
#pragma once

#include <benchmark/benchmark.h>

#include <string>

#include "kernels/harness/harness.hpp"
#include "phaselab/kernels.hpp"

namespace pl::bench {

using pl::test::runnable;
using pl::test::uniform;

// Registers `fn` once per runnable variant of kernel k, named "<variant>/<label>".
template <typename F>
void register_variants(pl::KernelId k, const std::string& label, F fn) {
  for (const auto* v : runnable(k)) {
    benchmark::RegisterBenchmark((v->name + "/" + label).c_str(),
                                 [fn, v](benchmark::State& st) { fn(st, *v); });
  }
}

// Sets a GFLOP/s counter: flops per iteration.
inline void set_flops(benchmark::State& st, double flops_per_iter) {
  st.counters["GFLOPS"] =
      benchmark::Counter(flops_per_iter * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// Sets bytes/s: bytes read and written per iteration.
inline void set_bytes(benchmark::State& st, double bytes_per_iter) {
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations() * bytes_per_iter));
}

// Sets items/s and the time per item. The counter is in seconds (an inverted rate), which the
// console prints with an SI prefix ("34.3ns") and the JSON as a plain number (3.43e-08);
// bench/summary.py reads both this and the older ns-valued counter.
inline void set_items(benchmark::State& st, double items_per_iter) {
  st.SetItemsProcessed(static_cast<int64_t>(st.iterations() * items_per_iter));
  st.counters["ns_per_item"] = benchmark::Counter(
      items_per_iter, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

}  // namespace pl::bench

// PL_BENCHMARKS { ...register_variants(...)... }  runs at start-up of the benchmark binary.
#define PL_BENCHMARKS PL_AT_STARTUP
