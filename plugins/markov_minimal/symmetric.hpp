// SPDX-License-Identifier: Apache-2.0
// The symmetry-constrained attention-only transformer (docs/markov-minimal.md, "symmetric"):
// two attention layers on one-hot tokens where every C x C token form is a I + b 11^T and the
// layer-1 positional pattern is one previous-position score. The 11^T parts and the value/output
// scales are exact gauge directions (they shift a softmax by a constant or rescale another
// scalar), so the model is five scalars:
//   beta  layer-1 previous-token score:  h_m = sum_{k<=m} softmax_k(beta [k = m-1]) e(x_k)
//   delta layer-2 match strength:        o_n = sum_{m<=n} softmax_m(delta h_m[x_n]) e(x_m)
//   g_u, g_h, g_o read-out gains:        z_n = g_u e(x_n) + g_h h_n + g_o o_n
// With E = exp(beta) and c_m the token counts of x_0..x_m, h_m = (c_m + (E - 1) e(x_{m-1}))
// / (m + E) for m >= 1 and h_0 = e(x_0), so the layer-2 score of a pair costs O(1) and a sequence
// O(N^2) with a small constant. Forward and backward are fused per query row n (the row's
// attention is recomputed, never stored). T = float takes the row softmax from the kernel table,
// T = double plain loops (the finite-difference and full-model oracle); every sum that enters a
// gradient is accumulated in double.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "markov_common/ref_ops.hpp"
#include "phaselab/kernel_table.h"

namespace pl::markov::minimal {

enum SymParam { kBeta = 0, kDelta = 1, kGu = 2, kGh = 3, kGo = 4, kNumSym = 5 };
inline const char* sym_name(int i) {
  static const char* const n[] = {"beta", "delta", "g_u", "g_h", "g_o"};
  return n[i];
}

template <class T>
struct RowSoftmax;
template <>
struct RowSoftmax<double> {
  explicit RowSoftmax(const pl_kernel_table*) {}
  void operator()(const double* x, double* y, size_t n) const {
    ref::softmax_rows<double>(x, y, 1, n, 1.0, 0);
  }
};
template <>
struct RowSoftmax<float> {
  explicit RowSoftmax(const pl_kernel_table* t) : k(t) {}
  const pl_kernel_table* k;
  void operator()(const float* x, float* y, size_t n) const { k->softmax_rows(x, y, 1, n, 1.f, 0); }
};

template <class T>
class SymModel {
 public:
  SymModel(int C, int N, const pl_kernel_table* k) : C_(C), N_(N), sm_(k) {
    hT_.assign(size_t(C) * N, T(0));
    dhT_.assign(size_t(C) * N, 0.0);
    s_.assign(size_t(N), T(0));
    p_.assign(size_t(N), T(0));
    theta.fill(0.0);
  }
  int C() const { return C_; }
  int N() const { return N_; }

  std::array<double, kNumSym> theta;  // beta, delta, g_u, g_h, g_o

  // Mean cross-entropy over nb sequences of N + 1 tokens. grad (kNumSym, may be null) receives
  // d(mean loss)/d(theta); per_seq_grad (nb x kNumSym, may be null) each sequence's gradient of
  // its own mean loss (for standard errors); logp (nb x N x C, may be null) the log-probabilities.
  double run(const int32_t* seq, int nb, double* grad, double* per_seq_grad = nullptr,
             double* logp = nullptr) {
    double total = 0, g[kNumSym] = {0, 0, 0, 0, 0};
    const bool back = grad || per_seq_grad;
    for (int b = 0; b < nb; ++b) {
      double gs[kNumSym] = {0, 0, 0, 0, 0};
      total += sequence(seq + size_t(b) * (N_ + 1), back ? gs : nullptr,
                        logp ? logp + size_t(b) * N_ * C_ : nullptr);
      for (int i = 0; i < kNumSym; ++i) {
        g[i] += gs[i];
        if (per_seq_grad) per_seq_grad[size_t(b) * kNumSym + i] = gs[i] / N_;
      }
    }
    if (grad)
      for (int i = 0; i < kNumSym; ++i) grad[i] = g[i] / (double(nb) * N_);
    return total / (double(nb) * N_);
  }

  // h_m of the last sequence (C values, m < N): the layer-1 output.
  double h(int m, int a) const { return double(hT_[size_t(a) * N_ + m]); }

 private:
  // Summed loss of one sequence; if g, adds d(summed loss)/d(theta).
  double sequence(const int32_t* x, double* g, double* logp) {
    const int C = C_, N = N_;
    const double beta = theta[kBeta], delta = theta[kDelta], gu = theta[kGu], gh = theta[kGh],
                 go = theta[kGo];
    const double E = std::exp(beta);
    // layer 1: h_m from running counts (transposed: hT[a][m])
    cnt_.assign(size_t(C), 0.0);
    for (int m = 0; m < N; ++m) {
      cnt_[size_t(x[m])] += 1;
      for (int a = 0; a < C; ++a) {
        double v;
        if (m == 0)
          v = a == x[0] ? 1.0 : 0.0;
        else
          v = (cnt_[size_t(a)] + (x[m - 1] == a ? E - 1 : 0.0)) / (m + E);
        hT_[size_t(a) * N + m] = T(v);
      }
    }
    if (g) std::fill(dhT_.begin(), dhT_.end(), 0.0);
    double loss = 0;
    std::vector<double>& o = o_;
    std::vector<double>& z = z_;
    o.assign(size_t(C), 0.0);
    z.assign(size_t(C), 0.0);
    for (int n = 0; n < N; ++n) {
      const int a = x[n];
      const T* ha = hT_.data() + size_t(a) * N;
      // layer 2 row n: scores delta h_m[a], m <= n
      const T dT = T(delta);
      for (int m = 0; m <= n; ++m) s_[size_t(m)] = dT * ha[m];
      sm_(s_.data(), p_.data(), size_t(n) + 1);
      std::fill(o.begin(), o.end(), 0.0);
      for (int m = 0; m <= n; ++m) o[size_t(x[m])] += double(p_[size_t(m)]);
      // read-out and cross-entropy (double)
      double mx = -INFINITY;
      for (int j = 0; j < C; ++j) {
        z[size_t(j)] =
            (j == a ? gu : 0.0) + gh * double(hT_[size_t(j) * N + n]) + go * o[size_t(j)];
        mx = std::max(mx, z[size_t(j)]);
      }
      double zs = 0;
      for (int j = 0; j < C; ++j) zs += std::exp(z[size_t(j)] - mx);
      const double lse = mx + std::log(zs);
      const int tgt = x[n + 1];
      loss += lse - z[size_t(tgt)];
      if (logp)
        for (int j = 0; j < C; ++j) logp[size_t(n) * C + j] = z[size_t(j)] - lse;
      if (!g) continue;
      // backward of row n
      double dgo = 0, dgh = 0;
      for (int j = 0; j < C; ++j) {
        const double dz = std::exp(z[size_t(j)] - lse) - (j == tgt ? 1.0 : 0.0);
        z[size_t(j)] = dz;  // reuse as dz
        dgh += dz * double(hT_[size_t(j) * N + n]);
        dgo += dz * o[size_t(j)];
        dhT_[size_t(j) * N + n] += gh * dz;
      }
      g[kGu] += z[size_t(a)];
      g[kGh] += dgh;
      g[kGo] += dgo;
      // dP_m = go dz[x_m]; ds_m = P_m (dP_m - sum P dP)
      double pdp = 0;
      for (int m = 0; m <= n; ++m) pdp += double(p_[size_t(m)]) * go * z[size_t(x[m])];
      double dd = 0;
      double* dha = dhT_.data() + size_t(a) * N;
      for (int m = 0; m <= n; ++m) {
        const double ds = double(p_[size_t(m)]) * (go * z[size_t(x[m])] - pdp);
        dd += ds * double(ha[m]);
        dha[m] += delta * ds;
      }
      g[kDelta] += dd;
    }
    if (g) {  // d h_m[a] / d beta = E (e(x_{m-1})[a] - h_m[a]) / (m + E), m >= 1
      double db = 0;
      for (int m = 1; m < N; ++m) {
        double s = 0;
        for (int a = 0; a < C; ++a)
          s += dhT_[size_t(a) * N + m] *
               ((x[m - 1] == a ? 1.0 : 0.0) - double(hT_[size_t(a) * N + m]));
        db += s * E / (m + E);
      }
      g[kBeta] += db;
    }
    return loss;
  }

  int C_, N_;
  RowSoftmax<T> sm_;
  std::vector<T> hT_, s_, p_;
  std::vector<double> dhT_, cnt_, o_, z_;
};

}  // namespace pl::markov::minimal
