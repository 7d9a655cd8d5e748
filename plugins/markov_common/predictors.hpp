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

// q[(n * kNumPred + a) * C + j] for n = 0..len-1 (prefix x_0..x_n). chains may be null (or
// K = 0): the Mem and hybrid predictors are then not defined and written as NaN.
inline void predict(const Chains* chains, const int32_t* x, int len, int C, double alpha,
                    double alpha1, PredictorScratch& s, double* q) {
  const int K = chains ? chains->K : 0;
  s.size(C, K);
  for (int k = 0; k < K; ++k) s.lw2[k] = s.lw1[k] = -std::log(double(K));  // log rho_k
  // softmax of log-weights into s.w, then q = sum_k w_k row_k
  auto mix = [&](const std::vector<double>& lw, bool rows_T, int cur, double* out) {
    double mx = -INFINITY, z = 0;
    for (int k = 0; k < K; ++k) mx = std::max(mx, lw[k]);
    for (int k = 0; k < K; ++k) z += (s.w[k] = std::exp(lw[k] - mx));
    for (int j = 0; j < C; ++j) out[j] = 0;
    for (int k = 0; k < K; ++k) {
      const double wk = s.w[k] / z;
      const double* row = rows_T ? chains->t(k) + size_t(cur) * C : chains->p(k);
      for (int j = 0; j < C; ++j) out[j] += wk * row[j];
    }
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
      mix(s.lw2, true, cur, qn + kMem2 * C);
      mix(s.lw1, false, cur, qn + kMem1 * C);
      mix(s.lw1, true, cur, qn + kHybrid * C);
    } else {
      for (int a = kMem2; a < kNumPred; ++a)
        for (int j = 0; j < C; ++j) qn[a * C + j] = NAN;
    }
  }
}

}  // namespace pl::markov
