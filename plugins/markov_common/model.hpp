// SPDX-License-Identifier: Apache-2.0
// The two-layer (L-layer) transformer of the Markov ICL experiment, in the shape of llm.c's
// train_gpt2.c: one flat parameter buffer with named views, one flat activation buffer, one
// forward/backward pair per layer kind (embedding, layernorm, attention, mlp, residual,
// unembedding + cross-entropy), the batch split into a fixed number of chunks whose gradients
// are reduced in a fixed order (bit-identical results for any thread count). A training step
// streams each chunk through a per-thread activation buffer (forward, then backward, while the
// buffer is still warm in cache); forward() keeps the whole batch's activations for inspection.
// Shapes: B = batch, N = positions, R = rows of a chunk (sequences x N), d = d_model,
// H = heads, dh = d / H, F = MLP width, C = states.
//
// Templated on the element type: Model<float> calls the kernel table (the experiment),
// Model<double> calls the plain double loops of ref_ops.hpp (the finite-difference oracle).
//
// Residual stream (pre-LN):  x_0 = E = wte[x] + wpe;  y_l = x_l + A_l(LN1(x_l));
//                            x_{l+1} = y_l + M_l(LN2(y_l));  U = LNf(x_L) Wu^T.
// Weights are stored (out x in), so a linear layer is Y = X W^T (gemm with trans_b).
#pragma once

#include <tbb/blocked_range.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "phaselab/kernel_table.h"
#include "ref_ops.hpp"

namespace pl::markov {

struct ModelConfig {
  int C = 10;   // states (vocabulary)
  int N = 128;  // context length (positions)
  int d = 64;   // d_model
  int heads = 1;
  int layers = 2;
  int ffn = 256;      // MLP width
  bool mlp = true;    // false: attention-only
  bool ln = true;     // pre-LN; false: no LayerNorm anywhere
  bool rope = false;  // rotary positions instead of learned absolute ones
  bool tied = false;  // unembedding = wte
  double ln_eps = 1e-5;
  int dh() const { return d / heads; }
};

// Element offsets of every named parameter in the flat buffer (size 0 when switched off).
struct Layout {
  struct Layer {
    size_t ln1g, ln1b, wqkv, wo, ln2g, ln2b, wfc, wproj;
  };
  size_t wte = 0, wpe = 0, lnfg = 0, lnfb = 0, wu = 0, total = 0;
  std::vector<Layer> layer;
  explicit Layout(const ModelConfig& c) {
    const size_t d = size_t(c.d), f = size_t(c.ffn), lnd = c.ln ? d : 0, md = c.mlp ? 1 : 0;
    auto take = [&](size_t n) {
      const size_t o = total;
      total += n;
      return o;
    };
    wte = take(size_t(c.C) * d);               // C x d
    wpe = take(c.rope ? 0 : size_t(c.N) * d);  // N x d
    layer.resize(size_t(c.layers));
    for (auto& l : layer) {
      l.ln1g = take(lnd);
      l.ln1b = take(lnd);
      l.wqkv = take(3 * d * d);  // 3d x d: rows [0, d) query, [d, 2d) key, [2d, 3d) value
      l.wo = take(d * d);        // d x d
      l.ln2g = take(lnd * md);
      l.ln2b = take(lnd * md);
      l.wfc = take(f * d * md);    // ffn x d
      l.wproj = take(d * f * md);  // d x ffn
    }
    lnfg = take(lnd);
    lnfb = take(lnd);
    wu = take(c.tied ? 0 : size_t(c.C) * d);  // C x d
  }
};

// A named contiguous range of parameters (what the optimiser treats as one module).
struct Module {
  std::string name;
  size_t off, len;
  bool decay;  // weight decay applies (matrices), not LayerNorm gains and biases
};
inline std::vector<Module> modules(const ModelConfig& c) {
  const Layout lay(c);
  const size_t d = size_t(c.d);
  std::vector<Module> m;
  auto add = [&](const std::string& n, size_t off, size_t len, bool decay) {
    if (len) m.push_back({n, off, len, decay});
  };
  add("wte", lay.wte, size_t(c.C) * d, true);
  add("wpe", lay.wpe, c.rope ? 0 : size_t(c.N) * d, true);
  for (int l = 0; l < c.layers; ++l) {
    const auto& L = lay.layer[size_t(l)];
    const std::string p = "l" + std::to_string(l + 1) + "_";
    const size_t lnd = c.ln ? d : 0;
    add(p + "ln1", L.ln1g, 2 * lnd, false);
    add(p + "qk", L.wqkv, 2 * d * d, true);
    add(p + "v", L.wqkv + 2 * d * d, d * d, true);
    add(p + "o", L.wo, d * d, true);
    if (c.mlp) {
      add(p + "ln2", L.ln2g, 2 * lnd, false);
      add(p + "fc", L.wfc, size_t(c.ffn) * d, true);
      add(p + "proj", L.wproj, size_t(c.ffn) * d, true);
    }
  }
  add("lnf", lay.lnfg, c.ln ? 2 * d : 0, false);
  add("unembed", lay.wu, c.tied ? 0 : size_t(c.C) * d, true);
  return m;
}
// Whether module `m` belongs to the group `g` named in a config ("l1_att" = l1_ln1, l1_qk,
// l1_v, l1_o; "l1_mlp" = l1_ln2, l1_fc, l1_proj; "embed" = wte, wpe; or the module's own name).
inline bool in_group(const std::string& m, const std::string& g) {
  if (m == g) return true;
  if (g == "embed") return m == "wte" || m == "wpe";
  const size_t us = g.find('_');
  if (us == std::string::npos) return false;
  const std::string pre = g.substr(0, us + 1), what = g.substr(us + 1);
  if (m.compare(0, pre.size(), pre) != 0) return false;
  const std::string rest = m.substr(pre.size());
  if (what == "att") return rest == "ln1" || rest == "qk" || rest == "v" || rest == "o";
  if (what == "mlp") return rest == "ln2" || rest == "fc" || rest == "proj";
  return false;
}

// The kernels, by element type.
// gemm_epilogue's epilogues (kernels.def): C = P .* E, C = P + E with P = alpha op(A) op(B).
enum : int { kEpiMul = 1, kEpiAdd = 2 };
template <class T>
struct Ops;
template <>
struct Ops<double> {
  explicit Ops(const pl_kernel_table*) {}
  void gemm(int ta, int tb, size_t m, size_t n, size_t k, double al, const double* a, size_t lda,
            const double* b, size_t ldb, double be, double* c, size_t ldc) const {
    ref::gemm<double>(ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc);
  }
  // C = P .* E (kEpiMul) or P + E (kEpiAdd), P = al op(A) op(B) (the float kernel's semantics).
  void gemm_epilogue(int ta, int tb, size_t m, size_t n, size_t k, double al, const double* a,
                     size_t lda, const double* b, size_t ldb, int epi, const double* e, size_t lde,
                     double* c, size_t ldc) const {
    ref::gemm<double>(ta, tb, m, n, k, al, a, lda, b, ldb, 0.0, c, ldc);
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j)
        c[i * ldc + j] =
            epi == kEpiMul ? c[i * ldc + j] * e[i * lde + j] : c[i * ldc + j] + e[i * lde + j];
  }
  void softmax_rows(const double* x, double* y, size_t r, size_t c) const {
    ref::softmax_rows<double>(x, y, r, c, 1.0, 0);
  }
  void gelu(const double* x, double* y, size_t n) const { ref::gelu<double>(x, y, n); }
  void gelu_bwd(const double* x, const double* dy, double* dx, size_t n) const {
    ref::gelu_bwd<double>(x, dy, dx, n);
  }
  // y = gelu(x), dydx = gelu'(x); x may alias y or dydx.
  void gelu_fwd_grad(const double* x, double* y, double* dydx, size_t n) const {
    for (size_t i = 0; i < n; ++i) {
      const double v = x[i], one = 1;
      double gv, dv;
      ref::gelu<double>(&v, &gv, 1);
      ref::gelu_bwd<double>(&v, &one, &dv, 1);
      y[i] = gv;
      dydx[i] = dv;
    }
  }
  void layernorm(const double* x, const double* g, const double* b, double* y, double* m, double* r,
                 size_t rows, size_t d, double eps) const {
    ref::layernorm<double>(x, g, b, y, m, r, rows, d, eps);
  }
  void layernorm_bwd(const double* dy, const double* x, const double* g, const double* m,
                     const double* r, double* dx, double* dg, double* db, size_t rows,
                     size_t d) const {
    ref::layernorm_bwd<double>(dy, x, g, m, r, dx, dg, db, rows, d);
  }
  void attention(const double* q, size_t ldq, const double* k, size_t ldk, const double* v,
                 size_t ldv, double* o, size_t ldo, double* p, size_t n, size_t dk,
                 double scale) const {
    ref::attention<double>(q, ldq, k, ldk, v, ldv, o, ldo, p, n, dk, dk, scale, 1, 0);
  }
  void attention_bwd(const double* q, size_t ldq, const double* k, size_t ldk, const double* v,
                     size_t ldv, const double* p, const double* d_o, size_t lddo, double* dq,
                     size_t lddq, double* dk, size_t lddk, double* dv, size_t lddv, double* s,
                     size_t n, size_t dkk, double scale) const {
    ref::attention_bwd<double>(q, ldq, k, ldk, v, ldv, p, d_o, lddo, dq, lddq, dk, lddk, dv, lddv,
                               s, n, dkk, dkk, scale, 1, 0);
  }
};
template <>
struct Ops<float> {
  explicit Ops(const pl_kernel_table* t) : k(t) {}
  const pl_kernel_table* k;
  void gemm(int ta, int tb, size_t m, size_t n, size_t kk, float al, const float* a, size_t lda,
            const float* b, size_t ldb, float be, float* c, size_t ldc) const {
    k->gemm(ta, tb, m, n, kk, al, a, lda, b, ldb, be, c, ldc);
  }
  void gemm_epilogue(int ta, int tb, size_t m, size_t n, size_t kk, float al, const float* a,
                     size_t lda, const float* b, size_t ldb, int epi, const float* e, size_t lde,
                     float* c, size_t ldc) const {
    k->gemm_epilogue(ta, tb, m, n, kk, al, a, lda, b, ldb, epi, e, lde, c, ldc);
  }
  void softmax_rows(const float* x, float* y, size_t r, size_t c) const {
    k->softmax_rows(x, y, r, c, 1.0f, 0);
  }
  void gelu(const float* x, float* y, size_t n) const { k->gelu(x, y, n); }
  void gelu_bwd(const float* x, const float* dy, float* dx, size_t n) const {
    k->gelu_bwd(x, dy, dx, n);
  }
  void gelu_fwd_grad(const float* x, float* y, float* dydx, size_t n) const {
    k->gelu_fwd_grad(x, y, dydx, n);
  }
  void layernorm(const float* x, const float* g, const float* b, float* y, float* m, float* r,
                 size_t rows, size_t d, double eps) const {
    k->layernorm(x, g, b, y, m, r, rows, d, float(eps));
  }
  void layernorm_bwd(const float* dy, const float* x, const float* g, const float* m,
                     const float* r, float* dx, float* dg, float* db, size_t rows, size_t d) const {
    k->layernorm_bwd(dy, x, g, m, r, dx, dg, db, rows, d);
  }
  void attention(const float* q, size_t ldq, const float* kk, size_t ldk, const float* v,
                 size_t ldv, float* o, size_t ldo, float* p, size_t n, size_t dk,
                 float scale) const {
    k->attention(q, ldq, kk, ldk, v, ldv, o, ldo, p, n, dk, dk, scale, 1, 0);
  }
  void attention_bwd(const float* q, size_t ldq, const float* kk, size_t ldk, const float* v,
                     size_t ldv, const float* p, const float* d_o, size_t lddo, float* dq,
                     size_t lddq, float* dk, size_t lddk, float* dv, size_t lddv, float* s,
                     size_t n, size_t dkk, float scale) const {
    k->attention_bwd(q, ldq, kk, ldk, v, ldv, p, d_o, lddo, dq, lddq, dk, lddk, dv, lddv, s, n, dkk,
                     dkk, scale, 1, 0);
  }
};

// The model's own elementwise loop: the residual adds of the evaluation and hooked forward passes
// (the training forward and the MLP backward fuse theirs into gemm_epilogue's store). The plugin
// is compiled for the base ISA, so on x86 the float loop is also compiled for AVX2 and AVX-512
// and picked by the CPU's features. One add per element: the same bits at every width.
namespace detail {
// Always inlined, so the wide versions below compile the loop for their ISA.
template <class T>
__attribute__((always_inline)) inline void add_loop(T* out, const T* x, const T* f,
                                                    size_t n) {  // out may alias x or f
  for (size_t i = 0; i < n; ++i) out[i] = x[i] + f[i];
}
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define PL_MARKOV_WIDE 1
__attribute__((target("avx512f"))) inline void add_avx512(float* o, const float* x, const float* f,
                                                          size_t n) {
  add_loop(o, x, f, n);
}
__attribute__((target("avx2"))) inline void add_avx2(float* o, const float* x, const float* f,
                                                     size_t n) {
  add_loop(o, x, f, n);
}
// 2: AVX-512F, 1: AVX2, 0: neither.
inline int wide_isa() {
  static const int isa = __builtin_cpu_supports("avx512f") ? 2
                         : __builtin_cpu_supports("avx2")  ? 1
                                                           : 0;
  return isa;
}
#endif
// out = x + f (out may alias x or f).
inline void add(float* out, const float* x, const float* f, size_t n) {
#ifdef PL_MARKOV_WIDE
  const int isa = wide_isa();
  if (isa == 2) return add_avx512(out, x, f, n);
  if (isa == 1) return add_avx2(out, x, f, n);
#endif
  add_loop(out, x, f, n);
}
#undef PL_MARKOV_WIDE
inline void add(double* out, const double* x, const double* f, size_t n) { add_loop(out, x, f, n); }
}  // namespace detail

// Buffers carved from one std::vector, each starting on a 64-byte boundary (its length padded
// to whole cache lines), so that the kernels' full-vector loads and stores of a row (d = 16..64
// floats) never split a cache line; malloc gives 16 bytes. `takes` bounds the number of take()
// calls, for the padding reserved.
template <class T>
class Carver {
 public:
  static constexpr size_t kLine = 64 / sizeof(T) > 0 ? 64 / sizeof(T) : 1;
  static size_t padded(size_t n) { return (n + kLine - 1) / kLine * kLine; }
  Carver(std::vector<T>& mem, size_t elems, size_t takes) {
    mem.assign(elems + (takes + 1) * kLine, T(0));
    const uintptr_t a = reinterpret_cast<uintptr_t>(mem.data());
    p_ = mem.data() + (((a + 63) & ~uintptr_t{63}) - a) / sizeof(T);
    end_ = mem.data() + mem.size();
  }
  T* take(size_t n) {
    T* q = p_;
    p_ += padded(n);
    if (p_ > end_) throw std::logic_error("markov model: buffer layout larger than reserved");
    return q;
  }

 private:
  T *p_, *end_;
};

// log sum_j exp(u_j) of one row, as max + log(sum exp(u - max)) (kept apart so that
// log-probabilities u_j - max - log_sum round exactly as they always have).
struct LogSumExp {
  double max, log_sum;
  double value() const { return max + log_sum; }
};
template <class T>
LogSumExp logsumexp(const T* u, size_t n) {
  double mx = -INFINITY, z = 0;
  // (u > mx ? u : mx) is std::fmax here (a NaN u is skipped by both) without its libm call.
  for (size_t j = 0; j < n; ++j) mx = double(u[j]) > mx ? double(u[j]) : mx;
  for (size_t j = 0; j < n; ++j) z += std::exp(double(u[j]) - mx);
  return {mx, std::log(z)};
}

template <class T>
class Model {
 public:
  // Parameter (or gradient) views into a flat buffer; weights are (out x in).
  struct Views {
    T* wte;   // C x d      token embedding
    T* wpe;   // N x d      learned positions (unused under rope)
    T* lnfg;  // d          final LayerNorm gain
    T* lnfb;  // d          final LayerNorm bias
    T* wu;    // C x d      unembedding (= wte when tied)
    struct L {
      T* ln1g;   // d       LayerNorm before attention: gain
      T* ln1b;   // d       ... bias
      T* wqkv;   // 3d x d  rows [0, d) query, [d, 2d) key, [2d, 3d) value
      T* wo;     // d x d   attention output projection
      T* ln2g;   // d       LayerNorm before the MLP: gain
      T* ln2b;   // d       ... bias
      T* wfc;    // F x d   MLP in
      T* wproj;  // d x F   MLP out
    };
    std::vector<L> l;
  };
  // Activations of `batch` sequences (rows b * N + t), one flat buffer.
  struct Activations {
    std::vector<T*> res;  // L + 1 residual streams x_l, each B*N x d; res[0] = E, res[L] = x_L
    struct L {
      T* ln1;       // B*N x d       LN1(x_l)
      T* ln1_mean;  // B*N           its row means
      T* ln1_rstd;  // B*N           its row 1/std
      T* qkv;       // B*N x 3d      [q | k | v], heads side by side (q, k rotated under rope)
      T* pattern;   // B x H x N x N attention probabilities (causal softmax)
      T* atty;      // B*N x d       per-head P v, heads concatenated
      T* A;         // B*N x d       attention output A_l = atty Wo^T (null: training slots)
      T* y;         // B*N x d       x_l + A_l
      T* ln2;       // B*N x d       LN2(y)
      T* ln2_mean;  // B*N
      T* ln2_rstd;  // B*N
      T* h;         // B*N x F       u = LN2(y) Wfc^T (forward), GELU'(u) (forward_backward)
      T* g;         // B*N x F       GELU(LN2(y) Wfc^T)
      T* M;         // B*N x d       MLP output M_l = g Wproj^T (null: attention-only, training)
    };
    std::vector<L> l;
    T* lnf;       // B*N x d  LNf(x_L)
    T* lnf_mean;  // B*N
    T* lnf_rstd;  // B*N
    T* logits;    // B*N x C  U = LNf(x_L) Wu^T
    T* probs;     // B*N x C  softmax(U)
  };
  // Backward scratch of a training slot (R = rows of the largest chunk).
  struct Scratch {
    std::vector<T> buf;
    T* dres;    // R x d   gradient of the residual stream, carried down through the layers
    T* dln;     // R x d   gradient of a LayerNorm output
    T* dqkv;    // R x 3d
    T* datty;   // R x d
    T* dh;      // R x F   gradient of g, then of h (in place)
    T* dlog;    // R x C   gradient of the logits
    T* dscore;  // N x N   attention backward scratch
  };

  Model(const ModelConfig& cfg, const pl_kernel_table* k, int batch, int chunks)
      : cfg_(cfg),
        lay_(cfg),
        ops_(k),
        B_(batch),
        chunks_(chunks < 1 ? 1 : (chunks > batch ? batch : chunks)) {
    if (cfg.d % cfg.heads) throw std::invalid_argument("d_model must be a multiple of heads");
    if (cfg.rope && cfg.dh() % 2) throw std::invalid_argument("rope needs an even head width");
    params.assign(lay_.total, T(0));
    grads.assign(lay_.total, T(0));
    chunk_stride_ = Carver<T>::padded(lay_.total);
    cg_base_ = Carver<T>(chunk_grads, chunk_stride_ * size_t(chunks_), 1)
                   .take(chunk_stride_ * size_t(chunks_));
    for (int c = 0; c < chunks_; ++c) CG.push_back(views(cg_base_ + size_t(c) * chunk_stride_));
    chunk_loss.assign(size_t(chunks_), 0.0);
    P = views(params.data());
    G = views(grads.data());
    eval_acts_.resize(size_t(chunks_));
    eval_mem_.resize(size_t(chunks_));
    for (int c = 0; c < chunks_; ++c)
      alloc_acts(cfg_, size_t(kEvalSeqs), true, eval_acts_[size_t(c)], eval_mem_[size_t(c)]);
    if (cfg.rope) {  // cos/sin of pos * 10000^(-2i/dh)
      const int h2 = cfg.dh() / 2;
      rope_cs.resize(size_t(cfg.N) * h2 * 2);
      for (int t = 0; t < cfg.N; ++t)
        for (int i = 0; i < h2; ++i) {
          const double th = t * std::pow(10000.0, -2.0 * i / cfg.dh());
          rope_cs[(size_t(t) * h2 + i) * 2] = T(std::cos(th));
          rope_cs[(size_t(t) * h2 + i) * 2 + 1] = T(std::sin(th));
        }
    }
  }

  const ModelConfig& config() const { return cfg_; }
  const Layout& layout() const { return lay_; }
  const Ops<T>& ops() const { return ops_; }
  size_t num_params() const { return lay_.total; }
  int batch() const { return B_; }
  int chunks() const { return chunks_; }
  // The fixed partition of nb sequences into chunks (the same for every thread count): chunk c
  // holds [chunk_start(nb, c), chunk_start(nb, c + 1)).
  int chunk_start(int nb, int c) const { return int(int64_t(nb) * c / chunks_); }
  int chunk_begin(int c) const { return chunk_start(B_, c); }
  int chunk_end(int c) const { return chunk_start(B_, c + 1); }

  // GPT-2 style initialisation from N(0,1) samples z (num_params of them): matrices 0.02 z,
  // residual output projections 0.02 / sqrt(2 L) z, positions 0.01 z, LayerNorm gamma 1, beta 0.
  void init_from_normals(const float* z) {
    const double s_proj = 0.02 / std::sqrt(2.0 * cfg_.layers);
    for (size_t i = 0; i < lay_.total; ++i) params[i] = T(0.02 * z[i]);
    auto scale = [&](T* p, size_t n, double s) {
      for (size_t i = 0; i < n; ++i) p[i] = T(s / 0.02 * p[i]);
    };
    const size_t d = size_t(cfg_.d), f = size_t(cfg_.ffn);
    if (!cfg_.rope) scale(P.wpe, size_t(cfg_.N) * d, 0.01);
    auto ones = [&](T* g, T* b) {
      if (!cfg_.ln) return;
      for (size_t i = 0; i < d; ++i) g[i] = T(1), b[i] = T(0);
    };
    for (auto& l : P.l) {
      ones(l.ln1g, l.ln1b);
      scale(l.wo, d * d, s_proj);
      if (cfg_.mlp) {
        ones(l.ln2g, l.ln2b);
        scale(l.wproj, d * f, s_proj);
      }
    }
    ones(P.lnfg, P.lnfb);
  }

  // Forward over all `nb` <= batch sequences; seq holds nb rows of N + 1 tokens (inputs are the
  // first N, targets the last N). Returns the mean cross-entropy. Parallel over chunks. The
  // activations of every sequence are kept (the accessors E(), A(), ... below); the buffer for
  // them (the whole batch) is allocated at the first call.
  double forward(const int32_t* seq, int nb) {
    if (act_.res.empty()) alloc_acts(cfg_, size_t(B_), false, act_, act_mem_);
    run_chunks(nb,
               [&](int c, int b0, int n) { chunk_loss[size_t(c)] = forward_chunk(seq, b0, n); });
    return mean_loss(nb);
  }
  // Evaluation: the mean cross-entropy of nb <= batch sequences, and their log-probabilities
  // (row r = b * N + t, in double) written to logp. Each chunk streams its sequences through
  // every layer kEvalSeqs at a time in a small buffer of its own (it stays in cache; nothing is
  // kept for a backward pass, no softmax is formed, one log-sum-exp per row serves the loss and
  // the log-probabilities). Same bits as forward() followed by log_probs(): the kernels work row
  // by row or sequence by sequence, and each chunk sums its loss in the same order. The
  // activation accessors (E(), A(), ...) do not see this pass.
  double forward_log_probs(const int32_t* seq, int nb, double* logp) {
    run_chunks(nb, [&](int c, int b0, int n) {
      const Activations& a = eval_acts_[size_t(c)];
      double loss = 0;
      for (int s0 = b0; s0 < b0 + n; s0 += kEvalSeqs)
        loss = forward_rows(a, 0, seq, s0, std::min(kEvalSeqs, b0 + n - s0), false, loss,
                            logp + size_t(s0) * cfg_.N * cfg_.C);
      chunk_loss[size_t(c)] = loss;
    });
    return mean_loss(nb);
  }
  // Forward and backward: grads = d(mean loss)/d(params). Returns the mean loss.
  // The chunks run on S = min(chunks, threads) slots, slot s taking chunks s, s + S, ...; each
  // slot streams its chunks one after another through one activation buffer and one backward
  // scratch of its own, which stay warm in cache (a buffer per chunk, as forward() keeps, is
  // written cold every step: about 1.1x slower at d = 32, N = 64, 4 chunks, 1 thread). The slots
  // change where activations live, not what is computed: every chunk's loss and gradients are
  // the same bits for any S. The accessors E(), A(), ... do not see this pass.
  // with_loss false: the cross-entropy is not summed (the gradients need only the softmax; its
  // log-sum-exp in double costs ~4% of a step at d = 32): returns 0, or NaN when a logit is not
  // finite (a finite row of logits always has a finite loss).
  double forward_backward(const int32_t* seq, int nb, bool with_loss = true) {
    if (nb > B_) throw std::invalid_argument("batch larger than allocated");
    const T scale = T(1.0 / (double(nb) * cfg_.N));
    const int S = train_slots();
    tbb::parallel_for(0, S, [&](int sl) {
      const Activations& a = train_acts_[size_t(sl)];
      for (int c = sl; c < chunks_; c += S) {
        const int b0 = chunk_start(nb, c), b1 = chunk_start(nb, c + 1);
        T* cg = cg_base_ + size_t(c) * chunk_stride_;
        std::fill(cg, cg + lay_.total, T(0));
        chunk_loss[size_t(c)] = 0;
        if (b1 <= b0) continue;
        chunk_loss[size_t(c)] = forward_rows(a, 0, seq, b0, b1 - b0, true, 0.0, nullptr, with_loss);
        backward_rows(a, seq, b0, b1 - b0, CG[size_t(c)], scratch[size_t(sl)], scale);
      }
    });
    // grads = sum over chunks in chunk order (fixed), parallel over parameter blocks
    const size_t P_ = lay_.total;
    tbb::parallel_for(tbb::blocked_range<size_t>(0, P_, 4096),
                      [&](const tbb::blocked_range<size_t>& r) {
                        for (size_t i = r.begin(); i < r.end(); ++i) {
                          T s = cg_base_[i];
                          for (int c = 1; c < chunks_; ++c)
                            s += cg_base_[size_t(c) * chunk_stride_ + i];
                          grads[i] = s;
                        }
                      });
    return mean_loss(nb);
  }

  // Component outputs of the last forward() pass, rows b * N + t (the residual stream is their
  // sum); forward() must have run.
  const T* E() const { return acts().res[0]; }               // B*N x d
  const T* A(int l) const { return acts().l[size_t(l)].A; }  // B*N x d
  const T* M(int l) const { return acts().l[size_t(l)].M; }  // B*N x d (null: attention-only)
  const T* U() const { return acts().logits; }               // B*N x C
  const T* attn(int l) const { return acts().l[size_t(l)].pattern; }  // B x H x N x N

  // Log-probabilities of the last forward() pass (row r = b * N + t), in double.
  void log_probs(int nb, double* out) const {
    const size_t C = size_t(cfg_.C), R = size_t(nb) * cfg_.N;
    const T* logits = acts().logits;
    for (size_t r = 0; r < R; ++r) {
      const T* u = logits + r * C;
      const LogSumExp z = logsumexp(u, C);
      for (size_t j = 0; j < C; ++j) out[r * C + j] = double(u[j]) - z.max - z.log_sum;
    }
  }

  // ------------------------------------------------------------ layers (rows [r0, r0 + R))
  // The forward/backward pairs below work on R = nb * N rows of nb whole sequences; the hooked
  // forward pass (hooked.hpp) reuses the forward halves.

  // embedding: E[b, t] = wte[x_bt] + wpe[t] (rope: no position term).   E: R x d
  void embedding_forward(T* E, const int32_t* seq, int b0, int nb) const {
    const size_t d = size_t(cfg_.d), N = size_t(cfg_.N);
    for (size_t b = 0; b < size_t(nb); ++b)
      for (size_t t = 0; t < N; ++t) {
        const T* te = P.wte + size_t(seq[(size_t(b0) + b) * (N + 1) + t]) * d;
        T* e = E + (b * N + t) * d;
        if (cfg_.rope)
          for (size_t i = 0; i < d; ++i) e[i] = te[i];
        else
          for (size_t i = 0; i < d; ++i) e[i] = te[i] + P.wpe[t * d + i];
      }
  }
  // dwte[x_bt] += dE[b, t], dwpe[t] += dE[b, t].
  void embedding_backward(Views& g, const T* dE, const int32_t* seq, int b0, int nb) const {
    const size_t d = size_t(cfg_.d), N = size_t(cfg_.N);
    for (size_t b = 0; b < size_t(nb); ++b)
      for (size_t t = 0; t < N; ++t) {
        const T* de = dE + (b * N + t) * d;
        T* gt = g.wte + size_t(seq[(size_t(b0) + b) * (N + 1) + t]) * d;
        for (size_t i = 0; i < d; ++i) gt[i] += de[i];
        if (!cfg_.rope)
          for (size_t i = 0; i < d; ++i) g.wpe[t * d + i] += de[i];
      }
  }

  // layernorm: out = (x - mean) rstd gamma + beta per row; returns out, or x itself when the
  // model has no LayerNorm.   x, out: R x d; mean, rstd: R
  const T* layernorm_forward(T* out, T* mean, T* rstd, const T* x, const T* gamma, const T* beta,
                             size_t R) const {
    if (!cfg_.ln) return x;
    ops_.layernorm(x, gamma, beta, out, mean, rstd, R, size_t(cfg_.d), cfg_.ln_eps);
    return out;
  }
  // dx += LN^T dy, dgamma, dbeta accumulated (dx += dy without LayerNorm).
  void layernorm_backward(T* dx, T* dgamma, T* dbeta, const T* dy, const T* x, const T* gamma,
                          const T* mean, const T* rstd, size_t R) const {
    const size_t d = size_t(cfg_.d);
    if (cfg_.ln)
      ops_.layernorm_bwd(dy, x, gamma, mean, rstd, dx, dgamma, dbeta, R, d);
    else
      for (size_t i = 0; i < R * d; ++i) dx[i] += dy[i];
  }

  // attention, the q/k/v projection: qkv = ln Wqkv^T, then q and k rotated under rope.
  //   ln: R x d; qkv: R x 3d
  void qkv_forward(T* qkv, const T* ln, const typename Views::L& W, int nb) const {
    const size_t d = size_t(cfg_.d), R = size_t(nb) * cfg_.N;
    ops_.gemm(0, 1, R, 3 * d, d, T(1), ln, d, W.wqkv, d, T(0), qkv, 3 * d);
    if (cfg_.rope) rope(qkv, nb, false);
  }
  // attention, the heads: per sequence and head, pattern = causal softmax(q k^T / sqrt(dh)) and
  // atty = pattern v; then A = atty Wo^T, or with `resid` the residual stream's next value
  // A = resid + atty Wo^T (the add fused into the GEMM's store: the block's output is not kept).
  //   qkv: R x 3d; pattern: nb x H x N x N; atty, A, resid: R x d
  void attention_forward(T* A, T* atty, T* pattern, const T* qkv, const typename Views::L& W,
                         int nb, const T* resid = nullptr) const {
    const size_t d = size_t(cfg_.d), N = size_t(cfg_.N), R = size_t(nb) * N, dh = size_t(cfg_.dh()),
                 H = size_t(cfg_.heads);
    const T scale = T(1.0 / std::sqrt(double(dh)));
    for (size_t b = 0; b < size_t(nb); ++b)
      for (size_t h = 0; h < H; ++h) {
        const T* q = qkv + b * N * 3 * d + h * dh;
        ops_.attention(q, 3 * d, q + d, 3 * d, q + 2 * d, 3 * d, atty + b * N * d + h * dh, d,
                       pattern + (b * H + h) * N * N, N, dh, scale);
      }
    if (resid)
      ops_.gemm_epilogue(0, 1, R, d, d, T(1), atty, d, W.wo, d, kEpiAdd, resid, d, A, d);
    else
      ops_.gemm(0, 1, R, d, d, T(1), atty, d, W.wo, d, T(0), A, d);
  }
  // Mirror of qkv_forward + attention_forward: dWo, dWqkv accumulated; dln = gradient of the
  // attention's LayerNorm output (overwritten). dA: R x d.
  void attention_backward(T* dln, typename Views::L& gW, const T* dA, const T* ln, const T* qkv,
                          const T* pattern, const T* atty, const typename Views::L& W, Scratch& s,
                          int nb) const {
    const size_t d = size_t(cfg_.d), N = size_t(cfg_.N), R = size_t(nb) * N, dh = size_t(cfg_.dh()),
                 H = size_t(cfg_.heads);
    const T scale = T(1.0 / std::sqrt(double(dh)));
    ops_.gemm(1, 0, d, d, R, T(1), dA, d, atty, d, T(1), gW.wo, d);    // dWo += dA^T atty
    ops_.gemm(0, 0, R, d, d, T(1), dA, d, W.wo, d, T(0), s.datty, d);  // datty = dA Wo
    for (size_t b = 0; b < size_t(nb); ++b)
      for (size_t h = 0; h < H; ++h) {
        const T* q = qkv + b * N * 3 * d + h * dh;
        T* dq = s.dqkv + b * N * 3 * d + h * dh;
        ops_.attention_bwd(q, 3 * d, q + d, 3 * d, q + 2 * d, 3 * d, pattern + (b * H + h) * N * N,
                           s.datty + b * N * d + h * dh, d, dq, 3 * d, dq + d, 3 * d, dq + 2 * d,
                           3 * d, s.dscore, N, dh, scale);
      }
    if (cfg_.rope) rope(s.dqkv, nb, true);  // q = R q0 => dq0 = R^T dq
    ops_.gemm(1, 0, 3 * d, d, R, T(1), s.dqkv, 3 * d, ln, d, T(1), gW.wqkv, d);  // += dqkv^T ln
    ops_.gemm(0, 0, R, d, 3 * d, T(1), s.dqkv, 3 * d, W.wqkv, d, T(0), dln, d);  // dqkv Wqkv
  }

  // mlp: u = ln Wfc^T, g = GELU(u), M = g Wproj^T. With `for_backward`, h keeps GELU'(u) for
  // mlp_backward (one sigmoid per element for both, and the backward's GELU is a
  // multiplication); without (evaluation, hooked runs), h keeps u. With `resid`,
  // M = resid + g Wproj^T (the residual add fused into the GEMM's store).
  //   ln, M, resid: R x d; h, g: R x F
  void mlp_forward(T* M, T* h, T* g, const T* ln, const typename Views::L& W, size_t R,
                   bool for_backward = false, const T* resid = nullptr) const {
    const size_t d = size_t(cfg_.d), f = size_t(cfg_.ffn);
    ops_.gemm(0, 1, R, f, d, T(1), ln, d, W.wfc, d, T(0), h, f);
    if (for_backward)
      ops_.gelu_fwd_grad(h, g, h, R * f);
    else
      ops_.gelu(h, g, R * f);
    if (resid)
      ops_.gemm_epilogue(0, 1, R, d, f, T(1), g, f, W.wproj, f, kEpiAdd, resid, d, M, d);
    else
      ops_.gemm(0, 1, R, d, f, T(1), g, f, W.wproj, f, T(0), M, d);
  }
  // Mirror: dWproj, dWfc accumulated; dln (R x d) overwritten; s.dh used as scratch.
  //   h: GELU'(u) from mlp_forward
  void mlp_backward(T* dln, typename Views::L& gW, const T* dM, const T* ln, const T* h, const T* g,
                    const typename Views::L& W, Scratch& s, size_t R) const {
    const size_t d = size_t(cfg_.d), f = size_t(cfg_.ffn);
    ops_.gemm(1, 0, d, f, R, T(1), dM, d, g, f, T(1), gW.wproj, f);  // dWproj += dM^T g
    // dh = GELU'(u) .* dg, dg = dM Wproj (the product fused into the GEMM's store)
    ops_.gemm_epilogue(0, 0, R, f, d, T(1), dM, d, W.wproj, f, kEpiMul, h, f, s.dh, f);
    ops_.gemm(1, 0, f, d, R, T(1), s.dh, f, ln, d, T(1), gW.wfc, d);  // dWfc += dh^T ln
    ops_.gemm(0, 0, R, d, f, T(1), s.dh, f, W.wfc, d, T(0), dln, d);  // dln = dh Wfc
  }

  // residual: out = x + f (a block's output added to the stream).   R x d
  // Backward: d x and d f both equal d out; the pass carries one buffer (Scratch::dres) down the
  // stream, each block reading it as its output gradient and adding its input gradient into it.
  void residual_forward(T* out, const T* x, const T* f, size_t R) const {
    detail::add(out, x, f, R * size_t(cfg_.d));
  }

  // unembedding + cross-entropy: U = ln Wu^T, probs = softmax(U); returns
  // loss0 + sum_rows logsumexp(U) - U[target] (in double, rows in order). With logp, the
  // log-probabilities U - logsumexp(U) (R x C, double) go there instead of probs (not written).
  // sum_loss false (and no logp): no loss is summed; returns loss0, or NaN when some U is not
  // finite.   ln: R x d; U, probs: R x C
  double unembed_xent_forward(T* U, T* probs, const T* ln, const int32_t* seq, int b0, int nb,
                              double loss0 = 0, double* logp = nullptr,
                              bool sum_loss = true) const {
    const size_t d = size_t(cfg_.d), N = size_t(cfg_.N), C = size_t(cfg_.C), R = size_t(nb) * N;
    ops_.gemm(0, 1, R, C, d, T(1), ln, d, P.wu, d, T(0), U, C);
    if (!logp) ops_.softmax_rows(U, probs, R, C);
    if (!sum_loss && !logp) {
      bool finite = true;
      for (size_t i = 0; i < R * C; ++i) finite &= std::fabs(U[i]) <= std::numeric_limits<T>::max();
      return finite ? loss0 : NAN;
    }
    double loss = loss0;
    for (size_t b = 0; b < size_t(nb); ++b)
      for (size_t t = 0; t < N; ++t) {
        const size_t r = b * N + t;
        const T* u = U + r * C;
        const LogSumExp z = logsumexp(u, C);
        loss += z.value() - double(u[seq[(size_t(b0) + b) * (N + 1) + t + 1]]);
        if (logp)  // as log_probs()
          for (size_t j = 0; j < C; ++j) logp[r * C + j] = double(u[j]) - z.max - z.log_sum;
      }
    return loss;
  }
  // dU = scale (probs - onehot(target)); dWu += dU^T ln; dln = dU Wu (overwritten).
  void unembed_xent_backward(T* dln, Views& g, const T* probs, const T* ln, const int32_t* seq,
                             int b0, int nb, Scratch& s, T scale) const {
    const size_t d = size_t(cfg_.d), N = size_t(cfg_.N), C = size_t(cfg_.C), R = size_t(nb) * N;
    for (size_t b = 0; b < size_t(nb); ++b)
      for (size_t t = 0; t < N; ++t) {
        const size_t r = b * N + t;
        const size_t tgt = size_t(seq[(size_t(b0) + b) * (N + 1) + t + 1]);
        // scale (p - 0) is scale p exactly: one vectorisable loop, then the target's entry.
        for (size_t j = 0; j < C; ++j) s.dlog[r * C + j] = scale * probs[r * C + j];
        s.dlog[r * C + tgt] = scale * (probs[r * C + tgt] - T(1));
      }
    ops_.gemm(1, 0, C, d, R, T(1), s.dlog, C, ln, d, T(1), g.wu, d);   // dWu += dU^T ln
    ops_.gemm(0, 0, R, d, C, T(1), s.dlog, C, P.wu, d, T(0), dln, d);  // dln = dU Wu
  }

  std::vector<T> params, grads;
  std::vector<T> chunk_grads;  // chunk c's gradients: chunk_stride_ elements from cg_base_
  Views P, G;
  std::vector<Views> CG;

 private:
  Views views(T* base) const {
    Views v;
    auto at = [&](size_t off) { return base + off; };
    v.wte = at(lay_.wte);
    v.wpe = at(lay_.wpe);
    v.lnfg = at(lay_.lnfg);
    v.lnfb = at(lay_.lnfb);
    v.wu = cfg_.tied ? v.wte : at(lay_.wu);  // tied: the unembedding is wte (C x d)
    for (const auto& L : lay_.layer)
      v.l.push_back({at(L.ln1g), at(L.ln1b), at(L.wqkv), at(L.wo), at(L.ln2g), at(L.ln2b),
                     at(L.wfc), at(L.wproj)});
    return v;
  }
  // Activations of `seqs` sequences in `mem`. shared: for a forward pass only (evaluation):
  // every layer uses the same buffers and the residual streams alternate between two.
  // training: for forward_rows(..., for_backward = true), whose residual adds run in the GEMMs'
  // stores: the block outputs A and M are not kept, so they get no buffers (null).
  static void alloc_acts(const ModelConfig& cfg, size_t seqs, bool shared, Activations& act,
                         std::vector<T>& mem, bool training = false) {
    const size_t R = seqs * cfg.N, d = size_t(cfg.d), f = size_t(cfg.ffn),
                 NN = seqs * cfg.heads * cfg.N * cfg.N, C = size_t(cfg.C);
    const size_t outs = training ? 0 : 2 * d;  // A and M
    const size_t per_layer = R * (d + 2 + 3 * d + d + d + d + 2 + f + f + outs) + NN;
    const size_t nres = shared ? 2 : size_t(cfg.layers + 1), nlay = shared ? 1 : size_t(cfg.layers);
    Carver<T> cv(mem, R * d * nres + nlay * per_layer + R * (d + 2 + 2 * C), nres + nlay * 14 + 5);
    auto take = [&](size_t n) { return cv.take(n); };
    act.res.clear();
    act.l.clear();
    for (size_t l = 0; l < nres; ++l) act.res.push_back(take(R * d));
    for (int l = shared ? 2 : int(nres); l <= cfg.layers; ++l) act.res.push_back(act.res[l % 2]);
    for (int l = 0; l < cfg.layers; ++l) {
      if (shared && l > 0) {
        act.l.push_back(act.l[0]);
        continue;
      }
      typename Activations::L a;
      a.ln1 = take(R * d);
      a.ln1_mean = take(R);
      a.ln1_rstd = take(R);
      a.qkv = take(R * 3 * d);
      a.pattern = take(NN);
      a.atty = take(R * d);
      a.A = training ? nullptr : take(R * d);
      a.y = take(R * d);
      a.ln2 = take(R * d);
      a.ln2_mean = take(R);
      a.ln2_rstd = take(R);
      a.h = take(R * f);
      a.g = take(R * f);
      a.M = training || !cfg.mlp ? nullptr : take(R * d);
      act.l.push_back(a);
    }
    act.lnf = take(R * d);
    act.lnf_mean = take(R);
    act.lnf_rstd = take(R);
    act.logits = take(R * C);
    act.probs = take(R * C);
  }
  const Activations& acts() const {
    if (act_.res.empty()) throw std::logic_error("markov model: no forward() pass yet");
    return act_;
  }
  // The number of training slots for the threads that may run now (min(chunks, concurrency)),
  // with their buffers (each for the largest chunk) allocated.
  int train_slots() {
    const int conc = std::min(
        tbb::this_task_arena::max_concurrency(),
        int(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism)));
    const int S = std::max(1, std::min(chunks_, conc));
    if (train_acts_.size() < size_t(S)) {
      int seqs = 0;
      for (int c = 0; c < chunks_; ++c) seqs = std::max(seqs, chunk_end(c) - chunk_begin(c));
      const size_t Nn = size_t(cfg_.N), d = size_t(cfg_.d), f = size_t(cfg_.ffn),
                   rc = size_t(seqs) * Nn;
      const size_t s0 = train_acts_.size();
      train_acts_.resize(size_t(S));
      train_mem_.resize(size_t(S));
      scratch.resize(size_t(S));
      for (size_t s = s0; s < size_t(S); ++s) {
        alloc_acts(cfg_, size_t(seqs), false, train_acts_[s], train_mem_[s], true);
        Scratch& sc = scratch[s];
        Carver<T> cv(sc.buf, rc * (d + d + 3 * d + d + f + size_t(cfg_.C)) + Nn * Nn, 7);
        sc.dres = cv.take(rc * d);
        sc.dln = cv.take(rc * d);
        sc.dqkv = cv.take(rc * 3 * d);
        sc.datty = cv.take(rc * d);
        sc.dh = cv.take(rc * f);
        sc.dlog = cv.take(rc * size_t(cfg_.C));
        sc.dscore = cv.take(Nn * Nn);
      }
    }
    return S;
  }
  template <class F>
  void run_chunks(int nb, F&& f) {
    if (nb > B_) throw std::invalid_argument("batch larger than allocated");
    tbb::parallel_for(0, chunks_, [&](int c) {
      const int b0 = chunk_start(nb, c), b1 = chunk_start(nb, c + 1);
      if (b1 > b0)
        f(c, b0, b1 - b0);
      else
        chunk_loss[size_t(c)] = 0;
    });
  }
  double mean_loss(int nb) const {
    double s = 0;
    for (double v : chunk_loss) s += v;
    return s / (double(nb) * cfg_.N);
  }

  // q, k of every head of nb sequences rotated by position (in place in a qkv buffer).
  void rope(T* qkv, int nb, bool inverse) const {
    const int d = cfg_.d, dh = cfg_.dh(), h2 = dh / 2;
    for (int b = 0; b < nb; ++b)
      for (int t = 0; t < cfg_.N; ++t) {
        T* row = qkv + (size_t(b) * cfg_.N + t) * 3 * d;
        for (int part = 0; part < 2; ++part)  // query, key
          for (int h = 0; h < cfg_.heads; ++h)
            for (int i = 0; i < h2; ++i) {
              T* z = row + part * d + h * dh + 2 * i;
              const T c = rope_cs[(size_t(t) * h2 + i) * 2],
                      s = inverse ? -rope_cs[(size_t(t) * h2 + i) * 2 + 1]
                                  : rope_cs[(size_t(t) * h2 + i) * 2 + 1];
              const T a = z[0], bb = z[1];
              z[0] = a * c - bb * s;
              z[1] = a * s + bb * c;
            }
      }
  }

  // Sequences [b0, b0 + nb): fills their rows of act_; returns the summed cross-entropy.
  double forward_chunk(const int32_t* seq, int b0, int nb) {
    return forward_rows(act_, size_t(b0), seq, b0, nb, false, 0.0, nullptr);
  }
  // Sequences [b0, b0 + nb) through the model with their activations in `a` from sequence slot
  // `slot` on; returns loss0 + their summed cross-entropy. logp: see unembed_xent_forward. With
  // `for_backward`, the activations backward_rows needs (GELU'(u) in h), and the residual adds
  // run in the stores of the GEMMs of A and M, which are then not kept (the backward pass reads
  // neither; the accessors A(l), M(l) read act_, which only the evaluation forward fills).
  // sum_loss: see unembed_xent_forward.
  double forward_rows(const Activations& act, size_t slot, const int32_t* seq, int b0, int nb,
                      bool for_backward, double loss0, double* logp, bool sum_loss = true) {
    const size_t d = size_t(cfg_.d), f = size_t(cfg_.ffn), N = size_t(cfg_.N), C = size_t(cfg_.C),
                 R = size_t(nb) * N, r0 = slot * N, NN = size_t(cfg_.heads) * N * N;
    embedding_forward(act.res[0] + r0 * d, seq, b0, nb);
    for (int l = 0; l < cfg_.layers; ++l) {
      const auto& W = P.l[size_t(l)];
      const auto& a = act.l[size_t(l)];
      const T* x = act.res[size_t(l)] + r0 * d;
      const T* ln1 =
          layernorm_forward(a.ln1 + r0 * d, a.ln1_mean + r0, a.ln1_rstd + r0, x, W.ln1g, W.ln1b, R);
      qkv_forward(a.qkv + r0 * 3 * d, ln1, W, nb);
      T* xn = act.res[size_t(l) + 1] + r0 * d;
      if (for_backward) {  // y = x + A, x_{l+1} = y + M from the GEMMs' stores
        T* y = cfg_.mlp ? a.y + r0 * d : xn;
        attention_forward(y, a.atty + r0 * d, a.pattern + slot * NN, a.qkv + r0 * 3 * d, W, nb, x);
        if (!cfg_.mlp) continue;
        const T* ln2 = layernorm_forward(a.ln2 + r0 * d, a.ln2_mean + r0, a.ln2_rstd + r0, y,
                                         W.ln2g, W.ln2b, R);
        mlp_forward(xn, a.h + r0 * f, a.g + r0 * f, ln2, W, R, true, y);
        continue;
      }
      attention_forward(a.A + r0 * d, a.atty + r0 * d, a.pattern + slot * NN, a.qkv + r0 * 3 * d, W,
                        nb);
      if (!cfg_.mlp) {  // x_{l+1} = x_l + A_l
        residual_forward(xn, x, a.A + r0 * d, R);
        continue;
      }
      T* y = a.y + r0 * d;
      residual_forward(y, x, a.A + r0 * d, R);
      const T* ln2 =
          layernorm_forward(a.ln2 + r0 * d, a.ln2_mean + r0, a.ln2_rstd + r0, y, W.ln2g, W.ln2b, R);
      mlp_forward(a.M + r0 * d, a.h + r0 * f, a.g + r0 * f, ln2, W, R);
      residual_forward(xn, y, a.M + r0 * d, R);
    }
    const T* xL = act.res[size_t(cfg_.layers)] + r0 * d;
    const T* lnf = layernorm_forward(act.lnf + r0 * d, act.lnf_mean + r0, act.lnf_rstd + r0, xL,
                                     P.lnfg, P.lnfb, R);
    return unembed_xent_forward(act.logits + r0 * C, act.probs + r0 * C, lnf, seq, b0, nb, loss0,
                                logp, sum_loss);
  }

  // Mirror of forward_rows(act, 0, seq, b0, nb, true, ...) (the activations of sequences
  // [b0, b0 + nb) from act's first row on): accumulates scale * d(sum loss)/d(params) into g.
  void backward_rows(const Activations& act, const int32_t* seq, int b0, int nb, Views& g,
                     Scratch& s, T scale) const {
    const size_t d = size_t(cfg_.d), N = size_t(cfg_.N), R = size_t(nb) * N;
    const T* xL = act.res[size_t(cfg_.layers)];
    const T* lnf = cfg_.ln ? act.lnf : xL;
    unembed_xent_backward(s.dln, g, act.probs, lnf, seq, b0, nb, s, scale);
    std::fill(s.dres, s.dres + R * d, T(0));
    layernorm_backward(s.dres, g.lnfg, g.lnfb, s.dln, xL, P.lnfg, act.lnf_mean, act.lnf_rstd, R);
    for (int l = cfg_.layers - 1; l >= 0; --l) {
      const auto& W = P.l[size_t(l)];
      auto& gW = g.l[size_t(l)];
      const auto& a = act.l[size_t(l)];
      const T* x = act.res[size_t(l)];
      const T* y = a.y;
      if (cfg_.mlp) {  // dM = dres (residual backward)
        const T* ln2 = cfg_.ln ? a.ln2 : y;
        mlp_backward(s.dln, gW, s.dres, ln2, a.h, a.g, W, s, R);
        layernorm_backward(s.dres, gW.ln2g, gW.ln2b, s.dln, y, W.ln2g, a.ln2_mean, a.ln2_rstd, R);
      }
      // dA = dres (residual backward)
      const T* ln1 = cfg_.ln ? a.ln1 : x;
      attention_backward(s.dln, gW, s.dres, ln1, a.qkv, a.pattern, a.atty, W, s, nb);
      layernorm_backward(s.dres, gW.ln1g, gW.ln1b, s.dln, x, W.ln1g, a.ln1_mean, a.ln1_rstd, R);
    }
    embedding_backward(g, s.dres, seq, b0, nb);  // dE = dres
  }

  ModelConfig cfg_;
  Layout lay_;
  Ops<T> ops_;
  int B_, chunks_;
  size_t chunk_stride_ = 0;  // elements from one chunk's gradients to the next's
  T* cg_base_ = nullptr;     // chunk 0's gradients in chunk_grads (64-byte aligned)
  // Sequences per step of forward_log_probs' stream: 256 rows at N = 64, whose activations
  // (about 0.6 MB at d = 32) stay in L2.
  static constexpr int kEvalSeqs = 4;
  std::vector<T> act_mem_, rope_cs;
  Activations act_;
  std::vector<Activations> eval_acts_;  // per chunk: kEvalSeqs sequences, layers sharing buffers
  std::vector<std::vector<T>> eval_mem_;
  std::vector<Scratch> scratch;          // backward scratch, one per training slot
  std::vector<Activations> train_acts_;  // per training slot: the largest chunk's activations
  std::vector<std::vector<T>> train_mem_;
  std::vector<double> chunk_loss;
};

}  // namespace pl::markov
