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
#include "trainer.hpp"

namespace pl::markov {

inline constexpr const char* kCheckpointFormat = "phaselab.markov.v1";

// What every Markov checkpoint records besides its model: the data it was trained on (the
// training chains and evaluation sets are rebuilt from chain_seed), the step and the writer.
struct RunInfo {
  int64_t step = 0;
  uint64_t chain_seed = 0;
  int K = 0;  // the number of training chains; 0 at infinite K (metadata K = "inf")
  bool infinite = false;
  double alpha = 1, alpha1 = 1;  // alpha1: the 1-Gen pseudo-count in use (resolved)
  std::string plugin;            // "name version" of the writer
};

// The run entries of a model trained on the data `d` (alpha1 resolved), at `step`, by `plugin`.
inline RunInfo run_info(const DataConfig& d, int64_t step, const std::string& plugin) {
  RunInfo i;
  i.step = step;
  i.chain_seed = d.chain_seed;
  i.K = d.K;
  i.infinite = d.infinite;
  i.alpha = d.alpha;
  i.alpha1 = d.alpha1;
  i.plugin = plugin;
  return i;
}
// The data fields a checkpoint records (the chains and evaluation sets), set in d.
inline void apply_run_info(const RunInfo& i, DataConfig& d) {
  d.chain_seed = i.chain_seed;
  d.K = i.K;
  d.infinite = i.infinite;
  d.alpha = i.alpha;
  d.alpha1 = i.alpha1;
}

// What a checkpoint of the transformer records besides the weights.
struct CheckpointInfo : RunInfo {
  ModelConfig model;
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

// The RunInfo entries of a checkpoint's __metadata__.
inline void add_run_metadata(std::map<std::string, std::string>& m, const RunInfo& i) {
  m["plugin"] = i.plugin;
  m["step"] = std::to_string(i.step);
  m["chain_seed"] = std::to_string(i.chain_seed);
  m["K"] = i.infinite ? "inf" : std::to_string(i.K);  // infinite K: no fixed chain set
  m["infinite"] = i.infinite ? "true" : "false";
  m["alpha"] = detail::fmt_double(i.alpha);
  m["alpha1"] = detail::fmt_double(i.alpha1);
}

inline std::map<std::string, std::string> checkpoint_metadata(const CheckpointInfo& i) {
  const ModelConfig& c = i.model;
  auto b = [](bool x) { return std::string(x ? "true" : "false"); };
  std::map<std::string, std::string> m = {{"format", kCheckpointFormat},
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
                                          {"attention_scale", "1/sqrt(d_model/heads)"}};
  add_run_metadata(m, i);
  return m;
}

// Writes a flat parameter buffer as safetensors (atomically: temporary file, then rename): one
// tensor per entry of `tensors` (a contiguous range of params each), F32 for float, F64 for
// double, with `metadata` as the header's __metadata__.
template <class T>
void save_tensors(const std::string& path, std::map<std::string, std::string> metadata,
                  const std::vector<CheckpointTensor>& tensors, const T* params) {
  namespace st = pl::sdk::safetensors;
  st::File f;
  f.metadata = std::move(metadata);
  for (const auto& t : tensors)
    f.tensors.push_back(st::from_values(t.name, t.shape, params + t.off));
  st::write(path, f);
}

// Writes m's parameters.
inline void save_checkpoint(const std::string& path, const Model<float>& m,
                            const CheckpointInfo& info) {
  save_tensors(path, checkpoint_metadata(info), checkpoint_tensors(m.config()), m.params.data());
}

// A checkpoint file being read: its __metadata__ entries converted with range checks and its
// tensors gathered into a flat buffer; every failure throws std::runtime_error naming the file
// and the problem.
class CheckpointReader {
 public:
  // Reads `path` (refusing truncated and foreign files) and checks that __metadata__ format is
  // `format`; `kind` names what such a file is in the message when it is not.
  CheckpointReader(const std::string& path, const char* format, const char* kind)
      : path_(path), f_(pl::sdk::safetensors::read(path)) {
    const auto fmt = f_.metadata.find("format");
    if (fmt == f_.metadata.end() || fmt->second != format)
      fail(std::string("not a ") + kind + " (__metadata__ format is '" +
           (fmt == f_.metadata.end() ? "" : fmt->second) + "', expected '" + format + "')");
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("checkpoint " + path_ + ": " + what);
  }
  std::string meta(const char* key) const {
    const auto it = f_.metadata.find(key);
    if (it == f_.metadata.end()) fail(std::string("no '") + key + "' in __metadata__");
    return it->second;
  }
  int64_t integer(const char* key, int64_t lo, int64_t hi) const {
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
  }
  double real(const char* key) const {
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
  }
  bool boolean(const char* key) const {
    const std::string s = meta(key);
    if (s != "true" && s != "false")
      fail(std::string("__metadata__ ") + key + " must be true or false, got '" + s + "'");
    return s == "true";
  }
  RunInfo run_info() const {
    RunInfo i;
    i.step = integer("step", 0, INT64_MAX);
    i.chain_seed = uint64_t(integer("chain_seed", 0, INT64_MAX));
    i.infinite = boolean("infinite");
    // "inf" at infinite K (older files wrote the unused K key's value there: read as 0 too)
    if (meta("K") == "inf" && !i.infinite) fail("__metadata__ K = inf needs infinite = true");
    i.K = i.infinite ? 0 : int(integer("K", 0, 1 << 30));
    i.alpha = real("alpha");
    i.alpha1 = real("alpha1");
    i.plugin = meta("plugin");
    return i;
  }
  // The flat buffer (`total` values) of exactly the tensors `want` (F32 for float, F64 for double).
  template <class T>
  std::vector<T> params(const std::vector<CheckpointTensor>& want, size_t total) const {
    namespace st = pl::sdk::safetensors;
    const st::DType dt = st::detail::dtype_of<T>::value;
    if (f_.tensors.size() != want.size())
      fail("expected " + std::to_string(want.size()) + " tensors for this config, found " +
           std::to_string(f_.tensors.size()));
    // Every tensor checked before the buffer is allocated: the sizes in __metadata__ (d_model,
    // ffn, ...) then match tensors the file holds, so a corrupt value cannot allocate gigabytes.
    for (const auto& w : want) {
      const st::Tensor* t = st::find(f_, w.name);
      if (!t) fail("tensor '" + w.name + "' is missing");
      if (t->dtype != dt) fail("tensor '" + w.name + "' is not " + st::dtype_name(dt));
      if (t->shape != w.shape) fail("tensor '" + w.name + "' has the wrong shape for the config");
      if (w.off > total || w.len > total - w.off)
        fail("tensor '" + w.name + "' does not fit the parameter buffer");
    }
    std::vector<T> p(total, T(0));
    for (const auto& w : want) {
      const st::Tensor* t = st::find(f_, w.name);
      const std::vector<T> v = st::as_values<T>(*t);
      std::copy(v.begin(), v.end(), p.begin() + std::ptrdiff_t(w.off));
    }
    return p;
  }

 private:
  std::string path_;
  pl::sdk::safetensors::File f_;
};

struct Checkpoint {
  CheckpointInfo info;
  std::vector<float> params;  // Layout(info.model).total values
};

// Reads a checkpoint; throws std::runtime_error naming the file and the problem (not safetensors,
// truncated, not a phaselab Markov checkpoint, a missing / extra / misshapen tensor).
inline Checkpoint load_checkpoint(const std::string& path) {
  const CheckpointReader r(path, kCheckpointFormat, "phaselab Markov-model checkpoint");
  Checkpoint ck;
  CheckpointInfo& i = ck.info;
  ModelConfig& c = i.model;
  c.C = int(r.integer("C", 2, 1 << 16));
  c.N = int(r.integer("N", 1, 1 << 20));
  c.d = int(r.integer("d_model", 1, 1 << 16));
  c.heads = int(r.integer("heads", 1, 1 << 10));
  c.layers = int(r.integer("layers", 1, 1 << 10));
  c.ffn = int(r.integer("ffn", 1, 1 << 20));
  c.mlp = r.boolean("mlp");
  c.ln = r.boolean("layernorm");
  c.tied = r.boolean("tied");
  c.ln_eps = r.real("ln_eps");
  const std::string pos = r.meta("positions");
  if (pos != "learned" && pos != "rope") r.fail("__metadata__ positions must be learned or rope");
  c.rope = pos == "rope";
  if (c.d % c.heads) r.fail("d_model is not a multiple of heads");
  if (r.meta("gelu") != "tanh") r.fail("only the tanh form of GELU is supported");
  static_cast<RunInfo&>(i) = r.run_info();
  ck.params = r.params<float>(checkpoint_tensors(c), Layout(c).total);
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
