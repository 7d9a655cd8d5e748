// SPDX-License-Identifier: Apache-2.0
// layernorm, layernorm_bwd: harness cases (kernels/harness/harness.hpp) against a double oracle
// written here: every width around the vector widths, rows near 0, near 95 and near 1e4 (a
// constant last row: variance 0), the accumulating backward pass from nonzero starting values
// (and d = 1030, wider than layernorm_hwy.cc's fused dgamma/dbeta buffer), and the backward pass
// against central finite differences of the double forward. Benchmarks: residual-stream shapes
// 512 x 32, 1024 x 32 and 1024 x 64 (the Markov model's calls: a chunk of 1024 rows of d_model 32
// or 64), 8192 x 64 and 1024 x 256.
//
// Budget (docs/kernels.md): relative error <= 1e-6 per element. y = xhat gamma + beta and the
// backward formulas are sums of terms that may cancel, so each element's budget is 1e-6 of the
// magnitude of its terms (for y: |xhat gamma| + |beta|); where nothing cancels this is 1e-6 |ref|.
#include <algorithm>
#include <cmath>

#include "kernels/harness/harness.hpp"

namespace {

using pl::test::out;
using pl::test::Output;
constexpr double kRtol = 1e-6;
constexpr double kAtol = 1e-35;
constexpr float kEps = 1e-5f;

struct Forward {
  std::vector<double> y, y_mag, mean, rstd;
};

// The oracle: exact double mean and variance (two passes).
Forward forward_ref(const std::vector<double>& x, const std::vector<double>& gamma,
                    const std::vector<double>& beta, size_t rows, size_t d, double eps) {
  Forward f;
  f.y.resize(rows * d);
  f.y_mag.resize(rows * d);
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
      f.y_mag[r * d + j] = std::fabs(t) + std::fabs(beta[j]);
    }
  }
  return f;
}

struct Backward {
  std::vector<double> dx, dx_mag, dgamma, dgamma_mag, dbeta, dbeta_mag;
};

// The oracle of the accumulating backward pass given the saved float mean and rstd, and the
// magnitude of every output's terms (the starting value included).
Backward backward_ref(const std::vector<float>& dy, const std::vector<float>& x,
                      const std::vector<float>& gamma, const std::vector<float>& mean,
                      const std::vector<float>& rstd, const std::vector<float>& dx0,
                      const std::vector<float>& dgamma0, const std::vector<float>& dbeta0,
                      size_t rows, size_t d) {
  Backward b;
  // The starting arrays may be longer (guards); only rows x d and d entries are used.
  b.dx.assign(dx0.begin(), dx0.begin() + long(rows * d));
  b.dgamma.assign(dgamma0.begin(), dgamma0.begin() + long(d));
  b.dbeta.assign(dbeta0.begin(), dbeta0.begin() + long(d));
  b.dx_mag.resize(rows * d);
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
      b.dx_mag[i] = std::fabs(dx0[i]) + rs * (std::fabs(g) + mg_abs + std::fabs(xhat) * mgx_abs);
    }
  }
  for (size_t j = 0; j < d; ++j) {
    b.dgamma_mag.push_back(std::fabs(dgamma0[j]) + dgamma_mag[j]);
    b.dbeta_mag.push_back(std::fabs(dbeta0[j]) + dbeta_mag[j]);
  }
  return b;
}

struct Fwd {
  size_t rows, d;
  std::vector<float> x, gamma, beta, y, mean, rstd;
  Forward ref;
};

constexpr float kGuard = -1.f;

void add_forward(const std::string& label, size_t rows, size_t d, float lo, float hi,
                 bool constant_last_row, uint32_t seed, uint32_t param_seed, pl::test::Use use) {
  const size_t n = rows * d;
  pl::test::add_case<Fwd>(
      {pl::KernelId::layernorm, label, kAtol, kRtol, {double(n), 0, 4.0 * (2 * n + 2 * d)}, use},
      [=](bool reference) {
        Fwd f{rows,
              d,
              pl::test::uniform(n, lo, hi, seed),
              pl::test::uniform(d, 0.5f, 1.5f, param_seed),
              pl::test::uniform(d, -1.f, 1.f, param_seed + 3),
              std::vector<float>(n + 1, kGuard),
              std::vector<float>(rows + 1, kGuard),
              std::vector<float>(rows + 1, kGuard),
              {}};
        if (constant_last_row)  // variance 0
          std::fill(f.x.end() - long(d), f.x.end(), (lo + hi) / 2 + 0.25f);
        if (reference)
          f.ref = forward_ref(pl::test::to_double(f.x), pl::test::to_double(f.gamma),
                              pl::test::to_double(f.beta), rows, d, kEps);
        return f;
      },
      [](Fwd& f, const pl::Variant& v) {
        pl::as<decltype(&pl::scalar::Layernorm)>(v)(f.x.data(), f.gamma.data(), f.beta.data(),
                                                    f.y.data(), f.mean.data(), f.rstd.data(),
                                                    f.rows, f.d, kEps);
      },
      [n, rows](Fwd& f) {
        return std::vector<Output>{
            out("y", f.y.data(), f.ref.y.data(), n).scaled(f.ref.y_mag.data()),
            out("mean", f.mean.data(), f.ref.mean.data(), rows).tol(0, kRtol),
            out("rstd", f.rstd.data(), f.ref.rstd.data(), rows).tol(0, kRtol),
            pl::test::holds("nothing written past the ends",
                            f.y[n] == kGuard && f.mean[rows] == kGuard && f.rstd[rows] == kGuard)};
      });
}

struct Bwd {
  size_t rows = 0, d = 0;
  std::vector<float> x, gamma, dy, mean, rstd, dx, dgamma, dbeta;
  Backward ref;
  float dx_end = 0, dgamma_end = 0, dbeta_end = 0;
};

// Inputs of the backward pass: mean and rstd from the double forward rounded to float, as the
// forward pass saves them; dx, dgamma, dbeta start at `start` (nonzero: the kernel must add).
Bwd bwd_inputs(size_t rows, size_t d, float lo, float hi, uint32_t seed, uint32_t pseed,
               bool nonzero_start) {
  const size_t n = rows * d;
  Bwd b;
  b.rows = rows;
  b.d = d;
  b.x = pl::test::uniform(n, lo, hi, seed);
  b.gamma = pl::test::uniform(d, 0.5f, 1.5f, pseed + 1);
  b.dy = pl::test::uniform(n, -1.f, 1.f, pseed + (nonzero_start ? 4 : 3));
  const auto beta = pl::test::uniform(d, -1.f, 1.f, pseed + 2);
  const auto fwd = forward_ref(pl::test::to_double(b.x), pl::test::to_double(b.gamma),
                               pl::test::to_double(beta), rows, d, kEps);
  b.mean = pl::test::to_float(fwd.mean);
  b.rstd = pl::test::to_float(fwd.rstd);
  if (nonzero_start) {
    b.dx = pl::test::uniform(n + 1, -0.5f, 0.5f, pseed + 5);
    b.dgamma = pl::test::uniform(d + 1, -0.5f, 0.5f, pseed + 6);
    b.dbeta = pl::test::uniform(d + 1, -0.5f, 0.5f, pseed + 7);
  } else {
    b.dx.assign(n + 1, 0.f);
    b.dgamma.assign(d + 1, 0.f);
    b.dbeta.assign(d + 1, 0.f);
  }
  b.dx_end = b.dx.back();
  b.dgamma_end = b.dgamma.back();
  b.dbeta_end = b.dbeta.back();
  return b;
}

void run_bwd(Bwd& b, const pl::Variant& v) {
  pl::as<decltype(&pl::scalar::LayernormBwd)>(v)(b.dy.data(), b.x.data(), b.gamma.data(),
                                                 b.mean.data(), b.rstd.data(), b.dx.data(),
                                                 b.dgamma.data(), b.dbeta.data(), b.rows, b.d);
}

std::vector<Output> bwd_outputs(Bwd& b, const std::string& suffix) {
  const size_t n = b.rows * b.d;
  return {
      out("dx" + suffix, b.dx.data(), b.ref.dx.data(), n).scaled(b.ref.dx_mag.data()),
      out("dgamma" + suffix, b.dgamma.data(), b.ref.dgamma.data(), b.d)
          .scaled(b.ref.dgamma_mag.data()),
      out("dbeta" + suffix, b.dbeta.data(), b.ref.dbeta.data(), b.d).scaled(b.ref.dbeta_mag.data()),
      pl::test::holds("nothing written past the ends", b.dx.back() == b.dx_end &&
                                                           b.dgamma.back() == b.dgamma_end &&
                                                           b.dbeta.back() == b.dbeta_end)};
}

void add_backward(const std::string& label, size_t rows, size_t d, float lo, float hi,
                  uint32_t seed, uint32_t pseed, pl::test::Use use) {
  const size_t n = rows * d;
  pl::test::add_case<Bwd>(
      {pl::KernelId::layernorm_bwd,
       label,
       kAtol,
       kRtol,
       {double(n), 0, 4.0 * (4 * n + 6 * d)},
       use},
      [=](bool reference) {
        Bwd b = bwd_inputs(rows, d, lo, hi, seed, pseed, true);
        if (reference)
          b.ref =
              backward_ref(b.dy, b.x, b.gamma, b.mean, b.rstd, b.dx, b.dgamma, b.dbeta, rows, d);
        return b;
      },
      run_bwd, [](Bwd& b) { return bwd_outputs(b, ""); });
}

// The backward pass against central differences (h = 1e-4) of L(x, gamma, beta) = sum dy .*
// layernorm(x) in double (exact mean and variance). The kernel sees mean and rstd rounded to
// float, and the difference quotient has truncation error ~h^2 |L'''|, so: 1e-8 + 2e-6 of the
// magnitude of the gradient's terms.
void add_finite_differences(size_t d) {
  const size_t rows = 3, n = rows * d;
  pl::test::add_case<Bwd>(
      {pl::KernelId::layernorm_bwd,
       "fd/rows:3/d:" + std::to_string(d),
       1e-8 + 2 * kAtol,
       2 * kRtol,
       {double(n)},
       pl::test::Use::test},
      [=](bool) {
        Bwd b = bwd_inputs(rows, d, -1.5f, 2.5f, uint32_t(d), uint32_t(d), false);
        // Term magnitudes from the formula oracle (zero starting values).
        b.ref = backward_ref(b.dy, b.x, b.gamma, b.mean, b.rstd, b.dx, b.dgamma, b.dbeta, rows, d);
        const auto beta = pl::test::uniform(d, -1.f, 1.f, uint32_t(d + 2));
        auto xd = pl::test::to_double(b.x), gd = pl::test::to_double(b.gamma),
             bd = pl::test::to_double(beta);
        auto objective = [&]() {
          const auto f = forward_ref(xd, gd, bd, rows, d, kEps);
          double l = 0;
          for (size_t i = 0; i < n; ++i) l += b.dy[i] * f.y[i];
          return l;
        };
        const double h = 1e-4;
        auto fd = [&](double& p) { return pl::test::central_difference(p, objective, h); };
        for (size_t i = 0; i < n; ++i) b.ref.dx[i] = fd(xd[i]);
        for (size_t j = 0; j < d; ++j) b.ref.dgamma[j] = fd(gd[j]);
        for (size_t j = 0; j < d; ++j) b.ref.dbeta[j] = fd(bd[j]);
        return b;
      },
      run_bwd, [](Bwd& b) { return bwd_outputs(b, " vs finite differences"); });
}

}  // namespace

PL_KERNEL_CASES {
  using pl::test::num;
  struct Inputs {
    float offset, halfwidth;
  };
  const Inputs inputs[] = {{0.f, 3.f}, {95.f, 5.f}, {1e4f, 1.f}};
  // 3 rows, and 9: blocks of 2 and 4 rows (layernorm_hwy.cc) and one more.
  for (size_t rows : {size_t(3), size_t(9)})
    for (size_t d : pl::test::sizes_around_widths(512))
      for (const Inputs& k : inputs)
        add_forward("rows:" + std::to_string(rows) + "/d:" + std::to_string(d) +
                        "/x:" + num(k.offset) + "+-" + num(k.halfwidth),
                    rows, d, k.offset - k.halfwidth, k.offset + k.halfwidth, true,
                    uint32_t(d * 5 + rows - 2), uint32_t(d), pl::test::Use::test);
  // 1030: wider than layernorm_hwy.cc's fused dgamma/dbeta buffer (1024), the other code path.
  auto widths = pl::test::sizes_around_widths(512);
  widths.push_back(1030);
  for (size_t d : widths)
    for (const Inputs& k : inputs)
      for (size_t rows : {size_t(1), size_t(5)})
        add_backward("rows:" + std::to_string(rows) + "/d:" + std::to_string(d) +
                         "/x:" + num(k.offset) + "+-" + num(k.halfwidth),
                     rows, d, k.offset - k.halfwidth, k.offset + k.halfwidth,
                     uint32_t(d * 3 + rows), uint32_t(d), pl::test::Use::test);
  for (size_t d : {size_t(4), size_t(9), size_t(16), size_t(33)}) add_finite_differences(d);
  // The benchmark shapes: the model's chunks, 8192 tokens x 64 features and 1024 x 256.
  for (auto [rows, d] :
       {std::pair<size_t, size_t>{512, 32}, {1024, 32}, {1024, 64}, {8192, 64}, {1024, 256}}) {
    const std::string label = std::to_string(rows) + "x" + std::to_string(d);
    add_forward(label, rows, d, -2.f, 2.f, false, 1, 2, pl::test::Use::test_and_bench);
    add_backward(label, rows, d, -2.f, 2.f, 1, 2, pl::test::Use::test_and_bench);
  }
}
