// SPDX-License-Identifier: Apache-2.0
// The harness's correctness sweep: every test case (kernels/*/cases_*.cc) on every runnable
// variant of its kernel, every output against the case's double reference.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "kernels/harness/harness.hpp"
#include "tests/support.hpp"

TEST_CASE("harness: every case, every runnable variant vs its double reference") {
  REQUIRE(!pl::test::cases().empty());
  std::map<int, size_t> tested;  // cases per kernel
  size_t skipped = 0;
  const char* mw = std::getenv("PHASELAB_HARNESS_MAX_WORK");
  const double max_work = mw ? std::atof(mw) : 0;
  std::map<int, double> smallest;  // each kernel's smallest test case, which always runs
  for (const auto& c : pl::test::cases()) {
    const double w = std::max(c.work.items, c.work.flops);
    auto [it, fresh] = smallest.emplace(static_cast<int>(c.kernel), w);
    if (!fresh) it->second = std::min(it->second, w);
  }
  for (const auto& c : pl::test::cases()) {
    if (c.use == pl::test::Use::bench) continue;
    // Under emulation and in the sanitizer tree (tests/emulation.hpp) the benchmark shapes above
    // 2^19 items or FLOPs are left to native runs (they were benchmarked only, never tested,
    // before the harness); every test-only case runs (the tails, odd sizes, padded strides and
    // block crossings are test-only cases).
    if ((pl::test::emulated() || pl::test::sanitized()) && c.use == pl::test::Use::test_and_bench &&
        std::max(c.work.items, c.work.flops) > 0x1p19) {
      ++skipped;
      continue;
    }
    // PHASELAB_HARNESS_MAX_WORK=N: only the cases of at most N items or FLOPs (the tails, masks
    // and small shapes) and each kernel's smallest, for a second pass at another vector width
    // under emulation.
    const double work = std::max(c.work.items, c.work.flops);
    if (max_work > 0 && work > max_work && work > smallest[static_cast<int>(c.kernel)]) {
      ++skipped;
      continue;
    }
    const auto vs = pl::test::runnable(c.kernel);
    // The scalar reference and at least one vector variant (PHASELAB_TEST_VARIANTS: those
    // selected, harness.hpp).
    REQUIRE(vs.size() >= (std::getenv("PHASELAB_TEST_VARIANTS") ? 1u : 2u));
    ++tested[static_cast<int>(c.kernel)];
    const auto t0 = std::chrono::steady_clock::now();
    auto inst = c.make(true);
    for (const auto* v : vs) {
      CAPTURE(v->name);
      CAPTURE(c.label);
      inst->reset();
      inst->run(*v);
      for (const auto& o : inst->outputs(*v))
        pl::test::check_output(v->name + "/" + c.label + " " + o.name, o, c.atol, c.rtol);
    }
    // PHASELAB_HARNESS_TIMES=1: each case's seconds (all its variants and its reference) on
    // stderr, to size the emulated and sanitizer runs.
    if (std::getenv("PHASELAB_HARNESS_TIMES"))
      std::fprintf(stderr, "TIME %.4f %s %s %g\n",
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                   pl::kernel_name(static_cast<int>(c.kernel)), c.label.c_str(), work);
  }
  if (skipped)
    MESSAGE(skipped << " cases left out (emulated or sanitized: benchmark-sized; or above "
                       "PHASELAB_HARNESS_MAX_WORK)");
  // Every kernel of kernels.def has its sweep here.
  for (int k = 0; k < pl::kNumKernels; ++k) {
    const std::string name = pl::kernel_name(k);
    CAPTURE(name);
    CHECK(tested[k] > 0);
  }
}
