// SPDX-License-Identifier: Apache-2.0
// Template parts of model.hpp.
#pragma once

#include <algorithm>
#include <cmath>

namespace pl::copy::task {

template <typename Stop>
AdamResult AdamTrainer::train(float* theta, const pl_kernel_table& k, Stop&& stop) {
  const NetConfig& c = net_.config();
  const int P = net_.P();
  const size_t nw = size_t(c.V) * c.V, ng = size_t(c.L) * c.L;
  const bool full = cfg_.batch <= 0 || cfg_.batch >= P;
  const size_t B = full ? size_t(P) : size_t(cfg_.batch);
  const size_t nb = (size_t(P) + B - 1) / B;
  // d obj / d theta of the data term: (kappa beta / P) dSSE; the priors enter as Adam's folded
  // L2 weight decay: d/dW kappa/(P sw2) ||W||^2 = (2 kappa / (P sw2)) W.
  const double data_scale = c.kappa * c.beta() / P;
  const float wd_w = float(2 * c.kappa / (P * c.sw2)), wd_g = float(2 * c.kappa / (P * c.sg2));
  std::fill(m_.begin(), m_.end(), 0.0f);
  std::fill(v_.begin(), v_.end(), 0.0f);

  AdamResult r;
  double obj_prev = NAN;
  int64_t t0 = 0;  // Adam's bias correction counts from the last (re)start
  const bool flip_allowed = cfg_.flip && !c.softmax && !c.causal && cfg_.train_attention;
  for (int64_t t = 1; t <= cfg_.max_steps; ++t) {
    if (stop()) {  // every step (not only every window): Ctrl-C waits one step at most
      r.steps = t - 1;
      return r;
    }
    const size_t b = size_t(t - 1) % nb, mu0 = b * B, n = std::min(B, size_t(P) - mu0);
    const double sse = net_.data_sse(theta, mu0, n, grad_.data(), data_scale * double(P) / n);
    if (full && !std::isfinite(sse)) {
      r.finite = false;
      r.steps = t - 1;
      return r;
    }
    if ((t - 1) % cfg_.window == 0) {
      if (cfg_.balance && !c.softmax && cfg_.train_attention) balance(theta, k);
      // The objective at theta before this step's update (full data).
      const double obj =
          full ? data_scale * sse + net_.prior_term(theta) : net_.objective(theta, nullptr);
      if (!std::isfinite(obj)) {
        r.finite = false;
        r.steps = t - 1;
        return r;
      }
      if (flip_allowed) {
        // The mirror move, taken when it lowers the objective (AdamConfig::flip).
        std::copy(theta, theta + net_.n_params(), mirror_.begin());
        flip_mean_channel(mirror_.data());
        const double obj_mirror = net_.objective(mirror_.data(), nullptr);
        if (obj_mirror < obj - cfg_.tol * std::fabs(obj)) {
          std::copy(mirror_.begin(), mirror_.end(), theta);
          std::fill(m_.begin(), m_.end(), 0.0f);
          std::fill(v_.begin(), v_.end(), 0.0f);
          t0 = t;  // the next update is step 1 of the restarted Adam
          ++r.flips;
          obj_prev = NAN;
          continue;  // this step's gradient was taken before the flip
        }
      }
      if (std::isfinite(obj_prev) && std::fabs(obj - obj_prev) <= cfg_.tol * std::fabs(obj)) {
        r.converged = true;
        r.steps = t - 1;
        r.objective = obj;
        return r;
      }
      obj_prev = obj;
      if (stop()) {
        r.steps = t - 1;
        r.objective = obj;
        return r;
      }
    }
    k.adam(theta + net_.w_off(), grad_.data() + net_.w_off(), m_.data(), v_.data(), nw,
           float(cfg_.lr), float(cfg_.beta1), float(cfg_.beta2), float(cfg_.eps), wd_w, t - t0);
    if (cfg_.train_attention)
      k.adam(theta + net_.g_off(), grad_.data() + net_.g_off(), m_.data() + nw, v_.data() + nw, ng,
             float(cfg_.lr), float(cfg_.beta1), float(cfg_.beta2), float(cfg_.eps), wd_g, t - t0);
    r.steps = t;
  }
  r.objective = net_.objective(theta, nullptr);
  r.finite = std::isfinite(r.objective);
  return r;
}

inline void AdamTrainer::flip_mean_channel(float* theta) const {
  const NetConfig& c = net_.config();
  const size_t V = size_t(c.V), L = size_t(c.L);
  float* W = theta + net_.w_off();
  float* G = theta + net_.g_off();
  // W <- W (I - 2 11^T / V): flip the mean of every row of W.
  for (size_t o = 0; o < V; ++o) {
    double m = 0;
    for (size_t u = 0; u < V; ++u) m += W[o * V + u];
    m /= double(V);
    for (size_t u = 0; u < V; ++u) W[o * V + u] -= float(2 * m);
  }
  // G <- G (I - 2 J / L): flip every row sum s_l, keep the zero-sum part.
  for (size_t l = 0; l < L; ++l) {
    double m = 0;
    for (size_t j = 0; j < L; ++j) m += G[l * L + j];
    m /= double(L);
    for (size_t j = 0; j < L; ++j) G[l * L + j] -= float(2 * m);
  }
}

inline void AdamTrainer::balance(float* theta, const pl_kernel_table& k) {
  const NetConfig& c = net_.config();
  const size_t nw = size_t(c.V) * c.V, ng = size_t(c.L) * c.L;
  float* W = theta + net_.w_off();
  float* G = theta + net_.g_off();
  const double ww = k.dot(W, W, nw) / c.sw2, gg = k.dot(G, G, ng) / c.sg2;
  if (!(ww > 0) || !(gg > 0)) return;
  const double lam = std::pow(gg / ww, 0.25);
  const float l1 = float(lam), li = float(1 / lam), l2 = float(lam * lam),
              li2 = float(1 / (lam * lam));
  // theta' = (lam W, G / lam); d(data)/dW' = d/dW / lam, d/dG' = lam d/dG; Adam's m like the
  // gradient, v like its square.
  for (size_t i = 0; i < nw; ++i) {
    W[i] *= l1;
    grad_[net_.w_off() + i] *= li;
    m_[i] *= li;
    v_[i] *= li2;
  }
  for (size_t i = 0; i < ng; ++i) {
    G[i] *= li;
    grad_[net_.g_off() + i] *= l1;
    m_[nw + i] *= l1;
    v_[nw + i] *= l2;
  }
}

}  // namespace pl::copy::task
