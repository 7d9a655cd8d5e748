// SPDX-License-Identifier: Apache-2.0
// adam.xsimd.<isa>: the Adam update of optim_scalar.cc with xsimd batches, one translation unit
// per instruction set (kernels/common/xsimd_arch.hpp). Float arithmetic with the bias
// corrections folded into two constants computed in double, as the Highway variant does:
//   g = grad + wd p;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//   p -= (lr / c1) m / (sqrt(v / c2) + eps),  c = 1 - beta^step.
#include <cmath>
#include <cstring>

#include "kernels/common/xsimd_arch.hpp"

namespace pl::PL_XSIMD_NS {

// param, grad, m, v: n. xsimd 8.1 has no masked loads: the tail goes through zero-padded
// buffers, so every element sees the same arithmetic.
void Adam(float* param, const float* grad, float* m, float* v, size_t n, float lr, float beta1,
          float beta2, float eps, float weight_decay, int64_t step) {
  const double c1 = 1.0 - std::pow(double{beta1}, double(step));
  const double c2 = 1.0 - std::pow(double{beta2}, double(step));
  const Vf b1(beta1), omb1(static_cast<float>(1.0 - beta1)), b2(beta2),
      omb2(static_cast<float>(1.0 - beta2)), step_size(static_cast<float>(lr / c1)),
      inv_c2(static_cast<float>(1.0 / c2)), veps(eps), wd(weight_decay);
  auto update = [&](float* p_, const float* g_, float* m_, float* v_) {
    const Vf p = Vf::load_unaligned(p_);
    const Vf g = xsimd::fma(wd, p, Vf::load_unaligned(g_));
    const Vf mv = xsimd::fma(b1, Vf::load_unaligned(m_), omb1 * g);
    const Vf vv = xsimd::fma(b2, Vf::load_unaligned(v_), omb2 * (g * g));
    const Vf ratio = mv / (xsimd::sqrt(vv * inv_c2) + veps);
    mv.store_unaligned(m_);
    vv.store_unaligned(v_);
    xsimd::fnma(step_size, ratio, p).store_unaligned(p_);  // p - step_size ratio
  };
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) update(param + i, grad + i, m + i, v + i);
  if (i < n) {
    const size_t r = n - i;
    alignas(64) float bp[kLanes] = {}, bg[kLanes] = {}, bm[kLanes] = {}, bv[kLanes] = {};
    std::memcpy(bp, param + i, r * sizeof(float));
    std::memcpy(bg, grad + i, r * sizeof(float));
    std::memcpy(bm, m + i, r * sizeof(float));
    std::memcpy(bv, v + i, r * sizeof(float));
    update(bp, bg, bm, bv);
    std::memcpy(param + i, bp, r * sizeof(float));
    std::memcpy(m + i, bm, r * sizeof(float));
    std::memcpy(v + i, bv, r * sizeof(float));
  }
}

}  // namespace pl::PL_XSIMD_NS
