// Test support: a kernel table for the copy_task suite. Every kernel comes from the registry
// (pl::selected_variant, best or a forced target). Kernel families that are not in the tree yet
// get a plain local stand-in here, so the plugin's numerics can be tested before they land; the
// stand-ins are never used once the registry has the kernel (test `kernel table` reports which).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "phaselab/kernels.hpp"

namespace copytest {
namespace local {

inline void softmax_rows(const float* x, float* y, size_t rows, size_t cols, float scale,
                         int causal) {
  for (size_t r = 0; r < rows; ++r) {
    const size_t n = causal ? std::min(cols, r + 1) : cols;
    double mx = -INFINITY;
    for (size_t c = 0; c < n; ++c) mx = std::max(mx, double(scale) * x[r * cols + c]);
    double s = 0;
    std::vector<double> e(cols, 0.0);
    for (size_t c = 0; c < n; ++c) s += e[c] = std::exp(double(scale) * x[r * cols + c] - mx);
    for (size_t c = 0; c < cols; ++c) y[r * cols + c] = c < n ? float(e[c] / s) : 0.0f;
  }
}
inline void softmax_rows_bwd(const float* y, const float* dy, float* dx, size_t rows, size_t cols,
                             float scale, int /*causal*/) {
  for (size_t r = 0; r < rows; ++r) {
    double d = 0;
    for (size_t c = 0; c < cols; ++c) d += double(dy[r * cols + c]) * y[r * cols + c];
    for (size_t c = 0; c < cols; ++c)
      dx[r * cols + c] = float(scale * y[r * cols + c] * (dy[r * cols + c] - d));
  }
}
inline void posattn(const float* a, const float* x, const float* w, float* h, float* f, size_t p,
                    size_t l, size_t v) {
  for (size_t mu = 0; mu < p; ++mu)
    for (size_t i = 0; i < l; ++i) {
      for (size_t c = 0; c < v; ++c) {
        double s = 0;
        for (size_t j = 0; j < l; ++j) s += double(a[i * l + j]) * x[(mu * l + j) * v + c];
        h[(mu * l + i) * v + c] = float(s);
      }
      for (size_t o = 0; o < v; ++o) {
        double s = 0;
        for (size_t c = 0; c < v; ++c) s += double(h[(mu * l + i) * v + c]) * w[o * v + c];
        f[(mu * l + i) * v + o] = float(s);
      }
    }
}
inline void posattn_bwd(const float* a, const float* x, const float* w, const float* h,
                        const float* df, float* da, float* dw, float* dh, size_t p, size_t l,
                        size_t v) {
  (void)a;
  std::vector<double> dwd(v * v, 0.0), dad(l * l, 0.0);
  for (size_t mu = 0; mu < p; ++mu)
    for (size_t i = 0; i < l; ++i) {
      const float* dfi = df + (mu * l + i) * v;
      const float* hi = h + (mu * l + i) * v;
      for (size_t o = 0; o < v; ++o)
        for (size_t c = 0; c < v; ++c) dwd[o * v + c] += double(dfi[o]) * hi[c];
      for (size_t c = 0; c < v; ++c) {
        double s = 0;
        for (size_t o = 0; o < v; ++o) s += double(dfi[o]) * w[o * v + c];
        dh[(mu * l + i) * v + c] = float(s);
      }
      for (size_t j = 0; j < l; ++j) {
        double s = 0;
        for (size_t c = 0; c < v; ++c) s += double(dh[(mu * l + i) * v + c]) * x[(mu * l + j) * v + c];
        dad[i * l + j] += s;
      }
    }
  for (size_t i = 0; i < v * v; ++i) dw[i] = float(dwd[i]);
  for (size_t i = 0; i < l * l; ++i) da[i] = float(dad[i]);
}
inline void adam(float* p, const float* g, float* m, float* v, size_t n, float lr, float b1,
                 float b2, float eps, float wd, int64_t step) {
  const double c1 = 1 - std::pow(double(b1), double(step)), c2 = 1 - std::pow(double(b2), double(step));
  for (size_t i = 0; i < n; ++i) {
    const float gi = g[i] + wd * p[i];
    m[i] = b1 * m[i] + (1 - b1) * gi;
    v[i] = b2 * v[i] + (1 - b2) * gi * gi;
    p[i] -= float(lr * (m[i] / c1) / (std::sqrt(v[i] / c2) + eps));
  }
}
inline uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
inline void uniform_bits(uint32_t* out, size_t n, uint64_t seed, uint64_t stream, uint64_t counter) {
  for (size_t i = 0; i < n; ++i) out[i] = uint32_t(mix(mix(seed ^ mix(stream)) + counter + i) >> 32);
}
inline void gaussian(float* out, size_t n, uint64_t seed, uint64_t stream, uint64_t counter) {
  for (size_t i = 0; i < n; ++i) {
    const uint64_t z = mix(mix(seed ^ mix(stream + 0x51)) + counter + i);
    const double u1 = (double(z >> 40) + 0.5) / 16777216.0;
    const double u2 = (double((z >> 16) & 0xFFFFFF) + 0.5) / 16777216.0;
    out[i] = float(std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
}
inline void sgld(float* th, const float* g, size_t n, float eta, float T, uint64_t seed,
                 uint64_t stream, uint64_t counter) {
  std::vector<float> xi(n);
  gaussian(xi.data(), n, seed, stream, counter);
  const float s = std::sqrt(2 * eta * T);
  for (size_t i = 0; i < n; ++i) th[i] += -eta * g[i] + s * xi[i];
}
inline double sum(const float* x, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += x[i];
  return s;
}
inline double dot(const float* x, const float* y, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += double(x[i]) * y[i];
  return s;
}

}  // namespace local

// The registry's variant of each kernel the copy task uses, else the local stand-in.
// `missing` lists the kernels that fell back.
inline pl_kernel_table kernel_table(const std::string& target = "", std::string* missing = nullptr) {
  pl_kernel_table t;
  std::memset(&t, 0, sizeof t);
  t.struct_size = sizeof t;
  t.num_kernels = pl::kNumKernels;
  t.target = "test";
#define PL_KERNEL(kname, Camel, ret, params)                                                   \
  if (const pl::Variant* v = pl::selected_variant(int(pl::KernelId::kname), target)) {       \
    t.kname = reinterpret_cast<ret(*) params>(v->fn);                                         \
    t.variant.kname = v->name.c_str();                                                        \
  }
#include "phaselab/kernels.def"
#undef PL_KERNEL
#define PL_FALLBACK(kname)                                 \
  if (!t.kname) {                                          \
    t.kname = &local::kname;                               \
    t.variant.kname = "local." #kname;                     \
    if (missing) *missing += std::string(#kname) + " ";    \
  }
  PL_FALLBACK(softmax_rows)
  PL_FALLBACK(softmax_rows_bwd)
  PL_FALLBACK(posattn)
  PL_FALLBACK(posattn_bwd)
  PL_FALLBACK(adam)
  PL_FALLBACK(sgld)
  PL_FALLBACK(gaussian)
  PL_FALLBACK(uniform_bits)
  PL_FALLBACK(sum)
  PL_FALLBACK(dot)
#undef PL_FALLBACK
  return t;
}

}  // namespace copytest
