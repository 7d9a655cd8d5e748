// SPDX-License-Identifier: Apache-2.0
// layernorm.hwy.<isa>, layernorm_bwd.hwy.<isa>: every target from one source.
//
// Accuracy (budget: 1e-6 relative per element). Row sums (mean, variance, and the backward's
// mean(g), mean(g xhat)) are accumulated in double, the variance in a second pass over
// x - mean; x - mean is formed against the mean as a float pair (mean_hi + mean_lo), so rows with
// |mean| >> std (inputs in [90, 100]) keep full relative accuracy. dgamma and dbeta are summed over
// all rows in double per column block, then added once.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/layernorm/layernorm_hwy.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

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
// operations in the same order as the general loops below (so the same bits), with the row held
// in registers and every loop unrolled; the model's d_model 16-64 rows are this case.
#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
constexpr size_t kSmallMaxAcc = HWY_MAX_BYTES >= 64 ? 16 : 8;  // double accumulators in registers
template <size_t NV, class DF>
HWY_INLINE void LayernormSmall(DF df, const float* x, const float* gamma, const float* beta,
                               float* y, float* mean, float* rstd, size_t rows, float eps) {
  const hn::Repartition<double, DF> dd;
  using V = hn::Vec<DF>;
  const size_t N = hn::Lanes(df), d = NV * N;
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * d;
    float* yr = y + r * d;
    V xv[NV];
    for (size_t v = 0; v < NV; ++v) xv[v] = hn::LoadU(df, xr + v * N);
    auto sum_lo = hn::Zero(dd), sum_hi = hn::Zero(dd);
    for (size_t v = 0; v < NV; ++v) WideAdd(df, xv[v], sum_lo, sum_hi);
    const double m = WideTotal(dd, sum_lo, sum_hi) / double(d);
    const float m_hi_f = static_cast<float>(m);
    const V m_hi = hn::Set(df, m_hi_f), m_lo = hn::Set(df, static_cast<float>(m - m_hi_f));
    V c[NV];
    auto ss_lo = hn::Zero(dd), ss_hi = hn::Zero(dd);
    for (size_t v = 0; v < NV; ++v) {
      c[v] = hn::Sub(hn::Sub(xv[v], m_hi), m_lo);
      WideAddProduct(df, c[v], c[v], ss_lo, ss_hi);
    }
    const double rs = 1 / std::sqrt(WideTotal(dd, ss_lo, ss_hi) / double(d) + double(eps));
    mean[r] = m_hi_f;
    rstd[r] = static_cast<float>(rs);
    const V vrs = hn::Set(df, rstd[r]);
    for (size_t v = 0; v < NV; ++v)
      hn::StoreU(
          hn::MulAdd(hn::Mul(c[v], vrs), hn::LoadU(df, gamma + v * N), hn::LoadU(df, beta + v * N)),
          df, yr + v * N);
  }
}

// The backward of LayernormSmall: dgamma, dbeta summed over rows in double registers (the
// general path keeps them in a stack buffer, loaded and stored once per row).
template <size_t NV, class DF>
HWY_INLINE void LayernormBwdSmall(DF df, const float* dy, const float* x, const float* gamma,
                                  const float* mean, const float* rstd, float* dx, float* dgamma,
                                  float* dbeta, size_t rows) {
  const hn::Repartition<double, DF> dd;
  using V = hn::Vec<DF>;
  using VD = hn::Vec<decltype(dd)>;
  const size_t N = hn::Lanes(df), d = NV * N, NH = hn::Lanes(dd);
  VD ag_lo[NV], ag_hi[NV], ab_lo[NV], ab_hi[NV];
  V gam[NV];
  for (size_t v = 0; v < NV; ++v) {
    ag_lo[v] = ag_hi[v] = ab_lo[v] = ab_hi[v] = hn::Zero(dd);
    gam[v] = hn::LoadU(df, gamma + v * N);
  }
  for (size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * d;
    const float* dyr = dy + r * d;
    float* dxr = dx + r * d;
    const V vm = hn::Set(df, mean[r]), vrs = hn::Set(df, rstd[r]);
    V dyv[NV], xhat[NV], g[NV];
    auto sg_lo = hn::Zero(dd), sg_hi = hn::Zero(dd);
    auto sgx_lo = hn::Zero(dd), sgx_hi = hn::Zero(dd);
    for (size_t v = 0; v < NV; ++v) {
      dyv[v] = hn::LoadU(df, dyr + v * N);
      xhat[v] = hn::Mul(hn::Sub(hn::LoadU(df, xr + v * N), vm), vrs);
      g[v] = hn::Mul(dyv[v], gam[v]);
      WideAdd(df, g[v], sg_lo, sg_hi);
      WideAddProduct(df, g[v], xhat[v], sgx_lo, sgx_hi);
      WideAddProduct(df, dyv[v], xhat[v], ag_lo[v], ag_hi[v]);
      WideAdd(df, dyv[v], ab_lo[v], ab_hi[v]);
    }
    const V mg = hn::Set(df, static_cast<float>(WideTotal(dd, sg_lo, sg_hi) / double(d)));
    const V mgx = hn::Set(df, static_cast<float>(WideTotal(dd, sgx_lo, sgx_hi) / double(d)));
    for (size_t v = 0; v < NV; ++v) {
      const V inner = hn::Sub(hn::NegMulAdd(xhat[v], mgx, g[v]), mg);
      hn::StoreU(hn::MulAdd(vrs, inner, hn::LoadU(df, dxr + v * N)), df, dxr + v * N);
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

// Calls f(integral_constant<NV>) when d = NV lanes-widths for NV in 1..4 with the accumulators
// fitting in registers; false otherwise.
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
      if (4 * 4 > kSmallMaxAcc) return false;
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
