// SPDX-License-Identifier: Apache-2.0
// markov_icl: a two-layer transformer trained online on K Markov chains; at log-spaced
// checkpoints, its KL distance to the five Bayes predictors (2-Gen, 1-Gen, 2-Mem, 1-Mem, hybrid)
// on ID and OOD evaluation sets and the phase label. Science: docs/markov-icl.md.
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "markov_common/checkpoint.hpp"
#include "markov_common/plugin.hpp"
#include "markov_common/summary.hpp"
#include "markov_common/trainer.hpp"
#include "sdk/phaselab_sdk.hpp"

namespace {

constexpr const char* kVersion = "0.2.0";

const pl_param_decl kParams[] = {
    pl::markov::param::K,
    pl::markov::param::infinite,
    pl::markov::param::C,
    pl::markov::param::alpha,
    pl::sdk::float_param("alpha1", 1.0,
                         "pseudo-count of the 1-Gen predictor; 0 = matched to the variance of the "
                         "ensemble's stationary distributions (about C)",
                         PL_RANGE_MIN, 0),
    pl::sdk::int_param("N", 128, "context length (positions)", 2, 4096),
    pl::sdk::int_param("d_model", 64, "residual width", 2, 4096),
    pl::markov::param::heads,
    pl::markov::param::layers,
    pl::markov::param::mlp_mult,
    pl::markov::param::attn_only,
    pl::sdk::bool_param("layernorm", true, "pre-LN (true) or no LayerNorm at all (false)"),
    pl::sdk::enum_param("positions", "learned", "learned|rope",
                        "absolute learned positions or rotary"),
    pl::sdk::bool_param("tied", false, "unembedding tied to the token embedding"),
    pl::sdk::float_param("lr", 1e-3, "AdamW learning rate", PL_RANGE_MIN | PL_RANGE_MIN_EXCLUSIVE,
                         0),
    pl::sdk::float_param("beta1", 0.9, "AdamW beta1 (1 would never move the first moment)",
                         PL_RANGE_MIN | PL_RANGE_MAX | PL_RANGE_MAX_EXCLUSIVE, 0, 1),
    pl::sdk::float_param("beta2", 0.95, "AdamW beta2 (1: bias correction divides by zero)",
                         PL_RANGE_MIN | PL_RANGE_MAX | PL_RANGE_MAX_EXCLUSIVE, 0, 1),
    pl::sdk::float_param("weight_decay", 0.0, "AdamW decoupled weight decay (matrices only)",
                         PL_RANGE_MIN, 0),
    pl::sdk::int_param("warmup", 0, "linear learning-rate warm-up steps", 0),
    pl::sdk::int_param("batch", 64, "sequences per step", 1, 1 << 16),
    pl::sdk::int_param("steps", 20000, "training steps", 1),
    pl::sdk::float_param("lr_mult_l1_qk", 1.0, "learning-rate multiplier of layer-1 query/key",
                         PL_RANGE_MIN, 0),
    pl::sdk::string_param(
        "lr_mults", "",
        "more multipliers: module=value,... (wte wpe lN_qk lN_v lN_o lN_fc lN_proj "
        "lN_ln1 lN_ln2 lnf unembed; groups embed lN_att lN_mlp)"),
    pl::sdk::string_param("freeze", "", "modules or groups not trained, comma-separated"),
    pl::sdk::int_param("n_eval", 1000, "sequences per evaluation set (ID and OOD)", 1),
    pl::markov::param::checkpoints,
    pl::markov::param::late_frac,
    pl::sdk::int_param("chain_seed", 0,
                       "seed of the chains and evaluation sets (shared across seeds)", 0),
    pl::sdk::int_param("chunks", 8, "fixed batch partition for the parallel step", 1, 4096),
    pl::markov::param::save,
};

// kResultColumns, then `class` on a point's final row (empty on the others): "mem" (memorised
// without a 2-Gen phase), "gen_then_mem" (2-Gen, then memorised) or "gen" (did not memorise), the
// rule of the K1*/K2* summary (summary.hpp analyse), so a [search] on class finds K1* and on
// phase K2*.
constexpr auto kColumns = pl::markov::result_columns(std::array<const char*, 1>{"class"});
const pl_table_decl kTables[] = {pl::markov::table("results", kColumns)};

// Phase labels as the results table writes them, in axis order, with the names the figures show.
constexpr const char* kPhases = "1gen=1-Gen|2gen=2-Gen|1mem=1-Mem|2mem=2-Mem|hybrid=hybrid";
constexpr pl::sdk::PlotStyle kPhaseAxis = pl::sdk::PlotStyle().y_categories(kPhases);
constexpr pl::sdk::PlotStyle kKlPerK =
    pl::sdk::PlotStyle().facet("K").labels("step", "KL(predictor || network)");
// The Bayes floors as dashed lines in the colour of the loss they bound.
constexpr const char* kFloors = "bayes_2mem_id=loss_id,bayes_2gen_ood=loss_ood";
constexpr pl::sdk::PlotStyle kLossPerK =
    pl::sdk::PlotStyle().facet("K").labels("step", "loss (nats)").references(kFloors);
constexpr pl::sdk::PlotStyle kFinalLoss = pl::sdk::PlotStyle().references(kFloors);
constexpr pl::sdk::PlotStyle kPhaseMap = pl::sdk::PlotStyle().heatmap("phase", kPhases);
const pl_plot_decl kPlots[] = {
    pl::sdk::plot("phase_vs_K", "final phase vs K (one point per seed)", "results", "K", "phase",
                  "N,d_model", "final=1", PL_PLOT_LOGX | PL_PLOT_POINTS, &kPhaseAxis),
    pl::sdk::plot("kl_history_id", "KL(predictor || network) on ID vs step, per K", "results",
                  "step", "kl_2gen_id,kl_1gen_id,kl_2mem_id,kl_1mem_id,kl_hybrid_id", "N,d_model",
                  "", PL_PLOT_LOGX | PL_PLOT_LOGY, &kKlPerK),
    pl::sdk::plot("kl_history_2gen", "KL(2-Gen || network) on ID vs step, per K", "results", "step",
                  "kl_2gen_id", "K,N,d_model", "", PL_PLOT_LOGX | PL_PLOT_LOGY),
    pl::sdk::plot("kl_history_2mem", "KL(2-Mem || network) on ID vs step, per K", "results", "step",
                  "kl_2mem_id", "K,N,d_model", "", PL_PLOT_LOGX | PL_PLOT_LOGY),
    pl::sdk::plot("loss_history",
                  "ID / OOD loss with Bayes floors (2-Mem on ID, 2-Gen on OOD), per K", "results",
                  "step", "loss_id,loss_ood,bayes_2mem_id,bayes_2gen_ood", "N,d_model", "",
                  PL_PLOT_LOGX, &kLossPerK),
    pl::sdk::plot("final_loss_vs_K", "final ID / OOD loss vs K with Bayes floors", "results", "K",
                  "loss_id,loss_ood,bayes_2mem_id,bayes_2gen_ood", "N,d_model", "final=1",
                  PL_PLOT_LOGX, &kFinalLoss),
    pl::sdk::plot("phase_diagram_K_d", "final phase over (K, d_model), most frequent over seeds",
                  "results", "K", "d_model", "N", "final=1", 0, &kPhaseMap),
    pl::sdk::plot("phase_diagram_K_N", "final phase over (K, N), most frequent over seeds",
                  "results", "K", "N", "d_model", "final=1", 0, &kPhaseMap),
};

pl::markov::TrainConfig train_config(const pl::sdk::Context& cx) {
  pl::markov::TrainConfig tc = pl::markov::train_config_base(cx);
  pl::markov::ModelConfig& m = tc.model;
  m.ln = cx.bool_value("layernorm");
  m.rope = cx.is("positions", "rope");
  m.tied = cx.bool_value("tied");
  tc.beta1 = cx.float_value("beta1");
  tc.beta2 = cx.float_value("beta2");
  tc.weight_decay = cx.float_value("weight_decay");
  tc.lr_mult = pl::markov::parse_mults(cx.string_value("lr_mults"));
  if (cx.float_value("lr_mult_l1_qk") != 1.0) tc.lr_mult["l1_qk"] = cx.float_value("lr_mult_l1_qk");
  tc.freeze = pl::markov::parse_list(cx.string_value("freeze"));
  tc.late_frac = cx.float_value("late_frac");
  return tc;
}

// Cross-key checks of one point ("" when it is fine): heads divide d_model, rope needs an even
// head width, module names.
std::string check(const pl::sdk::Params& p) {
  const int64_t d = p.int_value("d_model"), h = p.int_value("heads");
  if (d % h)
    return "markov_icl.heads (" + std::to_string(h) + ") must divide markov_icl.d_model (" +
           std::to_string(d) + ")";
  if (p.is("positions", "rope") && (d / h) % 2)
    return "markov_icl.positions = \"rope\" needs an even head width d_model/heads";
  pl::markov::ModelConfig m;
  m.d = int(d);
  m.heads = int(h);
  m.layers = int(p.int_value("layers"));
  m.mlp = !p.bool_value("attn_only");
  m.ln = p.bool_value("layernorm");
  try {
    for (const auto& [g, val] : pl::markov::parse_mults(p.string_value("lr_mults")))
      if (!pl::markov::known_group(m, g) || val < 0)
        return "markov_icl.lr_mults: unknown module '" + g + "' or negative value";
  } catch (const std::exception& e) {
    return std::string("markov_icl.lr_mults: ") + e.what();
  }
  for (const auto& g : pl::markov::parse_list(p.string_value("freeze")))
    if (!pl::markov::known_group(m, g)) return "markov_icl.freeze: unknown module '" + g + "'";
  return "";
}

class MarkovIcl {
 public:
  explicit MarkovIcl(pl::sdk::Context& cx) : tc_(train_config(cx)), k_(cx.k) {
    trainer_ = std::make_unique<pl::markov::Trainer>(tc_, k_);
    ckpt_ = pl::markov::checkpoint_steps(tc_.steps, int(cx.int_value("checkpoints")));
    save_ = cx.is("save", "none") ? 0 : cx.is("save", "final") ? 1 : 2;
    if (tc_.alpha1 <= 0)
      cx.log(PL_LOG_INFO, "markov_icl: 1-Gen pseudo-count matched to the ensemble: alpha1 = " +
                              std::to_string(trainer_->alpha1()));
  }

  pl_status run(pl::sdk::Context& cx) {
    pl::markov::Trainer& tr = *trainer_;
    size_t next = 0;
    double loss_train = NAN;
    for (int64_t step = 0; step <= tc_.steps; ++step) {
      // The training loss is reported at the checkpoints only; between them the step checks
      // that the logits are finite (which a finite loss needs) instead of summing it.
      const bool at_ckpt = next < ckpt_.size() && ckpt_[next] == step;
      if (step > 0) {
        loss_train = tr.train_step(step, at_ckpt);
        if (!std::isfinite(loss_train))
          return cx.fail(std::string(at_ckpt ? "non-finite training loss" : "non-finite logits") +
                         " at step " + std::to_string(step));
      }
      if (at_ckpt) {
        if (cx.cancelled()) return PL_CANCELLED;  // before an evaluation (n_eval sequences)
        ++next;
        const pl::markov::EvalResult r = tr.evaluate();
        if (!std::isfinite(r.loss[0]) || !std::isfinite(r.loss[1]))
          return cx.fail("non-finite evaluation loss at step " + std::to_string(step));
        std::vector<pl::sdk::Cell> row =
            pl::markov::result_row(step, loss_train, r, tr.data(), step == tc_.steps);
        history_.steps.push_back(double(step));
        history_.phase.push_back(pl::markov::pred_name(r.phase));
        if (step == tc_.steps) {
          pl::markov::analyse(history_);
          row.push_back(history_.cls);
        } else {
          row.push_back(pl::sdk::Cell());
        }
        cx.emit(0, row);
        if (save_ == 2 || (save_ == 1 && step == tc_.steps)) save(cx, step);
      }
      if ((step & 15) == 0) cx.progress(double(step) / double(tc_.steps));
      if (cx.cancelled()) return PL_CANCELLED;  // every step: Ctrl-C waits one step at most
    }
    return PL_OK;
  }

 private:
  // checkpoints/p<point index>-s<seed>/step-<9 digits>.safetensors under the run folder.
  void save(pl::sdk::Context& cx, int64_t step) {
    pl::markov::CheckpointInfo info;
    static_cast<pl::markov::RunInfo&>(info) = pl::markov::run_info(
        trainer_->data().config(), step, std::string("markov_icl ") + kVersion);
    info.model = tc_.model;
    pl::markov::save_checkpoint(pl::markov::checkpoint_file(cx, step), trainer_->model(), info);
  }

  pl::markov::TrainConfig tc_;
  int save_ = 0;
  pl_kernel_table k_;
  std::unique_ptr<pl::markov::Trainer> trainer_;
  std::vector<int64_t> ckpt_;
  pl::markov::RunHistory history_;  // the phase at every evaluation, for the final row's class
};

pl_status finish(const pl_host* host, const char* run_dir) {
  std::string msg;
  const bool ok = pl::markov::write_summary(run_dir, &msg);
  host->log(host->ctx, ok ? PL_LOG_INFO : PL_LOG_WARN, msg.c_str());
  return PL_OK;
}

// The integer keys the memory and cost estimates below read, as doubles.
struct PointSizes {
  double d, N, layers, mlp, heads, C, K, batch, chunks, n_eval, steps;
  PointSizes(const pl_value* v, uint32_t n) {
    const pl::sdk::Params p(kParams, PL_SDK_COUNT(kParams), v, n);
    auto get = [&](const char* name) { return double(p.int_value(name)); };
    d = get("d_model"), N = get("N"), layers = get("layers"), mlp = get("mlp_mult");
    heads = get("heads"), C = get("C"), K = get("K"), batch = get("batch");
    chunks = get("chunks"), n_eval = get("n_eval"), steps = get("steps");
  }
};

}  // namespace

// The driver's memory check before a run (phaselab_plugin.h): an estimate of the bytes one point
// holds. Parameters with their gradient, Adam moments and one gradient per chunk
// (4 (4 + chunks) n_params), activations kept for the backward pass
// (4 batch layers N (12 d + mlp d + 2 heads N)), the two evaluation sets with their predictor
// probabilities (8 n_eval N (1 + C)) and the K transition matrices (8 K C^2).
extern "C" __attribute__((visibility("default"))) uint64_t phaselab_plugin_point_bytes(
    const pl_value* v, uint32_t n) {
  const PointSizes z(v, n);
  const double d = z.d, N = z.N, layers = z.layers, mlp = z.mlp, heads = z.heads, C = z.C, K = z.K;
  const double batch = z.batch, chunks = z.chunks, n_eval = z.n_eval;
  const double n_params = layers * (4 * d * d + 2 * mlp * d * d + 4 * d) + (2 * C + N) * d;
  const double b = 4 * (4 + chunks) * n_params +
                   4 * batch * layers * N * (12 * d + mlp * d + 2 * heads * N) +
                   8 * n_eval * N * (1 + C) + 8 * K * C * C + double(1 << 20);
  return uint64_t(b);
}

// The cost `run --shard` balances by: the training FLOPs, 6 x (matrix parameters touched per
// token) + 12 N d per layer for attention (forward + backward), times tokens (steps x batch x N),
// plus the K-dependent evaluation (the memorising predictors: O(K C) per token).
extern "C" __attribute__((visibility("default"))) double phaselab_plugin_point_cost(
    const pl_value* v, uint32_t n) {
  const PointSizes z(v, n);
  const double d = z.d, N = z.N, layers = z.layers, mlp = z.mlp, C = z.C, K = z.K;
  const double batch = z.batch, steps = z.steps, n_eval = z.n_eval;
  const double per_token =
      6 * layers * (4 * d * d + 2 * mlp * d * d) + 6 * C * d + layers * 12 * N * d;
  return steps * batch * N * per_token + 2 * n_eval * N * (K + 1) * C * 4;
}

PL_DEFINE_PLUGIN(
    MarkovIcl, "markov_icl", kVersion,
    "transformer on K Markov chains: KL to 2-Gen/1-Gen/2-Mem/1-Mem/hybrid, phase histories",
    kParams, kTables, kPlots, pl::sdk::validate_with<check>, finish)
