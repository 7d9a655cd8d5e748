// SPDX-License-Identifier: Apache-2.0
#include "copy_common/marginal.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace pl::copy::theory {

BetaConv parse_beta(const std::string& s) {
  if (s == "per_position") return BetaConv::per_position;
  if (s == "per_sequence") return BetaConv::per_sequence;
  throw std::invalid_argument("beta convention must be per_position or per_sequence, got " + s);
}
Wrap parse_wrap(const std::string& s) {
  if (s == "cyclic") return Wrap::cyclic;
  if (s == "drop_first") return Wrap::drop_first;
  throw std::invalid_argument("wrap must be cyclic or drop_first, got " + s);
}
Attention parse_attention(const std::string& s) {
  if (s == "softmax") return Attention::softmax;
  if (s == "linear") return Attention::linear;
  throw std::invalid_argument("attention must be softmax or linear, got " + s);
}

ExactMarginal::ExactMarginal(const MarginalConfig& cfg, const int32_t* tokens, int P)
    : cfg_(cfg), L_(cfg.L), V_(cfg.V), P_(P) {
  if (L_ < 2 || V_ < 1 || P_ < 0)
    throw std::invalid_argument("ExactMarginal: need L >= 2, V >= 1, P >= 0");
  if (!(cfg.kappa > 0 && cfg.sw2 > 0 && cfg.sg2 > 0 && cfg.weight > 0))
    throw std::invalid_argument("ExactMarginal: kappa, sw2, sg2, weight must be > 0");
  R_ = loss_rows(L_, cfg.wrap);
  first_row_ = L_ - R_;  // 0 (cyclic) or 1 (drop_first)
  beta_ = beta_of(cfg.kappa, R_, cfg.beta);
  const size_t n = size_t(P_) * L_;
  tok_.assign(tokens, tokens + n);
  tgt_.resize(n);
  for (int mu = 0; mu < P_; ++mu)
    for (int l = 0; l < L_; ++l) {
      const int32_t t = tok_[size_t(mu) * L_ + l];
      if (t < 0 || t >= V_) throw std::invalid_argument("ExactMarginal: token out of range");
      tgt_[size_t(mu) * L_ + l] = tok_[size_t(mu) * L_ + (l + L_ - 1) % L_];  // y_l = x_{l-1}
    }
  const size_t LL = size_t(L_) * L_, VV = size_t(V_) * V_;
  A_.resize(LL);
  K_.resize(LL);
  GK_.resize(LL);
  dA_.resize(LL);
  for (auto* v : {&C_, &B_, &Lc_, &Minv_, &Gam_, &GC_, &GB_, &tmp_}) v->resize(VV);
  const bool fits = VV * LL <= (size_t(1) << 24);  // 2 x 128 MB at most
  if (cfg.path == MarginalConfig::Path::counts ||
      (cfg.path == MarginalConfig::Path::automatic && fits && VV < size_t(P_))) {
    n2_.assign(VV * LL, 0.0);  // gathered on the first evaluation (gather_counts)
    nb_.assign(VV * LL, 0.0);
  }
}

void ExactMarginal::start() const {
  cancelled_ = false;
  work_ = 0;
  polls_ = 0;
}

// Work units of the cancel check (tick): a multiply-add over contiguous rows counts 1; a
// scatter-add into a V x V (or V^2 L^2) table or a multiply-add down a column counts kStrided,
// since at V in the thousands each misses the caches (measured: the column loop of the inverse
// at V = 2048 took ~0.9 s per 1e8 of them).
constexpr double kStrided = 8;

// Sequence by sequence from the first one not yet counted, the cancel check between them.
bool ExactMarginal::gather_counts() const {
  const int L = L_, V = V_;
  const size_t LL = size_t(L) * L;
  for (; counted_ < P_; ++counted_) {
    if (tick(kStrided * (double(LL) + double(R_) * L))) return false;
    const int32_t* t = &tok_[size_t(counted_) * L];
    const int32_t* y = &tgt_[size_t(counted_) * L];
    for (int i = 0; i < L; ++i)
      for (int j = 0; j < L; ++j)
        n2_[(size_t(t[i]) * V + size_t(t[j])) * LL + size_t(i) * L + j] += 1;
    for (int l = first_row_; l < L; ++l)
      for (int j = 0; j < L; ++j)
        nb_[(size_t(t[j]) * V + size_t(y[l])) * LL + size_t(l) * L + j] += 1;
  }
  return true;
}

// C = w sum_mu X^T (A_R^T A_R) X, B = w sum_mu X^T A_R^T Y: O(R L^2 + P L^2).
// Every outer loop here and below calls tick() with its iteration's work (the cancel check).
bool ExactMarginal::build(const double* A) const {
  const int L = L_, V = V_;
  if (uses_counts() && !gather_counts()) return false;
  // K = A_R^T A_R (L x L)
  std::fill(K_.begin(), K_.end(), 0.0);
  for (int l = first_row_; l < L; ++l) {
    if (tick(double(L) * L)) return false;
    const double* a = A + size_t(l) * L;
    for (int i = 0; i < L; ++i) {
      const double ai = a[i];
      if (ai == 0.0) continue;
      double* k = &K_[size_t(i) * L];
      for (int j = 0; j < L; ++j) k[j] += ai * a[j];
    }
  }
  std::fill(C_.begin(), C_.end(), 0.0);
  std::fill(B_.begin(), B_.end(), 0.0);
  if (uses_counts()) {  // C[e] = <K, n2[e]>, B[e] = <A_R, nb[e]> (nb is 0 outside the loss rows)
    const size_t LL = size_t(L) * L;
    for (size_t e = 0; e < C_.size(); ++e) {
      if (tick(2.0 * double(LL))) return false;
      const double* n2 = &n2_[e * LL];
      const double* nb = &nb_[e * LL];
      double c = 0.0, b = 0.0;
      for (size_t k = 0; k < LL; ++k) {
        c += K_[k] * n2[k];
        b += A[k] * nb[k];
      }
      C_[e] = c;
      B_[e] = b;
    }
  }
  for (int mu = 0; mu < (uses_counts() ? 0 : P_); ++mu) {
    if (tick(kStrided * (double(L) * L + double(R_) * L))) return false;
    const int32_t* t = &tok_[size_t(mu) * L];
    const int32_t* y = &tgt_[size_t(mu) * L];
    for (int i = 0; i < L; ++i) {  // C[t_i, t_j] += K[i, j]
      double* c = &C_[size_t(t[i]) * V];
      const double* k = &K_[size_t(i) * L];
      for (int j = 0; j < L; ++j) c[t[j]] += k[j];
    }
    for (int l = first_row_; l < L; ++l) {  // B[t_j, y_l] += A[l, j]
      const double* a = A + size_t(l) * L;
      const int32_t yl = y[l];
      for (int j = 0; j < L; ++j) B_[size_t(t[j]) * V + yl] += a[j];
    }
  }
  if (cfg_.weight != 1.0) {
    for (auto& c : C_) c *= cfg_.weight;
    for (auto& b : B_) b *= cfg_.weight;
  }
  return factor();
}

// M = I/sw2 + beta C, Cholesky M = Lc Lc^T (lower, row-major).
bool ExactMarginal::factor() const {
  const int V = V_;
  for (int i = 0; i < V; ++i) {
    if (tick(0.5 * double(i) * i + i)) return false;
    for (int j = 0; j <= i; ++j) {
      double s = beta_ * C_[size_t(i) * V + j] + (i == j ? 1.0 / cfg_.sw2 : 0.0);
      const double* li = &Lc_[size_t(i) * V];
      const double* lj = &Lc_[size_t(j) * V];
      for (int k = 0; k < j; ++k) s -= li[k] * lj[k];
      if (i == j) {
        if (!(s > 0))
          throw std::runtime_error("ExactMarginal: M not positive definite (non-finite A?)");
        Lc_[size_t(i) * V + i] = std::sqrt(s);
      } else {
        Lc_[size_t(i) * V + j] = s / lj[j];
      }
    }
  }
  for (int i = 0; i < V; ++i)
    for (int j = i + 1; j < V; ++j) Lc_[size_t(i) * V + j] = 0.0;
  return true;
}

// Value from the factor. Without gradient: tr(B^T M^{-1} B) = ||Lc^{-1} B||_F^2.
// With gradient: Minv, Gamma = M^{-1} B, dS/dC = (V beta/2) M^{-1} + (beta^3/2) Gamma Gamma^T,
// dS/dB = -beta^2 Gamma.
double ExactMarginal::s_from_factor(bool want_grad) const {
  const int V = V_;
  const double beta = beta_;
  double logdet = 0.0;  // ln det(sw2 M) = ln det(I + sw2 beta C)
  for (int i = 0; i < V; ++i) logdet += 2.0 * std::log(Lc_[size_t(i) * V + i]) + std::log(cfg_.sw2);
  const double yy = cfg_.weight * double(P_) * R_;  // tr(Y^T Y): one-hot targets
  double quad = 0.0;                                // tr(B^T M^{-1} B)
  if (!want_grad) {
    // tmp = Lc^{-1} B by forward substitution, row by row.
    for (int i = 0; i < V; ++i) {
      if (tick(double(i + 1) * V)) return NAN;
      double* ti = &tmp_[size_t(i) * V];
      const double* bi = &B_[size_t(i) * V];
      for (int c = 0; c < V; ++c) ti[c] = bi[c];
      const double* li = &Lc_[size_t(i) * V];
      for (int k = 0; k < i; ++k) {
        const double lik = li[k];
        const double* tk = &tmp_[size_t(k) * V];
        for (int c = 0; c < V; ++c) ti[c] -= lik * tk[c];
      }
      const double inv = 1.0 / li[i];
      for (int c = 0; c < V; ++c) {
        ti[c] *= inv;
        quad += ti[c] * ti[c];
      }
    }
  } else {
    // tmp = Lc^{-1} (lower), then Minv = tmp^T tmp.
    std::fill(tmp_.begin(), tmp_.end(), 0.0);
    for (int i = 0; i < V; ++i) {
      if (tick(kStrided * (0.5 * double(i) * i + 1))) return NAN;
      const double* li = &Lc_[size_t(i) * V];
      double* ti = &tmp_[size_t(i) * V];
      const double inv = 1.0 / li[i];
      for (int j = 0; j < i; ++j) {  // row i of Lc^{-1}: -(sum_k<i l_ik inv_kj)/l_ii
        double s = 0.0;
        for (int k = j; k < i; ++k) s += li[k] * tmp_[size_t(k) * V + j];
        ti[j] = -s * inv;
      }
      ti[i] = inv;
    }
    std::fill(Minv_.begin(), Minv_.end(), 0.0);
    for (int m = 0; m < V; ++m) {
      if (tick(double(m + 1) * (m + 1))) return NAN;
      const double* tm = &tmp_[size_t(m) * V];
      for (int i = 0; i <= m; ++i) {
        const double tmi = tm[i];
        double* mi = &Minv_[size_t(i) * V];
        for (int k = 0; k <= m; ++k) mi[k] += tmi * tm[k];
      }
    }
    // Gamma = Minv B
    std::fill(Gam_.begin(), Gam_.end(), 0.0);
    for (int i = 0; i < V; ++i) {
      if (tick(double(V) * V)) return NAN;
      double* gi = &Gam_[size_t(i) * V];
      const double* mi = &Minv_[size_t(i) * V];
      for (int k = 0; k < V; ++k) {
        const double mik = mi[k];
        const double* bk = &B_[size_t(k) * V];
        for (int c = 0; c < V; ++c) gi[c] += mik * bk[c];
      }
    }
    for (size_t e = 0; e < B_.size(); ++e) quad += B_[e] * Gam_[e];
    const double b3 = 0.5 * beta * beta * beta, vb = 0.5 * V * beta;
    for (int i = 0; i < V; ++i) {
      if (tick(double(V) * V)) return NAN;
      const double* gi = &Gam_[size_t(i) * V];
      for (int j = 0; j < V; ++j) {
        const double* gj = &Gam_[size_t(j) * V];
        double s = 0.0;
        for (int c = 0; c < V; ++c) s += gi[c] * gj[c];
        GC_[size_t(i) * V + j] = vb * Minv_[size_t(i) * V + j] + b3 * s;
      }
    }
    for (size_t e = 0; e < B_.size(); ++e) GB_[e] = -beta * beta * Gam_[e];
  }
  return 0.5 * V * logdet - 0.5 * beta * beta * quad + 0.5 * beta * yy;
}

// dS/dA from dS/dC (GC_) and dS/dB (GB_): dS/dK = w sum_mu X GC X^T, dS/dA_R = 2 A_R dS/dK
// (GC symmetric), plus dS/dA[l, j] = w sum_mu GB[t_j, y_l].
bool ExactMarginal::grad_A(const double* A, double* dA) const {
  const int L = L_, V = V_;
  std::fill(GK_.begin(), GK_.end(), 0.0);
  std::fill(dA, dA + size_t(L) * L, 0.0);
  if (uses_counts()) {  // GK = sum_e GC[e] n2[e], dA (loss rows) = sum_e GB[e] nb[e]
    const size_t LL = size_t(L) * L;
    for (size_t e = 0; e < GC_.size(); ++e) {
      if (tick(2.0 * double(LL))) return false;
      const double gc = GC_[e], gb = GB_[e];
      const double* n2 = &n2_[e * LL];
      const double* nb = &nb_[e * LL];
      for (size_t k = 0; k < LL; ++k) {
        GK_[k] += gc * n2[k];
        dA[k] += gb * nb[k];
      }
    }
  }
  for (int mu = 0; mu < (uses_counts() ? 0 : P_); ++mu) {
    if (tick(kStrided * (double(L) * L + double(R_) * L))) return false;
    const int32_t* t = &tok_[size_t(mu) * L];
    const int32_t* y = &tgt_[size_t(mu) * L];
    for (int i = 0; i < L; ++i) {
      const double* gc = &GC_[size_t(t[i]) * V];
      double* gk = &GK_[size_t(i) * L];
      for (int j = 0; j < L; ++j) gk[j] += gc[t[j]];
    }
    for (int l = first_row_; l < L; ++l) {
      const int32_t yl = y[l];
      double* d = dA + size_t(l) * L;
      for (int j = 0; j < L; ++j) d[j] += GB_[size_t(t[j]) * V + yl];
    }
  }
  const double w = cfg_.weight;
  for (int l = first_row_; l < L; ++l) {
    if (tick(double(L) * L + L)) return false;
    const double* a = A + size_t(l) * L;
    double* d = dA + size_t(l) * L;
    for (int j = 0; j < L; ++j) d[j] *= w;
    for (int i = 0; i < L; ++i) {
      const double ai = 2.0 * w * a[i];
      if (ai == 0.0) continue;
      const double* gk = &GK_[size_t(i) * L];
      for (int j = 0; j < L; ++j) d[j] += ai * gk[j];
    }
  }
  return true;
}

double ExactMarginal::s_data(const double* A, double* dA) const {
  start();
  if (!build(A)) return NAN;
  const double s = s_from_factor(dA != nullptr);
  if (cancelled_ || (dA && !grad_A(A, dA))) return NAN;
  return s;
}

void ExactMarginal::attention_of(const double* G, double* A) const {
  const int L = L_;
  for (int l = 0; l < L; ++l) {
    const double* g = G + size_t(l) * L;
    double* a = A + size_t(l) * L;
    const int n = cfg_.causal ? l + 1 : L;  // allowed positions 0..n-1
    if (cfg_.attention == Attention::linear) {
      for (int j = 0; j < L; ++j) a[j] = j < n ? g[j] : 0.0;
      continue;
    }
    double m = g[0];
    for (int j = 1; j < n; ++j) m = std::max(m, g[j]);
    double z = 0.0;
    for (int j = 0; j < n; ++j) z += (a[j] = std::exp(g[j] - m));
    const double iz = 1.0 / z;
    for (int j = 0; j < L; ++j) a[j] = j < n ? a[j] * iz : 0.0;
  }
}

double ExactMarginal::action(const double* G, double* dG) const {
  const int L = L_;
  const size_t LL = size_t(L) * L;
  attention_of(G, A_.data());
  const double s = s_data(A_.data(), dG ? dA_.data() : nullptr);
  if (cancelled_) return NAN;
  double prior = 0.0;
  for (size_t e = 0; e < LL; ++e) prior += G[e] * G[e];
  prior *= 0.5 / cfg_.sg2;
  if (dG) {
    for (int l = 0; l < L; ++l) {
      const double* a = &A_[size_t(l) * L];
      const double* da = &dA_[size_t(l) * L];
      double* dg = dG + size_t(l) * L;
      if (cfg_.attention == Attention::linear) {
        const int n = cfg_.causal ? l + 1 : L;
        for (int j = 0; j < L; ++j) dg[j] = j < n ? da[j] : 0.0;
      } else {  // softmax backward: dG = A o (dA - <A, dA>_row); masked entries have A = 0
        double dot = 0.0;
        for (int j = 0; j < L; ++j) dot += a[j] * da[j];
        for (int j = 0; j < L; ++j) dg[j] = a[j] * (da[j] - dot);
      }
    }
    for (size_t e = 0; e < LL; ++e) dG[e] += G[e] / cfg_.sg2;
  }
  return s + prior;
}

void ExactMarginal::readout(const double* A, double* W) const {
  start();
  const int V = V_;
  if (build(A)) s_from_factor(true);  // Gam_ = M^{-1} B
  if (cancelled_) {
    std::fill(W, W + size_t(V) * V, NAN);
    return;
  }
  for (int i = 0; i < V; ++i)
    for (int j = 0; j < V; ++j) W[size_t(i) * V + j] = beta_ * Gam_[size_t(j) * V + i];
}

// sum ||W h - y||^2 = tr(W C W^T) - 2 tr(W B) + tr(Y^T Y) with W = beta Gamma^T.
double ExactMarginal::train_mse(const double* A) const {
  start();
  if (!build(A)) return NAN;
  s_from_factor(true);
  if (cancelled_) return NAN;
  const int V = V_;
  const double b = beta_;
  double wcw = 0.0, wb = 0.0;
  for (int i = 0; i < V; ++i) {  // W_i. = b Gam[:, i]; (W C W^T)_ii = b^2 Gam[:,i]^T C Gam[:,i]
    if (tick(kStrided * double(V) * V)) return NAN;  // Gam read down a column
    for (int j = 0; j < V; ++j) {
      const double gji = Gam_[size_t(j) * V + i];
      if (gji == 0.0) continue;
      const double* cj = &C_[size_t(j) * V];
      double s = 0.0;
      for (int k = 0; k < V; ++k) s += cj[k] * Gam_[size_t(k) * V + i];
      wcw += b * b * gji * s;
      wb += b * gji * B_[size_t(j) * V + i];
    }
  }
  const double yy = cfg_.weight * double(P_) * R_;
  return (wcw - 2.0 * wb + yy) / yy;
}

}  // namespace pl::copy::theory
