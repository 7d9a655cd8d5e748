// SPDX-License-Identifier: Apache-2.0
// attention.hwy.<isa>, attention_bwd.hwy.<isa>: one head, fused as GEMMs (gemm-inl.h) around a
// vectorised row softmax / softmax backward, all targets.
// foreach_target.h must follow HWY_TARGET_INCLUDE and precede the other includes.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/attention/attention_hwy.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstring>
#include <limits>

#include "kernels/exp/exp-inl.h"
#include "kernels/gemm/gemm-inl.h"
// clang-format on

HWY_BEFORE_NAMESPACE();
namespace pl {
namespace HWY_NAMESPACE {
namespace attention_detail {
namespace hn = hwy::HWY_NAMESPACE;
using gemm_detail::LoadPart;  // partial vectors that never touch memory past the end
using gemm_detail::StorePart;

// x[0:len] = softmax(x[0:len]) (the scale is already in x); stable: subtracts the row max.
inline void SoftmaxRow(float* HWY_RESTRICT x, size_t len) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const auto ninf = hn::Set(d, -std::numeric_limits<float>::infinity());
  auto vmax = ninf;
  size_t i = 0;
  for (; i + N <= len; i += N) vmax = hn::Max(vmax, hn::LoadU(d, x + i));
  if (i < len) {
    const auto m = hn::FirstN(d, len - i);
    vmax = hn::Max(vmax, hn::IfThenElse(m, LoadPart(d, x + i, len - i), ninf));
  }
  const auto mx = hn::MaxOfLanes(d, vmax);
  auto vsum = hn::Zero(d);
  for (i = 0; i + N <= len; i += N) {
    const auto e = exp_detail::ExpVec(d, hn::Sub(hn::LoadU(d, x + i), mx));
    hn::StoreU(e, d, x + i);
    vsum = hn::Add(vsum, e);
  }
  if (i < len) {
    const auto m = hn::FirstN(d, len - i);
    const auto t = hn::Sub(LoadPart(d, x + i, len - i), mx);
    const auto e = hn::IfThenElseZero(m, exp_detail::ExpVec(d, t));
    StorePart(d, e, x + i, len - i);
    vsum = hn::Add(vsum, e);
  }
  const auto inv = hn::Div(hn::Set(d, 1.f), hn::SumOfLanes(d, vsum));
  for (i = 0; i + N <= len; i += N) hn::StoreU(hn::Mul(hn::LoadU(d, x + i), inv), d, x + i);
  if (i < len) {
    StorePart(d, hn::Mul(LoadPart(d, x + i, len - i), inv), x + i, len - i);
  }
}

// ds[0:len] = scale * p .* (ds - <p, ds>) (softmax backward; ds holds dP on entry).
inline void SoftmaxBwdRow(const float* HWY_RESTRICT p, float* HWY_RESTRICT ds, size_t len,
                          float scale) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  auto vdot = hn::Zero(d);
  size_t i = 0;
  for (; i + N <= len; i += N) vdot = hn::MulAdd(hn::LoadU(d, p + i), hn::LoadU(d, ds + i), vdot);
  if (i < len) {
    vdot = hn::MulAdd(LoadPart(d, p + i, len - i), LoadPart(d, ds + i, len - i), vdot);
  }
  const auto dot = hn::SumOfLanes(d, vdot);
  const auto vs = hn::Set(d, scale);
  for (i = 0; i + N <= len; i += N) {
    const auto pv = hn::Mul(hn::LoadU(d, p + i), vs);
    hn::StoreU(hn::Mul(pv, hn::Sub(hn::LoadU(d, ds + i), dot)), d, ds + i);
  }
  if (i < len) {
    const auto pv = hn::Mul(LoadPart(d, p + i, len - i), vs);
    StorePart(d, hn::Mul(pv, hn::Sub(LoadPart(d, ds + i, len - i), dot)), ds + i, len - i);
  }
}

}  // namespace attention_detail

// q, k: n x d_k; v, o: n x d_v; p: n x n.
void Attention(const float* q, size_t ldq, const float* k, size_t ldk, const float* v, size_t ldv,
               float* o, size_t ldo, float* p, size_t n, size_t d_k, size_t d_v, float scale,
               int causal, int linear) {
  if (n == 0) return;
  // S = scale Q K^T  (n x n), straight into p
  gemm_detail::Gemm(false, true, n, n, d_k, scale, q, ldq, k, ldk, 0.f, p, n);
  for (size_t r = 0; r < n; ++r) {
    const size_t len = causal ? r + 1 : n;
    if (!linear) attention_detail::SoftmaxRow(p + r * n, len);
    if (len < n) std::memset(p + r * n + len, 0, (n - len) * sizeof(float));
  }
  // O = P V  (n x d_v)
  gemm_detail::Gemm(false, false, n, d_v, n, 1.f, p, n, v, ldv, 0.f, o, ldo);
}

void AttentionBwd(const float* q, size_t ldq, const float* k, size_t ldk, const float* v,
                  size_t ldv, const float* p, const float* d_o, size_t lddo, float* dq, size_t lddq,
                  float* dk, size_t lddk, float* dv, size_t lddv, float* scratch, size_t n,
                  size_t d_k, size_t d_v, float scale, int causal, int linear) {
  if (n == 0) return;
  // dV = P^T dO  (n x d_v)
  gemm_detail::Gemm(true, false, n, d_v, n, 1.f, p, n, d_o, lddo, 0.f, dv, lddv);
  // dP = dO V^T  (n x n), in scratch
  float* ds = scratch;
  gemm_detail::Gemm(false, true, n, n, d_v, 1.f, d_o, lddo, v, ldv, 0.f, ds, n);
  // dS = scale * softmax'(dP) (or scale * dP), zero where masked
  for (size_t r = 0; r < n; ++r) {
    const size_t len = causal ? r + 1 : n;
    float* row = ds + r * n;
    if (!linear) {
      attention_detail::SoftmaxBwdRow(p + r * n, row, len, scale);
    } else {
      for (size_t c = 0; c < len; ++c) row[c] *= scale;
    }
    if (len < n) std::memset(row + len, 0, (n - len) * sizeof(float));
  }
  // dQ = dS K  (n x d_k);  dK = dS^T Q  (n x d_k)
  gemm_detail::Gemm(false, false, n, d_k, n, 1.f, ds, n, k, ldk, 0.f, dq, lddq);
  gemm_detail::Gemm(true, false, n, d_k, n, 1.f, ds, n, q, ldq, 0.f, dk, lddk);
}

}  // namespace HWY_NAMESPACE
}  // namespace pl
HWY_AFTER_NAMESPACE();
