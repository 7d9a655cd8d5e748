// SPDX-License-Identifier: Apache-2.0
// Exact marginal posterior of the copy task over the attention matrix (read-out W integrated out).
// See docs/copy-task.md, "Theory", exact marginal. Double precision.
//
//   H (R P x V): rows h_l^mu = (A X^mu)_l for the R positions in the loss, Y the one-hot targets,
//   C = w H^T H, B = w H^T Y (V x V), M = I/sw2 + beta C   (w: multiplicity of every sequence, 1)
//   S_data(A) = (V/2) ln det(I + sw2 beta C) - (beta^2/2) tr(B^T M^{-1} B) + (beta/2) w tr(Y^T Y)
//   action(G) = S_data(A(G)) + ||G||^2 / (2 sg2),  A = row-softmax(G) or A = G (masked if causal)
//
// One-hot tokens make C and B scatter-adds: C = sum_mu X^T (A_R^T A_R) X, B = sum_mu X^T A_R^T Y,
// so one evaluation costs O(P L^2 + L^3 + V^3) and never forms H ("direct"). They are also linear
// in token counts gathered once, n2[u, u', i, j] = #{t_i = u, t_j = u'} and nb[u, y, l, j] =
// #{t_j = u, y_l = y}: C[u, u'] = w sum_ij K_ij n2[u, u', i, j], B[u, y] = w sum_lj A_lj nb[u, y,
// l, j]
// ("counts": O(V^2 L^2 + L^3 + V^3) per evaluation, independent of P). All work buffers are
// allocated in the constructor: evaluations do not allocate, and an object must not be shared
// between threads. The counts are gathered on the first evaluation (with the cancel check, see
// set_cancel), not in the constructor.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace pl::copy::theory {

enum class BetaConv { per_position, per_sequence };  // beta = 1/(kappa R) or 1/kappa
enum class Wrap { cyclic, drop_first };              // target of position 1: x_L, or not in loss
enum class Attention { softmax, linear };

BetaConv parse_beta(const std::string& s);  // "per_position" | "per_sequence" (throws otherwise)
Wrap parse_wrap(const std::string& s);      // "cyclic" | "drop_first"
Attention parse_attention(const std::string& s);  // "softmax" | "linear"

struct MarginalConfig {
  int L = 8;
  int V = 4;
  double kappa = 1.0;  // noise variance (temperature)
  double sw2 = 1.0;    // prior variance of W entries
  double sg2 = 1.0;    // prior variance of G entries
  BetaConv beta = BetaConv::per_position;
  Wrap wrap = Wrap::cyclic;
  Attention attention = Attention::softmax;
  bool causal = false;  // A[l, l'] = 0 for l' > l (softmax: those logits are -inf)
  double weight =
      1.0;  // every sequence counts `weight` times (tests: exact population by enumeration)
  // How C, B and the gradient gather the data: per sequence (direct) or from token counts;
  // automatic takes counts when V^2 < P and the 2 V^2 L^2 counts fit in 2 x 128 MB. Same numbers
  // up to double rounding.
  enum class Path { automatic, direct, counts } path = Path::automatic;
};

// Positions in the loss: L (cyclic) or L - 1 (drop_first; position 1 is left out).
inline int loss_rows(int L, Wrap w) { return w == Wrap::cyclic ? L : L - 1; }
// beta of the Gaussian likelihood: per_position averages over the R loss positions.
inline double beta_of(double kappa, int R, BetaConv b) {
  return b == BetaConv::per_position ? 1.0 / (kappa * R) : 1.0 / kappa;
}

class ExactMarginal {
 public:
  // tokens: P x L row-major, values in [0, V). Copied.
  ExactMarginal(const MarginalConfig& cfg, const int32_t* tokens, int P);

  // S_data(A); A: L x L row-major (rows outside the loss are ignored). dA (L x L) optional.
  double s_data(const double* A, double* dA) const;
  // S_data(A(G)) + ||G||^2/(2 sg2); dG (L x L) optional, through the row softmax.
  double action(const double* G, double* dG) const;
  // A(G): row softmax over the allowed positions (causal mask) or G times the mask.
  void attention_of(const double* G, double* A) const;
  // Posterior mean read-out W (V x V, f = W h): W^T = beta M^{-1} B.
  void readout(const double* A, double* W) const;
  // Training MSE per loss position, sum_{mu,l} ||W h - y||^2 / (w P R), with the posterior-mean W.
  double train_mse(const double* A) const;

  // Ctrl-C inside one evaluation (at L = V = 4096 one takes minutes): with a cancel check set,
  // the outer loops of an evaluation (C and B, the token counts, the Cholesky factor, the inverse,
  // the gradient, the train MSE) poll `cancel` after every `block_cost` multiply-adds of work
  // (cache-missing ones count 8; ~0.1-0.4 s between polls at L, V in the thousands), and
  // once it returns true the evaluation stops there: s_data, action and train_mse return NaN,
  // readout fills W with NaN, and cancelled() is true until the next evaluation starts. Counts
  // gathered before a cancel are kept and the gathering goes on at the next evaluation (counts
  // are integers, so this is exact). The blocks only split outer loops, so results are
  // bit-identical with or without a check. `cancel` is called on the evaluating thread.
  void set_cancel(std::function<bool()> cancel, double block_cost = 1e8) {
    cancel_ = std::move(cancel);
    block_cost_ = block_cost;
  }
  bool cancelled() const { return cancelled_; }
  // Polls of `cancel` in the last evaluation (tests).
  int64_t polls() const { return polls_; }

  int L() const { return L_; }
  int V() const { return V_; }
  int P() const { return P_; }
  int rows() const { return R_; }  // positions in the loss
  bool uses_counts() const { return !n2_.empty(); }
  double beta() const { return beta_; }
  const MarginalConfig& config() const { return cfg_; }
  // C and B (V x V) of the last evaluation (tests, population checks).
  const std::vector<double>& last_C() const { return C_; }
  const std::vector<double>& last_B() const { return B_; }

 private:
  // Fills C_, B_ from A; then M_ = I/sw2 + beta C_ and its Cholesky factor (throws if M is not
  // positive definite: cannot happen for finite A, kept as a guard). False when cancelled.
  bool build(const double* A) const;
  bool factor() const;
  // Value; gradients wrt C, B into GC_, GB_ if asked. NaN when cancelled.
  double s_from_factor(bool want_grad) const;
  bool grad_A(const double* A, double* dA) const;  // false when cancelled
  bool gather_counts() const;                      // the counts not yet gathered; false: cancelled
  void start() const;                              // a new evaluation: cancel state reset
  // Cancel check: `work` multiply-adds done since the last call; polls `cancel` when the work
  // since the last poll reaches block_cost_. True when cancelled (then on every later call).
  bool tick(double work) const {
    if (cancelled_) return true;
    if (!cancel_) return false;
    work_ += work;
    if (work_ < block_cost_) return false;
    work_ = 0;
    ++polls_;
    cancelled_ = cancel_();
    return cancelled_;
  }

  MarginalConfig cfg_;
  int L_, V_, P_, R_, first_row_;
  double beta_;
  std::vector<int32_t> tok_;  // P x L
  std::vector<int32_t> tgt_;  // P x L: target symbol of row l (valid for loss rows)
  // V^2 blocks of L x L token counts (empty on the direct path); sequences counted so far
  mutable std::vector<double> n2_, nb_;
  mutable int counted_ = 0;
  std::function<bool()> cancel_;
  double block_cost_ = 1e8;
  mutable double work_ = 0;
  mutable int64_t polls_ = 0;
  mutable bool cancelled_ = false;
  // workspaces (mutable: evaluations are logically const)
  mutable std::vector<double> A_, K_, GK_, dA_;                          // L x L
  mutable std::vector<double> C_, B_, Lc_, Minv_, Gam_, GC_, GB_, tmp_;  // V x V
};

}  // namespace pl::copy::theory
