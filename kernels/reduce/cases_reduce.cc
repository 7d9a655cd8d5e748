// SPDX-License-Identifier: Apache-2.0
// sum, dot, max: harness cases (kernels/harness/harness.hpp). kernels.def fixes the order of the
// reductions (16 interleaved double accumulators, element i to i mod 16, folded j + 8, j + 4,
// j + 2, j + 1), so the reference is that order written out here, and every variant must give its
// bits; the values span ~80 binary orders of magnitude with both signs, so any other order
// rounds differently. That order is also checked against a compensated long double oracle:
// summing n terms in double in any order errs by at most (n - 1) 2^-53 sum |t_i| (the dot's
// products are exact in double). Sizes around every vector width and the 16-accumulator block,
// long ones, unaligned starts. max: the largest element, bit for bit. Benchmarks: n = 4096.
#include <algorithm>
#include <cmath>
#include <random>

#include "kernels/harness/harness.hpp"

namespace {

using pl::test::out;
using pl::test::Output;

// Values over ~80 binary orders of magnitude with both signs.
std::vector<float> wide_range(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::uniform_int_distribution<int> e(-40, 40);
  std::vector<float> v(n);
  for (auto& x : v) x = std::ldexp(u(g), e(g));
  return v;
}

// Kahan-Babuska (Neumaier) summation in long double: the oracle, far more accurate than the
// kernels' double accumulation.
template <typename F>
long double compensated(size_t n, F term) {
  long double s = 0, c = 0;
  for (size_t i = 0; i < n; ++i) {
    const long double t = term(i), u = s + t;
    c += std::fabs(s) >= std::fabs(t) ? (s - u) + t : (t - u) + s;
    s = u;
  }
  return s + c;
}

// kernels.def's order: accumulators i mod 16, then the halving tree.
template <typename F>
double fixed_order(size_t n, F term) {
  double acc[16] = {};
  for (size_t i = 0; i < n; ++i) acc[i % 16] += term(i);
  for (size_t w = 8; w >= 1; w /= 2)
    for (size_t j = 0; j < w; ++j) acc[j] += acc[j + w];
  return acc[0];
}

struct Red {
  std::vector<float> x, y;  // the inputs start at off
  size_t off, n;
  double got = 0;
  float got_max = 0;
  double ref = 0, oracle = 0, bound = 0;
  bool order_sensitive = true;  // a left-to-right double sum of the data differs from ref
};

const std::vector<float>& wide_x() {
  static const auto v = wide_range(100003 + 3, 1);
  return v;
}
const std::vector<float>& wide_y() {
  static const auto v = wide_range(100003 + 3, 2);
  return v;
}

void add_sum_dot(const std::string& label, bool dot, size_t off, size_t n, bool wide,
                 pl::test::Use use) {
  pl::test::add_case<Red>(
      {dot ? pl::KernelId::dot : pl::KernelId::sum,
       label,
       0,
       0,
       {double(n), 0, (dot ? 8.0 : 4.0) * n},
       use},
      [=](bool reference) {
        Red r;
        r.off = off;
        r.n = n;
        if (wide) {
          r.x.assign(wide_x().begin(), wide_x().begin() + long(off + n));
          if (dot) r.y.assign(wide_y().begin(), wide_y().begin() + long(off + n));
        } else {
          r.x = pl::test::uniform(off + n, -1.f, 1.f, 1);
          if (dot) r.y = pl::test::uniform(off + n, -1.f, 1.f, 2);
        }
        if (!reference) return r;
        const float* x = r.x.data() + off;
        const float* y = dot ? r.y.data() + off : nullptr;
        if (dot) {
          r.ref = fixed_order(n, [&](size_t i) { return double(x[i]) * y[i]; });
          r.oracle = double(
              compensated(n, [&](size_t i) { return (long double)x[i] * (long double)y[i]; }));
          r.bound = double((n + 1) * 0x1p-53 * compensated(n, [&](size_t i) {
                             return std::fabs((long double)x[i] * y[i]);
                           }));
        } else {
          r.ref = fixed_order(n, [&](size_t i) { return double(x[i]); });
          if (n == 100003) {  // shows that bit-identity with the order means something
            double naive = 0;
            for (size_t i = 0; i < n; ++i) naive += x[i];
            r.order_sensitive = naive != r.ref;
          }
          r.oracle = double(compensated(n, [&](size_t i) { return (long double)x[i]; }));
          r.bound = double((n + 1) * 0x1p-53 *
                           compensated(n, [&](size_t i) { return std::fabs((long double)x[i]); }));
        }
        return r;
      },
      [dot](Red& r, const pl::Variant& v) {
        r.got =
            dot ? pl::as<decltype(&pl::scalar::Dot)>(v)(r.x.data() + r.off, r.y.data() + r.off, r.n)
                : pl::as<decltype(&pl::scalar::Sum)>(v)(r.x.data() + r.off, r.n);
      },
      [](Red& r) {
        return std::vector<Output>{
            out("in kernels.def's order", &r.got, &r.ref, 1).bitexact(),
            out("vs compensated sum", &r.got, &r.oracle, 1).tol(r.bound, 0),
            pl::test::holds("the data is order-sensitive", r.order_sensitive)};
      });
}

void add_max(const std::string& label, size_t n, bool wide, pl::test::Use use) {
  pl::test::add_case<Red>(
      {pl::KernelId::max, label, 0, 0, {double(n), 0, 4.0 * n}, use},
      [=](bool reference) {
        Red r;
        r.off = 0;
        r.n = n;
        r.x = wide ? wide_range(n, 7 + uint32_t(n)) : pl::test::uniform(n, -1.f, 1.f, 1);
        if (reference) r.ref = *std::max_element(r.x.begin(), r.x.end());
        return r;
      },
      [](Red& r, const pl::Variant& v) {
        r.got_max = pl::as<decltype(&pl::scalar::Max)>(v)(r.x.data(), r.n);
      },
      [](Red& r) { return std::vector<Output>{out("max", &r.got_max, &r.ref, 1).bitexact()}; });
}

}  // namespace

PL_KERNEL_CASES {
  // Sizes: around every vector width and the 16-accumulator block, plus long ones.
  auto sizes = pl::test::sizes_around_widths();
  for (size_t n : {size_t{0}, size_t{47}, size_t{49}, size_t{4096}, size_t{100003}})
    sizes.push_back(n);
  for (size_t off : {size_t{0}, size_t{1}, size_t{3}})  // unaligned starts
    for (size_t n : sizes) {
      const std::string label = "wide/off:" + std::to_string(off) + "/n:" + std::to_string(n);
      add_sum_dot(label, false, off, n, true, pl::test::Use::test);
      add_sum_dot(label, true, off, n, true, pl::test::Use::test);
    }
  for (size_t n : sizes)
    if (n > 0) add_max("wide/n:" + std::to_string(n), n, true, pl::test::Use::test);
  add_sum_dot("n:4096", false, 0, 4096, false, pl::test::Use::test_and_bench);
  add_sum_dot("n:4096", true, 0, 4096, false, pl::test::Use::test_and_bench);
  add_max("n:4096", 4096, false, pl::test::Use::test_and_bench);
}
