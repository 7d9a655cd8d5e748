// SPDX-License-Identifier: Apache-2.0
// The hard-wired induction model (docs/markov-minimal.md, "induction"): layer 1 is replaced by its
// ideal previous-token output, the residual stream y_n = e(x_n) (+) e(x_{n-1}) in two orthogonal
// C-dimensional blocks (one-hot; e(x_{-1}) = 0 at the first position). A trainable causal
// attention layer (width dh, one head, 1/sqrt(dh) scale, no positions) and an untied read-out
// follow:  r = y + (softmax(Q K^T / sqrt(dh)) V) Wo^T,  logits = r Wu^T,  with Q, K, V = y Wqkv^T.
// Forward and backward on the kernels (Ops<T> of the Markov model: gemm, attention).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "markov_common/model.hpp"
#include "markov_minimal/readout.hpp"

namespace pl::markov::minimal {

template <class T>
class InductionModel {
 public:
  InductionModel(int C, int N, int dh, int batch, const pl_kernel_table* k)
      : C_(C), N_(N), D_(2 * C), dh_(dh), B_(batch), ops_(k) {
    const size_t D = size_t(D_), h = size_t(dh), R = size_t(batch) * N;
    wqkv_ = 0;
    wo_ = 3 * h * D;
    wu_ = wo_ + D * h;
    params.assign(wu_ + size_t(C) * D, T(0));
    grads.assign(params.size(), T(0));
    y_.assign(R * D, T(0));
    qkv_.assign(R * 3 * h, T(0));
    att_.assign(size_t(batch) * N * N, T(0));
    atty_.assign(R * h, T(0));
    r_.assign(R * D, T(0));
    logits_.assign(R * size_t(C), T(0));
    dlog_.assign(R * size_t(C), T(0));
    dr_.assign(R * D, T(0));
    datty_.assign(R * h, T(0));
    dqkv_.assign(R * 3 * h, T(0));
    ds_.assign(size_t(N) * N, T(0));
  }
  size_t num_params() const { return params.size(); }
  T* wqkv() { return params.data() + wqkv_; }
  T* wo() { return params.data() + wo_; }
  T* wu() { return params.data() + wu_; }
  // The hard-wired layer-1 output of the last forward pass (rows b * N + t, 2C wide).
  const T* y() const { return y_.data(); }

  // Mean cross-entropy; logp (nb x N x C) if non-null; grads = d(mean loss)/d(params) if back.
  double run(const int32_t* seq, int nb, bool back, double* logp = nullptr) {
    if (nb > B_) throw std::invalid_argument("batch larger than allocated");
    const size_t N = size_t(N_), D = size_t(D_), h = size_t(dh_), C = size_t(C_),
                 R = size_t(nb) * N;
    const T scale = T(1.0 / std::sqrt(double(h)));
    std::fill(y_.begin(), y_.begin() + std::ptrdiff_t(R * D), T(0));
    for (size_t b = 0; b < size_t(nb); ++b)
      for (size_t t = 0; t < N; ++t) {
        const int32_t* x = seq + b * (N + 1);
        T* yr = y_.data() + (b * N + t) * D;
        yr[size_t(x[t])] = T(1);
        if (t > 0) yr[C + size_t(x[t - 1])] = T(1);
      }
    ops_.gemm(0, 1, R, 3 * h, D, T(1), y_.data(), D, wqkv(), D, T(0), qkv_.data(), 3 * h);
    for (size_t b = 0; b < size_t(nb); ++b) {
      const T* q = qkv_.data() + b * N * 3 * h;
      ops_.attention(q, 3 * h, q + h, 3 * h, q + 2 * h, 3 * h, atty_.data() + b * N * h, h,
                     att_.data() + b * N * N, N, h, scale);
    }
    // r = y + atty Wo^T
    std::copy(y_.begin(), y_.begin() + std::ptrdiff_t(R * D), r_.begin());
    ops_.gemm(0, 1, R, D, h, T(1), atty_.data(), h, wo(), h, T(1), r_.data(), D);
    ops_.gemm(0, 1, R, C, D, T(1), r_.data(), D, wu(), D, T(0), logits_.data(), C);
    const double loss = softmax_xent(logits_.data(), seq, size_t(nb), N, C, dlog_.data(), logp);
    if (back) backward(nb);
    return loss / double(R);
  }

  std::vector<T> params, grads;

 private:
  void backward(int nb) {
    const size_t N = size_t(N_), D = size_t(D_), h = size_t(dh_), C = size_t(C_),
                 R = size_t(nb) * N;
    const T scale = T(1.0 / std::sqrt(double(h)));
    T* gqkv = grads.data() + wqkv_;
    T* go = grads.data() + wo_;
    T* gu = grads.data() + wu_;
    ops_.gemm(1, 0, C, D, R, T(1), dlog_.data(), C, r_.data(), D, T(0), gu, D);     // dWu
    ops_.gemm(0, 0, R, D, C, T(1), dlog_.data(), C, wu(), D, T(0), dr_.data(), D);  // dr
    ops_.gemm(1, 0, D, h, R, T(1), dr_.data(), D, atty_.data(), h, T(0), go, h);    // dWo
    ops_.gemm(0, 0, R, h, D, T(1), dr_.data(), D, wo(), h, T(0), datty_.data(), h);
    for (size_t b = 0; b < size_t(nb); ++b) {
      const T* q = qkv_.data() + b * N * 3 * h;
      T* dq = dqkv_.data() + b * N * 3 * h;
      ops_.attention_bwd(q, 3 * h, q + h, 3 * h, q + 2 * h, 3 * h, att_.data() + b * N * N,
                         datty_.data() + b * N * h, h, dq, 3 * h, dq + h, 3 * h, dq + 2 * h, 3 * h,
                         ds_.data(), N, h, scale);
    }
    ops_.gemm(1, 0, 3 * h, D, R, T(1), dqkv_.data(), 3 * h, y_.data(), D, T(0), gqkv, D);
  }

  int C_, N_, D_, dh_, B_;
  Ops<T> ops_;
  size_t wqkv_, wo_, wu_;
  std::vector<T> y_, qkv_, att_, atty_, r_, logits_, dlog_, dr_, datty_, dqkv_, ds_;
};

}  // namespace pl::markov::minimal
