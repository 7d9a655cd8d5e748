// SPDX-License-Identifier: Apache-2.0
// Checkpoints of the minimal models as safetensors files, in the way of markov_icl's
// (markov_common/checkpoint.hpp: the same run metadata, the same reader and writer): one tensor
// per named parameter block at the precision the model computes with, so that loading a file
// reproduces the model's loss bit for bit.
//
//   symmetric   beta, delta, g_u, g_h, g_o    F64 scalars (the model's parameters are double)
//   induction   qkv      3 d_head x 2C        rows [0, h) query, [h, 2h) key, [2h, 3h) value
//               o        2C x d_head          attention output
//               unembed  C x 2C               read-out
//   memoriser   phi      C^2 x d_phi          transition lookup, row a C + b = phi(a, b)
//               fc       width x (d_phi + C)  decoder in;  fc_bias (width)
//               proj     C x width            decoder out; proj_bias (C)
//
// __metadata__: format "phaselab.markov_minimal.v1", model, C, N, the model's sizes (d_head;
// d_phi, width, phi_gelu), and the run entries of every Markov checkpoint (step, chain_seed, K,
// infinite, alpha, alpha1, plugin).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "markov_common/checkpoint.hpp"
#include "markov_minimal/harness.hpp"

namespace pl::markov::minimal {

inline constexpr const char* kMinimalFormat = "phaselab.markov_minimal.v1";

inline const char* kind_name(Kind k) {
  return k == Kind::kSymmetric ? "symmetric" : k == Kind::kInduction ? "induction" : "memoriser";
}

// The tensors of c's model over its flat parameter vector (Net::p).
inline std::vector<CheckpointTensor> minimal_tensors(const MinConfig& c) {
  std::vector<CheckpointTensor> v;
  size_t off = 0;
  auto add = [&](const char* n, std::vector<int64_t> shape) {
    size_t len = 1;
    for (int64_t s : shape) len *= size_t(s);
    v.push_back({n, std::move(shape), off, len});
    off += len;
  };
  const int64_t C = c.C;
  switch (c.kind) {
    case Kind::kSymmetric:
      for (int i = 0; i < kNumSym; ++i) add(sym_name(i), {});
      break;
    case Kind::kInduction:  // InductionModel's layout: Wqkv, Wo, Wu
      add("qkv", {3 * int64_t(c.d_head), 2 * C});
      add("o", {2 * C, c.d_head});
      add("unembed", {C, 2 * C});
      break;
    case Kind::kMemoriser:  // MemoriserModel's layout: phi, W1, b1, W2, b2
      add("phi", {C * C, c.d_phi});
      add("fc", {c.width, c.d_phi + C});
      add("fc_bias", {c.width});
      add("proj", {C, c.width});
      add("proj_bias", {C});
      break;
  }
  return v;
}

// Writes h's parameters at `step`.
inline void save_minimal(const std::string& path, Harness& h, int64_t step,
                         const std::string& plugin) {
  const MinConfig& c = h.config();
  std::map<std::string, std::string> m = {{"format", kMinimalFormat},
                                          {"model", kind_name(c.kind)},
                                          {"C", std::to_string(c.C)},
                                          {"N", std::to_string(c.N)}};
  if (c.kind == Kind::kInduction) m["d_head"] = std::to_string(c.d_head);
  if (c.kind == Kind::kMemoriser) {
    m["d_phi"] = std::to_string(c.d_phi);
    m["width"] = std::to_string(c.width);
    m["phi_gelu"] = c.phi_gelu ? "true" : "false";
  }
  add_run_metadata(m, run_info(c, step, plugin));
  const std::vector<double>& p = h.net().p;
  if (c.kind == Kind::kSymmetric) {
    save_tensors(path, std::move(m), minimal_tensors(c), p.data());
  } else {  // the float models compute with float(p)
    const std::vector<float> f(p.begin(), p.end());
    save_tensors(path, std::move(m), minimal_tensors(c), f.data());
  }
}

struct MinimalCheckpoint {
  MinConfig config;  // model, C, N, sizes and the data fields (chains and evaluation sets)
  RunInfo info;
  std::vector<double> params;  // Net::p
};

// Reads a minimal-model checkpoint; throws std::runtime_error naming the file and the problem.
inline MinimalCheckpoint load_minimal(const std::string& path) {
  const CheckpointReader r(path, kMinimalFormat, "phaselab minimal-model checkpoint");
  MinimalCheckpoint ck;
  MinConfig& c = ck.config;
  const std::string kind = r.meta("model");
  if (kind != "symmetric" && kind != "induction" && kind != "memoriser")
    r.fail("__metadata__ model must be symmetric, induction or memoriser, got '" + kind + "'");
  c.kind = kind == "symmetric"   ? Kind::kSymmetric
           : kind == "induction" ? Kind::kInduction
                                 : Kind::kMemoriser;
  c.C = int(r.integer("C", 2, 1 << 16));
  c.N = int(r.integer("N", 1, 1 << 20));
  if (c.kind == Kind::kInduction) c.d_head = int(r.integer("d_head", 1, 1 << 16));
  if (c.kind == Kind::kMemoriser) {
    c.d_phi = int(r.integer("d_phi", 1, 1 << 16));
    c.width = int(r.integer("width", 1, 1 << 20));
    c.phi_gelu = r.boolean("phi_gelu");
  }
  ck.info = r.run_info();
  apply_run_info(ck.info, c);
  const auto want = minimal_tensors(c);
  const size_t total = want.back().off + want.back().len;
  if (c.kind == Kind::kSymmetric) {
    ck.params = r.params<double>(want, total);
  } else {
    const std::vector<float> f = r.params<float>(want, total);
    ck.params.assign(f.begin(), f.end());
  }
  return ck;
}

// Sets h's parameters from a checkpoint of the same model and sizes (std::invalid_argument if
// they differ). The optimiser state is not part of a checkpoint.
inline void load_into(const MinimalCheckpoint& ck, Harness& h) {
  const MinConfig &a = ck.config, &b = h.config();
  if (a.kind != b.kind || a.C != b.C || a.N != b.N || ck.params.size() != h.net().p.size() ||
      (a.kind == Kind::kInduction && a.d_head != b.d_head) ||
      (a.kind == Kind::kMemoriser &&
       (a.d_phi != b.d_phi || a.width != b.width || a.phi_gelu != b.phi_gelu)))
    throw std::invalid_argument("checkpoint: the model differs from the checkpoint's");
  h.net().p = ck.params;
}

}  // namespace pl::markov::minimal
