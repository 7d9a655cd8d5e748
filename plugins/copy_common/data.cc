// SPDX-License-Identifier: Apache-2.0
#include "copy_common/data.hpp"

#include <cstring>

namespace pl::copy {

std::vector<int32_t> make_tokens(const pl_kernel_table& k, uint64_t seed, uint64_t stream, int P,
                                 int L, int V) {
  const size_t n = size_t(P) * size_t(L);
  std::vector<uint32_t> bits(n);
  if (n) k.uniform_bits(bits.data(), n, seed, stream, 0);
  std::vector<int32_t> tok(n);
  for (size_t i = 0; i < n; ++i) tok[i] = int32_t((uint64_t(bits[i]) * uint64_t(V)) >> 32);
  return tok;
}

void one_hot(const int32_t* tokens, size_t n, int V, float* out) {
  std::memset(out, 0, n * size_t(V) * sizeof(float));
  for (size_t i = 0; i < n; ++i) out[i * size_t(V) + size_t(tokens[i])] = 1.0f;
}

void one_hot_targets(const int32_t* tokens, int P, int L, int V, Wrap wrap, float* y) {
  std::memset(y, 0, size_t(P) * L * V * sizeof(float));
  for (int mu = 0; mu < P; ++mu) {
    const int32_t* seq = tokens + size_t(mu) * L;
    for (int l = 0; l < L; ++l)
      if (in_loss(l, wrap)) y[(size_t(mu) * L + l) * V + size_t(target_token(seq, l, L))] = 1.0f;
  }
}

}  // namespace pl::copy
