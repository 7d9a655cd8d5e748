// SPDX-License-Identifier: Apache-2.0
// posattn.hwy.<isa>, posattn_bwd.hwy.<isa>, posattn_onehot_sse.hwy.<isa>,
// posattn_gram_sse.hwy.<isa>, posattn_onehot_sse_rows.hwy.<isa>: the copy task's positional
// attention, all targets.
//
// V == 4 (the copy-task benchmark; L <= 64): one vector holds G = lanes / 4 consecutive rows of
// an L x 4 matrix, so a whole row of h, f, dh or df is one 128-bit block. Then
//   h rows [bG, bG+G) = sum_k Aexp[b][k] * dup(X[k, :])      (Aexp[b][k] lane (g, v) = A[bG+g, k])
//   f block           = sum_u Broadcast<u>(h block) * dup(W[:, u])
// with dup = LoadDup128 and Broadcast<u> = lane u of every 128-bit block: no shuffles across
// blocks, every FMA full width. The backward uses the same layout.
// Any other shape: the GEMM of gemm-inl.h (f = H W^T, dw = DF^T H and dh = DF W as single
// GEMMs over all p * L rows; A X[mu] and dh[mu] X[mu]^T per sequence).
// foreach_target.h must follow HWY_TARGET_INCLUDE and precede the other includes.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/posattn/posattn_hwy.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/gemm/gemm-inl.h"
#include "phaselab/kernels.hpp"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace pl {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace posattn_detail {

constexpr size_t kMaxSmallL = 64;
// The V == 4 path needs whole 128-bit blocks (not the one-lane HWY_SCALAR fallback target).
constexpr bool kHaveBlocks =
    HWY_TARGET != HWY_SCALAR;  // beyond this, Aexp (4 L^2 floats) leaves L1: use GEMMs

inline float* Buffer(size_t n) {
  static thread_local gemm_detail::Scratch s;
  return s.get(n);
}

// Loads/stores the `valid` leading floats of one vector (whole vector when valid >= lanes).
template <class D>
HWY_INLINE hn::VFromD<D> LoadRows(D d, const float* p, size_t valid) {
  return valid >= hn::Lanes(d) ? hn::LoadU(d, p) : part::Load(d, p, valid);
}
template <class D>
HWY_INLINE void StoreRows(D d, hn::VFromD<D> v, float* p, size_t valid) {
  if (valid >= hn::Lanes(d)) {
    hn::StoreU(v, d, p);
  } else if (valid > 0) {
    part::Store(d, v, p, valid);
  }
}

// Floats of row block b (G rows of 4) that lie inside an L x 4 matrix.
HWY_INLINE size_t BlockValid(size_t b, size_t G, size_t l) {
  return b * G >= l ? 0 : std::min(G, l - b * G) * 4;
}

#if HWY_TARGET != HWY_SCALAR
// V == 4 forward. a: L x L, x, h, f: p x L x 4, w: 4 x 4.
void Forward4(const float* HWY_RESTRICT a, const float* HWY_RESTRICT x, const float* HWY_RESTRICT w,
              float* HWY_RESTRICT h, float* HWY_RESTRICT f, size_t p, size_t l) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d), G = N / 4;
  const size_t nb = (l + G - 1) / G, ng = (nb + 3) / 4;  // row blocks, groups of 4 blocks
  // Aexp[(grp * L + k) * 4 + j] = the vector for block b = 4 grp + j at column k; zero past L.
  float* ae = Buffer(ng * l * 4 * N);
  for (size_t grp = 0; grp < ng; ++grp)
    for (size_t k = 0; k < l; ++k)
      for (size_t j = 0; j < 4; ++j)
        for (size_t g = 0; g < G; ++g) {
          const size_t row = (grp * 4 + j) * G + g;
          const float val = row < l ? a[row * l + k] : 0.f;
          for (size_t v = 0; v < 4; ++v) ae[((grp * l + k) * 4 + j) * N + g * 4 + v] = val;
        }
  // wt[u] lane (g, o) = W[o, u]
  HWY_ALIGN float wt[16];
  for (size_t u = 0; u < 4; ++u)
    for (size_t o = 0; o < 4; ++o) wt[u * 4 + o] = w[o * 4 + u];
  const auto w0 = hn::LoadDup128(d, wt), w1 = hn::LoadDup128(d, wt + 4),
             w2 = hn::LoadDup128(d, wt + 8), w3 = hn::LoadDup128(d, wt + 12);
  // Writes h and f for row block b of sequence mu from its accumulator.
  auto finish = [&](hn::VFromD<decltype(d)> acc, size_t mu, size_t b) {
    const size_t valid = BlockValid(b, G, l);
    if (valid == 0) return;
    const size_t off = mu * l * 4 + b * N;
    StoreRows(d, acc, h + off, valid);
    auto fv = hn::Mul(hn::Broadcast<0>(acc), w0);
    fv = hn::MulAdd(hn::Broadcast<1>(acc), w1, fv);
    fv = hn::MulAdd(hn::Broadcast<2>(acc), w2, fv);
    fv = hn::MulAdd(hn::Broadcast<3>(acc), w3, fv);
    StoreRows(d, fv, f + off, valid);
  };
  // Two sequences x four row blocks: eight independent FMA chains.
  for (size_t mu = 0; mu < p; mu += 2) {
    const bool two = mu + 1 < p;
    const float* x0 = x + mu * l * 4;
    const float* x1 = two ? x0 + l * 4 : x0;
    for (size_t grp = 0; grp < ng; ++grp) {
      const float* ag = ae + grp * l * 4 * N;
      auto a00 = hn::Zero(d), a01 = a00, a02 = a00, a03 = a00;
      auto a10 = a00, a11 = a00, a12 = a00, a13 = a00;
      for (size_t k = 0; k < l; ++k) {
        const auto xa = hn::LoadDup128(d, x0 + 4 * k), xb = hn::LoadDup128(d, x1 + 4 * k);
        const float* ak = ag + k * 4 * N;
        const auto e0 = hn::Load(d, ak), e1 = hn::Load(d, ak + N), e2 = hn::Load(d, ak + 2 * N),
                   e3 = hn::Load(d, ak + 3 * N);
        a00 = hn::MulAdd(e0, xa, a00);
        a01 = hn::MulAdd(e1, xa, a01);
        a02 = hn::MulAdd(e2, xa, a02);
        a03 = hn::MulAdd(e3, xa, a03);
        a10 = hn::MulAdd(e0, xb, a10);
        a11 = hn::MulAdd(e1, xb, a11);
        a12 = hn::MulAdd(e2, xb, a12);
        a13 = hn::MulAdd(e3, xb, a13);
      }
      finish(a00, mu, grp * 4), finish(a01, mu, grp * 4 + 1);
      finish(a02, mu, grp * 4 + 2), finish(a03, mu, grp * 4 + 3);
      if (two) {
        finish(a10, mu + 1, grp * 4), finish(a11, mu + 1, grp * 4 + 1);
        finish(a12, mu + 1, grp * 4 + 2), finish(a13, mu + 1, grp * 4 + 3);
      }
    }
  }
}

// Sums the four lanes of every 128-bit block of v: out[g] for g < G.
template <class D>
HWY_INLINE void BlockSums(D d, hn::VFromD<D> v, float* out) {
  HWY_ALIGN float buf[HWY_MAX_BYTES / sizeof(float)];
  hn::Store(v, d, buf);
  for (size_t g = 0; g < hn::Lanes(d) / 4; ++g)
    out[g] = (buf[4 * g] + buf[4 * g + 1]) + (buf[4 * g + 2] + buf[4 * g + 3]);
}

// V == 4 backward. dw = DF^T H, dh = DF W over all p L rows; da = sum_mu dh[mu] X[mu]^T.
void Backward4(const float* HWY_RESTRICT x, const float* HWY_RESTRICT w,
               const float* HWY_RESTRICT h, const float* HWY_RESTRICT df, float* HWY_RESTRICT da,
               float* HWY_RESTRICT dw, float* HWY_RESTRICT dh, size_t p, size_t l) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d), G = N / 4;
  // dh block = sum_o Broadcast<o>(df block) * dup(W[o, :]);
  // dw: acc_o lane (g, u) += df[g, o] h[g, u], summed over blocks at the end.
  const auto r0 = hn::LoadDup128(d, w), r1 = hn::LoadDup128(d, w + 4),
             r2 = hn::LoadDup128(d, w + 8), r3 = hn::LoadDup128(d, w + 12);
  auto s0 = hn::Zero(d), s1 = s0, s2 = s0, s3 = s0;
  const size_t total = p * l * 4;
  for (size_t i = 0; i < total; i += N) {
    const size_t valid = std::min(N, total - i);
    const auto dfv = LoadRows(d, df + i, valid), hv = LoadRows(d, h + i, valid);
    const auto b0 = hn::Broadcast<0>(dfv), b1 = hn::Broadcast<1>(dfv), b2 = hn::Broadcast<2>(dfv),
               b3 = hn::Broadcast<3>(dfv);
    auto dhv = hn::Mul(b0, r0);
    dhv = hn::MulAdd(b1, r1, dhv);
    dhv = hn::MulAdd(b2, r2, dhv);
    dhv = hn::MulAdd(b3, r3, dhv);
    StoreRows(d, dhv, dh + i, valid);
    s0 = hn::MulAdd(b0, hv, s0);
    s1 = hn::MulAdd(b1, hv, s1);
    s2 = hn::MulAdd(b2, hv, s2);
    s3 = hn::MulAdd(b3, hv, s3);
  }
  HWY_ALIGN float buf[HWY_MAX_BYTES / sizeof(float)];
  auto fold = [&](hn::VFromD<decltype(d)> s, float* row) {  // row[u] = sum over blocks
    hn::Store(s, d, buf);
    for (size_t u = 0; u < 4; ++u) {
      float t = 0;
      for (size_t g = 0; g < G; ++g) t += buf[4 * g + u];
      row[u] = t;
    }
  };
  fold(s0, dw), fold(s1, dw + 4), fold(s2, dw + 8), fold(s3, dw + 12);

  // da[bG + g, k] = block sum g of sum_mu dh[mu] block b * dup(X[mu][k, :]); four row blocks
  // x two columns k per pass over the sequences.
  const size_t nb = (l + G - 1) / G;
  HWY_ALIGN float zeros[HWY_MAX_BYTES / sizeof(float)] = {};
  float sums[HWY_MAX_BYTES / sizeof(float) / 4];
  for (size_t b0 = 0; b0 < nb; b0 += 4) {
    // Blocks past the matrix read a zero vector; partial blocks are copied (LoadRows).
    const size_t v0 = BlockValid(b0, G, l), v1 = BlockValid(b0 + 1, G, l),
                 v2 = BlockValid(b0 + 2, G, l), v3 = BlockValid(b0 + 3, G, l);
    auto at = [&](size_t mu, size_t b, size_t valid) {
      return valid ? LoadRows(d, dh + mu * l * 4 + b * N, valid) : hn::Load(d, zeros);
    };
    for (size_t k = 0; k < l; k += 2) {
      const size_t k1 = std::min(k + 1, l - 1);  // odd l: the second column repeats the first
      auto c00 = hn::Zero(d), c01 = c00, c10 = c00, c11 = c00;
      auto c20 = c00, c21 = c00, c30 = c00, c31 = c00;
      for (size_t mu = 0; mu < p; ++mu) {
        const float* xm = x + mu * l * 4;
        const auto xk = hn::LoadDup128(d, xm + 4 * k), xk1 = hn::LoadDup128(d, xm + 4 * k1);
        const auto d0 = at(mu, b0, v0), d1 = at(mu, b0 + 1, v1), d2 = at(mu, b0 + 2, v2),
                   d3 = at(mu, b0 + 3, v3);
        c00 = hn::MulAdd(d0, xk, c00);
        c01 = hn::MulAdd(d0, xk1, c01);
        c10 = hn::MulAdd(d1, xk, c10);
        c11 = hn::MulAdd(d1, xk1, c11);
        c20 = hn::MulAdd(d2, xk, c20);
        c21 = hn::MulAdd(d2, xk1, c21);
        c30 = hn::MulAdd(d3, xk, c30);
        c31 = hn::MulAdd(d3, xk1, c31);
      }
      auto put = [&](hn::VFromD<decltype(d)> c, size_t b, size_t kk) {
        BlockSums(d, c, sums);
        for (size_t g = 0; g < G && b * G + g < l; ++g) da[(b * G + g) * l + kk] = sums[g];
      };
      put(c00, b0, k), put(c10, b0 + 1, k), put(c20, b0 + 2, k), put(c30, b0 + 3, k);
      if (k1 != k)
        put(c01, b0, k1), put(c11, b0 + 1, k1), put(c21, b0 + 2, k1), put(c31, b0 + 3, k1);
    }
  }
}

#else
void Forward4(const float*, const float*, const float*, float*, float*, size_t, size_t) {}
void Backward4(const float*, const float*, const float*, const float*, float*, float*, float*,
               size_t, size_t) {}
#endif

}  // namespace posattn_detail

// a: L x L, x: p x L x V, w: V x V; h = A X^mu, f = h W^T (p x L x V).
void Posattn(const float* a, const float* x, const float* w, float* h, float* f, size_t p, size_t l,
             size_t v) {
  if (p == 0 || l == 0 || v == 0) return;
  const hn::ScalableTag<float> d;
  if (posattn_detail::kHaveBlocks && v == 4 && l <= posattn_detail::kMaxSmallL &&
      hn::Lanes(d) % 4 == 0)
    return posattn_detail::Forward4(a, x, w, h, f, p, l);
  // h[mu] = A X[mu]  (L x V) per sequence
  for (size_t mu = 0; mu < p; ++mu)
    gemm_detail::Gemm(false, false, l, v, l, 1.f, a, l, x + mu * l * v, v, 0.f, h + mu * l * v, v);
  // f = H W^T  ((p L) x V), one GEMM over all rows
  gemm_detail::Gemm(false, true, p * l, v, v, 1.f, h, v, w, v, 0.f, f, v);
}

// dw = DF^T H (V x V), dh = DF W (p L x V), da = sum_mu dh[mu] X[mu]^T (L x L).
void PosattnBwd(const float* a, const float* x, const float* w, const float* h, const float* df,
                float* da, float* dw, float* dh, size_t p, size_t l, size_t v) {
  (void)a;
  if (l == 0 || v == 0) return;
  const hn::ScalableTag<float> d;
  if (p == 0) {
    std::fill(da, da + l * l, 0.f);
    std::fill(dw, dw + v * v, 0.f);
    return;
  }
  if (posattn_detail::kHaveBlocks && v == 4 && l <= posattn_detail::kMaxSmallL &&
      hn::Lanes(d) % 4 == 0)
    return posattn_detail::Backward4(x, w, h, df, da, dw, dh, p, l);
  gemm_detail::Gemm(true, false, v, v, p * l, 1.f, df, v, h, v, 0.f, dw, v);
  gemm_detail::Gemm(false, false, p * l, v, v, 1.f, df, v, w, v, 0.f, dh, v);
  for (size_t mu = 0; mu < p; ++mu)
    gemm_detail::Gemm(false, true, l, l, v, 1.f, dh + mu * l * v, v, x + mu * l * v, v,
                      mu == 0 ? 0.f : 1.f, da, l);
}

// sse and its gradient on one-hot tokens (kernels.def). Everything runs transposed, one vector =
// N consecutive rows i of one column, columns padded to Lp = N ceil(L / N) with zeros:
//   AT[k]  = A[:, k]                                  (L x Lp)
//   hT[u]  = sum_{k: t_k = u} AT[k]                   (V x Lp; X one-hot: an indexed add, no FMA)
//   rT[o]  = sum_u W[o, u] hT[u] - [y == o], 0 where y = -1 or i >= L
//   sse   += sum_o |rT[o]|^2;  dwacc[o, u] += rT[o] .* hT[u];  dhT[u] = sum_o W[o, u] rT[o]
//   daT[k] += dhT[t_k]                                (da = sum dh X^T, again an indexed add)
// Per sequence that is L Lp adds instead of the dense path's L^2 V multiply-adds for A X and again
// for dA; h, f and dh never leave L1.
namespace posattn_detail {
// kV != 0: V fixed at compile time (the o, u loops unroll and W stays in registers).
template <size_t kV>
double OnehotSse(const float* HWY_RESTRICT a, const float* HWY_RESTRICT w,
                 const int32_t* HWY_RESTRICT x_tok, const int32_t* HWY_RESTRICT y_tok,
                 float* HWY_RESTRICT da, float* HWY_RESTRICT dw, size_t p, size_t l,
                 size_t v_runtime, size_t i0, size_t i1) {
  const size_t v = kV ? kV : v_runtime;
  const bool grad = da != nullptr;
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const size_t N = hn::Lanes(d), Lp = (l + N - 1) / N * N;
  // Output rows [i0, i1) (posattn_onehot_sse_rows): only the column chunks [c0, c1) that hold
  // them run; rows of those chunks outside the range are masked like rows out of the loss. The
  // whole range (c0 = 0, c1 = Lp, no mask) is exactly the unrestricted kernel.
  const bool part = i0 > 0 || i1 < l;
  const size_t c0 = i0 / N * N, c1 = std::min(Lp, (i1 + N - 1) / N * N);
  const auto lo = hn::Set(di, int32_t(i0) - 1), hi = hn::Set(di, int32_t(i1));
  auto in_rows = [&](size_t c) {
    const auto i = hn::Iota(di, int32_t(c));
    return hn::RebindMask(d, hn::And(hn::Gt(i, lo), hn::Lt(i, hi)));
  };
  // S sequences at a time: the indexed adds of one sequence form store-to-load chains through
  // hT[t]; interleaving S independent sequences hides their latency.
  constexpr size_t S = 8;
  const size_t sv = v * Lp;  // one sequence's hT / rT / dhT
  float* at = Buffer(l * Lp + 3 * S * sv + l * Lp + v * v * N);
  float* hT = at + l * Lp;
  float* rT = hT + S * sv;
  float* dhT = rT + S * sv;
  float* daT = dhT + S * sv;
  float* dwacc = daT + l * Lp;
  // S x Lp targets, -1 past L (an int buffer of its own, aligned like the float ones).
  static thread_local std::vector<int32_t> yb_store;
  if (yb_store.size() < S * Lp + 16) yb_store.resize(S * Lp + 16);
  int32_t* yb = reinterpret_cast<int32_t*>((reinterpret_cast<uintptr_t>(yb_store.data()) + 63) &
                                           ~uintptr_t(63));
  for (size_t k = 0; k < l; ++k)
    for (size_t i = 0; i < Lp; ++i) at[k * Lp + i] = i < l ? a[i * l + k] : 0.f;
  for (size_t s = 0; s < S; ++s)
    for (size_t i = l; i < Lp; ++i) yb[s * Lp + i] = -1;
  if (grad) {
    std::fill(daT, daT + l * Lp, 0.f);
    std::fill(dwacc, dwacc + v * v * N, 0.f);
  }
  const auto zero = hn::Zero(d), one = hn::Set(d, 1.f);
  const auto none = hn::Set(di, -1);
  double sse = 0;
  auto dw00 = zero, dw01 = zero, dw02 = zero, dw03 = zero, dw10 = zero, dw11 = zero, dw12 = zero,
       dw13 = zero, dw20 = zero, dw21 = zero, dw22 = zero, dw23 = zero, dw30 = zero, dw31 = zero,
       dw32 = zero, dw33 = zero;  // V = 4 only
  for (size_t mu = 0; mu < p; mu += S) {
    const size_t g = std::min(S, p - mu);  // sequences in this group
    const int32_t* xt = x_tok + mu * l;    // g x L
    // Targets of the partial last chunk (if L is not a multiple of N) go through yb, -1 padded.
    const size_t lfull = l / N * N;
    if (lfull < l)
      for (size_t s = 0; s < g; ++s)
        std::copy(y_tok + (mu + s) * l + lfull, y_tok + (mu + s + 1) * l, yb + s * Lp + lfull);
    // hT_s = X_s^T A^T
    if (!part) {
      for (size_t i = 0; i < g * sv; i += N) hn::Store(zero, d, hT + i);
    } else {
      for (size_t su = 0; su < g * v; ++su)
        for (size_t c = c0; c < c1; c += N) hn::Store(zero, d, hT + su * Lp + c);
    }
    for (size_t k = 0; k < l; ++k)
      for (size_t c = c0; c < c1; c += N) {
        const auto ak = hn::Load(d, at + k * Lp + c);
        for (size_t s = 0; s < g; ++s) {
          float* dst = hT + s * sv + size_t(xt[s * l + k]) * Lp + c;
          hn::Store(hn::Add(hn::Load(d, dst), ak), d, dst);
        }
      }
    // rT_s = W hT_s - Y_s^T, masked outside the loss
    auto acc = zero;
    if constexpr (kV == 4) {
      // V = 4: h, r and dh of a chunk stay in registers, dw accumulates in dwOU.
      for (size_t s = 0; s < g; ++s)
        for (size_t c = c0; c < c1; c += N) {
          const float* hs = hT + s * sv + c;
          const auto h0 = hn::Load(d, hs), h1 = hn::Load(d, hs + Lp), h2 = hn::Load(d, hs + 2 * Lp),
                     h3 = hn::Load(d, hs + 3 * Lp);
          const auto yv =
              c < lfull ? hn::LoadU(di, y_tok + (mu + s) * l + c) : hn::Load(di, yb + s * Lp + c);
          auto in_loss = hn::RebindMask(d, hn::Gt(yv, none));
          if (part) in_loss = hn::And(in_loss, in_rows(c));
          auto row = [&](int32_t o) {
            const float* wo = w + 4 * o;
            auto r = hn::Mul(hn::Set(d, wo[0]), h0);
            r = hn::MulAdd(hn::Set(d, wo[1]), h1, r);
            r = hn::MulAdd(hn::Set(d, wo[2]), h2, r);
            r = hn::MulAdd(hn::Set(d, wo[3]), h3, r);
            r = hn::IfThenElse(hn::RebindMask(d, hn::Eq(yv, hn::Set(di, o))), hn::Sub(r, one), r);
            return hn::IfThenElseZero(in_loss, r);
          };
          const auto r0 = row(0), r1 = row(1), r2 = row(2), r3 = row(3);
          acc = hn::MulAdd(r0, r0, acc);
          acc = hn::MulAdd(r1, r1, acc);
          acc = hn::MulAdd(r2, r2, acc);
          acc = hn::MulAdd(r3, r3, acc);
          if (!grad) continue;
#define PL_DW_ROW(o, r)                   \
  dw##o##0 = hn::MulAdd(r, h0, dw##o##0); \
  dw##o##1 = hn::MulAdd(r, h1, dw##o##1); \
  dw##o##2 = hn::MulAdd(r, h2, dw##o##2); \
  dw##o##3 = hn::MulAdd(r, h3, dw##o##3)
          PL_DW_ROW(0, r0);
          PL_DW_ROW(1, r1);
          PL_DW_ROW(2, r2);
          PL_DW_ROW(3, r3);
#undef PL_DW_ROW
          float* dhs = dhT + s * sv + c;
          for (size_t u = 0; u < 4; ++u) {
            auto t = hn::Mul(hn::Set(d, w[u]), r0);
            t = hn::MulAdd(hn::Set(d, w[4 + u]), r1, t);
            t = hn::MulAdd(hn::Set(d, w[8 + u]), r2, t);
            t = hn::MulAdd(hn::Set(d, w[12 + u]), r3, t);
            hn::Store(t, d, dhs + u * Lp);
          }
        }
      sse += double(hn::GetLane(hn::SumOfLanes(d, acc)));
      if (!grad) continue;
    } else {
      for (size_t s = 0; s < g; ++s)
        for (size_t c = c0; c < c1; c += N) {
          const auto yv =
              c < lfull ? hn::LoadU(di, y_tok + (mu + s) * l + c) : hn::Load(di, yb + s * Lp + c);
          auto in_loss = hn::RebindMask(d, hn::Gt(yv, none));
          if (part) in_loss = hn::And(in_loss, in_rows(c));
          const float* hs = hT + s * sv + c;
          for (size_t o = 0; o < v; ++o) {
            auto r = zero;
            for (size_t u = 0; u < v; ++u)
              r = hn::MulAdd(hn::Set(d, w[o * v + u]), hn::Load(d, hs + u * Lp), r);
            r = hn::IfThenElse(hn::RebindMask(d, hn::Eq(yv, hn::Set(di, int32_t(o)))),
                               hn::Sub(r, one), r);
            r = hn::IfThenElseZero(in_loss, r);
            acc = hn::MulAdd(r, r, acc);
            hn::Store(r, d, rT + s * sv + o * Lp + c);
          }
        }
      sse += double(hn::GetLane(hn::SumOfLanes(d, acc)));
      if (!grad) continue;
      // dw partials += sum_s rT_s[o] .* hT_s[u];  dhT_s = W^T rT_s
      for (size_t c = c0; c < c1; c += N)
        for (size_t o = 0; o < v; ++o)
          for (size_t u = 0; u < v; ++u) {
            float* q = dwacc + (o * v + u) * N;
            auto t = hn::Load(d, q);
            for (size_t s = 0; s < g; ++s)
              t = hn::MulAdd(hn::Load(d, rT + s * sv + o * Lp + c),
                             hn::Load(d, hT + s * sv + u * Lp + c), t);
            hn::Store(t, d, q);
          }
      for (size_t s = 0; s < g; ++s)
        for (size_t c = c0; c < c1; c += N)
          for (size_t u = 0; u < v; ++u) {
            auto t = zero;
            for (size_t o = 0; o < v; ++o)
              t = hn::MulAdd(hn::Set(d, w[o * v + u]), hn::Load(d, rT + s * sv + o * Lp + c), t);
            hn::Store(t, d, dhT + s * sv + u * Lp + c);
          }
    }
    // daT[k] += sum_s dhT_s[t_{s,k}]
    for (size_t k = 0; k < l; ++k)
      for (size_t c = c0; c < c1; c += N) {
        auto t = zero;
        for (size_t s = 0; s < g; ++s)
          t = hn::Add(t, hn::Load(d, dhT + s * sv + size_t(xt[s * l + k]) * Lp + c));
        float* dst = daT + k * Lp + c;
        hn::Store(hn::Add(hn::Load(d, dst), t), d, dst);
      }
  }
  if (grad) {
    if constexpr (kV == 4) {
#define PL_DW_STORE(o)                             \
  hn::Store(dw##o##0, d, dwacc + (4 * o + 0) * N); \
  hn::Store(dw##o##1, d, dwacc + (4 * o + 1) * N); \
  hn::Store(dw##o##2, d, dwacc + (4 * o + 2) * N); \
  hn::Store(dw##o##3, d, dwacc + (4 * o + 3) * N);
      PL_DW_STORE(0) PL_DW_STORE(1) PL_DW_STORE(2) PL_DW_STORE(3)
#undef PL_DW_STORE
    }
    // d sse = 2 r: the factor 2 is applied once here (exact in float).
    for (size_t i = i0; i < i1; ++i)
      for (size_t k = 0; k < l; ++k) da[i * l + k] = 2.f * daT[k * Lp + i];
    for (size_t j = 0; j < v * v; ++j) {
      double t = 0;
      for (size_t q = 0; q < N; ++q) t += dwacc[j * N + q];
      dw[j] = float(2 * t);
    }
  }
  return sse;
}
}  // namespace posattn_detail

double PosattnOnehotSseRows(const float* a, const float* w, const int32_t* x_tok,
                            const int32_t* y_tok, float* da, float* dw, size_t p, size_t l,
                            size_t v, size_t i0, size_t i1) {
  i1 = std::min(i1, l);
  i0 = std::min(i0, i1);
  if (l == 0 || v == 0) return 0.0;
  if (i0 == i1) {  // no rows: sse 0, dw 0, da untouched
    if (da) std::fill(dw, dw + v * v, 0.f);
    return 0.0;
  }
  if (v == 4) return posattn_detail::OnehotSse<4>(a, w, x_tok, y_tok, da, dw, p, l, v, i0, i1);
  return posattn_detail::OnehotSse<0>(a, w, x_tok, y_tok, da, dw, p, l, v, i0, i1);
}

double PosattnOnehotSse(const float* a, const float* w, const int32_t* x_tok, const int32_t* y_tok,
                        float* da, float* dw, size_t p, size_t l, size_t v) {
  return PosattnOnehotSseRows(a, w, x_tok, y_tok, da, dw, p, l, v, 0, l);
}

// sse from the counts (kernels.def). With the V^2-major layout every pass is a long vector loop
// over one L^2 block, no per-row horizontal sums:
//   S = sum_j M_j c_j,  T = sum_j W_j d_j                   (row combinations over L^2; j = (u,
//   u')) R_j = <Q, c_j>,     E_j = <A, d_j>                      (dots over L^2; gradients only) Q
//   = sum_{i in loss} A_i^T A_i,  A S                     (row combinations over rows of L) sse =
//   <Q, S> - 2 <A, T> + n_loss
namespace posattn_detail {
// y[0, n) += alpha x[0, n), double.
HWY_INLINE void AxpyD(double* HWY_RESTRICT y, double alpha, const double* HWY_RESTRICT x,
                      size_t n) {
  const hn::ScalableTag<double> d;
  const size_t N = hn::Lanes(d);
  const auto va = hn::Set(d, alpha);
  size_t i = 0;
  for (; i + N <= n; i += N)
    hn::StoreU(hn::MulAdd(va, hn::LoadU(d, x + i), hn::LoadU(d, y + i)), d, y + i);
  for (; i < n; ++i) y[i] += alpha * x[i];
}
// out[0, n) = sum_{t < rows} coef[t * cs] * x[t * n + (0, n)], double: up to four vectors of out
// held in registers across all rows (no store-to-load chains through out).
HWY_INLINE void CombineRowsD(double* HWY_RESTRICT out, const double* HWY_RESTRICT coef, size_t cs,
                             const double* HWY_RESTRICT x, size_t rows, size_t n) {
  const hn::ScalableTag<double> d;
  const size_t N = hn::Lanes(d);
  size_t c = 0;
  for (; c + 4 * N <= n; c += 4 * N) {
    auto a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0;
    for (size_t t = 0; t < rows; ++t) {
      const auto f = hn::Set(d, coef[t * cs]);
      const double* xt = x + t * n + c;
      a0 = hn::MulAdd(f, hn::LoadU(d, xt), a0);
      a1 = hn::MulAdd(f, hn::LoadU(d, xt + N), a1);
      a2 = hn::MulAdd(f, hn::LoadU(d, xt + 2 * N), a2);
      a3 = hn::MulAdd(f, hn::LoadU(d, xt + 3 * N), a3);
    }
    hn::StoreU(a0, d, out + c);
    hn::StoreU(a1, d, out + c + N);
    hn::StoreU(a2, d, out + c + 2 * N);
    hn::StoreU(a3, d, out + c + 3 * N);
  }
  // One vector left per chunk: four chains over t mod 4 (one chain would wait on the FMA latency).
  for (; c + N <= n; c += N) {
    auto a0 = hn::Zero(d), a1 = a0, a2 = a0, a3 = a0;
    size_t t = 0;
    for (; t + 4 <= rows; t += 4) {
      const double* xt = x + t * n + c;
      a0 = hn::MulAdd(hn::Set(d, coef[t * cs]), hn::LoadU(d, xt), a0);
      a1 = hn::MulAdd(hn::Set(d, coef[(t + 1) * cs]), hn::LoadU(d, xt + n), a1);
      a2 = hn::MulAdd(hn::Set(d, coef[(t + 2) * cs]), hn::LoadU(d, xt + 2 * n), a2);
      a3 = hn::MulAdd(hn::Set(d, coef[(t + 3) * cs]), hn::LoadU(d, xt + 3 * n), a3);
    }
    for (; t < rows; ++t)
      a0 = hn::MulAdd(hn::Set(d, coef[t * cs]), hn::LoadU(d, x + t * n + c), a0);
    hn::StoreU(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)), d, out + c);
  }
  for (; c < n; ++c) {
    double a0 = 0;
    for (size_t t = 0; t < rows; ++t) a0 += coef[t * cs] * x[t * n + c];
    out[c] = a0;
  }
}
// <x, y> over [0, n), double; two accumulators.
HWY_INLINE double DotD(const double* HWY_RESTRICT x, const double* HWY_RESTRICT y, size_t n) {
  const hn::ScalableTag<double> d;
  const size_t N = hn::Lanes(d);
  auto s0 = hn::Zero(d), s1 = hn::Zero(d);
  size_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    s0 = hn::MulAdd(hn::LoadU(d, x + i), hn::LoadU(d, y + i), s0);
    s1 = hn::MulAdd(hn::LoadU(d, x + i + N), hn::LoadU(d, y + i + N), s1);
  }
  for (; i + N <= n; i += N) s0 = hn::MulAdd(hn::LoadU(d, x + i), hn::LoadU(d, y + i), s0);
  double t = hn::GetLane(hn::SumOfLanes(d, hn::Add(s0, s1)));
  for (; i < n; ++i) t += x[i] * y[i];
  return t;
}
}  // namespace posattn_detail

// Counts (kernels.def) with vector adds: per sequence the indicator rows ind[u][k'] = [x_k' = u]
// (V x L), then row k of block (x_k, u) of c gets ind[u], and row i of block (y_i, u) of d too.
// V L^2 adds per sequence in vectors of L instead of L^2 scattered increments; for V > 8 that is
// more work than the scatter, which is used then.
void PosattnOnehotStats(const int32_t* x_tok, const int32_t* y_tok, double* c, double* d, size_t p,
                        size_t l, size_t v) {
  using posattn_detail::AxpyD;
  const size_t ll = l * l;
  if (v > 8) return pl::scalar::PosattnOnehotStats(x_tok, y_tok, c, d, p, l, v);
  static thread_local std::vector<double> ind;
  ind.assign(v * l, 0.0);
  for (size_t mu = 0; mu < p; ++mu) {
    const int32_t* xt = x_tok + mu * l;
    const int32_t* yt = y_tok + mu * l;
    for (size_t k = 0; k < l; ++k) ind[size_t(xt[k]) * l + k] = 1.0;
    for (size_t k = 0; k < l; ++k) {
      double* ck = c + size_t(xt[k]) * v * ll + k * l;
      for (size_t u = 0; u < v; ++u) AxpyD(ck + u * ll, 1.0, ind.data() + u * l, l);
    }
    for (size_t i = 0; i < l; ++i) {
      if (yt[i] < 0) continue;
      double* di = d + size_t(yt[i]) * v * ll + i * l;
      for (size_t u = 0; u < v; ++u) AxpyD(di + u * ll, 1.0, ind.data() + u * l, l);
    }
    for (size_t k = 0; k < l; ++k) ind[size_t(xt[k]) * l + k] = 0.0;
  }
}

double PosattnGramSse(const float* a, const float* w, const double* c, const double* d, float* da,
                      float* dw, size_t l, size_t v) {
  using posattn_detail::AxpyD;
  using posattn_detail::CombineRowsD;
  using posattn_detail::DotD;
  const size_t vv = v * v, ll = l * l;
  if (ll == 0 || vv == 0) return 0.0;
  // ad | s | t | q | as : L^2 each;  wd | m | r | e : V^2 each;  row: L
  static thread_local std::vector<double> buf;
  if (buf.size() < 5 * ll + 4 * vv + l) buf.resize(5 * ll + 4 * vv + l);  // every part is written
  double* ad = buf.data();
  double* s = ad + ll;
  double* t = s + ll;
  double* q = t + ll;
  double* as = q + ll;
  double* wd = as + ll;
  double* m = wd + vv;
  double* r = m + vv;
  double* e = r + vv;
  double* row = e + vv;
  for (size_t i = 0; i < ll; ++i) ad[i] = a[i];
  for (size_t j = 0; j < vv; ++j) wd[j] = w[j];
  double n_loss = 0;
  std::fill(row, row + l, 0.0);
  for (size_t j = 0; j < vv; ++j)
    for (size_t i = 0; i < l; ++i) row[i] += d[j * ll + i * l];
  for (size_t i = 0; i < l; ++i) n_loss += row[i];
  // M = W^T W (row u of M combines the rows of W with weights W[:, u])
  for (size_t u = 0; u < v; ++u) CombineRowsD(m + u * v, wd + u, v, wd, v, v);
  // Q = Am^T Am with Am = A with the rows outside the loss zeroed (am reuses the `as` buffer)
  double* am = as;
  for (size_t i = 0; i < l; ++i)
    for (size_t k = 0; k < l; ++k) am[i * l + k] = row[i] > 0 ? ad[i * l + k] : 0.0;
  for (size_t k = 0; k < l; ++k) CombineRowsD(q + k * l, am + k, l, am, l, l);
  CombineRowsD(s, m, 1, c, vv, ll);
  CombineRowsD(t, wd, 1, d, vv, ll);
  const double quad = DotD(q, s, ll), lin = DotD(ad, t, ll);
  if (da) {
    for (size_t j = 0; j < vv; ++j) {
      r[j] = DotD(q, c + j * ll, ll);
      e[j] = DotD(ad, d + j * ll, ll);
    }
    // A S on loss rows, 0 elsewhere (overwrites am)
    for (size_t i = 0; i < l; ++i) {
      if (row[i] > 0)
        CombineRowsD(as + i * l, ad + i * l, 1, s, l, l);
      else
        std::fill(as + i * l, as + (i + 1) * l, 0.0);
    }
    for (size_t i = 0; i < ll; ++i) da[i] = static_cast<float>(2 * (as[i] - t[i]));
    for (size_t o = 0; o < v; ++o)
      for (size_t u = 0; u < v; ++u) {
        double wr = 0;
        for (size_t u2 = 0; u2 < v; ++u2) wr += wd[o * v + u2] * r[u2 * v + u];
        dw[o * v + u] = static_cast<float>(2 * (wr - e[o * v + u]));
      }
  }
  return quad - 2 * lin + n_loss;
}

}  // namespace HWY_NAMESPACE
}  // namespace pl
HWY_AFTER_NAMESPACE();
