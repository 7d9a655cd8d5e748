// SPDX-License-Identifier: Apache-2.0
// The five reference predictors for x_{n+1} given the prefix x_1..x_n (docs/markov-icl.md).
// Bigram / unigram counts and the chain log-likelihoods are updated incrementally (O(K) per token).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "chains.hpp"

namespace pl::markov {

enum Pred { kGen2 = 0, kGen1 = 1, kMem2 = 2, kMem1 = 3, kHybrid = 4, kNumPred = 5 };
inline const char* pred_name(int a) {
  static const char* const n[] = {"2gen", "1gen", "2mem", "1mem", "hybrid"};
  return n[a];
}

// Scratch for one sequence; reused (no allocation per call once sized).
struct PredictorScratch {
  std::vector<double> bigram, unigram, lw2, lw1, w;
  void size(int C, int K) {
    bigram.assign(size_t(C) * C, 0);
    unigram.assign(size_t(C), 0);
    lw2.assign(size_t(std::max(K, 1)), 0);
    lw1 = w = lw2;
  }
};

namespace detail {
// out = sum_k (w_k / z) T_k[cur, :], and out2 = sum_k (w_k / z) pi_k unless null; k in order.
// CC > 0: C == CC known here, so the sums stay in registers.
template <int CC>
void mix_rows(const Chains& ch, int K, int c_rt, const double* w, double z, int cur, double* out,
              double* out2) {
  constexpr int kMax = CC > 0 ? CC : 1;
  const int C = CC > 0 ? CC : c_rt;
  if (CC == 0) {
    for (int j = 0; j < C; ++j) out[j] = 0;
    if (out2)
      for (int j = 0; j < C; ++j) out2[j] = 0;
    for (int k = 0; k < K; ++k) {
      const double wk = w[k] / z;
      const double* row = ch.t(k) + size_t(cur) * C;
      for (int j = 0; j < C; ++j) out[j] += wk * row[j];
      if (out2) {
        const double* pk = ch.p(k);
        for (int j = 0; j < C; ++j) out2[j] += wk * pk[j];
      }
    }
    return;
  }
  double a[kMax] = {}, b[kMax] = {};
  for (int k = 0; k < K; ++k) {
    const double wk = w[k] / z;
    const double* row = ch.t(k) + size_t(cur) * C;
    for (int j = 0; j < kMax; ++j) a[j] += wk * row[j];
    if (out2) {
      const double* pk = ch.p(k);
      for (int j = 0; j < kMax; ++j) b[j] += wk * pk[j];
    }
  }
  for (int j = 0; j < kMax; ++j) out[j] = a[j];
  if (out2)
    for (int j = 0; j < kMax; ++j) out2[j] = b[j];
}
}  // namespace detail

// q[(n * kNumPred + a) * C + j] for n = 0..len-1 (prefix x_0..x_n). chains may be null (or
// K = 0): the Mem and hybrid predictors are then not defined and written as NaN.
inline void predict(const Chains* chains, const int32_t* x, int len, int C, double alpha,
                    double alpha1, PredictorScratch& s, double* q) {
  const int K = chains ? chains->K : 0;
  s.size(C, K);
  for (int k = 0; k < K; ++k) s.lw2[k] = s.lw1[k] = -std::log(double(K));  // log rho_k
  // softmax of log-weights into s.w: the weights w_k z, returns z
  auto weights = [&](const std::vector<double>& lw) {
    double mx = -INFINITY, z = 0;
    for (int k = 0; k < K; ++k) mx = std::max(mx, lw[k]);
    for (int k = 0; k < K; ++k) z += (s.w[k] = std::exp(lw[k] - mx));
    return z;
  };
  // q = sum_k w_k row_k into out (rows of T after `cur`), and with out2 != null the same weights
  // over the rows of pi into out2 (the 1-Mem and hybrid predictors share their weights).
  auto mix = [&](double z, int cur, double* out, double* out2) {
    // the shipped configs' C with the sums in registers (the same operations in the same order)
    if (C == 10) return detail::mix_rows<10>(*chains, K, C, s.w.data(), z, cur, out, out2);
    if (C == 3) return detail::mix_rows<3>(*chains, K, C, s.w.data(), z, cur, out, out2);
    detail::mix_rows<0>(*chains, K, C, s.w.data(), z, cur, out, out2);
  };
  for (int n = 0; n < len; ++n) {
    const int cur = x[n];
    s.unigram[cur] += 1;
    if (n > 0) s.bigram[size_t(x[n - 1]) * C + cur] += 1;
    for (int k = 0; k < K; ++k) {
      s.lw2[k] += n == 0 ? chains->logpi[size_t(k) * C + cur]
                         : chains->logT[size_t(k) * C * C + size_t(x[n - 1]) * C + cur];
      s.lw1[k] += chains->logpi[size_t(k) * C + cur];
    }
    double* qn = q + size_t(n) * kNumPred * C;
    double ci = 0;
    for (int j = 0; j < C; ++j) ci += s.bigram[size_t(cur) * C + j];
    for (int j = 0; j < C; ++j) {
      qn[kGen2 * C + j] = (s.bigram[size_t(cur) * C + j] + alpha) / (ci + C * alpha);
      qn[kGen1 * C + j] = (s.unigram[j] + alpha1) / (double(n + 1) + C * alpha1);
    }
    if (K > 0) {
      mix(weights(s.lw2), cur, qn + kMem2 * C, nullptr);
      mix(weights(s.lw1), cur, qn + kHybrid * C, qn + kMem1 * C);
    } else {
      for (int a = kMem2; a < kNumPred; ++a)
        for (int j = 0; j < C; ++j) qn[a * C + j] = NAN;
    }
  }
}

}  // namespace pl::markov
