// SPDX-License-Identifier: Apache-2.0
// Population (large-P) action of the copy task and its reduced forms (docs/copy-task.md,
// "Theory": population form and reduced actions). Everything in double, O(1) per call.
//
// With i.i.d. uniform tokens C and B concentrate in span{I, J}; over the R loss rows
//   c_perp = P Q / V, c_par = P sum s^2 / V, b_perp = P D / V, b_par = P sum s / V,
//   S_pop = V(V-1)/2 ln(1 + sw2 beta c_perp) + V/2 ln(1 + sw2 beta c_par)
//         - beta^2/2 [(V-1) b_perp^2 / m_perp + b_par^2 / m_par] + beta P R / 2,   m = 1/sw2 + beta
//         c.
// (S_pop is exactly S_data evaluated at the population C and B; tests check it by enumerating all
// V^L sequences.)
#pragma once

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "copy_common/marginal.hpp"

namespace pl::copy::theory {

struct Model {
  int L = 8, V = 4;
  double kappa = 1, sw2 = 1, sg2 = 1;
  BetaConv beta_conv = BetaConv::per_position;
  Wrap wrap = Wrap::cyclic;
  // Softmax reduced action: variance of the L-1 off-copy logits. < 0: sg2 (the quoted
  // prior-typical logits); 0: all zero (uniform attention at Delta = 0, closer to a MAP/Adam run).
  double rest_var = -1;
  // false: the marginal posterior (W integrated out; the quoted theory). true: the MAP profile, W
  // minimised out instead of integrated: the same action without the log-det (W entropy) terms, the
  // reduced theory of Adam runs.
  bool map = false;
  double rest_variance() const { return rest_var < 0 ? sg2 : rest_var; }
  int R() const { return loss_rows(L, wrap); }
  double beta() const { return beta_of(kappa, R(), beta_conv); }
};

// Sums over the R loss rows of an attention matrix: Q = ||A_R||_F^2, D = sum_l A[l, l-1],
// s1 = sum_l s_l, s2 = sum_l s_l^2 (s_l row sums).
struct PopStats {
  double Q = 0, D = 0, s1 = 0, s2 = 0;
};
PopStats stats_of(const Model& m, const double* A);  // A: L x L row-major

// S_pop and its partial derivatives wrt (Q, D, s1, s2) (g may be null). With m.map the two ln
// terms are left out (profile over W instead of marginal).
double s_pop(const Model& m, double P, const PopStats& st, PopStats* g = nullptr);
// Training MSE per loss position with the posterior-mean read-out on the population C, B.
double mse_pop(const Model& m, double P, const PopStats& st);

// ---------------------------------------------------------------- linear attention
// Plane A = c1 J/L + cG S on the loss rows (rows outside the loss: A = 0, their prior optimum).
PopStats linear_plane_stats(const Model& m, double c1, double cG);
// S_pop + Q/(2 sg2); grad (d/dc1, d/dcG) optional.
double linear_action(const Model& m, double P, double c1, double cG, double* grad = nullptr);
// Hessian of linear_action at A = 0 in (c1, cG) (analytic; the action is stationary there).
void linear_hessian0(const Model& m, double P, double H[2][2]);
// The quoted closed form (docs/copy-task.md): where the pure shift direction A = cG S loses
// stability, P = V^2/(2 beta R) [1 + sqrt(1 + 4 R/(sw2 sg2 V^3))]  (= (kappa V^2/2)[...] for
// per_position). MAP profile: P = sqrt(V/(sw2 sg2 R))/beta  (= kappa sqrt(L V/(sw2 sg2)) for
// per_position, cyclic).
double linear_threshold_closed(const Model& m);
// Where A = 0 really loses stability: smallest P with lambda_min(linear_hessian0) = 0 (the shift
// mode couples to the uniform mode J/L through the row sums, so this lies below the closed form
// when L is not << V^3). Bisection to rel_tol.
double linear_threshold_plane(const Model& m, double rel_tol = 1e-10);

// ---------------------------------------------------------------- softmax attention
// One copy logit Delta per row, the other L-1 logits i.i.d. N(0, s2), self-averaged:
// Z = e^Delta + (L-1) e^{s2/2}, a = e^Delta/Z, q_rest = (L-1) e^{2 s2}/Z^2, s2 = rest_variance()
// (the quoted theory: s2 = sg2).
struct SoftRow {
  double a, q_rest, da, dq_rest;  // and their Delta-derivatives
};
SoftRow softmax_row(const Model& m, double Delta);
PopStats softmax_stats(const Model& m, double Delta);
// R Delta^2/(2 sg2) + S_pop; dDelta optional.
double softmax_action(const Model& m, double P, double Delta, double* dDelta = nullptr);

// ---------------------------------------------------------------- branches and transitions
struct Branch {
  std::string name;       // softmax: "low"/"high"; linear: "zero"/"copy" (lowest nonzero)/"meta"
  double x1 = 0, x2 = 0;  // softmax: (Delta, -); linear: (c1, cG)
  double action = 0;
  PopStats st;
  double mse = 0;
  double a_G = 0,
         a_1 = 0;  // least-squares coordinates in span{J/L, S}: (D - T/L)/(L-1), (T - D)/(L-1)
  bool global = false;
};
// Every local minimum of the reduced action at P (the global one flagged).
std::vector<Branch> softmax_minima(const Model& m, double P);
std::vector<Branch> linear_minima(const Model& m, double P);

struct Transition {
  double P_star = NAN, P_spinodal = NAN, P_low = NAN;
  std::string order;  // "first", "second", "crossover", "none"
  double P_closed = NAN,
         P_plane = NAN;  // linear: closed form (shift only) and exact plane threshold
  double a_jump = NAN;   // softmax first order: a_G(high) - a_G(low) at P_star
};
// Searches P in [P_lo, P_hi]; locations by bisection in ln P to rel_tol.
Transition find_transition(const Model& m, bool softmax, double P_lo, double P_hi, double rel_tol);

// Bisection for a sign change of f on [lo, hi] (f(lo) and f(hi) of opposite sign) until
// hi/lo - 1 < rel_tol (lo > 0: geometric midpoints) or hi - lo < rel_tol |lo| otherwise.
// bisect_bracket returns the final bracket [lo, hi] (f(lo) has the sign of the original f(lo)).
template <class F>
std::pair<double, double> bisect_bracket(F&& f, double lo, double hi, double rel_tol) {
  double flo = f(lo);
  for (int it = 0; it < 400; ++it) {
    if (lo > 0 ? hi / lo - 1 < rel_tol : hi - lo < rel_tol * std::fabs(lo) + 1e-300) break;
    const double mid = lo > 0 ? std::sqrt(lo * hi) : 0.5 * (lo + hi);
    const double fm = f(mid);
    if ((fm > 0) == (flo > 0)) {
      lo = mid;
      flo = fm;
    } else {
      hi = mid;
    }
  }
  return {lo, hi};
}
// The midpoint of bisect_bracket's final bracket.
template <class F>
double bisect(F&& f, double lo, double hi, double rel_tol) {
  const auto b = bisect_bracket(f, lo, hi, rel_tol);
  return b.first > 0 ? std::sqrt(b.first * b.second) : 0.5 * (b.first + b.second);
}

}  // namespace pl::copy::theory
