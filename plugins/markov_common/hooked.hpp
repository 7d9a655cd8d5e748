// SPDX-License-Identifier: Apache-2.0
// The hooked forward pass of the Markov model, for circuit probes: forward only, plain and
// sequential, on the same layer functions and kernels as Model<T> (T = float: the kernel table;
// T = double: the plain double loops).
//
// The residual stream is a sum of component outputs (senders), in this order:
//   E = wte[x] + wpe,  A_1, M_1, A_2, M_2, ..., A_L, M_L
// and every block reads the stream through a receiver: A_l.q, A_l.k, A_l.v (the three inputs of
// layer l's attention, each with its own LayerNorm pass), M_l (the MLP) and U (the unembedding).
// Receiver r's residual input is the sum, in the order above, of the senders before it.
//
// Hooks, applied in the order the pass meets them:
//  (a) replace: a component's output is replaced by given values before anything reads it;
//  (b) edges:   receiver r sees sender s's output taken from another run (path patching); its
//               LayerNorm is recomputed from that patched residual, the other receivers and the
//               stream itself are not affected directly;
//  (c) pattern: layer l's attention probabilities are replaced by a given matrix per sequence
//               and head (rows: query positions, columns: key positions).
// A run's outputs (components, receiver inputs, patterns, logits) land in a HookedCache, which
// is what an edge patch reads its corrupted senders from. Passing the clean cache of the same
// sequences as `reuse` copies the layers before the first hook instead of recomputing them.
//
// Difference to Model<T>::forward: the attention output is formed as pattern . v by a gemm
// (so a replaced pattern and the model's own one go through the same arithmetic). In double
// this is bit-identical to Model<double> (the same sums in the same order); in float it may
// differ from the fused attention kernel by rounding (the tests allow 2e-5 relative; measured 0
// with the AVX-512 kernels at N 64, d 32).
#pragma once

#include <algorithm>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "model.hpp"

namespace pl::markov {

// Senders (components): 0 = E, 1 + 2l = A_{l+1}, 2 + 2l = M_{l+1} (l 0-based).
constexpr int comp_E() { return 0; }
constexpr int comp_A(int l) { return 1 + 2 * l; }
constexpr int comp_M(int l) { return 2 + 2 * l; }
inline int num_components(const ModelConfig& c) { return 1 + 2 * c.layers; }
inline std::string component_name(int c) {
  if (c == 0) return "E";
  return std::string((c - 1) % 2 ? "M" : "A") + std::to_string((c - 1) / 2 + 1);
}

// Receivers: 4l + {0, 1, 2, 3} = A_{l+1}.q, .k, .v, M_{l+1}; 4 L = U.
enum class Input : int { kQ = 0, kK = 1, kV = 2, kMlp = 3 };
constexpr int recv(int l, Input i) { return 4 * l + int(i); }
inline int recv_U(const ModelConfig& c) { return 4 * c.layers; }
inline int num_receivers(const ModelConfig& c) { return 4 * c.layers + 1; }
inline std::string receiver_name(const ModelConfig& c, int r) {
  if (r == recv_U(c)) return "U";
  const std::string l = std::to_string(r / 4 + 1);
  static const char* const part[] = {".q", ".k", ".v"};
  return r % 4 == 3 ? "M" + l : "A" + l + part[r % 4];
}
// The senders that feed receiver r: components [0, senders_end).
inline int senders_end(const ModelConfig& c, int r) {
  if (r == recv_U(c)) return num_components(c);
  return r % 4 == 3 ? comp_A(r / 4) + 1 : comp_A(r / 4);
}
// Whether component c exists (M_l does not in an attention-only model).
inline bool has_component(const ModelConfig& c, int comp) {
  return comp >= 0 && comp < num_components(c) && (c.mlp || comp == 0 || (comp - 1) % 2 == 0);
}
inline bool has_receiver(const ModelConfig& c, int r) {
  return r >= 0 && r < num_receivers(c) && (c.mlp || r == recv_U(c) || r % 4 != 3);
}

// Patterns for hooks.pattern (nb x H x N x N): uniform over the causal prefix (row t: 1/(t+1)
// on columns 0..t), exact previous-token attention (row t: 1 on t - 1; row 0 on itself).
template <class T>
std::vector<T> uniform_pattern(const ModelConfig& c, int nb) {
  const size_t N = size_t(c.N);
  std::vector<T> p(size_t(nb) * c.heads * N * N, T(0));
  for (size_t bh = 0; bh < size_t(nb) * c.heads; ++bh)
    for (size_t t = 0; t < N; ++t)
      for (size_t s = 0; s <= t; ++s) p[(bh * N + t) * N + s] = T(1.0 / double(t + 1));
  return p;
}
template <class T>
std::vector<T> previous_token_pattern(const ModelConfig& c, int nb) {
  const size_t N = size_t(c.N);
  std::vector<T> p(size_t(nb) * c.heads * N * N, T(0));
  for (size_t bh = 0; bh < size_t(nb) * c.heads; ++bh)
    for (size_t t = 0; t < N; ++t) p[(bh * N + t) * N + (t ? t - 1 : 0)] = T(1);
  return p;
}

// One hooked run on nb sequences (rows b * N + t).
template <class T>
struct HookedCache {
  int nb = 0;
  std::vector<int32_t> seq;             // nb x (N + 1) tokens
  std::vector<std::vector<T>> comp;     // [component] nb*N x d (empty: absent)
  std::vector<std::vector<T>> resid;    // [receiver] nb*N x d, the residual input it read
  std::vector<std::vector<T>> pattern;  // [layer] nb x H x N x N attention probabilities
  std::vector<T> logits;                // nb*N x C
  double loss = 0;                      // mean cross-entropy of the targets

  // log p(j | row r) in double, out: nb*N x C.
  void log_probs(int C, double* out) const {
    const size_t R = logits.size() / size_t(C);
    for (size_t r = 0; r < R; ++r) {
      const LogSumExp z = logsumexp(logits.data() + r * C, size_t(C));
      for (int j = 0; j < C; ++j) out[r * C + j] = double(logits[r * C + j]) - z.max - z.log_sum;
    }
  }
};

template <class T>
struct Hooks {
  // (a) component -> nb*N x d values that replace its output.
  std::map<int, const T*> replace;
  // (b) receiver `receiver` reads sender `sender` from run `from` (same nb).
  struct Edge {
    int sender, receiver;
    const HookedCache<T>* from;
  };
  std::vector<Edge> edges;
  // (c) layer (0-based) -> nb x H x N x N probabilities used instead of the softmax.
  std::map<int, const T*> pattern;
};

template <class T>
class HookedModel {
 public:
  // Reads m's parameters at each run (a model that keeps training is seen as it is then).
  explicit HookedModel(const Model<T>& m) : m_(m) {}

  void run(const int32_t* seq, int nb, const Hooks<T>& hooks, HookedCache<T>& out,
           const HookedCache<T>* reuse = nullptr) const {
    const ModelConfig& c = m_.config();
    const size_t N = size_t(c.N), d = size_t(c.d), f = size_t(c.ffn), C = size_t(c.C),
                 R = size_t(nb) * N, NN = size_t(nb) * c.heads * N * N;
    if (nb < 1) throw std::invalid_argument("hooked run: nb must be positive");
    const int first = check(hooks, nb);  // first layer a hook touches (-1: the embedding)
    if (reuse && (reuse->nb != nb ||
                  std::memcmp(reuse->seq.data(), seq, size_t(nb) * (N + 1) * sizeof(int32_t))))
      throw std::invalid_argument("hooked run: reuse must be a run on the same sequences");
    out.nb = nb;
    out.seq.assign(seq, seq + size_t(nb) * (N + 1));
    out.comp.assign(size_t(num_components(c)), {});
    out.resid.assign(size_t(num_receivers(c)), {});
    out.pattern.assign(size_t(c.layers), {});
    for (int k = 0; k < num_components(c); ++k)
      if (has_component(c, k)) out.comp[size_t(k)].assign(R * d, T(0));
    for (int r = 0; r < num_receivers(c); ++r)
      if (has_receiver(c, r)) out.resid[size_t(r)].assign(R * d, T(0));
    for (auto& p : out.pattern) p.assign(NN, T(0));
    out.logits.assign(R * C, T(0));
    std::vector<T> stream(R * d), next(R * d), ln(R * d), mean(R), rstd(R), qkv(R * 3 * d),
        tmp(R * 3 * d), atty(R * d), h(R * f), g(R * f), probs(R * C), scratch_pattern(NN);
    const Ops<T>& ops = m_.ops();

    const int skip = reuse ? first : -1;  // layers [0, skip) and E copied from `reuse`
    if (skip >= 0)
      out.comp[0] = reuse->comp[0];
    else
      m_.embedding_forward(out.comp[0].data(), seq, 0, nb);
    apply_replace(hooks, comp_E(), out);
    stream = out.comp[0];
    for (int l = 0; l < c.layers; ++l) {
      const auto& W = m_.P.l[size_t(l)];
      if (l < skip) {
        for (int k : {comp_A(l), comp_M(l)}) out.comp[size_t(k)] = reuse->comp[size_t(k)];
        for (int i = 0; i < 4; ++i)
          out.resid[size_t(recv(l, Input(i)))] = reuse->resid[size_t(recv(l, Input(i)))];
        out.pattern[size_t(l)] = reuse->pattern[size_t(l)];
      } else {
        // attention: q, k, v each from its own receiver input (one pass when they agree)
        for (int i = 0; i < 3; ++i) receiver_input(hooks, recv(l, Input(i)), stream, out);
        const std::vector<T>*rq = &out.resid[size_t(recv(l, Input::kQ))],
              *rk = &out.resid[size_t(recv(l, Input::kK))],
              *rv = &out.resid[size_t(recv(l, Input::kV))];
        m_.qkv_forward(qkv.data(),
                       m_.layernorm_forward(ln.data(), mean.data(), rstd.data(), rq->data(), W.ln1g,
                                            W.ln1b, R),
                       W, nb);
        for (int part = 1; part < 3; ++part) {
          const std::vector<T>* r = part == 1 ? rk : rv;
          if (!std::memcmp(r->data(), rq->data(), R * d * sizeof(T))) continue;
          m_.qkv_forward(tmp.data(),
                         m_.layernorm_forward(ln.data(), mean.data(), rstd.data(), r->data(),
                                              W.ln1g, W.ln1b, R),
                         W, nb);
          for (size_t row = 0; row < R; ++row)
            std::memcpy(qkv.data() + row * 3 * d + size_t(part) * d,
                        tmp.data() + row * 3 * d + size_t(part) * d, d * sizeof(T));
        }
        T* pat = out.pattern[size_t(l)].data();
        const auto hp = hooks.pattern.find(l);
        if (hp != hooks.pattern.end())
          std::memcpy(pat, hp->second, NN * sizeof(T));
        else  // the model's pattern (its P v and A are recomputed below)
          m_.attention_forward(out.comp[size_t(comp_A(l))].data(), atty.data(), pat, qkv.data(), W,
                               nb);
        // atty[b, :, head] = pattern[b, head] v[b, :, head];  A = atty Wo^T
        const size_t dh = size_t(c.dh()), H = size_t(c.heads);
        for (size_t b = 0; b < size_t(nb); ++b)
          for (size_t hh = 0; hh < H; ++hh)
            ops.gemm(0, 0, N, dh, N, T(1), pat + (b * H + hh) * N * N, N,
                     qkv.data() + b * N * 3 * d + 2 * d + hh * dh, 3 * d, T(0),
                     atty.data() + b * N * d + hh * dh, d);
        ops.gemm(0, 1, R, d, d, T(1), atty.data(), d, W.wo, d, T(0),
                 out.comp[size_t(comp_A(l))].data(), d);
        apply_replace(hooks, comp_A(l), out);
      }
      m_.residual_forward(next.data(), stream.data(), out.comp[size_t(comp_A(l))].data(), R);
      std::swap(stream, next);
      if (!c.mlp) continue;
      if (l >= skip) {
        const int r = recv(l, Input::kMlp);
        receiver_input(hooks, r, stream, out);
        const T* ln2 = m_.layernorm_forward(ln.data(), mean.data(), rstd.data(),
                                            out.resid[size_t(r)].data(), W.ln2g, W.ln2b, R);
        m_.mlp_forward(out.comp[size_t(comp_M(l))].data(), h.data(), g.data(), ln2, W, R);
        apply_replace(hooks, comp_M(l), out);
      }
      m_.residual_forward(next.data(), stream.data(), out.comp[size_t(comp_M(l))].data(), R);
      std::swap(stream, next);
    }
    const int rU = recv_U(c);
    receiver_input(hooks, rU, stream, out);
    const T* lnf = m_.layernorm_forward(ln.data(), mean.data(), rstd.data(),
                                        out.resid[size_t(rU)].data(), m_.P.lnfg, m_.P.lnfb, R);
    out.loss =
        m_.unembed_xent_forward(out.logits.data(), probs.data(), lnf, seq, 0, nb) / double(R);
  }

 private:
  // Validates the hooks; returns the first layer they touch (-1: E, layers: none).
  int check(const Hooks<T>& hk, int nb) const {
    const ModelConfig& c = m_.config();
    int first = c.layers;
    auto layer_of_comp = [](int k) { return k == 0 ? -1 : (k - 1) / 2; };
    for (const auto& [k, v] : hk.replace) {
      if (!has_component(c, k) || !v)
        throw std::invalid_argument("hooks.replace: no component " + std::to_string(k));
      first = std::min(first, layer_of_comp(k));
    }
    for (const auto& e : hk.edges) {
      if (!has_receiver(c, e.receiver) || !has_component(c, e.sender) ||
          e.sender >= senders_end(c, e.receiver))
        throw std::invalid_argument("hooks.edges: " + std::to_string(e.sender) + " -> " +
                                    std::to_string(e.receiver) + " is not an edge of the model");
      if (!e.from || e.from->nb != nb || e.from->comp.size() != size_t(num_components(c)))
        throw std::invalid_argument("hooks.edges: the source run must cover the same nb");
      first = std::min(first, e.receiver / 4);
    }
    for (const auto& [l, p] : hk.pattern) {
      if (l < 0 || l >= c.layers || !p)
        throw std::invalid_argument("hooks.pattern: no layer " + std::to_string(l));
      first = std::min(first, l);
    }
    return first;
  }
  void apply_replace(const Hooks<T>& hk, int k, HookedCache<T>& out) const {
    const auto it = hk.replace.find(k);
    if (it != hk.replace.end())
      std::memcpy(out.comp[size_t(k)].data(), it->second, out.comp[size_t(k)].size() * sizeof(T));
  }
  // out.resid[r] = the stream, or, when edges end at r, the ordered sum of its senders with
  // the patched ones taken from their source runs.
  void receiver_input(const Hooks<T>& hk, int r, const std::vector<T>& stream,
                      HookedCache<T>& out) const {
    const ModelConfig& c = m_.config();
    std::vector<const HookedCache<T>*> src(size_t(num_components(c)), &out);
    bool patched = false;
    for (const auto& e : hk.edges)
      if (e.receiver == r) src[size_t(e.sender)] = e.from, patched = true;
    std::vector<T>& x = out.resid[size_t(r)];
    if (!patched) {
      x = stream;
      return;
    }
    const size_t R = x.size();
    x = src[0]->comp[0];
    for (int k = 1; k < senders_end(c, r); ++k)
      if (has_component(c, k))
        m_.residual_forward(x.data(), x.data(), src[size_t(k)]->comp[size_t(k)].data(),
                            R / size_t(c.d));
  }

  const Model<T>& m_;
};

}  // namespace pl::markov
