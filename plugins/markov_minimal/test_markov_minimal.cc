// SPDX-License-Identifier: Apache-2.0
// markov_minimal tests: each minimal model's gradient vs central finite differences (double); the
// symmetric model's loss equals the full attention-only transformer's (markov_icl's Model<double>,
// LN off, MLP off) with its weights set to the symmetric form; the float path on the kernel table
// vs the double one; the hard-wired layer 1 of the induction model is exactly previous-token;
// a wide memoriser fits K = 2 chains to the 2-Mem floor; a saved and loaded checkpoint of each
// model reproduces its losses bit for bit; the model choices of tau(N): c_beta, c_delta at a frozen
// read-out vs finite differences, frozen gains stay bitwise constant, tau_drop on a synthetic fall,
// the summary's fits for every tau definition and for the c's at the frozen read-out; the cost
// estimate (positive, grows with the work, equal to cost.hpp's formula worked by hand).
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "markov_common/hooked.hpp"
#include "markov_common/model.hpp"
#include "markov_common/test_util.hpp"
#include "markov_minimal/harness.hpp"
#include "markov_minimal/minimal_checkpoint.hpp"
#include "markov_minimal/minimal_summary.hpp"
#include "markov_minimal/symmetric_run.hpp"
#include "phaselab/kernels.hpp"
#include "phaselab_plugin.h"
#include "sdk/test_host.hpp"
#include "tests/emulation.hpp"

namespace {

using pl::markov::test::close;
using pl::markov::test::normals;
using pl::markov::test::table;
using pl::markov::test::tokens;

// Central differences of f over the parameter vector p (in place, restored), compared with g.
template <class F>
int check_fd(std::vector<double>& p, const std::vector<double>& g, F&& f, double h, double atol,
             double rtol, double* max_g) {
  int bad = 0;
  *max_g = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double p0 = p[i];
    p[i] = p0 + h;
    const double lp = f();
    p[i] = p0 - h;
    const double lm = f();
    p[i] = p0;
    const double fd = (lp - lm) / (2 * h);
    *max_g = std::max(*max_g, std::fabs(fd));
    if (!close(g[i], fd, atol, rtol)) {
      if (bad < 5) MESSAGE("param " << i << ": analytic " << g[i] << " fd " << fd);
      ++bad;
    }
  }
  return bad;
}

// A double model's gradient at params = scale * N(0,1) (sub-stream `stream`) on the sequences x
// vs central differences (and not vanishing).
template <class M>
void check_model_gradient(M& m, double scale, uint64_t stream, const std::vector<int32_t>& x,
                          int nb) {
  const std::vector<float> z = normals(m.num_params(), stream);
  for (size_t i = 0; i < z.size(); ++i) m.params[i] = scale * z[i];
  m.run(x.data(), nb, true);
  const std::vector<double> g = m.grads;
  auto f = [&] { return m.run(x.data(), nb, false); };
  double max_g = 0;
  CHECK(check_fd(m.params, g, f, 1e-5, 1e-9, 1e-6, &max_g) == 0);
  CHECK(max_g > 1e-3);
}

// write_minimal_summary on a folder's run.csv, then its minimal_fits.csv by (quantity, group).
struct Fits {
  std::map<std::string, std::vector<std::string>> rows;
  double value(const std::string& quantity, const std::string& group, int col) const {
    const std::string key = quantity + "|" + group;
    REQUIRE_MESSAGE(rows.count(key), key);
    return std::atof(rows.at(key)[size_t(col)].c_str());
  }
};
Fits summarise(const std::string& dir) {
  std::string msg;
  REQUIRE(pl::markov::minimal::write_minimal_summary(dir, &msg, false));
  pl::sdk::Table table;
  std::string why;
  REQUIRE_MESSAGE(table.read(dir + "/minimal_fits.csv", &why), why);
  Fits fits;
  for (size_t r = 0; r < table.rows(); ++r)
    fits.rows[table.str(r, 0) + "|" + table.str(r, 1)] = table.row(r);
  return fits;
}

}  // namespace

using pl::markov::minimal::SymModel;

TEST_CASE("markov_minimal: symmetric model gradient matches central finite differences (double)") {
  const int C = 4, N = 9, nb = 3;
  const auto x = tokens(nb, N, C, 11);
  SymModel<double> m(C, N, nullptr);
  // away from the plateau (every path carries signal) and at the plateau point beta = delta = 0
  const double pts[2][5] = {{0.7, 1.3, 0.4, -0.6, 0.9}, {0.0, 0.0, 0.3, 0.5, 1.1}};
  for (const auto& pt : pts) {
    for (int i = 0; i < 5; ++i) m.theta[size_t(i)] = pt[i];
    std::vector<double> g(5), ps(size_t(nb) * 5);
    m.run(x.data(), nb, g.data(), ps.data());
    std::vector<double> p(m.theta.begin(), m.theta.end());
    auto f = [&] {
      for (int i = 0; i < 5; ++i) m.theta[size_t(i)] = p[size_t(i)];
      return m.run(x.data(), nb, nullptr);
    };
    double max_g = 0;
    CHECK(check_fd(p, g, f, 1e-5, 1e-9, 1e-6, &max_g) == 0);
    CHECK(max_g > 1e-3);
    for (int i = 0; i < 5; ++i) {  // per-sequence gradients average to the batch gradient
      double s = 0;
      for (int b = 0; b < nb; ++b) s += ps[size_t(b) * 5 + size_t(i)];
      CHECK(close(s / nb, g[size_t(i)], 1e-14, 1e-12));
    }
  }
}

// The full attention-only transformer (no LN, no MLP, learned positions) with d = 3C + N: token
// one-hots in [0, C), position one-hots in [C, C + N), layer-1 output in [C + N, 2C + N), layer-2
// output in [2C + N, 3C + N). Layer 1: query = beta sqrt(d) e(pos n), key = e(pos m + 1), so the
// score is beta [m = n - 1]; value = the token, written to the h block. Layer 2: query = delta
// sqrt(d) e(x_n), key = the h block, value = the token, written to the o block. Read-out
// g_u, g_h, g_o on the three blocks, plus b 11^T on each block (a constant shift of the logits).
void set_symmetric_form(pl::markov::Model<double>& M, int C, int N, const double* th, double b) {
  const int d = 3 * C + N;
  std::fill(M.params.begin(), M.params.end(), 0.0);
  auto& P = M.P;
  const double sd = std::sqrt(double(d));
  for (int a = 0; a < C; ++a) P.wte[size_t(a) * d + a] = 1;
  for (int t = 0; t < N; ++t) P.wpe[size_t(t) * d + C + t] = 1;
  const int H = C + N, O = 2 * C + N;
  auto W = [&](double* w, int r, int c) -> double& { return w[size_t(r) * d + c]; };
  {  // layer 1
    double* q = P.l[0].wqkv;
    double* k = q + size_t(d) * d;
    double* v = k + size_t(d) * d;
    for (int t = 0; t < N; ++t) W(q, C + t, C + t) = th[0] * sd;
    for (int t = 0; t + 1 < N; ++t) W(k, C + t + 1, C + t) = 1;
    for (int a = 0; a < C; ++a) W(v, H + a, a) = 1, W(P.l[0].wo, H + a, H + a) = 1;
  }
  {  // layer 2
    double* q = P.l[1].wqkv;
    double* k = q + size_t(d) * d;
    double* v = k + size_t(d) * d;
    for (int a = 0; a < C; ++a) {
      W(q, a, a) = th[1] * sd;
      W(k, a, H + a) = 1;
      W(v, O + a, a) = 1;
      W(P.l[1].wo, O + a, O + a) = 1;
    }
  }
  for (int j = 0; j < C; ++j)
    for (int a = 0; a < C; ++a) {
      W(P.wu, j, a) = (j == a ? th[2] : 0.0) + b;
      W(P.wu, j, H + a) = (j == a ? th[3] : 0.0) + b;
      W(P.wu, j, O + a) = (j == a ? th[4] : 0.0) - 2 * b;
    }
}

TEST_CASE(
    "markov_minimal: symmetric model equals the full attention-only transformer in its form") {
  const int nb = 4;
  for (const int C : {3, 5})
    for (const int N : {6, 17}) {
      CAPTURE(C);
      CAPTURE(N);
      pl::markov::ModelConfig cfg;
      cfg.C = C;
      cfg.N = N;
      cfg.d = 3 * C + N;
      cfg.heads = 1;
      cfg.layers = 2;
      cfg.mlp = false;
      cfg.ln = false;
      pl::markov::Model<double> full(cfg, nullptr, nb, 1);
      SymModel<double> sym(C, N, nullptr);
      const auto x = tokens(nb, N, C, 5 + C * N);
      const double pts[3][5] = {
          {0, 0, 0, 0, 0}, {0.0, 0.0, 0.3, 0.5, 1.1}, {2.1, 3.5, 0.4, -0.6, 1.9}};
      for (const auto& pt : pts) {
        for (int i = 0; i < 5; ++i) sym.theta[size_t(i)] = pt[i];
        for (const double b : {0.0, 0.37}) {
          set_symmetric_form(full, C, N, pt, b);
          const double lf = full.forward(x.data(), nb);
          std::vector<double> lp_sym(size_t(nb) * N * C), lp_full(lp_sym.size());
          const double ls = sym.run(x.data(), nb, nullptr, nullptr, lp_sym.data());
          full.log_probs(nb, lp_full.data());
          CHECK(close(ls, lf, 1e-6, 0));
          CHECK(std::fabs(ls - lf) < 1e-12);
          double mx = 0;
          for (size_t i = 0; i < lp_sym.size(); ++i)
            mx = std::max(mx, std::fabs(lp_sym[i] - lp_full[i]));
          CHECK(mx < 1e-12);
        }
      }
      // the layer-1 output of the full model is the symmetric model's h (rows b * N + t)
      set_symmetric_form(full, C, N, pts[2], 0);
      full.forward(x.data(), nb);
      sym.theta = {pts[2][0], pts[2][1], pts[2][2], pts[2][3], pts[2][4]};
      sym.run(x.data() + size_t(nb - 1) * (N + 1), 1, nullptr);
      double mx = 0;
      for (int t = 0; t < N; ++t)
        for (int a = 0; a < C; ++a)
          mx = std::max(
              mx, std::fabs(full.A(0)[(size_t(nb - 1) * N + t) * cfg.d + C + N + a] - sym.h(t, a)));
      CHECK(mx < 1e-13);
    }
}

TEST_CASE("markov_minimal: symmetric model in float on the kernel table matches double") {
  const pl_kernel_table t = table();
  const int C = 10, N = 64, nb = 4;
  const auto x = tokens(nb, N, C, 3);
  SymModel<double> md(C, N, nullptr);
  SymModel<float> mf(C, N, &t);
  md.theta = mf.theta = {1.2, 2.5, 0.3, 0.8, 2.0};
  double gd[5], gf[5];
  const double ld = md.run(x.data(), nb, gd), lf = mf.run(x.data(), nb, gf);
  CHECK(close(lf, ld, 1e-6, 1e-5));
  for (int i = 0; i < 5; ++i) CHECK(close(gf[i], gd[i], 1e-5, 1e-4));
}

using pl::markov::minimal::InductionModel;
using pl::markov::minimal::MemoriserModel;

TEST_CASE("markov_minimal: induction model gradient matches central finite differences (double)") {
  const int C = 3, N = 7, nb = 3, dh = 4;
  InductionModel<double> m(C, N, dh, nb, nullptr);
  check_model_gradient(m, 0.7, 77 * 16 + 1, tokens(nb, N, C, 21), nb);
}

TEST_CASE("markov_minimal: the induction model's layer 1 is exactly previous-token") {
  const pl_kernel_table t = table();
  const int C = 5, N = 12, nb = 3;
  InductionModel<float> m(C, N, 8, nb, &t);
  const std::vector<float> z = normals(m.num_params(), 3 * 16 + 2);
  for (size_t i = 0; i < z.size(); ++i) m.params[i] = z[i];
  const auto x = tokens(nb, N, C, 8);
  m.run(x.data(), nb, true);
  // y_n = e(x_n) (+) e(x_{n-1}), exactly, whatever the weights; e(x_{-1}) = 0
  int bad = 0;
  for (int b = 0; b < nb; ++b)
    for (int n = 0; n < N; ++n)
      for (int a = 0; a < C; ++a) {
        const float* y = m.y() + (size_t(b) * N + n) * 2 * C;
        const int32_t* s = x.data() + size_t(b) * (N + 1);
        bad += y[a] != (s[n] == a ? 1.f : 0.f);
        bad += y[C + a] != (n > 0 && s[n - 1] == a ? 1.f : 0.f);
      }
  CHECK(bad == 0);
  // It is what the full transformer's layer 1 writes with its pattern replaced by exact
  // previous-token attention (the shared hooked pass): an attention-only, LN-free Model<double>
  // with d = 2C, wte = token one-hots in the first block, no positions, and layer-1 value/output
  // copying the token into the second block. Residual input of layer 2 = E + A_1 = y, exactly,
  // for n >= 1 (at n = 0 the shared pattern attends to position 0 itself; the induction model
  // writes e(x_{-1}) = 0 there).
  pl::markov::ModelConfig cfg;
  cfg.C = C;
  cfg.N = N;
  cfg.d = 2 * C;
  cfg.heads = 1;
  cfg.layers = 2;
  cfg.mlp = false;
  cfg.ln = false;
  pl::markov::Model<double> full(cfg, nullptr, nb, 1);
  const std::vector<float> zf = normals(full.num_params(), 99);
  for (size_t i = 0; i < zf.size(); ++i) full.params[i] = zf[i];  // any q, k: the pattern is set
  const size_t d = size_t(cfg.d);
  std::fill(full.P.wte, full.P.wte + size_t(C) * d, 0.0);
  std::fill(full.P.wpe, full.P.wpe + size_t(N) * d, 0.0);
  for (int a = 0; a < C; ++a) full.P.wte[size_t(a) * d + size_t(a)] = 1;
  double* wv = full.P.l[0].wqkv + 2 * d * d;
  std::fill(wv, wv + d * d, 0.0);
  std::fill(full.P.l[0].wo, full.P.l[0].wo + d * d, 0.0);
  for (int a = 0; a < C; ++a) {
    wv[size_t(C + a) * d + size_t(a)] = 1;
    full.P.l[0].wo[size_t(C + a) * d + size_t(C + a)] = 1;
  }
  const std::vector<double> prev = pl::markov::previous_token_pattern<double>(cfg, nb);
  pl::markov::Hooks<double> hk;
  hk.pattern[0] = prev.data();
  pl::markov::HookedCache<double> out;
  pl::markov::HookedModel<double>(full).run(x.data(), nb, hk, out);
  const std::vector<double>& y2 = out.resid[size_t(pl::markov::recv(1, pl::markov::Input::kQ))];
  int diff = 0;
  for (int b = 0; b < nb; ++b)
    for (int n = 1; n < N; ++n)
      for (size_t i = 0; i < d; ++i)
        diff += y2[(size_t(b) * N + n) * d + i] != double(m.y()[(size_t(b) * N + n) * d + i]);
  CHECK(diff == 0);
  // and the symmetric model's layer-1 output h_m tends to e(x_{m-1}) as beta grows
  // the symmetric model's layer-1 output h_m tends to e(x_{m-1}) as beta grows
  SymModel<double> sym(C, N, nullptr);
  sym.theta = {60.0, 0, 0, 0, 0};
  sym.run(x.data(), 1, nullptr);
  double mx = 0;
  for (int n = 1; n < N; ++n)
    for (int a = 0; a < C; ++a)
      mx = std::max(mx, std::fabs(sym.h(n, a) - double(m.y()[size_t(n) * 2 * C + C + a])));
  CHECK(mx < 1e-20);
}

TEST_CASE("markov_minimal: memoriser gradient matches central finite differences (double)") {
  for (const bool gelu : {false, true}) {
    CAPTURE(gelu);
    const int C = 3, N = 6, nb = 2, d = 4, w = 5;
    MemoriserModel<double> m(C, N, d, w, gelu, nb, nullptr);
    check_model_gradient(m, 0.8, 5 * 16 + (gelu ? 1 : 0), tokens(nb, N, C, 4), nb);
  }
}

TEST_CASE("markov_minimal: float induction and memoriser on the kernel table match double") {
  const pl_kernel_table t = table();
  const int C = 4, N = 16, nb = 3;
  const auto x = tokens(nb, N, C, 12);
  {
    InductionModel<double> md(C, N, 8, nb, nullptr);
    InductionModel<float> mf(C, N, 8, nb, &t);
    const std::vector<float> z = normals(md.num_params(), 9 * 16 + 0);
    for (size_t i = 0; i < z.size(); ++i) md.params[i] = mf.params[i] = 0.5f * z[i];
    CHECK(close(mf.run(x.data(), nb, true), md.run(x.data(), nb, true), 1e-6, 1e-5));
    for (size_t i = 0; i < z.size(); ++i) CHECK(close(mf.grads[i], md.grads[i], 1e-5, 1e-3));
  }
  {
    MemoriserModel<double> md(C, N, 8, 16, true, nb, nullptr);
    MemoriserModel<float> mf(C, N, 8, 16, true, nb, &t);
    const std::vector<float> z = normals(md.num_params(), 10 * 16 + 0);
    for (size_t i = 0; i < z.size(); ++i) md.params[i] = mf.params[i] = 0.5f * z[i];
    CHECK(close(mf.run(x.data(), nb, true), md.run(x.data(), nb, true), 1e-6, 1e-5));
    for (size_t i = 0; i < z.size(); ++i) CHECK(close(mf.grads[i], md.grads[i], 1e-5, 1e-3));
  }
}

// Skipped under emulation (1500 training steps take minutes under qemu; fewer do not converge).
TEST_CASE("markov_minimal: a wide memoriser fits K = 2 chains to the 2-Mem floor" *
          doctest::skip(pl::test::emulated())) {
  const pl_kernel_table t = table();
  pl::markov::minimal::MinConfig c;
  c.kind = pl::markov::minimal::Kind::kMemoriser;
  c.C = 3;
  c.N = 32;
  c.K = 2;
  c.infinite = false;
  c.d_phi = 16;
  c.width = 64;
  c.lr = 3e-3;
  c.batch = 32;
  c.n_eval = 256;
  pl::markov::minimal::Harness h(c, t);
  const pl::markov::EvalResult r0 = h.evaluate();
  for (int64_t s = 1; s <= 1500; ++s) h.train_step(s);
  const pl::markov::EvalResult r = h.evaluate();
  const double floor = h.eval_set(0).bayes[pl::markov::kMem2];
  MESSAGE("memoriser K=2: KL(2mem) " << r0.kl[0][pl::markov::kMem2] << " -> "
                                     << r.kl[0][pl::markov::kMem2] << ", ID loss " << r.loss[0]
                                     << " vs 2-Mem floor " << floor);
  CHECK(r.phase == pl::markov::kMem2);
  CHECK(r.kl[0][pl::markov::kMem2] < 0.02);  // the kl_fit threshold of the capacity sweep is 0.05
  CHECK(r.loss[0] - floor < 0.03);
  CHECK(r.loss[0] > floor - 0.02);  // cannot beat Bayes by more than the sampling noise
}

TEST_CASE("markov_minimal: summary recovers tau ~ N / ln N and K_max ~ width^a from a run.csv") {
  const std::string dir = "markov_minimal_summary_test";
  std::filesystem::create_directories(dir);
  {
    std::ofstream f(dir + "/run.csv");
    f.precision(17);
    f << "N,K,width,seed,model,c_beta,c_delta,tau,fits\n";
    for (const int N : {16, 32, 64, 128, 256})
      for (const int s : {0, 1})  // tau = 7 N / ln N; c_beta = 0.01 N^-0.5, c_delta = 0.02 N^0.25
        f << N << ",1,1," << s << ",symmetric," << 0.01 / std::sqrt(double(N)) << ","
          << 0.02 * std::pow(double(N), 0.25) << "," << 7.0 * N / std::log(double(N)) << ",\n";
    for (const int w : {4, 16, 64})  // K_max = w / 2 (2, 8, 32) on K = 2..64; a = 1
      for (const int K : {2, 4, 8, 16, 32, 64})
        f << "64," << K << "," << w << ",0,memoriser,,,," << (2 * K <= w ? 1 : 0) << "\n";
  }
  const Fits fits = summarise(dir);
  auto value = [&](const std::string& q, const std::string& g, int col) {
    return fits.value(q, g, col);
  };
  // columns: quantity, group, points, value, stderr, rms, alt, alt_rms
  const std::string g = "K=1 width=1";
  CHECK(close(value("tau (N/lnN)^q q all N", g, 3), 1.0, 1e-9, 0));
  CHECK(value("tau (N/lnN)^q q all N", g, 5) < 1e-9);
  CHECK(close(value("tau power p all N", g, 6), 7.0, 1e-9, 1e-9));  // c of c N / ln N
  CHECK(value("tau power p all N", g, 7) < 1e-9);                   // its rms
  CHECK(value("tau power p all N", g, 5) > 1e-3);  // a pure power law does not fit N / ln N
  CHECK(close(value("c_beta power s", g, 3), -0.5, 1e-9, 0));
  CHECK(close(value("c_delta power s", g, 3), 0.25, 1e-9, 0));
  CHECK(close(value("K_max", "N=64 width=16", 3), 8.0, 1e-9, 0));
  CHECK(close(value("K_max width power a", "N=64", 3), 1.0, 1e-9, 0));
  std::filesystem::remove_all(dir);
}

namespace {
template <class T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}
}  // namespace

TEST_CASE("markov_minimal: a saved and loaded checkpoint reproduces the losses bit for bit") {
  namespace mm = pl::markov::minimal;
  namespace st = pl::sdk::safetensors;
  const pl_kernel_table t = table();
  const mm::Kind kinds[] = {mm::Kind::kSymmetric, mm::Kind::kInduction, mm::Kind::kMemoriser};
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("phaselab_minimal_ckpt_" + std::to_string(::getpid()) + ".st"))
                               .string();
  for (const mm::Kind kind : kinds) {
    const std::string name = mm::kind_name(kind);
    CAPTURE(name);
    mm::MinConfig c;
    c.kind = kind;
    c.C = 3;
    c.N = 8;
    c.K = 4;
    c.infinite = false;
    c.batch = 8;
    c.n_eval = 24;
    c.lr = 3e-2;
    c.d_head = 4;
    c.d_phi = 5;
    c.width = 6;
    c.phi_gelu = kind == mm::Kind::kMemoriser;
    c.chain_seed = 11;
    c.seed = 5;
    mm::Harness h(c, t);
    for (int64_t s = 1; s <= 30; ++s) h.train_step(s);  // away from the initial weights
    mm::save_minimal(path, h, 30, "markov_minimal test");

    // the file: one tensor per block, F64 for the symmetric model's scalars, F32 otherwise
    const st::File f = st::read(path);
    const auto want = mm::minimal_tensors(c);
    REQUIRE(f.tensors.size() == want.size());
    for (const auto& w : want) {
      const st::Tensor* ten = st::find(f, w.name);
      REQUIRE(ten != nullptr);
      CHECK(ten->shape == w.shape);
      CHECK((ten->dtype == st::DType::F64) == (kind == mm::Kind::kSymmetric));
    }

    // a harness built from the checkpoint alone (its model and data fields) plus batch, n_eval
    const mm::MinimalCheckpoint ck = mm::load_minimal(path);
    CHECK(ck.info.step == 30);
    CHECK(ck.info.chain_seed == 11);
    CHECK(ck.info.K == 4);
    CHECK_FALSE(ck.info.infinite);
    CHECK(ck.info.alpha1 == h.config().alpha1);  // the resolved (matched) pseudo-count
    CHECK(ck.info.plugin == "markov_minimal test");
    mm::MinConfig c2 = ck.config;
    c2.batch = c.batch;
    c2.n_eval = c.n_eval;
    mm::Harness h2(c2, t);
    mm::load_into(ck, h2);
    const pl::markov::EvalResult a = h.evaluate(), b = h2.evaluate();
    for (int s = 0; s < 2; ++s) {
      CHECK(same_bits(a.loss[s], b.loss[s]));
      for (int k = 0; k < pl::markov::kNumPred; ++k) {
        CHECK(same_bits(a.kl[s][k], b.kl[s][k]));
        CHECK(same_bits(a.kl_late[s][k], b.kl_late[s][k]));
      }
    }
    CHECK(a.phase == b.phase);
    // and on a training batch, with the gradient
    h.make_batch(31);
    const std::vector<int32_t> batch = h.batch_tokens();
    const double la = h.net().run(batch.data(), c.batch, true, nullptr);
    const double lb = h2.net().run(batch.data(), c.batch, true, nullptr);
    CHECK(same_bits(la, lb));
    CHECK(std::memcmp(h.net().g.data(), h2.net().g.data(), h.net().g.size() * sizeof(double)) == 0);
    MESSAGE(std::string(mm::kind_name(kind)) << ": ID loss " << a.loss[0] << " after save/load "
                                             << b.loss[0] << ", batch loss " << la << " / " << lb);

    // a harness of another size refuses it
    mm::MinConfig c3 = c2;
    c3.N = 9;
    mm::Harness h3(c3, t);
    CHECK_THROWS_AS(mm::load_into(ck, h3), std::invalid_argument);
  }
  // a markov_icl checkpoint is not a minimal-model one, and vice versa
  bool refused = false;
  try {
    pl::markov::load_checkpoint(path);
  } catch (const std::runtime_error& e) {
    refused =
        std::string(e.what()).find("not a phaselab Markov-model checkpoint") != std::string::npos;
  }
  CHECK(refused);
  std::filesystem::remove(path);
}

namespace {
pl::markov::minimal::MinConfig sym_config() {
  pl::markov::minimal::MinConfig c;
  c.kind = pl::markov::minimal::Kind::kSymmetric;
  c.C = 4;
  c.N = 24;
  c.infinite = true;
  c.batch = 8;
  c.n_eval = 8;
  c.sgd = true;
  c.lr = 2.0;
  c.chain_seed = 3;
  c.seed = 7;
  return c;
}
}  // namespace

TEST_CASE("markov_minimal: c_beta, c_delta at a frozen read-out match finite differences") {
  namespace mm = pl::markov::minimal;
  const pl_kernel_table t = table();
  mm::Harness h(sym_config(), t);
  const std::array<double, 3> opt = mm::train_plateau_gains(h, 100);
  // a read-out away from the optimum (as a frozen one is at another N)
  const std::array<double, mm::kNumSym> th = {0, 0, 0.4 * opt[0] + 0.3, 0.5, 2.5};
  const int64_t c_tokens = 24 * 80;  // 80 sequences of N = 24
  const mm::PlateauProbe p = mm::probe_plateau(h, th, c_tokens, false);
  // oracle: central differences of the mean loss over the same sequences (blocks of the plateau
  // gradient stream), from the double model's forward pass only
  std::vector<int32_t> seqs;
  const int n = 80, N = 24;
  for (int64_t blk = 0; int(seqs.size()) < n * (N + 1); ++blk) {
    h.make_batch(blk, mm::kPlateauGrad);
    const std::vector<int32_t>& b = h.batch_tokens();
    const size_t take = std::min(b.size(), size_t(n * (N + 1)) - seqs.size());
    seqs.insert(seqs.end(), b.begin(), b.begin() + long(take));
  }
  mm::SymModel<double> m(4, N, nullptr);
  auto loss = [&](int k, double d) {
    m.theta = th;
    m.theta[size_t(k)] += d;
    return m.run(seqs.data(), n, nullptr);
  };
  const double hh = 1e-4;
  for (int k = 0; k < 2; ++k) {
    const double fd = -(loss(k, hh) - loss(k, -hh)) / (2 * hh);
    CAPTURE(k);
    MESSAGE(std::string(k ? "c_delta" : "c_beta")
            << " at the frozen read-out " << p.c[k] << " fd " << fd << " se " << p.se[k]);
    CHECK(close(p.c[k], fd, 1e-9, 1e-5));
    CHECK(std::fabs(fd) > 1e-4);  // not a vacuous match (|c| ~ 3e-3 and 1e-2 here)
    CHECK(p.se[k] > 0);
  }
  CHECK(close(p.loss, loss(0, 0), 1e-12, 1e-12));
  // and it is not the optimal read-out's value
  const std::array<double, mm::kNumSym> to = {0, 0, opt[0], opt[1], opt[2]};
  const mm::PlateauProbe po = mm::probe_plateau(h, to, c_tokens, true);
  CHECK(std::fabs(po.c[0] - p.c[0]) > 1e-4);
  CHECK(po.loss < p.loss);  // the optimum is lower
  CHECK(po.bayes2 < po.bayes1);
}

TEST_CASE("markov_minimal: a frozen read-out stays bitwise constant while beta and delta train") {
  namespace mm = pl::markov::minimal;
  const pl_kernel_table t = table();
  for (const bool frozen : {true, false}) {
    CAPTURE(frozen);
    mm::Harness h(sym_config(), t);
    mm::Net& net = h.net();
    net.p = {0.1, 0.2, 0.7, 1.3, 2.9};
    const std::vector<double> p0 = net.p;
    const std::vector<bool> mask = mm::readout_mask(frozen);
    for (int64_t s = 1; s <= 40; ++s) h.train_step(s, mask);
    for (int i = mm::kGu; i <= mm::kGo; ++i) {
      const bool same = std::memcmp(&net.p[size_t(i)], &p0[size_t(i)], sizeof(double)) == 0;
      CHECK(same == frozen);
    }
    CHECK(net.p[mm::kBeta] != p0[mm::kBeta]);
    CHECK(net.p[mm::kDelta] != p0[mm::kDelta]);
  }
}

TEST_CASE("markov_minimal: tau_drop finds the midpoint of a synthetic fall") {
  namespace mm = pl::markov::minimal;
  // windowed loss: NaN for the first 19 steps, plateau 2.0 (with +-0.01 wiggle) to step 500, a
  // linear fall to 1.2 at step 600, then 1.2: midpoint 1.6 at step 550
  std::vector<double> wl;
  for (int t = 1; t <= 900; ++t) {
    double v = t < 20     ? NAN
               : t <= 500 ? 2.0 + 0.01 * std::sin(t)
               : t <= 600 ? 2.0 - 0.008 * (t - 500)
                          : 1.2;
    wl.push_back(v);
  }
  CHECK(mm::tau_drop(wl, 2.0, 1.2, 0.1) == 550);
  CHECK(mm::tau_drop(wl, 2.0, 1.2, 0.1, 0.25) == 525);
  CHECK(std::isnan(mm::tau_drop(wl, 2.0, 1.2, 0.9)));    // a fall below min_fall is not timed
  CHECK(std::isnan(mm::tau_drop(wl, 2.0, 2.05, 0.0)));   // no fall
  CHECK(std::isnan(mm::tau_drop(wl, NAN, 1.2, 0.1)));    // no plateau loss
  std::vector<double> up(wl.begin(), wl.begin() + 500);  // never crossed
  CHECK(std::isnan(mm::tau_drop(up, 2.0, 1.2, 0.1)));
}

TEST_CASE("markov_minimal: summary fits every tau definition and the c's at the frozen read-out") {
  const std::string dir = "markov_minimal_summary_tau_test";
  std::filesystem::create_directories(dir);
  {
    std::ofstream f(dir + "/run.csv");
    f.precision(17);
    // per read-out group: tau_drop = 5 N / ln N; tau_takeoff = 30 N^0.3 (trained) or 2 N / ln N
    // (reference); tau only for the trained read-out; c_beta_fixed = 0.3 ln N / N
    f << "N,readout,seed,model,tau,tau_drop,tau_takeoff,c_beta,c_beta_se,c_beta_fixed,"
         "c_beta_fixed_se\n";
    for (const char* ro : {"trained", "reference"})
      for (const int N : {16, 64, 256, 1024, 4096})
        for (const int s : {0, 1}) {
          const double n = N, ln = std::log(n);
          const bool tr = std::string(ro) == "trained";
          f << N << "," << ro << "," << s << ",symmetric,";
          if (tr) f << 100 * std::pow(n, 0.2);
          f << "," << 5 * n / ln << "," << (tr ? 30 * std::pow(n, 0.3) : 2 * n / ln)
            << ",2e-4,1e-5," << 0.3 * ln / n << ",1e-6\n";
        }
  }
  const Fits fits = summarise(dir);
  auto value = [&](const std::string& q, const std::string& g, int col) {
    return fits.value(q, g, col);
  };
  // columns: quantity, group, points, value, stderr, rms, alt, alt_rms
  for (const char* g : {"readout=trained", "readout=reference"}) {
    CAPTURE(g);
    CHECK(close(value("tau_drop power p all N", g, 6), 5.0, 1e-9, 1e-9));  // c of c N / ln N
    CHECK(value("tau_drop power p all N", g, 7) < 1e-9);
    CHECK(value("tau_drop power p all N", g, 5) > 1e-3);  // a power law does not fit N / ln N
    CHECK(close(value("tau_drop (N/lnN)^q q all N", g, 3), 1.0, 1e-9, 0));
    CHECK(close(value("c_beta_fixed power s", g, 6), 0.3, 1e-9, 1e-9));  // a of a ln N / N
    CHECK(value("c_beta_fixed power s", g, 7) < 1e-9);
    CHECK(value("c_beta power s", g, 7) > 1e-2);  // flat c: ln N / N does not fit
  }
  CHECK(close(value("tau_takeoff power p all N", "readout=trained", 3), 0.3, 1e-9, 0));
  CHECK(value("tau_takeoff power p all N", "readout=trained", 5) < 1e-9);
  CHECK(value("tau_takeoff power p all N", "readout=trained", 7) > 1e-2);
  CHECK(close(value("tau_takeoff power p all N", "readout=reference", 6), 2.0, 1e-9, 1e-9));
  CHECK(close(value("tau power p all N", "readout=trained", 3), 0.2, 1e-9, 0));
  CHECK(fits.rows.count("tau power p all N|readout=reference") == 0);  // no threshold tau there
  std::filesystem::remove_all(dir);
}

extern "C" double phaselab_plugin_point_cost(const pl_value* v, uint32_t n);

TEST_CASE("point cost: positive, larger where the run does more, cost.hpp's formula by hand") {
  // The dispatcher and `run --shard` order points by it (bench/cost_rank.py --cpu measures its
  // rank correlation with CPU seconds: docs/scale-out.md).
  pl::test_host::FakeHost h(phaselab_plugin_entry);
  using Over = std::map<std::string, std::string>;
  auto cost = [&](Over over, const Over& more = {}) {
    for (const auto& [k, v] : more) over[k] = v;
    const double c = h.call_with_values(phaselab_plugin_point_cost, over);
    CHECK(std::isfinite(c));
    CHECK(c > 0);
    return c;
  };
  const Over sym = {{"model", "symmetric"},
                    {"C", "10"},
                    {"infinite", "1"},
                    {"tokens", "2048"},
                    {"steps", "8000"}};
  const Over ind = {
      {"model", "induction"}, {"C", "3"}, {"N", "32"}, {"infinite", "1"}, {"steps", "3000"}};
  const Over mem = {{"model", "memoriser"}, {"C", "3"},  {"N", "32"},
                    {"infinite", "0"},      {"K", "16"}, {"steps", "5000"}};
  SUBCASE("symmetric") {
    // 2048 tokens per step: per-pair work grows with N, the per-sequence chain draws shrink;
    // from N = 64 up the pairs win, below it the chains (measured: 1.48 s vs 1.03 s per 1000
    // steps at N = 16 and 64)
    double last = 0;
    for (const std::string N : {"64", "128", "256", "1024", "4096"}) {
      CAPTURE(N);
      const double c = cost(sym, {{"N", N}});
      CHECK(c > last);
      last = c;
    }
    CHECK(cost(sym, {{"N", "16"}}) > cost(sym, {{"N", "64"}}));
    CHECK(cost(sym, {{"steps", "16000"}}) > cost(sym));
    CHECK(cost(sym, {{"n_eval", "2000"}}) > cost(sym));
    CHECK(cost(sym, {{"checkpoints", "64"}}) > cost(sym));
    CHECK(cost(sym, {{"c_tokens", "1048576"}}) > cost(sym));
    CHECK(cost(sym, {{"plateau_steps", "1000"}}) > cost(sym));
    CHECK(cost(sym, {{"plateau_steps", "0"}}) < cost(sym));
    CHECK(cost(sym, {{"C", "20"}}) > cost(sym));
    CHECK(cost(sym, {{"infinite", "0"}, {"alpha1", "1"}}) < cost(sym, {{"alpha1", "1"}}));
    CHECK(cost(sym, {{"alpha1", "1"}}) < cost(sym));  // no matched pseudo-count to compute
    // an early stop at 1.25 tau runs fewer steps (tau taken as 1000) ...
    const Over stop = {{"stop_after_tau", "0.25"}};
    CHECK(cost(sym, stop) < cost(sym));
    CHECK(cost(sym, {{"stop_after_tau", "1"}}) > cost(sym, stop));
    // ... but never more than steps
    CHECK(cost(sym, {{"stop_after_tau", "20"}}) == cost(sym));
    // frozen read-outs: a second probe; the reference read-out also N = 16's plateau
    Over pl = {{"start", "plateau"}, {"stop_after_tau", "1"}, {"N", "256"}};
    const double trained = cost(sym, pl);
    pl["readout"] = "plateau";
    const double frozen = cost(sym, pl);
    pl["readout"] = "reference";
    CHECK(frozen > trained);
    CHECK(cost(sym, pl) > frozen);
  }
  SUBCASE("induction") {
    const double base = cost(ind);
    CHECK(cost(ind, {{"N", "128"}}) > base);
    CHECK(cost(ind, {{"N", "8"}}) < base);
    CHECK(cost(ind, {{"d_head", "64"}}) > base);
    CHECK(cost(ind, {{"batch", "128"}}) > base);
    CHECK(cost(ind, {{"C", "10"}}) > base);
    CHECK(cost(ind, {{"steps", "6000"}}) > base);
    CHECK(cost(ind, {{"checkpoints", "40"}}) > base);
    CHECK(cost(ind, {{"infinite", "0"}}) < base);  // no chain drawn per sequence
  }
  SUBCASE("memoriser") {
    const double base = cost(mem);
    CHECK(cost(mem, {{"width", "256"}}) > base);
    CHECK(cost(mem, {{"width", "4"}}) < base);
    CHECK(cost(mem, {{"d_phi", "8"}}) < base);
    CHECK(cost(mem, {{"K", "64"}}) > base);  // the memorising predictors: O(K C) per token
    CHECK(cost(mem, {{"N", "128"}}) > base);
    CHECK(cost(mem, {{"batch", "128"}}) > base);
    CHECK(cost(mem, {{"steps", "10000"}}) > base);
  }
  SUBCASE("by hand") {
    // chain(C) = 5.3e-8 C^2 + 1e-9 C^3: chain(3) = 5.04e-7, chain(10) = 6.3e-6.
    // Memoriser, C = 3, N = 32, K = 16 finite, alpha1 given, batch 32, n_eval 500, d_phi 32,
    // width 64, 100 steps, checkpoints 1 (evaluations at steps 0 and 100):
    //   setup  16 chain(3) + 500 (chain(3) + 2 * 32 (2.5e-8 * 5 * 3 + 2e-9 * 16 * 3))
    //          = 8.064e-6 + 500 * 3.0648e-5 = 0.015332064
    //   token  1.1e-7 + 2e-11 * 6 * (35 * 64 + 64 * 3) + 1e-9 * 64 = 4.6584e-7
    //   step   32 * 32 (4e-8 + 4.6584e-7) + 3e-9 * 2787 parameters = 5.2634116e-4
    //   eval   2 * 500 * 32 (5e-8 + 0.5 * 4.6584e-7) = 9.05344e-3
    const double m = 0.015332064 + 100 * 5.2634116e-4 + 2 * 9.05344e-3;
    CHECK(close(cost(mem, {{"alpha1", "0.5"},
                           {"n_eval", "500"},
                           {"d_phi", "32"},
                           {"width", "64"},
                           {"batch", "32"},
                           {"steps", "100"},
                           {"checkpoints", "1"}}),
                m, 1e-12, 1e-9));
    // Symmetric, C = 10, N = 64, infinite, alpha1 given, batch 32, n_eval 100, 5000 steps,
    // checkpoints 1, no plateau, stop_after_tau 0.5: 1500 steps run, evaluations at 0 and 1500:
    //   setup  100 (2 chain(10) + 2 * 64 * 2.5e-8 * 5 * 10) = 0.01726
    //   seq    chain(10) + 64 (4e-8 + 2.6e-8 * 10) + 1.6e-9 * 64^2 = 3.20536e-5
    //   eval   2 sets * 100 (64 * 1.5e-7 + 1.1e-9 * 64^2) = 2.82112e-3 each
    const double s = 0.01726 + 1500 * 32 * 3.20536e-5 + 2 * 2.82112e-3;
    CHECK(close(cost({{"model", "symmetric"},
                      {"C", "10"},
                      {"N", "64"},
                      {"infinite", "1"},
                      {"alpha1", "0.5"},
                      {"batch", "32"},
                      {"n_eval", "100"},
                      {"steps", "5000"},
                      {"checkpoints", "1"},
                      {"plateau_steps", "0"},
                      {"stop_after_tau", "0.5"}}),
                s, 1e-12, 1e-9));
  }
}
