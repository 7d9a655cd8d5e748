// SPDX-License-Identifier: Apache-2.0
// softmax_rows / softmax_rows_bwd: every runnable variant against a double-precision oracle
// written here (not the scalar variant), and the backward pass against central finite
// differences of the double forward.
//
// Budget (docs/kernels.md): relative error <= 1e-6 per element, checked as atol + rtol |ref| with
// rtol = 1e-6 and atol = 1e-35: probabilities that small lie within a factor ~1000 of float's
// subnormal range (1.2e-38), where e^t underflows and no relative accuracy is possible.
#include <algorithm>
#include <cmath>
#include <limits>

#include "tests/support.hpp"

namespace {

using SoftmaxFn = decltype(&pl::scalar::SoftmaxRows);
using SoftmaxBwdFn = decltype(&pl::scalar::SoftmaxRowsBwd);
constexpr double kRtol = 1e-6;
constexpr double kAtol = 1e-35;

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

// dx = scale * y .* (dy - s), s = rowsum(dy .* y), in double. Also returns, per element, the
// error budget: 1e-6 relative to |dx| plus the error that s itself may carry, 1e-6 relative to the
// magnitude of its terms (|scale| y sum |dy y|). Without the second term the budget is not
// attainable where dy[c] and s agree to more digits than even a double sum carries.
std::vector<double> softmax_bwd_ref(const std::vector<float>& y, const std::vector<float>& dy,
                                    size_t rows, size_t cols, float scale, int causal,
                                    std::vector<double>* tol) {
  std::vector<double> dx(rows * cols, 0.0);
  tol->assign(rows * cols, kAtol);
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
      (*tol)[i] += kRtol * (std::fabs(dx[i]) + std::fabs(double(scale) * y[i]) * s_mag);
    }
  }
  return dx;
}

// |got - ref| <= tol per element; reports the worst.
void check_within(const char* what, const float* got, const std::vector<double>& ref,
                  const std::vector<double>& tol) {
  size_t worst = 0, bad = 0;
  double worst_ratio = -1;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double ratio = std::isfinite(got[i]) ? std::fabs(got[i] - ref[i]) / tol[i] : INFINITY;
    if (!(ratio <= 1)) ++bad;
    if (!(ratio <= worst_ratio)) worst_ratio = ratio, worst = i;
  }
  INFO(what << ": " << bad << " outside; worst at " << worst << " got " << got[worst] << " ref "
            << ref[worst] << " tol " << tol[worst]);
  CHECK(bad == 0);
}

std::vector<float> to_float(const std::vector<double>& v) {
  return std::vector<float>(v.begin(), v.end());
}

struct Case {
  float lo, hi, scale;
};

}  // namespace

TEST_CASE("softmax_rows: every variant vs the double oracle, all widths, masks, scales") {
  // Inputs near 0, in [90, 100] (naive exp would overflow), and spread so wide that most
  // probabilities are tiny (exercises the exponent's accuracy far from the maximum).
  const Case cases[] = {{-4.f, 4.f, 1.f},
                        {90.f, 100.f, 1.f},
                        {90.f, 100.f, 0.3f},
                        {-30.f, 30.f, 2.7f},
                        {-3.f, 3.f, -0.7f}};
  for (const auto* v : pl::test::runnable(pl::KernelId::softmax_rows)) {
    CAPTURE(v->name);
    auto fn = pl::as<SoftmaxFn>(*v);
    for (size_t cols : pl::test::sizes_around_widths(512)) {
      for (int causal : {0, 1}) {
        // Causal: enough rows that every prefix length up to 40 occurs, plus rows past cols.
        const size_t rows = causal ? std::min<size_t>(cols + 3, 40) : 3;
        for (const Case& k : cases) {
          CAPTURE(cols);
          CAPTURE(causal);
          CAPTURE(k.lo);
          CAPTURE(k.scale);
          auto x = pl::test::uniform(rows * cols, k.lo, k.hi, uint32_t(cols * 31 + causal));
          std::vector<float> y(rows * cols + 1, -1.f);  // sentinel after the end must survive
          fn(x.data(), y.data(), rows, cols, k.scale, causal);
          const auto ref = softmax_ref(x, rows, cols, k.scale, causal);
          pl::test::check_close("softmax_rows", y.data(), ref.data(), rows * cols, kAtol, kRtol);
          CHECK(y[rows * cols] == -1.f);
          // In place (x == y) gives the same numbers.
          fn(x.data(), x.data(), rows, cols, k.scale, causal);
          CHECK(std::equal(x.begin(), x.end(), y.begin()));
        }
      }
    }
  }
}

TEST_CASE("softmax_rows: any finite input, including extremes") {
  const float big = std::numeric_limits<float>::max();
  for (const auto* v : pl::test::runnable(pl::KernelId::softmax_rows)) {
    CAPTURE(v->name);
    auto fn = pl::as<SoftmaxFn>(*v);
    for (size_t cols : {size_t(5), size_t(16), size_t(37)}) {
      CAPTURE(cols);
      std::vector<float> x(cols);
      for (size_t c = 0; c < cols; ++c)
        x[c] = (c % 3 == 0 ? -big : c % 3 == 1 ? big : 1e30f) * (c % 2 ? 1 : -1);
      x[cols / 2] = big;
      std::vector<float> y(cols);
      fn(x.data(), y.data(), 1, cols, 1.f, 0);
      const auto ref = softmax_ref(x, 1, cols, 1.f, 0);
      pl::test::check_close("softmax_rows extremes", y.data(), ref.data(), cols, kAtol, kRtol);
      // All equal and very negative: uniform.
      std::vector<float> z(cols, -1e30f);
      fn(z.data(), z.data(), 1, cols, 1.f, 0);
      for (float p : z) CHECK(pl::test::close(p, 1.0 / double(cols), kAtol, kRtol));
    }
  }
}

TEST_CASE("softmax_rows_bwd: every variant vs the double formula") {
  const Case cases[] = {
      {-4.f, 4.f, 1.f}, {90.f, 100.f, 0.125f}, {-30.f, 30.f, 2.7f}, {-3.f, 3.f, -0.7f}};
  for (const auto* v : pl::test::runnable(pl::KernelId::softmax_rows_bwd)) {
    CAPTURE(v->name);
    auto fn = pl::as<SoftmaxBwdFn>(*v);
    for (size_t cols : pl::test::sizes_around_widths(512)) {
      for (int causal : {0, 1}) {
        const size_t rows = causal ? std::min<size_t>(cols + 3, 40) : 3;
        for (const Case& k : cases) {
          CAPTURE(cols);
          CAPTURE(causal);
          CAPTURE(k.lo);
          CAPTURE(k.scale);
          const auto x = pl::test::uniform(rows * cols, k.lo, k.hi, uint32_t(cols * 7 + causal));
          const auto y = to_float(softmax_ref(x, rows, cols, k.scale, causal));
          auto dy = pl::test::uniform(rows * cols, -1.f, 1.f, uint32_t(cols * 13 + causal));
          // Last row: the entry with the smallest y gets dy = s (rounded to float), so that
          // dy - s cancels to its last bits there.
          {
            const size_t r = rows - 1, n = active(r, cols, causal);
            const float* yr = y.data() + r * cols;
            float* dyr = dy.data() + r * cols;
            const size_t c0 = size_t(std::min_element(yr, yr + n) - yr);
            double rest = 0;  // s without the c0 term; dy[c0] = rest / (1 - y[c0]) solves dy = s
            for (size_t c = 0; c < n; ++c)
              if (c != c0) rest += double(dyr[c]) * yr[c];
            if (n > 1) dyr[c0] = float(rest / (1.0 - yr[c0]));  // y[c0] <= 1/2 here
          }
          std::vector<double> tol;
          const auto ref = softmax_bwd_ref(y, dy, rows, cols, k.scale, causal, &tol);
          std::vector<float> dx(rows * cols + 1, -1.f);
          fn(y.data(), dy.data(), dx.data(), rows, cols, k.scale, causal);
          check_within("softmax_rows_bwd", dx.data(), ref, tol);
          CHECK(dx[rows * cols] == -1.f);
          // dx may alias dy.
          fn(y.data(), dy.data(), dy.data(), rows, cols, k.scale, causal);
          CHECK(std::equal(dy.begin(), dy.end(), dx.begin()));
        }
      }
    }
  }
}

TEST_CASE("softmax_rows_bwd: matches central finite differences of the double forward") {
  // Objective L(x) = sum dy .* softmax(scale x); dL/dx from the kernel, given y = softmax(x).
  // Error model: the kernel sees y rounded to float (relative 6e-8 per entry), so compare with
  // 1e-6 relative to the magnitude of the terms, |scale| y (|dy| + sum |dy y|), plus the finite
  // difference truncation error (h = 1e-4: ~h^2 |f'''| < 1e-8).
  for (const auto* v : pl::test::runnable(pl::KernelId::softmax_rows_bwd)) {
    CAPTURE(v->name);
    auto fn = pl::as<SoftmaxBwdFn>(*v);
    for (size_t cols : {size_t(4), size_t(9), size_t(16), size_t(33)}) {
      for (int causal : {0, 1}) {
        CAPTURE(cols);
        CAPTURE(causal);
        const size_t rows = 5;
        const float scale = 0.6f;
        const auto x = pl::test::uniform(rows * cols, -2.f, 2.f, uint32_t(cols + 100 * causal));
        const auto dy = pl::test::uniform(rows * cols, -1.f, 1.f, uint32_t(cols + 7));
        const auto y = to_float(softmax_ref(x, rows, cols, scale, causal));
        std::vector<float> dx(rows * cols);
        fn(y.data(), dy.data(), dx.data(), rows, cols, scale, causal);
        auto objective = [&](const std::vector<double>& xd) {
          double l = 0;
          for (size_t r = 0; r < rows; ++r) {
            const size_t n = active(r, cols, causal);
            double m = -INFINITY, sum = 0;
            for (size_t c = 0; c < n; ++c) m = std::max(m, scale * xd[r * cols + c]);
            for (size_t c = 0; c < n; ++c) sum += std::exp(scale * xd[r * cols + c] - m);
            for (size_t c = 0; c < n; ++c)
              l += dy[r * cols + c] * std::exp(scale * xd[r * cols + c] - m) / sum;
          }
          return l;
        };
        std::vector<double> xd(x.begin(), x.end());
        const double h = 1e-4;
        for (size_t r = 0; r < rows; ++r) {
          const size_t n = active(r, cols, causal);
          double mag = 0;
          for (size_t c = 0; c < n; ++c)
            mag += std::fabs(double(dy[r * cols + c]) * y[r * cols + c]);
          for (size_t c = 0; c < cols; ++c) {
            const size_t i = r * cols + c;
            const double x0 = xd[i];
            xd[i] = x0 + h;
            const double lp = objective(xd);
            xd[i] = x0 - h;
            const double lm = objective(xd);
            xd[i] = x0;
            const double fd = (lp - lm) / (2 * h);
            const double tol = 1e-6 * scale * y[i] * (std::fabs(dy[i]) + mag) + 1e-8;
            CAPTURE(r);
            CAPTURE(c);
            CHECK(std::fabs(dx[i] - fd) <= tol);
            if (c >= n) CHECK(dx[i] == 0.f);  // masked: no gradient, written as 0
          }
        }
      }
    }
  }
}
