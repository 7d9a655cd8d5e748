// SPDX-License-Identifier: Apache-2.0
// Benchmarks of the harness cases (kernels/*/cases_*.cc): every case marked for benchmarking,
// on every runnable variant, named "<variant>/<label>", items/s and the time per item.
#include "bench/support.hpp"
#include "kernels/harness/harness.hpp"

namespace pl::bench {

// Called from main(): the cases are registered by static initialisers in other translation units,
// whose order against this one's is unspecified.
void register_harness_cases() {
  for (const auto& c : pl::test::cases()) {
    if (!c.bench) continue;
    pl::bench::register_variants(c.kernel, c.label,
                                 [&c](benchmark::State& st, const pl::Variant& v) {
                                   auto inst = c.make();
                                   for (auto _ : st) {
                                     inst->run(v);
                                     benchmark::ClobberMemory();
                                   }
                                   pl::bench::set_items(st, c.items);
                                 });
  }
}

}  // namespace pl::bench
