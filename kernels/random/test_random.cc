// SPDX-License-Identifier: Apache-2.0
// uniform_bits, gaussian: what is not a shape sweep. The sweeps (every word bit for bit against
// philox.hpp's block function, every sample against Box-Muller in long double) are harness cases
// in cases_random.cc; here: Random123's known answers, splits of a range into calls, and the
// statistical tests (moments, Kolmogorov-Smirnov, correlations, fair bits).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/random/philox.hpp"
#include "tests/support.hpp"

using pl::test::runnable;
using GaussianFn = decltype(&pl::scalar::Gaussian);
using UniformFn = decltype(&pl::scalar::UniformBits);

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
