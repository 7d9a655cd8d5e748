// SPDX-License-Identifier: Apache-2.0
// copy_task: emergence of the copy head, softmax vs linear positional attention.
// One sweep point = one (attention, L, V, P, ..., seed): trains with Adam from both
// initialisations (MAP branches, hysteresis), or samples the posterior with SGLD on (W, G) or
// Langevin/MALA on G with W integrated out (exact marginal). Science: docs/copy-task.md.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "copy_common/data.hpp"
#include "copy_common/order_params.hpp"
#include "copy_task/langevin.hpp"
#include "copy_task/model.hpp"
#include "copy_task/sampler.hpp"
#include "sdk/phaselab_sdk.hpp"

namespace {

using pl::copy::task::CopyNet;
using pl::copy::task::NetConfig;

constexpr uint32_t kPos = PL_RANGE_MIN | PL_RANGE_MIN_EXCLUSIVE;
constexpr uint32_t kNonNeg = PL_RANGE_MIN;

const pl_param_decl kParams[] = {
    pl::sdk::enum_param("attention", "softmax", "softmax|linear",
                        "A = row-softmax(G) or A = G (linear)"),
    pl::sdk::int_param("L", 16, "sequence length", 2, 1024),
    pl::sdk::int_param("V", 4, "vocabulary size", 2, 4096),
    pl::sdk::int_param("P", 1000, "training sequences", 1, 100000000),
    pl::sdk::int_param("P_test", 10000, "held-out test sequences (0: none, test_mse is left empty)",
                       0, 100000000),
    pl::sdk::float_param("kappa", 1.0, "likelihood noise variance (temperature)", kPos, 0),
    pl::sdk::float_param("sw2", 1.0, "prior variance of the read-out W", kPos, 0),
    pl::sdk::float_param("sg2", 1.0, "prior variance of the attention scores G", kPos, 0),
    pl::sdk::enum_param("beta_convention", "per_position", "per_position|per_sequence",
                        "beta = 1/(kappa L_loss) or beta = 1/kappa"),
    pl::sdk::enum_param("wrap", "cyclic", "cyclic|drop_first",
                        "target of position 1: x_L (cyclic) or left out of the loss"),
    pl::sdk::bool_param("causal_mask", false, "mask attention to positions l' <= l"),
    pl::sdk::enum_param(
        "method", "adam", "adam|sgld|langevin",
        "Adam on the MAP objective, SGLD on (W,G), Langevin/MALA on G (exact marginal)"),
    pl::sdk::enum_param("init", "both", "both|uniform|copy",
                        "initialisation(s): G ~ noise, or G = copy_logit S + noise"),
    pl::sdk::float_param("init_noise", 0.01, "std of the N(0, s^2) noise added to the initial G",
                         kNonNeg, 0),
    pl::sdk::float_param("w_init", 0.1, "std of the initial read-out W", kNonNeg, 0),
    pl::sdk::float_param("copy_logit", 0.0,
                         "copy init G = copy_logit S; 0 = auto (3 ln L softmax, 1 linear)", kNonNeg,
                         0),
    pl::sdk::float_param("lr", 1e-2, "Adam learning rate", kPos, 0),
    pl::sdk::float_param("beta1", 0.9, "Adam beta1 (1 would never move the first moment)",
                         PL_RANGE_MIN | PL_RANGE_MAX | PL_RANGE_MAX_EXCLUSIVE, 0, 1),
    pl::sdk::float_param("beta2", 0.999, "Adam beta2 (1: bias correction divides by zero)",
                         PL_RANGE_MIN | PL_RANGE_MAX | PL_RANGE_MAX_EXCLUSIVE, 0, 1),
    pl::sdk::float_param("adam_eps", 1e-8, "Adam epsilon", kPos, 0),
    pl::sdk::int_param("max_steps", 20000, "Adam step limit", 1, INT64_MAX),
    pl::sdk::float_param(
        "tol", 1e-7, "stop when the relative change of obj over `window` steps <= tol", kNonNeg, 0),
    pl::sdk::int_param("window", 100, "steps between convergence checks", 1, INT64_MAX),
    pl::sdk::bool_param("balance", true,
                        "linear attention, Adam: move (W, G) to the prior's minimum on the "
                        "rescaling orbit (lam W, G / lam) every window"),
    pl::sdk::bool_param("flip", true,
                        "linear attention, Adam: every window, move to the mirror point "
                        "(W (I - 2 11^T/V), G (I - 2 J/L)) when that lowers the objective"),
    pl::sdk::int_param("batch", 0, "sequences per step (0: full batch)", 0, 100000000),
    pl::sdk::enum_param("loss_path", "auto", "auto|direct|counts",
                        "full-data loss: per sequence, or from token counts gathered once "
                        "(cost independent of P; auto: counts when cheaper and <= 2 x 128 MB)"),
    pl::sdk::float_param("step", 0.0, "sampler step (SGLD eta / MALA initial eps); 0 = auto",
                         kNonNeg, 0),
    pl::sdk::float_param("temperature", 1.0, "sampler temperature T", kPos, 0),
    pl::sdk::int_param("burn_in", 2000, "sampler burn-in steps", 0, INT64_MAX),
    pl::sdk::int_param("thin", 10, "sampler steps between kept samples", 1, INT64_MAX),
    pl::sdk::int_param("samples", 200, "kept samples per chain", 1, 100000000),
    pl::sdk::int_param("chains", 1, "sampler chains per initialisation", 1, 1000),
    pl::sdk::bool_param("mala", true, "Metropolis correction for the Langevin sampler"),
    pl::sdk::bool_param("emit_samples", true, "write every kept sample to samples.csv"),
};

const char* const kResultCols[] = {
    "method",      "init",      "converged",   "steps",      "objective",    "train_mse",
    "test_mse",    "c1",        "cG",          "abs_cG",     "c1_hat",       "cG_hat",
    "coverage",    "D",         "T",           "Q",          "branch",       "is_map",
    "coexist",     "n_samples", "cG_mean",     "cG_var",     "abs_cG_mean",  "abs_cG_var",
    "c1_mean",     "c1_var",    "cG_hat_mean", "cG_hat_var", "ens_coverage", "ens_pca2",
    "accept_rate", "step_size"};
const char* const kSpectrumCols[] = {"method", "init", "k", "c_k"};
const char* const kSampleCols[] = {"method", "init", "chain",  "sample", "cG",
                                   "abs_cG", "c1",   "cG_hat", "c1_hat"};
const pl_table_decl kTables[] = {
    pl::sdk::table("results", kResultCols),
    pl::sdk::table("spectrum", kSpectrumCols),
    pl::sdk::table("samples", kSampleCols),
};
constexpr uint32_t kResults = 0, kSpectrum = 1, kSamples = 2;

// Softmax and linear attention side by side when both are swept.
constexpr pl::sdk::PlotStyle kByAttention = pl::sdk::PlotStyle().facet("attention");
constexpr pl::sdk::PlotStyle kByP = pl::sdk::PlotStyle().facet("P");
constexpr pl::sdk::PlotStyle kMseByAttention =
    pl::sdk::PlotStyle().facet("attention").labels("P", "MSE per position");
const pl_plot_decl kPlots[] = {
    // Softmax: c_G itself; linear: |c_G| (the sign is a symmetry, (W, A) -> (-W, -A)).
    pl::sdk::plot("cG_branches", "Adam, softmax: c_G of both branches vs P", "results", "P", "cG",
                  "L,V,init", "method=adam,attention=softmax", PL_PLOT_LOGX),
    pl::sdk::plot("cG_map", "Adam, softmax: c_G of the MAP branch (lower objective) vs P",
                  "results", "P", "cG", "L,V", "method=adam,attention=softmax,is_map=1",
                  PL_PLOT_LOGX),
    pl::sdk::plot("abs_cG_branches", "Adam, linear: |c_G| of both branches vs P", "results", "P",
                  "abs_cG", "L,V,init", "method=adam,attention=linear", PL_PLOT_LOGX),
    pl::sdk::plot("abs_cG_map", "Adam, linear: |c_G| of the MAP branch vs P", "results", "P",
                  "abs_cG", "L,V", "method=adam,attention=linear,is_map=1", PL_PLOT_LOGX),
    pl::sdk::plot("c1_branches", "Adam: c_1 of both branches vs P", "results", "P", "c1",
                  "L,V,init", "method=adam", PL_PLOT_LOGX, &kByAttention),
    pl::sdk::plot("objective", "Adam: final MAP objective of both branches vs P", "results", "P",
                  "objective", "L,V,init", "method=adam", PL_PLOT_LOGX | PL_PLOT_LOGY,
                  &kByAttention),
    pl::sdk::plot("loss", "Adam: train and test MSE per position vs P", "results", "P",
                  "train_mse,test_mse", "L,V,init", "method=adam", PL_PLOT_LOGX | PL_PLOT_LOGY,
                  &kMseByAttention),  // log y: the MSE spans 4-5 decades over P (1 to 3e-5)
    pl::sdk::plot("sampler_cG_mean", "Samplers: posterior mean of c_G vs P", "results", "P",
                  "cG_mean", "L,V,method,init", "", PL_PLOT_LOGX, &kByAttention),
    pl::sdk::plot("sampler_cG_var", "Samplers: posterior variance of c_G vs P", "results", "P",
                  "cG_var", "L,V,method,init", "", PL_PLOT_LOGX, &kByAttention),
    pl::sdk::plot("sampler_abs_cG_var", "Samplers: posterior variance of |c_G| vs P", "results",
                  "P", "abs_cG_var", "L,V,method,init", "", PL_PLOT_LOGX, &kByAttention),
    pl::sdk::plot("cG_hist_langevin", "Langevin (exact marginal): c_G samples", "samples", "cG", "",
                  "attention,L,P,init", "method=langevin", PL_PLOT_HISTOGRAM, &kByP),
    pl::sdk::plot("cG_hist_sgld", "SGLD: c_G samples", "samples", "cG", "", "attention,L,P,init",
                  "method=sgld", PL_PLOT_HISTOGRAM, &kByP),
};

// Cross-key checks of one point ("" when it is fine).
std::string check(const pl::sdk::Params& p) {
  const int64_t P = p.int_value("P"), batch = p.int_value("batch");
  if (batch > P)
    return "copy_task.batch (" + std::to_string(batch) + ") must be <= P (" + std::to_string(P) +
           "), or 0 for full batch";
  if (p.is("method", "langevin") && batch != 0)
    return "copy_task.batch must be 0 with method = \"langevin\" (the exact marginal uses all P "
           "sequences)";
  return "";
}

// Running mean/variance of the kept samples of one initialisation (all its chains).
struct SampleStats {
  std::vector<double> cG, abs_cG, c1, cG_hat;
  std::vector<double> A;      // every kept A, one after another (ensemble coverage)
  std::vector<double> A_sum;  // sum of A over samples (for the mean's order parameters)
  void reserve(size_t n, int L) {
    cG.reserve(n);
    abs_cG.reserve(n);
    c1.reserve(n);
    cG_hat.reserve(n);
    A.reserve(n * size_t(L) * L);
    A_sum.assign(size_t(L) * L, 0.0);
  }
  void clear() {
    cG.clear();
    abs_cG.clear();
    c1.clear();
    cG_hat.clear();
    A.clear();
    std::fill(A_sum.begin(), A_sum.end(), 0.0);
  }
};

void mean_var(const std::vector<double>& x, double* mean, double* var) {
  const size_t n = x.size();
  double m = 0;
  for (double v : x) m += v;
  m = n ? m / double(n) : NAN;
  double s = 0;
  for (double v : x) s += (v - m) * (v - m);
  *mean = m;
  *var = n > 1 ? s / double(n - 1) : NAN;
}

struct BranchResult {
  std::string init;
  bool converged = false, ok = true;
  int64_t steps = 0;
  double objective = NAN, train_mse = NAN, test_mse = NAN;
  pl::copy::OrderParams op;
  std::vector<double> spectrum;
  // samplers
  int64_t n_samples = 0;
  double cG_mean = NAN, cG_var = NAN, abs_mean = NAN, abs_var = NAN, c1_mean = NAN, c1_var = NAN;
  double cGh_mean = NAN, cGh_var = NAN, ens_cov = NAN, ens_pca2 = NAN, accept = NAN, step = NAN;
};

class CopyTask {
 public:
  explicit CopyTask(pl::sdk::Context& cx)
      : k_(cx.k),
        cfg_(net_config(cx)),
        P_(int(cx.int_value("P"))),
        P_test_(int(cx.int_value("P_test"))),
        method_(cx.string_value("method")),
        batch_(int(cx.int_value("batch"))),
        net_(
            cx.k, cfg_,
            pl::copy::make_tokens(cx.k, cx.seed(), cx.seed_stream(kDataStream), P_, cfg_.L, cfg_.V),
            P_),
        test_tokens_(pl::copy::make_tokens(cx.k, cx.seed(), cx.seed_stream(kTestStream), P_test_,
                                           cfg_.L, cfg_.V)),
        theta_(net_.n_params()),
        noise_(net_.n_params()),
        a_(size_t(cfg_.L) * cfg_.L) {
    // Tests only: PHASELAB_COPY_CHUNK_COST=N sets the piece budget (multiply-adds, default 8e9),
    // so a small L, V is cut into as many row blocks as a large one (Ctrl-C latency test).
    if (const char* v = std::getenv("PHASELAB_COPY_CHUNK_COST"); v && *v) {
      char* end = nullptr;
      const double c = std::strtod(v, &end);
      if (!*end && c >= 1) net_.set_chunk_cost(c);
    }
    const std::string init = cx.string_value("init");
    if (init == "both" || init == "uniform") inits_.push_back("uniform");
    if (init == "both" || init == "copy") inits_.push_back("copy");
    copy_logit_ = cx.float_value("copy_logit");
    if (copy_logit_ <= 0) copy_logit_ = cfg_.softmax ? 3.0 * std::log(double(cfg_.L)) : 1.0;
    init_noise_ = cx.float_value("init_noise");
    w_init_ = cx.float_value("w_init");
    if (method_ == "adam") {
      pl::copy::task::AdamConfig a;
      a.lr = cx.float_value("lr");
      a.beta1 = cx.float_value("beta1");
      a.beta2 = cx.float_value("beta2");
      a.eps = cx.float_value("adam_eps");
      a.max_steps = cx.int_value("max_steps");
      a.tol = cx.float_value("tol");
      a.window = cx.int_value("window");
      a.balance = cx.bool_value("balance");
      a.flip = cx.bool_value("flip");
      a.batch = batch_;
      adam_ = std::make_unique<pl::copy::task::AdamTrainer>(net_, a);
    } else {
      chains_ = int(cx.int_value("chains"));
      const int64_t samples = cx.int_value("samples");
      stats_.reserve(size_t(samples) * size_t(chains_), cfg_.L);
      if (method_ == "sgld") {
        pl::copy::task::SgldConfig s;
        s.eta = cx.float_value("step");
        s.temperature = cx.float_value("temperature");
        s.batch = batch_;
        s.burn_in = cx.int_value("burn_in");
        s.thin = cx.int_value("thin");
        s.samples = samples;
        sgld_ = std::make_unique<pl::copy::task::SgldSampler>(net_, s);
      } else {
        mcfg_.eps = cx.float_value("step");
        mcfg_.temperature = cx.float_value("temperature");
        mcfg_.metropolis = cx.bool_value("mala");
        mcfg_.burn_in = cx.int_value("burn_in");
        mcfg_.thin = cx.int_value("thin");
        mcfg_.samples = samples;
        marginal_ = std::make_unique<pl::copy::task::MarginalPotential>(net_);
        mala_ = std::make_unique<pl::copy::task::Mala>(size_t(cfg_.L) * cfg_.L);
        gd_.resize(size_t(cfg_.L) * cfg_.L);
      }
    }
    emit_samples_ = cx.bool_value("emit_samples");
  }

  pl_status run(pl::sdk::Context& cx) {
    std::vector<BranchResult> res;
    for (size_t i = 0; i < inits_.size(); ++i) {
      BranchResult r;
      r.init = inits_[i];
      if (method_ == "adam")
        run_adam(cx, r);
      else
        run_sampler(cx, r);
      if (cx.cancelled()) return PL_CANCELLED;
      if (!r.ok)
        return cx.fail(method_ == "adam"
                           ? "adam (" + r.init + " init) left the finite numbers after " +
                                 std::to_string(r.steps) + " steps"
                           : method_ + " (" + r.init + " init) chain left the finite numbers " +
                                 "(step " + std::to_string(r.step) + "; set a smaller `step`)");
      res.push_back(std::move(r));
      cx.progress(double(i + 1) / double(inits_.size()));
    }
    emit(cx, res);
    return PL_OK;
  }

 private:
  static constexpr uint64_t kDataStream = 1, kTestStream = 2, kInitStream = 3;

  static NetConfig net_config(pl::sdk::Context& cx) {
    NetConfig c;
    c.L = int(cx.int_value("L"));
    c.V = int(cx.int_value("V"));
    c.softmax = cx.is("attention", "softmax");
    c.causal = cx.bool_value("causal_mask");
    c.wrap = cx.is("wrap", "cyclic") ? pl::copy::Wrap::cyclic : pl::copy::Wrap::drop_first;
    c.kappa = cx.float_value("kappa");
    c.sw2 = cx.float_value("sw2");
    c.sg2 = cx.float_value("sg2");
    c.per_position = cx.is("beta_convention", "per_position");
    c.loss_path = cx.is("loss_path", "direct")   ? NetConfig::LossPath::direct
                  : cx.is("loss_path", "counts") ? NetConfig::LossPath::stats
                                                 : NetConfig::LossPath::automatic;
    return c;
  }

  // theta = [W ~ N(0, w_init^2) | G = (copy ? copy_logit S : 0) + N(0, init_noise^2)]. The noise
  // of chain `chain` is shared by both initialisations, so they differ only by the copy logit.
  void init_theta(pl::sdk::Context& cx, const std::string& init, int chain) {
    const size_t n = net_.n_params();
    k_.gaussian(noise_.data(), n, cx.seed(), cx.point_stream(kInitStream + 16 * uint64_t(chain)),
                0);
    const size_t nw = size_t(cfg_.V) * cfg_.V, L = size_t(cfg_.L);
    for (size_t i = 0; i < nw; ++i) theta_[i] = float(w_init_) * noise_[i];
    for (size_t i = 0; i < L * L; ++i) theta_[nw + i] = float(init_noise_) * noise_[nw + i];
    if (init == "copy")
      for (size_t l = 0; l < L; ++l) theta_[nw + l * L + (l + L - 1) % L] += float(copy_logit_);
  }

  void finish_point(BranchResult& r) {
    net_.attention(theta_.data() + net_.g_off(), a_.data());
    r.op = pl::copy::order_params(a_.data(), cfg_.L);
    r.spectrum = pl::copy::circulant_spectrum(a_.data(), cfg_.L);
    r.train_mse = net_.train_mse(theta_.data());
    if (P_test_ > 0) r.test_mse = net_.mse_on(theta_.data(), test_tokens_.data(), size_t(P_test_));
  }

  void run_adam(pl::sdk::Context& cx, BranchResult& r) {
    init_theta(cx, r.init, 0);
    net_.set_cancel([&] { return cx.cancelled() != 0; });
    const auto res = adam_->train(theta_.data(), k_, [&] { return cx.cancelled(); });
    if (cx.cancelled()) return;  // skip the full-data evaluations: the point is run again
    r.ok = res.finite;
    r.steps = res.steps;
    r.converged = res.converged;
    if (!r.ok) return;
    r.objective = net_.objective(theta_.data(), nullptr);
    finish_point(r);
  }

  void record_sample(pl::sdk::Context& cx, BranchResult& r, int chain, const float* A, int64_t j) {
    const pl::copy::OrderParams o = pl::copy::order_params(A, cfg_.L);
    stats_.cG.push_back(o.cG);
    stats_.abs_cG.push_back(std::fabs(o.cG));
    stats_.c1.push_back(o.c1);
    stats_.cG_hat.push_back(o.cG_hat);
    const size_t LL = size_t(cfg_.L) * cfg_.L;
    stats_.A.insert(stats_.A.end(), A, A + LL);
    for (size_t i = 0; i < LL; ++i) stats_.A_sum[i] += A[i];
    if (emit_samples_)
      cx.emit(kSamples,
              {method_, r.init, chain, j, o.cG, std::fabs(o.cG), o.c1, o.cG_hat, o.c1_hat});
  }

  void run_sampler(pl::sdk::Context& cx, BranchResult& r) {
    stats_.clear();
    const uint64_t init_id = r.init == "copy" ? 1 : 0;
    double acc = 0;
    for (int c = 0; c < chains_ && r.ok; ++c) {
      init_theta(cx, r.init, c);
      const uint64_t base = 100 + 8 * (uint64_t(c) * 2 + init_id);
      auto stop = [&] { return cx.cancelled(); };
      net_.set_cancel([&] { return cx.cancelled() != 0; });
      if (method_ == "sgld") {
        r.ok = sgld_->run(
            theta_.data(), k_, cx.seed(), cx.point_stream(base), cx.point_stream(base + 1),
            [&](const float* A, int64_t j) { record_sample(cx, r, c, A, j); }, stop);
        r.step = sgld_->eta();
        r.steps += sgld_->steps();
      } else {
        // Langevin on G (double); W is integrated out. Start from the same G as the other methods.
        const size_t nw = size_t(cfg_.V) * cfg_.V;
        for (size_t i = 0; i < gd_.size(); ++i) gd_[i] = theta_[nw + i];
        // Ctrl-C inside one evaluation of the exact marginal (minutes at large L, V): it returns
        // NaN, the chain stops at its next check and the point is recorded as cancelled.
        marginal_->set_cancel([&] { return cx.cancelled() != 0; });
        r.ok = mala_->run([&](const double* G, double* grad) { return marginal_->action(G, grad); },
                          gd_.data(), mcfg_, k_, cx.seed(), cx.point_stream(base),
                          cx.point_stream(base + 1),
                          [&](const double* G, int64_t j) {
                            marginal_->attention(G, a_.data());
                            record_sample(cx, r, c, a_.data(), j);
                          },
                          stop);
        acc += mala_->accept_rate();
        r.step = mala_->eps();
        r.steps += mcfg_.burn_in + mcfg_.samples * std::max<int64_t>(1, mcfg_.thin);
        // The final state with its posterior-mean read-out, for the train/test MSE columns.
        for (size_t i = 0; i < gd_.size(); ++i) theta_[nw + i] = float(gd_[i]);
        marginal_->posterior_mean_readout(gd_.data(), theta_.data());
      }
      if (cx.cancelled()) return;
    }
    if (!r.ok) return;
    r.accept = method_ == "langevin" ? acc / chains_ : NAN;
    r.objective = net_.objective(theta_.data(), nullptr);
    finish_point(r);  // train/test MSE of the last state of the last chain
    // Order parameters and spectrum of the posterior mean attention.
    const size_t LL = size_t(cfg_.L) * cfg_.L;
    const double n = double(stats_.cG.size());
    std::vector<double> mean_A(LL);
    for (size_t i = 0; i < LL; ++i) mean_A[i] = stats_.A_sum[i] / n;
    r.op = pl::copy::order_params(mean_A.data(), cfg_.L);
    r.spectrum = pl::copy::circulant_spectrum(mean_A.data(), cfg_.L);
    r.n_samples = int64_t(stats_.cG.size());
    mean_var(stats_.cG, &r.cG_mean, &r.cG_var);
    mean_var(stats_.abs_cG, &r.abs_mean, &r.abs_var);
    mean_var(stats_.c1, &r.c1_mean, &r.c1_var);
    mean_var(stats_.cG_hat, &r.cGh_mean, &r.cGh_var);
    const pl::copy::EnsembleCoverage ec =
        pl::copy::ensemble_coverage(stats_.A.data(), stats_.cG.size(), cfg_.L);
    r.ens_cov = ec.coverage;
    r.ens_pca2 = ec.pca2_share;
    r.converged = true;  // steps: sampler steps over all chains of this init (restarts included)
  }

  void emit(pl::sdk::Context& cx, const std::vector<BranchResult>& res) {
    // The copy order parameter that labels branches: c_G (softmax) or |c_G| (linear symmetry).
    auto order = [&](const BranchResult& r) {
      const bool sampler = method_ != "adam";
      const double v = sampler ? (cfg_.softmax ? r.cG_mean : r.abs_mean) : r.op.cG;
      return cfg_.softmax ? v : std::fabs(v);
    };
    int map = -1;
    bool coexist = false;
    if (method_ == "adam") {
      for (size_t i = 0; i < res.size(); ++i)
        if (map < 0 || res[i].objective < res[size_t(map)].objective) map = int(i);
    }
    if (res.size() == 2) {
      const double d_order = std::fabs(order(res[0]) - order(res[1]));
      const double d_obj = std::fabs(res[0].objective - res[1].objective);
      // Adam: two distinct minima (objectives and order parameters differ). Samplers: chains
      // from the two starts disagree on the mean order parameter (metastability).
      coexist = method_ == "adam" ? (d_order > 0.05 && d_obj > 1e-6 * std::fabs(res[0].objective))
                                  : d_order > 0.1;
    }
    for (size_t i = 0; i < res.size(); ++i) {
      const BranchResult& r = res[i];
      const bool sampler = method_ != "adam";
      const pl::sdk::Cell empty;
      cx.emit(kResults, {method_,
                         r.init,
                         r.converged,
                         r.steps,
                         r.objective,
                         r.train_mse,
                         P_test_ > 0 ? pl::sdk::Cell(r.test_mse) : empty,  // P_test = 0: none
                         r.op.c1,
                         r.op.cG,
                         std::fabs(r.op.cG),
                         r.op.c1_hat,
                         r.op.cG_hat,
                         r.op.coverage,
                         r.op.D,
                         r.op.T,
                         r.op.Q,
                         order(r) > 0.5 ? "high" : "low",
                         method_ == "adam" ? pl::sdk::Cell(int(i) == map) : empty,
                         res.size() == 2 ? pl::sdk::Cell(coexist) : empty,
                         sampler ? pl::sdk::Cell(r.n_samples) : empty,
                         sampler ? pl::sdk::Cell(r.cG_mean) : empty,
                         sampler ? pl::sdk::Cell(r.cG_var) : empty,
                         sampler ? pl::sdk::Cell(r.abs_mean) : empty,
                         sampler ? pl::sdk::Cell(r.abs_var) : empty,
                         sampler ? pl::sdk::Cell(r.c1_mean) : empty,
                         sampler ? pl::sdk::Cell(r.c1_var) : empty,
                         sampler ? pl::sdk::Cell(r.cGh_mean) : empty,
                         sampler ? pl::sdk::Cell(r.cGh_var) : empty,
                         sampler ? pl::sdk::Cell(r.ens_cov) : empty,
                         sampler ? pl::sdk::Cell(r.ens_pca2) : empty,
                         method_ == "langevin" ? pl::sdk::Cell(r.accept) : empty,
                         sampler ? pl::sdk::Cell(r.step) : empty});
      for (int k = 0; k < cfg_.L; ++k)
        cx.emit(kSpectrum, {method_, r.init, k, r.spectrum[size_t(k)]});
    }
  }

  const pl_kernel_table& k_;
  NetConfig cfg_;
  int P_, P_test_;
  std::string method_;
  int batch_;
  CopyNet net_;
  std::vector<int32_t> test_tokens_;
  std::vector<float> theta_, noise_, a_;
  std::vector<std::string> inits_;
  double copy_logit_ = 0, init_noise_ = 0, w_init_ = 0;
  std::unique_ptr<pl::copy::task::AdamTrainer> adam_;
  std::unique_ptr<pl::copy::task::SgldSampler> sgld_;
  std::unique_ptr<pl::copy::task::MarginalPotential> marginal_;
  std::unique_ptr<pl::copy::task::Mala> mala_;
  pl::copy::task::MalaConfig mcfg_;
  std::vector<double> gd_;
  int chains_ = 1;
  SampleStats stats_;
  bool emit_samples_ = true;
};

}  // namespace

// The driver's memory check before a run (phaselab_plugin.h): an estimate of the bytes one point
// holds. Training tokens and their targets (8 P L), test tokens (4 P_test L), the token-count
// statistics of the counts loss path (16 L^2 V^2 when used), parameters with Adam/sampler
// buffers (~32 (V^2 + L^2)), and for the exact-marginal sampler its own token copies and V^2 L^2
// counts. A formula from the allocations, not a measurement of the resident size.
extern "C" __attribute__((visibility("default"))) uint64_t phaselab_plugin_point_bytes(
    const pl_value* v, uint32_t n) {
  const pl::sdk::Params p(kParams, PL_SDK_COUNT(kParams), v, n);
  const double L = double(p.int_value("L")), V = double(p.int_value("V"));
  const double P = double(p.int_value("P")), Pt = double(p.int_value("P_test"));
  const std::string path = p.string_value("loss_path"), method = p.string_value("method");
  const double LLVV = L * L * V * V;
  double b = 8 * P * L + 4 * Pt * L + 32 * (V * V + L * L) + (1 << 20);
  if (path != "direct" && LLVV <= double(1 << 24)) b += 16 * LLVV;
  if (method == "langevin") b += 8 * P * L + 64 * V * V + (LLVV <= double(1 << 24) ? 16 * LLVV : 0);
  return uint64_t(b);
}

// The cost `run --shard` and the dispatcher order points by (phaselab_plugin.h): multiply-adds
// of the full-data passes. One pass costs min(counts path 4 L^2 V^2 + 2 L^3 (when its 16 L^2 V^2
// bytes fit), direct path P (2 L^2 + 3 L V^2)), a minibatch batch (2 L^2 + 3 L V^2); a gradient
// step ~3 passes. Steps: Adam min(max_steps, 2000) (it stops at convergence, after a few hundred
// to a few thousand steps in the shipped configs; the limit only caps it), samplers burn_in +
// thin x samples per chain; MALA adds a V^3 solve per step and costs ~4x (below). Times the
// initialisations and chains,
// plus gathering the counts (2 L^2 P) and the test set (P_test (2 L^2 + 3 L V^2)).
extern "C" __attribute__((visibility("default"))) double phaselab_plugin_point_cost(
    const pl_value* v, uint32_t n) {
  const pl::sdk::Params p(kParams, PL_SDK_COUNT(kParams), v, n);
  const double L = double(p.int_value("L")), V = double(p.int_value("V"));
  const double P = double(p.int_value("P")), Pt = double(p.int_value("P_test"));
  const double batch = double(p.int_value("batch"));
  const std::string path = p.string_value("loss_path"), method = p.string_value("method");
  const double per_seq = 2 * L * L + 3 * L * V * V, stats = 4 * L * L * V * V + 2 * L * L * L;
  const bool fits = L * L * V * V <= double(1 << 24);
  double pass = P * per_seq;
  bool counts = false;
  if (batch > 0 && method == "sgld") {
    pass = std::min(batch, P) * per_seq;
  } else if (path == "counts" || (path == "auto" && fits && stats < pass)) {
    pass = stats;
    counts = true;
  }
  const double inits = p.is("init", "both") ? 2.0 : 1.0;
  double steps = 0, extra = 0;
  if (method == "adam") {
    steps = std::min(double(p.int_value("max_steps")), 2000.0);
  } else {
    steps = double(p.int_value("chains")) *
            (double(p.int_value("burn_in")) +
             double(p.int_value("thin")) * double(p.int_value("samples")));
    if (method == "langevin") extra = V * V * V;
  }
  // MALA's step (the exact marginal's action and gradient at the proposal, the Metropolis ratio)
  // measured ~4x an SGLD step at L = 16, 32 (bench/cost_rank.py, bench/cost/copy_task_*.toml).
  const double step_cost = (method == "langevin" ? 4.0 : 1.0) * (3 * pass + extra);
  return inits * steps * step_cost + (counts ? 2 * L * L * P : 0.0) + Pt * per_seq;
}

PL_DEFINE_PLUGIN(CopyTask, "copy_task", "0.1.0",
                 "copy task: softmax vs linear positional attention, MAP (Adam) and posterior "
                 "samplers (SGLD, exact-marginal Langevin)",
                 kParams, kTables, kPlots, pl::sdk::validate_with<check>, nullptr)
