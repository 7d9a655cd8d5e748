// SPDX-License-Identifier: Apache-2.0
// The read-out loss of the induction and memoriser models: softmax cross-entropy of one row of
// logits per position against the next token, with its gradient.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace pl::markov::minimal {

// Rows b * N + t (b < nb, t < N) of `logits` (C wide) predict seq[b * (N + 1) + t + 1]. Returns
// the summed cross-entropy; writes log-probabilities to logp (if non-null) and
// d(mean loss)/d(logits) = (softmax - onehot) / (nb N) to dlog. Sums and exponentials in double.
template <class T>
double softmax_xent(const T* logits, const int32_t* seq, size_t nb, size_t N, size_t C, T* dlog,
                    double* logp) {
  double loss = 0;
  const T sc = T(1.0 / double(nb * N));
  for (size_t b = 0; b < nb; ++b)
    for (size_t t = 0; t < N; ++t) {
      const size_t row = b * N + t;
      const T* u = logits + row * C;
      double mx = -INFINITY, z = 0;
      for (size_t j = 0; j < C; ++j) mx = std::fmax(mx, double(u[j]));
      for (size_t j = 0; j < C; ++j) z += std::exp(double(u[j]) - mx);
      const double lse = mx + std::log(z);
      const size_t tgt = size_t(seq[b * (N + 1) + t + 1]);
      loss += lse - double(u[tgt]);
      for (size_t j = 0; j < C; ++j) {
        if (logp) logp[row * C + j] = double(u[j]) - lse;
        dlog[row * C + j] = sc * T(std::exp(double(u[j]) - lse) - (j == tgt ? 1.0 : 0.0));
      }
    }
  return loss;
}

}  // namespace pl::markov::minimal
