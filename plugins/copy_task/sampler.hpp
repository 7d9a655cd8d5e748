// SPDX-License-Identifier: Apache-2.0
// Posterior samplers for the copy task.
//  - SgldSampler: SGLD on theta = (W, G) with potential U = (P / (2 kappa)) obj, mini-batch
//    gradients rescaled to the full data set: theta <- theta - eta grad U + sqrt(2 eta T) xi.
//  - Mala: Langevin (unadjusted) or Metropolis-adjusted Langevin on a vector x in double, for a
//    target exp(-U(x) / T) given by a functor U(x, grad) (used with the exact marginal over G).
// Noise comes from the kernel table's Philox streams (k.sgld / k.gaussian / k.uniform_bits), so a
// chain is a pure function of (seed, stream, start); all buffers are allocated in constructors.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "copy_task/model.hpp"
#include "phaselab/kernel_table.h"

namespace pl::copy::task {

class SgldSampler {
 public:
  SgldSampler(CopyNet& net, const SgldConfig& cfg)
      : net_(net), cfg_(cfg), grad_(net.n_params()), a_(size_t(net.config().L) * net.config().L) {
    const int P = net.P();
    B_ = (cfg.batch <= 0 || cfg.batch >= P) ? size_t(P) : size_t(cfg.batch);
    nb_ = (size_t(P) + B_ - 1) / B_;
    order_.resize(nb_);
    bits_.resize(nb_);
    if (cfg_.thin < 1) cfg_.thin = 1;
    start_.resize(net.n_params());
  }
  // The step of the last chain (after the burn-in's bound when automatic).
  double eta() const { return eta_; }
  // Steps of the last chain, restarts included.
  int64_t steps() const { return steps_; }

  // Runs one chain from theta (in place): burn_in steps, then `samples` samples every `thin`
  // steps; record(A, j) gets the attention matrix (L x L) of sample j. stop() is polled every
  // thin steps. Returns false if the chain left the finite numbers or was stopped.
  template <typename Record, typename Stop>
  bool run(float* theta, const pl_kernel_table& k, uint64_t seed, uint64_t noise_stream,
           uint64_t batch_stream, Record&& record, Stop&& stop) {
    const NetConfig& c = net_.config();
    const int P = net_.P();
    const size_t nw = size_t(c.V) * c.V, ng = size_t(c.L) * c.L, n = nw + ng;
    const double scale_base = 0.5 * c.beta() * P;  // dU/dtheta of the data term = (beta/2) dSSE
    const int64_t total = cfg_.burn_in + cfg_.samples * cfg_.thin;
    const bool automatic = cfg_.eta <= 0;
    eta_ = automatic ? auto_sgld_step(c, P) : cfg_.eta;
    steps_ = 0;
    std::copy(theta, theta + n, start_.begin());
    int restarts = 0;
    uint64_t counter = 0, batch_counter = 0;
    size_t pos = nb_;  // position in the current epoch's batch order
    int64_t kept = 0;
    for (int64_t t = 1; t <= total; ++t) {
      if (stop()) return false;  // every step, burn-in included: Ctrl-C waits one step at most
      ++steps_;
      if (automatic && t <= cfg_.burn_in)
        eta_ = std::min(eta_, cfg_.auto_margin / net_.curvature_bound(theta));
      if (pos == nb_) {  // new epoch: Fisher-Yates shuffle of the batch order
        for (size_t i = 0; i < nb_; ++i) order_[i] = uint32_t(i);
        if (nb_ > 1) {
          k.uniform_bits(bits_.data(), nb_, seed, batch_stream, batch_counter);
          batch_counter += nb_;
          for (size_t i = nb_ - 1; i > 0; --i) {
            const size_t j = size_t((uint64_t(bits_[i]) * uint64_t(i + 1)) >> 32);
            std::swap(order_[i], order_[j]);
          }
        }
        pos = 0;
      }
      const size_t mu0 = size_t(order_[pos++]) * B_;
      const size_t m = std::min(B_, size_t(P) - mu0);
      const double sse = net_.data_sse(theta, mu0, m, grad_.data(), scale_base / double(m));
      if (!std::isfinite(sse)) {
        if (!automatic || t > cfg_.burn_in || restarts == 6) return false;
        // Backoff: the bound did not catch the growth in time; restart the burn-in, smaller step.
        // (The noise counters run on, so the restarted chain is still a function of the seed.)
        std::copy(start_.begin(), start_.end(), theta);
        eta_ /= 4;
        ++restarts;
        t = 0;
        continue;
      }
      // Prior gradients: W / sw2, G / sg2.
      const float iw = float(1 / c.sw2), ig = float(1 / c.sg2);
      for (size_t i = 0; i < nw; ++i) grad_[net_.w_off() + i] += iw * theta[net_.w_off() + i];
      for (size_t i = 0; i < ng; ++i) grad_[net_.g_off() + i] += ig * theta[net_.g_off() + i];
      k.sgld(theta, grad_.data(), cfg_.train_attention ? n : nw, float(eta_),
             float(cfg_.temperature), seed, noise_stream, counter);
      counter += n;
      if (t > cfg_.burn_in && (t - cfg_.burn_in) % cfg_.thin == 0) {
        net_.attention(theta + net_.g_off(), a_.data());
        record(a_.data(), kept++);
        if (stop()) return false;
      }
    }
    return true;
  }

 private:
  CopyNet& net_;
  SgldConfig cfg_;
  size_t B_ = 0, nb_ = 0;
  double eta_ = 0;
  int64_t steps_ = 0;
  std::vector<float> grad_, a_, start_;
  std::vector<uint32_t> order_, bits_;
};

// Langevin / MALA on x in R^n for the target exp(-U(x) / T).
struct MalaConfig {
  double eps = 0;  // initial step; 0 = 1e-3
  double temperature = 1;
  bool metropolis = true;  // MALA; false = unadjusted Langevin (ULA)
  bool adapt = true;       // adapt eps during burn-in towards the acceptance target (MALA only)
  double target_accept = 0.574;
  int64_t burn_in = 2000, thin = 10, samples = 200;
};

class Mala {
 public:
  explicit Mala(size_t n) : n_(n), xp_(n), gp_(n), g_(n), xi_(n) {}

  // Runs one chain from x (in place). f(x, grad) -> U(x) writes grad = dU/dx. record(x, j) at
  // each kept sample. Returns false if U became non-finite at the current state or stop().
  template <typename F, typename Record, typename Stop>
  bool run(F&& f, double* x, const MalaConfig& cfg, const pl_kernel_table& k, uint64_t seed,
           uint64_t noise_stream, uint64_t accept_stream, Record&& record, Stop&& stop) {
    std::vector<double>& g = g_;
    double U = f(x, g.data());
    if (!std::isfinite(U)) return false;
    eps_ = cfg.eps > 0 ? cfg.eps : 1e-3;
    const double T = cfg.temperature;
    const int64_t thin = std::max<int64_t>(1, cfg.thin);
    const int64_t total = cfg.burn_in + cfg.samples * thin;
    uint64_t counter = 0, ucounter = 0;
    int64_t kept = 0;
    accepted_ = proposed_ = 0;
    for (int64_t t = 1; t <= total; ++t) {
      if (stop()) return false;  // every step, burn-in included
      // Proposal x' = x - eps grad U + sqrt(2 eps T) xi.
      k.gaussian(xi_.data(), n_, seed, noise_stream, counter);
      counter += n_;
      const double sd = std::sqrt(2 * eps_ * T);
      for (size_t i = 0; i < n_; ++i) xp_[i] = x[i] - eps_ * g[i] + sd * double(xi_[i]);
      const double Up = f(xp_.data(), gp_.data());
      bool accept = std::isfinite(Up);
      if (accept && cfg.metropolis) {
        // log q(x | x') - log q(x' | x), q(b | a) ~ exp(-||b - a + eps grad U(a)||^2 / (4 eps T)).
        double fwd = 0, bwd = 0;
        for (size_t i = 0; i < n_; ++i) {
          const double a = xp_[i] - x[i] + eps_ * g[i];
          const double b = x[i] - xp_[i] + eps_ * gp_[i];
          fwd += a * a;
          bwd += b * b;
        }
        const double log_alpha = -(Up - U) / T - (bwd - fwd) / (4 * eps_ * T);
        uint32_t u32 = 0;
        k.uniform_bits(&u32, 1, seed, accept_stream, ucounter++);
        const double u = (double(u32) + 0.5) * (1.0 / 4294967296.0);
        accept = std::log(u) < log_alpha;
        if (cfg.adapt && t <= cfg.burn_in) {
          // Robbins-Monro on log eps towards the target acceptance rate (burn-in only, so the
          // kept chain is a fixed-kernel Markov chain).
          const double a_rate = std::min(1.0, std::exp(std::min(0.0, log_alpha)));
          eps_ *= std::exp((a_rate - cfg.target_accept) / std::sqrt(double(t) + 10.0));
        }
      }
      if (t > cfg.burn_in) ++proposed_;
      if (accept) {
        std::copy(xp_.begin(), xp_.end(), x);
        std::copy(gp_.begin(), gp_.end(), g.begin());
        U = Up;
        if (t > cfg.burn_in) ++accepted_;
      } else if (!cfg.metropolis) {
        return false;  // ULA cannot reject: the chain diverged
      }
      if (t > cfg.burn_in && (t - cfg.burn_in) % thin == 0) {
        record(static_cast<const double*>(x), kept++);
        if (stop()) return false;
      }
    }
    return true;
  }
  double accept_rate() const { return proposed_ ? double(accepted_) / double(proposed_) : 0.0; }
  double eps() const { return eps_; }

 private:
  size_t n_;
  std::vector<double> xp_, gp_, g_;
  std::vector<float> xi_;
  double eps_ = 0;
  int64_t accepted_ = 0, proposed_ = 0;
};

}  // namespace pl::copy::task
