// SPDX-License-Identifier: Apache-2.0
// attention, attention_bwd: every runnable variant against a double forward / analytic backward
// written here, and the backward also against central finite differences of that forward
// (objective sum(dO .* O)). |err| <= (1e-5 + 1e-5 |ref|) * sqrt(inner dimension).
#include <algorithm>
#include <cmath>
#include <limits>

#include "tests/support.hpp"

using pl::test::runnable;

namespace {

using AttFn = decltype(&pl::scalar::Attention);
using AttBwdFn = decltype(&pl::scalar::AttentionBwd);

struct Shape {
  size_t n, dk, dv;
};

// Dense double copies of the inputs (tight strides).
struct Inputs {
  Shape s;
  bool causal, linear;
  double scale;
  std::vector<double> q, k, v, d_o;  // n x dk, n x dk, n x dv, n x dv
};

// P (n x n), O (n x dv) in double.
void forward(const Inputs& in, std::vector<double>& P, std::vector<double>& O) {
  const size_t n = in.s.n, dk = in.s.dk, dv = in.s.dv;
  P.assign(n * n, 0.0);
  O.assign(n * dv, 0.0);
  for (size_t r = 0; r < n; ++r) {
    const size_t len = in.causal ? r + 1 : n;
    double mx = -INFINITY, sum = 0;
    for (size_t c = 0; c < len; ++c) {
      double s = 0;
      for (size_t t = 0; t < dk; ++t) s += in.q[r * dk + t] * in.k[c * dk + t];
      P[r * n + c] = in.scale * s;
      mx = std::max(mx, P[r * n + c]);
    }
    if (!in.linear) {
      for (size_t c = 0; c < len; ++c) sum += (P[r * n + c] = std::exp(P[r * n + c] - mx));
      for (size_t c = 0; c < len; ++c) P[r * n + c] /= sum;
    }
    for (size_t c = 0; c < len; ++c)
      for (size_t j = 0; j < dv; ++j) O[r * dv + j] += P[r * n + c] * in.v[c * dv + j];
  }
}

double objective(const Inputs& in) {
  std::vector<double> P, O;
  forward(in, P, O);
  double f = 0;
  for (size_t i = 0; i < O.size(); ++i) f += in.d_o[i] * O[i];
  return f;
}

// Analytic gradients of sum(dO .* O) in double.
void backward(const Inputs& in, const std::vector<double>& P, std::vector<double>& dq,
              std::vector<double>& dk, std::vector<double>& dv) {
  const size_t n = in.s.n, dkk = in.s.dk, dvv = in.s.dv;
  dq.assign(n * dkk, 0.0);
  dk.assign(n * dkk, 0.0);
  dv.assign(n * dvv, 0.0);
  std::vector<double> dS(n * n, 0.0);
  for (size_t r = 0; r < n; ++r) {
    const size_t len = in.causal ? r + 1 : n;
    double rowdot = 0;
    for (size_t c = 0; c < len; ++c) {
      double dp = 0;
      for (size_t j = 0; j < dvv; ++j) dp += in.d_o[r * dvv + j] * in.v[c * dvv + j];
      dS[r * n + c] = dp;
      rowdot += dp * P[r * n + c];
      for (size_t j = 0; j < dvv; ++j) dv[c * dvv + j] += P[r * n + c] * in.d_o[r * dvv + j];
    }
    for (size_t c = 0; c < len; ++c) {
      double& x = dS[r * n + c];
      x = in.scale * (in.linear ? x : P[r * n + c] * (x - rowdot));
      for (size_t t = 0; t < dkk; ++t) {
        dq[r * dkk + t] += x * in.k[c * dkk + t];
        dk[c * dkk + t] += x * in.q[r * dkk + t];
      }
    }
  }
}

// Central differences of the objective with respect to every element of x.
std::vector<double> finite_diff(Inputs in, std::vector<double> Inputs::*x) {
  const double h = 1e-4;
  std::vector<double> g((in.*x).size());
  for (size_t i = 0; i < g.size(); ++i) {
    const double x0 = (in.*x)[i];
    (in.*x)[i] = x0 + h;
    const double fp = objective(in);
    (in.*x)[i] = x0 - h;
    const double fm = objective(in);
    (in.*x)[i] = x0;
    g[i] = (fp - fm) / (2 * h);
  }
  return g;
}

// A padded float matrix rows x cols (row stride cols + pad) and its dense double copy.
struct Padded {
  size_t rows, cols, ld;
  std::vector<float> f;
  Padded(size_t r, size_t c, size_t pad, uint32_t seed, float fill = NAN)
      : rows(r), cols(c), ld(c + pad), f(r * (c + pad), fill) {
    auto u = pl::test::uniform(r * c, -1.f, 1.f, seed);
    for (size_t i = 0; i < r; ++i)
      for (size_t j = 0; j < c; ++j) f[i * ld + j] = u[i * c + j];
  }
  std::vector<double> dense() const {
    std::vector<double> d(rows * cols);
    for (size_t i = 0; i < rows; ++i)
      for (size_t j = 0; j < cols; ++j) d[i * cols + j] = f[i * ld + j];
    return d;
  }
};

// Output buffer with sentinel padding: checks the rows x cols part and that the padding is kept.
struct Out {
  size_t rows, cols, ld;
  std::vector<float> f;
  Out(size_t r, size_t c, size_t pad)
      : rows(r), cols(c), ld(c + pad), f(r * (c + pad), std::numeric_limits<float>::quiet_NaN()) {
    for (size_t i = 0; i < r; ++i)
      for (size_t j = c; j < ld; ++j) f[i * ld + j] = -3.5f;
  }
  void check(const char* what, const std::vector<double>& ref, double tol) const {
    std::vector<float> got(rows * cols);
    bool pad_ok = true;
    for (size_t i = 0; i < rows; ++i) {
      for (size_t j = 0; j < cols; ++j) got[i * cols + j] = f[i * ld + j];
      for (size_t j = cols; j < ld; ++j) pad_ok &= f[i * ld + j] == -3.5f;
    }
    pl::test::check_close(what, got.data(), ref.data(), got.size(), tol, tol);
    CHECK(pad_ok);
  }
};

void check_attention(Shape s, bool causal, bool linear, size_t pad, bool with_fd) {
  CAPTURE(s.n);
  CAPTURE(s.dk);
  CAPTURE(s.dv);
  CAPTURE(causal);
  CAPTURE(linear);
  const uint32_t seed = uint32_t(s.n * 1000 + s.dk * 10 + s.dv);
  const Padded q(s.n, s.dk, pad, seed), k(s.n, s.dk, pad + 1, seed + 1),
      v(s.n, s.dv, pad + 2, seed + 2), d_o(s.n, s.dv, pad, seed + 3);
  const float scale = float(1.0 / std::sqrt(double(s.dk)));
  Inputs in{s, causal, linear, scale, q.dense(), k.dense(), v.dense(), d_o.dense()};
  std::vector<double> P, O, dq, dk, dv;
  forward(in, P, O);
  backward(in, P, dq, dk, dv);
  const double tol = 1e-5 * std::sqrt(double(std::max({s.n, s.dk, s.dv})));

  for (const auto* var : runnable(pl::KernelId::attention)) {
    CAPTURE(var->name);
    Out o(s.n, s.dv, pad);
    std::vector<float> p(s.n * s.n, std::numeric_limits<float>::quiet_NaN());
    pl::as<AttFn> (*var)(q.f.data(), q.ld, k.f.data(), k.ld, v.f.data(), v.ld, o.f.data(), o.ld,
                         p.data(), s.n, s.dk, s.dv, scale, causal, linear);
    o.check("O", O, tol);
    pl::test::check_close("P", p.data(), P.data(), p.size(), tol, tol);
  }

  std::vector<float> pf(P.begin(), P.end());  // the forward's p, as the training loop keeps it
  std::vector<double> fdq, fdk, fdv;
  if (with_fd) {
    fdq = finite_diff(in, &Inputs::q);
    fdk = finite_diff(in, &Inputs::k);
    fdv = finite_diff(in, &Inputs::v);
  }
  for (const auto* var : runnable(pl::KernelId::attention_bwd)) {
    CAPTURE(var->name);
    Out gq(s.n, s.dk, pad + 1), gk(s.n, s.dk, pad), gv(s.n, s.dv, pad + 3);
    std::vector<float> scratch(s.n * s.n);
    pl::as<AttBwdFn> (*var)(q.f.data(), q.ld, k.f.data(), k.ld, v.f.data(), v.ld, pf.data(),
                            d_o.f.data(), d_o.ld, gq.f.data(), gq.ld, gk.f.data(), gk.ld,
                            gv.f.data(), gv.ld, scratch.data(), s.n, s.dk, s.dv, scale, causal,
                            linear);
    gq.check("dQ", dq, tol);
    gk.check("dK", dk, tol);
    gv.check("dV", dv, tol);
    if (with_fd) {
      gq.check("dQ vs finite differences", fdq, tol);
      gk.check("dK vs finite differences", fdk, tol);
      gv.check("dV vs finite differences", fdv, tol);
    }
  }
}

}  // namespace

TEST_CASE("attention fwd/bwd: shapes around the vector widths, softmax/linear, causal") {
  const size_t ns[] = {1, 3, 7, 8, 9, 16, 17, 33, 64, 65, 128};
  const Shape ds[] = {{0, 1, 1}, {0, 8, 16}, {0, 17, 9}, {0, 64, 64}, {0, 3, 33}};
  size_t pad = 0;
  for (size_t n : ns)
    for (Shape d : ds)
      for (int causal = 0; causal < 2; ++causal)
        for (int linear = 0; linear < 2; ++linear) {
          if (n >= 64 && d.dk == 64 && (causal || linear)) continue;  // keep the suite fast
          check_attention({n, d.dk, d.dv}, causal, linear, pad, false);
          pad = (pad + 1) % 4;
        }
}

TEST_CASE("attention_bwd: against central finite differences of the double forward") {
  for (Shape s : {Shape{1, 1, 1}, Shape{3, 2, 5}, Shape{8, 8, 8}, Shape{9, 17, 3}, Shape{17, 5, 9}})
    for (int causal = 0; causal < 2; ++causal)
      for (int linear = 0; linear < 2; ++linear) check_attention(s, causal, linear, 1, true);
}

TEST_CASE("attention: stable for large scores (no overflow)") {
  // scale * q.k around 100: exp would overflow without the max subtraction.
  const size_t n = 20, d = 4;
  std::vector<float> q(n * d, 10.f), k(n * d), v(n * d), o(n * d), p(n * n);
  auto u = pl::test::uniform(n * d, 2.4f, 2.6f, 11);
  for (size_t i = 0; i < n * d; ++i) k[i] = u[i], v[i] = u[i] - 2.5f;
  for (const auto* var : runnable(pl::KernelId::attention)) {
    CAPTURE(var->name);
    pl::as<AttFn> (*var)(q.data(), d, k.data(), d, v.data(), d, o.data(), d, p.data(), n, d, d, 1.f,
                         0, 0);
    bool finite = true;
    double rowsum = 0;
    for (size_t c = 0; c < n; ++c) rowsum += p[c];
    for (float x : o) finite &= std::isfinite(x);
    CHECK(finite);
    CHECK(std::fabs(rowsum - 1.0) < 1e-5);
  }
}
