// SPDX-License-Identifier: Apache-2.0
// gaussian.scalar, uniform_bits.scalar: the references, one Philox block at a time, Box-Muller in
// double rounded once.
#include "kernels/random/philox.hpp"
#include "phaselab/kernels.hpp"

namespace pl::scalar {

// out: n
void Gaussian(float* out, size_t n, uint64_t seed, uint64_t stream, uint64_t counter) {
  philox::for_each_sample(n, seed, stream, counter,
                          [&](size_t i, const philox::Block& b, unsigned lane) {
                            out[i] = static_cast<float>(philox::gaussian_of(b, lane));
                          });
}

// out: n
void UniformBits(uint32_t* out, size_t n, uint64_t seed, uint64_t stream, uint64_t counter) {
  philox::for_each_sample(
      n, seed, stream, counter,
      [&](size_t i, const philox::Block& b, unsigned lane) { out[i] = b[lane]; });
}

}  // namespace pl::scalar
