// SPDX-License-Identifier: Apache-2.0
// Markov-chain data: counter-based random streams, gamma and Dirichlet variates, transition
// matrices with their stationary distributions (double precision), sequence sampling.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "phaselab/kernel_table.h"

namespace pl::markov {

// A stream of 32-bit words (seed, stream, counter...) from the table's uniform_bits (Philox),
// buffered; uniforms, normals and gamma variates in double on top of it.
class Rng {
 public:
  Rng(const pl_kernel_table& k, uint64_t seed, uint64_t stream)
      : k_(&k), seed_(seed), stream_(stream) {}
  uint32_t word() {
    if (pos_ == kBuf) refill();
    return buf_[pos_++];
  }
  // Uniform on (0, 1) with 53 random bits.
  double uniform() {
    const uint64_t a = word() >> 5, b = word() >> 6;  // 27 + 26 bits
    return (double((a << 26) | b) + 0.5) * (1.0 / 9007199254740992.0);
  }
  // Uniform integer in [0, n) (multiply-shift; bias < n / 2^64).
  uint64_t below(uint64_t n) {
    const uint64_t w = (uint64_t(word()) << 32) | word();
    return uint64_t((static_cast<unsigned __int128>(w) * n) >> 64);
  }
  double normal() {  // Box-Muller, one value per call (the other is dropped: simpler, still exact)
    const double u1 = uniform(), u2 = uniform();
    return std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  // Gamma(a, 1): Marsaglia & Tsang (2000) for a >= 1; boost a < 1 by Gamma(a + 1) U^(1/a).
  double gamma(double a) {
    if (a < 1) return gamma(a + 1) * std::pow(uniform(), 1 / a);
    const double d = a - 1.0 / 3, c = 1 / std::sqrt(9 * d);
    for (;;) {
      double x, v;
      do {
        x = normal();
        v = 1 + c * x;
      } while (v <= 0);
      v = v * v * v;
      const double u = uniform();
      if (u < 1 - 0.0331 * x * x * x * x) return d * v;
      if (std::log(u) < 0.5 * x * x + d * (1 - v + std::log(v))) return d * v;
    }
  }
  // One Dirichlet(alpha 1_C) row into out[0..C). The variates are also kept as logarithms: at a
  // tiny alpha (1e-300) every Gamma(alpha) = Gamma(alpha + 1) U^(1/alpha) underflows to 0 and the
  // row would be 0/0 (NaN); it is then normalised in log space (nearly one-hot, as the Dirichlet
  // is). Otherwise the row is the plain ratio, bit for bit as before.
  void dirichlet(double alpha, int C, double* out) {
    double s = 0;
    double small[64];
    std::vector<double> large;
    double* logs = C <= 64 ? small : (large.resize(size_t(C)), large.data());
    if (!(alpha < 1)) {  // (a huge alpha could overflow the sum)
      for (int j = 0; j < C; ++j) {
        s += (out[j] = gamma(alpha));
        logs[j] = std::log(out[j]);
      }
    } else {
      for (int j = 0; j < C; ++j) {
        const double g = gamma(alpha + 1), u = uniform();
        s += (out[j] = g * std::pow(u, 1 / alpha));
        logs[j] = std::log(g) + std::log(u) / alpha;
      }
    }
    if (s > 0 && std::isfinite(s)) {
      for (int j = 0; j < C; ++j) out[j] /= s;
      return;
    }
    const double top = *std::max_element(logs, logs + C);
    s = 0;
    for (int j = 0; j < C; ++j) s += (out[j] = std::exp(logs[j] - top));
    for (int j = 0; j < C; ++j) out[j] /= s;
  }

 private:
  void refill() {
    k_->uniform_bits(buf_, kBuf, seed_, stream_, counter_);
    counter_ += kBuf;
    pos_ = 0;
  }
  static constexpr size_t kBuf = 64;
  const pl_kernel_table* k_;
  uint64_t seed_, stream_, counter_ = 0;
  uint32_t buf_[kBuf];
  size_t pos_ = kBuf;
};

// Stationary distribution of a row-stochastic C x C matrix T: solve pi (T - I) = 0 with
// sum(pi) = 1 by Gaussian elimination with partial pivoting (double), then two power steps.
inline void stationary(const double* T, int C, double* pi) {
  std::vector<double> A(size_t(C) * (C + 1));  // rows: equations, last column: rhs
  auto a = [&](int r, int c) -> double& { return A[size_t(r) * (C + 1) + c]; };
  for (int r = 0; r < C; ++r)  // equation r: sum_i pi_i (T[i, r] - delta_ir) = 0
    for (int i = 0; i < C; ++i) a(r, i) = T[i * C + r] - (i == r ? 1.0 : 0.0);
  for (int i = 0; i < C; ++i) a(C - 1, i) = 1.0;  // replace the last (redundant) one by sum = 1
  for (int r = 0; r < C; ++r) a(r, C) = r == C - 1 ? 1.0 : 0.0;
  for (int col = 0; col < C; ++col) {
    int piv = col;
    for (int r = col + 1; r < C; ++r)
      if (std::fabs(a(r, col)) > std::fabs(a(piv, col))) piv = r;
    if (piv != col)
      for (int c = 0; c <= C; ++c) std::swap(a(col, c), a(piv, c));
    for (int r = 0; r < C; ++r) {
      if (r == col || a(r, col) == 0) continue;
      const double f = a(r, col) / a(col, col);
      for (int c = col; c <= C; ++c) a(r, c) -= f * a(col, c);
    }
  }
  for (int i = 0; i < C; ++i) pi[i] = a(i, C) / a(i, i);
  std::vector<double> nx(C);
  for (int it = 0; it < 2; ++it) {  // polish: pi <- pi T, renormalise
    double s = 0;
    for (int j = 0; j < C; ++j) {
      double v = 0;
      for (int i = 0; i < C; ++i) v += pi[i] * T[i * C + j];
      s += (nx[j] = std::fmax(v, 0.0));
    }
    for (int j = 0; j < C; ++j) pi[j] = nx[j] / s;
  }
}

// A set of chains: T (K x C x C), pi (K x C) and their logs / cumulative rows for sampling.
struct Chains {
  int C = 0, K = 0;
  std::vector<double> T, pi, logT, logpi, cdfT, cdfpi;
  const double* t(int k) const { return T.data() + size_t(k) * C * C; }
  const double* p(int k) const { return pi.data() + size_t(k) * C; }

  void resize(int K_, int C_) {
    K = K_;
    C = C_;
    T.assign(size_t(K) * C * C, 0);
    logT = cdfT = T;
    pi.assign(size_t(K) * C, 0);
    logpi = cdfpi = pi;
  }
  // Chain k from its own stream (seed, stream_base + k): the first K chains do not depend on K.
  void generate(const pl_kernel_table& kt, uint64_t seed, uint64_t stream_base, double alpha) {
    for (int k = 0; k < K; ++k) {
      Rng r(kt, seed, stream_base + uint64_t(k));
      make(k, r, alpha);
    }
  }
  void make(int k, Rng& r, double alpha) {
    double* Tk = T.data() + size_t(k) * C * C;
    for (int i = 0; i < C; ++i) r.dirichlet(alpha, C, Tk + i * C);
    derive(k);
  }
  void derive(int k) {
    const double* Tk = t(k);
    double* pk = pi.data() + size_t(k) * C;
    stationary(Tk, C, pk);
    for (int i = 0; i < C; ++i) {
      double s = 0;
      for (int j = 0; j < C; ++j) {
        const size_t o = size_t(k) * C * C + size_t(i) * C + j;
        logT[o] = std::log(std::fmax(T[o], 1e-300));
        cdfT[o] = (s += T[o]);
      }
      const size_t o = size_t(k) * C + i;
      logpi[o] = std::log(std::fmax(pi[o], 1e-300));
    }
    double s = 0;
    for (int i = 0; i < C; ++i) cdfpi[size_t(k) * C + i] = (s += pi[size_t(k) * C + i]);
  }
  // The first j < C - 1 with u cdf[C - 1] < cdf[j], else C - 1. A cdf row is non-decreasing
  // (running sums of non-negative terms), so that j is the count of cdf[i] <= u cdf[C - 1] among
  // i < C - 1: counted without branches (the search's branch went one way or the other at random,
  // and the next state waited on every miss).
  static int draw(const double* cdf, int C, double u) {
    const double x = u * cdf[C - 1];
    int j = 0;
    for (int i = 0; i < C - 1; ++i) j += cdf[i] <= x;
    return j;
  }
  // x[0..len): x_0 ~ pi_k, x_{t+1} ~ T_k[x_t, :]. The uniforms are drawn first, in the order the
  // states use them, so that the walk's chain of dependent steps holds only the draws.
  void sample(int k, Rng& r, int len, int32_t* x) const {
    constexpr int kBlock = 64;
    double u[kBlock];
    const double* cdf = cdfT.data() + size_t(k) * C * C;
    for (int t0 = 0; t0 < len; t0 += kBlock) {
      const int n = std::min(kBlock, len - t0);
      for (int i = 0; i < n; ++i) u[i] = r.uniform();
      int i = 0;
      if (t0 == 0) x[i++] = draw(cdfpi.data() + size_t(k) * C, C, u[0]);
      for (; i < n; ++i) x[t0 + i] = draw(cdf + size_t(x[t0 + i - 1]) * C, C, u[i]);
    }
  }
};

// Concentration a of the symmetric Dirichlet(a 1_C) with the same per-state variance as the M
// distributions pi (M x C, rows summing to 1), by moments: Var pi_j = (1/C)(1 - 1/C) / (C a + 1).
inline double dirichlet_conc_by_moments(const double* pi, int M, int C) {
  double v = 0;
  for (int j = 0; j < C; ++j) {
    double m = 0, q = 0;
    for (int i = 0; i < M; ++i) m += pi[size_t(i) * C + j];
    m /= M;
    for (int i = 0; i < M; ++i) q += (pi[size_t(i) * C + j] - m) * (pi[size_t(i) * C + j] - m);
    v += q / (M - 1);
  }
  v /= C;
  const double m = 1.0 / C;
  return (m * (1 - m) / v - 1) / C;
}

// The 1-Gen pseudo-count matched to the ensemble: a Dirichlet prior over the unigram distribution
// with the variance of the stationary distributions of M fresh chains (Dirichlet(alpha) rows). The
// stationary distributions concentrate near uniform (Var ~ 1/C^3, so alpha1 ~ C), far tighter than
// Dirichlet(1 1_C): with alpha1 = 1, 1-Gen over-reacts to the counts and the network's unigram
// stage is closer to 1-Mem at large K (1-Mem tends to the ensemble's Bayes unigram predictor).
inline double matched_alpha1(const pl_kernel_table& kt, int C, double alpha, uint64_t seed,
                             int M = 4096) {
  Chains ch;
  ch.resize(M, C);
  ch.generate(kt, seed, 0, alpha);
  return dirichlet_conc_by_moments(ch.pi.data(), M, C);
}

}  // namespace pl::markov
