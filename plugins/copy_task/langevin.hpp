// SPDX-License-Identifier: Apache-2.0
// Langevin/MALA on G with the read-out integrated out: an adapter from the copy net's config and
// data to pl::copy::theory::ExactMarginal (plugins/copy_common/marginal.hpp, shared with
// copy_theory).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "copy_common/marginal.hpp"
#include "copy_task/model.hpp"

namespace pl::copy::task {

inline pl::copy::theory::MarginalConfig marginal_config(const NetConfig& c) {
  pl::copy::theory::MarginalConfig m;
  m.L = c.L;
  m.V = c.V;
  m.kappa = c.kappa;
  m.sw2 = c.sw2;
  m.sg2 = c.sg2;
  m.beta = c.per_position ? pl::copy::theory::BetaConv::per_position
                          : pl::copy::theory::BetaConv::per_sequence;
  m.wrap = c.wrap == pl::copy::Wrap::cyclic ? pl::copy::theory::Wrap::cyclic
                                            : pl::copy::theory::Wrap::drop_first;
  m.attention =
      c.softmax ? pl::copy::theory::Attention::softmax : pl::copy::theory::Attention::linear;
  m.causal = c.causal;
  m.path = c.loss_path == NetConfig::LossPath::direct
               ? pl::copy::theory::MarginalConfig::Path::direct
           : c.loss_path == NetConfig::LossPath::stats
               ? pl::copy::theory::MarginalConfig::Path::counts
               : pl::copy::theory::MarginalConfig::Path::automatic;
  return m;
}

// U(G) = S_data(A(G)) + ||G||^2 / (2 sg2) on the net's training tokens (double precision).
class MarginalPotential {
 public:
  explicit MarginalPotential(const CopyNet& net)
      : m_(marginal_config(net.config()), net.tokens().data(), net.P()),
        L_(net.config().L),
        V_(net.config().V),
        Ad_(size_t(L_) * L_),
        Wd_(size_t(V_) * V_) {}

  double action(const double* G, double* grad) const { return m_.action(G, grad); }
  // Ctrl-C inside one evaluation (ExactMarginal::set_cancel): a cancelled one returns NaN.
  void set_cancel(std::function<bool()> cancel) { m_.set_cancel(std::move(cancel)); }
  bool cancelled() const { return m_.cancelled(); }
  // A(G) as float (L x L).
  void attention(const double* G, float* A) {
    m_.attention_of(G, Ad_.data());
    for (size_t i = 0; i < Ad_.size(); ++i) A[i] = float(Ad_[i]);
  }
  // theta = [W | G] with the posterior-mean read-out W (f = h W^T) of A(G); G left untouched.
  void posterior_mean_readout(const double* G, float* theta) {
    m_.attention_of(G, Ad_.data());
    m_.readout(Ad_.data(), Wd_.data());
    for (size_t i = 0; i < Wd_.size(); ++i) theta[i] = float(Wd_[i]);
  }

 private:
  pl::copy::theory::ExactMarginal m_;
  int L_, V_;
  std::vector<double> Ad_, Wd_;
};

}  // namespace pl::copy::task
