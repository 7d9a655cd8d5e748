// SPDX-License-Identifier: Apache-2.0
// The symmetric model's 1-Gen plateau probe and escape-time measures (docs/markov-minimal.md,
// "The 1-Gen plateau" and "Model choices for tau(N)"), shared by the plugin and its tests:
//   train_plateau_gains  the read-out gains trained alone at beta = delta = 0 (the plateau point);
//   probe_plateau        loss and c = -dL/d(beta, delta) at any five scalars on fresh sequences;
//   readout_mask         which parameters a training step moves (the gains frozen or not);
//   tau_drop             the first step the windowed loss is past a given fraction of its own fall.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "markov_common/predictors.hpp"
#include "markov_minimal/harness.hpp"

namespace pl::markov::minimal {

// Trains the read-out gains alone from the harness's current gains at beta = delta = 0 for
// `steps` optimiser steps (batches of purpose kPlateauBatches) and returns them (g_u, g_h, g_o).
// The net is left at that point; the caller restores it and resets the optimiser.
inline std::array<double, 3> train_plateau_gains(Harness& h, int64_t steps) {
  Net& net = h.net();
  std::vector<bool> train(net.p.size(), true);
  train[kBeta] = train[kDelta] = false;
  net.p[kBeta] = net.p[kDelta] = 0;
  for (int64_t s = 1; s <= steps; ++s) h.train_step(s, train, kPlateauBatches);
  return {net.p[kGu], net.p[kGh], net.p[kGo]};
}

// The loss at theta and its slopes along beta and delta there.
struct PlateauProbe {
  double loss = NAN, bayes2 = NAN, bayes1 = NAN;  // Bayes losses only when asked for
  double c[2] = {NAN, NAN}, se[2] = {NAN, NAN};   // c = -dL/d(beta, delta), standard errors
};

// Mean loss and c = -d(mean loss)/d(beta, delta) at theta on max(64, c_tokens / N) fresh
// sequences (batches of purpose kPlateauGrad: the same sequences at every theta), in double, one
// sequence at a time; the standard errors from the per-sequence gradients. With bayes, also the
// 2-Gen and 1-Gen Bayes losses on the same sequences.
inline PlateauProbe probe_plateau(Harness& h, const std::array<double, kNumSym>& theta,
                                  int64_t c_tokens, bool bayes) {
  const MinConfig& mc = h.config();
  const int N = mc.N, C = mc.C, B = mc.batch;
  const int n = int(std::max<int64_t>(64, c_tokens / N));
  SymModel<double> dm(C, N, nullptr);
  dm.theta = theta;
  std::vector<double> ps(size_t(B) * kNumSym);
  double s[2] = {0, 0}, q[2] = {0, 0}, L = 0, b2 = 0, b1 = 0;
  PredictorScratch ps_scratch;
  std::vector<double> qv(bayes ? size_t(N) * kNumPred * C : 0);
  int done = 0;
  for (int64_t blk = 0; done < n; ++blk) {
    h.make_batch(blk, kPlateauGrad);
    const int nb = std::min(B, n - done);
    const int32_t* seq = h.batch_tokens().data();
    L += dm.run(seq, nb, nullptr, ps.data()) * nb;
    for (int b = 0; b < nb; ++b) {
      for (int k = 0; k < 2; ++k) {
        const double g = ps[size_t(b) * kNumSym + size_t(k)];
        s[k] += g;
        q[k] += g * g;
      }
      if (!bayes) continue;
      const int32_t* x = seq + size_t(b) * (N + 1);
      predict(nullptr, x, N, C, mc.alpha, mc.alpha1, ps_scratch, qv.data());
      for (int t = 0; t < N; ++t) {
        const double* qt = qv.data() + size_t(t) * kNumPred * C;
        b2 -= std::log(std::fmax(qt[kGen2 * C + x[t + 1]], 1e-8)) / N;
        b1 -= std::log(std::fmax(qt[kGen1 * C + x[t + 1]], 1e-8)) / N;
      }
    }
    done += nb;
  }
  PlateauProbe p;
  p.loss = L / n;
  if (bayes) {
    p.bayes2 = b2 / n;
    p.bayes1 = b1 / n;
  }
  for (int k = 0; k < 2; ++k) {
    const double m = s[k] / n, var = (q[k] / n - m * m) * n / std::max(1, n - 1);
    p.c[k] = -m;
    p.se[k] = std::sqrt(std::max(var, 0.0) / n);
  }
  return p;
}

// The parameters a training step of the symmetric model moves: all of them (an empty mask) or,
// with a frozen read-out, beta and delta only.
inline std::vector<bool> readout_mask(bool frozen) {
  if (!frozen) return {};
  std::vector<bool> m(kNumSym, false);
  m[kBeta] = m[kDelta] = true;
  return m;
}

// The escape measured on the fall itself: wl[t - 1] is the windowed training loss after step t
// (NaN while the window fills). Returns the first step t with wl <= from - frac (from - to), the
// point `frac` of the way down from the plateau loss `from` to the final loss `to`; NaN when the
// fall from - to is below min_fall (no escape to time) or is never crossed.
inline double tau_drop(const std::vector<double>& wl, double from, double to, double min_fall,
                       double frac = 0.5) {
  if (!(from - to >= min_fall) || !(from - to > 0)) return NAN;
  const double thr = from - frac * (from - to);
  for (size_t i = 0; i < wl.size(); ++i)
    if (wl[i] <= thr) return double(i + 1);
  return NAN;
}

}  // namespace pl::markov::minimal
