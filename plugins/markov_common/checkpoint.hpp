// SPDX-License-Identifier: Apache-2.0
// Checkpoints of the Markov model as safetensors files: one F32 tensor per named module, the
// model config, the chain seed (the training chains and evaluation sets are rebuilt from it), the
// step and the writing plugin in the header's "__metadata__". Layout (docs/markov-model.md):
//
//   wte        C x d     token embedding
//   wpe        N x d     learned positions (absent under rope)
//   lL.ln1     2 x d     LayerNorm before attention of layer L (1-based): row 0 gain, row 1 bias
//   lL.qkv     3d x d    rows [0, d) query, [d, 2d) key, [2d, 3d) value; y = x W^T
//   lL.o       d x d     attention output projection
//   lL.ln2     2 x d     LayerNorm before the MLP (absent when attention-only or without LN)
//   lL.fc      F x d     MLP in
//   lL.proj    d x F     MLP out
//   lnf        2 x d     final LayerNorm
//   unembed    C x d     unembedding (absent when tied to wte)
//
// Every tensor is one contiguous range of Model::params, so a round trip is bit-exact.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "model.hpp"
#include "sdk/safetensors.hpp"

namespace pl::markov {

inline constexpr const char* kCheckpointFormat = "phaselab.markov.v1";

// What a checkpoint records besides the weights.
struct CheckpointInfo {
  ModelConfig model;
  int64_t step = 0;
  uint64_t chain_seed = 0;
  int K = 0;
  bool infinite = false;
  double alpha = 1, alpha1 = 1;  // alpha1: the 1-Gen pseudo-count in use (resolved)
  std::string plugin;            // "name version" of the writer
};

// One tensor of the checkpoint: its name, shape and range in the flat parameter buffer.
struct CheckpointTensor {
  std::string name;
  std::vector<int64_t> shape;
  size_t off, len;
};
inline std::vector<CheckpointTensor> checkpoint_tensors(const ModelConfig& c) {
  const Layout lay(c);
  const int64_t d = c.d, C = c.C, F = c.ffn;
  std::vector<CheckpointTensor> v;
  auto add = [&](const std::string& n, std::vector<int64_t> shape, size_t off) {
    size_t len = 1;
    for (int64_t s : shape) len *= size_t(s);
    v.push_back({n, std::move(shape), off, len});
  };
  add("wte", {C, d}, lay.wte);
  if (!c.rope) add("wpe", {c.N, d}, lay.wpe);
  for (int l = 0; l < c.layers; ++l) {
    const auto& L = lay.layer[size_t(l)];
    const std::string p = "l" + std::to_string(l + 1) + ".";
    if (c.ln) add(p + "ln1", {2, d}, L.ln1g);  // ln1b follows ln1g in the buffer
    add(p + "qkv", {3 * d, d}, L.wqkv);
    add(p + "o", {d, d}, L.wo);
    if (c.mlp) {
      if (c.ln) add(p + "ln2", {2, d}, L.ln2g);
      add(p + "fc", {F, d}, L.wfc);
      add(p + "proj", {d, F}, L.wproj);
    }
  }
  if (c.ln) add("lnf", {2, d}, lay.lnfg);
  if (!c.tied) add("unembed", {C, d}, lay.wu);
  return v;
}

namespace detail {
inline std::string fmt_double(double x) {
  char b[40];
  std::snprintf(b, sizeof b, "%.17g", x);
  return b;
}
}  // namespace detail

inline std::map<std::string, std::string> checkpoint_metadata(const CheckpointInfo& i) {
  const ModelConfig& c = i.model;
  auto b = [](bool x) { return std::string(x ? "true" : "false"); };
  return {{"format", kCheckpointFormat},
          {"plugin", i.plugin},
          {"step", std::to_string(i.step)},
          {"C", std::to_string(c.C)},
          {"N", std::to_string(c.N)},
          {"d_model", std::to_string(c.d)},
          {"heads", std::to_string(c.heads)},
          {"layers", std::to_string(c.layers)},
          {"ffn", std::to_string(c.ffn)},
          {"mlp", b(c.mlp)},
          {"layernorm", b(c.ln)},
          {"positions", c.rope ? "rope" : "learned"},
          {"tied", b(c.tied)},
          {"ln_eps", detail::fmt_double(c.ln_eps)},
          {"gelu", "tanh"},
          {"attention_scale", "1/sqrt(d_model/heads)"},
          {"chain_seed", std::to_string(i.chain_seed)},
          {"K", std::to_string(i.K)},
          {"infinite", b(i.infinite)},
          {"alpha", detail::fmt_double(i.alpha)},
          {"alpha1", detail::fmt_double(i.alpha1)}};
}

// Writes m's parameters (atomically: temporary file, then rename).
inline void save_checkpoint(const std::string& path, const Model<float>& m,
                            const CheckpointInfo& info) {
  namespace st = pl::sdk::safetensors;
  st::File f;
  f.metadata = checkpoint_metadata(info);
  for (const auto& t : checkpoint_tensors(m.config()))
    f.tensors.push_back(st::from_f32(t.name, t.shape, m.params.data() + t.off));
  st::write(path, f);
}

struct Checkpoint {
  CheckpointInfo info;
  std::vector<float> params;  // Layout(info.model).total values
};

// Reads a checkpoint; throws std::runtime_error naming the file and the problem (not safetensors,
// truncated, not a phaselab Markov checkpoint, a missing / extra / misshapen tensor).
inline Checkpoint load_checkpoint(const std::string& path) {
  namespace st = pl::sdk::safetensors;
  const st::File f = st::read(path);  // refuses truncated and foreign files itself
  auto fail = [&](const std::string& what) -> void {
    throw std::runtime_error("checkpoint " + path + ": " + what);
  };
  auto meta = [&](const char* key) -> std::string {
    const auto it = f.metadata.find(key);
    if (it == f.metadata.end()) fail(std::string("no '") + key + "' in __metadata__");
    return it->second;
  };
  const auto fmt = f.metadata.find("format");
  if (fmt == f.metadata.end() || fmt->second != kCheckpointFormat)
    fail(std::string("not a phaselab Markov-model checkpoint (__metadata__ format is '") +
         (fmt == f.metadata.end() ? "" : fmt->second) + "', expected '" + kCheckpointFormat + "')");
  auto integer = [&](const char* key, int64_t lo, int64_t hi) -> int64_t {
    const std::string s = meta(key);
    size_t pos = 0;
    long long v = 0;
    try {
      v = std::stoll(s, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (s.empty() || pos != s.size() || v < lo || v > hi)
      fail(std::string("__metadata__ ") + key + " must be an integer in [" + std::to_string(lo) +
           ", " + std::to_string(hi) + "], got '" + s + "'");
    return v;
  };
  auto real = [&](const char* key) -> double {
    const std::string s = meta(key);
    size_t pos = 0;
    double v = 0;
    try {
      v = std::stod(s, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (s.empty() || pos != s.size()) fail(std::string("__metadata__ ") + key + " is not a number");
    return v;
  };
  auto boolean = [&](const char* key) -> bool {
    const std::string s = meta(key);
    if (s != "true" && s != "false")
      fail(std::string("__metadata__ ") + key + " must be true or false, got '" + s + "'");
    return s == "true";
  };
  Checkpoint ck;
  CheckpointInfo& i = ck.info;
  ModelConfig& c = i.model;
  c.C = int(integer("C", 2, 1 << 16));
  c.N = int(integer("N", 1, 1 << 20));
  c.d = int(integer("d_model", 1, 1 << 16));
  c.heads = int(integer("heads", 1, 1 << 10));
  c.layers = int(integer("layers", 1, 1 << 10));
  c.ffn = int(integer("ffn", 1, 1 << 20));
  c.mlp = boolean("mlp");
  c.ln = boolean("layernorm");
  c.tied = boolean("tied");
  c.ln_eps = real("ln_eps");
  const std::string pos = meta("positions");
  if (pos != "learned" && pos != "rope") fail("__metadata__ positions must be learned or rope");
  c.rope = pos == "rope";
  if (c.d % c.heads) fail("d_model is not a multiple of heads");
  if (meta("gelu") != "tanh") fail("only the tanh form of GELU is supported");
  i.step = integer("step", 0, INT64_MAX);
  i.chain_seed = uint64_t(integer("chain_seed", 0, INT64_MAX));
  i.K = int(integer("K", 0, 1 << 30));
  i.infinite = boolean("infinite");
  i.alpha = real("alpha");
  i.alpha1 = real("alpha1");
  i.plugin = meta("plugin");
  const auto want = checkpoint_tensors(c);
  if (f.tensors.size() != want.size())
    fail("expected " + std::to_string(want.size()) + " tensors for this config, found " +
         std::to_string(f.tensors.size()));
  ck.params.assign(Layout(c).total, 0.f);
  for (const auto& w : want) {
    const st::Tensor* t = st::find(f, w.name);
    if (!t) fail("tensor '" + w.name + "' is missing");
    if (t->dtype != st::DType::F32) fail("tensor '" + w.name + "' is not F32");
    if (t->shape != w.shape) fail("tensor '" + w.name + "' has the wrong shape for the config");
    const std::vector<float> v = st::as_f32(*t);
    std::copy(v.begin(), v.end(), ck.params.begin() + std::ptrdiff_t(w.off));
  }
  return ck;
}

// mkdir -p; throws std::runtime_error naming the folder.
inline void make_dirs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create folder " + dir + ": " + ec.message());
}

// Copies a checkpoint's weights into m, whose config must match.
inline void load_into(const Checkpoint& ck, Model<float>& m) {
  const ModelConfig &a = ck.info.model, &b = m.config();
  if (a.C != b.C || a.N != b.N || a.d != b.d || a.heads != b.heads || a.layers != b.layers ||
      a.ffn != b.ffn || a.mlp != b.mlp || a.ln != b.ln || a.rope != b.rope || a.tied != b.tied ||
      a.ln_eps != b.ln_eps || ck.params.size() != m.params.size())
    throw std::invalid_argument("checkpoint: the model's config differs from the checkpoint's");
  std::copy(ck.params.begin(), ck.params.end(), m.params.begin());  // the views stay valid
}

// A Model<float> rebuilt from a checkpoint file (batch and chunks only size its training buffers).
inline std::unique_ptr<Model<float>> load_model(const std::string& path, const pl_kernel_table* k,
                                                int batch = 1, int chunks = 1) {
  const Checkpoint ck = load_checkpoint(path);
  auto m = std::make_unique<Model<float>>(ck.info.model, k, batch, chunks);
  load_into(ck, *m);
  return m;
}

}  // namespace pl::markov
