// SPDX-License-Identifier: Apache-2.0
// circuits: mechanism probes of the Markov-ICL transformer (docs/circuits.md). On a checkpoint
// file, on every checkpoint of a markov_icl run folder, or on a model it trains itself: head
// scores, ablations with the phase the ablated network matches, path patching of every
// sender -> receiver edge under four corruptions, and task-vector separability of the chains.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "circuits/probes.hpp"
#include "markov_common/checkpoint.hpp"
#include "markov_common/plugin.hpp"
#include "markov_common/trainer.hpp"
#include "sdk/phaselab_sdk.hpp"

namespace {

namespace mk = pl::markov;
namespace cc = pl::markov::circuits;
namespace fs = std::filesystem;

constexpr const char* kVersion = "0.1.0";

const pl_param_decl kParams[] = {
    pl::sdk::enum_param("source", "train", "train|file|run",
                        "train a model here, probe one checkpoint file, or every checkpoint of a "
                        "markov_icl run folder (a run folder with one point, or its "
                        "checkpoints/<point> folder)"),
    pl::sdk::string_param("path", "", "checkpoint file or run folder (source = file | run)"),
    pl::sdk::int_param("n_probe", 256, "sequences per probe set (ID and OOD)", 8, 1 << 16),
    pl::sdk::float_param("late_frac", 0.25, "task vectors: the last fraction of positions",
                         PL_RANGE_MIN | PL_RANGE_MIN_EXCLUSIVE | PL_RANGE_MAX, 0, 1),
    pl::sdk::int_param("probe_seed", 0, "seed of the probe sets and corruptions", 0),
    pl::sdk::bool_param("full_every", false,
                        "ablations, patching and task vectors at every checkpoint (default: the "
                        "last one only; head scores and the phase are always at every one)"),
    // training (source = train): the markov_icl model and optimiser keys
    mk::param::K,
    mk::param::infinite,
    mk::param::C,
    mk::param::alpha,
    pl::sdk::float_param("alpha1", 0.0, "1-Gen pseudo-count; 0 = matched to the ensemble",
                         PL_RANGE_MIN, 0),
    pl::sdk::int_param("N", 64, "context length (positions)", 2, 4096),
    pl::sdk::int_param("d_model", 32, "residual width", 2, 4096),
    mk::param::heads,
    mk::param::layers,
    mk::param::mlp_mult,
    mk::param::attn_only,
    pl::sdk::float_param("lr", 3e-3, "AdamW learning rate", PL_RANGE_MIN | PL_RANGE_MIN_EXCLUSIVE,
                         0),
    pl::sdk::int_param("warmup", 100, "linear learning-rate warm-up steps", 0),
    pl::sdk::int_param("batch", 64, "sequences per step", 1, 1 << 16),
    pl::sdk::int_param("steps", 4000, "training steps", 1),
    pl::sdk::int_param("checkpoints", 12,
                       "log-spaced probe steps while training, plus step 0 (consecutive where "
                       "log spacing is under one step: every step asked is probed)",
                       1, 10000),
    pl::sdk::int_param("n_eval", 200, "sequences per trainer evaluation set", 1),
    pl::sdk::int_param("chain_seed", 0, "seed of the chains (shared across seeds)", 0),
    pl::sdk::int_param("chunks", 4, "fixed batch partition for the parallel step", 1, 4096),
    pl::sdk::bool_param("save", true,
                        "source = train: save the final model as a safetensors checkpoint "
                        "(checkpoints/<point>/step-NNNNNNNNN.safetensors)"),
    pl::sdk::bool_param("unfinished", false,
                        "source = run: probe a run whose run.json does not say it finished ok "
                        "(interrupted, killed, still running); its last checkpoint is then "
                        "probed as the final one"),
};

const char* const kResultCols[] = {"step",
                                   "chains",
                                   "phase",
                                   "phase_code",
                                   "phase_ood",
                                   "loss_id",
                                   "loss_ood",
                                   "kl_2gen_id",
                                   "kl_1gen_id",
                                   "kl_2mem_id",
                                   "kl_1mem_id",
                                   "l1_prev",
                                   "l1_prev_uniform",
                                   "l1_prev_enrich",
                                   "l1_prev_early",
                                   "l1_prev_early_enrich",
                                   "l1_prev_late",
                                   "l1_prev_late_enrich",
                                   "l2_induction",
                                   "l2_induction_uniform",
                                   "l2_induction_enrich",
                                   "l2_induction_l1u",
                                   "l2_induction_pattern",
                                   "phase_2gen",
                                   "final"};
const char* const kScoreCols[] = {"step",
                                  "chains",
                                  "set",
                                  "layer",
                                  "prev_token",
                                  "prev_token_uniform",
                                  "prev_token_enrich",
                                  "prev_early",
                                  "prev_early_uniform",
                                  "prev_early_enrich",
                                  "prev_late",
                                  "prev_late_uniform",
                                  "prev_late_enrich",
                                  "induction",
                                  "induction_uniform",
                                  "induction_enrich",
                                  "induction_l1u",
                                  "induction_l1u_enrich",
                                  "induction_pattern",
                                  "loss",
                                  "phase",
                                  "phase_code",
                                  "final"};
const char* const kAblCols[] = {"step",    "chains",    "set",     "index",     "ablation",
                                "loss",    "dloss",     "kl_2gen", "kl_1gen",   "kl_2mem",
                                "kl_1mem", "kl_hybrid", "phase",   "phase_code"};
const char* const kPatchCols[] = {
    "step",   "chains",   "set",        "corruption", "corruption_code", "edge",
    "sender", "receiver", "edge_index", "dlogp",      "frac_gap",        "gap_logp",
    "kl",     "kl_frac",  "kl_gap",     "rank"};
const char* const kTvCols[] = {"step",    "component",     "component_code", "K",
                               "n_train", "n_test",        "accuracy",       "accuracy_shuffled",
                               "chance",  "bayes_accuracy"};
const pl_table_decl kTables[] = {
    pl::sdk::table("results", kResultCols), pl::sdk::table("scores", kScoreCols),
    pl::sdk::table("ablations", kAblCols), pl::sdk::table("patching", kPatchCols),
    pl::sdk::table("task_vectors", kTvCols)};

// Edge importance as a heat map: x the edge (edge_index in patching.csv, ticks named by its
// edge column: E->A1.q, E->A1.k, E->A1.v, E->M1, A1->M1, E->A2.q, ... M2->U), y the corruption,
// colour the share of the shift.
constexpr pl::sdk::PlotStyle kEdgeMap =
    pl::sdk::PlotStyle()
        .heatmap("kl_frac")
        .y_categories("0=other chain|1=permutation|2=last state|3=fresh chain")
        .xtic_column("edge")
        .labels("edge (sender->receiver)", "corruption");
constexpr pl::sdk::PlotStyle kEdges =
    pl::sdk::PlotStyle().xtic_column("edge").labels("edge (sender->receiver)", "kl_frac");
// Ablations by name (the ablation column: none, A1 pattern uniform, ...), not by index.
constexpr pl::sdk::PlotStyle kAblations =
    pl::sdk::PlotStyle().xtic_column("ablation").labels("ablation", "KL(predictor || network)");
// Each score's uniform-attention baseline dashed, in the score's colour.
constexpr pl::sdk::PlotStyle kScores =
    pl::sdk::PlotStyle().references("l1_prev_uniform=l1_prev,l2_induction_uniform=l2_induction");
// Enrichment: 1 = attention that ignores tokens and positions (uniform over the prefix).
constexpr pl::sdk::PlotStyle kEnrich =
    pl::sdk::PlotStyle().labels("step", "score / uniform-attention baseline");
const pl_plot_decl kPlots[] = {
    pl::sdk::plot(
        "edge_map_id", "share of the last-position shift recovered per edge and corruption (ID)",
        "patching", "edge_index", "corruption_code", "chains,seed", "set=id", 0, &kEdgeMap),
    pl::sdk::plot(
        "edge_map_ood", "share of the last-position shift recovered per edge and corruption (OOD)",
        "patching", "edge_index", "corruption_code", "chains,seed", "set=ood", 0, &kEdgeMap),
    pl::sdk::plot("scores_vs_step",
                  "head scores vs step (ID; dashed: uniform baselines; phase_2gen 1: 2-Gen)",
                  "results", "step",
                  "l1_prev,l1_prev_uniform,l2_induction,l2_induction_uniform,phase_2gen",
                  "chains,seed", "", PL_PLOT_LOGX, &kScores),
    pl::sdk::plot("enrichment_vs_step", "enrichment over uniform attention vs step (ID)", "results",
                  "step",
                  "l1_prev_early_enrich,l1_prev_late_enrich,l1_prev_enrich,l2_induction_enrich",
                  "chains,seed", "", PL_PLOT_LOGX | PL_PLOT_LOGY, &kEnrich),
    pl::sdk::plot("induction_parts_vs_step",
                  "L2 induction vs step (ID): L1 pattern as is, uniform (l1u), difference",
                  "results", "step",
                  "l2_induction,l2_induction_l1u,l2_induction_pattern,l2_induction_uniform",
                  "chains,seed", "", PL_PLOT_LOGX),
    pl::sdk::plot("phase_vs_step",
                  "phase code vs step (0 2-Gen, 1 1-Gen, 2 2-Mem, 3 1-Mem, 4 hybrid)", "results",
                  "step", "phase_code", "chains,seed", "", PL_PLOT_LOGX),
    pl::sdk::plot("kl_vs_step", "KL(predictor || network) on ID vs step", "results", "step",
                  "kl_2gen_id,kl_1gen_id,kl_2mem_id,kl_1mem_id", "chains,seed", "",
                  PL_PLOT_LOGX | PL_PLOT_LOGY),
    pl::sdk::plot("edges_id", "output-shift share per edge (ID; kl_frac)", "patching", "edge_index",
                  "kl_frac", "chains,seed,corruption", "set=id", PL_PLOT_POINTS, &kEdges),
    pl::sdk::plot("edges_ood", "output-shift share per edge (OOD; kl_frac)", "patching",
                  "edge_index", "kl_frac", "chains,seed,corruption", "set=ood", PL_PLOT_POINTS,
                  &kEdges),
    pl::sdk::plot("ablations_id", "KL to each predictor per ablation (ID)", "ablations", "index",
                  "kl_2gen,kl_1gen,kl_2mem,kl_1mem,kl_hybrid", "chains,seed", "set=id",
                  PL_PLOT_POINTS | PL_PLOT_LOGY, &kAblations),
};

// Seed purposes of the probe sets (derived from probe_seed and chain_seed).
constexpr uint64_t kProbeId = 0x70726f62652d6964ull, kProbeOod = 0x70726f62652d6f6full;

// The markov_icl model and optimiser keys this plugin declares (beta2 as markov_icl's default).
mk::TrainConfig train_config(const pl::sdk::Context& cx) {
  mk::TrainConfig tc = mk::train_config_base(cx);
  tc.beta2 = 0.95;
  return tc;
}

// Cross-key checks of one point ("" when it is fine).
std::string check(const pl::sdk::Params& p) {
  if (p.int_value("d_model") % p.int_value("heads"))
    return "circuits.heads must divide circuits.d_model";
  if (p.is("source", "train")) return "";
  const std::string src = p.string_value("source"), path = p.string_value("path");
  if (path.empty()) return "circuits.path is required when circuits.source = \"" + src + "\"";
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st))
    return "circuits.path \"" + path + "\" does not exist (circuits.source = \"" + src + "\")";
  if (src == "file" && !fs::is_regular_file(st))
    return "circuits.path \"" + path + "\" is not a checkpoint file (circuits.source = \"file\")";
  if (src == "run" && !fs::is_directory(st))
    return "circuits.path \"" + path + "\" is not a run folder (circuits.source = \"run\")";
  return "";
}

const pl_param_decl& decl(const char* name) {
  for (const auto& d : kParams)
    if (std::strcmp(d.name, name) == 0) return d;
  throw std::logic_error(std::string("circuits: no parameter ") + name);
}

// A checkpoint's metadata checked against this plugin's own parameter ranges (what a config of
// circuits may ask for), so that a hand-made or corrupted file (alpha = -0.5, K = 0) cannot run
// with wrong chains or crash the chain sampler; throws std::runtime_error naming the file.
void check_metadata(const std::string& file, const mk::CheckpointInfo& i) {
  auto need = [&](const char* key, const char* name, double v) {
    const pl_param_decl& d = decl(name);
    const uint32_t f = d.range_flags;
    bool ok = std::isfinite(v);
    if (ok && (f & PL_RANGE_MIN)) ok = f & PL_RANGE_MIN_EXCLUSIVE ? v > d.min : v >= d.min;
    if (ok && (f & PL_RANGE_MAX)) ok = f & PL_RANGE_MAX_EXCLUSIVE ? v < d.max : v <= d.max;
    if (ok) return;
    std::string range;
    if (f & PL_RANGE_MIN)
      range +=
          std::string(f & PL_RANGE_MIN_EXCLUSIVE ? "> " : ">= ") + mk::detail::fmt_double(d.min);
    if (f & PL_RANGE_MAX)
      range += std::string(range.empty() ? "" : " and ") +
               (f & PL_RANGE_MAX_EXCLUSIVE ? "< " : "<= ") + mk::detail::fmt_double(d.max);
    throw std::runtime_error("circuits: checkpoint " + file + ": __metadata__ " + key + " = " +
                             mk::detail::fmt_double(v) + " is outside circuits." + name +
                             "'s range (" + range + ")");
  };
  const mk::ModelConfig& c = i.model;
  if (!i.infinite) need("K", "K", i.K);  // infinite K: no chain set (K = 0)
  need("alpha", "alpha", i.alpha);
  need("alpha1", "alpha1", i.alpha1);
  need("C", "C", c.C);
  need("N", "N", c.N);
  need("d_model", "d_model", c.d);
  need("heads", "heads", c.heads);
  need("layers", "layers", c.layers);
  if (c.mlp && (c.ffn % c.d != 0 || c.ffn / c.d < 1 || c.ffn / c.d > 64))
    throw std::runtime_error("circuits: checkpoint " + file +
                             ": __metadata__ ffn = " + std::to_string(c.ffn) +
                             " is not mlp_mult * d_model with mlp_mult in "
                             "[1, 64] (d_model = " +
                             std::to_string(c.d) + ")");
  if (!(std::isfinite(c.ln_eps) && c.ln_eps > 0))
    throw std::runtime_error("circuits: checkpoint " + file + ": __metadata__ ln_eps = " +
                             mk::detail::fmt_double(c.ln_eps) + " must be a number > 0");
}

// The status recorded in the run.json of the run folder `path` (a run folder, or its
// checkpoints/<point> folder): "ok" when it finished, "" when there is no run.json.
std::string run_status(const std::string& path) {
  fs::path dir = path;
  if (!fs::exists(dir / "run.json") &&
      dir.lexically_normal().parent_path().filename() == "checkpoints")
    dir = dir.lexically_normal().parent_path().parent_path();
  std::ifstream in(dir / "run.json", std::ios::binary);
  if (!in) return "";
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  // phaselab writes the run's own keys two spaces in; the points' statuses are deeper.
  const std::string key = "\n  \"status\": \"";
  const size_t at = text.find(key);
  if (at == std::string::npos) return "unknown";
  const size_t end = text.find('"', at + key.size());
  return end == std::string::npos ? "unknown" : text.substr(at + key.size(), end - at - key.size());
}

// Checkpoint files of a run folder, by step: <run>/checkpoints/<point>/step-*.safetensors with
// exactly one point, or <point>/step-*.safetensors directly.
std::vector<std::string> run_checkpoints(const std::string& path) {
  fs::path dir = path;
  if (fs::is_directory(dir / "checkpoints")) {
    std::vector<fs::path> pts;
    for (const auto& e : fs::directory_iterator(dir / "checkpoints"))
      if (e.is_directory()) pts.push_back(e.path());
    std::sort(pts.begin(), pts.end());
    if (pts.size() != 1) {
      std::string names;
      for (const auto& p : pts) names += " " + p.filename().string();
      throw std::runtime_error("circuits: " + path + "/checkpoints holds " +
                               std::to_string(pts.size()) +
                               " point folders; name one in circuits.path:" + names);
    }
    dir = pts[0];
  }
  if (!fs::is_directory(dir)) throw std::runtime_error("circuits: no folder " + path);
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string f = e.path().filename().string();
    if (f.rfind("step-", 0) == 0 && e.path().extension() == ".safetensors")
      files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());  // zero-padded step numbers sort by step
  if (files.empty())
    throw std::runtime_error("circuits: no step-*.safetensors checkpoints in " + dir.string());
  return files;
}

class Circuits {
 public:
  explicit Circuits(pl::sdk::Context& cx) : k_(cx.k) {
    src_ = cx.string_value("source");
    n_probe_ = int(cx.int_value("n_probe"));
    late_frac_ = cx.float_value("late_frac");
    probe_seed_ = uint64_t(cx.int_value("probe_seed"));
    full_every_ = cx.bool_value("full_every");
    if (src_ == "train") {
      tc_ = train_config(cx);
      trainer_ = std::make_unique<mk::Trainer>(tc_, k_);
      info_.model = tc_.model;
      info_.chain_seed = tc_.chain_seed;
      info_.K = tc_.infinite ? 0 : tc_.K;  // infinite K: no chain set, K recorded as "inf"
      info_.infinite = tc_.infinite;
      info_.alpha = tc_.alpha;
      info_.alpha1 = trainer_->alpha1();
      info_.plugin = std::string("circuits ") + kVersion;
      steps_ = cc::probe_steps(tc_.steps, int(cx.int_value("checkpoints")));
    } else {
      const std::string path = cx.string_value("path");
      if (src_ == "run") {
        const std::string st = run_status(path);
        if (!st.empty() && st != "ok") {
          const std::string what = "circuits: the run " + path + " did not finish ok (run.json " +
                                   "status \"" + st + "\"): its last checkpoint is not the " +
                                   "final model";
          if (!cx.bool_value("unfinished"))
            throw std::runtime_error(what + "; finish it with phaselab run --resume, or set " +
                                     "circuits.unfinished = true to probe it as it is");
          cx.log(PL_LOG_WARN, what + " (circuits.unfinished = true: probed as it is)");
        }
      }
      files_ = src_ == "file" ? std::vector<std::string>{path} : run_checkpoints(path);
      info_ = mk::load_checkpoint(files_.back()).info;
      check_metadata(files_.back(), info_);
      model_ = std::make_unique<mk::Model<float>>(info_.model, &k_, 1, 1);
    }
    prepare();
  }

  pl_status run(pl::sdk::Context& cx) {
    if (src_ == "train") {
      mk::Trainer& tr = *trainer_;
      size_t next = 0;
      for (int64_t step = 0; step <= tc_.steps; ++step) {
        // the loss itself is not reported: the step only checks that the logits are finite
        if (step > 0 && !std::isfinite(tr.train_step(step, false)))
          return cx.fail("non-finite logits at step " + std::to_string(step));
        if (next < steps_.size() && steps_[next] == step) {
          ++next;
          probe(cx, tr.model(), step, step == tc_.steps);
        }
        if ((step & 15) == 0) {
          cx.progress(double(step) / double(tc_.steps));
          if (cx.cancelled()) return PL_CANCELLED;
        }
      }
      if (cx.bool_value("save")) {
        char name[96];
        std::snprintf(name, sizeof name, "p%04llu-s%llu", (unsigned long long)cx.point_index(),
                      (unsigned long long)cx.seed());
        const std::string dir = std::string(cx.out_dir()) + "/checkpoints/" + name;
        mk::make_dirs(dir);
        std::snprintf(name, sizeof name, "/step-%09lld.safetensors", (long long)tc_.steps);
        info_.step = tc_.steps;
        mk::save_checkpoint(dir + name, tr.model(), info_);
      }
      return PL_OK;
    }
    for (size_t i = 0; i < files_.size(); ++i) {
      const mk::Checkpoint ck = mk::load_checkpoint(files_[i]);
      const mk::CheckpointInfo& a = ck.info;
      if (a.chain_seed != info_.chain_seed || a.K != info_.K || a.infinite != info_.infinite ||
          a.alpha != info_.alpha || ck.params.size() != model_->params.size())
        return cx.fail("circuits: " + files_[i] + " is from another model or chain set");
      mk::load_into(ck, *model_);
      probe(cx, *model_, a.step, i + 1 == files_.size());
      cx.progress(double(i + 1) / double(files_.size()));
      if (cx.cancelled()) return PL_CANCELLED;
    }
    return PL_OK;
  }

 private:
  // Chains and probe sets, from the checkpoint's (or config's) chain seed.
  void prepare() {
    const mk::ModelConfig& c = info_.model;
    mem_ = !info_.infinite;
    if (mem_) {
      chains_.resize(info_.K, c.C);
      chains_.generate(k_, mk::stream_seed(info_.chain_seed, mk::Stream::kTrainChains), 0,
                       info_.alpha);
    }
    const uint64_t base = pl::sdk::derive(probe_seed_, info_.chain_seed);
    const mk::Chains* pc = mem_ ? &chains_ : nullptr;
    sets_[0] = cc::make_probe_set(k_, n_probe_, c.N, c.C, info_.alpha, info_.alpha1, pc, pc,
                                  pl::sdk::derive(base, kProbeId));
    sets_[1] = cc::make_probe_set(k_, n_probe_, c.N, c.C, info_.alpha, info_.alpha1, nullptr, pc,
                                  pl::sdk::derive(base, kProbeOod));
  }

  void probe(pl::sdk::Context& cx, const mk::Model<float>& m, int64_t step, bool final) {
    const mk::ModelConfig& c = m.config();
    const mk::HookedModel<float> hm(m);
    const char* set_name[2] = {"id", "ood"};
    const pl::sdk::Cell chains = chains_cell();
    mk::HookedCache<float> clean[2];
    cc::RunMetrics cm[2];
    std::vector<cc::HeadScores> hs[2], hu[2];
    auto nan_if = [&](double v) { return std::isfinite(v) ? pl::sdk::Cell(v) : pl::sdk::Cell(); };
    for (int s = 0; s < 2; ++s) {
      const cc::ProbeSet& p = sets_[s];
      hm.run(p.seq.data(), p.n, {}, clean[s]);
      cm[s] = cc::run_metrics(c, clean[s], p.seq.data(), p.q.data(), mem_);
      // the same inputs with layer 1's pattern replaced by uniform causal attention (the
      // "A1 pattern uniform" ablation): the later layers' scores without a previous-token head
      if (c.layers > 1) hu[s] = cc::head_scores_l1_uniform(hm, c, p.seq.data(), p.n, &clean[s]);
      for (int l = 0; l < c.layers; ++l) {
        hs[s].push_back(cc::head_scores(c, p.seq.data(), p.n, clean[s].pattern[size_t(l)].data()));
        const cc::HeadScores& h = hs[s].back();
        const bool has_u = l > 0;  // layer 1 with its own pattern uniform: the baseline itself
        const double iu = has_u ? hu[s][size_t(l)].induction : NAN;
        cx.emit(1, {step,
                    chains,
                    set_name[s],
                    l + 1,
                    h.prev,
                    h.prev_uniform,
                    nan_if(cc::enrichment(h.prev, h.prev_uniform)),
                    h.prev_early,
                    h.prev_early_uniform,
                    nan_if(cc::enrichment(h.prev_early, h.prev_early_uniform)),
                    h.prev_late,
                    h.prev_late_uniform,
                    nan_if(cc::enrichment(h.prev_late, h.prev_late_uniform)),
                    h.induction,
                    h.induction_uniform,
                    nan_if(cc::enrichment(h.induction, h.induction_uniform)),
                    nan_if(iu),
                    nan_if(cc::enrichment(iu, h.induction_uniform)),
                    nan_if(h.induction - iu),
                    cm[s].loss,
                    mk::pred_name(cm[s].phase),
                    cm[s].phase,
                    int(final)});
      }
    }
    const cc::HeadScores& l1 = hs[0][0];
    const size_t i2 = size_t(std::min(1, c.layers - 1));
    const cc::HeadScores& l2 = hs[0][i2];
    const double l2u = c.layers > 1 ? hu[0][i2].induction : NAN;
    cx.emit(0, {step,
                chains,
                mk::pred_name(cm[0].phase),
                cm[0].phase,
                mk::pred_name(cm[1].phase),
                cm[0].loss,
                cm[1].loss,
                cm[0].kl[mk::kGen2],
                cm[0].kl[mk::kGen1],
                nan_if(cm[0].kl[mk::kMem2]),
                nan_if(cm[0].kl[mk::kMem1]),
                l1.prev,
                l1.prev_uniform,
                nan_if(cc::enrichment(l1.prev, l1.prev_uniform)),
                l1.prev_early,
                nan_if(cc::enrichment(l1.prev_early, l1.prev_early_uniform)),
                l1.prev_late,
                nan_if(cc::enrichment(l1.prev_late, l1.prev_late_uniform)),
                l2.induction,
                l2.induction_uniform,
                nan_if(cc::enrichment(l2.induction, l2.induction_uniform)),
                nan_if(l2u),
                nan_if(l2.induction - l2u),
                int(cm[0].phase == mk::kGen2),
                int(final)});
    if (!final && !full_every_) return;
    for (int s = 0; s < 2; ++s) {
      ablations(cx, hm, c, s, clean[s], cm[s], step);
      patching(cx, hm, c, s, clean[s], step);
    }
    task_vectors(cx, c, clean[0], step);
  }

  void ablations(pl::sdk::Context& cx, const mk::HookedModel<float>& hm, const mk::ModelConfig& c,
                 int s, const mk::HookedCache<float>& clean, const cc::RunMetrics& cm,
                 int64_t step) {
    const cc::ProbeSet& p = sets_[s];
    const int nb = p.n;
    struct Abl {
      std::string name;
      mk::Hooks<float> h;
    };
    std::vector<Abl> list;
    std::vector<std::vector<float>> keep;  // storage the hooks point into
    keep.reserve(64);
    const std::vector<float> zeros(size_t(nb) * c.N * c.d, 0.f);
    const std::vector<float> uni = mk::uniform_pattern<float>(c, nb),
                             prev = mk::previous_token_pattern<float>(c, nb);
    for (int l = 0; l < c.layers; ++l) {
      const std::string a = "A" + std::to_string(l + 1);
      Abl u{a + " pattern uniform", {}}, pv{a + " pattern previous-token", {}},
          o{a + " pattern of another input", {}};
      u.h.pattern[l] = uni.data();
      pv.h.pattern[l] = prev.data();
      keep.push_back(cc::shifted_pattern(c, clean.pattern[size_t(l)], nb));
      o.h.pattern[l] = keep.back().data();
      list.push_back(u), list.push_back(pv), list.push_back(o);
    }
    for (int k = 1; k < mk::num_components(c); ++k) {
      if (!mk::has_component(c, k)) continue;
      Abl z{mk::component_name(k) + " zero", {}}, mn{mk::component_name(k) + " mean", {}};
      z.h.replace[k] = zeros.data();
      keep.push_back(cc::position_mean(c, clean.comp[size_t(k)], nb));
      mn.h.replace[k] = keep.back().data();
      list.push_back(z), list.push_back(mn);
    }
    std::vector<cc::RunMetrics> res(list.size());
    tbb::parallel_for(size_t(0), list.size(), [&](size_t i) {
      mk::HookedCache<float> out;
      hm.run(p.seq.data(), nb, list[i].h, out, &clean);
      res[i] = cc::run_metrics(c, out, p.seq.data(), p.q.data(), mem_);
    });
    auto emit = [&](int idx, const std::string& name, const cc::RunMetrics& r) {
      std::vector<pl::sdk::Cell> row = {step, chains_cell(), s ? "ood" : "id", idx,
                                        name, r.loss,        r.loss - cm.loss};
      for (int a = 0; a < mk::kNumPred; ++a)
        row.push_back(std::isfinite(r.kl[a]) ? pl::sdk::Cell(r.kl[a]) : pl::sdk::Cell());
      row.push_back(mk::pred_name(r.phase));
      row.push_back(r.phase);
      cx.emit(2, row);
    };
    emit(0, "none", cm);
    for (size_t i = 0; i < list.size(); ++i) emit(int(i + 1), list[i].name, res[i]);
  }

  void patching(pl::sdk::Context& cx, const mk::HookedModel<float>& hm, const mk::ModelConfig& c,
                int s, const mk::HookedCache<float>& clean, int64_t step) {
    const cc::ProbeSet& p = sets_[s];
    const auto edges = cc::all_edges(c);
    for (int co = 0; co < cc::kNumCorr; ++co) {
      mk::HookedCache<float> bad;
      hm.run(p.corrupt[co].data(), p.n, {}, bad);
      const double gap =
          cc::logp_last(c, bad, p.seq.data()) - cc::logp_last(c, clean, p.seq.data());
      const double klgap =
          cc::mean_kl(cc::last_log_probs(c, clean), cc::last_log_probs(c, bad), c.C);
      const auto r = cc::patch_edges(hm, c, p.seq.data(), p.n, clean, bad, edges);
      // rank by share of the distribution shift (1 = largest)
      std::vector<size_t> order(r.size());
      for (size_t i = 0; i < r.size(); ++i) order[i] = i;
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return r[a].kl_frac > r[b].kl_frac; });
      std::vector<int> rank(r.size());
      for (size_t i = 0; i < order.size(); ++i) rank[order[i]] = int(i + 1);
      for (size_t i = 0; i < r.size(); ++i) {
        const std::string sn = mk::component_name(r[i].sender),
                          rn = mk::receiver_name(c, r[i].receiver);
        cx.emit(
            3, {step, chains_cell(), s ? "ood" : "id", cc::corruption_name(co), co, sn + "->" + rn,
                sn, rn, int(i), r[i].dlogp, r[i].frac, gap, r[i].kl, r[i].kl_frac, klgap, rank[i]});
      }
    }
  }

  // Task vectors (ID, finite K >= 2): each component's output averaged over the late positions
  // of a sequence; nearest-centroid accuracy of the chain identity, centroids from the even
  // sequences, accuracy on the odd ones; the same with the labels shuffled; the Bayes accuracy
  // (argmax of the sequence's likelihood under each training chain).
  void task_vectors(pl::sdk::Context& cx, const mk::ModelConfig& c,
                    const mk::HookedCache<float>& clean, int64_t step) {
    if (!mem_ || info_.K < 2) return;
    const cc::ProbeSet& p = sets_[0];
    const int N = c.N, d = c.d, n = p.n, K = info_.K;
    const int t0 = N - std::max(1, int(std::lround(late_frac_ * N)));
    std::vector<bool> train(static_cast<size_t>(n), false);
    std::vector<int> shuffled = p.chain;
    for (int i = 0; i < n; ++i) train[size_t(i)] = i % 2 == 0;
    mk::Rng r(k_, pl::sdk::derive(probe_seed_, 0x73687566ull), 0);
    for (int i = n - 1; i > 0; --i)
      std::swap(shuffled[size_t(i)], shuffled[r.below(uint64_t(i + 1))]);
    int bayes_right = 0, n_test = 0;
    for (int i = 0; i < n; ++i) {
      if (train[size_t(i)]) continue;
      const int32_t* x = p.seq.data() + size_t(i) * (N + 1);
      int best = 0;
      double bl = -INFINITY;
      for (int k = 0; k < K; ++k) {
        double ll = chains_.logpi[size_t(k) * c.C + x[0]];
        for (int t = 1; t < N; ++t) ll += chains_.logT[(size_t(k) * c.C + x[t - 1]) * c.C + x[t]];
        if (ll > bl) bl = ll, best = k;
      }
      bayes_right += best == p.chain[size_t(i)];
      ++n_test;
    }
    for (int k = 0; k < mk::num_components(c); ++k) {
      if (!mk::has_component(c, k)) continue;
      std::vector<double> v(size_t(n) * d, 0.0);
      const float* src = clean.comp[size_t(k)].data();
      for (int i = 0; i < n; ++i)
        for (int t = t0; t < N; ++t)
          for (int j = 0; j < d; ++j)
            v[size_t(i) * d + j] += double(src[(size_t(i) * N + t) * d + j]) / (N - t0);
      const double acc = cc::nearest_centroid_accuracy(v, d, p.chain, train, K);
      const double accs = cc::nearest_centroid_accuracy(v, d, shuffled, train, K);
      cx.emit(4, {step, mk::component_name(k), k, K, n - n_test, n_test, acc, accs, 1.0 / K,
                  double(bayes_right) / n_test});
    }
  }

  // The number of training chains, "inf" at infinite K (the K key is then unused).
  pl::sdk::Cell chains_cell() const {
    return info_.infinite ? pl::sdk::Cell("inf") : pl::sdk::Cell(info_.K);
  }

  pl_kernel_table k_;
  std::string src_;
  int n_probe_ = 256;
  double late_frac_ = 0.25;
  uint64_t probe_seed_ = 0;
  bool full_every_ = false, mem_ = true;
  mk::TrainConfig tc_;
  std::unique_ptr<mk::Trainer> trainer_;
  std::vector<int64_t> steps_;
  std::vector<std::string> files_;
  std::unique_ptr<mk::Model<float>> model_;
  mk::CheckpointInfo info_;
  mk::Chains chains_;
  cc::ProbeSet sets_[2];
};

}  // namespace

PL_DEFINE_PLUGIN(Circuits, "circuits", kVersion,
                 "circuit probes of the Markov-ICL transformer: head scores, ablations, path "
                 "patching, task vectors",
                 kParams, kTables, kPlots, pl::sdk::validate_with<check>, nullptr)
