// SPDX-License-Identifier: Apache-2.0
// gaussian.hwy.<isa>, uniform_bits.hwy.<isa>: vectorised Philox4x32-10 and Box-Muller
// (philox-inl.h), all targets. The uniform words are bit-identical to the scalar reference.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/random/random_hwy.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "kernels/random/philox-inl.h"

HWY_BEFORE_NAMESPACE();
namespace pl {
namespace HWY_NAMESPACE {

// out: n
void Gaussian(float* out, size_t n, uint64_t seed, uint64_t stream, uint64_t counter) {
  const uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  rng::FillGroups(out, n, counter,
                  [=](uint64_t j, float* dst) { rng::GaussianGroup(j, k0, k1, stream, dst); });
}

// out: n
void UniformBits(uint32_t* out, size_t n, uint64_t seed, uint64_t stream, uint64_t counter) {
  const uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  rng::FillGroups(out, n, counter,
                  [=](uint64_t j, uint32_t* dst) { rng::UniformGroup(j, k0, k1, stream, dst); });
}

}  // namespace HWY_NAMESPACE
}  // namespace pl
HWY_AFTER_NAMESPACE();
