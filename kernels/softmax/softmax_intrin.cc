// softmax_rows.intrin.<isa>: numerically stable row softmax with the intrinsics of
// kernels/common/intrin_ops.hpp, compiled once per ISA (AVX2, AVX-512, NEON).
// Rows of up to kRegVecs vectors stay in registers between the max, exp-sum and normalise
// steps (one load, one store per element); longer rows take three passes over memory.
#include <algorithm>

#include "kernels/common/intrin_ops.hpp"
#include "kernels/softmax/softmax_intrin.hpp"

namespace pl::PL_INTRIN_NS {
namespace {

constexpr size_t kRegVecs = 8;  // rows up to 8 vectors (128 floats on AVX-512) in registers

// y[0:len) = softmax(scale * x[0:len)), len <= kRegVecs * kW.
inline void row_in_registers(const float* x, float* y, size_t len, float scale) {
  const V vs = set1(scale);
  const V neg_inf = set1(-__builtin_inff());
  V t[kRegVecs];
  V m = neg_inf;
  const size_t nv = (len + kW - 1) / kW;
#pragma GCC unroll 8
  for (size_t j = 0; j < kRegVecs; ++j) {
    if (j >= nv) break;
    const size_t c = j * kW;
    t[j] = mul(c + kW <= len ? load(x + c) : load_n(x + c, len - c), vs);
    // Lanes past the end are masked to -inf so they drop out of the max and give exp() = 0.
    t[j] = mask_after(t[j], c, len - 1, neg_inf);
    m = max(m, t[j]);
  }
  const V vm = set1(reduce_max(m));
  V s = zero();
#pragma GCC unroll 8
  for (size_t j = 0; j < kRegVecs; ++j) {
    if (j >= nv) break;
    t[j] = mask_after(exp(sub(t[j], vm)), j * kW, len - 1, zero());
    s = add(s, t[j]);
  }
  const V inv = set1(1.0f / reduce_add(s));
#pragma GCC unroll 8
  for (size_t j = 0; j < kRegVecs; ++j) {
    if (j >= nv) break;
    const size_t c = j * kW;
    if (c + kW <= len) store(y + c, mul(t[j], inv));
    else store_n(y + c, mul(t[j], inv), len - c);
  }
}

// The same for any len: max pass, exp pass (writing y, summing), normalise pass.
inline void row_streaming(const float* x, float* y, size_t len, float scale) {
  const V vs = set1(scale);
  V m0 = set1(-__builtin_inff()), m1 = m0;
  size_t c = 0;
  for (; c + 2 * kW <= len; c += 2 * kW) {
    m0 = max(m0, mul(load(x + c), vs));
    m1 = max(m1, mul(load(x + c + kW), vs));
  }
  for (; c < len; c += kW) {
    const V t = mul(c + kW <= len ? load(x + c) : load_n(x + c, len - c), vs);
    m0 = max(m0, mask_after(t, c, len - 1, set1(-__builtin_inff())));
  }
  const V vm = set1(reduce_max(max(m0, m1)));
  V s0 = zero(), s1 = zero();
  for (c = 0; c + 2 * kW <= len; c += 2 * kW) {
    const V e0 = exp(sub(mul(load(x + c), vs), vm));
    const V e1 = exp(sub(mul(load(x + c + kW), vs), vm));
    store(y + c, e0);
    store(y + c + kW, e1);
    s0 = add(s0, e0);
    s1 = add(s1, e1);
  }
  for (; c < len; c += kW) {
    const size_t w = std::min(kW, len - c);
    const V e = exp(sub(mul(load_n(x + c, w), vs), vm));
    store_n(y + c, e, w);
    s0 = add(s0, mask_after(e, c, len - 1, zero()));
  }
  const V inv = set1(1.0f / reduce_add(add(s0, s1)));
  for (c = 0; c + kW <= len; c += kW) store(y + c, mul(load(y + c), inv));
  if (c < len) store_n(y + c, mul(load_n(y + c, len - c), inv), len - c);
}

}  // namespace

void softmax_row(const float* x, float* y, size_t len, float scale) {
  if (len == 0) return;
  if (len <= kRegVecs * kW) row_in_registers(x, y, len, scale);
  else row_streaming(x, y, len, scale);
}

// x, y: rows x cols. With causal, row r uses columns 0..r and writes 0 beyond.
void SoftmaxRows(const float* x, float* y, size_t rows, size_t cols, float scale, int causal) {
  for (size_t r = 0; r < rows; ++r) {
    const size_t len = causal ? std::min(cols, r + 1) : cols;
    softmax_row(x + r * cols, y + r * cols, len, scale);
    std::fill(y + r * cols + len, y + (r + 1) * cols, 0.0f);
  }
}

}  // namespace pl::PL_INTRIN_NS
