// SPDX-License-Identifier: Apache-2.0
// layernorm.hwy.<isa>, layernorm_bwd.hwy.<isa>: every target from one source.
//
// Accuracy (budget: 1e-6 relative per element). Row sums (mean, variance, and the backward's
// mean(g), mean(g xhat)) are accumulated in double, the variance in a second pass over
// x - mean; x - mean is formed against the mean as a float pair (mean_hi + mean_lo), so rows with
// |mean| >> std (inputs in [90, 100]) keep full relative accuracy. dgamma and dbeta are summed over
// all rows in double per column block, then added once. Rows of 1, 2 or 4 full vectors (the
// model's d_model 16-64) are held in registers and processed in blocks of 2 or 4 rows, each step
// on every row of the block in turn, with the operations and their order of the general loops.
// On AVX2 and AVX-512 such rows go first in groups of blocks of 4 or 8 rows (one per double lane):
// each pass runs over all rows of the group, a block's row sums are finished in one vector
// (WideTotals, the same additions in the same order as WideTotal per row) and so are the division
// by d, the float pair, the square root and the reciprocal (correctly rounded, so per lane the
// bits of the scalar operations); x - mean (the backward: xhat and g) waits for the last pass in
// a stack buffer. Every output keeps the bits of the row-at-a-time code.
// foreach_target.h must follow HWY_TARGET_INCLUDE and precede the other includes.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/layernorm/layernorm_hwy.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/cache_control.h>
// clang-format on

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "phaselab/hwy_part-inl.h"
#include "phaselab/hwy_wide_sum-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pl {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

namespace {

// Rows of exactly NV full vectors (d = NV lanes-widths, e.g. d = 32 or 64 on AVX-512): the same
// operations in the same order as the general loops below (so the same bits), with the rows held
// in registers and every loop unrolled; the model's d_model 16-64 rows are this case. KR rows at a
// time, each step on every row in turn: one row is a long chain of dependent operations (two
// horizontal sums, a square root, a division), and the rows' chains then overlap.
#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
constexpr size_t kSmallMaxAcc = HWY_MAX_BYTES >= 64 ? 16 : 8;  // double accumulators in registers

// Rows per block of the forward pass for rows of NV vectors.
template <size_t NV>
constexpr size_t FwdRows() {
  return NV <= 2 ? 4 : 2;
}

// KR rows at x, y (row stride NV lanes-widths); gam, bet: gamma and beta.
template <size_t NV, size_t KR, class DF, class V = hn::Vec<DF>>
HWY_INLINE void LayernormRowsSmall(DF df, const float* x, const V* gam, const V* bet, float* y,
                                   float* mean, float* rstd, float eps) {
  const hn::Repartition<double, DF> dd;
  using VD = hn::Vec<decltype(dd)>;
  const size_t N = hn::Lanes(df), d = NV * N;
  V xv[KR][NV];
  VD sum_lo[KR], sum_hi[KR];
  for (size_t k = 0; k < KR; ++k) {
    sum_lo[k] = sum_hi[k] = hn::Zero(dd);
    for (size_t v = 0; v < NV; ++v) {
      xv[k][v] = hn::LoadU(df, x + k * d + v * N);
      WideAdd(df, xv[k][v], sum_lo[k], sum_hi[k]);
    }
  }
  V c[KR][NV];
  VD ss_lo[KR], ss_hi[KR];
  for (size_t k = 0; k < KR; ++k) {
    const double m = WideTotal(dd, sum_lo[k], sum_hi[k]) / double(d);
    const float m_hi_f = static_cast<float>(m);
    const V m_hi = hn::Set(df, m_hi_f), m_lo = hn::Set(df, static_cast<float>(m - m_hi_f));
    mean[k] = m_hi_f;
    ss_lo[k] = ss_hi[k] = hn::Zero(dd);
    for (size_t v = 0; v < NV; ++v) {
      c[k][v] = hn::Sub(hn::Sub(xv[k][v], m_hi), m_lo);
      WideAddProduct(df, c[k][v], c[k][v], ss_lo[k], ss_hi[k]);
    }
  }
  for (size_t k = 0; k < KR; ++k) {
    const double rs = 1 / std::sqrt(WideTotal(dd, ss_lo[k], ss_hi[k]) / double(d) + double(eps));
    rstd[k] = static_cast<float>(rs);
  }
  for (size_t k = 0; k < KR; ++k) {
    const V vrs = hn::Set(df, rstd[k]);
    for (size_t v = 0; v < NV; ++v)
      hn::StoreU(hn::MulAdd(hn::Mul(c[k][v], vrs), gam[v], bet[v]), df, y + k * d + v * N);
  }
}

#if PHASELAB_HWY_WIDE_TOTALS
// Rows per group of LayernormRowsWide: its passes run over every block of kWideTotalRows rows of
// the group before the next pass, so the blocks' chains (sums, division, square root) overlap.
constexpr size_t kWideGroup = 2 * kWideTotalRows;

// KB blocks of kWideTotalRows rows (one per double lane) at x, y: LayernormRowsSmall's
// operations, with each row's double tail (the horizontal sum, / d, the float pair, + eps, sqrt,
// 1 / .) done for a block's rows in one vector each (WideTotals; IEEE division and sqrt are
// correctly rounded, so lane k has the bits of the scalar operation on row k). Three passes over
// the group's rows (mean, variance, output), reloading them.
template <size_t NV, class DF, class V = hn::Vec<DF>>
HWY_INLINE void LayernormRowsWide(DF df, const float* x, const V* gam, const V* bet, float* y,
                                  float* mean, float* rstd, float eps, size_t KB) {
  const hn::Repartition<double, DF> dd;
  const hn::Rebind<float, decltype(dd)> dr;  // one float per row
  const hn::Half<DF> dh;
  using VD = hn::Vec<decltype(dd)>;
  constexpr size_t KR = kWideTotalRows;
  const size_t N = hn::Lanes(df), d = NV * N;
  const VD vd = hn::Set(dd, double(d));
  HWY_ALIGN float mh[kWideGroup], ml[kWideGroup], rs[kWideGroup];
  HWY_ALIGN float cs[kWideGroup * 4 * HWY_MAX_BYTES / sizeof(float)];  // x - mean of the rows
  for (size_t b = 0; b < KB; ++b) {
    const float* xb = x + b * KR * d;
    VD s[KR];
    for (size_t k = 0; k < KR; ++k) {
      VD lo = hn::Zero(dd), hi = hn::Zero(dd);
      for (size_t v = 0; v < NV; ++v) {
        // WideAdd of the vector at p, each half loaded and widened (no extract).
        const float* p = xb + k * d + v * N;
        lo = hn::Add(lo, hn::PromoteTo(dd, hn::LoadU(dh, p)));
        hi = hn::Add(hi, hn::PromoteTo(dd, hn::LoadU(dh, p + N / 2)));
      }
      s[k] = hn::Add(lo, hi);
    }
    const VD m = hn::Div(WideTotals(dd, s), vd);
    const auto m_hi = hn::DemoteTo(dr, m);
    hn::Store(m_hi, dr, mh + b * KR);
    hn::Store(hn::DemoteTo(dr, hn::Sub(m, hn::PromoteTo(dd, m_hi))), dr, ml + b * KR);
    hn::StoreU(m_hi, dr, mean + b * KR);
  }
  auto centered = [&](size_t i, size_t v) HWY_ATTR {
    return hn::Sub(hn::Sub(hn::LoadU(df, x + i * d + v * N), hn::Set(df, mh[i])),
                   hn::Set(df, ml[i]));
  };
  for (size_t b = 0; b < KB; ++b) {
    VD s[KR];
    for (size_t k = 0; k < KR; ++k) {
      VD lo = hn::Zero(dd), hi = hn::Zero(dd);
      // The same row of the next group, for rows streamed from beyond the caches (prefetches
      // past the end of x do not fault).
      for (size_t j = 0; j < d; j += 64 / sizeof(float))
        hwy::Prefetch(x + (KB * KR + b * KR + k) * d + j);
      for (size_t v = 0; v < NV; ++v) {
        const V c = centered(b * KR + k, v);
        hn::Store(c, df, cs + (b * KR + k) * d + v * N);
        WideAddProduct(df, c, c, lo, hi);
      }
      s[k] = hn::Add(lo, hi);
    }
    const VD var = hn::Add(hn::Div(WideTotals(dd, s), vd), hn::Set(dd, double(eps)));
    if constexpr (KR == 8) {
      // Square root and division on each 256-bit half: the same per-lane results, with a
      // shorter latency than at 512 bits.
      const hn::Half<decltype(dd)> dq;
      const hn::Rebind<float, decltype(dq)> dqr;
      const auto rs_lo =
          hn::DemoteTo(dqr, hn::Div(hn::Set(dq, 1.0), hn::Sqrt(hn::LowerHalf(dq, var))));
      const auto rs_hi =
          hn::DemoteTo(dqr, hn::Div(hn::Set(dq, 1.0), hn::Sqrt(hn::UpperHalf(dq, var))));
      hn::Store(rs_lo, dqr, rs + b * KR);
      hn::Store(rs_hi, dqr, rs + b * KR + KR / 2);
      hn::StoreU(rs_lo, dqr, rstd + b * KR);
      hn::StoreU(rs_hi, dqr, rstd + b * KR + KR / 2);
    } else {
      const auto vrs = hn::DemoteTo(dr, hn::Div(hn::Set(dd, 1.0), hn::Sqrt(var)));
      hn::Store(vrs, dr, rs + b * KR);
      hn::StoreU(vrs, dr, rstd + b * KR);
    }
  }
  for (size_t i = 0; i < KB * KR; ++i)
    for (size_t v = 0; v < NV; ++v)
      hn::StoreU(
          hn::MulAdd(hn::Mul(hn::Load(df, cs + i * d + v * N), hn::Set(df, rs[i])), gam[v], bet[v]),
          df, y + i * d + v * N);
}
#endif

template <size_t NV, class DF>
HWY_INLINE void LayernormSmall(DF df, const float* x, const float* gamma, const float* beta,
                               float* y, float* mean, float* rstd, size_t rows, float eps) {
  using V = hn::Vec<DF>;
  constexpr size_t KR = FwdRows<NV>();
  const size_t N = hn::Lanes(df), d = NV * N;
  V gam[NV], bet[NV];
  for (size_t v = 0; v < NV; ++v) {
    gam[v] = hn::LoadU(df, gamma + v * N);
    bet[v] = hn::LoadU(df, beta + v * N);
  }
  size_t r = 0;
#if PHASELAB_HWY_WIDE_TOTALS
  while (r + kWideTotalRows <= rows) {
    const size_t n = std::min(kWideGroup, (rows - r) / kWideTotalRows * kWideTotalRows);
    LayernormRowsWide<NV>(df, x + r * d, gam, bet, y + r * d, mean + r, rstd + r, eps,
                          n / kWideTotalRows);
    r += n;
  }
#endif
  for (; r + KR <= rows; r += KR)
    LayernormRowsSmall<NV, KR>(df, x + r * d, gam, bet, y + r * d, mean + r, rstd + r, eps);
  for (; r < rows; ++r)
    LayernormRowsSmall<NV, 1>(df, x + r * d, gam, bet, y + r * d, mean + r, rstd + r, eps);
}

// Rows per block of the backward pass.
template <size_t NV>
constexpr size_t BwdRows() {
  return NV <= 2 ? 2 : 1;
}

// The backward of LayernormSmall for KR rows at dy, x, dx: dgamma, dbeta summed over rows, in
// row order, in double registers (ag_*, ab_*; the general path keeps them in a stack buffer,
// loaded and stored once per row).
template <size_t NV, size_t KR, class DF, class V = hn::Vec<DF>,
          class VD = hn::Vec<hn::Repartition<double, DF>>>
HWY_INLINE void LayernormBwdRowsSmall(DF df, const float* dy, const float* x, const V* gam,
                                      const float* mean, const float* rstd, float* dx, VD* ag_lo,
                                      VD* ag_hi, VD* ab_lo, VD* ab_hi) {
  const hn::Repartition<double, DF> dd;
  const size_t N = hn::Lanes(df), d = NV * N;
  V xhat[KR][NV], g[KR][NV];
  VD sg_lo[KR], sg_hi[KR], sgx_lo[KR], sgx_hi[KR];
  for (size_t k = 0; k < KR; ++k) {
    const V vm = hn::Set(df, mean[k]), vrs = hn::Set(df, rstd[k]);
    sg_lo[k] = sg_hi[k] = sgx_lo[k] = sgx_hi[k] = hn::Zero(dd);
    for (size_t v = 0; v < NV; ++v) {
      const V dyv = hn::LoadU(df, dy + k * d + v * N);
      xhat[k][v] = hn::Mul(hn::Sub(hn::LoadU(df, x + k * d + v * N), vm), vrs);
      g[k][v] = hn::Mul(dyv, gam[v]);
      WideAdd(df, g[k][v], sg_lo[k], sg_hi[k]);
      WideAddProduct(df, g[k][v], xhat[k][v], sgx_lo[k], sgx_hi[k]);
      WideAddProduct(df, dyv, xhat[k][v], ag_lo[v], ag_hi[v]);
      WideAdd(df, dyv, ab_lo[v], ab_hi[v]);
    }
  }
  float mg[KR], mgx[KR];
  for (size_t k = 0; k < KR; ++k) {
    mg[k] = static_cast<float>(WideTotal(dd, sg_lo[k], sg_hi[k]) / double(d));
    mgx[k] = static_cast<float>(WideTotal(dd, sgx_lo[k], sgx_hi[k]) / double(d));
  }
  for (size_t k = 0; k < KR; ++k) {
    const V vrs = hn::Set(df, rstd[k]), vmg = hn::Set(df, mg[k]), vmgx = hn::Set(df, mgx[k]);
    for (size_t v = 0; v < NV; ++v) {
      float* p = dx + k * d + v * N;
      const V inner = hn::Sub(hn::NegMulAdd(xhat[k][v], vmgx, g[k][v]), vmg);
      hn::StoreU(hn::MulAdd(vrs, inner, hn::LoadU(df, p)), df, p);
    }
  }
}

#if PHASELAB_HWY_WIDE_TOTALS
// The backward of LayernormRowsWide: KB blocks of kWideTotalRows rows at dy, x, dx with
// LayernormBwdRowsSmall's operations, each block's mean(g) and mean(g xhat) (sum, / d, to
// float) for all its rows in one vector each. Two passes over the group's rows (the sums, in row
// order, with dgamma and dbeta; then dx), reloading them.
template <size_t NV, class DF, class V = hn::Vec<DF>,
          class VD = hn::Vec<hn::Repartition<double, DF>>>
HWY_INLINE void LayernormBwdRowsWide(DF df, const float* dy, const float* x, const V* gam,
                                     const float* mean, const float* rstd, float* dx, VD* ag_lo,
                                     VD* ag_hi, VD* ab_lo, VD* ab_hi, size_t KB) {
  const hn::Repartition<double, DF> dd;
  const hn::Rebind<float, decltype(dd)> dr;  // one float per row
  const hn::Half<DF> dh;
  constexpr size_t KR = kWideTotalRows;
  const size_t N = hn::Lanes(df), d = NV * N;
  const VD vd = hn::Set(dd, double(d));
  HWY_ALIGN float mg[kWideGroup], mgx[kWideGroup];
  HWY_ALIGN float xs[kWideGroup * 4 * HWY_MAX_BYTES / sizeof(float)];  // xhat of the rows
  HWY_ALIGN float gs[kWideGroup * 4 * HWY_MAX_BYTES / sizeof(float)];  // g = dy gamma
  auto xhat_of = [&](size_t i, size_t v) HWY_ATTR {
    return hn::Mul(hn::Sub(hn::LoadU(df, x + i * d + v * N), hn::Set(df, mean[i])),
                   hn::Set(df, rstd[i]));
  };
  for (size_t b = 0; b < KB; ++b) {
    VD sg[KR], sgx[KR];
    for (size_t k = 0; k < KR; ++k) {
      const size_t i = b * KR + k;
      VD sg_lo = hn::Zero(dd), sg_hi = hn::Zero(dd), sgx_lo = hn::Zero(dd), sgx_hi = hn::Zero(dd);
      for (size_t v = 0; v < NV; ++v) {
        const float* pdy = dy + i * d + v * N;
        const V dyv = hn::LoadU(df, pdy);
        const V xhat = xhat_of(i, v);
        const V g = hn::Mul(dyv, gam[v]);
        hn::Store(xhat, df, xs + i * d + v * N);
        hn::Store(g, df, gs + i * d + v * N);
        WideAdd(df, g, sg_lo, sg_hi);
        WideAddProduct(df, g, xhat, sgx_lo, sgx_hi);
        // WideAddProduct(dyv, xhat) and WideAdd(dyv) with dy's halves loaded and widened.
        const VD dy_lo = hn::PromoteTo(dd, hn::LoadU(dh, pdy));
        const VD dy_hi = hn::PromoteTo(dd, hn::LoadU(dh, pdy + N / 2));
        ag_lo[v] = hn::MulAdd(dy_lo, hn::PromoteTo(dd, hn::LowerHalf(dh, xhat)), ag_lo[v]);
        ag_hi[v] = hn::MulAdd(dy_hi, hn::PromoteTo(dd, hn::UpperHalf(dh, xhat)), ag_hi[v]);
        ab_lo[v] = hn::Add(ab_lo[v], dy_lo);
        ab_hi[v] = hn::Add(ab_hi[v], dy_hi);
      }
      sg[k] = hn::Add(sg_lo, sg_hi);
      sgx[k] = hn::Add(sgx_lo, sgx_hi);
    }
    hn::Store(hn::DemoteTo(dr, hn::Div(WideTotals(dd, sg), vd)), dr, mg + b * KR);
    hn::Store(hn::DemoteTo(dr, hn::Div(WideTotals(dd, sgx), vd)), dr, mgx + b * KR);
  }
  for (size_t i = 0; i < KB * KR; ++i) {
    const V vrs = hn::Set(df, rstd[i]), vmg = hn::Set(df, mg[i]), vmgx = hn::Set(df, mgx[i]);
    for (size_t v = 0; v < NV; ++v) {
      float* p = dx + i * d + v * N;
      const V inner = hn::Sub(
          hn::NegMulAdd(hn::Load(df, xs + i * d + v * N), vmgx, hn::Load(df, gs + i * d + v * N)),
          vmg);
      hn::StoreU(hn::MulAdd(vrs, inner, hn::LoadU(df, p)), df, p);
    }
  }
}
#endif

template <size_t NV, class DF>
HWY_INLINE void LayernormBwdSmall(DF df, const float* dy, const float* x, const float* gamma,
                                  const float* mean, const float* rstd, float* dx, float* dgamma,
                                  float* dbeta, size_t rows) {
  const hn::Repartition<double, DF> dd;
  using V = hn::Vec<DF>;
  using VD = hn::Vec<decltype(dd)>;
  constexpr size_t KR = BwdRows<NV>();
  const size_t N = hn::Lanes(df), d = NV * N, NH = hn::Lanes(dd);
  VD ag_lo[NV], ag_hi[NV], ab_lo[NV], ab_hi[NV];
  V gam[NV];
  for (size_t v = 0; v < NV; ++v) {
    ag_lo[v] = ag_hi[v] = ab_lo[v] = ab_hi[v] = hn::Zero(dd);
    gam[v] = hn::LoadU(df, gamma + v * N);
  }
  size_t r = 0;
  if constexpr (4 * NV <= kSmallMaxAcc) {
#if PHASELAB_HWY_WIDE_TOTALS
    while (r + kWideTotalRows <= rows) {
      const size_t n = std::min(kWideGroup, (rows - r) / kWideTotalRows * kWideTotalRows);
      LayernormBwdRowsWide<NV>(df, dy + r * d, x + r * d, gam, mean + r, rstd + r, dx + r * d,
                               ag_lo, ag_hi, ab_lo, ab_hi, n / kWideTotalRows);
      r += n;
    }
#endif
    for (; r + KR <= rows; r += KR)
      LayernormBwdRowsSmall<NV, KR>(df, dy + r * d, x + r * d, gam, mean + r, rstd + r, dx + r * d,
                                    ag_lo, ag_hi, ab_lo, ab_hi);
    for (; r < rows; ++r)
      LayernormBwdRowsSmall<NV, 1>(df, dy + r * d, x + r * d, gam, mean + r, rstd + r, dx + r * d,
                                   ag_lo, ag_hi, ab_lo, ab_hi);
  } else {
    // Too many accumulators for the registers: kept in a stack buffer, loaded and stored once per
    // block of rows (the same additions in the same order).
    double buf[4 * NV * HWY_MAX_BYTES / sizeof(double)];
    // kr: rows of one LayernormBwdRowsSmall; kb: blocks of LayernormBwdRowsWide if nonzero.
    auto block = [&](auto kr, size_t kb = 0) HWY_ATTR {
      VD g_lo[NV], g_hi[NV], b_lo[NV], b_hi[NV];
      for (size_t v = 0; v < NV; ++v) {
        g_lo[v] = hn::LoadU(dd, buf + (4 * v + 0) * NH);
        g_hi[v] = hn::LoadU(dd, buf + (4 * v + 1) * NH);
        b_lo[v] = hn::LoadU(dd, buf + (4 * v + 2) * NH);
        b_hi[v] = hn::LoadU(dd, buf + (4 * v + 3) * NH);
      }
#if PHASELAB_HWY_WIDE_TOTALS
      if (kb)
        LayernormBwdRowsWide<NV>(df, dy + r * d, x + r * d, gam, mean + r, rstd + r, dx + r * d,
                                 g_lo, g_hi, b_lo, b_hi, kb);
      else
#else
      (void)kb;
#endif
        LayernormBwdRowsSmall<NV, decltype(kr)::value>(
            df, dy + r * d, x + r * d, gam, mean + r, rstd + r, dx + r * d, g_lo, g_hi, b_lo, b_hi);
      for (size_t v = 0; v < NV; ++v) {
        hn::StoreU(g_lo[v], dd, buf + (4 * v + 0) * NH);
        hn::StoreU(g_hi[v], dd, buf + (4 * v + 1) * NH);
        hn::StoreU(b_lo[v], dd, buf + (4 * v + 2) * NH);
        hn::StoreU(b_hi[v], dd, buf + (4 * v + 3) * NH);
      }
    };
    for (size_t i = 0; i < 4 * NV * NH; ++i) buf[i] = 0.0;
#if PHASELAB_HWY_WIDE_TOTALS
    while (r + kWideTotalRows <= rows) {
      const size_t n = std::min(kWideGroup, (rows - r) / kWideTotalRows * kWideTotalRows);
      block(std::integral_constant<size_t, 1>(), n / kWideTotalRows);
      r += n;
    }
#endif
    for (; r + KR <= rows; r += KR) block(std::integral_constant<size_t, KR>());
    for (; r < rows; ++r) block(std::integral_constant<size_t, 1>());
    for (size_t v = 0; v < NV; ++v) {
      ag_lo[v] = hn::LoadU(dd, buf + (4 * v + 0) * NH);
      ag_hi[v] = hn::LoadU(dd, buf + (4 * v + 1) * NH);
      ab_lo[v] = hn::LoadU(dd, buf + (4 * v + 2) * NH);
      ab_hi[v] = hn::LoadU(dd, buf + (4 * v + 3) * NH);
    }
  }
  double acc[2 * HWY_MAX_BYTES / sizeof(double)];
  for (size_t v = 0; v < NV; ++v) {
    hn::StoreU(ag_lo[v], dd, acc);
    hn::StoreU(ag_hi[v], dd, acc + NH);
    for (size_t i = 0; i < N; ++i)
      dgamma[v * N + i] = static_cast<float>(dgamma[v * N + i] + acc[i]);
    hn::StoreU(ab_lo[v], dd, acc);
    hn::StoreU(ab_hi[v], dd, acc + NH);
    for (size_t i = 0; i < N; ++i) dbeta[v * N + i] = static_cast<float>(dbeta[v * N + i] + acc[i]);
  }
}

// Calls f(integral_constant<NV>) when d = NV lanes-widths for NV in 1, 2, 4; false otherwise.
template <class DF, class F>
HWY_INLINE bool DispatchSmall(DF df, size_t d, F&& f) {
  const size_t N = hn::Lanes(df);
  if (d % N) return false;
  switch (d / N) {
    case 1:
      f(std::integral_constant<size_t, 1>());
      return true;
    case 2:
      f(std::integral_constant<size_t, 2>());
      return true;
    case 4:
      f(std::integral_constant<size_t, 4>());
      return true;
    default:
      return false;
  }
}
#endif

}  // namespace

// x, y: rows x d; gamma, beta: d; mean, rstd: rows.
void Layernorm(const float* x, const float* gamma, const float* beta, float* y, float* mean,
               float* rstd, size_t rows, size_t d, float eps) {
  const hn::ScalableTag<float> df;
  const hn::Repartition<double, decltype(df)> dd;  // row sums
  using V = hn::Vec<decltype(df)>;
  const size_t N = hn::Lanes(df);
  const size_t tail = d % N, body = d - tail;
  const auto mtail = hn::FirstN(df, tail);
#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
  if (DispatchSmall(df, d, [&](auto nv) HWY_ATTR {
        LayernormSmall<decltype(nv)::value>(df, x, gamma, beta, y, mean, rstd, rows, eps);
      }))
    return;
#endif
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * d;
    float* yr = y + r * d;
    // Pass 1: mean.
    auto sum_lo = hn::Zero(dd), sum_hi = hn::Zero(dd);
    for (size_t j = 0; j < body; j += N) WideAdd(df, hn::LoadU(df, xr + j), sum_lo, sum_hi);
    if (tail) WideAdd(df, part::Load(df, xr + body, tail), sum_lo, sum_hi);
    const double m = WideTotal(dd, sum_lo, sum_hi) / double(d);
    const float m_hi_f = static_cast<float>(m);
    const V m_hi = hn::Set(df, m_hi_f), m_lo = hn::Set(df, static_cast<float>(m - m_hi_f));
    // x - mean = (x - m_hi) - m_lo; the first difference is exact when x is near the mean.
    auto centered = [&](V xv) HWY_ATTR { return hn::Sub(hn::Sub(xv, m_hi), m_lo); };
    // Pass 2: variance, sum of exact squares in double.
    auto ss_lo = hn::Zero(dd), ss_hi = hn::Zero(dd);
    for (size_t j = 0; j < body; j += N) {
      const V c = centered(hn::LoadU(df, xr + j));
      WideAddProduct(df, c, c, ss_lo, ss_hi);
    }
    if (tail) {
      const V c = hn::IfThenElseZero(mtail, centered(part::Load(df, xr + body, tail)));
      WideAddProduct(df, c, c, ss_lo, ss_hi);
    }
    const double rs = 1 / std::sqrt(WideTotal(dd, ss_lo, ss_hi) / double(d) + double(eps));
    mean[r] = m_hi_f;
    rstd[r] = static_cast<float>(rs);
    // Pass 3: y = ((x - mean) rstd) gamma + beta.
    const V vrs = hn::Set(df, rstd[r]);
    for (size_t j = 0; j < body; j += N) {
      const V xhat = hn::Mul(centered(hn::LoadU(df, xr + j)), vrs);
      hn::StoreU(hn::MulAdd(xhat, hn::LoadU(df, gamma + j), hn::LoadU(df, beta + j)), df, yr + j);
    }
    if (tail) {
      const V xhat = hn::Mul(centered(part::Load(df, xr + body, tail)), vrs);
      part::Store(
          df,
          hn::MulAdd(xhat, part::Load(df, gamma + body, tail), part::Load(df, beta + body, tail)),
          yr + body, tail);
    }
  }
}

namespace {

// dgamma[j..j+N) += sum_r dy xhat, dbeta[j..j+N) += sum_r dy for one column block of `lanes`
// columns, summed over rows in double (two accumulators per half).
template <class DF>
HWY_INLINE void ParamGradBlock(DF df, const float* dy, const float* x, const float* mean,
                               const float* rstd, float* dgamma, float* dbeta, size_t rows,
                               size_t d, size_t j, size_t lanes) {
  using V = hn::Vec<DF>;
  const hn::Repartition<double, DF> dd;
  auto sg_lo = hn::Zero(dd), sg_hi = hn::Zero(dd);  // dy xhat
  auto sb_lo = hn::Zero(dd), sb_hi = hn::Zero(dd);  // dy
  for (size_t r = 0; r < rows; ++r) {
    const V xv = part::Load(df, x + r * d + j, lanes);
    const V dyv = part::Load(df, dy + r * d + j, lanes);
    const V xhat = hn::Mul(hn::Sub(xv, hn::Set(df, mean[r])), hn::Set(df, rstd[r]));
    WideAddProduct(df, dyv, xhat, sg_lo, sg_hi);
    WideAdd(df, dyv, sb_lo, sb_hi);
  }
  // Add the double sums to the float outputs, rounding once.
  const size_t NH = hn::Lanes(dd);
  double g[2 * HWY_MAX_BYTES / sizeof(double)], b[2 * HWY_MAX_BYTES / sizeof(double)];
  hn::StoreU(sg_lo, dd, g);
  hn::StoreU(sg_hi, dd, g + NH);
  hn::StoreU(sb_lo, dd, b);
  hn::StoreU(sb_hi, dd, b + NH);
  for (size_t i = 0; i < lanes; ++i) {
    dgamma[j + i] = static_cast<float>(dgamma[j + i] + g[i]);
    dbeta[j + i] = static_cast<float>(dbeta[j + i] + b[i]);
  }
}

// Rows up to this width sum dgamma and dbeta over rows in a double buffer (L1-resident, 17 KiB
// of stack) during the row pass; wider rows use ParamGradBlock after it.
constexpr size_t kFusedMaxD = 1024;

// acc_g[0..N) += dy xhat, acc_b[0..N) += dy, in double.
template <class DF>
HWY_INLINE void AddParamGrads(DF df, hn::Vec<DF> dyv, hn::Vec<DF> xhat, double* acc_g,
                              double* acc_b) {
  const hn::Repartition<double, DF> dd;
  const size_t NH = hn::Lanes(dd);
  auto g_lo = hn::LoadU(dd, acc_g), g_hi = hn::LoadU(dd, acc_g + NH);
  auto b_lo = hn::LoadU(dd, acc_b), b_hi = hn::LoadU(dd, acc_b + NH);
  WideAddProduct(df, dyv, xhat, g_lo, g_hi);
  WideAdd(df, dyv, b_lo, b_hi);
  hn::StoreU(g_lo, dd, acc_g);
  hn::StoreU(g_hi, dd, acc_g + NH);
  hn::StoreU(b_lo, dd, acc_b);
  hn::StoreU(b_hi, dd, acc_b + NH);
}

}  // namespace

// dy, x, dx: rows x d; gamma, dgamma, dbeta: d; mean, rstd: rows. Accumulates into dx, dgamma,
// dbeta: dx += rstd (g - mean(g) - xhat mean(g xhat)), g = dy gamma, xhat = (x - mean) rstd.
void LayernormBwd(const float* dy, const float* x, const float* gamma, const float* mean,
                  const float* rstd, float* dx, float* dgamma, float* dbeta, size_t rows,
                  size_t d) {
  const hn::ScalableTag<float> df;
  const hn::Repartition<double, decltype(df)> dd;  // row sums
  using V = hn::Vec<decltype(df)>;
  const size_t N = hn::Lanes(df);
  const size_t tail = d % N, body = d - tail;
#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
  if (DispatchSmall(df, d, [&](auto nv) HWY_ATTR {
        LayernormBwdSmall<decltype(nv)::value>(df, dy, x, gamma, mean, rstd, dx, dgamma, dbeta,
                                               rows);
      }))
    return;
#endif
  const bool fused = d <= kFusedMaxD;
  double acc_g[kFusedMaxD + HWY_MAX_BYTES / sizeof(float)];  // sum_r dy xhat, per column
  double acc_b[kFusedMaxD + HWY_MAX_BYTES / sizeof(float)];  // sum_r dy
  if (fused) {
    std::fill(acc_g, acc_g + body + (tail ? N : 0), 0.0);
    std::fill(acc_b, acc_b + body + (tail ? N : 0), 0.0);
  }
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * d;
    const float* dyr = dy + r * d;
    float* dxr = dx + r * d;
    const V vm = hn::Set(df, mean[r]), vrs = hn::Set(df, rstd[r]);
    // Pass 1: mean(g) and mean(g xhat) in double (and dgamma, dbeta if fused).
    auto sg_lo = hn::Zero(dd), sg_hi = hn::Zero(dd);    // g
    auto sgx_lo = hn::Zero(dd), sgx_hi = hn::Zero(dd);  // g xhat
    for (size_t j = 0; j < body; j += N) {
      const V dyv = hn::LoadU(df, dyr + j);
      const V xhat = hn::Mul(hn::Sub(hn::LoadU(df, xr + j), vm), vrs);
      const V g = hn::Mul(dyv, hn::LoadU(df, gamma + j));
      WideAdd(df, g, sg_lo, sg_hi);
      WideAddProduct(df, g, xhat, sgx_lo, sgx_hi);
      if (fused) AddParamGrads(df, dyv, xhat, acc_g + j, acc_b + j);
    }
    if (tail) {
      // Masked lanes load 0, so dy = g = 0 there and they add nothing.
      const V dyv = part::Load(df, dyr + body, tail);
      const V xhat = hn::Mul(hn::Sub(part::Load(df, xr + body, tail), vm), vrs);
      const V g = hn::Mul(dyv, part::Load(df, gamma + body, tail));
      WideAdd(df, g, sg_lo, sg_hi);
      WideAddProduct(df, g, xhat, sgx_lo, sgx_hi);
      if (fused) AddParamGrads(df, dyv, xhat, acc_g + body, acc_b + body);
    }
    const V mg = hn::Set(df, static_cast<float>(WideTotal(dd, sg_lo, sg_hi) / double(d)));
    const V mgx = hn::Set(df, static_cast<float>(WideTotal(dd, sgx_lo, sgx_hi) / double(d)));
    // Pass 2: dx += rstd ((g - xhat mean(g xhat)) - mean(g)).
    auto update = [&](V dyv, V gv, V xv, V dxv) HWY_ATTR {
      const V xhat = hn::Mul(hn::Sub(xv, vm), vrs);
      const V inner = hn::Sub(hn::NegMulAdd(xhat, mgx, hn::Mul(dyv, gv)), mg);
      return hn::MulAdd(vrs, inner, dxv);
    };
    for (size_t j = 0; j < body; j += N)
      hn::StoreU(update(hn::LoadU(df, dyr + j), hn::LoadU(df, gamma + j), hn::LoadU(df, xr + j),
                        hn::LoadU(df, dxr + j)),
                 df, dxr + j);
    if (tail)
      part::Store(df,
                  update(part::Load(df, dyr + body, tail), part::Load(df, gamma + body, tail),
                         part::Load(df, xr + body, tail), part::Load(df, dxr + body, tail)),
                  dxr + body, tail);
  }
  // dgamma, dbeta: add the double sums over rows, rounding once; wide rows sum them now, in
  // column blocks.
  if (fused) {
    for (size_t j = 0; j < d; ++j) {
      dgamma[j] = static_cast<float>(dgamma[j] + acc_g[j]);
      dbeta[j] = static_cast<float>(dbeta[j] + acc_b[j]);
    }
  } else {
    for (size_t j = 0; j < d; j += N)
      ParamGradBlock(df, dy, x, mean, rstd, dgamma, dbeta, rows, d, j, std::min(N, d - j));
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace pl
HWY_AFTER_NAMESPACE();
