// SPDX-License-Identifier: Apache-2.0
#include "copy_task/model.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace pl::copy::task {

CopyNet::CopyNet(const pl_kernel_table& k, const NetConfig& c, std::vector<int32_t> tokens, int P,
                 int test_chunk)
    : k_(k), c_(c), P_(P), test_chunk_(std::max(1, test_chunk)), tokens_(std::move(tokens)) {
  if (tokens_.size() != size_t(P) * c.L) throw std::invalid_argument("CopyNet: token count != P*L");
  targets_.resize(tokens_.size());
  fill_targets(tokens_.data(), size_t(P), targets_.data());
  a_.resize(size_t(c.L) * c.L);
  da_.resize(a_.size());
  yt_.resize(size_t(test_chunk_) * c.L);
  // Token counts for the full-data sse (targets are fixed by position, as posattn_gram_sse needs).
  // Per call: stats ~ 4 L^2 V^2 + 2 L^3 multiply-adds (in double), direct ~ P (2 L^2 + 3 L V^2).
  const double L = c.L, V = c.V;
  const size_t n_stats = size_t(c.L) * c.L * c.V * c.V;
  const bool cheaper = 4 * L * L * V * V + 2 * L * L * L < double(P) * (2 * L * L + 3 * L * V * V);
  const bool fits = n_stats <= (size_t(1) << 24);  // 2 x 128 MB at most
  if (c.loss_path == NetConfig::LossPath::stats ||
      (c.loss_path == NetConfig::LossPath::automatic && cheaper && fits)) {
    // Gathered on the first full-data call (gather_stats), in chunks with the cancel check.
    stats_c_.assign(n_stats, 0.0);
    stats_d_.assign(n_stats, 0.0);
  }
}

bool CopyNet::gather_stats() {
  // 2 L^2 scattered count increments per sequence; the budget is cut by 8 as for row blocks
  // (memory-bound). Counts are integers in double, so chunks add up to one call's bits exactly;
  // a cancelled gathering keeps the sequences counted so far and goes on at the next call.
  const size_t L = size_t(c_.L), V = size_t(c_.V), P = size_t(P_);
  const size_t chunk = std::max<size_t>(1, size_t(chunk_cost_ / (16.0 * double(L) * double(L))));
  while (stats_done_ < P) {
    if (cancel_ && cancel_()) return false;
    const size_t m = std::min(chunk, P - stats_done_), off = stats_done_ * L;
    k_.posattn_onehot_stats(tokens_.data() + off, targets_.data() + off, stats_c_.data(),
                            stats_d_.data(), m, L, V);
    stats_done_ += m;
  }
  return true;
}

void CopyNet::attention(const float* G, float* A) const {
  const size_t L = size_t(c_.L);
  if (c_.softmax) {
    k_.softmax_rows(G, A, L, L, 1.0f, c_.causal ? 1 : 0);
    return;
  }
  for (size_t l = 0; l < L; ++l)
    for (size_t j = 0; j < L; ++j) A[l * L + j] = (c_.causal && j > l) ? 0.0f : G[l * L + j];
}

void CopyNet::fill_targets(const int32_t* tokens, size_t n, int32_t* y) const {
  const int L = c_.L;
  for (size_t mu = 0; mu < n; ++mu)
    for (int l = 0; l < L; ++l)
      y[mu * L + l] = pl::copy::in_loss(l, c_.wrap) ? pl::copy::target_token(tokens + mu * L, l, L)
                                                    : int32_t(-1);
}

double CopyNet::sse_pieces(const float* W, const int32_t* tok, const int32_t* tgt, size_t n,
                           float* da, float* dW) {
  const size_t L = size_t(c_.L), V = size_t(c_.V);
  const double per_row = double(V) * double(V) + double(L) * double(V);
  const double per_seq = double(L) * per_row;
  if (double(n) * per_seq <= chunk_cost_)  // one kernel call (every shipped config)
    return k_.posattn_onehot_sse(a_.data(), W, tok, tgt, da, dW, n, L, V);
  // Pieces: chunks of whole sequences, or, when one sequence alone is over the budget, blocks of
  // output rows of one sequence (posattn_onehot_sse_rows), `cancel` polled before each piece.
  // Row blocks get 1/8 of the budget: at such V the kernel is memory-bound (its dw partials,
  // V^2 x lanes floats, leave the caches; L = 1024, V = 4096: ~2.5 ns per multiply-add and
  // ~0.3 s per call, measured), so a block of ~48 rows there takes ~2 s.
  const size_t seqs = std::max<size_t>(1, size_t(chunk_cost_ / per_seq));
  const size_t rows = seqs > 1 || per_seq <= chunk_cost_
                          ? L
                          : std::clamp<size_t>(size_t(chunk_cost_ / (8 * per_row)), 1, L);
  if (da) {
    da_tmp_.resize(L * L);
    dw_tmp_.resize(V * V);
  }
  double sse = 0;
  bool first = true;
  for (size_t c0 = 0; c0 < n; c0 += seqs) {
    const size_t m = std::min(seqs, n - c0), off = c0 * L;
    float* dac = da ? (c0 == 0 ? da : da_tmp_.data()) : nullptr;  // row blocks are disjoint
    for (size_t r0 = 0; r0 < L; r0 += rows) {
      if (cancel_ && cancel_()) return NAN;
      float* dw = da ? (first ? dW : dw_tmp_.data()) : nullptr;
      sse += rows == L ? k_.posattn_onehot_sse(a_.data(), W, tok + off, tgt + off, dac, dw, m, L, V)
                       : k_.posattn_onehot_sse_rows(a_.data(), W, tok + off, tgt + off, dac, dw, m,
                                                    L, V, r0, std::min(L, r0 + rows));
      if (da && !first)
        for (size_t i = 0; i < V * V; ++i) dW[i] += dw_tmp_[i];
      first = false;
    }
    if (da && c0 > 0)
      for (size_t i = 0; i < L * L; ++i) da[i] += da_tmp_[i];
  }
  return sse;
}

double CopyNet::data_sse(const float* theta, size_t mu0, size_t n, float* grad, double scale) {
  const size_t L = size_t(c_.L), V = size_t(c_.V);
  if (mu0 + n > size_t(P_)) throw std::invalid_argument("CopyNet::data_sse: slice out of range");
  const float* W = theta + w_off();
  const float* G = theta + g_off();
  attention(G, a_.data());
  // h = A X, r = h W^T - Y, SSE = sum r^2 and (with grad) dSSE/dA, dSSE/dW, fused on the token
  // indices (X, Y one-hot): see posattn_onehot_sse in kernels.def.
  float* dW = grad ? grad + w_off() : nullptr;
  const bool stats = uses_stats() && mu0 == 0 && n == size_t(P_);
  if (stats && !gather_stats()) return NAN;  // cancelled
  const double sse = stats ? k_.posattn_gram_sse(a_.data(), W, stats_c_.data(), stats_d_.data(),
                                                 grad ? da_.data() : nullptr, dW, L, V)
                           : sse_pieces(W, tokens_.data() + mu0 * L, targets_.data() + mu0 * L, n,
                                        grad ? da_.data() : nullptr, dW);
  if (!grad) return sse;
  float* dG = grad + g_off();
  if (c_.softmax) {
    k_.softmax_rows_bwd(a_.data(), da_.data(), dG, L, L, 1.0f, c_.causal ? 1 : 0);
  } else {
    for (size_t l = 0; l < L; ++l)
      for (size_t j = 0; j < L; ++j) dG[l * L + j] = (c_.causal && j > l) ? 0.0f : da_[l * L + j];
  }
  const float s = float(scale);
  for (size_t i = 0; i < n_params(); ++i) grad[i] *= s;
  return sse;
}

double CopyNet::prior_term(const float* theta) const {
  const size_t nw = size_t(c_.V) * c_.V, ng = size_t(c_.L) * c_.L;
  const double ww = k_.dot(theta + w_off(), theta + w_off(), nw);
  const double gg = k_.dot(theta + g_off(), theta + g_off(), ng);
  return c_.kappa / (P_ * c_.sw2) * ww + c_.kappa / (P_ * c_.sg2) * gg;
}

double CopyNet::objective(const float* theta, float* grad) {
  const double data_scale = c_.kappa * c_.beta() / P_;
  double sse = 0;
  if (grad) {
    sse = data_sse(theta, 0, size_t(P_), grad, data_scale);
    const size_t nw = size_t(c_.V) * c_.V, ng = size_t(c_.L) * c_.L;
    const float gw = float(2 * c_.kappa / (P_ * c_.sw2)), gg = float(2 * c_.kappa / (P_ * c_.sg2));
    for (size_t i = 0; i < nw; ++i) grad[w_off() + i] += gw * theta[w_off() + i];
    for (size_t i = 0; i < ng; ++i) grad[g_off() + i] += gg * theta[g_off() + i];
  } else {
    sse = data_sse(theta, 0, size_t(P_), nullptr, 0);
  }
  return data_scale * sse + prior_term(theta);
}

double CopyNet::train_mse(const float* theta) {
  const double sse = data_sse(theta, 0, size_t(P_), nullptr, 0);
  return sse / (double(P_) * pl::copy::loss_positions(c_.L, c_.wrap));
}

double CopyNet::mse_on(const float* theta, const int32_t* tokens, size_t n) {
  if (n == 0) return NAN;
  const size_t L = size_t(c_.L);
  attention(theta + g_off(), a_.data());
  double sse = 0;
  for (size_t mu0 = 0; mu0 < n; mu0 += size_t(test_chunk_)) {
    const size_t m = std::min(size_t(test_chunk_), n - mu0);
    fill_targets(tokens + mu0 * L, m, yt_.data());
    sse += sse_pieces(theta + w_off(), tokens + mu0 * L, yt_.data(), m, nullptr, nullptr);
    if (std::isnan(sse)) return NAN;  // cancelled
  }
  return sse / (double(n) * pl::copy::loss_positions(c_.L, c_.wrap));
}

AdamTrainer::AdamTrainer(CopyNet& net, const AdamConfig& cfg)
    : net_(net),
      cfg_(cfg),
      grad_(net.n_params()),
      m_(net.n_params()),
      v_(net.n_params()),
      mirror_(net.n_params()) {
  if (cfg_.window < 1) cfg_.window = 1;
}

double auto_sgld_step(const NetConfig& c, int P) {
  // The largest curvature of U in W is about beta P L_loss / V (C ~ (P L / V) I for uniform or
  // copy attention); 0.1 / that is well inside the stability limit 2 / lambda_max. Only a
  // starting value: SgldSampler bounds it by curvature_bound() along the burn-in.
  return 0.1 * c.V / (c.beta() * P * pl::copy::loss_positions(c.L, c.wrap));
}

double CopyNet::curvature_bound(const float* theta) {
  // U = (beta/2) SSE + |W|^2/(2 sw2) + |G|^2/(2 sg2). Token-averaged Gauss-Newton traces:
  //  W block: beta sum_{mu,l} h_l h_l^T (x) I, trace per output = beta P sum_l E|h_l|^2 with
  //           E|h_l|^2 = (1 - 1/V) |A_l|^2 + s_l^2 / V (tokens i.i.d. uniform);
  //  A block: row l couples A[l, k] through beta sum_mu (W x_k).(W x_k'), trace beta P L |W|^2 / V
  //           (softmax multiplies it by the row-softmax Jacobian, norm <= 1).
  // Each trace bounds its block's top eigenvalue, their sum the whole Hessian's (up to the
  // residual term, small where the fit is good and covered by the step's margin).
  const size_t L = size_t(c_.L), V = size_t(c_.V);
  attention(theta + g_off(), a_.data());
  double hw = 0;
  for (size_t l = 0; l < L; ++l) {
    if (!pl::copy::in_loss(int(l), c_.wrap)) continue;
    double q = 0, s = 0;
    for (size_t k = 0; k < L; ++k) {
      q += double(a_[l * L + k]) * a_[l * L + k];
      s += a_[l * L + k];
    }
    hw += (1 - 1.0 / double(V)) * q + s * s / double(V);
  }
  const double ww = k_.dot(theta + w_off(), theta + w_off(), V * V);
  const double beta = c_.beta();
  return beta * P_ * hw + 1 / c_.sw2 + beta * P_ * double(L) * ww / double(V) + 1 / c_.sg2;
}

}  // namespace pl::copy::task
