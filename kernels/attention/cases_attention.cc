// SPDX-License-Identifier: Apache-2.0
// attention, attention_bwd: harness cases (kernels/harness/harness.hpp) against a double forward
// and analytic backward written here, and on small shapes the backward also against central
// finite differences of that forward (objective sum(dO .* O)). |err| <= (1e-5 + 1e-5 |ref|)
// sqrt(largest dimension). Shapes around the vector widths, softmax and linear, causal or not,
// padded row strides (every output's padding must be kept). Benchmarks: one head, (n, d) = (64,
// 32), (128, 64) and (256, 64) causal or not, and (128, 128) causal.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/harness/harness.hpp"
#include "tests/emulation.hpp"

namespace {

using pl::test::out;
using pl::test::Output;

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
  return pl::test::central_differences(in.*x, [&] { return objective(in); });
}

// A padded float matrix rows x cols (row stride cols + pad, NaN in the padding) and its dense
// double copy.
struct Padded {
  size_t rows = 0, cols = 0, ld = 0;
  std::vector<float> f;
  Padded() = default;
  Padded(size_t r, size_t c, size_t pad, uint32_t seed)
      : rows(r), cols(c), ld(c + pad), f(r * (c + pad), std::numeric_limits<float>::quiet_NaN()) {
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

// An output buffer rows x cols at row stride cols + pad: NaN inside, a marker in the padding.
struct Out {
  size_t rows = 0, cols = 0, ld = 0;
  std::vector<float> f, got;
  static constexpr float kPad = -3.5f;
  Out() = default;
  Out(size_t r, size_t c, size_t pad)
      : rows(r),
        cols(c),
        ld(c + pad),
        f(r * (c + pad), std::numeric_limits<float>::quiet_NaN()),
        got(r * c) {
    for (size_t i = 0; i < r; ++i)
      for (size_t j = c; j < ld; ++j) f[i * ld + j] = kPad;
  }
  // Gathers the rows x cols part into got; true if the padding is kept.
  bool gather() {
    bool pad_ok = true;
    for (size_t i = 0; i < rows; ++i) {
      for (size_t j = 0; j < cols; ++j) got[i * cols + j] = f[i * ld + j];
      for (size_t j = cols; j < ld; ++j) pad_ok &= f[i * ld + j] == kPad;
    }
    return pad_ok;
  }
};

struct Problem {
  Inputs in;
  Padded q, k, v, d_o;
  float scale = 0;
};

Problem make_problem(Shape s, bool causal, bool linear, size_t pad, uint32_t seed, float scale) {
  Problem pr;
  pr.q = Padded(s.n, s.dk, pad, seed);
  pr.k = Padded(s.n, s.dk, pad + 1, seed + 1);
  pr.v = Padded(s.n, s.dv, pad + 2, seed + 2);
  pr.d_o = Padded(s.n, s.dv, pad, seed + 3);
  pr.scale = scale;
  pr.in = {s, causal, linear, scale, pr.q.dense(), pr.k.dense(), pr.v.dense(), pr.d_o.dense()};
  return pr;
}

struct Fwd {
  Problem pr;
  Out o;
  std::vector<float> p;
  std::vector<double> P, O;
};

struct Bwd {
  Problem pr;
  std::vector<float> p, scratch;  // p: the forward's, as the training loop keeps it
  Out gq, gk, gv;
  std::vector<double> dq, dk, dv, fdq, fdk, fdv;
};

// The forward and backward cases of one problem; with_fd adds the finite-difference references.
void add_attention(const std::string& label, Shape s, bool causal, bool linear, size_t pad,
                   uint32_t seed, float scale, bool with_fd, pl::test::Use use) {
  const double tol = 1e-5 * std::sqrt(double(std::max({s.n, s.dk, s.dv})));
  const double nn = double(s.n) * s.n;
  pl::test::add_case<Fwd>(
      {pl::KernelId::attention,
       "fwd/" + label,
       tol,
       tol,
       {nn, 2.0 * nn * (s.dk + s.dv), 4.0 * (2 * s.n * s.dk + 2 * s.n * s.dv + nn)},
       use},
      [=](bool reference) {
        Fwd f{make_problem(s, causal, linear, pad, seed, scale),
              Out(s.n, s.dv, pad),
              std::vector<float>(s.n * s.n, std::numeric_limits<float>::quiet_NaN()),
              {},
              {}};
        if (reference) forward(f.pr.in, f.P, f.O);
        return f;
      },
      [=](Fwd& f, const pl::Variant& v) {
        pl::as<decltype(&pl::scalar::Attention)>(v)(
            f.pr.q.f.data(), f.pr.q.ld, f.pr.k.f.data(), f.pr.k.ld, f.pr.v.f.data(), f.pr.v.ld,
            f.o.f.data(), f.o.ld, f.p.data(), s.n, s.dk, s.dv, f.pr.scale, causal, linear);
      },
      [](Fwd& f) {
        const bool pad_ok = f.o.gather();
        return std::vector<Output>{out("O", f.o.got.data(), f.O.data(), f.O.size()),
                                   out("P", f.p.data(), f.P.data(), f.P.size()),
                                   pl::test::holds("padding of O kept", pad_ok)};
      });
  pl::test::add_case<Bwd>(
      {pl::KernelId::attention_bwd,
       "bwd/" + label,
       tol,
       tol,
       {nn, 4.0 * nn * (s.dk + s.dv), 4.0 * (4 * s.n * s.dk + 4 * s.n * s.dv + 3 * nn)},
       use},
      [=](bool reference) {
        Bwd b;
        b.pr = make_problem(s, causal, linear, pad, seed, scale);
        std::vector<double> P, O;
        forward(b.pr.in, P, O);
        b.p = pl::test::to_float(P);
        b.scratch.resize(s.n * s.n);
        b.gq = Out(s.n, s.dk, pad + 1);
        b.gk = Out(s.n, s.dk, pad);
        b.gv = Out(s.n, s.dv, pad + 3);
        if (reference) backward(b.pr.in, P, b.dq, b.dk, b.dv);
        if (reference && with_fd) {
          b.fdq = finite_diff(b.pr.in, &Inputs::q);
          b.fdk = finite_diff(b.pr.in, &Inputs::k);
          b.fdv = finite_diff(b.pr.in, &Inputs::v);
        }
        return b;
      },
      [=](Bwd& b, const pl::Variant& v) {
        const Problem& pr = b.pr;
        pl::as<decltype(&pl::scalar::AttentionBwd)>(v)(
            pr.q.f.data(), pr.q.ld, pr.k.f.data(), pr.k.ld, pr.v.f.data(), pr.v.ld, b.p.data(),
            pr.d_o.f.data(), pr.d_o.ld, b.gq.f.data(), b.gq.ld, b.gk.f.data(), b.gk.ld,
            b.gv.f.data(), b.gv.ld, b.scratch.data(), s.n, s.dk, s.dv, pr.scale, causal, linear);
      },
      [with_fd](Bwd& b) {
        const bool pad_ok = b.gq.gather() & b.gk.gather() & b.gv.gather();
        std::vector<Output> o = {out("dQ", b.gq.got.data(), b.dq.data(), b.dq.size()),
                                 out("dK", b.gk.got.data(), b.dk.data(), b.dk.size()),
                                 out("dV", b.gv.got.data(), b.dv.data(), b.dv.size()),
                                 pl::test::holds("padding of dQ, dK, dV kept", pad_ok)};
        if (with_fd) {
          o.push_back(out("dQ vs finite differences", b.gq.got.data(), b.fdq.data(), b.fdq.size()));
          o.push_back(out("dK vs finite differences", b.gk.got.data(), b.fdk.data(), b.fdk.size()));
          o.push_back(out("dV vs finite differences", b.gv.got.data(), b.fdv.data(), b.fdv.size()));
        }
        return o;
      });
}

std::string shape_label(Shape s, int causal, int linear, size_t pad) {
  return "n:" + std::to_string(s.n) + "/dk:" + std::to_string(s.dk) +
         "/dv:" + std::to_string(s.dv) + "/causal:" + std::to_string(causal) +
         "/linear:" + std::to_string(linear) + "/pad:" + std::to_string(pad);
}

}  // namespace

PL_KERNEL_CASES {
  using pl::test::Use;
  auto add = [](Shape s, int causal, int linear, size_t pad, bool with_fd) {
    add_attention((with_fd ? "fd/" : "") + shape_label(s, causal, linear, pad), s, causal, linear,
                  pad, uint32_t(s.n * 1000 + s.dk * 10 + s.dv),
                  float(1.0 / std::sqrt(double(s.dk))), with_fd, Use::test);
  };
  // 257 and 600 cross the depth blocks of the intrinsics GEMM (128 rows on AVX-512, 512 on AVX2).
  const size_t ns[] = {1, 3, 7, 8, 9, 16, 17, 33, 64, 65, 128, 257, 600};
  const Shape ds[] = {{0, 1, 1}, {0, 8, 16}, {0, 17, 9}, {0, 64, 64}, {0, 3, 33}};
  size_t pad = 0;
  for (size_t n : ns)
    for (Shape d : ds)
      for (int causal = 0; causal < 2; ++causal)
        for (int linear = 0; linear < 2; ++linear) {
          if (n >= 64 && d.dk == 64 && (causal || linear)) continue;  // keep the suite fast
          add({n, d.dk, d.dv}, causal, linear, pad, false);
          pad = (pad + 1) % 4;
        }
  // Rows of 9 to 16 vectors on AVX-512 (129 to 256 columns: the fused path's long rows, softmax
  // rows read back from L1), with the products' depth blocks of the GEMM (128 deep for 64-column
  // panels, 256 for 32, 512 for 16) crossed: heads of one, two and several panel widths. Under
  // emulation and in the sanitizer tree (tests/emulation.hpp) n = 200 only, softmax.
  const bool thin = pl::test::emulated() || pl::test::sanitized();
  for (size_t n : {size_t{129}, size_t{200}, size_t{256}})
    for (Shape d : {Shape{0, 64, 64}, Shape{0, 32, 16}, Shape{0, 80, 48}, Shape{0, 128, 128}})
      for (int causal = 0; causal < 2; ++causal)
        for (int linear = 0; linear < 2; ++linear) {
          if (thin && (n != 200 || linear || d.dk > 64)) continue;
          if (d.dk == 128 && n != 256) continue;
          add({n, d.dk, d.dv}, causal, linear, pad, false);
          pad = (pad + 1) % 4;
        }
  // The backward pass against central differences of the double forward.
  for (Shape s : {Shape{1, 1, 1}, Shape{3, 2, 5}, Shape{8, 8, 8}, Shape{9, 17, 3}, Shape{17, 5, 9}})
    for (int causal = 0; causal < 2; ++causal)
      for (int linear = 0; linear < 2; ++linear) add(s, causal, linear, 1, true);
  // The benchmark shapes: one head, tight strides, scale 1/sqrt(d): the Markov model's heads
  // (n = 64, d = 32: markov_default; n = 128, d = 64) causal and dense, and the sweeps' longest
  // rows and widest head causal (n = 256, d = 64, also dense; n = 128, d = 128).
  struct Bench {
    size_t n, d;
    bool causal;
  };
  for (Bench b :
       {Bench{64, 32, false}, Bench{64, 32, true}, Bench{128, 64, false}, Bench{128, 64, true},
        Bench{128, 128, true}, Bench{256, 64, false}, Bench{256, 64, true}})
    add_attention(
        "n:" + std::to_string(b.n) + "/d:" + std::to_string(b.d) + (b.causal ? "/causal" : ""),
        {b.n, b.d, b.d}, b.causal, false, 0, 1, float(1.0 / std::sqrt(double(b.d))), false,
        Use::test_and_bench);
}
