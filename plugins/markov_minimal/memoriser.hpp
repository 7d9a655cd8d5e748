// SPDX-License-Identifier: Apache-2.0
// The encode-pool-decode memoriser (docs/markov-minimal.md, "memoriser"): every transition of the
// prefix is encoded by a learned lookup phi(a, b) (a row of a C^2 x d table, optionally through
// GELU), pooled by the mean z_n = (1/n) sum_{t=1..n} phi(x_{t-1}, x_t) (z_0 = 0), and decoded with
// the current state by a one-hidden-layer GELU MLP of width w:
//   logits_n = W2 gelu(W1 [z_n ; e(x_n)] + b1) + b2.
// Forward and backward on the kernels (Ops<T> of the Markov model: gemm, gelu).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "markov_common/model.hpp"
#include "markov_minimal/readout.hpp"

namespace pl::markov::minimal {

template <class T>
class MemoriserModel {
 public:
  MemoriserModel(int C, int N, int d, int width, bool phi_gelu, int batch, const pl_kernel_table* k)
      : C_(C), N_(N), d_(d), w_(width), act_(phi_gelu), B_(batch), ops_(k) {
    const size_t c = size_t(C), dd = size_t(d), w = size_t(width), R = size_t(batch) * N,
                 in = dd + c;
    phi_ = 0;
    w1_ = phi_ + c * c * dd;
    b1_ = w1_ + w * in;
    w2_ = b1_ + w;
    b2_ = w2_ + c * w;
    params.assign(b2_ + c, T(0));
    grads.assign(params.size(), T(0));
    pre_.assign(R * dd, T(0));
    ph_.assign(R * dd, T(0));
    u_.assign(R * in, T(0));
    hh_.assign(R * w, T(0));
    g_.assign(R * w, T(0));
    logits_.assign(R * c, T(0));
    dlog_.assign(R * c, T(0));
    dg_.assign(R * w, T(0));
    du_.assign(R * in, T(0));
    dphi_.assign(R * dd, T(0));
  }
  size_t num_params() const { return params.size(); }
  // Offsets of the named blocks: phi (C^2 x d), W1 (w x (d + C)), b1, W2 (C x w), b2.
  size_t off_phi() const { return phi_; }
  size_t off_w1() const { return w1_; }
  size_t off_b1() const { return b1_; }
  size_t off_w2() const { return w2_; }
  size_t off_b2() const { return b2_; }
  // Matrices get init_scale * z, biases 0 (z: num_params N(0,1) samples).
  void init_from_normals(const float* z, double init_scale) {
    for (size_t i = 0; i < params.size(); ++i)
      params[i] = (i >= b1_ && i < w2_) || i >= b2_ ? T(0) : T(init_scale * z[i]);
  }

  double run(const int32_t* seq, int nb, bool back, double* logp = nullptr) {
    if (nb > B_) throw std::invalid_argument("batch larger than allocated");
    const size_t N = size_t(N_), c = size_t(C_), dd = size_t(d_), w = size_t(w_),
                 R = size_t(nb) * N, in = dd + c;
    const T* P = params.data();
    // encode: pre_t = Phi[x_{t-1}, x_t] (row b * N + t, t >= 1), phi = act(pre)
    for (size_t b = 0; b < size_t(nb); ++b) {
      const int32_t* x = seq + b * (N + 1);
      std::fill(pre_.begin() + std::ptrdiff_t(b * N * dd),
                pre_.begin() + std::ptrdiff_t((b * N + 1) * dd), T(0));
      for (size_t t = 1; t < N; ++t) {
        const T* row = P + phi_ + (size_t(x[t - 1]) * c + size_t(x[t])) * dd;
        std::copy(row, row + dd, pre_.begin() + std::ptrdiff_t((b * N + t) * dd));
      }
    }
    if (act_)
      ops_.gelu(pre_.data(), ph_.data(), R * dd);
    else
      std::copy(pre_.begin(), pre_.begin() + std::ptrdiff_t(R * dd), ph_.begin());
    // pool: z_n = (1/n) sum_{t=1..n} phi_t (running sum in double), then u = [z ; e(x_n)]
    std::vector<double>& acc = acc_;
    for (size_t b = 0; b < size_t(nb); ++b) {
      const int32_t* x = seq + b * (N + 1);
      acc.assign(dd, 0.0);
      for (size_t n = 0; n < N; ++n) {
        T* u = u_.data() + (b * N + n) * in;
        if (n > 0)
          for (size_t i = 0; i < dd; ++i) acc[i] += double(ph_[(b * N + n) * dd + i]);
        for (size_t i = 0; i < dd; ++i) u[i] = n > 0 ? T(acc[i] / double(n)) : T(0);
        for (size_t j = 0; j < c; ++j) u[dd + j] = size_t(x[n]) == j ? T(1) : T(0);
      }
    }
    // decode
    for (size_t r = 0; r < R; ++r)
      std::copy(P + b1_, P + b1_ + w, hh_.begin() + std::ptrdiff_t(r * w));
    ops_.gemm(0, 1, R, w, in, T(1), u_.data(), in, P + w1_, in, T(1), hh_.data(), w);
    ops_.gelu(hh_.data(), g_.data(), R * w);
    for (size_t r = 0; r < R; ++r)
      std::copy(P + b2_, P + b2_ + c, logits_.begin() + std::ptrdiff_t(r * c));
    ops_.gemm(0, 1, R, c, w, T(1), g_.data(), w, P + w2_, w, T(1), logits_.data(), c);
    const double loss = softmax_xent(logits_.data(), seq, size_t(nb), N, c, dlog_.data(), logp);
    if (back) backward(seq, nb);
    return loss / double(R);
  }

  std::vector<T> params, grads;

 private:
  void backward(const int32_t* seq, int nb) {
    const size_t N = size_t(N_), c = size_t(C_), dd = size_t(d_), w = size_t(w_),
                 R = size_t(nb) * N, in = dd + c;
    const T* P = params.data();
    T* G = grads.data();
    std::fill(grads.begin(), grads.end(), T(0));
    ops_.gemm(1, 0, c, w, R, T(1), dlog_.data(), c, g_.data(), w, T(0), G + w2_, w);  // dW2
    for (size_t r = 0; r < R; ++r)
      for (size_t j = 0; j < c; ++j) G[b2_ + j] += dlog_[r * c + j];
    ops_.gemm(0, 0, R, w, c, T(1), dlog_.data(), c, P + w2_, w, T(0), dg_.data(), w);  // dG
    ops_.gelu_bwd(hh_.data(), dg_.data(), dg_.data(), R * w);                          // dH
    ops_.gemm(1, 0, w, in, R, T(1), dg_.data(), w, u_.data(), in, T(0), G + w1_, in);  // dW1
    for (size_t r = 0; r < R; ++r)
      for (size_t i = 0; i < w; ++i) G[b1_ + i] += dg_[r * w + i];
    ops_.gemm(0, 0, R, in, w, T(1), dg_.data(), w, P + w1_, in, T(0), du_.data(), in);  // dU
    // dphi_t = sum_{n >= t} dz_n / n (suffix sums, t >= 1)
    std::vector<double>& acc = acc_;
    for (size_t b = 0; b < size_t(nb); ++b) {
      acc.assign(dd, 0.0);
      for (size_t n = N - 1; n >= 1; --n) {
        for (size_t i = 0; i < dd; ++i) acc[i] += double(du_[(b * N + n) * in + i]) / double(n);
        for (size_t i = 0; i < dd; ++i) dphi_[(b * N + n) * dd + i] = T(acc[i]);
      }
      std::fill(dphi_.begin() + std::ptrdiff_t(b * N * dd),
                dphi_.begin() + std::ptrdiff_t((b * N + 1) * dd), T(0));
    }
    if (act_) ops_.gelu_bwd(pre_.data(), dphi_.data(), dphi_.data(), R * dd);
    for (size_t b = 0; b < size_t(nb); ++b) {
      const int32_t* x = seq + b * (N + 1);
      for (size_t t = 1; t < N; ++t) {
        T* row = G + phi_ + (size_t(x[t - 1]) * c + size_t(x[t])) * dd;
        for (size_t i = 0; i < dd; ++i) row[i] += dphi_[(b * N + t) * dd + i];
      }
    }
  }

  int C_, N_, d_, w_;
  bool act_;
  int B_;
  Ops<T> ops_;
  size_t phi_, w1_, b1_, w2_, b2_;
  std::vector<T> pre_, ph_, u_, hh_, g_, logits_, dlog_, dg_, du_, dphi_;
  std::vector<double> acc_;
};

}  // namespace pl::markov::minimal
