// The two-layer (L-layer) transformer of the Markov ICL experiment, llm.c style: one flat
// parameter buffer with named views, one flat activation buffer, forward and backward as
// mirrored passes, the batch split into a fixed number of chunks whose gradients are reduced in
// a fixed order (bit-identical results for any thread count).
//
// Templated on the element type: Model<float> calls the kernel table (the experiment),
// Model<double> calls the plain double loops of ref_ops.hpp (the finite-difference oracle).
//
// Residual stream (pre-LN):  x_0 = E = wte[x] + wpe;  y_l = x_l + A_l(LN1(x_l));
//                            x_{l+1} = y_l + M_l(LN2(y_l));  U = LNf(x_L) Wu^T.
// Weights are stored (out x in), so a linear layer is Y = X W^T (gemm with trans_b).
#pragma once

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

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
template <class T>
struct Ops;
template <>
struct Ops<double> {
  explicit Ops(const pl_kernel_table*) {}
  void gemm(int ta, int tb, size_t m, size_t n, size_t k, double al, const double* a, size_t lda,
            const double* b, size_t ldb, double be, double* c, size_t ldc) const {
    ref::gemm<double>(ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc);
  }
  void softmax_rows(const double* x, double* y, size_t r, size_t c) const {
    ref::softmax_rows<double>(x, y, r, c, 1.0, 0);
  }
  void gelu(const double* x, double* y, size_t n) const { ref::gelu<double>(x, y, n); }
  void gelu_bwd(const double* x, const double* dy, double* dx, size_t n) const {
    ref::gelu_bwd<double>(x, dy, dx, n);
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
  void softmax_rows(const float* x, float* y, size_t r, size_t c) const {
    k->softmax_rows(x, y, r, c, 1.0f, 0);
  }
  void gelu(const float* x, float* y, size_t n) const { k->gelu(x, y, n); }
  void gelu_bwd(const float* x, const float* dy, float* dx, size_t n) const {
    k->gelu_bwd(x, dy, dx, n);
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

template <class T>
class Model {
 public:
  // Parameter (or gradient) views into a flat buffer.
  struct Views {
    T *wte, *wpe, *lnfg, *lnfb, *wu;
    struct L {
      T *ln1g, *ln1b, *wqkv, *wo, *ln2g, *ln2b, *wfc, *wproj;
    };
    std::vector<L> l;
  };
  // Activations of `batch` sequences (R = batch * N rows), one flat buffer.
  struct Acts {
    std::vector<T*> res;  // L + 1 residual streams x_l (R x d); res[0] = E
    struct L {
      T *ln1, *m1, *r1, *qkv, *att, *atty, *A, *y, *ln2, *m2, *r2, *h, *g, *M;
    };
    std::vector<L> l;
    T *lnf, *mf, *rf, *logits, *probs;
  };
  // Per-chunk backward scratch.
  struct Scratch {
    std::vector<T> buf;
    T *dres, *dln, *dqkv, *datty, *dh, *dlog, *datt;
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
    chunk_grads.assign(lay_.total * size_t(chunks_), T(0));
    chunk_loss.assign(size_t(chunks_), 0.0);
    P = views(params.data());
    G = views(grads.data());
    for (int c = 0; c < chunks_; ++c)
      CG.push_back(views(chunk_grads.data() + size_t(c) * lay_.total));
    alloc_acts();
    const size_t Nn = size_t(cfg.N), d = size_t(cfg.d);
    size_t rc = 0;  // rows of the largest chunk
    for (int c = 0; c < chunks_; ++c) rc = std::max(rc, size_t(chunk_end(c) - chunk_begin(c)) * Nn);
    scratch.resize(size_t(chunks_));
    for (auto& s : scratch) {
      const size_t f = size_t(cfg.ffn);
      s.buf.assign(rc * (d + d + 3 * d + d + f + size_t(cfg.C)) + Nn * Nn, T(0));
      T* p = s.buf.data();
      auto take = [&](size_t n) {
        T* q = p;
        p += n;
        return q;
      };
      s.dres = take(rc * d);
      s.dln = take(rc * d);
      s.dqkv = take(rc * 3 * d);
      s.datty = take(rc * d);
      s.dh = take(rc * f);
      s.dlog = take(rc * size_t(cfg.C));
      s.datt = take(Nn * Nn);
    }
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
  size_t num_params() const { return lay_.total; }
  int batch() const { return B_; }
  int chunks() const { return chunks_; }
  int chunk_begin(int c) const { return int(int64_t(B_) * c / chunks_); }
  int chunk_end(int c) const { return int(int64_t(B_) * (c + 1) / chunks_); }

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
  // first N, targets the last N). Returns the mean cross-entropy. Parallel over chunks.
  double forward(const int32_t* seq, int nb) {
    run_chunks(nb,
               [&](int c, int b0, int n) { chunk_loss[size_t(c)] = forward_chunk(seq, b0, n); });
    return mean_loss(nb);
  }
  // Forward and backward: grads = d(mean loss)/d(params). Returns the mean loss.
  double forward_backward(const int32_t* seq, int nb) {
    const T scale = T(1.0 / (double(nb) * cfg_.N));
    run_chunks(nb, [&](int c, int b0, int n) {
      std::fill(chunk_grads.begin() + std::ptrdiff_t(size_t(c) * lay_.total),
                chunk_grads.begin() + std::ptrdiff_t(size_t(c + 1) * lay_.total), T(0));
      chunk_loss[size_t(c)] = forward_chunk(seq, b0, n);
      backward_chunk(seq, b0, n, CG[size_t(c)], scratch[size_t(c)], scale);
    });
    // grads = sum over chunks in chunk order (fixed), parallel over parameter blocks
    const size_t P_ = lay_.total;
    tbb::parallel_for(tbb::blocked_range<size_t>(0, P_, 4096),
                      [&](const tbb::blocked_range<size_t>& r) {
                        for (size_t i = r.begin(); i < r.end(); ++i) {
                          T s = chunk_grads[i];
                          for (int c = 1; c < chunks_; ++c) s += chunk_grads[size_t(c) * P_ + i];
                          grads[i] = s;
                        }
                      });
    return mean_loss(nb);
  }

  // Component outputs of the last forward pass, rows b * N + t (the residual stream is their sum).
  const T* E() const { return A_.res[0]; }                    // R x d
  const T* A(int l) const { return A_.l[size_t(l)].A; }       // R x d
  const T* M(int l) const { return A_.l[size_t(l)].M; }       // R x d (null in attention-only mode)
  const T* U() const { return A_.logits; }                    // R x C
  const T* attn(int l) const { return A_.l[size_t(l)].att; }  // batch x heads x N x N

  std::vector<T> params, grads, chunk_grads;
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
  void alloc_acts() {
    const size_t R = size_t(B_) * cfg_.N, d = size_t(cfg_.d), f = size_t(cfg_.ffn),
                 NN = size_t(B_) * cfg_.heads * cfg_.N * cfg_.N, C = size_t(cfg_.C);
    const size_t per_layer = R * (d + 2 + 3 * d + d + d + d + d + 2 + f + f + d) + NN;
    acts.assign(
        R * d * size_t(cfg_.layers + 1) + size_t(cfg_.layers) * per_layer + R * (d + 2 + 2 * C),
        T(0));
    T* p = acts.data();
    auto take = [&](size_t n) {
      T* q = p;
      p += n;
      return q;
    };
    for (int l = 0; l <= cfg_.layers; ++l) A_.res.push_back(take(R * d));
    for (int l = 0; l < cfg_.layers; ++l) {
      typename Acts::L a;
      a.ln1 = take(R * d);
      a.m1 = take(R);
      a.r1 = take(R);
      a.qkv = take(R * 3 * d);
      a.att = take(NN);
      a.atty = take(R * d);
      a.A = take(R * d);
      a.y = take(R * d);
      a.ln2 = take(R * d);
      a.m2 = take(R);
      a.r2 = take(R);
      a.h = take(R * f);
      a.g = take(R * f);
      a.M = take(R * d);
      if (!cfg_.mlp) a.M = nullptr;
      A_.l.push_back(a);
    }
    A_.lnf = take(R * d);
    A_.mf = take(R);
    A_.rf = take(R);
    A_.logits = take(R * C);
    A_.probs = take(R * C);
  }
  template <class F>
  void run_chunks(int nb, F&& f) {
    if (nb > B_) throw std::invalid_argument("batch larger than allocated");
    // fixed partition of the nb sequences into chunks_ ranges (the same for every thread count)
    tbb::parallel_for(0, chunks_, [&](int c) {
      const int b0 = int(int64_t(nb) * c / chunks_), b1 = int(int64_t(nb) * (c + 1) / chunks_);
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

  // q, k of every head of rows r0.. rotated by position (in place in the qkv buffer).
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

  // Sequences [b0, b0 + nb): fills their activation rows; returns the summed cross-entropy.
  double forward_chunk(const int32_t* seq, int b0, int nb) {
    const ModelConfig& c = cfg_;
    const size_t d = size_t(c.d), f = size_t(c.ffn), N = size_t(c.N), C = size_t(c.C),
                 R = size_t(nb) * N, r0 = size_t(b0) * N, dh = size_t(c.dh());
    const T scale = T(1.0 / std::sqrt(double(dh)));
    // E = wte[x_t] + wpe[t]                                   (R x d)
    T* E = A_.res[0] + r0 * d;
    for (size_t b = 0; b < size_t(nb); ++b)
      for (size_t t = 0; t < N; ++t) {
        const T* te = P.wte + size_t(seq[(size_t(b0) + b) * (N + 1) + t]) * d;
        T* e = E + (b * N + t) * d;
        for (size_t i = 0; i < d; ++i) e[i] = te[i] + (c.rope ? T(0) : P.wpe[t * d + i]);
      }
    for (int l = 0; l < c.layers; ++l) {
      const auto& W = P.l[size_t(l)];
      const auto& a = A_.l[size_t(l)];
      T* x = A_.res[size_t(l)] + r0 * d;
      // attention block: ln1 = LN(x); qkv = ln1 Wqkv^T (R x 3d); per head softmax attention
      T* ln1 = c.ln ? a.ln1 + r0 * d : x;
      if (c.ln) ops_.layernorm(x, W.ln1g, W.ln1b, ln1, a.m1 + r0, a.r1 + r0, R, d, c.ln_eps);
      T* qkv = a.qkv + r0 * 3 * d;
      ops_.gemm(0, 1, R, 3 * d, d, T(1), ln1, d, W.wqkv, d, T(0), qkv, 3 * d);
      if (c.rope) rope(qkv, nb, false);
      T* atty = a.atty + r0 * d;  // heads concatenated (R x d)
      for (size_t b = 0; b < size_t(nb); ++b)
        for (size_t h = 0; h < size_t(c.heads); ++h) {
          const T* q = qkv + b * N * 3 * d + h * dh;
          ops_.attention(q, 3 * d, q + d, 3 * d, q + 2 * d, 3 * d, atty + b * N * d + h * dh, d,
                         a.att + ((size_t(b0) + b) * c.heads + h) * N * N, N, dh, scale);
        }
      T* Ao = a.A + r0 * d;  // A_l = atty Wo^T (R x d)
      ops_.gemm(0, 1, R, d, d, T(1), atty, d, W.wo, d, T(0), Ao, d);
      T* y = a.y + r0 * d;
      for (size_t i = 0; i < R * d; ++i) y[i] = x[i] + Ao[i];
      T* xn = A_.res[size_t(l) + 1] + r0 * d;
      if (!c.mlp) {
        std::memcpy(xn, y, R * d * sizeof(T));
        continue;
      }
      // MLP block: ln2 = LN(y); h = ln2 Wfc^T (R x ffn); g = gelu(h); M = g Wproj^T (R x d)
      T* ln2 = c.ln ? a.ln2 + r0 * d : y;
      if (c.ln) ops_.layernorm(y, W.ln2g, W.ln2b, ln2, a.m2 + r0, a.r2 + r0, R, d, c.ln_eps);
      T* h = a.h + r0 * f;
      T* g = a.g + r0 * f;
      ops_.gemm(0, 1, R, f, d, T(1), ln2, d, W.wfc, d, T(0), h, f);
      ops_.gelu(h, g, R * f);
      T* Mo = a.M + r0 * d;
      ops_.gemm(0, 1, R, d, f, T(1), g, f, W.wproj, f, T(0), Mo, d);
      for (size_t i = 0; i < R * d; ++i) xn[i] = y[i] + Mo[i];
    }
    // U = LNf(x_L) Wu^T (R x C); probs = softmax(U)
    T* xL = A_.res[size_t(c.layers)] + r0 * d;
    T* lnf = c.ln ? A_.lnf + r0 * d : xL;
    if (c.ln) ops_.layernorm(xL, P.lnfg, P.lnfb, lnf, A_.mf + r0, A_.rf + r0, R, d, c.ln_eps);
    T* U = A_.logits + r0 * C;
    ops_.gemm(0, 1, R, C, d, T(1), lnf, d, P.wu, d, T(0), U, C);
    ops_.softmax_rows(U, A_.probs + r0 * C, R, C);
    double loss = 0;  // sum_t logsumexp(U_t) - U_t[target], in double
    for (size_t b = 0; b < size_t(nb); ++b)
      for (size_t t = 0; t < N; ++t) {
        const T* u = U + (b * N + t) * C;
        double mx = -INFINITY, z = 0;
        for (size_t j = 0; j < C; ++j) mx = std::fmax(mx, double(u[j]));
        for (size_t j = 0; j < C; ++j) z += std::exp(double(u[j]) - mx);
        loss += mx + std::log(z) - double(u[seq[(size_t(b0) + b) * (N + 1) + t + 1]]);
      }
    return loss;
  }

  // Mirror of forward_chunk: accumulates scale * d(sum loss)/d(params) into g.
  void backward_chunk(const int32_t* seq, int b0, int nb, Views& g, Scratch& s, T scale) {
    const ModelConfig& c = cfg_;
    const size_t d = size_t(c.d), f = size_t(c.ffn), N = size_t(c.N), C = size_t(c.C),
                 R = size_t(nb) * N, r0 = size_t(b0) * N, dh = size_t(c.dh());
    const T ascale = T(1.0 / std::sqrt(double(dh)));
    // dU = scale (softmax(U) - onehot(target))                (R x C)
    const T* probs = A_.probs + r0 * C;
    for (size_t b = 0; b < size_t(nb); ++b)
      for (size_t t = 0; t < N; ++t) {
        const size_t r = b * N + t;
        const size_t tgt = size_t(seq[(size_t(b0) + b) * (N + 1) + t + 1]);
        for (size_t j = 0; j < C; ++j)
          s.dlog[r * C + j] = scale * (probs[r * C + j] - (j == tgt ? T(1) : T(0)));
      }
    T* xL = A_.res[size_t(c.layers)] + r0 * d;
    T* lnf = c.ln ? A_.lnf + r0 * d : xL;
    ops_.gemm(1, 0, C, d, R, T(1), s.dlog, C, lnf, d, T(1), g.wu, d);    // dWu += dU^T lnf (C x d)
    ops_.gemm(0, 0, R, d, C, T(1), s.dlog, C, P.wu, d, T(0), s.dln, d);  // dlnf = dU Wu (R x d)
    std::fill(s.dres, s.dres + R * d, T(0));
    back_ln(c.ln, s.dln, xL, P.lnfg, A_.mf + r0, A_.rf + r0, s.dres, g.lnfg, g.lnfb, R);
    for (int l = c.layers - 1; l >= 0; --l) {
      const auto& W = P.l[size_t(l)];
      auto& gW = g.l[size_t(l)];
      const auto& a = A_.l[size_t(l)];
      T* x = A_.res[size_t(l)] + r0 * d;
      T* y = a.y + r0 * d;
      if (c.mlp) {  // dM = dres
        T* ln2 = c.ln ? a.ln2 + r0 * d : y;
        ops_.gemm(1, 0, d, f, R, T(1), s.dres, d, a.g + r0 * f, f, T(1), gW.wproj,
                  f);                                                          // dWproj += dM^T g
        ops_.gemm(0, 0, R, f, d, T(1), s.dres, d, W.wproj, f, T(0), s.dh, f);  // dg = dM Wproj
        ops_.gelu_bwd(a.h + r0 * f, s.dh, s.dh, R * f);                        // dh = gelu'(h) dg
        ops_.gemm(1, 0, f, d, R, T(1), s.dh, f, ln2, d, T(1), gW.wfc, d);      // dWfc += dh^T ln2
        ops_.gemm(0, 0, R, d, f, T(1), s.dh, f, W.wfc, d, T(0), s.dln, d);     // dln2 = dh Wfc
        back_ln(c.ln, s.dln, y, W.ln2g, a.m2 + r0, a.r2 + r0, s.dres, gW.ln2g, gW.ln2b, R);
      }
      // dA = dres (the residual carries dy into both the block and x)
      T* atty = a.atty + r0 * d;
      ops_.gemm(1, 0, d, d, R, T(1), s.dres, d, atty, d, T(1), gW.wo, d);    // dWo += dA^T atty
      ops_.gemm(0, 0, R, d, d, T(1), s.dres, d, W.wo, d, T(0), s.datty, d);  // datty = dA Wo
      const T* qkv = a.qkv + r0 * 3 * d;
      for (size_t b = 0; b < size_t(nb); ++b)
        for (size_t h = 0; h < size_t(c.heads); ++h) {
          const T* q = qkv + b * N * 3 * d + h * dh;
          T* dq = s.dqkv + b * N * 3 * d + h * dh;
          ops_.attention_bwd(q, 3 * d, q + d, 3 * d, q + 2 * d, 3 * d,
                             a.att + ((size_t(b0) + b) * c.heads + h) * N * N,
                             s.datty + b * N * d + h * dh, d, dq, 3 * d, dq + d, 3 * d, dq + 2 * d,
                             3 * d, s.datt, N, dh, ascale);
        }
      if (c.rope) rope(s.dqkv, nb, true);  // q = R q0 => dq0 = R^T dq
      T* ln1 = c.ln ? a.ln1 + r0 * d : x;
      ops_.gemm(1, 0, 3 * d, d, R, T(1), s.dqkv, 3 * d, ln1, d, T(1), gW.wqkv,
                d);  // dWqkv += dqkv^T ln1
      ops_.gemm(0, 0, R, d, 3 * d, T(1), s.dqkv, 3 * d, W.wqkv, d, T(0), s.dln,
                d);  // dln1 = dqkv Wqkv
      back_ln(c.ln, s.dln, x, W.ln1g, a.m1 + r0, a.r1 + r0, s.dres, gW.ln1g, gW.ln1b, R);
    }
    // dE = dres: scatter into the token and position tables
    for (size_t b = 0; b < size_t(nb); ++b)
      for (size_t t = 0; t < N; ++t) {
        const T* de = s.dres + (b * N + t) * d;
        T* gt = g.wte + size_t(seq[(size_t(b0) + b) * (N + 1) + t]) * d;
        for (size_t i = 0; i < d; ++i) gt[i] += de[i];
        if (!c.rope)
          for (size_t i = 0; i < d; ++i) g.wpe[t * d + i] += de[i];
      }
  }
  // dx += LN^T dy (or dx += dy without LayerNorm)
  void back_ln(bool ln, const T* dy, const T* x, const T* gamma, const T* mean, const T* rstd,
               T* dx, T* dg, T* db, size_t R) const {
    const size_t d = size_t(cfg_.d);
    if (ln)
      ops_.layernorm_bwd(dy, x, gamma, mean, rstd, dx, dg, db, R, d);
    else
      for (size_t i = 0; i < R * d; ++i) dx[i] += dy[i];
  }

  ModelConfig cfg_;
  Layout lay_;
  Ops<T> ops_;
  int B_, chunks_;
  std::vector<T> acts, rope_cs;
  Acts A_;
  std::vector<Scratch> scratch;
  std::vector<double> chunk_loss;

 public:
  // Log-probabilities of the last forward pass (row r = b * N + t), in double.
  void log_probs(int nb, double* out) const {
    const size_t C = size_t(cfg_.C), R = size_t(nb) * cfg_.N;
    for (size_t r = 0; r < R; ++r) {
      const T* u = A_.logits + r * C;
      double mx = -INFINITY, z = 0;
      for (size_t j = 0; j < C; ++j) mx = std::fmax(mx, double(u[j]));
      for (size_t j = 0; j < C; ++j) z += std::exp(double(u[j]) - mx);
      for (size_t j = 0; j < C; ++j) out[r * C + j] = double(u[j]) - mx - std::log(z);
    }
  }
};

}  // namespace pl::markov
