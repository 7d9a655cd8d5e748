// SPDX-License-Identifier: Apache-2.0
// layernorm / layernorm_bwd: every runnable variant against a double-precision oracle written
// here, and the backward pass against central finite differences of the double forward.
//
// Budget (docs/kernels.md): relative error <= 1e-6 per element. y = xhat gamma + beta and the
// backward formulas are sums of terms that may cancel, so each element's budget is 1e-6 of the
// magnitude of its terms (for y: |xhat gamma| + |beta|); where nothing cancels this is 1e-6 |ref|.
#include <algorithm>
#include <cmath>

#include "tests/support.hpp"

namespace {

using LnFn = decltype(&pl::scalar::Layernorm);
using LnBwdFn = decltype(&pl::scalar::LayernormBwd);
constexpr double kRtol = 1e-6;
constexpr double kAtol = 1e-35;
constexpr float kEps = 1e-5f;

struct Forward {
  std::vector<double> y, y_tol, mean, rstd;
};

// The oracle: exact double mean and variance (two passes).
Forward forward_ref(const std::vector<double>& x, const std::vector<double>& gamma,
                    const std::vector<double>& beta, size_t rows, size_t d, double eps) {
  Forward f;
  f.y.resize(rows * d);
  f.y_tol.resize(rows * d);
  for (size_t r = 0; r < rows; ++r) {
    double m = 0, var = 0;
    for (size_t j = 0; j < d; ++j) m += x[r * d + j];
    m /= double(d);
    for (size_t j = 0; j < d; ++j) var += (x[r * d + j] - m) * (x[r * d + j] - m);
    const double rs = 1 / std::sqrt(var / double(d) + eps);
    f.mean.push_back(m);
    f.rstd.push_back(rs);
    for (size_t j = 0; j < d; ++j) {
      const double t = (x[r * d + j] - m) * rs * gamma[j];
      f.y[r * d + j] = t + beta[j];
      f.y_tol[r * d + j] = kAtol + kRtol * (std::fabs(t) + std::fabs(beta[j]));
    }
  }
  return f;
}

std::vector<double> to_double(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// |got - ref| <= tol per element; reports the first few failures.
void check_within(const std::string& what, const float* got, const std::vector<double>& ref,
                  const std::vector<double>& tol) {
  size_t bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!(std::fabs(got[i] - ref[i]) <= tol[i]) && ++bad <= 3) {
      INFO(what << " at " << i << ": got " << got[i] << " ref " << ref[i] << " tol " << tol[i]);
      CHECK(false);
    }
  }
  CHECK(bad == 0);
}

struct Case {
  float offset, halfwidth;
};
const Case kCases[] = {{0.f, 3.f}, {95.f, 5.f}, {1e4f, 1.f}};

}  // namespace

TEST_CASE("layernorm: every variant vs the double oracle") {
  for (const auto* v : pl::test::runnable(pl::KernelId::layernorm)) {
    CAPTURE(v->name);
    auto fn = pl::as<LnFn>(*v);
    for (size_t d : pl::test::sizes_around_widths(512)) {
      for (const Case& k : kCases) {
        CAPTURE(d);
        CAPTURE(k.offset);
        const size_t rows = 3;
        auto x = pl::test::uniform(rows * d, k.offset - k.halfwidth, k.offset + k.halfwidth,
                                   uint32_t(d * 5 + 1));
        std::fill(x.begin() + 2 * d, x.end(), k.offset + 0.25f);  // last row constant: var = 0
        const auto gamma = pl::test::uniform(d, 0.5f, 1.5f, uint32_t(d));
        const auto beta = pl::test::uniform(d, -1.f, 1.f, uint32_t(d + 3));
        std::vector<float> y(rows * d + 1, -1.f), mean(rows + 1, -1.f), rstd(rows + 1, -1.f);
        fn(x.data(), gamma.data(), beta.data(), y.data(), mean.data(), rstd.data(), rows, d, kEps);
        const auto ref =
            forward_ref(to_double(x), to_double(gamma), to_double(beta), rows, d, kEps);
        check_within("layernorm y", y.data(), ref.y, ref.y_tol);
        for (size_t r = 0; r < rows; ++r) {
          CAPTURE(r);
          CHECK(pl::test::close(mean[r], ref.mean[r], 0, kRtol));
          CHECK(pl::test::close(rstd[r], ref.rstd[r], 0, kRtol));
        }
        CHECK(y[rows * d] == -1.f);  // nothing written past the ends
        CHECK(mean[rows] == -1.f);
        CHECK(rstd[rows] == -1.f);
      }
    }
  }
}

namespace {

struct Backward {
  std::vector<double> dx, dx_tol, dgamma, dgamma_tol, dbeta, dbeta_tol;
};

// The oracle of the accumulating backward pass given the saved float mean and rstd.
Backward backward_ref(const std::vector<float>& dy, const std::vector<float>& x,
                      const std::vector<float>& gamma, const std::vector<float>& mean,
                      const std::vector<float>& rstd, const std::vector<float>& dx0,
                      const std::vector<float>& dgamma0, const std::vector<float>& dbeta0,
                      size_t rows, size_t d) {
  Backward b;
  // The starting arrays may be longer (sentinels); only rows x d and d entries are used.
  b.dx.assign(dx0.begin(), dx0.begin() + long(rows * d));
  b.dgamma.assign(dgamma0.begin(), dgamma0.begin() + long(d));
  b.dbeta.assign(dbeta0.begin(), dbeta0.begin() + long(d));
  b.dx_tol.resize(rows * d);
  std::vector<double> dgamma_mag(d), dbeta_mag(d);
  for (size_t r = 0; r < rows; ++r) {
    const double m = mean[r], rs = rstd[r];
    double mg = 0, mgx = 0, mg_abs = 0, mgx_abs = 0;
    for (size_t j = 0; j < d; ++j) {
      const double xhat = (x[r * d + j] - m) * rs, g = double(dy[r * d + j]) * gamma[j];
      mg += g / double(d);
      mgx += g * xhat / double(d);
      mg_abs += std::fabs(g) / double(d);
      mgx_abs += std::fabs(g * xhat) / double(d);
      b.dgamma[j] += dy[r * d + j] * xhat;
      b.dbeta[j] += dy[r * d + j];
      dgamma_mag[j] += std::fabs(dy[r * d + j] * xhat);
      dbeta_mag[j] += std::fabs(dy[r * d + j]);
    }
    for (size_t j = 0; j < d; ++j) {
      const size_t i = r * d + j;
      const double xhat = (x[i] - m) * rs, g = double(dy[i]) * gamma[j];
      b.dx[i] += rs * (g - mg - xhat * mgx);
      b.dx_tol[i] = kAtol + kRtol * (std::fabs(dx0[i]) +
                                     rs * (std::fabs(g) + mg_abs + std::fabs(xhat) * mgx_abs));
    }
  }
  for (size_t j = 0; j < d; ++j) {
    b.dgamma_tol.push_back(kAtol + kRtol * (std::fabs(dgamma0[j]) + dgamma_mag[j]));
    b.dbeta_tol.push_back(kAtol + kRtol * (std::fabs(dbeta0[j]) + dbeta_mag[j]));
  }
  return b;
}

}  // namespace

TEST_CASE("layernorm_bwd: every variant vs the double formula, accumulating") {
  for (const auto* v : pl::test::runnable(pl::KernelId::layernorm_bwd)) {
    CAPTURE(v->name);
    auto fn = pl::as<LnBwdFn>(*v);
    // 1030: wider than layernorm_hwy.cc's fused dgamma/dbeta buffer (1024), the other code path.
    auto widths = pl::test::sizes_around_widths(512);
    widths.push_back(1030);
    for (size_t d : widths) {
      for (const Case& k : kCases) {
        for (size_t rows : {size_t(1), size_t(5)}) {
          CAPTURE(d);
          CAPTURE(k.offset);
          CAPTURE(rows);
          const auto x = pl::test::uniform(rows * d, k.offset - k.halfwidth, k.offset + k.halfwidth,
                                           uint32_t(d * 3 + rows));
          const auto gamma = pl::test::uniform(d, 0.5f, 1.5f, uint32_t(d + 1));
          const auto beta = pl::test::uniform(d, -1.f, 1.f, uint32_t(d + 2));
          const auto dy = pl::test::uniform(rows * d, -1.f, 1.f, uint32_t(d + 4));
          const auto fwd =
              forward_ref(to_double(x), to_double(gamma), to_double(beta), rows, d, kEps);
          const std::vector<float> mean(fwd.mean.begin(), fwd.mean.end());
          const std::vector<float> rstd(fwd.rstd.begin(), fwd.rstd.end());
          // Nonzero starting values: the kernel must add to them.
          auto dx = pl::test::uniform(rows * d + 1, -0.5f, 0.5f, uint32_t(d + 5));
          auto dgamma = pl::test::uniform(d + 1, -0.5f, 0.5f, uint32_t(d + 6));
          auto dbeta = pl::test::uniform(d + 1, -0.5f, 0.5f, uint32_t(d + 7));
          const float dx_end = dx.back(), dgamma_end = dgamma.back(), dbeta_end = dbeta.back();
          const auto ref = backward_ref(dy, x, gamma, mean, rstd, dx, dgamma, dbeta, rows, d);
          fn(dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), dx.data(), dgamma.data(),
             dbeta.data(), rows, d);
          check_within("layernorm_bwd dx", dx.data(), ref.dx, ref.dx_tol);
          check_within("layernorm_bwd dgamma", dgamma.data(), ref.dgamma, ref.dgamma_tol);
          check_within("layernorm_bwd dbeta", dbeta.data(), ref.dbeta, ref.dbeta_tol);
          CHECK(dx.back() == dx_end);
          CHECK(dgamma.back() == dgamma_end);
          CHECK(dbeta.back() == dbeta_end);
        }
      }
    }
  }
}

TEST_CASE("layernorm_bwd: matches central finite differences of the double forward") {
  // Objective L(x, gamma, beta) = sum dy .* layernorm(x) in double (exact mean and variance).
  // The kernel sees mean and rstd rounded to float, and the difference quotient has truncation
  // error ~h^2 |L'''|, so: 1e-8 + 2e-6 of the magnitude of the gradient's terms.
  for (const auto* v : pl::test::runnable(pl::KernelId::layernorm_bwd)) {
    CAPTURE(v->name);
    auto fn = pl::as<LnBwdFn>(*v);
    for (size_t d : {size_t(4), size_t(9), size_t(16), size_t(33)}) {
      CAPTURE(d);
      const size_t rows = 3;
      const auto x = pl::test::uniform(rows * d, -1.5f, 2.5f, uint32_t(d));
      const auto gamma = pl::test::uniform(d, 0.5f, 1.5f, uint32_t(d + 1));
      const auto beta = pl::test::uniform(d, -1.f, 1.f, uint32_t(d + 2));
      const auto dy = pl::test::uniform(rows * d, -1.f, 1.f, uint32_t(d + 3));
      auto xd = to_double(x), gd = to_double(gamma), bd = to_double(beta);
      const auto fwd = forward_ref(xd, gd, bd, rows, d, kEps);
      const std::vector<float> mean(fwd.mean.begin(), fwd.mean.end());
      const std::vector<float> rstd(fwd.rstd.begin(), fwd.rstd.end());
      std::vector<float> dx(rows * d, 0.f), dgamma(d, 0.f), dbeta(d, 0.f);
      fn(dy.data(), x.data(), gamma.data(), mean.data(), rstd.data(), dx.data(), dgamma.data(),
         dbeta.data(), rows, d);
      // Term magnitudes from the formula oracle (its tolerances are 1e-6 of them).
      const std::vector<float> zx(rows * d, 0.f), zd(d, 0.f);
      const auto mag = backward_ref(dy, x, gamma, mean, rstd, zx, zd, zd, rows, d);
      auto objective = [&]() {
        const auto f = forward_ref(xd, gd, bd, rows, d, kEps);
        double l = 0;
        for (size_t i = 0; i < rows * d; ++i) l += dy[i] * f.y[i];
        return l;
      };
      const double h = 1e-4;
      auto fd = [&](double& p) {
        const double p0 = p;
        p = p0 + h;
        const double lp = objective();
        p = p0 - h;
        const double lm = objective();
        p = p0;
        return (lp - lm) / (2 * h);
      };
      auto check = [&](const char* what, size_t i, float got, double p_fd, double tol_1e6) {
        const double tol = 1e-8 + 2 * tol_1e6;
        if (!(std::fabs(got - p_fd) <= tol)) {
          INFO(what << "[" << i << "]: got " << got << " finite difference " << p_fd);
          CHECK(false);
        }
      };
      for (size_t i = 0; i < rows * d; ++i) check("dx", i, dx[i], fd(xd[i]), mag.dx_tol[i]);
      for (size_t j = 0; j < d; ++j) check("dgamma", j, dgamma[j], fd(gd[j]), mag.dgamma_tol[j]);
      for (size_t j = 0; j < d; ++j) check("dbeta", j, dbeta[j], fd(bd[j]), mag.dbeta_tol[j]);
    }
  }
}
