// Template parts of model.hpp.
#pragma once

#include <cmath>

namespace copytask {

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
  for (int64_t t = 1; t <= cfg_.max_steps; ++t) {
    const size_t b = size_t(t - 1) % nb, mu0 = b * B, n = std::min(B, size_t(P) - mu0);
    const double sse = net_.data_sse(theta, mu0, n, grad_.data(), data_scale * double(P) / n);
    if (full && !std::isfinite(sse)) {
      r.finite = false;
      r.steps = t - 1;
      return r;
    }
    if ((t - 1) % cfg_.window == 0) {
      // The objective at theta before this step's update (full data).
      const double obj = full ? data_scale * sse + net_.prior_term(theta)
                              : net_.objective(theta, nullptr);
      if (!std::isfinite(obj)) {
        r.finite = false;
        r.steps = t - 1;
        return r;
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
           float(cfg_.lr), float(cfg_.beta1), float(cfg_.beta2), float(cfg_.eps), wd_w, t);
    if (cfg_.train_attention)
      k.adam(theta + net_.g_off(), grad_.data() + net_.g_off(), m_.data() + nw, v_.data() + nw,
             ng, float(cfg_.lr), float(cfg_.beta1), float(cfg_.beta2), float(cfg_.eps), wd_g, t);
    r.steps = t;
  }
  r.objective = net_.objective(theta, nullptr);
  r.finite = std::isfinite(r.objective);
  return r;
}

}  // namespace copytask
