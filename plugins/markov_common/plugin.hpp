// SPDX-License-Identifier: Apache-2.0
// Plugin glue shared by the Markov plugins (markov_icl, markov_minimal, circuits): the config keys
// they declare alike, the training config read from them, the results table (columns and the row
// of one evaluation), and where a point's checkpoints go. (Their cross-key checks and cost exports
// read values by name through the SDK's Params.)
#pragma once

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "checkpoint.hpp"
#include "predictors.hpp"
#include "sdk/phaselab_sdk.hpp"
#include "trainer.hpp"

namespace pl::markov {

// Config keys the plugins declare with the same meaning, range and default.
namespace param {
constexpr pl_param_decl K = pl::sdk::int_param("K", 8, "number of training chains", 1, 1 << 20);
constexpr pl_param_decl infinite =
    pl::sdk::bool_param("infinite", false, "a fresh chain for every sequence (K is ignored)");
constexpr pl_param_decl C = pl::sdk::int_param("C", 10, "number of states", 2, 64);
constexpr pl_param_decl alpha =
    pl::sdk::float_param("alpha", 1.0, "Dirichlet concentration of the transition rows",
                         PL_RANGE_MIN | PL_RANGE_MIN_EXCLUSIVE, 0);
constexpr pl_param_decl heads = pl::sdk::int_param("heads", 1, "attention heads per layer", 1, 64);
constexpr pl_param_decl layers = pl::sdk::int_param("layers", 2, "transformer layers", 1, 16);
constexpr pl_param_decl mlp_mult =
    pl::sdk::int_param("mlp_mult", 4, "MLP width = mlp_mult * d_model", 1, 64);
constexpr pl_param_decl attn_only =
    pl::sdk::bool_param("attn_only", false, "attention-only transformer (no MLP blocks)");
constexpr pl_param_decl checkpoints =
    pl::sdk::int_param("checkpoints", 24, "log-spaced evaluation steps (plus step 0)", 1, 10000);
constexpr pl_param_decl late_frac =
    pl::sdk::float_param("late_frac", 0.25, "late window: this last fraction of positions",
                         PL_RANGE_MIN | PL_RANGE_MIN_EXCLUSIVE | PL_RANGE_MAX, 0, 1);
constexpr pl_param_decl save = pl::sdk::enum_param(
    "save", "none", "none|final|checkpoints",
    "save the model as safetensors (checkpoints/<point>/step-NNNNNNNNN.safetensors in the run "
    "folder): never, at the last step, or at every evaluation step");
}  // namespace param

// The seed purpose of the point's stream the trainer's own streams derive from
// (pl::markov::Stream): "markov", so that the same point trains the same model in markov_icl and
// circuits.
constexpr uint64_t kSeedPurpose = 0x6d61726b6f76ull;

// The keys every Markov plugin declares for its data and its run (the chains, the batch, the
// evaluation sets, the steps and the learning rate) into its config: a TrainConfig or a
// DataConfig-derived one.
template <class Config>
void read_run_keys(const pl::sdk::Context& cx, Config& c) {
  c.K = int(cx.int_value("K"));
  c.infinite = cx.bool_value("infinite");
  c.alpha = cx.float_value("alpha");
  c.alpha1 = cx.float_value("alpha1");
  c.batch = int(cx.int_value("batch"));
  c.n_eval = int(cx.int_value("n_eval"));
  c.steps = cx.int_value("steps");
  c.lr = cx.float_value("lr");
  c.chain_seed = uint64_t(cx.int_value("chain_seed"));
}

// The training config of the keys every transformer plugin declares (the model's shape, the run
// keys, chunks and warm-up, the seed); the other fields keep their defaults for the plugin to set.
// Init and data depend on the point's seed only.
inline TrainConfig train_config_base(const pl::sdk::Context& cx) {
  TrainConfig tc;
  ModelConfig& m = tc.model;
  m.C = int(cx.int_value("C"));
  m.N = int(cx.int_value("N"));
  m.d = int(cx.int_value("d_model"));
  m.heads = int(cx.int_value("heads"));
  m.layers = int(cx.int_value("layers"));
  m.ffn = int(cx.int_value("mlp_mult")) * m.d;
  m.mlp = !cx.bool_value("attn_only");
  read_run_keys(cx, tc);
  tc.chunks = int(cx.int_value("chunks"));
  tc.warmup = cx.int_value("warmup");
  tc.seed = cx.seed_stream(kSeedPurpose);
  return tc;
}

// The columns of the results table every Markov plugin starts with (markov_icl's whole table).
constexpr std::array<const char*, 27> kResultColumns = {"step",
                                                        "loss_train",
                                                        "loss_id",
                                                        "loss_ood",
                                                        "bayes_2mem_id",
                                                        "bayes_2gen_ood",
                                                        "bayes_2gen_id",
                                                        "kl_2gen_id",
                                                        "kl_1gen_id",
                                                        "kl_2mem_id",
                                                        "kl_1mem_id",
                                                        "kl_hybrid_id",
                                                        "kl_2gen_ood",
                                                        "kl_1gen_ood",
                                                        "kl_2mem_ood",
                                                        "kl_1mem_ood",
                                                        "kl_hybrid_ood",
                                                        "kl_2gen_id_late",
                                                        "kl_1gen_id_late",
                                                        "kl_2mem_id_late",
                                                        "kl_1mem_id_late",
                                                        "kl_hybrid_id_late",
                                                        "phase",
                                                        "phase_code",
                                                        "phase_late",
                                                        "phase_ood",
                                                        "final"};
// kResultColumns followed by a plugin's own columns.
template <size_t M>
constexpr std::array<const char*, kResultColumns.size() + M> result_columns(
    const std::array<const char*, M>& extra) {
  std::array<const char*, kResultColumns.size() + M> a{};
  for (size_t i = 0; i < kResultColumns.size(); ++i) a[i] = kResultColumns[i];
  for (size_t i = 0; i < M; ++i) a[kResultColumns.size() + i] = extra[i];
  return a;
}
// A table declaration over columns with static storage.
template <size_t N>
constexpr pl_table_decl table(const char* name, const std::array<const char*, N>& columns) {
  return pl_table_decl{name, columns.data(), uint32_t(N), 0, {}};
}

// The kResultColumns cells of one evaluation at `step` (loss_train empty at step 0; the
// memorising predictors' cells empty when they are undefined, infinite K).
inline std::vector<pl::sdk::Cell> result_row(int64_t step, double loss_train, const EvalResult& r,
                                             const MarkovData& data, bool final) {
  const EvalSet &id = data.eval_set(0), &ood = data.eval_set(1);
  const bool mem = data.mem_defined();
  auto nan_if = [&](bool ok, double v) { return ok ? pl::sdk::Cell(v) : pl::sdk::Cell(); };
  std::vector<pl::sdk::Cell> row = {step,
                                    step > 0 ? pl::sdk::Cell(loss_train) : pl::sdk::Cell(),
                                    r.loss[0],
                                    r.loss[1],
                                    nan_if(mem, id.bayes[kMem2]),
                                    ood.bayes[kGen2],
                                    id.bayes[kGen2]};
  for (int s = 0; s < 2; ++s)
    for (int a = 0; a < kNumPred; ++a) row.push_back(nan_if(mem || a < kMem2, r.kl[s][a]));
  for (int a = 0; a < kNumPred; ++a) row.push_back(nan_if(mem || a < kMem2, r.kl_late[0][a]));
  row.push_back(pred_name(r.phase));
  row.push_back(r.phase);
  row.push_back(pred_name(r.phase_late));
  row.push_back(pred_name(r.phase_ood));
  row.push_back(final ? 1 : 0);
  return row;
}

// The checkpoint file of this point at `step`:
// <run folder>/checkpoints/p<point index>-s<seed>/step-<9 digits>.safetensors (folder created).
inline std::string checkpoint_file(const pl::sdk::Context& cx, int64_t step) {
  char name[96];
  std::snprintf(name, sizeof name, "p%04llu-s%llu", (unsigned long long)cx.point_index(),
                (unsigned long long)cx.seed());
  const std::string dir = std::string(cx.out_dir()) + "/checkpoints/" + name;
  make_dirs(dir);
  std::snprintf(name, sizeof name, "/step-%09lld.safetensors", (long long)step);
  return dir + name;
}

}  // namespace pl::markov
