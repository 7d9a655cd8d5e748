// SPDX-License-Identifier: Apache-2.0
// Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC'11)
// and the Box-Muller map of phaselab's gaussian stream, in plain scalar C++.
//
// Stream layout (kernels.def): key = seed (lo, hi); block j of stream s is Philox of the counter
// (j lo, j hi, s lo, s hi); sample number t of the stream is word t % 4 of block t / 4.
// Gaussian: the words of a block pair up as (0, 1) and (2, 3); a pair (a, b) gives
//   u1 = (a >> 8 + 1) 2^-24 in (0, 1]   (never 0: it goes into the log)
//   u2 = (b >> 8) 2^-24 in [0, 1)
//   (z_a, z_b) = sqrt(-2 ln u1) (cos 2 pi u2, sin 2 pi u2).
// Every variant (scalar, Highway, intrinsics, xsimd) produces bit-identical uniform words.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace pl::philox {

constexpr uint32_t kM0 = 0xD2511F53u;  // round multipliers
constexpr uint32_t kM1 = 0xCD9E8D57u;
constexpr uint32_t kW0 = 0x9E3779B9u;  // key schedule increments (golden ratio, sqrt(3) - 1)
constexpr uint32_t kW1 = 0xBB67AE85u;
constexpr int kRounds = 10;

using Block = std::array<uint32_t, 4>;

// One Philox4x32-10 evaluation: counter c, key (k0, k1).
inline Block philox4x32_10(Block c, uint32_t k0, uint32_t k1) {
  for (int r = 0; r < kRounds; ++r) {
    const uint64_t p0 = uint64_t{kM0} * c[0];
    const uint64_t p1 = uint64_t{kM1} * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k0, uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k1,
         uint32_t(p0)};
    k0 += kW0;  // the key is bumped between rounds
    k1 += kW1;
  }
  return c;
}

// Block j of the stream (seed, stream).
inline Block stream_block(uint64_t seed, uint64_t stream, uint64_t j) {
  return philox4x32_10({uint32_t(j), uint32_t(j >> 32), uint32_t(stream), uint32_t(stream >> 32)},
                       uint32_t(seed), uint32_t(seed >> 32));
}

// The two Box-Muller outputs of the word pair (a, b), in double (the reference).
inline void box_muller(uint32_t a, uint32_t b, double* za, double* zb) {
  const double u1 = double((a >> 8) + 1u) * 0x1p-24;
  const double u2 = double(b >> 8) * 0x1p-24;
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double theta = 6.283185307179586476925 * u2;
  *za = r * std::cos(theta);
  *zb = r * std::sin(theta);
}

// Walks the samples counter, counter + 1, ... of a stream block by block, so that each block is
// generated once: f(i, block, lane) for i in [0, n), sample counter + i = block[lane].
template <typename F>
inline void for_each_sample(size_t n, uint64_t seed, uint64_t stream, uint64_t counter, F f) {
  size_t i = 0;
  while (i < n) {
    const uint64_t t = counter + i;
    const Block b = stream_block(seed, stream, t / 4);
    for (unsigned lane = unsigned(t % 4); lane < 4 && i < n; ++lane, ++i) f(i, b, lane);
  }
}

// The vector variants' loop: visits samples counter .. counter + n - 1 group by group, a group
// being the g samples of g / 4 consecutive blocks in sample order. Groups that start on a block
// boundary and fit are written straight to out + i by group(j, out + i) (j its first block);
// partial ones (a start inside a block, the tail) go through buf (g elements) and are copied.
// Either way each sample comes from the same group function, wherever a call starts or ends.
template <typename T, class Group>
inline __attribute__((always_inline)) void fill_groups(T* out, size_t n, uint64_t counter, size_t g,
                                                       T* buf, Group group) {
  size_t i = 0;
  while (i < n) {
    const uint64_t t = counter + i;
    const size_t lane = static_cast<size_t>(t % 4);
    if (lane == 0 && n - i >= g) {
      group(t / 4, out + i);
      i += g;
      continue;
    }
    group(t / 4, buf);
    const size_t take = std::min(g - lane, n - i);
    std::memcpy(out + i, buf + lane, take * sizeof(T));
    i += take;
  }
}

// Gaussian sample (double) for lane `lane` of block b.
inline double gaussian_of(const Block& b, unsigned lane) {
  double z0, z1;
  const unsigned pair = lane & 2u;
  box_muller(b[pair], b[pair + 1], &z0, &z1);
  return (lane & 1u) ? z1 : z0;
}

}  // namespace pl::philox
