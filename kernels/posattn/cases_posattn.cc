// SPDX-License-Identifier: Apache-2.0
// posattn, posattn_bwd, posattn_onehot_sse(_rows), posattn_onehot_stats, posattn_gram_sse:
// harness cases (kernels/harness/harness.hpp) against a dense double forward h = A X^mu, f = h W^T
// and its analytic backward written here, on small shapes also against central finite differences
// of that forward. |err| <= (1e-5 + 1e-5 |ref|) sqrt(inner dimension). The one-hot kernels run on
// tokens and are checked against the same dense forward on one-hot X; the counts of
// posattn_onehot_stats against their definition in kernels.def, bit for bit (they are integers),
// in one call and in two chunks; posattn_gram_sse against the dense sse and gradients to double
// rounding. Benchmarks: the copy task (p 1000, L 16, V 4) and larger L, V; the one-hot step and
// the same step through the counts.
#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "kernels/harness/harness.hpp"
#include "tests/emulation.hpp"

namespace {

using pl::test::out;
using pl::test::Output;
constexpr float kGuard = -2.5f;  // one element past the end of every output must keep it

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

// Central differences (h = 1e-4) of a scalar function of q with respect to every element of q.*m.
template <class F>
std::vector<double> finite_diff(Problem q, std::vector<double> Problem::*m, F objective) {
  return pl::test::central_differences(q.*m, [&] { return objective(q); });
}

double sum_df_f(const Problem& q) {
  std::vector<double> h, f;
  forward(q, h, f);
  double s = 0;
  for (size_t i = 0; i < f.size(); ++i) s += q.df[i] * f[i];
  return s;
}

// d(sum df .* (h W^T)) / dh by central differences.
std::vector<double> finite_diff_h(const Problem& q, std::vector<double> h) {
  return pl::test::central_differences(h, [&] {
    double s = 0;
    for (size_t r = 0; r < q.p * q.l; ++r)
      for (size_t o = 0; o < q.v; ++o)
        for (size_t u = 0; u < q.v; ++u) s += q.df[r * q.v + o] * h[r * q.v + u] * q.w[o * q.v + u];
    return s;
  });
}

double tol_for(size_t inner) { return 1e-5 * std::sqrt(double(std::max<size_t>(inner, 1))); }

// An output of n floats, NaN, with the guard after it.
std::vector<float> guarded(size_t n) {
  std::vector<float> f(n + 1, std::numeric_limits<float>::quiet_NaN());
  f[n] = kGuard;
  return f;
}

Output guarded_out(const std::string& name, const std::vector<float>& got,
                   const std::vector<double>& ref, double tol) {
  return out(name, got.data(), ref.data(), ref.size()).tol(tol, tol);
}

bool guards_kept(std::initializer_list<const std::vector<float>*> bufs) {
  bool ok = true;
  for (const auto* b : bufs) ok &= b->back() == kGuard;
  return ok;
}

// ---------------------------------------------------------------- posattn, posattn_bwd

struct Dense {
  Problem q;
  std::vector<float> a, x, w, df, hf;  // hf: h as the forward pass stores it
  std::vector<float> h, f, da, dw, dh;
  std::vector<double> H, F, DA, DW, DH, fda, fdw, fdh;
};

Dense dense_inputs(size_t p, size_t l, size_t v, uint32_t seed) {
  Dense d;
  d.a = pl::test::uniform(l * l, -1.f, 1.f, seed);
  d.x = pl::test::uniform(p * l * v, -1.f, 1.f, seed + 1);
  d.w = pl::test::uniform(v * v, -1.f, 1.f, seed + 2);
  d.df = pl::test::uniform(p * l * v, -1.f, 1.f, seed + 3);
  d.q = {p,
         l,
         v,
         pl::test::to_double(d.a),
         pl::test::to_double(d.x),
         pl::test::to_double(d.w),
         pl::test::to_double(d.df)};
  return d;
}

void add_posattn(const std::string& label, size_t p, size_t l, size_t v, bool with_fd,
                 pl::test::Use use) {
  const uint32_t seed = uint32_t(p * 7919 + l * 31 + v);
  const double plv = double(p) * l * v;
  pl::test::add_case<Dense>(
      {pl::KernelId::posattn,
       "fwd/" + label,
       0,
       0,
       {plv, 2.0 * plv * double(l + v), 4.0 * (l * l + 3 * plv + v * v)},
       use},
      [=](bool reference) {
        Dense d = dense_inputs(p, l, v, seed);
        d.h = guarded(p * l * v);
        d.f = guarded(p * l * v);
        if (reference) forward(d.q, d.H, d.F);
        return d;
      },
      [=](Dense& d, const pl::Variant& var) {
        pl::as<decltype(&pl::scalar::Posattn)>(var)(d.a.data(), d.x.data(), d.w.data(), d.h.data(),
                                                    d.f.data(), p, l, v);
      },
      [=](Dense& d) {
        return std::vector<Output>{guarded_out("h", d.h, d.H, tol_for(l)),
                                   guarded_out("f", d.f, d.F, tol_for(l * v)),
                                   pl::test::holds("guards", guards_kept({&d.h, &d.f}))};
      });
  pl::test::add_case<Dense>(
      {pl::KernelId::posattn_bwd,
       "bwd/" + label,
       0,
       0,
       {plv, 2.0 * plv * double(2 * v + l), 4.0 * (2 * l * l + 4 * plv + 2 * v * v)},
       use},
      [=](bool reference) {
        Dense d = dense_inputs(p, l, v, seed);
        std::vector<double> h, f;
        forward(d.q, h, f);
        d.hf = pl::test::to_float(h);
        d.da = guarded(l * l);
        d.dw = guarded(v * v);
        d.dh = guarded(p * l * v);
        if (reference) backward(d.q, h, d.DA, d.DW, d.DH);
        if (reference && with_fd) {
          d.fda = finite_diff(d.q, &Problem::a, sum_df_f);
          d.fdw = finite_diff(d.q, &Problem::w, sum_df_f);
          d.fdh = finite_diff_h(d.q, h);
        }
        return d;
      },
      [=](Dense& d, const pl::Variant& var) {
        pl::as<decltype(&pl::scalar::PosattnBwd)>(var)(d.a.data(), d.x.data(), d.w.data(),
                                                       d.hf.data(), d.df.data(), d.da.data(),
                                                       d.dw.data(), d.dh.data(), p, l, v);
      },
      [=](Dense& d) {
        std::vector<Output> o = {guarded_out("dA", d.da, d.DA, tol_for(p * v * v)),
                                 guarded_out("dW", d.dw, d.DW, tol_for(p * l)),
                                 guarded_out("dh", d.dh, d.DH, tol_for(v)),
                                 pl::test::holds("guards", guards_kept({&d.da, &d.dw, &d.dh}))};
        if (with_fd) {
          o.push_back(guarded_out("dA vs finite differences", d.da, d.fda, tol_for(p * v * v)));
          o.push_back(guarded_out("dW vs finite differences", d.dw, d.fdw, tol_for(p * l)));
          o.push_back(guarded_out("dh vs finite differences", d.dh, d.fdh, tol_for(v)));
        }
        return o;
      });
}

// ---------------------------------------------------------------- the one-hot kernels

// How tokens are drawn: `random` (about one target in five out of the loss, the rest any token),
// `copy` (y_i = x_{i-1 mod L}, the copy task), or the gram sweep's fixed-by-position targets
// (mask 0: every row in the loss, 1: row 0 out, 2: about one row in three out; targets the
// previous token or random).
struct TokenSpec {
  enum Kind { random, copy, by_position } kind;
  uint32_t seed;
  int mask = 0;
  bool shift = true;
};

void make_tokens(const TokenSpec& t, size_t p, size_t l, size_t v, std::vector<int32_t>& xt,
                 std::vector<int32_t>& yt) {
  const auto ux = pl::test::uniform(p * l, 0.f, 1.f, t.seed),
             uy = pl::test::uniform(p * l, 0.f, 1.f, t.seed + 1),
             um = pl::test::uniform(l, 0.f, 1.f, t.seed + 2);
  auto token = [v](float u) { return std::min(int32_t(u * float(v)), int32_t(v) - 1); };
  xt.resize(p * l);
  yt.resize(p * l);
  for (size_t i = 0; i < p * l; ++i) xt[i] = token(ux[i]);
  for (size_t mu = 0; mu < p; ++mu)
    for (size_t i = 0; i < l; ++i) {
      const size_t r = mu * l + i;
      const int32_t prev = xt[mu * l + (i + l - 1) % l];
      switch (t.kind) {
        case TokenSpec::random:
          yt[r] = uy[r] < 0.2f ? -1 : token((uy[r] - 0.2f) / 0.8f);
          break;
        case TokenSpec::copy:
          yt[r] = prev;
          break;
        case TokenSpec::by_position: {
          const bool out_of_loss = (t.mask == 1 && i == 0) || (t.mask == 2 && um[i] < 0.33f);
          yt[r] = out_of_loss ? -1 : t.shift ? prev : token(uy[r]);
          break;
        }
      }
    }
}

// sse = sum ||A X W^T - Y||^2 over the rows with y >= 0, X and Y one-hot, in double through the
// dense forward; the gradients 2 x backward(df = r).
struct SseRef {
  double sse = 0, n_loss = 0;
  std::vector<double> da, dw;
};

double dense_sse(const Problem& q, const std::vector<int32_t>& yt, std::vector<double>* r) {
  std::vector<double> h, f;
  forward(q, h, f);
  double s = 0;
  for (size_t row = 0; row < q.p * q.l; ++row)
    for (size_t o = 0; o < q.v; ++o) {
      double& e = f[row * q.v + o];
      e = yt[row] < 0 ? 0.0 : e - (yt[row] == int32_t(o) ? 1.0 : 0.0);
      s += e * e;
    }
  if (r) *r = f;
  return s;
}

Problem onehot_problem(const std::vector<float>& a, const std::vector<float>& w,
                       const std::vector<int32_t>& xt, size_t p, size_t l, size_t v) {
  Problem q{
      p, l, v, pl::test::to_double(a), std::vector<double>(p * l * v, 0.0), pl::test::to_double(w),
      {}};
  for (size_t i = 0; i < p * l; ++i) q.x[i * v + size_t(xt[i])] = 1.0;
  return q;
}

SseRef sse_ref(Problem& q, const std::vector<int32_t>& yt) {
  SseRef s;
  std::vector<double> r, h, f, dh;
  s.sse = dense_sse(q, yt, &r);
  for (int32_t y : yt) s.n_loss += y >= 0;
  q.df = r;
  forward(q, h, f);
  backward(q, h, s.da, s.dw, dh);
  for (auto& e : s.da) e *= 2;
  for (auto& e : s.dw) e *= 2;
  return s;
}

struct Onehot {
  std::vector<float> a, w, da, dw;
  std::vector<int32_t> xt, yt;
  std::vector<double> c, d;  // posattn_gram_sse: the counts (inputs)
  double got = 0;
  SseRef ref;
  std::vector<double> fda, fdw;
};

// The inputs of the one-hot kernels: A and W uniform in [-1, 1] (seeds seed_a, seed_a + 1), the
// tokens, and the gradients' outputs with their NaN guards.
Onehot onehot_inputs(size_t p, size_t l, size_t v, const TokenSpec& tokens, uint32_t seed_a) {
  Onehot o;
  o.a = pl::test::uniform(l * l, -1.f, 1.f, seed_a);
  o.w = pl::test::uniform(v * v, -1.f, 1.f, seed_a + 1);
  make_tokens(tokens, p, l, v, o.xt, o.yt);
  o.da = guarded(l * l);
  o.dw = guarded(v * v);
  return o;
}

void add_onehot(const std::string& label, size_t p, size_t l, size_t v, TokenSpec tokens, bool grad,
                bool with_fd, pl::test::Use use) {
  const uint32_t seed = uint32_t(p * 131 + l * 17 + v);
  const double tol = tol_for(p * l * v);
  pl::test::add_case<Onehot>(
      {pl::KernelId::posattn_onehot_sse,
       (grad ? "sse_grad/" : "sse/") + label,
       tol,
       tol,
       {double(p), 0, 8.0 * p * l + 4.0 * (l * l + v * v) * (grad ? 2 : 1)},
       use},
      [=](bool reference) {
        Onehot o = onehot_inputs(p, l, v, tokens, seed);
        if (!reference) return o;
        Problem q = onehot_problem(o.a, o.w, o.xt, p, l, v);
        o.ref = sse_ref(q, o.yt);
        if (with_fd) {
          auto sse_of = [&](const Problem& qq) { return dense_sse(qq, o.yt, nullptr); };
          o.fda = finite_diff(q, &Problem::a, sse_of);
          o.fdw = finite_diff(q, &Problem::w, sse_of);
        }
        return o;
      },
      [=](Onehot& o, const pl::Variant& var) {
        o.got = pl::as<decltype(&pl::scalar::PosattnOnehotSse)>(var)(
            o.a.data(), o.w.data(), o.xt.data(), o.yt.data(), grad ? o.da.data() : nullptr,
            grad ? o.dw.data() : nullptr, p, l, v);
      },
      [=](Onehot& o) {
        std::vector<Output> r = {out("sse", &o.got, &o.ref.sse, 1)};
        if (!grad) return r;
        r.push_back(guarded_out("dA", o.da, o.ref.da, tol));
        r.push_back(guarded_out("dW", o.dw, o.ref.dw, tol));
        r.push_back(pl::test::holds("guards", guards_kept({&o.da, &o.dw})));
        if (with_fd) {
          r.push_back(guarded_out("dA vs finite differences", o.da, o.fda, tol));
          r.push_back(guarded_out("dW vs finite differences", o.dw, o.fdw, tol));
        }
        return r;
      });
}

// posattn_onehot_sse_rows: output rows [i0, i1). The reference is the dense one with the rows
// outside the range taken out of the loss (that is the restricted sse and dw); da is compared on
// the rows in the range, and the other rows must keep their NaN fill (untouched).
void add_onehot_rows(const std::string& label, size_t p, size_t l, size_t v, size_t i0, size_t i1,
                     TokenSpec tokens, bool grad, pl::test::Use use) {
  const uint32_t seed = uint32_t(p * 131 + l * 17 + v);
  const double tol = tol_for(p * l * v);
  pl::test::add_case<Onehot>(
      {pl::KernelId::posattn_onehot_sse_rows,
       (grad ? "sse_grad/" : "sse/") + label + "/rows:" + std::to_string(i0) + "-" +
           std::to_string(i1),
       tol,
       tol,
       {double(p), 0, 8.0 * p * l + 4.0 * (l * l + v * v) * (grad ? 2 : 1)},
       use},
      [=](bool reference) {
        Onehot o = onehot_inputs(p, l, v, tokens, seed);
        if (!reference) return o;
        std::vector<int32_t> ym = o.yt;
        for (size_t mu = 0; mu < p; ++mu)
          for (size_t i = 0; i < l; ++i)
            if (i < i0 || i >= i1) ym[mu * l + i] = -1;
        Problem q = onehot_problem(o.a, o.w, o.xt, p, l, v);
        o.ref = sse_ref(q, ym);
        o.fda.assign(o.ref.da.begin() + long(i0 * l), o.ref.da.begin() + long(i1 * l));
        return o;
      },
      [=](Onehot& o, const pl::Variant& var) {
        o.got = pl::as<decltype(&pl::scalar::PosattnOnehotSseRows)>(var)(
            o.a.data(), o.w.data(), o.xt.data(), o.yt.data(), grad ? o.da.data() : nullptr,
            grad ? o.dw.data() : nullptr, p, l, v, i0, i1);
      },
      [=](Onehot& o) {
        std::vector<Output> r = {out("sse", &o.got, &o.ref.sse, 1)};
        if (!grad) return r;
        if (!o.fda.empty())
          r.push_back(out("dA rows in range", o.da.data() + i0 * l, o.fda.data(), o.fda.size())
                          .tol(tol, tol));
        bool untouched = true;
        for (size_t i = 0; i < l * l; ++i)
          if (i < i0 * l || i >= i1 * l) untouched &= std::isnan(o.da[i]);
        r.push_back(pl::test::holds("dA rows outside the range untouched", untouched));
        r.push_back(guarded_out("dW", o.dw, o.ref.dw, tol));
        r.push_back(pl::test::holds("guards", guards_kept({&o.da, &o.dw})));
        return r;
      });
}

// The counts by their definition in kernels.def.
void count(const std::vector<int32_t>& xt, const std::vector<int32_t>& yt, size_t p, size_t l,
           size_t v, std::vector<double>& c, std::vector<double>& d) {
  c.assign(l * l * v * v, 0.0);
  d.assign(l * l * v * v, 0.0);
  for (size_t mu = 0; mu < p; ++mu)
    for (size_t i = 0; i < l; ++i)
      for (size_t k = 0; k < l; ++k) {
        const size_t u = size_t(xt[mu * l + i]), uk = size_t(xt[mu * l + k]);
        c[((u * v + uk) * l + i) * l + k] += 1;
        const int32_t y = yt[mu * l + i];
        if (y >= 0) d[((size_t(y) * v + uk) * l + i) * l + k] += 1;
      }
}

struct Stats {
  std::vector<int32_t> xt, yt;
  std::vector<double> c, d, cref, dref;
  double n_loss = 0;
};

// posattn_onehot_stats in one call or in two chunks (it adds to c, d).
void add_stats(const std::string& label, size_t p, size_t l, size_t v, TokenSpec tokens,
               bool chunks, pl::test::Use use) {
  pl::test::add_case<Stats>(
      {pl::KernelId::posattn_onehot_stats,
       (chunks ? "chunks/" : "") + label,
       0,
       0,
       {double(p), 0, 8.0 * p * l + 16.0 * l * l * v * v},
       use},
      [=](bool reference) {
        Stats s;
        make_tokens(tokens, p, l, v, s.xt, s.yt);
        s.c.assign(l * l * v * v, 0.0);
        s.d.assign(l * l * v * v, 0.0);
        if (reference) count(s.xt, s.yt, p, l, v, s.cref, s.dref);
        for (int32_t y : s.yt) s.n_loss += y >= 0;
        return s;
      },
      [=](Stats& s, const pl::Variant& var) {
        const auto fn = pl::as<decltype(&pl::scalar::PosattnOnehotStats)>(var);
        const size_t p1 = chunks ? p / 2 : p;
        fn(s.xt.data(), s.yt.data(), s.c.data(), s.d.data(), p1, l, v);
        if (chunks)
          fn(s.xt.data() + p1 * l, s.yt.data() + p1 * l, s.c.data(), s.d.data(), p - p1, l, v);
      },
      [=](Stats& s) {
        double csum = 0, dsum = 0;
        for (size_t i = 0; i < s.c.size(); ++i) csum += s.c[i], dsum += s.d[i];
        return std::vector<Output>{
            out("c", s.c.data(), s.cref.data(), s.c.size()).bitexact(),
            out("d", s.d.data(), s.dref.data(), s.d.size()).bitexact(),
            pl::test::holds("sum c = p L^2, sum d = (rows in the loss) L",
                            csum == double(p * l * l) && dsum == s.n_loss * double(l))};
      });
}

// posattn_gram_sse on the counts: the dense sse and gradients up to double rounding of terms of
// size p L (sse) and the float rounding of the outputs.
void add_gram(const std::string& label, size_t p, size_t l, size_t v, TokenSpec tokens, bool grad,
              pl::test::Use use) {
  const double t = 1e-11 * double(p * l * (v + 1));
  pl::test::add_case<Onehot>(
      {pl::KernelId::posattn_gram_sse,
       (grad ? "gram_grad/" : "gram/") + label,
       t + 1e-9,
       t,
       {double(p), 0, 16.0 * l * l * v * v + 4.0 * (l * l + v * v) * (grad ? 2 : 1)},
       use},
      [=](bool reference) {
        Onehot o = onehot_inputs(p, l, v, tokens, tokens.seed - 2);
        count(o.xt, o.yt, p, l, v, o.c, o.d);
        if (reference) {
          Problem q = onehot_problem(o.a, o.w, o.xt, p, l, v);
          o.ref = sse_ref(q, o.yt);
        }
        return o;
      },
      [=](Onehot& o, const pl::Variant& var) {
        o.got = pl::as<decltype(&pl::scalar::PosattnGramSse)>(var)(
            o.a.data(), o.w.data(), o.c.data(), o.d.data(), grad ? o.da.data() : nullptr,
            grad ? o.dw.data() : nullptr, l, v);
      },
      [=](Onehot& o) {
        std::vector<Output> r = {out("sse", &o.got, &o.ref.sse, 1)};
        if (!grad) return r;
        const double atol = 1e-10 * double(p * l * (v + 1)), rtol = 2e-7;
        r.push_back(out("dA", o.da.data(), o.ref.da.data(), l * l).tol(atol, rtol));
        r.push_back(out("dW", o.dw.data(), o.ref.dw.data(), v * v).tol(atol, rtol));
        r.push_back(pl::test::holds("guards", guards_kept({&o.da, &o.dw})));
        return r;
      });
}

std::string plv(size_t p, size_t l, size_t v) {
  return "p:" + std::to_string(p) + "/L:" + std::to_string(l) + "/V:" + std::to_string(v);
}

}  // namespace

PL_KERNEL_CASES {
  using pl::test::Use;
  // posattn, posattn_bwd: the V = 4 fast path and general shapes around the vector widths, the
  // copy-task shape and large L, V, and finite differences on small shapes.
  for (size_t v : {1, 3, 4, 5, 8, 17})
    for (size_t l : {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 33, 64, 65})
      for (size_t p : {1, 2, 3, 8}) add_posattn("sweep/" + plv(p, l, v), p, l, v, false, Use::test);
  for (auto [p, l, v] :
       {std::tuple<size_t, size_t, size_t>{5, 100, 33}, {2, 256, 16}, {3, 5, 1024}, {3, 128, 4}})
    add_posattn("sweep/" + plv(p, l, v), p, l, v, false, Use::test);
  for (size_t v : {1, 3, 4})
    for (size_t l : {1, 3, 5, 9})
      for (size_t p : {1, 3}) add_posattn("fd/" + plv(p, l, v), p, l, v, true, Use::test);
  // posattn_onehot_sse: tokens with about one target in five out of the loss.
  auto random = [](size_t p, size_t l, size_t v) {
    return TokenSpec{TokenSpec::random, uint32_t(p * 131 + l * 17 + v) + 2};
  };
  for (size_t v : {1, 2, 4, 5, 17})
    for (size_t l : {1, 3, 4, 8, 15, 16, 17, 33, 64})
      for (size_t p : {1, 2, 5})
        for (bool grad : {false, true})
          add_onehot("sweep/" + plv(p, l, v), p, l, v, random(p, l, v), grad, false, Use::test);
  for (auto [p, l, v] : {std::tuple<size_t, size_t, size_t>{1000, 16, 4}, {3, 16, 64}})
    for (bool grad : {false, true})
      add_onehot("sweep/" + plv(p, l, v), p, l, v, random(p, l, v), grad, false, Use::test);
  for (size_t v : {1, 3, 4})
    for (size_t l : {1, 3, 5, 9})
      for (size_t p : {1, 3})
        add_onehot("fd/" + plv(p, l, v), p, l, v, random(p, l, v), true, true, Use::test);
  // posattn_onehot_sse_rows: row ranges that start and end inside and at vector boundaries.
  for (size_t v : {2, 4, 5, 17})
    for (size_t l : {1, 3, 16, 17, 33})
      for (size_t p : {1, 5}) {
        std::vector<std::pair<size_t, size_t>> ranges = {
            {0, l}, {0, 1}, {l / 3, l}, {l / 2, l / 2}};
        if (l > 4) ranges.push_back({2, l - 2});
        for (const auto& [i0, i1] : ranges)
          for (bool grad : {false, true})
            add_onehot_rows("sweep/" + plv(p, l, v), p, l, v, i0, i1, random(p, l, v), grad,
                            Use::test);
      }
  // posattn_onehot_stats, posattn_gram_sse: targets fixed by position, as the kernel requires.
  auto by_position = [](size_t p, size_t l, size_t v, int mask, bool shift) {
    return TokenSpec{TokenSpec::by_position, uint32_t(p * 977 + l * 13 + v * 3 + size_t(mask)) + 2,
                     mask, shift};
  };
  auto add_counts = [](const std::string& label, size_t p, size_t l, size_t v, TokenSpec t,
                       Use use) {
    for (bool chunks : {false, true}) add_stats(label, p, l, v, t, chunks, use);
    for (bool grad : {false, true}) add_gram(label, p, l, v, t, grad, use);
  };
  for (size_t v : {1, 2, 3, 4, 5})
    for (size_t l : {1, 2, 3, 7, 8, 9, 16, 17})
      for (size_t p : {1, 2, 7})
        for (int mask : {0, 1, 2})
          add_counts("sweep/" + plv(p, l, v) + "/mask:" + std::to_string(mask), p, l, v,
                     by_position(p, l, v, mask, mask != 2), Use::test);
  for (auto [p, l, v, mask, shift] :
       {std::tuple<size_t, size_t, size_t, int, bool>{1000, 16, 4, 0, true},
        {1000, 16, 4, 1, true},
        {300, 32, 8, 2, false},
        {20, 5, 33, 0, false}})
    add_counts("sweep/" + plv(p, l, v) + "/mask:" + std::to_string(mask), p, l, v,
               by_position(p, l, v, mask, shift), Use::test);
  // The benchmark shapes: the copy-task benchmark (p 1000, L 16, V 4) and larger L, V; 16 x 256 x
  // 256 is bench only (a 1 GFLOP double reference).
  for (auto [p, l, v] :
       {std::tuple<size_t, size_t, size_t>{1000, 16, 4}, {100, 64, 64}, {16, 256, 256}})
    add_posattn(plv(p, l, v), p, l, v, false, p == 16 ? Use::bench : Use::test_and_bench);
  // The copy-task Adam step on one-hot tokens, and the same step through the counts. Under
  // emulation and in the sanitizer tree (tests/emulation.hpp) p 100, L 64, V 64 is benchmark
  // only, as the harness does with the other benchmark shapes there (its work counts sequences,
  // not the double reference's ~5 s under the sanitizers); the sweep's L 64 and V 64 shapes run.
  const TokenSpec copy{TokenSpec::copy, 2};
  const bool thin = pl::test::emulated() || pl::test::sanitized();
  for (auto [p, l, v] : {std::tuple<size_t, size_t, size_t>{1000, 16, 4}, {100, 64, 64}})
    for (bool grad : {false, true})
      add_onehot(plv(p, l, v), p, l, v, copy, grad, false,
                 thin && p == 100 ? Use::bench : Use::test_and_bench);
  for (auto [p, l, v] : {std::tuple<size_t, size_t, size_t>{1000, 16, 4}, {1000, 32, 8}}) {
    for (bool grad : {false, true})
      add_gram(plv(p, l, v), p, l, v, copy, grad, Use::test_and_bench);
    add_stats(plv(p, l, v), p, l, v, copy, false, Use::test_and_bench);
  }
}
