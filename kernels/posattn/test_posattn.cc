// SPDX-License-Identifier: Apache-2.0
// posattn, posattn_bwd: every runnable variant against a double forward / analytic backward
// written here, and the backward also against central finite differences of that forward
// (objective sum(df .* f)). |err| <= (1e-5 + 1e-5 |ref|) * sqrt(inner dimension).
#include <algorithm>
#include <cmath>
#include <limits>

#include "tests/support.hpp"

using pl::test::runnable;

namespace {

using PosFn = decltype(&pl::scalar::Posattn);
using PosBwdFn = decltype(&pl::scalar::PosattnBwd);

struct Problem {
  size_t p, l, v;
  std::vector<double> a, x, w, df;  // L x L, p x L x V, V x V, p x L x V
};

// h = A X[mu], f = h W^T in double.
void forward(const Problem& q, std::vector<double>& h, std::vector<double>& f) {
  const size_t l = q.l, v = q.v;
  h.assign(q.p * l * v, 0.0);
  f.assign(q.p * l * v, 0.0);
  for (size_t mu = 0; mu < q.p; ++mu)
    for (size_t i = 0; i < l; ++i) {
      double* hr = &h[(mu * l + i) * v];
      for (size_t k = 0; k < l; ++k)
        for (size_t u = 0; u < v; ++u) hr[u] += q.a[i * l + k] * q.x[(mu * l + k) * v + u];
      for (size_t o = 0; o < v; ++o)
        for (size_t u = 0; u < v; ++u) f[(mu * l + i) * v + o] += hr[u] * q.w[o * v + u];
    }
}

// Analytic gradients of sum(df .* f): dA, dW, and dh (with respect to h at fixed W).
void backward(const Problem& q, const std::vector<double>& h, std::vector<double>& da,
              std::vector<double>& dw, std::vector<double>& dh) {
  const size_t l = q.l, v = q.v;
  da.assign(l * l, 0.0);
  dw.assign(v * v, 0.0);
  dh.assign(q.p * l * v, 0.0);
  for (size_t mu = 0; mu < q.p; ++mu)
    for (size_t i = 0; i < l; ++i) {
      const size_t r = mu * l + i;
      for (size_t o = 0; o < v; ++o)
        for (size_t u = 0; u < v; ++u) {
          dw[o * v + u] += q.df[r * v + o] * h[r * v + u];
          dh[r * v + u] += q.df[r * v + o] * q.w[o * v + u];
        }
      for (size_t k = 0; k < l; ++k)
        for (size_t u = 0; u < v; ++u) da[i * l + k] += dh[r * v + u] * q.x[(mu * l + k) * v + u];
    }
}

double objective(const Problem& q) {
  std::vector<double> h, f;
  forward(q, h, f);
  double s = 0;
  for (size_t i = 0; i < f.size(); ++i) s += q.df[i] * f[i];
  return s;
}

std::vector<double> finite_diff(Problem q, std::vector<double> Problem::*x) {
  const double eps = 1e-4;
  std::vector<double> g((q.*x).size());
  for (size_t i = 0; i < g.size(); ++i) {
    const double x0 = (q.*x)[i];
    (q.*x)[i] = x0 + eps;
    const double fp = objective(q);
    (q.*x)[i] = x0 - eps;
    const double fm = objective(q);
    (q.*x)[i] = x0;
    g[i] = (fp - fm) / (2 * eps);
  }
  return g;
}

// d(sum df .* (h W^T)) / dh by central differences.
std::vector<double> finite_diff_h(const Problem& q, std::vector<double> h) {
  const double eps = 1e-4;
  auto obj = [&](const std::vector<double>& hh) {
    double s = 0;
    for (size_t r = 0; r < q.p * q.l; ++r)
      for (size_t o = 0; o < q.v; ++o)
        for (size_t u = 0; u < q.v; ++u)
          s += q.df[r * q.v + o] * hh[r * q.v + u] * q.w[o * q.v + u];
    return s;
  };
  std::vector<double> g(h.size());
  for (size_t i = 0; i < h.size(); ++i) {
    const double h0 = h[i];
    h[i] = h0 + eps;
    const double fp = obj(h);
    h[i] = h0 - eps;
    const double fm = obj(h);
    h[i] = h0;
    g[i] = (fp - fm) / (2 * eps);
  }
  return g;
}

std::vector<double> to_double(const std::vector<float>& f) { return {f.begin(), f.end()}; }

double tol_for(size_t inner) { return 1e-5 * std::sqrt(double(std::max<size_t>(inner, 1))); }

// Output buffer with one sentinel element past the end.
struct Out {
  std::vector<float> f;
  explicit Out(size_t n) : f(n + 1, std::numeric_limits<float>::quiet_NaN()) { f[n] = -2.5f; }
  float* data() { return f.data(); }
  void check(const char* what, const std::vector<double>& ref, double tol) const {
    pl::test::check_close(what, f.data(), ref.data(), ref.size(), tol, tol);
    CHECK(f[ref.size()] == -2.5f);
  }
};

void check_posattn(size_t p, size_t l, size_t v, bool with_fd) {
  CAPTURE(p);
  CAPTURE(l);
  CAPTURE(v);
  const uint32_t seed = uint32_t(p * 7919 + l * 31 + v);
  const auto a = pl::test::uniform(l * l, -1.f, 1.f, seed),
             x = pl::test::uniform(p * l * v, -1.f, 1.f, seed + 1),
             w = pl::test::uniform(v * v, -1.f, 1.f, seed + 2),
             df = pl::test::uniform(p * l * v, -1.f, 1.f, seed + 3);
  Problem q{p, l, v, to_double(a), to_double(x), to_double(w), to_double(df)};
  std::vector<double> h, f, da, dw, dh;
  forward(q, h, f);
  backward(q, h, da, dw, dh);

  for (const auto* var : runnable(pl::KernelId::posattn)) {
    CAPTURE(var->name);
    Out ho(p * l * v), fo(p * l * v);
    pl::as<PosFn> (*var)(a.data(), x.data(), w.data(), ho.data(), fo.data(), p, l, v);
    ho.check("h", h, tol_for(l));
    fo.check("f", f, tol_for(l * v));
  }

  const std::vector<float> hf(h.begin(), h.end());  // h as the forward pass stores it
  std::vector<double> fda, fdw, fdh;
  if (with_fd) {
    fda = finite_diff(q, &Problem::a);
    fdw = finite_diff(q, &Problem::w);
    fdh = finite_diff_h(q, h);
  }
  for (const auto* var : runnable(pl::KernelId::posattn_bwd)) {
    CAPTURE(var->name);
    Out dao(l * l), dwo(v * v), dho(p * l * v);
    pl::as<PosBwdFn> (*var)(a.data(), x.data(), w.data(), hf.data(), df.data(), dao.data(),
                            dwo.data(), dho.data(), p, l, v);
    dao.check("dA", da, tol_for(p * v * v));
    dwo.check("dW", dw, tol_for(p * l));
    dho.check("dh", dh, tol_for(v));
    if (with_fd) {
      dao.check("dA vs finite differences", fda, tol_for(p * v * v));
      dwo.check("dW vs finite differences", fdw, tol_for(p * l));
      dho.check("dh vs finite differences", fdh, tol_for(v));
    }
  }
}

}  // namespace

TEST_CASE("posattn fwd/bwd: V = 4 fast path and general shapes around the vector widths") {
  for (size_t v : {1, 3, 4, 5, 8, 17})
    for (size_t l : {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 33, 64, 65})
      for (size_t p : {1, 2, 3, 8}) check_posattn(p, l, v, false);
}

TEST_CASE("posattn fwd/bwd: the copy-task shape and large L, V") {
  check_posattn(1000, 16, 4, false);
  check_posattn(5, 100, 33, false);
  check_posattn(2, 256, 16, false);
  check_posattn(3, 5, 1024, false);
  check_posattn(3, 128, 4, false);
}

TEST_CASE("posattn_bwd: against central finite differences of the double forward") {
  for (size_t v : {1, 3, 4})
    for (size_t l : {1, 3, 5, 9})
      for (size_t p : {1, 3}) check_posattn(p, l, v, true);
}

namespace {

using OnehotFn = decltype(&pl::scalar::PosattnOnehotSse);

// sse = sum ||A X W^T - Y||^2 over the rows with y >= 0, X and Y the one-hot tokens, in double
// through this file's dense forward; with grads also 2 x backward(df = r), and optionally those
// against central differences of the sse.
void check_onehot(size_t p, size_t l, size_t v, bool with_fd) {
  CAPTURE(p);
  CAPTURE(l);
  CAPTURE(v);
  const uint32_t seed = uint32_t(p * 131 + l * 17 + v);
  const auto a = pl::test::uniform(l * l, -1.f, 1.f, seed),
             w = pl::test::uniform(v * v, -1.f, 1.f, seed + 1);
  const auto ux = pl::test::uniform(p * l, 0.f, 1.f, seed + 2),
             uy = pl::test::uniform(p * l, 0.f, 1.f, seed + 3);
  std::vector<int32_t> xt(p * l), yt(p * l);
  for (size_t i = 0; i < p * l; ++i) {
    xt[i] = std::min(int32_t(ux[i] * float(v)), int32_t(v) - 1);
    // about one position in five out of the loss; the rest any token
    yt[i] = uy[i] < 0.2f ? -1 : std::min(int32_t((uy[i] - 0.2f) / 0.8f * float(v)), int32_t(v) - 1);
  }
  Problem q{p, l, v, to_double(a), std::vector<double>(p * l * v, 0.0), to_double(w), {}};
  for (size_t i = 0; i < p * l; ++i) q.x[i * v + size_t(xt[i])] = 1.0;
  auto sse_of = [&](const Problem& qq, std::vector<double>* r) {
    std::vector<double> h, f;
    forward(qq, h, f);
    double s = 0;
    for (size_t row = 0; row < p * l; ++row)
      for (size_t o = 0; o < v; ++o) {
        double& e = f[row * v + o];
        e = yt[row] < 0 ? 0.0 : e - (yt[row] == int32_t(o) ? 1.0 : 0.0);
        s += e * e;
      }
    if (r) *r = f;
    return s;
  };
  std::vector<double> r, h, f, da, dw, dh;
  const double sse = sse_of(q, &r);
  q.df = r;
  forward(q, h, f);
  backward(q, h, da, dw, dh);
  for (auto& e : da) e *= 2;
  for (auto& e : dw) e *= 2;
  std::vector<double> fda, fdw;
  if (with_fd) {
    auto fd = [&](std::vector<double> Problem::*m) {
      Problem qq = q;
      std::vector<double> g((qq.*m).size());
      for (size_t i = 0; i < g.size(); ++i) {
        const double x0 = (qq.*m)[i], eps = 1e-4;
        (qq.*m)[i] = x0 + eps;
        const double fp = sse_of(qq, nullptr);
        (qq.*m)[i] = x0 - eps;
        const double fm = sse_of(qq, nullptr);
        (qq.*m)[i] = x0;
        g[i] = (fp - fm) / (2 * eps);
      }
      return g;
    };
    fda = fd(&Problem::a);
    fdw = fd(&Problem::w);
  }
  const double tol_sse = 1e-5 * std::sqrt(double(p * l * v)) * (1 + std::fabs(sse));
  for (const auto* var : runnable(pl::KernelId::posattn_onehot_sse)) {
    CAPTURE(var->name);
    const auto fn = pl::as<OnehotFn>(*var);
    Out dao(l * l), dwo(v * v);
    CHECK(std::fabs(fn(a.data(), w.data(), xt.data(), yt.data(), nullptr, nullptr, p, l, v) -
                    sse) <= tol_sse);
    const double got =
        fn(a.data(), w.data(), xt.data(), yt.data(), dao.data(), dwo.data(), p, l, v);
    CHECK(std::fabs(got - sse) <= tol_sse);
    dao.check("dA", da, tol_for(p * l * v));
    dwo.check("dW", dw, tol_for(p * l * v));
    if (with_fd) {
      dao.check("dA vs finite differences", fda, tol_for(p * l * v));
      dwo.check("dW vs finite differences", fdw, tol_for(p * l * v));
    }
  }
}

}  // namespace

TEST_CASE("posattn_onehot_sse: dense double oracle around the vector widths") {
  for (size_t v : {1, 2, 4, 5, 17})
    for (size_t l : {1, 3, 4, 8, 15, 16, 17, 33, 64})
      for (size_t p : {1, 2, 5}) check_onehot(p, l, v, false);
  check_onehot(1000, 16, 4, false);
  check_onehot(3, 16, 64, false);
}

TEST_CASE("posattn_onehot_sse: gradients against central finite differences of the sse") {
  for (size_t v : {1, 3, 4})
    for (size_t l : {1, 3, 5, 9})
      for (size_t p : {1, 3}) check_onehot(p, l, v, true);
}

namespace {

using StatsFn = decltype(&pl::scalar::PosattnOnehotStats);
using GramFn = decltype(&pl::scalar::PosattnGramSse);

// posattn_gram_sse against the dense double forward/backward of this file on one-hot tokens:
// targets fixed by position (row i in the loss for every sequence or for none), as the kernel
// requires. mask: 0 = every row in the loss, 1 = the copy task's open chain (row 0 out), 2 = about
// one row in three out. y: the previous token (shift = true) or a random one.
void check_gram(size_t p, size_t l, size_t v, int mask, bool shift) {
  CAPTURE(p);
  CAPTURE(l);
  CAPTURE(v);
  CAPTURE(mask);
  CAPTURE(shift);
  const uint32_t seed = uint32_t(p * 977 + l * 13 + v * 3 + size_t(mask));
  const auto a = pl::test::uniform(l * l, -1.f, 1.f, seed),
             w = pl::test::uniform(v * v, -1.f, 1.f, seed + 1);
  const auto ux = pl::test::uniform(p * l, 0.f, 1.f, seed + 2),
             uy = pl::test::uniform(p * l, 0.f, 1.f, seed + 3),
             um = pl::test::uniform(l, 0.f, 1.f, seed + 4);
  std::vector<int32_t> xt(p * l), yt(p * l);
  for (size_t i = 0; i < p * l; ++i) xt[i] = std::min(int32_t(ux[i] * float(v)), int32_t(v) - 1);
  for (size_t mu = 0; mu < p; ++mu)
    for (size_t i = 0; i < l; ++i) {
      const bool out = (mask == 1 && i == 0) || (mask == 2 && um[i] < 0.33f);
      const int32_t y = shift ? xt[mu * l + (i + l - 1) % l]
                              : std::min(int32_t(uy[mu * l + i] * float(v)), int32_t(v) - 1);
      yt[mu * l + i] = out ? -1 : y;
    }
  // The oracle: dense one-hot X, sse = sum ||A X W^T - Y||^2 over rows with targets, gradients
  // 2 x backward(df = r) (checked against finite differences above).
  Problem q{p, l, v, to_double(a), std::vector<double>(p * l * v, 0.0), to_double(w), {}};
  for (size_t i = 0; i < p * l; ++i) q.x[i * v + size_t(xt[i])] = 1.0;
  std::vector<double> h, f, da, dw, dh;
  forward(q, h, f);
  double sse = 0, n_loss = 0;
  for (size_t row = 0; row < p * l; ++row) {
    n_loss += yt[row] >= 0;
    for (size_t o = 0; o < v; ++o) {
      double& e = f[row * v + o];
      e = yt[row] < 0 ? 0.0 : e - (yt[row] == int32_t(o) ? 1.0 : 0.0);
      sse += e * e;
    }
  }
  q.df = f;
  backward(q, h, da, dw, dh);
  for (auto& e : da) e *= 2;
  for (auto& e : dw) e *= 2;

  const size_t n = l * l * v * v;
  for (const auto* sv : runnable(pl::KernelId::posattn_onehot_stats)) {
    CAPTURE(sv->name);
    const auto stats = pl::as<StatsFn>(*sv);
    // Counts in two chunks add up to the counts of all sequences at once.
    std::vector<double> c(n, 0.0), dd(n, 0.0), c2(n, 0.0), d2(n, 0.0);
    stats(xt.data(), yt.data(), c.data(), dd.data(), p, l, v);
    const size_t p1 = p / 2;
    stats(xt.data(), yt.data(), c2.data(), d2.data(), p1, l, v);
    stats(xt.data() + p1 * l, yt.data() + p1 * l, c2.data(), d2.data(), p - p1, l, v);
    CHECK(c == c2);
    CHECK(dd == d2);
    std::vector<double> cref(n, 0.0), dref(n, 0.0);  // the plain scatter loop
    pl::scalar::PosattnOnehotStats(xt.data(), yt.data(), cref.data(), dref.data(), p, l, v);
    CHECK(c == cref);
    CHECK(dd == dref);
    double csum = 0, dsum = 0;
    for (size_t i = 0; i < n; ++i) csum += c[i], dsum += dd[i];
    CHECK(csum == double(p * l * l));
    CHECK(dsum == n_loss * double(l));
    // The counts are exact integers; sse and gradients agree with the dense oracle up to double
    // rounding of terms of size p L (sse) and the float rounding of the outputs.
    const double tol_sse = 1e-11 * double(p * l * (v + 1)) * (1 + std::fabs(sse)) + 1e-9;
    for (const auto* var : runnable(pl::KernelId::posattn_gram_sse)) {
      CAPTURE(var->name);
      const auto fn = pl::as<GramFn>(*var);
      Out dao(l * l), dwo(v * v);
      CHECK(std::fabs(fn(a.data(), w.data(), c.data(), dd.data(), nullptr, nullptr, l, v) - sse) <=
            tol_sse);
      CHECK(std::fabs(fn(a.data(), w.data(), c.data(), dd.data(), dao.data(), dwo.data(), l, v) -
                      sse) <= tol_sse);
      const double atol = 1e-10 * double(p * l * (v + 1)), rtol = 2e-7;
      pl::test::check_close("dA", dao.f.data(), da.data(), da.size(), atol, rtol);
      pl::test::check_close("dW", dwo.f.data(), dw.data(), dw.size(), atol, rtol);
      CHECK(dao.f[l * l] == -2.5f);
      CHECK(dwo.f[v * v] == -2.5f);
    }
  }
}

}  // namespace

TEST_CASE("posattn_gram_sse: counts reproduce the dense sse and its gradients") {
  for (size_t v : {1, 2, 3, 4, 5})
    for (size_t l : {1, 2, 3, 7, 8, 9, 16, 17})
      for (size_t p : {1, 2, 7})
        for (int mask : {0, 1, 2}) check_gram(p, l, v, mask, mask != 2);
  check_gram(1000, 16, 4, 0, true);  // the copy-task benchmark shape
  check_gram(1000, 16, 4, 1, true);
  check_gram(300, 32, 8, 2, false);
  check_gram(20, 5, 33, 0, false);
}

TEST_CASE("posattn_gram_sse: a perfect copy fit has sse = 0 to double rounding") {
  // A = the cyclic shift (row i attends to i - 1), W = I: r = 0 on every row. The three terms of
  // the gram form are each p L = 32000 here (integers, exact in double) and must cancel to 0;
  // the gradients too (a float accumulation would leave ~1e-3).
  const size_t p = 2000, l = 16, v = 4;
  std::vector<float> a(l * l, 0.f), w(v * v, 0.f);
  for (size_t i = 0; i < l; ++i) a[i * l + (i + l - 1) % l] = 1.f;
  for (size_t u = 0; u < v; ++u) w[u * v + u] = 1.f;
  const auto ux = pl::test::uniform(p * l, 0.f, 1.f, 99);
  std::vector<int32_t> xt(p * l), yt(p * l);
  for (size_t i = 0; i < p * l; ++i) xt[i] = std::min(int32_t(ux[i] * float(v)), int32_t(v) - 1);
  for (size_t mu = 0; mu < p; ++mu)
    for (size_t i = 0; i < l; ++i) yt[mu * l + i] = xt[mu * l + (i + l - 1) % l];
  std::vector<double> c(l * l * v * v, 0.0), d(c.size(), 0.0);
  pl::scalar::PosattnOnehotStats(xt.data(), yt.data(), c.data(), d.data(), p, l, v);
  for (const auto* var : runnable(pl::KernelId::posattn_gram_sse)) {
    CAPTURE(var->name);
    std::vector<float> da(l * l), dw(v * v);
    const double s =
        pl::as<GramFn>(*var)(a.data(), w.data(), c.data(), d.data(), da.data(), dw.data(), l, v);
    CHECK(std::fabs(s) <= 1e-9);
    for (float g : da) CHECK(std::fabs(g) <= 1e-9f);
    for (float g : dw) CHECK(std::fabs(g) <= 1e-9f);
  }
}
