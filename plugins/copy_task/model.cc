#include "copy_task/model.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace copytask {

CopyNet::CopyNet(const pl_kernel_table& k, const NetConfig& c, std::vector<int32_t> tokens, int P,
                 int max_batch, int test_chunk)
    : k_(k),
      c_(c),
      P_(P),
      max_batch_(std::max(1, std::min(max_batch <= 0 ? P : max_batch, P))),
      test_chunk_(std::max(1, test_chunk)),
      tokens_(std::move(tokens)) {
  if (tokens_.size() != size_t(P) * c.L) throw std::invalid_argument("CopyNet: token count != P*L");
  const size_t LV = size_t(c.L) * c.V;
  x_.resize(size_t(P) * LV);
  copyc::one_hot(tokens_.data(), tokens_.size(), c.V, x_.data());
  // Where each target's 1 sits inside its sequence's block of f, so the hot loop subtracts y
  // without index arithmetic.
  target_at_.resize(tokens_.size());
  for (int mu = 0; mu < P; ++mu)
    for (int l = 0; l < c.L; ++l)
      target_at_[size_t(mu) * c.L + l] =
          copyc::in_loss(l, c.wrap)
              ? l * c.V + copyc::target_token(tokens_.data() + size_t(mu) * c.L, l, c.L)
              : -1;
  a_.resize(size_t(c.L) * c.L);
  da_.resize(a_.size());
  h_.resize(size_t(max_batch_) * LV);
  f_.resize(h_.size());
  dh_.resize(h_.size());
  xt_.resize(size_t(test_chunk_) * LV);
  ht_.resize(xt_.size());
  ft_.resize(xt_.size());
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

void CopyNet::subtract_targets(float* f, const int32_t* tokens, size_t n) const {
  const int L = c_.L, V = c_.V;
  for (size_t mu = 0; mu < n; ++mu) {
    const int32_t* seq = tokens + mu * L;
    float* fm = f + mu * size_t(L) * V;
    for (int l = 0; l < L; ++l) {
      if (copyc::in_loss(l, c_.wrap))
        fm[size_t(l) * V + size_t(copyc::target_token(seq, l, L))] -= 1.0f;
      else
        std::memset(fm + size_t(l) * V, 0, size_t(V) * sizeof(float));
    }
  }
}

double CopyNet::data_sse(const float* theta, size_t mu0, size_t n, float* grad, double scale) {
  const size_t L = size_t(c_.L), V = size_t(c_.V), LV = L * V;
  if (n > size_t(max_batch_) || mu0 + n > size_t(P_))
    throw std::invalid_argument("CopyNet::data_sse: slice out of range");
  const float* W = theta + w_off();
  const float* G = theta + g_off();
  const float* x = x_.data() + mu0 * LV;
  attention(G, a_.data());
  // Forward: h = A X, f = h W^T; then f <- r = f - y (rows outside the loss zeroed).
  k_.posattn(a_.data(), x, W, h_.data(), f_.data(), n, L, V);
  const int32_t* at = target_at_.data() + mu0 * L;
  for (size_t mu = 0; mu < n; ++mu) {
    float* fm = f_.data() + mu * LV;
    for (size_t l = 0; l < L; ++l) {
      const int32_t i = at[mu * L + l];
      if (i >= 0)
        fm[i] -= 1.0f;
      else
        std::memset(fm + l * V, 0, V * sizeof(float));
    }
  }
  const double sse = k_.dot(f_.data(), f_.data(), n * LV);
  if (!grad) return sse;
  // Backward with df = r (dSSE/df = 2 r; the 2 and `scale` are applied to the small outputs).
  float* dW = grad + w_off();
  float* dG = grad + g_off();
  k_.posattn_bwd(a_.data(), x, W, h_.data(), f_.data(), da_.data(), dW, dh_.data(), n, L, V);
  if (c_.softmax) {
    k_.softmax_rows_bwd(a_.data(), da_.data(), dG, L, L, 1.0f, c_.causal ? 1 : 0);
  } else {
    for (size_t l = 0; l < L; ++l)
      for (size_t j = 0; j < L; ++j) dG[l * L + j] = (c_.causal && j > l) ? 0.0f : da_[l * L + j];
  }
  const float s = float(2 * scale);
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
    // One full-data pass (the gradient is not accumulated across slices).
    if (max_batch_ != P_) throw std::logic_error("CopyNet::objective: gradient needs max_batch == P");
    sse = data_sse(theta, 0, size_t(P_), grad, data_scale);
    const size_t nw = size_t(c_.V) * c_.V, ng = size_t(c_.L) * c_.L;
    const float gw = float(2 * c_.kappa / (P_ * c_.sw2)), gg = float(2 * c_.kappa / (P_ * c_.sg2));
    for (size_t i = 0; i < nw; ++i) grad[w_off() + i] += gw * theta[w_off() + i];
    for (size_t i = 0; i < ng; ++i) grad[g_off() + i] += gg * theta[g_off() + i];
  } else {
    for (size_t mu0 = 0; mu0 < size_t(P_); mu0 += size_t(max_batch_)) {
      const size_t n = std::min(size_t(max_batch_), size_t(P_) - mu0);
      sse += data_sse(theta, mu0, n, nullptr, 0);
    }
  }
  return data_scale * sse + prior_term(theta);
}

double CopyNet::train_mse(const float* theta) {
  double sse = 0;
  for (size_t mu0 = 0; mu0 < size_t(P_); mu0 += size_t(max_batch_)) {
    const size_t n = std::min(size_t(max_batch_), size_t(P_) - mu0);
    sse += data_sse(theta, mu0, n, nullptr, 0);
  }
  return sse / (double(P_) * copyc::loss_positions(c_.L, c_.wrap));
}

double CopyNet::mse_on(const float* theta, const int32_t* tokens, size_t n) {
  if (n == 0) return NAN;
  const size_t L = size_t(c_.L), V = size_t(c_.V), LV = L * V;
  attention(theta + g_off(), a_.data());
  double sse = 0;
  for (size_t mu0 = 0; mu0 < n; mu0 += size_t(test_chunk_)) {
    const size_t m = std::min(size_t(test_chunk_), n - mu0);
    copyc::one_hot(tokens + mu0 * L, m * L, int(V), xt_.data());
    k_.posattn(a_.data(), xt_.data(), theta + w_off(), ht_.data(), ft_.data(), m, L, V);
    subtract_targets(ft_.data(), tokens + mu0 * L, m);
    sse += k_.dot(ft_.data(), ft_.data(), m * LV);
  }
  return sse / (double(n) * copyc::loss_positions(c_.L, c_.wrap));
}

AdamTrainer::AdamTrainer(CopyNet& net, const AdamConfig& cfg)
    : net_(net), cfg_(cfg), grad_(net.n_params()), m_(net.n_params()), v_(net.n_params()) {
  if (cfg_.window < 1) cfg_.window = 1;
}

double auto_sgld_step(const NetConfig& c, int P) {
  // The largest curvature of U in W is about beta P L_loss / V (C ~ (P L / V) I for uniform or
  // copy attention); 0.1 / that is well inside the stability limit 2 / lambda_max.
  return 0.1 * c.V / (c.beta() * P * copyc::loss_positions(c.L, c.wrap));
}

}  // namespace copytask
