// SPDX-License-Identifier: Apache-2.0
// The cost estimate of one markov_minimal point (the plugin's phaselab_plugin_point_cost): the
// work the run does, term by term, from the point's parameters only, in estimated CPU seconds at
// one thread (the unit matters only for `run --plan`'s calibration; the dispatcher and `--shard`
// use the order). Where the time goes (perf and runs varying one key at a time, C = 3 and 10):
//   - every training sequence of an infinite-chain run draws its own chain first: C^2 gamma
//     variates (each a normal, i.e. a log and a cosine, plus logs) and a C^3 stationary solve,
//     ~6 us at C = 10. At N = 16 with 2048 tokens per step (128 sequences) this is ~55% of the
//     symmetric model's step: the symmetric model at N = 16 costs more per step than at N = 64.
//     This was the fixed cost per sequence that a per-token or per-pair estimate misses;
//   - per token, an O(C) part (layer-1 counts, read-out, exponentials, the draw of the next
//     state) and the model's matrix products; per sequence, the symmetric model's and the
//     induction model's O(N^2) attention;
//   - the symmetric model's plateau probe: max(64, c_tokens / N) sequences through the double
//     model (twice with a frozen read-out), as many tokens as ~130 training steps at 2048 tokens;
//   - evaluations: 2 n_eval sequences forward, at each checkpoint reached; the evaluation sets'
//     predictors once (5 C logarithms per token, O(K C) for the memorising predictors);
//   - the matched 1-Gen pseudo-count (alpha1 = 0): 4096 chains once.
// The symmetric model with stop_after_tau > 0 stops at (1 + stop_after_tau) tau, and tau is a
// result, not a parameter: the estimate takes tau = 1000 steps (the shipped SGD runs: medians
// 705-1187 over N = 16 .. 1024, Adam 355-564; frozen read-outs escape later, to 14326 at
// N = 4096), capped by steps. Constants read off single-point runs around the shipped configs
// (docs/scale-out.md says which), not fitted to the configs the rank correlation is checked on.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "markov_common/predictors.hpp"
#include "markov_common/trainer.hpp"

namespace pl::markov::minimal {

struct CostInputs {
  int model = 0;  // 0 symmetric, 1 induction, 2 memoriser
  double C = 10, N = 64, K = 8, batch = 32, n_eval = 500, d_head = 16, d_phi = 32, width = 128;
  bool infinite = true, matched_alpha1 = true;
  int64_t steps = 2000, checkpoints = 16;
  // symmetric
  double plateau_steps = 300, c_tokens = 262144, stop_after_tau = 0;
  bool second_probe = false;                // readout != "trained": a probe at the frozen gains
  double readout_N = 0, readout_batch = 0;  // readout = "reference": that N's plateau (else 0)
};

// Seconds per unit of work (one thread, AVX-512 machine of the calibration).
namespace cost {
constexpr double kGamma = 5.3e-8;     // one gamma variate with its logarithm (chain draw)
constexpr double kSolve = 1e-9;       // per C^3 of the stationary solve
constexpr double kTokC = 2.6e-8;      // symmetric: per token and state (counts, read-out)
constexpr double kTok = 4e-8;         // per token, any model (the draw, loss, bookkeeping)
constexpr double kPairF = 1.6e-9;     // symmetric float: per N^2 of a sequence, fwd + bwd
constexpr double kPairD = 3.2e-9;     // symmetric double (plateau probe): per N^2
constexpr double kPairEval = 1.1e-9;  // symmetric float, forward only: per N^2
constexpr double kProbeTok = 3.4e-7;  // symmetric double probe: per token (with predictors)
constexpr double kEvalTok = 1.5e-7;   // symmetric forward + KL to 5 predictors: per token
constexpr double kSeqKernel = 6e-7;   // induction: per sequence (attention calls)
constexpr double kFlop = 2e-11;       // per flop of the small matrix products (~50 GFLOP/s)
constexpr double kAttInd = 1.1e-10;   // induction: per N^2 d_head of attention, fwd + bwd
constexpr double kAttInd0 = 2e-10;    // induction: per N^2 (softmax rows)
constexpr double kTokInd = 4e-8;      // induction: per token besides the products
constexpr double kTokMem = 1.1e-7;    // memoriser: per token besides the products
constexpr double kGelu = 1e-9;        // memoriser: per token and hidden unit (GELU fwd + bwd)
constexpr double kEvalFrac = 0.5;     // induction / memoriser: evaluation token / training
constexpr double kEvalTok0 = 5e-8;    // induction / memoriser: evaluation per token besides
constexpr double kParam = 3e-9;       // optimiser: per parameter per step
constexpr double kPredLog = 2.5e-8;   // evaluation sets: per token, predictor and state
constexpr double kPredMem = 2e-9;     // evaluation sets: per token, chain and state (K C)
constexpr double kTauGuess = 1000;    // symmetric: the escape step assumed for early stops
}  // namespace cost

// One fresh chain: C rows of C gamma variates, the stationary solve.
inline double chain_cost(double C) { return cost::kGamma * C * C + cost::kSolve * C * C * C; }

// Evaluations run: the checkpoints up to the last step run, and that step.
inline double evaluations(int64_t steps, int64_t checkpoints, int64_t run) {
  const std::vector<int64_t> ck = checkpoint_steps(steps, int(checkpoints));
  double n = 0;
  bool last = false;
  for (int64_t s : ck)
    if (s <= run) n += 1, last = s == run;
  return n + (last ? 0 : 1);
}

// Building the data: the matched alpha1, the K chains, two evaluation sets with their predictors.
inline double setup_cost(const CostInputs& c, double N) {
  const double C = c.C, mem = c.infinite ? 0 : c.K;
  double t = c.matched_alpha1 ? 4096 * chain_cost(C) : 0;
  t += mem * chain_cost(C);
  const double fresh = c.infinite ? 2 : 1;  // sequences drawing their own chain
  t += c.n_eval * (fresh * chain_cost(C) +
                   2 * N * (cost::kPredLog * double(kNumPred) * C + cost::kPredMem * mem * C));
  return t;
}

// The symmetric model: one sequence of training (float, fwd + bwd).
inline double sym_seq(const CostInputs& c, double N) {
  return (c.infinite ? chain_cost(c.C) : 0) + N * (cost::kTok + cost::kTokC * c.C) +
         cost::kPairF * N * N;
}

inline double symmetric_cost(const CostInputs& c) {
  const double N = c.N, B = c.batch, C = c.C;
  const double chain = c.infinite ? chain_cost(C) : 0;
  double t = setup_cost(c, N);
  // plateau: its training steps and the probe(s) in double
  if (c.plateau_steps > 0) {
    t += c.plateau_steps * B * sym_seq(c, N);
    const double n = std::max(64.0, std::floor(c.c_tokens / N));
    const double probe = n * (chain + N * cost::kProbeTok + cost::kPairD * N * N);
    t += probe * (c.second_probe ? 2 : 1);
    if (c.readout_N > 0) {  // another harness at readout_N: its data and plateau steps
      CostInputs r = c;
      r.N = c.readout_N;
      t += setup_cost(r, r.N) + c.plateau_steps * c.readout_batch * sym_seq(r, r.N);
    }
  }
  int64_t run = c.steps;
  if (c.stop_after_tau > 0)
    run = std::min<int64_t>(run, int64_t(std::ceil((1 + c.stop_after_tau) * cost::kTauGuess)));
  t += double(run) * B * sym_seq(c, N);
  t += evaluations(c.steps, c.checkpoints, run) * 2 * c.n_eval *
       (N * cost::kEvalTok + cost::kPairEval * N * N);
  return t;
}

// Induction and memoriser: per training token (fwd + bwd) of the model itself, and parameters.
inline double model_token(const CostInputs& c, double* params) {
  const double C = c.C, N = c.N;
  if (c.model == 1) {
    const double D = 2 * C, h = c.d_head;
    *params = 3 * h * D + D * h + C * D;
    return cost::kTokInd + cost::kFlop * 6 * *params + N * (cost::kAttInd0 + cost::kAttInd * h) +
           cost::kSeqKernel / N;
  }
  const double d = c.d_phi, w = c.width;
  *params = C * C * d + w * (d + C) + w + C * w + C;
  return cost::kTokMem + cost::kFlop * 6 * ((d + C) * w + w * C) + cost::kGelu * w;
}

inline double trained_cost(const CostInputs& c) {
  const double N = c.N, B = c.batch;
  double params = 0;
  const double tok = model_token(c, &params);
  const double chain = c.infinite ? chain_cost(c.C) : 0;
  const double step = B * (chain + N * (cost::kTok + tok)) + cost::kParam * params;
  const double eval = 2 * c.n_eval * N * (cost::kEvalTok0 + cost::kEvalFrac * tok);
  return setup_cost(c, N) + double(c.steps) * step +
         evaluations(c.steps, c.checkpoints, c.steps) * eval;
}

inline double point_cost(const CostInputs& c) {
  return c.model == 0 ? symmetric_cost(c) : trained_cost(c);
}

}  // namespace pl::markov::minimal
