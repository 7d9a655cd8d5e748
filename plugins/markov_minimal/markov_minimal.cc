// SPDX-License-Identifier: Apache-2.0
// markov_minimal: the minimal models of the Markov ICL experiment (docs/markov-minimal.md) on the
// same chains, evaluation sets, Bayes predictors and KL phase labels as markov_icl:
//   symmetric  the symmetry-constrained attention-only transformer (beta, delta, read-out gains):
//              1-Gen plateau coefficients c_beta, c_delta and the escape time tau;
//   induction  layer 1 hard-wired to previous-token attention, trainable layer 2 and read-out;
//   memoriser  encode-pool-decode: capacity (largest K fitted to the 2-Mem floor) vs width.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "markov_common/plugin.hpp"
#include "markov_common/summary.hpp"
#include "markov_minimal/cost.hpp"
#include "markov_minimal/harness.hpp"
#include "markov_minimal/minimal_checkpoint.hpp"
#include "markov_minimal/minimal_summary.hpp"
#include "markov_minimal/symmetric_run.hpp"
#include "sdk/phaselab_sdk.hpp"

namespace {

namespace mm = pl::markov::minimal;

constexpr const char* kVersion = "0.2.0";

const pl_param_decl kParams[] = {
    pl::sdk::enum_param("model", "symmetric", "symmetric|induction|memoriser", "minimal model"),
    pl::markov::param::K,
    pl::markov::param::infinite,
    pl::markov::param::C,
    pl::markov::param::alpha,
    pl::sdk::float_param("alpha1", 0.0,
                         "pseudo-count of the 1-Gen predictor; 0 = matched to the ensemble",
                         PL_RANGE_MIN, 0),
    pl::sdk::int_param("N", 64, "context length (positions)", 2, 8192),
    pl::sdk::enum_param("optimizer", "adam", "adam|sgd", "Adam (betas below, no decay) or SGD"),
    pl::sdk::float_param("lr", 1e-2, "learning rate", PL_RANGE_MIN | PL_RANGE_MIN_EXCLUSIVE, 0),
    pl::sdk::float_param("beta1", 0.9, "Adam beta1 (1 would never move the first moment)",
                         PL_RANGE_MIN | PL_RANGE_MAX | PL_RANGE_MAX_EXCLUSIVE, 0, 1),
    pl::sdk::float_param("beta2", 0.95, "Adam beta2 (1: bias correction divides by zero)",
                         PL_RANGE_MIN | PL_RANGE_MAX | PL_RANGE_MAX_EXCLUSIVE, 0, 1),
    pl::sdk::int_param("batch", 32, "sequences per step", 1, 1 << 16),
    pl::sdk::int_param(
        "tokens", 0,
        "tokens per step: batch = max(1, tokens / N) (same gradient noise at every N); "
        "0 = use batch",
        0),
    pl::sdk::int_param("steps", 2000, "training steps", 1),
    pl::sdk::int_param("n_eval", 500, "sequences per evaluation set (ID and OOD)", 1),
    pl::markov::param::checkpoints,
    pl::markov::param::late_frac,
    pl::sdk::int_param("chain_seed", 0, "seed of the chains and evaluation sets", 0),
    pl::markov::param::save,
    // symmetric
    pl::sdk::float_param("init_beta", 0.0, "symmetric: initial layer-1 previous-token score"),
    pl::sdk::float_param("init_delta", 0.0, "symmetric: initial layer-2 match strength"),
    pl::sdk::int_param("plateau_steps", 300,
                       "symmetric: steps training only the read-out gains at beta = delta = 0 "
                       "(the 1-Gen plateau point where c_beta, c_delta are measured); 0 = skip",
                       0),
    pl::sdk::int_param("c_tokens", 262144,
                       "symmetric: tokens (c_tokens / N sequences, at least 64) for the plateau "
                       "loss and gradient",
                       1),
    pl::sdk::float_param("tau_frac", 0.5,
                         "symmetric: tau = first step the training loss (window mean) has dropped "
                         "this fraction of the way from the plateau loss to the 2-Gen Bayes loss",
                         PL_RANGE_MIN | PL_RANGE_MIN_EXCLUSIVE | PL_RANGE_MAX, 0, 1),
    pl::sdk::int_param("tau_window", 20, "symmetric: training-loss window (steps) for tau", 1),
    pl::sdk::float_param("stop_after_tau", 0.0,
                         "symmetric: stop at step (1 + this) tau once tau is found; 0 = never",
                         PL_RANGE_MIN, 0),
    pl::sdk::int_param("trace_every", 10, "symmetric: trace row every this many steps", 1),
    pl::sdk::enum_param("start", "zero", "zero|plateau",
                        "symmetric: training starts from read-out gains 0 (zero) or at the 1-Gen "
                        "optimum: beta, delta at init_beta, init_delta and the gains at their "
                        "plateau optimum (plateau; needs plateau_steps > 0)"),
    pl::sdk::enum_param(
        "readout", "trained", "trained|plateau|reference|fixed",
        "symmetric: read-out gains trained with beta, delta (trained) or frozen, only beta and "
        "delta trained: at this N's plateau optimum (plateau), at the plateau optimum of N = "
        "readout_N with the other keys alike (reference), or at fixed_g_u, fixed_g_h, fixed_g_o "
        "(fixed); c_beta, c_delta are also measured at the frozen gains (c_*_fixed in run.csv)"),
    pl::sdk::int_param("readout_N", 16,
                       "symmetric, readout = \"reference\": the N whose plateau gains are frozen",
                       2, 8192),
    pl::sdk::float_param("fixed_g_u", 0.0, "symmetric, readout = \"fixed\": frozen g_u"),
    pl::sdk::float_param("fixed_g_h", 0.0, "symmetric, readout = \"fixed\": frozen g_h"),
    pl::sdk::float_param("fixed_g_o", 0.0, "symmetric, readout = \"fixed\": frozen g_o"),
    pl::sdk::float_param("drop_min", 0.003,
                         "symmetric: tau_drop (midpoint of the fall from the run's plateau loss to "
                         "its final windowed loss) is left empty when the fall is below this many "
                         "nats (the windowed loss wiggles by ~5e-4 nats on the plateau)",
                         PL_RANGE_MIN, 0),
    pl::sdk::float_param("takeoff", 1.0,
                         "symmetric: tau_takeoff = first step with beta and delta both >= this",
                         PL_RANGE_MIN | PL_RANGE_MIN_EXCLUSIVE, 0),
    pl::sdk::enum_param("stop_on", "tau", "tau|takeoff",
                        "symmetric: stop_after_tau counts from tau (threshold) or tau_takeoff"),
    // induction / memoriser
    pl::sdk::int_param("d_head", 16, "induction: layer-2 head width", 1, 1024),
    pl::sdk::int_param("d_phi", 32, "memoriser: width of the transition lookup phi", 1, 4096),
    pl::sdk::int_param("width", 128, "memoriser: decoder MLP width", 1, 1 << 16),
    pl::sdk::bool_param("phi_gelu", false, "memoriser: GELU on the looked-up phi"),
    pl::sdk::float_param("init_scale", 0.02, "induction / memoriser: N(0, s^2) initial matrices",
                         PL_RANGE_MIN, 0),
    pl::sdk::float_param("kl_fit", 0.05,
                         "memoriser: K is fitted when the final phase is 2-Mem and KL(2-Mem || "
                         "model) on ID (all positions) is below this (nats per position)",
                         PL_RANGE_MIN | PL_RANGE_MIN_EXCLUSIVE, 0),
};

// results: markov_icl's columns, then the symmetric model's scalars (empty for the others).
constexpr auto kCols =
    pl::markov::result_columns(std::array<const char*, 5>{"beta", "delta", "g_u", "g_h", "g_o"});
const char* const kTraceCols[] = {"step", "loss_window", "beta", "delta", "g_u", "g_h", "g_o"};
const char* const kRunCols[] = {
    "model", "loss_plateau", "bayes_2gen", "bayes_1gen", "c_beta", "c_beta_se", "c_delta",
    "c_delta_se", "g_u_plateau", "g_h_plateau", "g_o_plateau", "tau_threshold", "tau", "steps_run",
    "loss_final", "gap_closed", "kl_2gen_final", "kl_2mem_final", "phase_final", "fits", "params",
    // model choices of tau(N) (docs/markov-minimal.md): the frozen read-out and its plateau
    "g_u_fixed", "g_h_fixed", "g_o_fixed", "loss_plateau_fixed", "c_beta_fixed", "c_beta_fixed_se",
    "c_delta_fixed", "c_delta_fixed_se",
    // the escape timed on the fall itself and on beta, delta
    "loss_drop_from", "loss_drop_to", "tau_drop", "tau_takeoff"};
const pl_table_decl kTables[] = {pl::markov::table("results", kCols),
                                 pl::sdk::table("trace", kTraceCols),
                                 pl::sdk::table("run", kRunCols)};

// The Bayes floors as dashed lines in the colour of the loss they bound.
constexpr pl::sdk::PlotStyle kFloors =
    pl::sdk::PlotStyle().references("bayes_2mem_id=loss_id,bayes_2gen_ood=loss_ood");
const pl_plot_decl kPlots[] = {
    pl::sdk::plot("sym_beta", "symmetric: layer-1 previous-token score beta vs step", "trace",
                  "step", "beta", "N,seed", "model=symmetric", 0),
    pl::sdk::plot("sym_delta", "symmetric: layer-2 match strength delta vs step", "trace", "step",
                  "delta", "N,seed", "model=symmetric", 0),
    pl::sdk::plot("sym_loss", "symmetric: training loss (window mean) vs step", "trace", "step",
                  "loss_window", "N,seed", "model=symmetric", PL_PLOT_LOGX),
    pl::sdk::plot("tau_vs_N", "symmetric: escape time tau vs N (fits in minimal_summary.txt)",
                  "run", "N", "tau", "seed", "model=symmetric",
                  PL_PLOT_LOGX | PL_PLOT_LOGY | PL_PLOT_POINTS),
    pl::sdk::plot("c_vs_N", "symmetric: c_beta, c_delta at the 1-Gen plateau vs N", "run", "N",
                  "c_beta,c_delta", "seed", "model=symmetric",
                  PL_PLOT_LOGX | PL_PLOT_LOGY | PL_PLOT_POINTS),
    pl::sdk::plot("memoriser_capacity", "memoriser: final KL(2-Mem || model) vs K per width", "run",
                  "K", "kl_2mem_final", "width,seed", "model=memoriser",
                  PL_PLOT_LOGX | PL_PLOT_LOGY),
    pl::sdk::plot("kl_history_2gen", "KL(2-Gen || model) on ID vs step", "results", "step",
                  "kl_2gen_id", "N,K,seed", "", PL_PLOT_LOGX | PL_PLOT_LOGY),
    pl::sdk::plot("loss_history", "ID / OOD loss with Bayes floors (dashed)", "results", "step",
                  "loss_id,loss_ood,bayes_2mem_id,bayes_2gen_ood", "N,K,seed", "", PL_PLOT_LOGX,
                  &kFloors),
};

mm::MinConfig min_config(const pl::sdk::Context& cx) {
  mm::MinConfig c;
  c.kind = cx.is("model", "symmetric")   ? mm::Kind::kSymmetric
           : cx.is("model", "induction") ? mm::Kind::kInduction
                                         : mm::Kind::kMemoriser;
  c.C = int(cx.int_value("C"));
  c.N = int(cx.int_value("N"));
  pl::markov::read_run_keys(cx, c);
  if (cx.int_value("tokens") > 0) c.batch = int(std::max<int64_t>(1, cx.int_value("tokens") / c.N));
  c.sgd = cx.is("optimizer", "sgd");
  c.beta1 = cx.float_value("beta1");
  c.beta2 = cx.float_value("beta2");
  c.late_frac = cx.float_value("late_frac");
  c.init[mm::kBeta] = cx.float_value("init_beta");
  c.init[mm::kDelta] = cx.float_value("init_delta");
  c.d_head = int(cx.int_value("d_head"));
  c.d_phi = int(cx.int_value("d_phi"));
  c.width = int(cx.int_value("width"));
  c.phi_gelu = cx.bool_value("phi_gelu");
  c.init_scale = cx.float_value("init_scale");
  c.seed = cx.seed_stream(0x6d696e696d616cull);  // "minimal"
  return c;
}

// The 1-Gen plateau point of the symmetric model and the loss gradient there (double model, per
// sequence for standard errors), with the 2-Gen and 1-Gen Bayes losses on the same sequences.
struct Plateau {
  double loss = NAN, bayes2 = NAN, bayes1 = NAN, c[2] = {NAN, NAN}, se[2] = {NAN, NAN};
  double gains[3] = {NAN, NAN, NAN};
  // at the frozen read-out (readout != "trained"): its gains, loss and slopes at beta = delta = 0
  mm::PlateauProbe fixed;
  double fixed_gains[3] = {NAN, NAN, NAN};
};

class MarkovMinimal {
 public:
  explicit MarkovMinimal(pl::sdk::Context& cx) : mc_(min_config(cx)), k_(*cx.host_->kernels) {
    h_ = std::make_unique<mm::Harness>(mc_, k_);
    ckpt_ = pl::markov::checkpoint_steps(mc_.steps, int(cx.int_value("checkpoints")));
    save_ = cx.is("save", "none") ? 0 : cx.is("save", "final") ? 1 : 2;
  }

  pl_status run(pl::sdk::Context& cx) {
    mm::Harness& h = *h_;
    mm::Net& net = h.net();
    const bool sym = mc_.kind == mm::Kind::kSymmetric;
    const bool mem = h.mem_defined();
    Plateau pl;
    const bool frozen = sym && !cx.is("readout", "trained");
    if (sym && cx.int_value("plateau_steps") > 0) pl = plateau(cx);
    if (sym && cx.is("readout", "fixed")) {
      pl.fixed_gains[0] = cx.float_value("fixed_g_u");
      pl.fixed_gains[1] = cx.float_value("fixed_g_h");
      pl.fixed_gains[2] = cx.float_value("fixed_g_o");
    }
    // the start point: gains 0 (as in init), at the plateau optimum, or at the frozen read-out
    if (frozen)
      for (int i = 0; i < 3; ++i) net.p[size_t(mm::kGu + i)] = pl.fixed_gains[i];
    else if (sym && cx.is("start", "plateau"))
      for (int i = 0; i < 3; ++i) net.p[size_t(mm::kGu + i)] = pl.gains[i];
    const std::vector<bool> mask = mm::readout_mask(frozen);
    const double takeoff = cx.float_value("takeoff");
    const bool stop_takeoff = cx.is("stop_on", "takeoff");
    std::vector<double> wl;  // windowed training loss after each step (NaN while it fills)
    double tau_takeoff = NAN;
    const double f = cx.float_value("tau_frac");
    const double thr = pl.loss - f * (pl.loss - pl.bayes2);
    const int W = int(cx.int_value("tau_window")), trace_every = int(cx.int_value("trace_every"));
    const double stop_after = cx.float_value("stop_after_tau");
    std::vector<double> win(size_t(W), 0.0);
    double wsum = 0, tau = NAN, loss_train = NAN;
    int64_t stop = mc_.steps;
    size_t next = 0;
    auto cell_sym = [&](int i) { return sym ? pl::sdk::Cell(net.p[size_t(i)]) : pl::sdk::Cell(); };
    pl::markov::EvalResult last{};
    for (int64_t step = 0; step <= stop; ++step) {
      if (step > 0) {
        loss_train = h.train_step(step, mask);
        if (!std::isfinite(loss_train))
          return cx.fail("non-finite training loss at step " + std::to_string(step));
        wsum += loss_train - win[size_t(step % W)];
        win[size_t(step % W)] = loss_train;
        if (sym) wl.push_back(step >= W ? wsum / W : NAN);
        if (step >= W && std::isnan(tau) && wsum / W <= thr) {
          tau = double(step);
          if (stop_after > 0 && !stop_takeoff)
            stop = std::min(stop, int64_t(std::ceil((1 + stop_after) * double(step))));
        }
        if (sym && std::isnan(tau_takeoff) && net.p[mm::kBeta] >= takeoff &&
            net.p[mm::kDelta] >= takeoff) {
          tau_takeoff = double(step);
          if (stop_after > 0 && stop_takeoff)
            stop = std::min(stop, int64_t(std::ceil((1 + stop_after) * double(step))));
        }
        if (sym && step % trace_every == 0)
          cx.emit(1, {step, step >= W ? pl::sdk::Cell(wsum / W) : pl::sdk::Cell(), net.p[0],
                      net.p[1], net.p[2], net.p[3], net.p[4]});
      }
      const bool at_ckpt = next < ckpt_.size() && ckpt_[next] == step;
      if (at_ckpt) ++next;
      if (at_ckpt || step == stop) {
        const pl::markov::EvalResult r = h.evaluate();
        last = r;
        if (!std::isfinite(r.loss[0]) || !std::isfinite(r.loss[1]))
          return cx.fail("non-finite evaluation loss at step " + std::to_string(step));
        std::vector<pl::sdk::Cell> row =
            pl::markov::result_row(step, loss_train, r, h.data(), step == stop);
        for (int i = 0; i < mm::kNumSym; ++i) row.push_back(cell_sym(i));
        cx.emit(0, row);
        if (save_ == 2 || (save_ == 1 && step == stop))
          mm::save_minimal(pl::markov::checkpoint_file(cx, step), h, step,
                           std::string("markov_minimal ") + kVersion);
      }
      if ((step & 15) == 0) {
        cx.progress(double(step) / double(stop));
        if (cx.cancelled()) return PL_CANCELLED;
      }
    }
    // one summary row per run
    const double lf = last.loss[mem ? 0 : 1];
    const double floor = mem ? h.eval_set(0).bayes[pl::markov::kMem2] : pl.bayes2;
    const double kl2m = mem ? last.kl[0][pl::markov::kMem2] : NAN;
    const bool fits = mem && last.phase == pl::markov::kMem2 && kl2m < cx.float_value("kl_fit");
    auto opt = [](double v) { return std::isfinite(v) ? pl::sdk::Cell(v) : pl::sdk::Cell(); };
    // tau_drop: midpoint of the fall from the run's own plateau loss (at the frozen read-out if
    // any) to its final windowed training loss
    const double drop_from = frozen ? pl.fixed.loss : pl.loss;
    const double drop_to = wl.empty() ? NAN : wl.back();
    const double tau_drop = mm::tau_drop(wl, drop_from, drop_to, cx.float_value("drop_min"));
    cx.emit(2, {cx.string_value("model"),
                opt(pl.loss),
                opt(pl.bayes2),
                opt(pl.bayes1),
                opt(pl.c[0]),
                opt(pl.se[0]),
                opt(pl.c[1]),
                opt(pl.se[1]),
                opt(pl.gains[0]),
                opt(pl.gains[1]),
                opt(pl.gains[2]),
                sym ? opt(thr) : pl::sdk::Cell(),
                opt(tau),
                stop,
                opt(lf),
                sym ? opt((pl.loss - lf) / (pl.loss - floor)) : pl::sdk::Cell(),
                opt(last.kl[0][pl::markov::kGen2]),
                opt(kl2m),
                pl::markov::pred_name(last.phase),
                fits ? 1 : 0,
                int64_t(net.p.size()),
                opt(pl.fixed_gains[0]),
                opt(pl.fixed_gains[1]),
                opt(pl.fixed_gains[2]),
                opt(pl.fixed.loss),
                opt(pl.fixed.c[0]),
                opt(pl.fixed.se[0]),
                opt(pl.fixed.c[1]),
                opt(pl.fixed.se[1]),
                sym ? opt(drop_from) : pl::sdk::Cell(),
                sym ? opt(drop_to) : pl::sdk::Cell(),
                opt(tau_drop),
                opt(tau_takeoff)});
    return PL_OK;
  }

 private:
  // The plateau point (gains trained alone at beta = delta = 0), c_beta and c_delta there, and,
  // with a frozen read-out, the same at the frozen gains (for readout = "fixed" the caller sets
  // them first: fixed_gains). Leaves the net at its initial parameters, optimiser reset.
  Plateau plateau(pl::sdk::Context& cx) {
    mm::Harness& h = *h_;
    mm::Net& net = h.net();
    const std::vector<double> init = net.p;
    const int64_t S = cx.int_value("plateau_steps"), ct = cx.int_value("c_tokens");
    const std::array<double, 3> g = mm::train_plateau_gains(h, S);
    Plateau p;
    for (int i = 0; i < 3; ++i) p.gains[i] = g[size_t(i)];
    std::array<double, mm::kNumSym> th;
    for (int i = 0; i < mm::kNumSym; ++i) th[size_t(i)] = net.p[size_t(i)];
    const mm::PlateauProbe pr = mm::probe_plateau(h, th, ct, true);
    p.loss = pr.loss;
    p.bayes2 = pr.bayes2;
    p.bayes1 = pr.bayes1;
    for (int k = 0; k < 2; ++k) p.c[k] = pr.c[k], p.se[k] = pr.se[k];
    if (cx.is("readout", "plateau")) {
      for (int i = 0; i < 3; ++i) p.fixed_gains[i] = p.gains[i];
    } else if (cx.is("readout", "reference")) {  // the same run at N = readout_N
      mm::MinConfig rc = mc_;
      rc.N = int(cx.int_value("readout_N"));
      if (cx.int_value("tokens") > 0)
        rc.batch = int(std::max<int64_t>(1, cx.int_value("tokens") / rc.N));
      mm::Harness ref(rc, k_);
      const std::array<double, 3> gr = mm::train_plateau_gains(ref, S);
      for (int i = 0; i < 3; ++i) p.fixed_gains[i] = gr[size_t(i)];
    } else if (cx.is("readout", "fixed")) {
      p.fixed_gains[0] = cx.float_value("fixed_g_u");
      p.fixed_gains[1] = cx.float_value("fixed_g_h");
      p.fixed_gains[2] = cx.float_value("fixed_g_o");
    }
    if (!cx.is("readout", "trained")) {
      std::array<double, mm::kNumSym> tf = {0, 0, p.fixed_gains[0], p.fixed_gains[1],
                                            p.fixed_gains[2]};
      p.fixed = mm::probe_plateau(h, tf, ct, false);
    }
    net.p = init;
    h.reset_optimiser();
    return p;
  }

  mm::MinConfig mc_;
  pl_kernel_table k_;
  std::unique_ptr<mm::Harness> h_;
  std::vector<int64_t> ckpt_;
  int save_ = 0;
};

// Cross-key checks of one point ("" when it is fine).
std::string check(const pl::sdk::Params& p) {
  if (p.is("model", "symmetric") && p.int_value("plateau_steps") == 0 &&
      (p.is("start", "plateau") || p.is("readout", "plateau") || p.is("readout", "reference")))
    return "markov_minimal: start = \"plateau\" and readout = \"plateau\" / \"reference\" "
           "need the plateau point: plateau_steps > 0";
  if (p.is("model", "memoriser") && p.bool_value("infinite"))
    return "markov_minimal: model = \"memoriser\" needs finite K (infinite = false): its "
           "capacity is measured against the 2-Mem predictor of the K chains";
  return "";
}

pl_status finish(const pl_host* host, const char* run_dir) {
  std::string msg;
  const bool ok = pl::markov::write_summary(run_dir, &msg);  // phase paths, t_2gen (summary.csv)
  host->log(host->ctx, ok ? PL_LOG_INFO : PL_LOG_WARN, msg.c_str());
  const bool ok2 = mm::write_minimal_summary(run_dir, &msg);
  host->log(host->ctx, ok2 ? PL_LOG_INFO : PL_LOG_WARN, msg.c_str());
  return PL_OK;
}

}  // namespace

// The cost the dispatcher and `run --shard` order points by (phaselab_plugin.h): the work of the
// run term by term, from the parameters only (cost.hpp has the terms and where they come from).
extern "C" __attribute__((visibility("default"))) double phaselab_plugin_point_cost(
    const pl_value* v, uint32_t n) {
  const pl::sdk::Params p(kParams, PL_SDK_COUNT(kParams), v, n);
  mm::CostInputs c;
  c.model = p.is("model", "symmetric") ? 0 : p.is("model", "induction") ? 1 : 2;
  c.C = double(p.int_value("C"));
  c.N = double(p.int_value("N"));
  c.K = double(p.int_value("K"));
  c.infinite = p.bool_value("infinite");
  c.matched_alpha1 = p.float_value("alpha1") <= 0;
  const int64_t tokens = p.int_value("tokens");
  auto batch_at = [&](double N) {
    return tokens > 0 ? double(std::max<int64_t>(1, tokens / int64_t(N)))
                      : double(p.int_value("batch"));
  };
  c.batch = batch_at(c.N);
  c.n_eval = double(p.int_value("n_eval"));
  c.steps = p.int_value("steps");
  c.checkpoints = p.int_value("checkpoints");
  c.d_head = double(p.int_value("d_head"));
  c.d_phi = double(p.int_value("d_phi"));
  c.width = double(p.int_value("width"));
  c.plateau_steps = double(p.int_value("plateau_steps"));
  c.c_tokens = double(p.int_value("c_tokens"));
  c.stop_after_tau = p.float_value("stop_after_tau");
  c.second_probe = !p.is("readout", "trained");
  if (p.is("readout", "reference")) {
    c.readout_N = double(p.int_value("readout_N"));
    c.readout_batch = batch_at(c.readout_N);
  }
  return mm::point_cost(c);
}

PL_DEFINE_PLUGIN(MarkovMinimal, "markov_minimal", kVersion,
                 "minimal models of Markov ICL: symmetric (beta, delta), hard-wired induction, "
                 "encode-pool-decode memoriser",
                 kParams, kTables, kPlots, pl::sdk::validate_with<check>, finish)
