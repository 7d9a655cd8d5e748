// SPDX-License-Identifier: Apache-2.0
// Copy-task data: i.i.d. uniform tokens, one-hot encoding, previous-token targets.
// Shared by copy_task (training, sampling) and copy_theory (exact marginal on sampled data).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "phaselab/kernel_table.h"

namespace pl::copy {

// Which positions carry a target. cyclic: y_l = x_{l-1 mod L} for every l (position 0 wraps to
// x_{L-1}); drop_first: position 0 is left out of the loss.
enum class Wrap { cyclic, drop_first };

// P*L tokens in [0, V): word i of the stream (seed, stream) from k.uniform_bits, mapped by
// (uint64(u) * V) >> 32 (unbiased to 2^-32, identical on every target). Row-major P x L.
std::vector<int32_t> make_tokens(const pl_kernel_table& k, uint64_t seed, uint64_t stream, int P,
                                 int L, int V);

// Number of positions per sequence that enter the loss (L or L - 1).
inline int loss_positions(int L, Wrap wrap) { return wrap == Wrap::cyclic ? L : L - 1; }
// The target token of position l of one sequence (seq: L tokens).
inline int32_t target_token(const int32_t* seq, int l, int L) { return seq[(l + L - 1) % L]; }
// Whether position l enters the loss.
inline bool in_loss(int l, Wrap wrap) { return wrap == Wrap::cyclic || l != 0; }

// out (n x V) = one-hot rows of tokens[0..n).
void one_hot(const int32_t* tokens, size_t n, int V, float* out);
// y (P x L x V) = one-hot targets; rows of positions outside the loss are zero.
void one_hot_targets(const int32_t* tokens, int P, int L, int V, Wrap wrap, float* y);

}  // namespace pl::copy
