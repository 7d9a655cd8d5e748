// SPDX-License-Identifier: Apache-2.0
#include "copy_common/theory.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace pl::copy::theory {

PopStats stats_of(const Model& m, const double* A) {
  const int L = m.L;
  PopStats st;
  for (int l = L - m.R(); l < L; ++l) {
    const double* a = A + size_t(l) * L;
    double s = 0;
    for (int j = 0; j < L; ++j) {
      st.Q += a[j] * a[j];
      s += a[j];
    }
    st.D += a[(l + L - 1) % L];
    st.s1 += s;
    st.s2 += s * s;
  }
  return st;
}

double s_pop(const Model& m, double P, const PopStats& st, PopStats* g) {
  const double V = m.V, b = m.beta(), sw2 = m.sw2;
  const double cpe = P * st.Q / V, cpa = P * st.s2 / V;  // c_perp, c_par
  const double bpe = P * st.D / V, bpa = P * st.s1 / V;  // b_perp, b_par
  const double mpe = 1 / sw2 + b * cpe, mpa = 1 / sw2 + b * cpa;
  const double ld = m.map ? 0.0 : 1.0;  // log-det (W entropy) terms: marginal only
  const double S =
      ld * (0.5 * V * (V - 1) * std::log1p(sw2 * b * cpe) + 0.5 * V * std::log1p(sw2 * b * cpa)) -
      0.5 * b * b * ((V - 1) * bpe * bpe / mpe + bpa * bpa / mpa) + 0.5 * b * P * m.R();
  if (g) {
    // d/dc of (V k/2) ln(1 + sw2 b c) = (V k/2) b/m; d/dm of -b^2 x^2/(2m) = b^2 x^2/(2 m^2).
    const double dS_dcpe =
        ld * 0.5 * V * (V - 1) * b / mpe + 0.5 * b * b * (V - 1) * bpe * bpe / (mpe * mpe) * b;
    const double dS_dcpa = ld * 0.5 * V * b / mpa + 0.5 * b * b * bpa * bpa / (mpa * mpa) * b;
    g->Q = dS_dcpe * P / V;
    g->s2 = dS_dcpa * P / V;
    g->D = -b * b * (V - 1) * bpe / mpe * P / V;
    g->s1 = -b * b * bpa / mpa * P / V;
  }
  return S;
}

// Per eigen-direction of the population C: w = beta b / m; residual c w^2 - 2 b w (+ targets).
double mse_pop(const Model& m, double P, const PopStats& st) {
  const double V = m.V, b = m.beta(), sw2 = m.sw2;
  const double cpe = P * st.Q / V, cpa = P * st.s2 / V, bpe = P * st.D / V, bpa = P * st.s1 / V;
  const double wpe = b * bpe / (1 / sw2 + b * cpe), wpa = b * bpa / (1 / sw2 + b * cpa);
  const double yy = P * m.R();
  return ((V - 1) * (wpe * wpe * cpe - 2 * wpe * bpe) + (wpa * wpa * cpa - 2 * wpa * bpa) + yy) /
         yy;
}

// ---------------------------------------------------------------- linear
PopStats linear_plane_stats(const Model& m, double c1, double cG) {
  const double L = m.L, R = m.R();
  PopStats st;
  st.Q = R * (c1 * c1 / L + 2 * c1 * cG / L + cG * cG);
  st.D = R * (c1 / L + cG);
  st.s1 = R * (c1 + cG);
  st.s2 = R * (c1 + cG) * (c1 + cG);
  return st;
}

double linear_action(const Model& m, double P, double c1, double cG, double* grad) {
  const PopStats st = linear_plane_stats(m, c1, cG);
  PopStats g;
  const double S = s_pop(m, P, st, grad ? &g : nullptr) + st.Q / (2 * m.sg2);
  if (grad) {
    const double L = m.L, R = m.R();
    const double gQ = g.Q + 1 / (2 * m.sg2);
    // chain rule through the plane: dQ/dc1 = R(2c1 + 2cG)/L, dQ/dcG = R(2c1/L + 2cG), ...
    grad[0] = gQ * R * (2 * c1 + 2 * cG) / L + g.D * R / L + g.s1 * R + g.s2 * 2 * R * (c1 + cG);
    grad[1] = gQ * R * (2 * c1 / L + 2 * cG) + g.D * R + g.s1 * R + g.s2 * 2 * R * (c1 + cG);
  }
  return S;
}

// Second order of S_pop at A = 0 (ln(1+x) ~ x, 1/m ~ sw2):
// S ~ [(V-1)k + 1/sg2] Q/2 + k s2/2 - b'/2 [(V-1) D^2 + s1^2],  k = sw2 beta P, b' = beta^2 sw2
// P^2/V^2. Each of Q, s2, D^2, s1^2 is x^T M x on x = (c1, cG); the Hessian is the matching sum of
// M's.
void linear_hessian0(const Model& m, double P, double H[2][2]) {
  const double L = m.L, R = m.R(), V = m.V, b = m.beta();
  // k: from the log-det terms (absent in the MAP profile)
  const double k = m.map ? 0.0 : m.sw2 * b * P, bp = b * b * m.sw2 * P * P / (V * V);
  const double MQ[2][2] = {{R / L, R / L}, {R / L, R}};
  const double MS2[2][2] = {{R, R}, {R, R}};
  const double MD[2][2] = {{R * R / (L * L), R * R / L}, {R * R / L, R * R}};
  const double MS1[2][2] = {{R * R, R * R}, {R * R, R * R}};
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      H[i][j] = ((V - 1) * k + 1 / m.sg2) * MQ[i][j] + k * MS2[i][j] -
                bp * ((V - 1) * MD[i][j] + MS1[i][j]);
}

double linear_threshold_closed(const Model& m) {
  const double V = m.V, R = m.R(), b = m.beta();
  if (m.map) return std::sqrt(V / (m.sw2 * m.sg2 * R)) / b;
  return V * V / (2 * b * R) * (1 + std::sqrt(1 + 4 * R / (m.sw2 * m.sg2 * V * V * V)));
}

static double lambda_min2(const double H[2][2]) {
  const double tr = H[0][0] + H[1][1], det = H[0][0] * H[1][1] - H[0][1] * H[1][0];
  const double disc = std::sqrt(std::max(0.0, 0.25 * tr * tr - det));
  return 0.5 * tr - disc;
}

double linear_threshold_plane(const Model& m, double rel_tol) {
  auto f = [&](double P) {
    double H[2][2];
    linear_hessian0(m, P, H);
    return lambda_min2(H);
  };
  // lambda_min > 0 at small P; the closed form bounds the threshold from above (the shift direction
  // alone is unstable there), so bracket from below.
  double hi = linear_threshold_closed(m) * 1.000001, lo = hi;
  while (f(lo) <= 0 && lo > 1e-12) lo *= 0.5;
  if (f(hi) > 0) {  // should not happen; widen
    while (f(hi) > 0 && hi < 1e300) hi *= 2;
  }
  return bisect(f, lo, hi, rel_tol);
}

// ---------------------------------------------------------------- softmax
SoftRow softmax_row(const Model& m, double Delta) {
  const double L = m.L, s2 = m.rest_variance();
  // Z = e^Delta (1 + r), r = (L-1) e^{s2/2 - Delta}: stable for large Delta.
  const double r = (L - 1) * std::exp(0.5 * s2 - Delta);
  SoftRow s;
  s.a = 1 / (1 + r);
  s.q_rest = (L - 1) * std::exp(2 * s2 - 2 * Delta) / ((1 + r) * (1 + r));
  s.da = s.a * (1 - s.a);           // d a/dDelta
  s.dq_rest = -2 * s.q_rest * s.a;  // d ln Z/dDelta = a
  return s;
}

// The population statistics of R identical softmax rows.
static PopStats row_stats(const Model& m, const SoftRow& s) {
  const double R = m.R();
  PopStats st;
  st.Q = R * (s.a * s.a + s.q_rest);
  st.D = R * s.a;
  st.s1 = R;
  st.s2 = R;
  return st;
}

PopStats softmax_stats(const Model& m, double Delta) { return row_stats(m, softmax_row(m, Delta)); }

double softmax_action(const Model& m, double P, double Delta, double* dDelta) {
  const SoftRow s = softmax_row(m, Delta);
  const double R = m.R();
  const PopStats st = row_stats(m, s);
  PopStats g;
  const double S = R * Delta * Delta / (2 * m.sg2) + s_pop(m, P, st, dDelta ? &g : nullptr);
  if (dDelta) *dDelta = R * Delta / m.sg2 + g.Q * R * (2 * s.a * s.da + s.dq_rest) + g.D * R * s.da;
  return S;
}

// a_G, a_1 over the full L x L matrix; rows outside the loss sit at their prior optimum
// (softmax: uniform, linear: zero).
static void coords(const Model& m, bool softmax, const PopStats& st, Branch& b) {
  const double L = m.L, extra = L - m.R();
  const double D = st.D + (softmax ? extra / L : 0.0), T = st.s1 + (softmax ? extra : 0.0);
  b.a_G = (D - T / L) / (L - 1);
  b.a_1 = (T - D) / (L - 1);
}

static void flag_global(std::vector<Branch>& v) {
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i].action < v[best].action) best = i;
  for (size_t i = 0; i < v.size(); ++i) v[i].global = (i == best);
}

std::vector<Branch> softmax_minima(const Model& m, double P) {
  // Scan dS/dDelta on a fine grid for - to + sign changes, refine each by bisection.
  const double lo = -4.0, hi = 2.0 * std::log(double(m.L)) + 3.0 * m.sg2 + 12.0, h = 0.01;
  auto dS = [&](double x) {
    double d;
    softmax_action(m, P, x, &d);
    return d;
  };
  std::vector<Branch> out;
  double x0 = lo, d0 = dS(x0);
  const int n = int((hi - lo) / h) + 1;
  for (int i = 1; i <= n; ++i) {
    const double x1 = lo + i * h, d1 = dS(x1);
    if (d0 < 0 && d1 >= 0) {
      const double x = bisect(dS, x0, x1, 1e-13);
      Branch b;
      b.x1 = x;
      b.action = softmax_action(m, P, x);
      b.st = softmax_stats(m, x);
      b.mse = mse_pop(m, P, b.st);
      coords(m, true, b.st, b);
      out.push_back(b);
    }
    x0 = x1;
    d0 = d1;
  }
  for (size_t i = 0; i < out.size(); ++i)
    out[i].name = out.size() >= 2 ? (i == 0 ? "low" : "high") : (out[i].a_G < 0.5 ? "low" : "high");
  flag_global(out);
  return out;
}

// Hessian of the linear action on the (c1, cG) plane at x: central differences of the analytic
// gradient with steps rel_step (1 + |x_j|), symmetrised.
static void linear_fd_hessian(const Model& m, double P, const double x[2], double rel_step,
                              double H[2][2]) {
  for (int j = 0; j < 2; ++j) {
    const double e = rel_step * (1 + std::fabs(x[j]));
    double xp[2] = {x[0], x[1]}, xm[2] = {x[0], x[1]}, gp[2], gm[2];
    xp[j] += e;
    xm[j] -= e;
    linear_action(m, P, xp[0], xp[1], gp);
    linear_action(m, P, xm[0], xm[1], gm);
    for (int i = 0; i < 2; ++i) H[i][j] = (gp[i] - gm[i]) / (2 * e);
  }
  H[0][1] = H[1][0] = 0.5 * (H[0][1] + H[1][0]);
}

// Damped Newton on the (c1, cG) plane with a finite-difference Hessian of the analytic gradient
// and a backtracking line search; returns false if it did not converge.
static bool newton2(const Model& m, double P, double x[2]) {
  double g[2];
  double S = linear_action(m, P, x[0], x[1], g);
  for (int it = 0; it < 500; ++it) {
    double H[2][2];
    linear_fd_hessian(m, P, x, 1e-6, H);
    const double Hs = H[0][1];
    const double det = H[0][0] * H[1][1] - Hs * Hs;
    double step[2];
    if (H[0][0] > 0 && det > 0) {
      step[0] = -(H[1][1] * g[0] - Hs * g[1]) / det;
      step[1] = -(-Hs * g[0] + H[0][0] * g[1]) / det;
    } else {
      const double sc = 1.0 / (std::fabs(H[0][0]) + std::fabs(H[1][1]) + 1e-300);
      step[0] = -g[0] * sc;
      step[1] = -g[1] * sc;
    }
    double t = 1;
    double gn[2], Sn = 0;
    for (int ls = 0; ls < 60; ++ls, t *= 0.5) {
      Sn = linear_action(m, P, x[0] + t * step[0], x[1] + t * step[1], gn);
      if (Sn <= S) break;
    }
    x[0] += t * step[0];
    x[1] += t * step[1];
    const double dx = t * std::hypot(step[0], step[1]);
    g[0] = gn[0];
    g[1] = gn[1];
    S = Sn;
    if (dx < 1e-13 * (1 + std::hypot(x[0], x[1]))) return true;
  }
  return std::hypot(g[0], g[1]) < 1e-8 * (1 + std::fabs(S));
}

std::vector<Branch> linear_minima(const Model& m, double P) {
  std::vector<Branch> out;
  auto make = [&](double c1, double cG) {
    Branch b;
    b.x1 = c1;
    b.x2 = cG;
    b.action = linear_action(m, P, c1, cG);
    b.st = linear_plane_stats(m, c1, cG);
    b.mse = mse_pop(m, P, b.st);
    b.a_1 = c1;
    b.a_G = cG;
    return b;
  };
  double H0[2][2];
  linear_hessian0(m, P, H0);
  if (lambda_min2(H0) > 0) {
    Branch b = make(0, 0);
    b.name = "zero";
    out.push_back(b);
  }
  const double starts[][2] = {{0, 1}, {1, 0},  {0.5, 0.5}, {0, 0.1},     {0.1, 0}, {2, 0},
                              {0, 3}, {-1, 1}, {1, -0.5},  {0.02, 0.02}, {3, 1},   {1, 3}};
  for (const auto& s0 : starts) {
    double x[2] = {s0[0], s0[1]};
    if (!newton2(m, P, x)) continue;
    if (std::hypot(x[0], x[1]) < 1e-6) continue;  // A = 0 handled above
    if (x[1] < 0 || (x[1] == 0 && x[0] < 0)) {    // (W, A) -> (-W, -A) symmetry
      x[0] = -x[0];
      x[1] = -x[1];
    }
    // a true minimum: FD Hessian positive definite
    double H[2][2];
    linear_fd_hessian(m, P, x, 1e-5, H);
    if (!(lambda_min2(H) > 0)) continue;
    bool dup = false;
    for (const auto& b : out)
      if (std::hypot(b.x1 - x[0], b.x2 - x[1]) < 1e-5 * (1 + std::hypot(x[0], x[1]))) dup = true;
    if (dup) continue;
    Branch b = make(x[0], x[1]);
    out.push_back(b);
  }
  // Nonzero minima: the lowest action is "copy" (it grows continuously out of A = 0), the others
  // are metastable ("meta").
  int best = -1;
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].name != "zero" && (best < 0 || out[i].action < out[size_t(best)].action))
      best = int(i);
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].name != "zero") out[i].name = int(i) == best ? "copy" : "meta";
  flag_global(out);
  return out;
}

// ---------------------------------------------------------------- transitions
namespace {
struct Probe {
  int n = 0;                                            // number of minima
  double a_glob = 0;                                    // a_G of the global minimum
  double s_low = 0, s_high = 0, a_low = 0, a_high = 0;  // lowest- and highest-a_G minima
};
Probe probe(const Model& m, bool softmax, double P) {
  const std::vector<Branch> v = softmax ? softmax_minima(m, P) : linear_minima(m, P);
  Probe p;
  p.n = int(v.size());
  if (v.empty()) return p;
  size_t lo = 0, hi = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i].global) p.a_glob = v[i].a_G;
    if (v[i].a_G < v[lo].a_G) lo = i;
    if (v[i].a_G > v[hi].a_G) hi = i;
  }
  p.s_low = v[lo].action;
  p.s_high = v[hi].action;
  p.a_low = v[lo].a_G;
  p.a_high = v[hi].a_G;
  return p;
}
}  // namespace

Transition find_transition(const Model& m, bool softmax, double P_lo, double P_hi, double rel_tol) {
  Transition t;
  if (!softmax) {
    t.P_closed = linear_threshold_closed(m);
    t.P_plane = linear_threshold_plane(m);
  }
  if (!softmax) {
    // Linear: A = 0 is a stationary point for every P and loses stability at P_plane. The onset is
    // second order if A = 0 stays the global minimum up to P_plane and the new minimum grows
    // continuously from it; first order if some other minimum undercuts A = 0 before.
    auto zero_global = [&](double P) {
      for (const auto& b : linear_minima(m, P))
        if (b.global) return b.name == "zero" ? 1.0 : -1.0;
      return -1.0;
    };
    const double eps = std::max(rel_tol, 1e-6);
    if (zero_global(t.P_plane * (1 - eps)) > 0) {
      double norm = 0;
      for (const auto& b : linear_minima(m, t.P_plane * (1 + eps)))
        if (b.global) norm = std::hypot(b.x1, b.x2);
      if (norm < 0.1) {
        t.order = "second";
        t.P_star = t.P_spinodal = t.P_low = t.P_plane;
        return t;
      }
    }
    t.order = "first";
    t.P_spinodal = t.P_plane;
    double lo = std::max(P_lo, 1e-12);
    while (zero_global(lo) < 0 && lo > 1e-9) lo *= 0.5;
    t.P_star = bisect(zero_global, lo, t.P_plane * (1 - eps), rel_tol);
    return t;
  }
  // Coarse scan in ln P for coexistence (two or more minima).
  const int per_decade = 24;
  const int n = std::max(2, int(std::ceil(std::log10(P_hi / P_lo) * per_decade)) + 1);
  std::vector<double> Ps(n);
  std::vector<Probe> pr(n);
  int first = -1, last = -1;
  for (int i = 0; i < n; ++i) {
    Ps[i] = P_lo * std::pow(P_hi / P_lo, double(i) / (n - 1));
    pr[i] = probe(m, softmax, Ps[i]);
    if (pr[i].n >= 2) {
      if (first < 0) first = i;
      last = i;
    }
  }
  auto coexist = [&](double P) { return probe(m, softmax, P).n >= 2 ? 1.0 : -1.0; };
  if (first >= 0) {
    t.order = "first";
    // Brackets [outside, inside] of both window edges; the inner ends are verified coexistence.
    double in_lo = Ps[first], in_hi = Ps[last];
    if (first > 0) {
      const auto br = bisect_bracket(coexist, Ps[first - 1], Ps[first], rel_tol);
      t.P_low = std::sqrt(br.first * br.second);
      in_lo = br.second;
    } else {
      t.P_low = Ps[first];
    }
    if (last < n - 1) {
      const auto br = bisect_bracket(coexist, Ps[last], Ps[last + 1], rel_tol);
      t.P_spinodal = std::sqrt(br.first * br.second);
      in_hi = br.first;
    } else {
      t.P_spinodal = Ps[last];
    }
    // Branch switch: S_high - S_low changes sign inside the coexistence window (normally
    // positive at its lower edge, where the high branch is born, and negative at the upper).
    auto dS = [&](double P) {
      const Probe p = probe(m, softmax, P);
      return p.n >= 2 ? p.s_high - p.s_low : (P < in_lo ? 1.0 : -1.0);
    };
    const double da = dS(in_lo), db = dS(in_hi);
    t.P_star = (da > 0) == (db > 0) ? (da > 0 ? t.P_spinodal : t.P_low)
                                    : bisect(dS, in_lo, in_hi, rel_tol);
    const Probe p = probe(m, softmax, t.P_star);
    t.a_jump = p.n >= 2 ? p.a_high - p.a_low : 0.0;
    return t;
  }
  // Softmax without coexistence: continuous crossover, located where the global a_G crosses 1/2.
  auto half = [&](double P) { return probe(m, softmax, P).a_glob - 0.5; };
  for (int i = 1; i < n; ++i)
    if (pr[i - 1].a_glob < 0.5 && pr[i].a_glob >= 0.5) {
      t.order = "crossover";
      t.P_star = bisect(half, Ps[i - 1], Ps[i], rel_tol);
      return t;
    }
  t.order = "none";
  return t;
}

}  // namespace pl::copy::theory
