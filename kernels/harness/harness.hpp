// SPDX-License-Identifier: Apache-2.0
// One harness for the per-kernel correctness sweeps and benchmarks, after ggml's
// test-backend-ops: a kernel family registers cases (a kernel, a shape, the inputs, a double
// reference, a tolerance and the work per call) once, in kernels/<family>/cases_<family>.cc, and
//   - the kernel suite (tests/test_harness.cc) runs every test case on every runnable variant and
//     checks every output element against its reference: |got - ref| <= atol + rtol |ref| (or
//     rtol times the magnitude of the terms where they cancel), bit-identity where the contract
//     fixes the bits, and named conditions (sentinels past the ends, padding kept);
//   - phaselab_bench (bench/harness_bench.cc) times every bench case on every runnable variant,
//     named "<variant>/<label>", with items/s, the time per item and, where the case gives them,
//     GFLOP/s and bytes/s. Bench cases make no reference.
// The family's own test file keeps what does not fit a shape sweep (special values, aliasing,
// splits of a range into calls, statistical tests, thread-count determinism).
// Also the helpers both sides share: runnable variants, deterministic inputs, the sizes around
// the vector widths, the comparison of an output with its reference, start-up registration.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "phaselab/kernels.hpp"

namespace pl::test {

// Every variant of `k` that this CPU can run, scalar included. PHASELAB_TEST_VARIANTS=S keeps
// only those whose name contains S: the second pass of the kernel suite at another SVE vector
// length runs only the vector-length-agnostic variants (".sve": hwy.sve, hwy.sve2), as the
// fixed-width ones (scalar, NEON) compute the same at any length (scripts/test-aarch64.sh).
inline std::vector<const pl::Variant*> runnable(pl::KernelId k) {
  const char* only = std::getenv("PHASELAB_TEST_VARIANTS");
  std::vector<const pl::Variant*> out;
  for (const auto& v : pl::variants())
    if (v.kernel == static_cast<int>(k) && v.supported &&
        (only == nullptr || v.name.find(only) != std::string::npos))
      out.push_back(&v);
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

inline std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }
inline std::vector<float> to_float(const std::vector<double>& v) { return {v.begin(), v.end()}; }

// Sizes at, around and far from every vector width we compile for (4, 8, 16 lanes of float).
inline std::vector<size_t> sizes_around_widths(size_t max_n = 1000) {
  std::vector<size_t> s = {1,  2,  3,  4,   5,   7,   8,   9,   15,  16,  17,  31,  32,  33,  48,
                           63, 64, 65, 100, 127, 128, 129, 255, 256, 257, 511, 512, 513, 1000};
  std::vector<size_t> out;
  for (size_t n : s)
    if (n <= max_n) out.push_back(n);
  return out;
}

// A number for a case label: "0.125", "-3", "1e+30".
inline std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

// |got - ref| <= atol + rtol * |ref|
inline bool close(double got, double ref, double atol, double rtol) {
  return std::fabs(got - ref) <= atol + rtol * std::fabs(ref) && std::isfinite(got);
}

// The central difference (f() at p + h - f() at p - h) / 2h in one parameter p of f, restored
// after: the finite-difference oracle of the backward kernels.
template <class F>
double central_difference(double& p, F f, double h = 1e-4) {
  const double p0 = p;
  p = p0 + h;
  const double fp = f();
  p = p0 - h;
  const double fm = f();
  p = p0;
  return (fp - fm) / (2 * h);
}

// ... in every element of x.
template <class F>
std::vector<double> central_differences(std::vector<double>& x, F f, double h = 1e-4) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) g[i] = central_difference(x[i], f, h);
  return g;
}

// ---------------------------------------------------------------- outputs and their check

// One output of a case after a variant ran: what the variant wrote next to its double
// reference, or a named condition (a sentinel survived, padding was kept).
struct Output {
  enum class Kind { f32, f64, u32, condition };
  std::string name;
  Kind kind = Kind::f32;
  const void* got = nullptr;
  const double* ref = nullptr;
  size_t n = 0;
  double atol = -1, rtol = -1;  // < 0: the case's
  const double* mag = nullptr;  // rtol scales mag[i] (the terms' magnitude) instead of |ref[i]|
  bool exact = false;           // bit-identical to ref converted to the output's type
  bool ok = true;               // Kind::condition

  Output tol(double a, double r) const {
    Output o = *this;
    o.atol = a;
    o.rtol = r;
    return o;
  }
  Output scaled(const double* m) const {
    Output o = *this;
    o.mag = m;
    return o;
  }
  Output bitexact() const {
    Output o = *this;
    o.exact = true;
    return o;
  }
};

inline Output out(std::string name, const float* got, const double* ref, size_t n) {
  return {std::move(name), Output::Kind::f32, got, ref, n};
}
inline Output out(std::string name, const double* got, const double* ref, size_t n) {
  return {std::move(name), Output::Kind::f64, got, ref, n};
}
// Integer outputs are always compared bit for bit.
inline Output out(std::string name, const uint32_t* got, const double* ref, size_t n) {
  Output o{std::move(name), Output::Kind::u32, got, ref, n};
  o.exact = true;
  return o;
}
inline Output holds(std::string name, bool ok) {
  Output o{std::move(name), Output::Kind::condition};
  o.ok = ok;
  return o;
}

// The outcome of comparing one output: how many elements are out of budget and the worst one.
struct Verdict {
  size_t bad = 0, worst = 0;
  double got = 0, ref = 0, tol = 0;
};

inline Verdict compare(const Output& o, double case_atol, double case_rtol) {
  Verdict r;
  if (o.kind == Output::Kind::condition) {
    r.bad = o.ok ? 0 : 1;
    return r;
  }
  const double atol = o.atol < 0 ? case_atol : o.atol, rtol = o.rtol < 0 ? case_rtol : o.rtol;
  double worst_excess = -INFINITY;
  for (size_t i = 0; i < o.n; ++i) {
    double got = 0;
    bool same_bits = false;
    switch (o.kind) {
      case Output::Kind::f32: {
        const float g = static_cast<const float*>(o.got)[i], e = float(o.ref[i]);
        got = g;
        same_bits = std::memcmp(&g, &e, sizeof g) == 0;
        break;
      }
      case Output::Kind::f64: {
        got = static_cast<const double*>(o.got)[i];
        same_bits = std::memcmp(&got, &o.ref[i], sizeof got) == 0;
        break;
      }
      case Output::Kind::u32: {
        const uint32_t g = static_cast<const uint32_t*>(o.got)[i];
        got = g;
        same_bits = double(g) == o.ref[i];
        break;
      }
      case Output::Kind::condition:
        break;
    }
    const double tol = o.exact ? 0 : atol + rtol * (o.mag ? o.mag[i] : std::fabs(o.ref[i]));
    const bool ok = o.exact ? same_bits : std::fabs(got - o.ref[i]) <= tol && std::isfinite(got);
    const double excess = std::isfinite(got) ? std::fabs(got - o.ref[i]) - tol : INFINITY;
    if (!ok) ++r.bad;
    if (!ok && (r.bad == 1 || excess > worst_excess)) {
      worst_excess = excess;
      r.worst = i;
      r.got = got;
      r.ref = o.ref[i];
      r.tol = tol;
    }
  }
  return r;
}

// ---------------------------------------------------------------- cases

// A case with its inputs made: reset() restores them as made (the sweep runs every variant on
// the same inputs, also for kernels that update their outputs in place), run() calls a variant,
// outputs() lists the outputs next to their references.
class Instance {
 public:
  virtual ~Instance() = default;
  virtual void reset() = 0;
  virtual void run(const pl::Variant& v) = 0;
  virtual std::vector<Output> outputs(const pl::Variant& v) = 0;
};

// The work one call does, for the benchmark's rates: items (elements, samples, parameters,
// sequences) always; FLOPs for the compute-bound kernels (GEMM, attention, posattn: GFLOP/s is
// then what bench/summary.py reports) and the bytes read and written (0: not reported).
struct Work {
  double items = 0, flops = 0, bytes = 0;
};

// What a case is for. Shapes too large for a double reference in the suite are bench only;
// every bench-only case has test cases of the same kernel that cover its code paths.
enum class Use { test_and_bench, test, bench };

struct Case {
  pl::KernelId kernel;
  std::string label;  // the shape: "n:4096", "256x64", "nn/m:64/n:64/k:64"
  double atol, rtol;  // default budget of every output: |got - ref| <= atol + rtol |ref|
  Work work;
  Use use;
  // Makes the inputs; with `reference` also the references (the suite), without them for the
  // benchmark. add_case<S>(...) below fills it in.
  std::function<std::unique_ptr<Instance>(bool reference)> make = nullptr;
};

inline std::vector<Case>& cases() {
  static std::vector<Case> all;
  return all;
}

// A family's registrations run at start-up: PL_KERNEL_CASES { pl::test::add_case(...); }
inline void add_case(Case c) { cases().push_back(std::move(c)); }

// An Instance from lambdas over one state struct S: make_state(bool reference) makes the state,
// run(S&, const Variant&) calls a variant on it, outs(S&) or outs(S&, const Variant&) lists its
// outputs (it may gather strided outputs into S first). Most families need nothing more.
template <class S, class Make, class Run, class Outs>
std::function<std::unique_ptr<Instance>(bool)> instance(Make make_state, Run run, Outs outs) {
  struct Impl : Instance {
    std::optional<S> made;  // the inputs as made, kept for reset() in the suite
    S s;
    Run r;
    Outs o;
    Impl(S st, bool keep, Run rr, Outs oo) : s(std::move(st)), r(rr), o(oo) {
      if (keep) made = s;
    }
    void reset() override {
      if (made) s = *made;
    }
    void run(const pl::Variant& v) override { r(s, v); }
    std::vector<Output> outputs(const pl::Variant& v) override {
      if constexpr (std::is_invocable_v<Outs&, S&, const pl::Variant&>)
        return o(s, v);
      else
        return o(s);
    }
  };
  return [make_state, run, outs](bool reference) -> std::unique_ptr<Instance> {
    return std::make_unique<Impl>(make_state(reference), reference, run, outs);
  };
}

// Runs f() during static initialisation (case and benchmark registration).
// Registers case c over one state struct S (see instance()):
//   add_case<State>({kernel, label, atol, rtol, {items, flops, bytes}, use}, make, run, outs);
template <class S, class Make, class Run, class Outs>
void add_case(Case c, Make make_state, Run run, Outs outs) {
  c.make = instance<S>(make_state, run, outs);
  add_case(std::move(c));
}

struct AtStartup {
  explicit AtStartup(void (*f)()) { f(); }
};

}  // namespace pl::test

#define PL_STARTUP_CAT2(a, b) a##b
#define PL_STARTUP_CAT(a, b) PL_STARTUP_CAT2(a, b)
// PL_AT_STARTUP { ... } runs the block at start-up of the binary it is linked into.
#define PL_AT_STARTUP                                                       \
  static void PL_STARTUP_CAT(pl_startup_fn_, __LINE__)();                   \
  static const pl::test::AtStartup PL_STARTUP_CAT(                          \
      pl_startup_reg_, __LINE__)(PL_STARTUP_CAT(pl_startup_fn_, __LINE__)); \
  static void PL_STARTUP_CAT(pl_startup_fn_, __LINE__)()
#define PL_KERNEL_CASES PL_AT_STARTUP
