// SPDX-License-Identifier: Apache-2.0
// markov_icl tests: whole-model gradients vs central finite differences (double), the float
// model on the kernel table vs the double oracle, thread-count invariance, each predictor vs a
// brute-force Bayes computation by enumeration, stationary distributions, Dirichlet moments,
// and two short trainings (K = 1 reaches the chain's entropy rate; `infinite` approaches 2-Gen).
#include <doctest/doctest.h>
#include <tbb/global_control.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "markov_common/chains.hpp"
#include "markov_common/model.hpp"
#include "markov_common/predictors.hpp"
#include "markov_common/summary.hpp"
#include "markov_common/test_util.hpp"
#include "markov_common/trainer.hpp"
#include "phaselab/kernels.hpp"
#include "tests/emulation.hpp"

namespace {

using pl::markov::test::close;
using pl::markov::test::normals;
using pl::markov::test::table;
using pl::markov::test::tokens;

pl::markov::ModelConfig tiny(int variant) {
  pl::markov::ModelConfig c;
  c.C = 3;
  c.N = 5;
  c.d = 8;
  c.heads = 1;
  c.ffn = 12;
  switch (variant) {
    case 1:
      c.rope = true;
      c.tied = true;
      break;
    case 2:
      c.mlp = false;
      break;
    case 3:
      c.ln = false;
      break;
    case 4:
      c.heads = 2;
      c.layers = 3;
      break;
    default:
      break;
  }
  return c;
}

// tiny(variant) at sizes past one vector and with ragged tails: N 17, d 16, ffn 32, C 5.
pl::markov::ModelConfig small(int variant) {
  pl::markov::ModelConfig c = tiny(variant);
  c.N = 17;
  c.d = 16;
  c.ffn = 32;
  c.C = 5;
  return c;
}

const char* variant_name(int v) {
  static const char* const n[] = {"pre-LN learned untied", "rope tied", "attention-only", "no LN",
                                  "2 heads 3 layers"};
  return n[v];
}

}  // namespace

TEST_CASE("markov_icl: whole-model gradient matches central finite differences (double)") {
  for (int variant = 0; variant < 5; ++variant) {
    const std::string vname = variant_name(variant);
    CAPTURE(vname);
    const pl::markov::ModelConfig cfg = tiny(variant);
    const int nb = 3;
    pl::markov::Model<double> m(cfg, nullptr, nb, 2);
    const auto z = normals(m.num_params(), 7 + variant);
    m.init_from_normals(z.data());
    // larger weights than the 0.02 init so every path carries signal
    for (size_t i = 0; i < m.num_params(); ++i) m.params[i] += 0.3 * z[(i * 7919) % z.size()];
    const auto x = tokens(nb, cfg.N, cfg.C, 99);
    m.forward_backward(x.data(), nb);
    const std::vector<double> g = m.grads;
    const double h = 1e-5;
    int bad = 0;
    double max_g = 0;
    for (size_t i = 0; i < m.num_params(); ++i) {
      const double p0 = m.params[i];
      m.params[i] = p0 + h;
      const double lp = m.forward(x.data(), nb);
      m.params[i] = p0 - h;
      const double lm = m.forward(x.data(), nb);
      m.params[i] = p0;
      const double fd = (lp - lm) / (2 * h);
      max_g = std::max(max_g, std::fabs(fd));
      if (!close(g[i], fd, 1e-8, 1e-5)) {
        if (bad < 5) MESSAGE("param " << i << ": analytic " << g[i] << " fd " << fd);
        ++bad;
      }
    }
    CHECK(bad == 0);
    CHECK(max_g > 1e-3);  // the check is not vacuous
  }
}

TEST_CASE("markov_icl: float model on the kernel table matches the double model") {
  for (const char* target : {"", "scalar"}) {
    for (int variant = 0; variant < 5; ++variant) {
      const std::string tname = *target ? target : "best", vname = variant_name(variant);
      CAPTURE(tname);
      CAPTURE(vname);
      const pl::markov::ModelConfig cfg = small(variant);
      const int nb = 4;
      const pl_kernel_table t = table(target);
      pl::markov::Model<float> mf(cfg, &t, nb, 3);
      pl::markov::Model<double> md(cfg, nullptr, nb, 3);
      const auto z = normals(mf.num_params(), 11);
      mf.init_from_normals(z.data());
      for (size_t i = 0; i < mf.num_params(); ++i) mf.params[i] += 0.2f * z[(i * 7919) % z.size()];
      for (size_t i = 0; i < mf.num_params(); ++i) md.params[i] = mf.params[i];
      const auto x = tokens(nb, cfg.N, cfg.C, 5);
      const double lf = mf.forward_backward(x.data(), nb);
      const double ld = md.forward_backward(x.data(), nb);
      CHECK(close(lf, ld, 1e-5, 1e-5));
      double gmax = 0;
      for (double v : md.grads) gmax = std::max(gmax, std::fabs(v));
      int bad = 0;
      for (size_t i = 0; i < mf.num_params(); ++i)
        if (!close(mf.grads[i], md.grads[i], 1e-5 * gmax, 1e-3)) {
          if (bad < 5)
            MESSAGE("param " << i << ": float " << mf.grads[i] << " double " << md.grads[i]);
          ++bad;
        }
      CHECK(bad == 0);
      // the exposed components sum to the final residual stream input of the unembedding
      const size_t R = size_t(nb) * cfg.N, d = size_t(cfg.d);
      double worst = 0;
      std::vector<double> lp(R * cfg.C);
      // forward_backward streams chunks through per-thread buffers; the accessors see forward()
      CHECK(md.forward(x.data(), nb) == ld);
      // The training forward adds the residual stream in gemm_epilogue's stores, forward() with
      // gemm and a separate add: the same float sums, so the same loss to the bit.
      CHECK(mf.forward(x.data(), nb) == lf);
      md.log_probs(nb, lp.data());
      for (size_t r = 0; r < R; ++r) {
        double s = 0;
        for (int j = 0; j < cfg.C; ++j) s += std::exp(lp[r * cfg.C + j]);
        worst = std::max(worst, std::fabs(s - 1));
      }
      CHECK(worst < 1e-12);
      (void)d;
    }
  }
}

TEST_CASE("markov_icl: residual stream is the sum of the exposed components") {
  pl::markov::ModelConfig cfg = tiny(0);
  cfg.ln = false;  // without the final LN, U = (E + A1 + M1 + A2 + M2) Wu^T exactly
  const int nb = 2;
  pl::markov::Model<double> m(cfg, nullptr, nb, 1);
  const auto z = normals(m.num_params(), 3);
  m.init_from_normals(z.data());
  const auto x = tokens(nb, cfg.N, cfg.C, 1);
  m.forward(x.data(), nb);
  const size_t R = size_t(nb) * cfg.N, d = size_t(cfg.d);
  double worst = 0;
  for (size_t r = 0; r < R; ++r)
    for (int j = 0; j < cfg.C; ++j) {
      double u = 0;
      for (size_t i = 0; i < d; ++i) {
        const double s = m.E()[r * d + i] + m.A(0)[r * d + i] + m.M(0)[r * d + i] +
                         m.A(1)[r * d + i] + m.M(1)[r * d + i];
        u += s * m.P.wu[size_t(j) * d + i];
      }
      worst = std::max(worst, std::fabs(u - m.U()[r * cfg.C + j]));
    }
  CHECK(worst < 1e-12);
}

TEST_CASE("markov_icl: the streamed evaluation pass gives forward()'s loss and log-probabilities") {
  // forward_log_probs streams a chunk's sequences a few at a time through buffers shared by the
  // layers; the loss and log-probabilities must be those of forward() + log_probs() bit for bit
  // (nb = 11 in 3 chunks: chunks of 3 and 4 sequences, streamed in pieces of 4 and fewer), and
  // the double model's to float rounding.
  for (const char* target : {"", "scalar"}) {
    for (int variant = 0; variant < 5; ++variant) {
      const std::string tname = *target ? target : "best", vname = variant_name(variant);
      CAPTURE(tname);
      CAPTURE(vname);
      const pl::markov::ModelConfig cfg = small(variant);
      const int batch = 12, nb = 11;
      const pl_kernel_table t = table(target);
      pl::markov::Model<float> mf(cfg, &t, batch, 3);
      pl::markov::Model<double> md(cfg, nullptr, batch, 3);
      const auto z = normals(mf.num_params(), 13);
      mf.init_from_normals(z.data());
      for (size_t i = 0; i < mf.num_params(); ++i) mf.params[i] += 0.2f * z[(i * 7919) % z.size()];
      for (size_t i = 0; i < mf.num_params(); ++i) md.params[i] = mf.params[i];
      const auto x = tokens(nb, cfg.N, cfg.C, 17);
      const size_t n = size_t(nb) * cfg.N * cfg.C;
      std::vector<double> lp_ref(n), lp(n, NAN), lp_d(n);
      const double loss_ref = mf.forward(x.data(), nb);
      mf.log_probs(nb, lp_ref.data());
      const double loss = mf.forward_log_probs(x.data(), nb, lp.data());
      CHECK(std::memcmp(&loss, &loss_ref, sizeof loss) == 0);
      CHECK(std::memcmp(lp.data(), lp_ref.data(), n * sizeof(double)) == 0);
      const double loss_d = md.forward_log_probs(x.data(), nb, lp_d.data());
      CHECK(close(loss, loss_d, 1e-5, 1e-5));
      int bad = 0;
      for (size_t i = 0; i < n; ++i) bad += !close(lp[i], lp_d[i], 1e-5, 1e-5);
      CHECK(bad == 0);
      // the double model's streamed pass against its own forward()
      std::vector<double> lp_d2(n);
      const double loss_d2 = md.forward(x.data(), nb);
      md.log_probs(nb, lp_d2.data());
      CHECK(loss_d == loss_d2);
      CHECK(lp_d == lp_d2);
    }
  }
}

TEST_CASE("markov_icl: gradients are bit-identical for 1 and 2 threads") {
  pl::markov::ModelConfig cfg = tiny(0);
  cfg.N = 32;
  cfg.d = 32;
  cfg.ffn = 128;
  cfg.C = 10;
  const int nb = 8;
  const pl_kernel_table t = table();
  std::vector<std::vector<float>> g;
  for (int threads : {1, 2}) {
    tbb::global_control gc(tbb::global_control::max_allowed_parallelism, size_t(threads));
    pl::markov::Model<float> m(cfg, &t, nb, 4);
    const auto z = normals(m.num_params(), 5);
    m.init_from_normals(z.data());
    const auto x = tokens(nb, cfg.N, cfg.C, 8);
    m.forward_backward(x.data(), nb);
    g.push_back(m.grads);
  }
  CHECK(std::memcmp(g[0].data(), g[1].data(), g[0].size() * sizeof(float)) == 0);
}

TEST_CASE("markov_icl: a step without the loss gives the same gradients; NaN logits are seen") {
  pl::markov::ModelConfig cfg = tiny(0);
  cfg.N = 16;
  cfg.d = 32;
  cfg.ffn = 128;
  const int nb = 6;
  const pl_kernel_table t = table();
  pl::markov::Model<float> m(cfg, &t, nb, 3);
  const auto z = normals(m.num_params(), 9);
  m.init_from_normals(z.data());
  const auto x = tokens(nb, cfg.N, cfg.C, 4);
  const double loss = m.forward_backward(x.data(), nb);
  const std::vector<float> g = m.grads;
  CHECK(std::isfinite(loss));
  CHECK(loss > 0);
  CHECK(m.forward_backward(x.data(), nb, false) == 0.0);
  CHECK(std::memcmp(g.data(), m.grads.data(), g.size() * sizeof(float)) == 0);
  // a non-finite weight of the unembedding makes its logit column non-finite: both forms see it
  const size_t wu = m.layout().wu;
  for (const float bad : {NAN, INFINITY}) {
    CAPTURE(bad);
    m.params[wu + 3] = bad;
    CHECK(std::isnan(m.forward_backward(x.data(), nb, false)));
    CHECK_FALSE(std::isfinite(m.forward_backward(x.data(), nb)));
  }
}

// ------------------------------------------------------------------ data
TEST_CASE("markov_icl: stationary distribution solves pi T = pi and matches power iteration") {
  const pl_kernel_table t = table();
  pl::markov::Chains ch;
  ch.resize(20, 10);
  ch.generate(t, 42, 1000, 1.0);
  for (int k = 0; k < ch.K; ++k) {
    const double* T = ch.t(k);
    const double* pi = ch.p(k);
    std::vector<double> pw(10, 0.1), nx(10);
    for (int it = 0; it < 5000; ++it) {
      for (int j = 0; j < 10; ++j) {
        nx[j] = 0;
        for (int i = 0; i < 10; ++i) nx[j] += pw[i] * T[i * 10 + j];
      }
      pw = nx;
    }
    double sum = 0;
    for (int j = 0; j < 10; ++j) {
      double piT = 0;
      for (int i = 0; i < 10; ++i) piT += pi[i] * T[i * 10 + j];
      CHECK(close(piT, pi[j], 1e-14, 1e-12));
      CHECK(close(pi[j], pw[j], 1e-12, 1e-9));
      sum += pi[j];
    }
    CHECK(close(sum, 1.0, 1e-14, 0));
  }
  // a closed form: the two-state chain [[1-a, a], [b, 1-b]] has pi = (b, a) / (a + b)
  const double T2[4] = {0.7, 0.3, 0.1, 0.9};
  double pi2[2];
  pl::markov::stationary(T2, 2, pi2);
  CHECK(close(pi2[0], 0.25, 1e-15, 0));
  CHECK(close(pi2[1], 0.75, 1e-15, 0));
}

TEST_CASE("markov_icl: sequences are the inverse-CDF draws of a plain search, state by state") {
  // Oracle: the linear search over the cdf row (the first j with u cdf[C - 1] < cdf[j]), one
  // uniform per state in order, written here. Chains with small alpha have many near-zero and
  // (C = 2, 3) tied cdf entries; the walk crosses the 64-uniform blocks of sample().
  const pl_kernel_table t = table();
  auto search = [](const double* cdf, int C, double u) {
    for (int j = 0; j < C - 1; ++j)
      if (u * cdf[C - 1] < cdf[j]) return j;
    return C - 1;
  };
  for (int C : {2, 3, 10, 17}) {
    for (double alpha : {0.05, 1.0}) {
      CAPTURE(C);
      CAPTURE(alpha);
      pl::markov::Chains ch;
      ch.resize(3, C);
      ch.generate(t, 7, 500, alpha);
      if (C == 3) {  // exact zeros: a state that is never entered and a row with one target
        double* T = ch.T.data();
        T[0 * 3 + 1] = 0;
        T[1 * 3 + 0] = 0, T[1 * 3 + 1] = 0, T[1 * 3 + 2] = 1;
        T[2 * 3 + 1] = 0;
        for (int i = 0; i < 3; ++i) {
          double s = 0;
          for (int j = 0; j < 3; ++j) s += T[i * 3 + j];
          for (int j = 0; j < 3; ++j) T[i * 3 + j] /= s;
        }
        ch.derive(0);
      }
      for (int k = 0; k < ch.K; ++k)
        for (int len : {1, 2, 63, 64, 65, 129, 200}) {
          pl::markov::Rng r(t, 11, uint64_t(len * 10 + k)), r2 = r;
          std::vector<int32_t> x(static_cast<size_t>(len));
          ch.sample(k, r, len, x.data());
          std::vector<int32_t> want(static_cast<size_t>(len));
          want[0] = search(ch.cdfpi.data() + size_t(k) * C, C, r2.uniform());
          for (int i = 1; i < len; ++i)
            want[size_t(i)] =
                search(ch.cdfT.data() + (size_t(k) * C + size_t(want[size_t(i - 1)])) * C, C,
                       r2.uniform());
          CHECK(x == want);
          CHECK(r.uniform() == r2.uniform());  // the same number of words consumed
          if (C == 3 && k == 0)                // the zero-probability transitions never occur
            for (int i = 1; i < len; ++i) {
              const int a = x[size_t(i - 1)], b = x[size_t(i)];
              CHECK(b != 1);
              if (a == 1) CHECK(b == 2);
            }
        }
    }
  }
}

// alpha = 1e-300 passes the config check (alpha > 0): every Gamma(alpha) variate underflowed to 0
// and the rows were 0/0, so training failed with "non-finite nan". The rows are now finite, sum
// to 1 and are one-hot (the Dirichlet's limit), from the same draws.
TEST_CASE("markov_icl: Dirichlet rows at a tiny alpha are one-hot, not NaN") {
  const pl_kernel_table t = table();
  for (double alpha : {1e-300, 1e-5}) {
    CAPTURE(alpha);
    pl::markov::Rng r(t, 9, 1);
    std::vector<double> row(5);
    std::vector<int> top(5, 0);
    for (int s = 0; s < 2000; ++s) {
      r.dirichlet(alpha, 5, row.data());
      double tot = 0, big = 0;
      size_t at = 0;
      for (size_t j = 0; j < row.size(); ++j) {
        REQUIRE(std::isfinite(row[j]));
        CHECK_FALSE(row[j] < 0);
        tot += row[j];
        if (row[j] > big) big = row[j], at = j;
      }
      CHECK(std::abs(tot - 1) < 1e-12);
      CHECK(big > 0.999);
      ++top[at];
    }
    for (int n : top) CHECK(n > 300);  // each state on top about 1/5 of the time
  }
}

TEST_CASE("markov_icl: Dirichlet rows have the Dirichlet mean, variance and covariance") {
  const pl_kernel_table t = table();
  for (double alpha : {1.0, 0.3, 4.0}) {
    CAPTURE(alpha);
    const int C = 4, n = 40000;
    pl::markov::Rng r(t, 9, uint64_t(alpha * 1000));
    std::vector<double> row(C), m1(C, 0), m2(C, 0);
    double c01 = 0;
    for (int s = 0; s < n; ++s) {
      r.dirichlet(alpha, C, row.data());
      double tot = 0;
      for (int j = 0; j < C; ++j) {
        CHECK_FALSE(row[j] < 0);
        tot += row[j];
        m1[j] += row[j];
        m2[j] += row[j] * row[j];
      }
      c01 += row[0] * row[1];
      REQUIRE(close(tot, 1, 1e-12, 0));
    }
    const double a0 = C * alpha, mean = 1.0 / C, var = mean * (1 - mean) / (a0 + 1),
                 cov = -mean * mean / (a0 + 1);
    for (int j = 0; j < C; ++j) {
      const double mh = m1[j] / n, vh = m2[j] / n - mh * mh;
      CHECK(std::fabs(mh - mean) < 5 * std::sqrt(var / n));
      CHECK(close(vh, var, 0, 0.05));  // relative sd of a variance estimate ~ sqrt(2/n)*kurtosis
    }
    CHECK(close(c01 / n - (m1[0] / n) * (m1[1] / n), cov, 0, 0.08));
  }
}

// ------------------------------------------------------------------ predictors vs enumeration
namespace {
// P(x_1..x_m) under chain k, as a plain product (no logs, no recursion shared with the code).
double seq_prob_markov(const pl::markov::Chains& ch, int k, const std::vector<int>& x) {
  double p = ch.p(k)[x[0]];
  for (size_t t = 1; t < x.size(); ++t) p *= ch.t(k)[x[t - 1] * ch.C + x[t]];
  return p;
}
double seq_prob_iid(const pl::markov::Chains& ch, int k, const std::vector<int>& x) {
  double p = 1;
  for (int v : x) p *= ch.p(k)[v];
  return p;
}
// Dirichlet-multinomial marginal likelihoods (log), from Gamma functions.
double log_dm(const std::vector<double>& counts, double alpha) {
  double n = 0, s = 0;
  for (double c : counts) {
    n += c;
    s += std::lgamma(c + alpha) - std::lgamma(alpha);
  }
  const double C = double(counts.size());
  return s + std::lgamma(C * alpha) - std::lgamma(n + C * alpha);
}
double log_marg_bigram(const std::vector<int>& x, int C, double alpha) {  // P(x_2.. | x_1)
  double s = 0;
  for (int i = 0; i < C; ++i) {
    std::vector<double> c(C, 0);
    for (size_t t = 1; t < x.size(); ++t)
      if (x[t - 1] == i) c[x[t]] += 1;
    s += log_dm(c, alpha);
  }
  return s;
}
double log_marg_unigram(const std::vector<int>& x, int C, double alpha) {
  std::vector<double> c(C, 0);
  for (int v : x) c[v] += 1;
  return log_dm(c, alpha);
}
}  // namespace

TEST_CASE("markov_icl: predictors equal brute-force Bayes by enumeration (K = 2, C = 3)") {
  const pl_kernel_table t = table();
  const int C = 3;
  pl::markov::Chains ch;
  ch.resize(2, C);
  ch.generate(t, 5, 77, 1.0);
  const double alpha = 1.0, alpha1 = 0.7;
  pl::markov::PredictorScratch s;
  int checked = 0;
  for (int len = 1; len <= 5; ++len) {
    int total = 1;
    for (int i = 0; i < len; ++i) total *= C;
    for (int code = 0; code < total; ++code) {
      std::vector<int> x(len);
      for (int i = 0, c = code; i < len; ++i, c /= C) x[i] = c % C;
      std::vector<int32_t> x32(x.begin(), x.end());
      std::vector<double> q(size_t(len) * pl::markov::kNumPred * C);
      pl::markov::predict(&ch, x32.data(), len, C, alpha, alpha1, s, q.data());
      const double* qn =
          q.data() + size_t(len - 1) * pl::markov::kNumPred * C;  // prefix = all of x
      // enumerate the continuation j and normalise joint probabilities
      double z[5] = {0, 0, 0, 0, 0}, pj[5][3];
      for (int j = 0; j < C; ++j) {
        std::vector<int> xj = x;
        xj.push_back(j);
        pj[pl::markov::kMem2][j] =
            0.5 * seq_prob_markov(ch, 0, xj) + 0.5 * seq_prob_markov(ch, 1, xj);
        pj[pl::markov::kMem1][j] = 0.5 * seq_prob_iid(ch, 0, xj) + 0.5 * seq_prob_iid(ch, 1, xj);
        // hybrid: chain posterior from unigram likelihood, read-out by the chain's row
        pj[pl::markov::kHybrid][j] = 0.5 * seq_prob_iid(ch, 0, x) * ch.t(0)[x.back() * C + j] +
                                     0.5 * seq_prob_iid(ch, 1, x) * ch.t(1)[x.back() * C + j];
        pj[pl::markov::kGen2][j] = std::exp(log_marg_bigram(xj, C, alpha));
        pj[pl::markov::kGen1][j] = std::exp(log_marg_unigram(xj, C, alpha1));
        for (int a = 0; a < 5; ++a) z[a] += pj[a][j];
      }
      for (int a = 0; a < 5; ++a)
        for (int j = 0; j < C; ++j) {
          const double ref = pj[a][j] / z[a];
          if (!close(qn[a * C + j], ref, 1e-13, 1e-11)) {
            FAIL_CHECK("predictor " << pl::markov::pred_name(a) << " len " << len << " code "
                                    << code << " j " << j << ": " << qn[a * C + j] << " vs "
                                    << ref);
          }
          ++checked;
        }
    }
  }
  CHECK(checked == 5 * 3 * (3 + 9 + 27 + 81 + 243));
}

// ------------------------------------------------------------------ short trainings
namespace {
pl::markov::TrainConfig small_run(int K, bool infinite, int N, int d, int64_t steps) {
  pl::markov::TrainConfig tc;
  tc.model.C = 10;
  tc.model.N = N;
  tc.model.d = d;
  tc.model.ffn = 4 * d;
  tc.K = K;
  tc.infinite = infinite;
  tc.batch = 16;
  tc.chunks = 4;
  tc.n_eval = 64;
  tc.steps = steps;
  tc.lr = 1e-2;
  tc.seed = 3;
  tc.chain_seed = 11;
  return tc;
}
}  // namespace

TEST_CASE("markov_icl: at K = 1 training approaches the true chain's loss floor") {
  const pl_kernel_table t = table();
  const pl::markov::TrainConfig tc = small_run(1, false, 32, 16, 400);
  pl::markov::Trainer tr(tc, t);
  const double floor = tr.eval_set(0).bayes[pl::markov::kMem2];  // K = 1: 2-Mem is the true chain
  const double start = tr.evaluate().loss[0];
  for (int64_t s = 1; s <= tc.steps; ++s) tr.train_step(s);
  const pl::markov::EvalResult r = tr.evaluate();
  MESSAGE("K=1: start " << start << ", final " << r.loss[0] << ", floor " << floor << ", KL(2mem) "
                        << r.kl[0][pl::markov::kMem2]);
  CHECK(r.loss[0] - floor < 0.05 * (start - floor));
  CHECK(r.loss[0] > floor - 0.02);  // cannot beat Bayes by more than the sampling noise
  CHECK(r.phase == pl::markov::kMem2);
}

// Skipped under emulation (reported as skipped): its 1200 training steps took over 7 minutes
// under qemu-aarch64, and fewer steps do not reach the 2-Gen phase, so no shorter version
// keeps the claim. The kernels it runs are checked on every emulated target by the kernel
// suite, and the float model on the kernel table by the test against the double model.
// Under the sanitizers (tests/emulation.hpp; ~100 s there for 1200 steps) only the first 100
// steps run: the same infinite-chain code (a fresh chain per sequence, evaluation without the
// memorising predictors) for the sanitizers to watch, and the claim those steps support, the
// 1-Gen plateau that comes first (KL to 1-Gen 0.110 -> 0.022 after 100 steps). The 2-Gen
// claim needs all 1200 steps; the release tree checks it.
TEST_CASE("markov_icl: with infinite chains training approaches the 2-Gen predictor" *
          doctest::skip(pl::test::emulated())) {
  // C = 3 makes the induction head form within ~700 steps (1-Gen plateau first); see the report.
  const pl_kernel_table t = table();
  const bool short_run = pl::test::sanitized();
  pl::markov::TrainConfig tc = small_run(1, true, 32, 32, short_run ? 100 : 1200);
  tc.model.C = 3;
  tc.batch = 32;
  tc.lr = 3e-3;
  tc.n_eval = 128;
  pl::markov::Trainer tr(tc, t);
  const pl::markov::EvalResult r0 = tr.evaluate();
  for (int64_t s = 1; s <= tc.steps; ++s) tr.train_step(s);
  const pl::markov::EvalResult r = tr.evaluate();
  MESSAGE("infinite: KL(2gen) " << r0.kl[0][pl::markov::kGen2] << " -> "
                                << r.kl[0][pl::markov::kGen2] << ", KL(1gen) "
                                << r.kl[0][pl::markov::kGen1] << ", loss " << r.loss[0]
                                << " vs 2-Gen Bayes " << tr.eval_set(0).bayes[pl::markov::kGen2]);
  if (short_run) {
    CHECK(r.phase == pl::markov::kGen1);
    CHECK(r.kl[0][pl::markov::kGen1] < 0.5 * r0.kl[0][pl::markov::kGen1]);
    CHECK(r.loss[0] < r0.loss[0]);
    return;
  }
  CHECK(r.phase == pl::markov::kGen2);
  CHECK(r.kl[0][pl::markov::kGen2] < 0.25 * r.kl[0][pl::markov::kGen1]);
  CHECK(r.kl[0][pl::markov::kGen2] < 0.2 * r0.kl[0][pl::markov::kGen2]);
  CHECK(r.loss[1] - tr.eval_set(1).bayes[pl::markov::kGen2] <
        0.03);  // OOD loss near the 2-Gen floor
}

TEST_CASE("markov_icl: summary reads phase paths and transition times from a history") {
  pl::markov::RunHistory h;
  h.steps = {0, 1, 2, 4, 8, 16, 32, 64, 128};
  h.phase = {"2gen", "1gen", "1gen", "2gen", "1gen", "2gen", "2gen", "2mem", "2mem"};
  pl::markov::analyse(h);
  CHECK(h.final_phase == "2mem");
  CHECK(h.path == "1gen>2gen>2mem");  // single-checkpoint blips are not stable segments
  CHECK(h.t_2gen == 16);
  CHECK(h.t_mem == 64);
  CHECK(h.t_final == 64);
  CHECK(h.cls == "gen_then_mem");
  pl::markov::RunHistory g;
  g.steps = {0, 1, 2, 3};
  g.phase = {"1mem", "2mem", "2mem", "2mem"};
  pl::markov::analyse(g);
  CHECK(g.cls == "mem");
  CHECK(g.path == "2mem");
  CHECK(std::isnan(g.t_2gen));
}

TEST_CASE("markov_icl: the 1-Gen pseudo-count matched to the ensemble") {
  const pl_kernel_table kt = table();
  // oracle 1: rows drawn from Dirichlet(a 1_C) with known a give back a (sampling error ~1%)
  for (double a : {0.5, 3.0}) {
    const int M = 20000, C = 5;
    std::vector<double> pi(size_t(M) * C);
    pl::markov::Rng r(kt, 77, 0);
    for (int i = 0; i < M; ++i) r.dirichlet(a, C, pi.data() + size_t(i) * C);
    CHECK(close(pl::markov::dirichlet_conc_by_moments(pi.data(), M, C), a, 0, 0.05));
  }
  // oracle 2: a second implementation (numpy: 20000 random C = 10 chains, eigenvector of T^T)
  // gave a = 9.70 for the stationary distributions of Dirichlet(1) rows, 2.55 for C = 3
  CHECK(close(pl::markov::matched_alpha1(kt, 10, 1.0, 5), 9.70, 0, 0.08));
  CHECK(close(pl::markov::matched_alpha1(kt, 3, 1.0, 5), 2.55, 0, 0.08));
}

TEST_CASE("markov_icl: fits recover known exponents from synthetic times") {
  // oracle: the exponents the data were generated with
  std::vector<double> N = {32, 64, 128, 256}, tau, tau2;
  for (double n : N) tau.push_back(7.0 * std::pow(n, 1.35)), tau2.push_back(40.0 * n / std::log(n));
  const pl::markov::TauFit f = pl::markov::fit_tau_vs_N(N, tau);
  CHECK(close(f.power.b, 1.35, 1e-9, 0));
  CHECK(close(std::exp(f.power.a), 7.0, 0, 1e-9));
  CHECK(f.rms_nlogn > 0.01);  // a pure power law is not N / ln N
  const pl::markov::TauFit g = pl::markov::fit_tau_vs_N(N, tau2);
  CHECK(close(g.c_nlogn, 40.0, 0, 1e-9));
  CHECK(g.rms_nlogn < 1e-9);
  CHECK(g.power.rms > 1e-3);  // ... and N / ln N is not a pure power law
  // with multiplicative noise (a fixed pattern of +-5%) the exponent stays within 3 standard errors
  std::vector<double> Nn, tn;
  const double noise[] = {0.05, -0.04, 0.03, -0.05, 0.02, -0.01, 0.04, -0.03};
  for (int i = 0; i < 8; ++i)
    Nn.push_back(16.0 * std::pow(2.0, i / 2.0)),
        tn.push_back(3.0 * std::pow(Nn.back(), 0.8) * std::exp(noise[i]));
  const pl::markov::TauFit h = pl::markov::fit_tau_vs_N(Nn, tn);
  CHECK(h.power.se_b > 0);
  CHECK(std::fabs(h.power.b - 0.8) < 3 * h.power.se_b);
  // divergence t = A (K2 - K)^-gamma with gamma = 2, K2 = 45
  std::vector<double> K = {4, 8, 16, 32, 44}, t;
  for (double k : K) t.push_back(5e4 * std::pow(45.0 - k, -2.0));
  const pl::markov::LineFit d = pl::markov::fit_divergence(K, t, 45.0);
  CHECK(d.n == 5);
  CHECK(close(-d.b, 2.0, 1e-9, 0));
  CHECK(std::isnan(pl::markov::fit_line({1.0}, {2.0}).b));  // one point: no fit
  std::vector<std::pair<double, std::string>> cls = {
      {1, "mem"}, {2, "mem"}, {4, "gen_then_mem"}, {8, "gen_then_mem"}, {16, "gen"}, {32, "gen"}};
  pl::markov::Bracket k1, k2;
  pl::markov::k_boundaries(cls, &k1, &k2);
  CHECK(k1.lo == 2);
  CHECK(k1.hi == 4);
  CHECK(k2.lo == 8);
  CHECK(k2.hi == 16);
}

TEST_CASE("markov_icl: summary of a synthetic run folder brackets K and fits gamma and tau(N)") {
  // Histories built so that tau_2Gen = 10 N^1.5 (K = 1024) and the 2-Gen -> 2-Mem switch time is
  // t = 1e5 (sqrt(32 * 64) - K)^-2 for K = 4, 8, 16, 32 (K1* in [2, 4], K2* in [32, 64]), 2 seeds.
  const std::string dir = "markov_icl_summary_test";
  (void)std::system(("mkdir -p " + dir).c_str());
  const double K2 = std::sqrt(32.0 * 64.0);
  {
    std::ofstream o(dir + "/results.csv");
    o.precision(17);
    o << "K,N,seed,step,loss_id,phase\n";
    auto put = [&](int K, int N, int seed, std::vector<std::pair<double, const char*>> h) {
      for (const auto& [s, p] : h)
        o << K << "," << N << "," << seed << "," << s << ",2.3," << p << "\n";
    };
    for (int seed = 0; seed < 2; ++seed) {
      for (int K : {1, 2, 4, 8, 16, 32, 64, 128}) {
        const int N = 64;
        if (K <= 2)
          put(K, N, seed, {{0, "1gen"}, {10, "1mem"}, {20, "2mem"}, {40, "2mem"}, {1e6, "2mem"}});
        else if (K <= 32) {
          const double ts = 1e5 * std::pow(K2 - K, -2.0);
          put(K, N, seed,
              {{0, "1gen"},
               {1, "1gen"},
               {2, "2gen"},
               {3, "2gen"},
               {ts, "2mem"},
               {2 * ts, "2mem"},
               {1e6, "2mem"}});
        } else
          put(K, N, seed, {{0, "1gen"}, {1, "1gen"}, {2, "2gen"}, {3, "2gen"}, {1e6, "2gen"}});
      }
      for (int N : {32, 64, 128, 256}) {
        const double tau = 10 * std::pow(double(N), 1.5) * (seed ? 1.1 : 1.0);
        put(1024, N, seed,
            {{0, "1gen"}, {tau / 2, "1gen"}, {tau, "2gen"}, {2 * tau, "2gen"}, {1e6, "2gen"}});
      }
    }
  }
  std::string msg;
  REQUIRE(pl::markov::write_summary(dir, &msg));
  pl::sdk::Table fits;
  std::string why;
  REQUIRE_MESSAGE(fits.read(dir + "/summary_fits.csv", &why), why);
  std::map<std::string, std::vector<std::vector<std::string>>> rows;
  for (size_t r = 0; r < fits.rows(); ++r) rows[fits.str(r, 0)].push_back(fits.row(r));
  // columns: quantity,group,seeds,points,value,stderr,lo,hi,rms,alt,alt_rms
  REQUIRE(rows["K1* seeds"].size() == 1);
  CHECK(close(std::stod(rows["K1* seeds"][0][4]), std::sqrt(8.0), 1e-9, 0));
  REQUIRE(rows["K2* seeds"].size() == 1);
  CHECK(rows["K2* seeds"][0][1] == "N=64");
  CHECK(close(std::stod(rows["K2* seeds"][0][4]), K2, 1e-9, 0));
  REQUIRE(rows["gamma"].size() == 2);
  for (const auto& r : rows["gamma"]) {
    CHECK(r[3] == "4");
    CHECK(close(std::stod(r[4]), 2.0, 1e-6, 0));
  }
  REQUIRE(rows["tau_2gen_vs_N power p"].size() == 1);
  const auto& tr = rows["tau_2gen_vs_N power p"][0];
  CHECK(tr[1] == "K=1024");
  CHECK(tr[2] == "2");
  CHECK(tr[3] == "8");
  CHECK(close(std::stod(tr[4]), 1.5, 1e-9, 0));
  if (std::getenv("MK_KEEP") == nullptr) (void)std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("markov_icl: freezing and lr multipliers act on exactly their modules") {
  const pl_kernel_table t = table();
  pl::markov::TrainConfig tc = small_run(4, false, 16, 16, 3);
  tc.freeze = {"l1_att"};
  tc.lr_mult = {{"l2_qk", 0.0}, {"unembed", 2.0}};
  pl::markov::Trainer tr(tc, t);
  const std::vector<float> p0 = tr.model().params;
  for (int64_t s = 1; s <= tc.steps; ++s) tr.train_step(s);
  const std::vector<float>& p1 = tr.model().params;
  for (const auto& m : pl::markov::modules(tc.model)) {
    bool changed = false;
    for (size_t i = m.off; i < m.off + m.len; ++i) changed |= p0[i] != p1[i];
    const bool frozen = pl::markov::in_group(m.name, "l1_att") || m.name == "l2_qk";
    CAPTURE(m.name);
    CHECK(changed == !frozen);
  }
}

TEST_CASE("markov_icl: K1*/K2* rule on hand-built class sequences (leading runs, flags)") {
  using V = std::vector<std::pair<double, std::string>>;
  auto K = [](std::vector<const char*> cls) {
    V v;
    double k = 1;
    for (const char* c : cls) v.push_back({k, c}), k *= 2;  // K = 1, 2, 4, ...
    return v;
  };
  struct Case {
    V v;
    double k1lo, k1hi, k2lo, k2hi;  // NAN: not bracketed (worked out by hand from the docs' rule)
    bool mono;
    const char* code;
  } cases[] = {
      // a memorising K followed directly by "gen": the window is empty, K1* = K2* (one bracket)
      {K({"mem", "mem", "gen"}), 2, 4, 2, 4, true, "mmg"},
      {K({"mem", "gen_then_mem", "gen"}), 1, 2, 2, 4, true, "mGg"},
      {K({"mem", "mem", "gen_then_mem", "gen_then_mem", "gen", "gen"}), 2, 4, 8, 16, true,
       "mmGGgg"},
      // non-monotone: brackets from the leading runs (the first change), flagged
      {K({"mem", "gen_then_mem", "mem", "gen"}), 1, 2, 4, 8, false, "mGmg"},
      {K({"mem", "gen", "mem", "gen"}), 1, 2, 1, 2, false, "mgmg"},
      {K({"gen_then_mem", "mem", "gen"}), NAN, NAN, 2, 4, false, "Gmg"},
      {K({"gen", "mem"}), NAN, NAN, NAN, NAN, false, "gm"},
      // no change on the grid: no bracket
      {K({"mem", "mem", "mem"}), NAN, NAN, NAN, NAN, true, "mmm"},
      {K({"gen", "gen", "gen"}), NAN, NAN, NAN, NAN, true, "ggg"},
      {K({"gen_then_mem", "gen_then_mem"}), NAN, NAN, NAN, NAN, true, "GG"},
      {K({"mem", "gen_then_mem"}), 1, 2, NAN, NAN, true, "mG"},
      {V{}, NAN, NAN, NAN, NAN, true, ""},
  };
  auto same = [](double a, double b) { return std::isnan(a) ? std::isnan(b) : a == b; };
  for (const Case& c : cases) {
    CAPTURE(c.code);
    pl::markov::Bracket k1{5, 5}, k2{5, 5};  // overwritten, also when not bracketed
    const bool mono = pl::markov::k_boundaries(c.v, &k1, &k2);
    CHECK(mono == c.mono);
    CHECK(same(k1.lo, c.k1lo));
    CHECK(same(k1.hi, c.k1hi));
    CHECK(same(k2.lo, c.k2lo));
    CHECK(same(k2.hi, c.k2hi));
    CHECK(k1.ok() == !std::isnan(c.k1lo));
    CHECK(k2.ok() == !std::isnan(c.k2lo));
    CHECK(pl::markov::class_code(c.v) == c.code);
  }
}

TEST_CASE("markov_icl: summary_boundaries.csv: columns, brackets, flags, numeric row order") {
  // lr_mult_l1_qk in {10, 3} (written 10 first: the table sorts numerically), K = 4, 8, 16, 32,
  // seeds 0, 1; the classes per (lr, seed) are chosen, the expected brackets worked out by hand.
  const std::string dir = "markov_icl_boundaries_test";
  (void)std::system(("mkdir -p " + dir).c_str());
  const std::map<std::pair<int, int>, std::string> code = {
      {{3, 0}, "mGgg"}, {{3, 1}, "mmgg"}, {{10, 0}, "mGmg"}, {{10, 1}, "mmmm"}};
  {
    std::ofstream o(dir + "/results.csv");
    o << "lr_mult_l1_qk,K,N,seed,step,loss_id,phase\n";
    for (int lr : {10, 3})
      for (int K : {4, 8, 16, 32})
        for (int seed : {0, 1}) {
          const char c = code.at({lr, seed})[size_t(std::log2(K)) - 2];
          std::vector<const char*> h = {"1gen", "2mem", "2mem"};  // m: memorises directly
          if (c == 'G') h = {"1gen", "2gen", "2gen", "2mem", "2mem"};
          if (c == 'g') h = {"1gen", "2gen", "2gen"};
          for (size_t s = 0; s < h.size(); ++s)
            o << lr << "," << K << ",32," << seed << "," << 100 * s << ",1.5," << h[s] << "\n";
        }
  }
  std::string msg;
  REQUIRE(pl::markov::write_summary(dir, &msg));
  pl::sdk::Table t;
  std::string why;
  REQUIRE_MESSAGE(t.read(dir + "/summary_boundaries.csv", &why), why);
  const std::vector<std::string> head = {"lr_mult_l1_qk", "N",     "seed",    "classes",
                                         "k1_lo",         "k1_hi", "k1",      "k2_lo",
                                         "k2_hi",         "k2",    "monotone"};
  CHECK(t.header() == head);
  REQUIRE(t.rows() == 4);
  struct Want {
    const char *lr, *seed, *classes;
    double k1lo, k1hi, k2lo, k2hi;
    const char* mono;
  } want[] = {{"3", "0", "mGgg", 4, 8, 8, 16, "1"},
              {"3", "1", "mmgg", 8, 16, 8, 16, "1"},  // K1* = K2*
              {"10", "0", "mGmg", 4, 8, 16, 32, "0"},
              {"10", "1", "mmmm", NAN, NAN, NAN, NAN, "1"}};
  for (size_t r = 0; r < 4; ++r) {
    const Want& w = want[r];
    CAPTURE(r);
    CHECK(t.str(r, t.col("lr_mult_l1_qk")) == w.lr);
    CHECK(t.str(r, t.col("N")) == "32");
    CHECK(t.str(r, t.col("seed")) == w.seed);
    CHECK(t.str(r, t.col("classes")) == w.classes);
    CHECK(t.str(r, t.col("monotone")) == w.mono);
    const std::pair<const char*, double> cells[] = {
        {"k1_lo", w.k1lo}, {"k1_hi", w.k1hi}, {"k1", std::sqrt(w.k1lo * w.k1hi)},
        {"k2_lo", w.k2lo}, {"k2_hi", w.k2hi}, {"k2", std::sqrt(w.k2lo * w.k2hi)}};
    for (const auto& cell : cells) {
      const char* name = cell.first;
      const double v = cell.second;
      CAPTURE(name);
      if (std::isnan(v))
        CHECK(t.str(r, t.col(name)).empty());
      else
        CHECK(close(t.num(r, t.col(name)), v, 1e-10, 1e-10));
    }
  }
  // the same brackets in summary_fits.csv (the per-seed rows), and the flag in summary.txt
  pl::sdk::Table fits;
  REQUIRE_MESSAGE(fits.read(dir + "/summary_fits.csv", &why), why);
  size_t n1 = 0, n2 = 0;
  for (size_t r = 0; r < fits.rows(); ++r)
    n1 += fits.str(r, 0) == "K1*", n2 += fits.str(r, 0) == "K2*";
  CHECK(n1 == 3);
  CHECK(n2 == 3);
  std::ifstream txt(dir + "/summary.txt");
  const std::string all((std::istreambuf_iterator<char>(txt)), std::istreambuf_iterator<char>());
  CHECK(all.find("(non-monotone: mGmg)") != std::string::npos);
  if (std::getenv("MK_KEEP") == nullptr) (void)std::system(("rm -rf " + dir).c_str());
}
