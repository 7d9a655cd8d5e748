// SPDX-License-Identifier: Apache-2.0
// One training run of a minimal model on the Markov task: the chains, online batches and
// evaluation sets of markov_icl (same streams: the same chain_seed gives the same K chains and the
// same evaluation sequences), the five Bayes predictors and the KL phase metric, and a plain
// optimiser (Adam or SGD) over the model's parameters held in double.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "markov_common/chains.hpp"
#include "markov_common/predictors.hpp"
#include "markov_common/trainer.hpp"
#include "markov_minimal/induction.hpp"
#include "markov_minimal/memoriser.hpp"
#include "markov_minimal/symmetric.hpp"

namespace pl::markov::minimal {

enum class Kind { kSymmetric, kInduction, kMemoriser };

// This plugin's own random-stream purposes, next to pl::markov::Stream's (seed-derived).
constexpr uint64_t kPlateauBatches = 7;  // the symmetric model's plateau training batches
constexpr uint64_t kPlateauGrad = 8;     // the sequences of the plateau loss and gradient

// The data side (C, N, K, infinite, alpha, alpha1, batch, n_eval, late_frac, chain_seed) is
// markov_icl's DataConfig.
struct MinConfig : DataConfig {
  MinConfig() {
    N = 64;
    infinite = true;
    alpha1 = 0;
    batch = 32;
    n_eval = 500;
  }
  Kind kind = Kind::kSymmetric;
  int64_t steps = 2000;
  bool sgd = false;  // plain SGD instead of Adam
  double lr = 1e-2, beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  // symmetric
  double init[kNumSym] = {0, 0, 0, 0, 0};
  // induction / memoriser
  int d_head = 16, d_phi = 32, width = 128;
  bool phi_gelu = false;
  double init_scale = 0.02;
  uint64_t seed = 0;
};

// A model behind one interface: parameters and gradients in double.
class Net {
 public:
  virtual ~Net() = default;
  std::vector<double> p, g;
  // Mean loss of nb sequences; gradients into g if back; log-probabilities if logp.
  virtual double run(const int32_t* seq, int nb, bool back, double* logp) = 0;
};

class SymNet : public Net {
 public:
  SymNet(const MinConfig& c, const pl_kernel_table* k) : m_(c.C, c.N, k) {
    p.assign(c.init, c.init + kNumSym);
    g.assign(kNumSym, 0.0);
  }
  double run(const int32_t* seq, int nb, bool back, double* logp) override {
    for (int i = 0; i < kNumSym; ++i) m_.theta[size_t(i)] = p[size_t(i)];
    return m_.run(seq, nb, back ? g.data() : nullptr, nullptr, logp);
  }

 private:
  SymModel<float> m_;
};

// Float model on the kernels, parameters mirrored in double for the optimiser.
template <class M>
class FloatNet : public Net {
 public:
  explicit FloatNet(std::unique_ptr<M> m) : m_(std::move(m)) {
    p.assign(m_->params.begin(), m_->params.end());
    g.assign(p.size(), 0.0);
  }
  double run(const int32_t* seq, int nb, bool back, double* logp) override {
    for (size_t i = 0; i < p.size(); ++i) m_->params[i] = float(p[i]);
    const double l = m_->run(seq, nb, back, logp);
    if (back)
      for (size_t i = 0; i < p.size(); ++i) g[i] = double(m_->grads[i]);
    return l;
  }
  M& model() { return *m_; }

 private:
  std::unique_ptr<M> m_;
};

class Harness {
 public:
  Harness(const MinConfig& mc, const pl_kernel_table& k)
      : c_(mc), k_(require_kernels(k)), data_(mc, k_) {
    c_.alpha1 = data_.alpha1();
    std::vector<float> z;
    switch (c_.kind) {
      case Kind::kSymmetric:
        net_ = std::make_unique<SymNet>(c_, &k_);
        break;
      case Kind::kInduction: {
        auto m = std::make_unique<InductionModel<float>>(c_.C, c_.N, c_.d_head, c_.batch, &k_);
        z.resize(m->num_params());
        k_.gaussian(z.data(), z.size(), stream_seed(c_.seed, Stream::kInit), 0, 0);
        for (size_t i = 0; i < z.size(); ++i) m->params[i] = float(c_.init_scale * z[i]);
        net_ = std::make_unique<FloatNet<InductionModel<float>>>(std::move(m));
        break;
      }
      case Kind::kMemoriser: {
        auto m = std::make_unique<MemoriserModel<float>>(c_.C, c_.N, c_.d_phi, c_.width,
                                                         c_.phi_gelu, c_.batch, &k_);
        z.resize(m->num_params());
        k_.gaussian(z.data(), z.size(), stream_seed(c_.seed, Stream::kInit), 0, 0);
        m->init_from_normals(z.data(), c_.init_scale);
        net_ = std::make_unique<FloatNet<MemoriserModel<float>>>(std::move(m));
        break;
      }
    }
    m_.assign(net_->p.size(), 0.0);
    v_.assign(net_->p.size(), 0.0);
  }

  Net& net() { return *net_; }
  const MinConfig& config() const { return c_; }
  const MarkovData& data() const { return data_; }
  const EvalSet& eval_set(int s) const { return data_.eval_set(s); }
  bool mem_defined() const { return data_.mem_defined(); }
  const std::vector<int32_t>& batch_tokens() const { return data_.batch(); }

  // The batch of `step` from its own streams (as markov_icl's Trainer::make_batch; purpose
  // Stream::kBatches for training, kPlateauBatches / kPlateauGrad for the symmetric model's
  // plateau probe).
  void make_batch(int64_t step, uint64_t purpose = uint64_t(Stream::kBatches)) {
    data_.make_batch(pl::sdk::derive(c_.seed, purpose), step);
  }

  // One optimiser step at 1-based step; `train` masks parameters (empty: all). Returns the loss.
  double train_step(int64_t step, const std::vector<bool>& train = {},
                    uint64_t purpose = uint64_t(Stream::kBatches)) {
    make_batch(step, purpose);
    Net& n = *net_;
    const double loss = n.run(data_.batch().data(), c_.batch, true, nullptr);
    const double bc1 = 1 - std::pow(c_.beta1, double(step)),
                 bc2 = 1 - std::pow(c_.beta2, double(step));
    for (size_t i = 0; i < n.p.size(); ++i) {
      if (!train.empty() && !train[i]) continue;
      const double gi = n.g[i];
      if (c_.sgd) {
        n.p[i] -= c_.lr * gi;
        continue;
      }
      m_[i] = c_.beta1 * m_[i] + (1 - c_.beta1) * gi;
      v_[i] = c_.beta2 * v_[i] + (1 - c_.beta2) * gi * gi;
      n.p[i] -= c_.lr * (m_[i] / bc1) / (std::sqrt(v_[i] / bc2) + c_.eps);
    }
    return loss;
  }
  void reset_optimiser() {
    std::fill(m_.begin(), m_.end(), 0.0);
    std::fill(v_.begin(), v_.end(), 0.0);
  }

  // Losses, KL(q_A || p_net) per predictor (all positions and the late window), phase labels.
  EvalResult evaluate() {
    return data_.evaluate(
        [&](const int32_t* seq, int nb, double* logp) { return net_->run(seq, nb, false, logp); });
  }

 private:
  MinConfig c_;
  pl_kernel_table k_;
  MarkovData data_;
  std::unique_ptr<Net> net_;
  std::vector<double> m_, v_;
};

}  // namespace pl::markov::minimal
