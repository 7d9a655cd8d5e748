// SPDX-License-Identifier: Apache-2.0
// The copy-task network and its MAP objective on the kernel table (docs/copy-task.md).
//   A = softmax_rows(G) (softmax) or G (linear), optional causal mask;   A: L x L
//   h^mu = A X^mu, f^mu = h^mu W^T;                                       X, h, f: P x L x V
//   SSE = sum_{mu, l in loss} ||f_l - y_l||^2, y_l = x_{l-1 mod L}
//   U   = (beta/2) SSE + ||W||^2/(2 sw2) + ||G||^2/(2 sg2)                (potential / -log post)
//   obj = (2 kappa / P) U = (kappa beta / P) SSE + kappa/(P sw2) ||W||^2 + kappa/(P sg2) ||G||^2
// Parameters live in one flat buffer theta = [W (V x V) | G (L x L)]. Everything is allocated in
// the constructor; the per-step calls never allocate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "copy_common/data.hpp"
#include "phaselab/kernel_table.h"

namespace pl::copy::task {

struct NetConfig {
  int L = 16, V = 4;
  bool softmax = true;  // A = softmax_rows(G), else A = G
  bool causal = false;  // A[l, l'] = 0 for l' > l
  pl::copy::Wrap wrap = pl::copy::Wrap::cyclic;
  double kappa = 1, sw2 = 1, sg2 = 1;
  bool per_position = true;  // beta = 1/(kappa L_loss), else beta = 1/kappa
  // How the full-data sse is evaluated: `direct` sums over the P sequences every call
  // (posattn_onehot_sse); `stats` contracts 2 L^2 V^2 token counts gathered once
  // (posattn_gram_sse; cost independent of P, double accumulation); `automatic` takes stats
  // when they are cheaper and fit in 2 x 128 MB (see CopyNet). Mini-batches always go direct.
  enum class LossPath { automatic, direct, stats } loss_path = LossPath::automatic;
  double beta() const {
    return per_position ? 1.0 / (kappa * pl::copy::loss_positions(L, wrap)) : 1.0 / kappa;
  }
};

class CopyNet {
 public:
  // tokens: P x L training tokens. test_chunk: sequences per chunk when evaluating held-out data.
  CopyNet(const pl_kernel_table& k, const NetConfig& c, std::vector<int32_t> tokens, int P,
          int test_chunk = 1024);

  const NetConfig& config() const { return c_; }
  int P() const { return P_; }
  size_t n_params() const { return size_t(c_.V) * c_.V + size_t(c_.L) * c_.L; }
  size_t w_off() const { return 0; }
  size_t g_off() const { return size_t(c_.V) * c_.V; }

  // A (L x L) from G (L x L).
  void attention(const float* G, float* A) const;

  // SSE over training sequences [mu0, mu0 + n); if grad != nullptr, grad = scale * dSSE/dtheta
  // (overwritten, both blocks).
  double data_sse(const float* theta, size_t mu0, size_t n, float* grad, double scale);

  // Full-data MAP objective; with grad != nullptr also its gradient (priors included).
  double objective(const float* theta, float* grad);
  // The prior part kappa/(P sw2)||W||^2 + kappa/(P sg2)||G||^2 of the objective.
  double prior_term(const float* theta) const;

  // An upper estimate of the top Hessian eigenvalue of U = (P / (2 kappa)) obj at theta,
  // averaged over i.i.d. uniform tokens (see model.cc): the SGLD step bound.
  double curvature_bound(const float* theta);

  // Per-position mean squared error (summed over the V outputs) on the training set.
  double train_mse(const float* theta);
  // The same on other sequences (n x L tokens), evaluated in chunks.
  double mse_on(const float* theta, const int32_t* tokens, size_t n);

  const std::vector<int32_t>& tokens() const { return tokens_; }
  // True when full-data sse calls go through the token counts (NetConfig::loss_path).
  bool uses_stats() const { return !stats_c_.empty(); }

  // Ctrl-C inside one step: a per-sequence sse call (training data, or a chunk of held-out data in
  // mse_on) whose cost n (L V^2 + L^2 V) exceeds `chunk_cost` multiply-adds is split into chunks
  // of sequences, and when one sequence alone exceeds it (e.g. L = 1024, V = 4096) into blocks of
  // output rows (posattn_onehot_sse_rows), `cancel` polled before every piece (a cancelled call
  // returns NaN). Calls under the limit (every shipped config) are one kernel call as before, so
  // their results are unchanged; pieces add their sse and gradients in a fixed order
  // (deterministic, but rounded differently from one call; the piece sizes depend on L, V and
  // chunk_cost only).
  void set_cancel(std::function<bool()> cancel) { cancel_ = std::move(cancel); }
  void set_chunk_cost(double chunk_cost) { chunk_cost_ = chunk_cost; }

 private:
  // y (n x L) = target token of each position, -1 where the position is not in the loss.
  void fill_targets(const int32_t* tokens, size_t n, int32_t* y) const;
  // Counts the training sequences not yet in stats_c_, stats_d_ (chunks, cancel checks between
  // them); false when cancelled.
  bool gather_stats();
  // sse of n sequences under a_ (with da, dW: its gradient, overwritten), as one kernel call or in
  // pieces with the cancel check between them (set_chunk_cost); NaN when cancelled.
  double sse_pieces(const float* W, const int32_t* tok, const int32_t* tgt, size_t n, float* da,
                    float* dW);

  const pl_kernel_table& k_;
  NetConfig c_;
  int P_, test_chunk_;
  std::vector<int32_t> tokens_;            // P x L
  std::vector<int32_t> targets_;           // P x L target tokens, -1 outside the loss
  std::vector<float> a_, da_;              // L x L
  std::vector<int32_t> yt_;                // test_chunk x L targets of held-out data
  std::vector<double> stats_c_, stats_d_;  // L^2 V^2 token counts (posattn_onehot_stats) or empty
  size_t stats_done_ = 0;                  // training sequences counted into them so far
  std::function<bool()> cancel_;
  double chunk_cost_ = 8e9;             // ~ a second of kernel time on one core
  std::vector<float> da_tmp_, dw_tmp_;  // chunk gradients (allocated on first chunked call)
};

// ---------------------------------------------------------------- Adam on the MAP objective
struct AdamConfig {
  double lr = 1e-2, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  int64_t max_steps = 20000;
  double tol = 1e-7;  // stop when |obj(t) - obj(t - window)| <= tol |obj(t)|
  int64_t window = 100;
  int batch = 0;                // sequences per step; 0 = full batch
  bool train_attention = true;  // false: G stays fixed (e.g. uniform attention, read-out only)
  // Linear attention only: f = A X W^T is invariant under (W, G) -> (lam W, G / lam), so only the
  // O(1/P) priors fix the scale and the objective is nearly flat along that orbit at large P:
  // Adam crawls along it and the stopping rule fires at different scales (different |c_G|) from
  // different starts. With balance, every window theta moves to the prior's minimum on its orbit,
  // lam^4 = (|G|^2 / sg2) / (|W|^2 / sw2), in closed form (data term unchanged, prior lowered),
  // and Adam's gradient and moments are carried along.
  bool balance = true;
  // Linear attention (no causal mask) has two minima at P above the onset: the sign of the row
  // sums s_l relative to D (the copy overlap) is + (the MAP) or - (higher objective, c_1 ~ -1.2;
  // the reduced theory's action has it too), and Adam lands in either, from either init, and
  // crawls in the - branch at large P. With flip, every window also evaluates the mirror point
  // (W, G) -> (W (I - 2 11^T/V), G (I - 2 J/L)), which keeps W's action on centred inputs and
  // the product (row sums of A) x (W 1) and flips only their cross term; if its objective is
  // lower, theta moves there (a descent move) and Adam restarts.
  bool flip = true;
};

struct AdamResult {
  bool converged = false;
  bool finite = true;
  int64_t steps = 0;
  double objective = 0;
  int flips = 0;  // mirror moves taken (AdamConfig::flip)
};

// Optimiser state, allocated once per run.
class AdamTrainer {
 public:
  AdamTrainer(CopyNet& net, const AdamConfig& cfg);
  // Trains theta in place. `stop` is polled every window steps (cancellation); may be empty.
  template <typename Stop>
  AdamResult train(float* theta, const pl_kernel_table& k, Stop&& stop);
  // Linear attention: theta to the prior's minimum on its rescaling orbit (AdamConfig::balance).
  void balance(float* theta, const pl_kernel_table& k);
  // Linear attention: the mean-channel flip (AdamConfig::flip).
  void flip_mean_channel(float* theta) const;

 private:
  CopyNet& net_;
  AdamConfig cfg_;
  std::vector<float> grad_, m_, v_, mirror_;
};

// ---------------------------------------------------------------- SGLD on (W, G)
struct SgldConfig {
  // Step; 0 = auto: start from 0.1 V / (beta P L_loss) (= 0.1 kappa V / P per position), then
  // eta <- min(eta, auto_margin / curvature_bound(theta)) at every burn-in step (never up, fixed
  // after burn-in, so the kept chain is a fixed-kernel Markov chain); if the burn-in still leaves
  // the finite numbers, it restarts from the start with eta / 4 (at most 6 times).
  double eta = 0;
  double auto_margin = 0.5;
  double temperature = 1;
  int batch = 0;  // 0 = full batch
  int64_t burn_in = 2000, thin = 10, samples = 200;
  bool train_attention = true;  // false: G stays fixed and only W is sampled (tests)
};

// Auto SGLD step for a config (see SgldConfig::eta).
double auto_sgld_step(const NetConfig& c, int P);

}  // namespace pl::copy::task

#include "copy_task/model_inl.hpp"
