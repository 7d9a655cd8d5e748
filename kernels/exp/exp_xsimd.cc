// SPDX-License-Identifier: Apache-2.0
// exp.xsimd.<isa>: exp_vec of kernels/common/xsimd_arch.hpp (Cody-Waite reduction + Cephes
// polynomial written with xsimd operations), one translation unit per instruction set.
#include <cstring>

#include "kernels/common/xsimd_arch.hpp"

namespace pl::PL_XSIMD_NS {

// x, y: n. xsimd 8.1 has no masked loads: the tail goes through a zero-padded vector, so every
// element sees the same arithmetic.
void Exp(const float* x, float* y, size_t n) {
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) exp_vec(Vf::load_unaligned(x + i)).store_unaligned(y + i);
  if (i < n) {
    alignas(64) float buf[kLanes] = {};
    std::memcpy(buf, x + i, (n - i) * sizeof(float));
    exp_vec(Vf::load_aligned(buf)).store_aligned(buf);
    std::memcpy(y + i, buf, (n - i) * sizeof(float));
  }
}

}  // namespace pl::PL_XSIMD_NS
