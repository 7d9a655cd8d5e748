// SPDX-License-Identifier: Apache-2.0
// uniform_bits, gaussian: harness cases (kernels/harness/harness.hpp) against the scalar Philox
// block function of philox.hpp (itself pinned to Random123's known answers in test_random.cc).
// uniform_bits: every word bit for bit, any start (block-aligned, inside a block, where the low
// counter word wraps inside a vector group, far out in the stream) and size. gaussian: Box-Muller
// in long double on the same words, within 6 units of 2^-24 r (r the pair's radius, <= 5.77):
// float variants lose about one float ulp each in log, sqrt, the angle and the sin/cos polynomial
// (hwy measures 2.9 over 4M samples); the scalar reference rounds a double result once, so it
// gets 1 unit (plus the double error). Benchmarks: gaussian n = 4096 and 2^20, uniform_bits 4096.
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/harness/harness.hpp"
#include "kernels/random/philox.hpp"

namespace {

using pl::test::out;
using pl::test::Output;

// Start counters: block-aligned, inside a block, where the low counter word wraps inside a
// vector group (block 2^32 - 3), and far out in the stream.
const uint64_t kCounters[] = {
    0, 1, 3, 4, 6, 4 * 0xFFFFFFFDull + 1, (uint64_t{0x0123456789ABCDEF} & ~uint64_t{3}) + 2};

uint32_t word(uint64_t seed, uint64_t stream, uint64_t t) {
  return pl::philox::stream_block(seed, stream, t / 4)[t % 4];
}

struct Bits {
  std::vector<uint32_t> out;
  std::vector<double> ref;
};

void add_uniform_bits(const std::string& label, size_t n, uint64_t seed, uint64_t stream,
                      uint64_t counter, pl::test::Use use) {
  pl::test::add_case<Bits>(
      {pl::KernelId::uniform_bits, label, 0, 0, {double(n), 0, 4.0 * n}, use},
      [=](bool reference) {
        Bits b{std::vector<uint32_t>(n + 1, 0xA5A5A5A5u), {}};
        for (size_t i = 0; reference && i < n; ++i)
          b.ref.push_back(word(seed, stream, counter + i));
        return b;
      },
      [=](Bits& b, const pl::Variant& v) {
        pl::as<decltype(&pl::scalar::UniformBits)>(v)(b.out.data(), n, seed, stream, counter);
      },
      [n](Bits& b) {
        return std::vector<Output>{out("words", b.out.data(), b.ref.data(), n),
                                   pl::test::holds("guard", b.out[n] == 0xA5A5A5A5u)};
      });
}

struct Gauss {
  std::vector<float> out;
  std::vector<double> z, r;  // the sample and the radius of its Box-Muller pair
};

void add_gaussian(const std::string& label, size_t n, uint64_t seed, uint64_t stream,
                  uint64_t counter, pl::test::Use use) {
  pl::test::add_case<Gauss>(
      {pl::KernelId::gaussian, label, 0, 0, {double(n), 0, 4.0 * n}, use},
      [=](bool reference) {
        Gauss g{std::vector<float>(n + 1, -99.f), {}, {}};
        for (size_t i = 0; reference && i < n; ++i) {
          // Sample k pairs with k ^ 1: words a = k & ~1 and a + 1 of the stream.
          const uint64_t k = counter + i, a = k & ~uint64_t{1};
          const uint32_t wa = word(seed, stream, a), wb = word(seed, stream, a + 1);
          const long double u1 = ((wa >> 8) + 1.0L) / 16777216.0L;
          const long double u2 = (wb >> 8) / 16777216.0L;
          const long double r = std::sqrt(-2.0L * std::log(u1));
          const long double angle = 6.283185307179586476925286766559L * u2;
          g.z.push_back(double(r * ((k & 1) ? std::sin(angle) : std::cos(angle))));
          g.r.push_back(double(r));
        }
        return g;
      },
      [=](Gauss& g, const pl::Variant& v) {
        pl::as<decltype(&pl::scalar::Gaussian)>(v)(g.out.data(), n, seed, stream, counter);
      },
      [n](Gauss& g, const pl::Variant& v) {
        const double units = v.name == "gaussian.scalar" ? 1.0001 : 6.0;
        return std::vector<Output>{
            out("z", g.out.data(), g.z.data(), n).tol(0, units * 0x1p-24).scaled(g.r.data()),
            pl::test::holds("guard", g.out[n] == -99.f)};
      });
}

}  // namespace

PL_KERNEL_CASES {
  for (uint64_t counter : kCounters) {
    for (size_t n : pl::test::sizes_around_widths())
      add_uniform_bits("counter:" + std::to_string(counter) + "/n:" + std::to_string(n), n,
                       0x9E3779B97F4A7C15ull, 0xDEADBEEF00000001ull, counter, pl::test::Use::test);
    for (size_t n : {size_t{1}, size_t{3}, size_t{16}, size_t{63}, size_t{64}, size_t{65},
                     size_t{257}, size_t{40009}})
      add_gaussian("counter:" + std::to_string(counter) + "/n:" + std::to_string(n), n, 12345, 3,
                   counter, pl::test::Use::test);
  }
  // The benchmark shapes.
  for (size_t n : {size_t(4096), size_t(1) << 20})
    add_gaussian("n:" + std::to_string(n), n, 7, 1, 0, pl::test::Use::test_and_bench);
  add_uniform_bits("n:4096", 4096, 7, 1, 0, pl::test::Use::test_and_bench);
}
