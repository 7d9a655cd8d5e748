// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/random/philox.hpp"
#include "tests/support.hpp"

using pl::test::runnable;
using GaussianFn = decltype(&pl::scalar::Gaussian);
using UniformFn = decltype(&pl::scalar::UniformBits);

namespace {

// Start counters: block-aligned, inside a block, where the low counter word wraps inside a
// vector group (block 2^32 - 3), and far out in the stream.
const uint64_t kCounters[] = {
    0, 1, 3, 4, 6, 4 * 0xFFFFFFFDull + 1, (uint64_t{0x0123456789ABCDEF} & ~uint64_t{3}) + 2};

// z (and the radius r) for the word pair (a, b), written out here again in long double as an
// oracle independent of the library's helpers.
void box_muller_oracle(uint32_t a, uint32_t b, double* za, double* zb, double* r_out) {
  const long double u1 = ((a >> 8) + 1.0L) / 16777216.0L;
  const long double u2 = (b >> 8) / 16777216.0L;
  const long double r = std::sqrt(-2.0L * std::log(u1));
  const long double two_pi = 6.283185307179586476925286766559L;
  *za = static_cast<double>(r * std::cos(two_pi * u2));
  *zb = static_cast<double>(r * std::sin(two_pi * u2));
  *r_out = static_cast<double>(r);
}

struct Oracle {
  std::vector<double> z, r;  // sample and the radius of its Box-Muller pair
};

Oracle gaussian_oracle(size_t n, uint64_t seed, uint64_t stream, uint64_t counter) {
  // The uniform words of samples counter - counter % 4 ... rounded out to whole blocks.
  const uint64_t first = counter - counter % 4;
  const size_t words = static_cast<size_t>(((counter + n + 3) / 4) * 4 - first);
  std::vector<uint32_t> u(words);
  pl::scalar::UniformBits(u.data(), words, seed, stream, first);
  std::vector<double> z(words), r(words);
  for (size_t k = 0; k < words; k += 2) {
    box_muller_oracle(u[k], u[k + 1], &z[k], &z[k + 1], &r[k]);
    r[k + 1] = r[k];
  }
  const size_t off = static_cast<size_t>(counter - first);
  return {std::vector<double>(z.begin() + off, z.begin() + off + n),
          std::vector<double>(r.begin() + off, r.begin() + off + n)};
}

}  // namespace

TEST_CASE("philox: Random123 known-answer vectors (kat_vectors, philox4x32 10)") {
  using pl::philox::philox4x32_10;
  using B = pl::philox::Block;
  CHECK(philox4x32_10(B{0, 0, 0, 0}, 0, 0) ==
        B{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
  CHECK(philox4x32_10(B{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, 0xffffffffu,
                      0xffffffffu) == B{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
  CHECK(philox4x32_10(B{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, 0xa4093822u,
                      0x299f31d0u) == B{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u});

  // The same vectors through the kernels' stream layout (key = seed, counter = (j, stream)).
  // The second and third have block numbers >= 2^62, beyond a 64-bit sample counter, so they are
  // reached through stream_block; the first goes through every uniform_bits variant.
  CHECK(pl::philox::stream_block(~0ull, ~0ull, ~0ull) ==
        B{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
  CHECK(pl::philox::stream_block(0x299f31d0a4093822ull, 0x0370734413198a2eull,
                                 0x85a308d3243f6a88ull) ==
        B{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u});
  for (const auto* v : runnable(pl::KernelId::uniform_bits)) {
    CAPTURE(v->name);
    uint32_t out[5] = {0, 0, 0, 0, 7};
    pl::as<UniformFn> (*v)(out, 4, 0, 0, 0);
    CHECK(out[0] == 0x6627e8d5u);
    CHECK(out[1] == 0xe169c58du);
    CHECK(out[2] == 0xbc57ac4cu);
    CHECK(out[3] == 0x9b00dbd8u);
    CHECK(out[4] == 7u);
  }
}

TEST_CASE("uniform_bits: every variant bit-identical to the scalar stream for any start and size") {
  const auto variants = runnable(pl::KernelId::uniform_bits);
  REQUIRE(variants.size() >= 2);
  for (uint64_t counter : kCounters) {
    for (size_t n : pl::test::sizes_around_widths()) {
      CAPTURE(counter);
      CAPTURE(n);
      // Reference: sample t is word t % 4 of block t / 4, straight from the block function.
      std::vector<uint32_t> ref(n);
      for (size_t i = 0; i < n; ++i) {
        const uint64_t t = counter + i;
        ref[i] =
            pl::philox::stream_block(0x9E3779B97F4A7C15ull, 0xDEADBEEF00000001ull, t / 4)[t % 4];
      }
      for (const auto* v : variants) {
        CAPTURE(v->name);
        std::vector<uint32_t> out(n + 1, 0xA5A5A5A5u);
        pl::as<UniformFn> (*v)(out.data(), n, 0x9E3779B97F4A7C15ull, 0xDEADBEEF00000001ull,
                               counter);
        CHECK(std::equal(ref.begin(), ref.end(), out.begin()));
        CHECK(out[n] == 0xA5A5A5A5u);
      }
    }
  }
}

TEST_CASE("random: any split of a range into calls gives the same bits (every variant)") {
  const size_t n = 1500;
  const uint64_t seed = 42, stream = 7, counter = 4 * 0xFFFFFFF0ull + 3;
  // Split points: every length from 1 to 70 in a fixed pseudo-random sequence.
  std::vector<size_t> cuts;
  for (size_t at = 0, k = 1; at < n; at += (k * 37) % 70 + 1, ++k) cuts.push_back(at);
  cuts.push_back(n);
  for (const auto* v : runnable(pl::KernelId::uniform_bits)) {
    CAPTURE(v->name);
    auto fn = pl::as<UniformFn>(*v);
    std::vector<uint32_t> whole(n), parts(n);
    fn(whole.data(), n, seed, stream, counter);
    for (size_t c = 0; c + 1 < cuts.size(); ++c)
      fn(parts.data() + cuts[c], cuts[c + 1] - cuts[c], seed, stream, counter + cuts[c]);
    CHECK(whole == parts);
  }
  for (const auto* v : runnable(pl::KernelId::gaussian)) {
    CAPTURE(v->name);
    auto fn = pl::as<GaussianFn>(*v);
    std::vector<float> whole(n), parts(n);
    fn(whole.data(), n, seed, stream, counter);
    for (size_t c = 0; c + 1 < cuts.size(); ++c)
      fn(parts.data() + cuts[c], cuts[c + 1] - cuts[c], seed, stream, counter + cuts[c]);
    CHECK(std::memcmp(whole.data(), parts.data(), n * sizeof(float)) == 0);
  }
}

TEST_CASE("gaussian: every variant matches Box-Muller in long double on the same uniform words") {
  // Budget, in units of 2^-24 r (r = the pair's radius, <= sqrt(2 ln 2^24) = 5.77): the scalar
  // reference rounds a double result once, so |err| <= 2^-24 |z| <= 2^-24 r (1 unit, plus the
  // double error); float variants lose about one float ulp each in log, sqrt, the angle and the
  // sin/cos polynomial: 6 units (hwy measures 2.9 over 4M samples).
  for (const auto* v : runnable(pl::KernelId::gaussian)) {
    CAPTURE(v->name);
    const double units = v->name == "gaussian.scalar" ? 1.0001 : 6.0;
    for (uint64_t counter : kCounters) {
      for (size_t n : {size_t{1}, size_t{3}, size_t{16}, size_t{63}, size_t{64}, size_t{65},
                       size_t{257}, size_t{40009}}) {
        CAPTURE(counter);
        CAPTURE(n);
        const auto ref = gaussian_oracle(n, 12345, 3, counter);
        std::vector<float> out(n + 1, -99.f);
        pl::as<GaussianFn> (*v)(out.data(), n, 12345, 3, counter);
        double worst = 0;
        size_t at = 0;
        for (size_t i = 0; i < n; ++i) {
          const double e = std::fabs(out[i] - ref.z[i]) / (0x1p-24 * ref.r[i] + 1e-300);
          if (!(e <= worst)) {
            worst = e;
            at = i;
          }
        }
        INFO("worst " << worst << " units of 2^-24 r at " << at << ": " << out[at] << " vs "
                      << ref.z[at]);
        CHECK(worst <= units);
        CHECK(out[n] == -99.f);
      }
    }
  }
}

TEST_CASE("gaussian: moments, Kolmogorov-Smirnov and correlations at 1e6 samples") {
  // Under emulation 1e5 samples per variant: the long double sums below are software
  // floating point on aarch64 and took minutes per variant under qemu. Every bound is in
  // standard errors at the sample size n (and the KS bound is in sqrt(n) D), so each check
  // stays a 5-sigma (KS: p ~ 6e-7) test at the smaller n.
  const size_t n = pl::test::native_or_emulated<size_t>(1000000, 100000);
  CAPTURE(n);
  const double sn = std::sqrt(double(n));
  for (const auto* v : runnable(pl::KernelId::gaussian)) {
    CAPTURE(v->name);
    auto fn = pl::as<GaussianFn>(*v);
    std::vector<float> z(n), w(n);
    fn(z.data(), n, 2024, 0, 0);
    fn(w.data(), n, 2024, 1, 0);  // the next stream of the same seed
    // Central moments in long double. Standard errors for N(0, 1) at sample size n:
    // mean 1/sqrt(n), variance sqrt(2/n), skewness sqrt(6/n), excess kurtosis sqrt(24/n);
    // each is checked within 5 standard errors.
    long double s1 = 0, s2 = 0, s3 = 0, s4 = 0;
    for (float x : z) {
      const long double d = x;
      s1 += d;
      s2 += d * d;
      s3 += d * d * d;
      s4 += d * d * d * d;
    }
    const double mean = double(s1 / n);
    const double m2 = double(s2 / n) - mean * mean;
    const double m3 = double(s3 / n) - 3 * mean * double(s2 / n) + 2 * mean * mean * mean;
    const double m4 = double(s4 / n) - 4 * mean * double(s3 / n) +
                      6 * mean * mean * double(s2 / n) - 3 * mean * mean * mean * mean;
    const double skew = m3 / std::pow(m2, 1.5), exkurt = m4 / (m2 * m2) - 3;
    INFO("mean " << mean << " var " << m2 << " skew " << skew << " excess kurtosis " << exkurt);
    CHECK(std::fabs(mean) < 5 / sn);
    CHECK(std::fabs(m2 - 1) < 5 * std::sqrt(2.0) / sn);
    CHECK(std::fabs(skew) < 5 * std::sqrt(6.0) / sn);
    CHECK(std::fabs(exkurt) < 5 * std::sqrt(24.0) / sn);

    // Kolmogorov-Smirnov against Phi: P(sqrt(n) D > x) ~ 2 exp(-2 x^2); x = 2.74 is p ~ 6e-7.
    std::vector<float> sorted = z;
    std::sort(sorted.begin(), sorted.end());
    double d = 0;
    for (size_t i = 0; i < n; ++i) {
      const double cdf = 0.5 * std::erfc(-double(sorted[i]) / std::sqrt(2.0));
      d = std::max({d, std::fabs(cdf - double(i) / n), std::fabs(double(i + 1) / n - cdf)});
    }
    INFO("KS sqrt(n) D = " << d * sn);
    CHECK(d * sn < 2.74);

    // Correlations: between the two streams, and between samples 1, 2, 4 apart (the lag-1
    // pairs include the two outputs of one Box-Muller pair: dependent but uncorrelated).
    // Each is within 5 standard errors (1/sqrt(n)) of 0.
    auto corr = [&](const std::vector<float>& a, const std::vector<float>& b, size_t lag) {
      long double sab = 0, sa = 0, sb = 0, saa = 0, sbb = 0;
      const size_t m = n - lag;
      for (size_t i = 0; i < m; ++i) {
        const long double x = a[i], y = b[i + lag];
        sa += x;
        sb += y;
        sab += x * y;
        saa += x * x;
        sbb += y * y;
      }
      const long double cov = sab / m - (sa / m) * (sb / m);
      return double(cov /
                    std::sqrt((saa / m - (sa / m) * (sa / m)) * (sbb / m - (sb / m) * (sb / m))));
    };
    CHECK(std::fabs(corr(z, w, 0)) < 5 / sn);
    CHECK(std::fabs(corr(z, z, 1)) < 5 / sn);
    CHECK(std::fabs(corr(z, z, 2)) < 5 / sn);
    CHECK(std::fabs(corr(z, z, 4)) < 5 / sn);
    // Squares of the pair partners are correlated if the radius is shared wrongly: for
    // independent normals corr(z0^2, z1^2) = 0.
    std::vector<float> sq0(n / 2), sq1(n / 2);
    for (size_t k = 0; k + 1 < n; k += 2) {
      sq0[k / 2] = z[k] * z[k];
      sq1[k / 2] = z[k + 1] * z[k + 1];
    }
    const double r_sq = [&] {
      long double sab = 0, sa = 0, sb = 0, saa = 0, sbb = 0;
      const size_t m = n / 2;
      for (size_t i = 0; i < m; ++i) {
        sa += sq0[i];
        sb += sq1[i];
        sab += (long double)sq0[i] * sq1[i];
        saa += (long double)sq0[i] * sq0[i];
        sbb += (long double)sq1[i] * sq1[i];
      }
      const long double cov = sab / m - (sa / m) * (sb / m);
      return double(cov /
                    std::sqrt((saa / m - (sa / m) * (sa / m)) * (sbb / m - (sb / m) * (sb / m))));
    }();
    CHECK(std::fabs(r_sq) < 5 / std::sqrt(n / 2.0));
  }
}

TEST_CASE("uniform_bits: every bit is fair and the words of different seeds are independent") {
  // 2^20 words: each of the 32 bits is set with frequency 1/2 within 5 standard errors
  // (0.5 / sqrt(n)); the xor of the streams of two seeds is equally fair.
  const size_t n = size_t{1} << 20;
  std::vector<uint32_t> a(n), b(n);
  pl::scalar::UniformBits(a.data(), n, 1, 0, 0);
  pl::scalar::UniformBits(b.data(), n, 2, 0, 0);
  for (int bit = 0; bit < 32; ++bit) {
    CAPTURE(bit);
    size_t ca = 0, cx = 0;
    for (size_t i = 0; i < n; ++i) {
      ca += (a[i] >> bit) & 1u;
      cx += ((a[i] ^ b[i]) >> bit) & 1u;
    }
    CHECK(std::fabs(double(ca) / n - 0.5) < 5 * 0.5 / std::sqrt(double(n)));
    CHECK(std::fabs(double(cx) / n - 0.5) < 5 * 0.5 / std::sqrt(double(n)));
  }
}
