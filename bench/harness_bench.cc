// SPDX-License-Identifier: Apache-2.0
// Benchmarks of the harness cases (kernels/*/cases_*.cc): every bench case on every runnable
// variant, named "<variant>/<label>": items/s and the time per item, and GFLOP/s and bytes/s
// where the case gives its FLOPs and bytes. The inputs are made once per benchmark, without a
// reference.
#include "bench/support.hpp"
#include "kernels/harness/harness.hpp"

namespace pl::bench {

// Called from main(): the cases are registered by static initialisers in other translation units,
// whose order against this one's is unspecified.
void register_harness_cases() {
  for (const auto& c : pl::test::cases()) {
    if (c.use == pl::test::Use::test) continue;
    pl::bench::register_variants(c.kernel, c.label,
                                 [&c](benchmark::State& st, const pl::Variant& v) {
                                   auto inst = c.make(false);
                                   for (auto _ : st) {
                                     inst->run(v);
                                     benchmark::ClobberMemory();
                                   }
                                   set_items(st, c.work.items);
                                   if (c.work.flops > 0) set_flops(st, c.work.flops);
                                   if (c.work.bytes > 0) set_bytes(st, c.work.bytes);
                                 });
  }
}

}  // namespace pl::bench
