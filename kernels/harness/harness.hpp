// SPDX-License-Identifier: Apache-2.0
// One harness for the per-kernel correctness sweeps and benchmarks, after ggml's
// test-backend-ops: a kernel family registers cases (a kernel, a shape, the inputs, a double
// reference and a tolerance) once, in kernels/<family>/cases_<family>.cc, and
//   - the kernel suite (tests/test_harness.cc) runs every case on every runnable variant and
//     checks every output element against the double reference: |got - ref| <= atol + rtol |ref|;
//   - phaselab_bench (bench/harness_bench.cc) times every case marked for benchmarking on every
//     runnable variant, named "<variant>/<label>", with items/s and the time per item.
// The family's own test file keeps what does not fit one shape (finite differences, aliasing,
// special values, determinism).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "phaselab/kernels.hpp"

namespace pl::test {

// Every variant of `k` that this CPU can run, scalar included.
inline std::vector<const pl::Variant*> runnable(pl::KernelId k) {
  std::vector<const pl::Variant*> out;
  for (const auto& v : pl::variants())
    if (v.kernel == static_cast<int>(k) && v.supported) out.push_back(&v);
  return out;
}

// n floats uniform in [lo, hi), deterministic in seed.
inline std::vector<float> uniform(size_t n, float lo, float hi, uint32_t seed = 1) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

// One output buffer of a case: what the variant wrote, and the double reference it must match.
struct Output {
  std::string name;
  const float* got;
  const double* ref;
  size_t n;
};

// A case with its inputs made: run() calls a variant on them, outputs() lists the outputs next
// to their reference (computed once, in double, when the instance is made).
class Instance {
 public:
  virtual ~Instance() = default;
  virtual void run(const pl::Variant& v) = 0;
  virtual std::vector<Output> outputs() const = 0;
};

struct Case {
  pl::KernelId kernel;
  std::string label;  // the shape: "n:4096", "rows:64,cols:256"
  double atol, rtol;  // |got - ref| <= atol + rtol |ref| per element
  double items;       // work per call for the benchmark's items/s (elements, samples, flops)
  bool bench;         // also benchmarked (the test runs every case)
  std::function<std::unique_ptr<Instance>()> make;
};

inline std::vector<Case>& cases() {
  static std::vector<Case> all;
  return all;
}

// A family's registrations run at start-up: PL_KERNEL_CASES { pl::test::add_case(...); }
inline void add_case(Case c) { cases().push_back(std::move(c)); }

// An Instance from lambdas over one state struct S: make the state, run a variant on it, list
// its outputs. Most families need nothing more.
template <class S, class Run, class Outs>
std::function<std::unique_ptr<Instance>()> instance(std::function<S()> make_state, Run run,
                                                    Outs outs) {
  struct Impl : Instance {
    S s;
    Run r;
    Outs o;
    Impl(S st, Run rr, Outs oo) : s(std::move(st)), r(rr), o(oo) {}
    void run(const pl::Variant& v) override { r(s, v); }
    std::vector<Output> outputs() const override { return o(s); }
  };
  return [make_state, run, outs]() -> std::unique_ptr<Instance> {
    return std::make_unique<Impl>(make_state(), run, outs);
  };
}

struct CaseRegistrar {
  explicit CaseRegistrar(void (*f)()) { f(); }
};

}  // namespace pl::test

#define PL_CASES_CAT2(a, b) a##b
#define PL_CASES_CAT(a, b) PL_CASES_CAT2(a, b)
#define PL_KERNEL_CASES                                               \
  static void PL_CASES_CAT(pl_cases_fn_, __LINE__)();                 \
  static const pl::test::CaseRegistrar PL_CASES_CAT(                  \
      pl_cases_reg_, __LINE__)(PL_CASES_CAT(pl_cases_fn_, __LINE__)); \
  static void PL_CASES_CAT(pl_cases_fn_, __LINE__)()
