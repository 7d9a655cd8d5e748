// SPDX-License-Identifier: Apache-2.0
// softmax_rows, softmax_rows_bwd: harness cases (kernels/harness/harness.hpp) against a double
// oracle written here (not the scalar variant): every row length around the vector widths, with
// and without the causal mask, inputs near 0, in [90, 100] (naive exp would overflow) and spread
// so wide that most probabilities are tiny; the backward pass also against central finite
// differences of the double forward. Benchmarks: attention-shaped 256 x 64 and 64 x 512.
//
// Budget (docs/kernels.md): relative error <= 1e-6 per element, checked as atol + rtol |ref| with
// rtol = 1e-6 and atol = 1e-35: probabilities that small lie within a factor ~1000 of float's
// subnormal range (1.2e-38), where e^t underflows and no relative accuracy is possible. The
// backward budget is 1e-6 of the magnitude of its terms (they cancel in dy - rowsum(dy y)).
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/harness/harness.hpp"

namespace {

using pl::test::out;
using pl::test::Output;
constexpr double kRtol = 1e-6;
constexpr double kAtol = 1e-35;
constexpr float kGuard = -1.f;  // one element past the end of every output must keep it

size_t active(size_t r, size_t cols, int causal) { return causal ? std::min(r + 1, cols) : cols; }

// The oracle: softmax(scale * x) per row in double, masked entries 0.
std::vector<double> softmax_ref(const std::vector<float>& x, size_t rows, size_t cols, float scale,
                                int causal) {
  std::vector<double> y(rows * cols, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    const size_t n = active(r, cols, causal);
    double m = -INFINITY, sum = 0;
    for (size_t c = 0; c < n; ++c) m = std::max(m, double(scale) * x[r * cols + c]);
    for (size_t c = 0; c < n; ++c)
      sum += y[r * cols + c] = std::exp(double(scale) * x[r * cols + c] - m);
    for (size_t c = 0; c < n; ++c) y[r * cols + c] /= sum;
  }
  return y;
}

// dx = scale * y .* (dy - s), s = rowsum(dy .* y), in double, and per element the magnitude its
// budget scales: |dx| plus the terms of s (|scale| y sum |dy y|). Without the second term the
// budget is not attainable where dy[c] and s agree to more digits than even a double sum carries.
std::vector<double> softmax_bwd_ref(const std::vector<float>& y, const std::vector<float>& dy,
                                    size_t rows, size_t cols, float scale, int causal,
                                    std::vector<double>* mag) {
  std::vector<double> dx(rows * cols, 0.0);
  mag->assign(rows * cols, 0.0);
  for (size_t r = 0; r < rows; ++r) {
    const size_t n = active(r, cols, causal);
    double s = 0, s_mag = 0;
    for (size_t c = 0; c < n; ++c) {
      s += double(dy[r * cols + c]) * y[r * cols + c];
      s_mag += std::fabs(double(dy[r * cols + c]) * y[r * cols + c]);
    }
    for (size_t c = 0; c < n; ++c) {
      const size_t i = r * cols + c;
      dx[i] = double(scale) * y[i] * (double(dy[i]) - s);
      (*mag)[i] = std::fabs(dx[i]) + std::fabs(double(scale) * y[i]) * s_mag;
    }
  }
  return dx;
}

struct Shape {
  size_t rows, cols;
  int causal;
  float lo, hi, scale;
  uint32_t seed;
};

struct Fwd {
  Shape s;
  std::vector<float> x, y;
  std::vector<double> ref;
};

void add_forward(const std::string& label, Shape sh, pl::test::Use use) {
  const size_t n = sh.rows * sh.cols;
  pl::test::add_case<Fwd>(
      {pl::KernelId::softmax_rows, label, kAtol, kRtol, {double(n), 0, 8.0 * n}, use},
      [sh, n](bool reference) {
        Fwd f{sh, pl::test::uniform(n, sh.lo, sh.hi, sh.seed), std::vector<float>(n + 1), {}};
        f.y[n] = kGuard;
        if (reference) f.ref = softmax_ref(f.x, sh.rows, sh.cols, sh.scale, sh.causal);
        return f;
      },
      [](Fwd& f, const pl::Variant& v) {
        pl::as<decltype(&pl::scalar::SoftmaxRows)>(v)(f.x.data(), f.y.data(), f.s.rows, f.s.cols,
                                                      f.s.scale, f.s.causal);
      },
      [n](Fwd& f) {
        return std::vector<Output>{out("y", f.y.data(), f.ref.data(), n),
                                   pl::test::holds("guard past y", f.y[n] == kGuard)};
      });
}

struct Bwd {
  Shape s;
  std::vector<float> y, dy, dx;
  std::vector<double> ref, mag;
};

// Inputs of the backward pass: y = the double forward of x rounded to float, dy uniform; with
// `cancel` the smallest-y entry of the last row gets dy = s, so dy - s cancels to its last bits.
Bwd bwd_inputs(Shape sh, uint32_t dy_seed, bool cancel) {
  const size_t n = sh.rows * sh.cols;
  Bwd b{sh, {}, pl::test::uniform(n, -1.f, 1.f, dy_seed), std::vector<float>(n + 1), {}, {}};
  b.y = pl::test::to_float(softmax_ref(pl::test::uniform(n, sh.lo, sh.hi, sh.seed), sh.rows,
                                       sh.cols, sh.scale, sh.causal));
  b.dx[n] = kGuard;
  if (cancel) {
    const size_t r = sh.rows - 1, len = active(r, sh.cols, sh.causal);
    const float* yr = b.y.data() + r * sh.cols;
    float* dyr = b.dy.data() + r * sh.cols;
    const size_t c0 = size_t(std::min_element(yr, yr + len) - yr);
    double rest = 0;  // s without the c0 term; dy[c0] = rest / (1 - y[c0]) solves dy = s
    for (size_t c = 0; c < len; ++c)
      if (c != c0) rest += double(dyr[c]) * yr[c];
    if (len > 1) dyr[c0] = float(rest / (1.0 - yr[c0]));  // y[c0] <= 1/2 here
  }
  return b;
}

void run_bwd(Bwd& b, const pl::Variant& v) {
  pl::as<decltype(&pl::scalar::SoftmaxRowsBwd)>(v)(b.y.data(), b.dy.data(), b.dx.data(), b.s.rows,
                                                   b.s.cols, b.s.scale, b.s.causal);
}

void add_backward(const std::string& label, Shape sh, uint32_t dy_seed, bool cancel,
                  pl::test::Use use) {
  const size_t n = sh.rows * sh.cols;
  pl::test::add_case<Bwd>(
      {pl::KernelId::softmax_rows_bwd, label, kAtol, kRtol, {double(n), 0, 12.0 * n}, use},
      [sh, dy_seed, cancel](bool reference) {
        Bwd b = bwd_inputs(sh, dy_seed, cancel);
        if (reference)
          b.ref = softmax_bwd_ref(b.y, b.dy, sh.rows, sh.cols, sh.scale, sh.causal, &b.mag);
        return b;
      },
      run_bwd,
      [n](Bwd& b) {
        return std::vector<Output>{out("dx", b.dx.data(), b.ref.data(), n).scaled(b.mag.data()),
                                   pl::test::holds("guard past dx", b.dx[n] == kGuard)};
      });
}

// The backward pass against central differences (h = 1e-4) of L(x) = sum dy .* softmax(scale x)
// in double. The kernel sees y rounded to float (relative 6e-8 per entry), so the budget is 1e-6
// of the terms' magnitude, scale y (|dy| + sum |dy y|), plus the truncation error (~h^2 |f'''| <
// 1e-8). Masked entries must be written as 0.
void add_finite_differences(size_t cols, int causal) {
  const Shape sh{5, cols, causal, -2.f, 2.f, 0.6f, uint32_t(cols + 100 * causal)};
  const size_t rows = sh.rows, n = rows * cols;
  pl::test::add_case<Bwd>(
      {pl::KernelId::softmax_rows_bwd,
       "fd/rows:5/cols:" + std::to_string(cols) + "/causal:" + std::to_string(causal),
       1e-8,
       kRtol,
       {double(n)},
       pl::test::Use::test},
      [sh, rows, cols, causal, n](bool) {
        Bwd b = bwd_inputs(sh, uint32_t(cols + 7), false);
        const auto x = pl::test::uniform(n, sh.lo, sh.hi, sh.seed);
        auto objective = [&](const std::vector<double>& xd) {
          double l = 0;
          for (size_t r = 0; r < rows; ++r) {
            const size_t len = active(r, cols, causal);
            double m = -INFINITY, sum = 0;
            for (size_t c = 0; c < len; ++c) m = std::max(m, sh.scale * xd[r * cols + c]);
            for (size_t c = 0; c < len; ++c) sum += std::exp(sh.scale * xd[r * cols + c] - m);
            for (size_t c = 0; c < len; ++c)
              l += b.dy[r * cols + c] * std::exp(sh.scale * xd[r * cols + c] - m) / sum;
          }
          return l;
        };
        std::vector<double> xd(x.begin(), x.end());
        const double h = 1e-4;
        b.ref.resize(n);
        b.mag.resize(n);
        for (size_t r = 0; r < rows; ++r) {
          double row_mag = 0;
          for (size_t c = 0; c < active(r, cols, causal); ++c)
            row_mag += std::fabs(double(b.dy[r * cols + c]) * b.y[r * cols + c]);
          for (size_t c = 0; c < cols; ++c) {
            const size_t i = r * cols + c;
            b.ref[i] = pl::test::central_difference(
                xd[i], [&] { return objective(xd); }, h);
            b.mag[i] = sh.scale * b.y[i] * (std::fabs(b.dy[i]) + row_mag);
          }
        }
        return b;
      },
      run_bwd,
      [rows, cols, causal, n](Bwd& b) {
        bool masked_zero = true;
        for (size_t r = 0; r < rows; ++r)
          for (size_t c = active(r, cols, causal); c < cols; ++c)
            masked_zero &= b.dx[r * cols + c] == 0.f;
        return std::vector<Output>{
            out("dx vs finite differences", b.dx.data(), b.ref.data(), n).scaled(b.mag.data()),
            pl::test::holds("masked dx written as 0", masked_zero)};
      });
}

// Any finite input, including +-FLT_MAX and 1e30 mixed in one row; and a row all equal and very
// negative (computed in place), which must come out uniform.
void add_extremes(size_t cols) {
  const float big = std::numeric_limits<float>::max();
  std::vector<float> x(cols);
  for (size_t c = 0; c < cols; ++c)
    x[c] = (c % 3 == 0 ? -big : c % 3 == 1 ? big : 1e30f) * (c % 2 ? 1 : -1);
  x[cols / 2] = big;
  pl::test::add_case<Fwd>(
      {pl::KernelId::softmax_rows,
       "extremes/cols:" + std::to_string(cols),
       kAtol,
       kRtol,
       {double(cols)},
       pl::test::Use::test},
      [x, cols](bool) {
        Fwd f{{1, cols, 0, 0, 0, 1.f, 0}, x, std::vector<float>(cols + 1), {}};
        f.y[cols] = kGuard;
        f.ref = softmax_ref(x, 1, cols, 1.f, 0);
        return f;
      },
      [](Fwd& f, const pl::Variant& v) {
        pl::as<decltype(&pl::scalar::SoftmaxRows)>(v)(f.x.data(), f.y.data(), 1, f.s.cols, 1.f, 0);
      },
      [cols](Fwd& f) { return std::vector<Output>{out("y", f.y.data(), f.ref.data(), cols)}; });
  pl::test::add_case<Fwd>(
      {pl::KernelId::softmax_rows,
       "all-equal-in-place/cols:" + std::to_string(cols),
       kAtol,
       kRtol,
       {double(cols)},
       pl::test::Use::test},
      [cols](bool) {
        return Fwd{{1, cols, 0, 0, 0, 1.f, 0},
                   std::vector<float>(cols, -1e30f),
                   {},
                   std::vector<double>(cols, 1.0 / double(cols))};
      },
      [](Fwd& f, const pl::Variant& v) {
        pl::as<decltype(&pl::scalar::SoftmaxRows)>(v)(f.x.data(), f.x.data(), 1, f.s.cols, 1.f, 0);
      },
      [cols](Fwd& f) {
        return std::vector<Output>{out("x (in place)", f.x.data(), f.ref.data(), cols)};
      });
}

}  // namespace

PL_KERNEL_CASES {
  using pl::test::num;
  struct Inputs {
    float lo, hi, scale;
  };
  const Inputs fwd_inputs[] = {{-4.f, 4.f, 1.f},
                               {90.f, 100.f, 1.f},
                               {90.f, 100.f, 0.3f},
                               {-30.f, 30.f, 2.7f},
                               {-3.f, 3.f, -0.7f}};
  const Inputs bwd_inputs[] = {
      {-4.f, 4.f, 1.f}, {90.f, 100.f, 0.125f}, {-30.f, 30.f, 2.7f}, {-3.f, 3.f, -0.7f}};
  for (size_t cols : pl::test::sizes_around_widths(512)) {
    for (int causal : {0, 1}) {
      // Causal: enough rows that every prefix length up to 40 occurs, plus rows past cols.
      const size_t rows = causal ? std::min<size_t>(cols + 3, 40) : 3;
      const std::string shape = "rows:" + std::to_string(rows) + "/cols:" + std::to_string(cols) +
                                "/causal:" + std::to_string(causal);
      for (const Inputs& k : fwd_inputs)
        add_forward(shape + "/x:" + num(k.lo) + ".." + num(k.hi) + "/scale:" + num(k.scale),
                    {rows, cols, causal, k.lo, k.hi, k.scale, uint32_t(cols * 31 + causal)},
                    pl::test::Use::test);
      for (const Inputs& k : bwd_inputs)
        add_backward(shape + "/x:" + num(k.lo) + ".." + num(k.hi) + "/scale:" + num(k.scale),
                     {rows, cols, causal, k.lo, k.hi, k.scale, uint32_t(cols * 7 + causal)},
                     uint32_t(cols * 13 + causal), true, pl::test::Use::test);
    }
  }
  for (size_t cols : {size_t(4), size_t(9), size_t(16), size_t(33)})
    for (int causal : {0, 1}) add_finite_differences(cols, causal);
  for (size_t cols : {size_t(5), size_t(16), size_t(37)}) add_extremes(cols);
  // The benchmark shapes: attention rows of 64 (short sequences) and 512.
  for (auto [rows, cols] : {std::pair<size_t, size_t>{256, 64}, {64, 512}}) {
    const std::string label = std::to_string(rows) + "x" + std::to_string(cols);
    add_forward(label, {rows, cols, 0, -8.f, 8.f, 0.125f, 1}, pl::test::Use::test_and_bench);
    add_backward(label, {rows, cols, 0, -8.f, 8.f, 0.125f, 1}, 2, false,
                 pl::test::Use::test_and_bench);
  }
}
