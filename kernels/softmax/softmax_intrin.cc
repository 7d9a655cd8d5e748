// SPDX-License-Identifier: Apache-2.0
// softmax_rows.intrin.<isa>: numerically stable row softmax with the intrinsics of
// kernels/common/intrin_ops.hpp, compiled once per ISA (AVX2, AVX-512, NEON).
// Rows of up to kRegVecs vectors stay in registers between the max, exp-sum and normalise
// steps (one load and one store per element); longer rows take three passes over memory.
// Accuracy as the Highway variant: exponent as an exact float pair (exp_shifted), row sum in
// double, reciprocal rounded once. Also attention.intrin's rows (softmax_intrin.hpp): the fast
// policy of kernels/softmax/softmax_row-inl.h, written with the same intrinsics.
#include "kernels/softmax/softmax_intrin.hpp"

#include <algorithm>

#include "kernels/common/intrin_ops.hpp"

namespace pl::PL_INTRIN_NS {
namespace {

constexpr size_t kRegVecs = 8;  // rows up to 8 vectors (128 floats on AVX-512) in registers

// y[0:len) = softmax(scale * x[0:len)), 0 < len <= kRegVecs * kW.
inline void row_in_registers(const float* x, float* y, size_t len, float scale) {
  const V vs = set1(scale);
  const V neg_inf = set1(-__builtin_inff());
  V t[kRegVecs] = {};  // only the first nv are used
  V m = neg_inf;
  const size_t nv = (len + kW - 1) / kW;
#pragma GCC unroll 8
  for (size_t j = 0; j < kRegVecs; ++j) {
    if (j >= nv) break;
    const size_t c = j * kW;
    t[j] = c + kW <= len ? load(x + c) : load_n(x + c, len - c);
    // Lanes past the end drop out of the max.
    m = max(m, mask_after(mul(t[j], vs), c, len - 1, neg_inf));
  }
  const V neg_m = set1(-reduce_max(m));
  DSum s;
#pragma GCC unroll 8
  for (size_t j = 0; j < kRegVecs; ++j) {
    if (j >= nv) break;
    t[j] = mask_after(exp_shifted(t[j], vs, neg_m), j * kW, len - 1, zero());
    s.add(t[j]);
  }
  const V inv = set1(static_cast<float>(1.0 / s.total()));
#pragma GCC unroll 8
  for (size_t j = 0; j < kRegVecs; ++j) {
    if (j >= nv) break;
    const size_t c = j * kW;
    if (c + kW <= len)
      store(y + c, mul(t[j], inv));
    else
      store_n(y + c, mul(t[j], inv), len - c);
  }
}

// The same for any len: max pass, exp pass (writing y, summing), normalise pass.
inline void row_streaming(const float* x, float* y, size_t len, float scale) {
  const V vs = set1(scale);
  const V neg_inf = set1(-__builtin_inff());
  V m0 = neg_inf, m1 = neg_inf;
  size_t c = 0;
  for (; c + 2 * kW <= len; c += 2 * kW) {
    m0 = max(m0, mul(load(x + c), vs));
    m1 = max(m1, mul(load(x + c + kW), vs));
  }
  for (; c < len; c += kW) {
    const V t = mul(c + kW <= len ? load(x + c) : load_n(x + c, len - c), vs);
    m0 = max(m0, mask_after(t, c, len - 1, neg_inf));
  }
  const V neg_m = set1(-reduce_max(max(m0, m1)));
  DSum s;
  for (c = 0; c + kW <= len; c += kW) {
    const V e = exp_shifted(load(x + c), vs, neg_m);
    store(y + c, e);
    s.add(e);
  }
  if (c < len) {
    const V e = mask_after(exp_shifted(load_n(x + c, len - c), vs, neg_m), c, len - 1, zero());
    store_n(y + c, e, len - c);
    s.add(e);
  }
  const V inv = set1(static_cast<float>(1.0 / s.total()));
  for (c = 0; c + kW <= len; c += kW) store(y + c, mul(load(y + c), inv));
  if (c < len) store_n(y + c, mul(load_n(y + c, len - c), inv), len - c);
}

void softmax_row(const float* x, float* y, size_t len, float scale) {
  if (len == 0) return;
  if (len <= kRegVecs * kW)
    row_in_registers(x, y, len, scale);
  else
    row_streaming(x, y, len, scale);
}

}  // namespace

// x[0:len) = softmax(x[0:len)) in place (the scale is already in x): stable (subtracts the row
// max), exp of kernels/common/intrin_ops.hpp and a float row sum. Attention's budget (1e-5 scaled
// by sqrt(n)) does not need softmax_rows' compensated exponent and double sum.
void softmax_row_fast(float* x, size_t len) {
  V m0 = set1(-__builtin_inff()), m1 = m0;
  size_t c = 0;
  for (; c + 2 * kW <= len; c += 2 * kW) {
    m0 = max(m0, load(x + c));
    m1 = max(m1, load(x + c + kW));
  }
  for (; c < len; c += kW)
    m0 = max(m0, mask_after(c + kW <= len ? load(x + c) : load_n(x + c, len - c), c, len - 1,
                            set1(-__builtin_inff())));
  const V vm = set1(reduce_max(max(m0, m1)));
  V s0 = zero(), s1 = zero();
  for (c = 0; c + 2 * kW <= len; c += 2 * kW) {
    const V e0 = exp(sub(load(x + c), vm)), e1 = exp(sub(load(x + c + kW), vm));
    store(x + c, e0);
    store(x + c + kW, e1);
    s0 = add(s0, e0);
    s1 = add(s1, e1);
  }
  for (; c < len; c += kW) {
    const size_t w = len - c < kW ? len - c : kW;
    const V e = mask_after(exp(sub(load_n(x + c, w), vm)), c, len - 1, zero());
    store_n(x + c, e, w);
    s0 = add(s0, e);
  }
  const V inv = set1(1.0f / reduce_add(add(s0, s1)));
  for (c = 0; c + kW <= len; c += kW) store(x + c, mul(load(x + c), inv));
  if (c < len) store_n(x + c, mul(load_n(x + c, len - c), inv), len - c);
}

// ds[0:len) = scale * p .* (ds - <p, ds>)  (softmax backward; ds holds dP on entry)
void softmax_bwd_row_fast(const float* p, float* ds, size_t len, float scale) {
  V d0 = zero(), d1 = zero();
  size_t c = 0;
  for (; c + 2 * kW <= len; c += 2 * kW) {
    d0 = fma(load(p + c), load(ds + c), d0);
    d1 = fma(load(p + c + kW), load(ds + c + kW), d1);
  }
  for (; c < len; c += kW) {
    const size_t w = len - c < kW ? len - c : kW;
    d0 = fma(load_n(p + c, w), load_n(ds + c, w), d0);
  }
  const V vdot = set1(reduce_add(add(d0, d1))), vs = set1(scale);
  for (c = 0; c + kW <= len; c += kW)
    store(ds + c, mul(mul(load(p + c), vs), sub(load(ds + c), vdot)));
  if (c < len)
    store_n(ds + c, mul(mul(load_n(p + c, len - c), vs), sub(load_n(ds + c, len - c), vdot)),
            len - c);
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
