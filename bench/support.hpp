// SPDX-License-Identifier: Apache-2.0
// Helpers for the per-kernel benchmarks: each family registers one benchmark per runnable variant
// (scalar, every supported Highway target, intrinsics, xsimd) and size.
#pragma once

#include <benchmark/benchmark.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/harness/harness.hpp"
#include "phaselab/kernels.hpp"

namespace pl::bench {

using pl::test::runnable;  // kernels/harness/harness.hpp, shared with the tests
using pl::test::uniform;

// Registers `fn` once per runnable variant of kernel k, named "<variant>/<label>".
// Items/s (elements, samples, parameters) or a FLOP rate counter is set inside fn.
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

// Sets items/s and the time per item. The counter is in seconds (an inverted rate), which the
// console prints with an SI prefix ("34.3ns") and the JSON as a plain number (3.43e-08);
// bench/summary.py reads both this and the older ns-valued counter.
inline void set_items(benchmark::State& st, double items_per_iter) {
  st.SetItemsProcessed(static_cast<int64_t>(st.iterations() * items_per_iter));
  st.counters["ns_per_item"] = benchmark::Counter(
      items_per_iter, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

struct Registrar {
  explicit Registrar(std::function<void()> f) { f(); }
};

}  // namespace pl::bench

#define PL_BENCH_CAT2(a, b) a##b
#define PL_BENCH_CAT(a, b) PL_BENCH_CAT2(a, b)
// PL_BENCHMARKS { ...register_variants(...)... }  runs at start-up of the benchmark binary.
#define PL_BENCHMARKS                                                                       \
  static void PL_BENCH_CAT(pl_bench_fn_, __LINE__)();                                       \
  static pl::bench::Registrar PL_BENCH_CAT(pl_bench_reg_,                                   \
                                           __LINE__)(PL_BENCH_CAT(pl_bench_fn_, __LINE__)); \
  static void PL_BENCH_CAT(pl_bench_fn_, __LINE__)()
