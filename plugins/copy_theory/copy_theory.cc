// SPDX-License-Identifier: Apache-2.0
// copy_theory: Bayesian theory of the copy task (docs/copy-task.md, theory sections).
// One sweep point = one (attention, L, V, kappa, sw2, sg2, conventions) and seed:
//  * every local minimum of the reduced action on a log grid of P (softmax: S(Delta); linear:
//    S(c1, cG) on the plane incl. A = 0), with order parameters, action, predicted training MSE
//    and the global branch                                                     -> results.csv
//  * the transition: P* (branch switch / loss of stability), spinodal, P_low, order, by bisection
//    in ln P; linear closed form and exact plane threshold next to it  -> transition_points.csv
//    (with every parameter of the point, not only the swept ones: PL_TABLE_ALL_PARAMS)
//  * exact finite-P check: S_data (exact marginal) on sampled data (the copy_task training set of
//    the same seed) at each predicted branch, vs S_pop of the same matrix and vs the reduced
//    action.
// finish() reads transition_points.csv back and fits the scaling of P* (scaling_fit.csv).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "copy_common/data.hpp"
#include "copy_common/marginal.hpp"
#include "copy_common/theory.hpp"
#include "sdk/phaselab_sdk.hpp"
#include "sdk/table.hpp"

namespace {

using namespace pl::copy::theory;

constexpr uint32_t kPos = PL_RANGE_MIN | PL_RANGE_MIN_EXCLUSIVE;

const pl_param_decl kParams[] = {
    pl::sdk::enum_param("attention", "softmax", "softmax|linear", "attention nonlinearity"),
    pl::sdk::int_param("L", 16,
                       "sequence length (the reduced actions are closed forms in L, so L up to "
                       "2^30; the exact check holds L x L matrices and needs L <= 4096)",
                       2, 1 << 30),
    pl::sdk::int_param("V", 4, "vocabulary size", 2, 1 << 20),
    pl::sdk::float_param("kappa", 1.0, "likelihood noise variance (temperature)", kPos, 0),
    pl::sdk::float_param("sw2", 1.0, "prior variance of the read-out W", kPos, 0),
    pl::sdk::float_param("sg2", 1.0, "prior variance of the attention scores G", kPos, 0),
    pl::sdk::enum_param("beta_convention", "per_position", "per_position|per_sequence",
                        "beta = 1/(kappa L_loss) or 1/kappa"),
    pl::sdk::enum_param("wrap", "cyclic", "cyclic|drop_first",
                        "target of position 1: x_L (cyclic) or left out of the loss"),
    pl::sdk::enum_param(
        "objective", "marginal", "marginal|map",
        "marginal posterior over A (W integrated out) or MAP profile (W minimised out)"),
    pl::sdk::enum_param(
        "rest_logits", "prior", "prior|zero",
        "softmax reduced action: off-copy logits N(0, sg2) self-averaged (quoted) or 0"),
    pl::sdk::float_param("P_min", 10.0, "smallest P of the branch grid", kPos, 0),
    pl::sdk::float_param("P_max", 1e5, "largest P of the branch grid", kPos, 0),
    pl::sdk::int_param("num_P", 41, "points of the log-spaced P grid (0: no branch rows)", 0,
                       100000),
    pl::sdk::bool_param("transitions", true, "locate P*, spinodal, P_low and the order"),
    pl::sdk::float_param("search_P_min", 1.0, "transition search range, lower end", kPos, 0),
    pl::sdk::float_param("search_P_max", 1e9, "transition search range, upper end", kPos, 0),
    pl::sdk::float_param("rel_tol", 1e-3, "relative accuracy of the bisections", kPos, 0),
    pl::sdk::bool_param(
        "exact_check", true,
        "evaluate the exact S_data on sampled data at each branch (grid P <= exact_P_max)"),
    pl::sdk::float_param("exact_P_max", 20000.0, "largest P of the exact finite-P check", kPos, 0),
    pl::sdk::int_param("exact_V_max", 256, "skip the exact check above this V (cost O(V^3))", 2,
                       1 << 20),
};

const char* const kResultCols[] = {"P",
                                   "branch",
                                   "is_global",
                                   "num_minima",
                                   "Delta",
                                   "a",
                                   "c1",
                                   "cG",
                                   "abs_cG",
                                   "Q",
                                   "D",
                                   "action",
                                   "train_mse",
                                   "exact_P",
                                   "S_data",
                                   "S_pop",
                                   "rel_diff",
                                   "rel_diff_reduced",
                                   "train_mse_exact"};
const char* const kTransCols[] = {"P_star",         "P_spinodal",         "P_low",
                                  "order",          "P_closed",           "P_plane",
                                  "cG_jump",        "P_star_over_L_ln2L", "P_star_over_L_lnL",
                                  "P_star_over_V2", "P_star_over_closed", "seconds"};
const pl_table_decl kTables[] = {
    pl::sdk::table("results", kResultCols),
    // every parameter in each row: finish() groups the fits by the ones that are not swept too
    pl::sdk::table("transition_points", kTransCols, pl::sdk::kAllParams),
};
constexpr uint32_t kResults = 0, kTrans = 1;

// Softmax and linear attention side by side when both are swept.
constexpr pl::sdk::PlotStyle kByAttention = pl::sdk::PlotStyle().facet("attention");
const pl_plot_decl kPlots[] = {
    pl::sdk::plot("theory_cG_softmax", "Softmax, reduced action: c_G of every minimum vs P",
                  "results", "P", "cG", "L,V,branch", "attention=softmax", PL_PLOT_LOGX),
    pl::sdk::plot("theory_cG_linear", "Linear, reduced action: c_G of every minimum vs P",
                  "results", "P", "cG", "L,V,branch", "attention=linear", PL_PLOT_LOGX),
    pl::sdk::plot("theory_cG_global", "Reduced action: c_G of the global minimum vs P", "results",
                  "P", "cG", "L,V", "is_global=1", PL_PLOT_LOGX, &kByAttention),
    pl::sdk::plot("theory_action", "Reduced action of every minimum vs P", "results", "P", "action",
                  "L,V,branch", "", PL_PLOT_LOGX | PL_PLOT_LOGY, &kByAttention),
    pl::sdk::plot("theory_mse", "Predicted training MSE of the global minimum (population) vs P",
                  "results", "P", "train_mse", "L,V", "is_global=1", PL_PLOT_LOGX, &kByAttention),
    pl::sdk::plot("exact_vs_pop",
                  "Exact finite-P check: (S_data - S_pop)/(beta P L_loss/2) on sampled data vs P",
                  "results", "P", "rel_diff", "L,V,branch", "", PL_PLOT_LOGX | PL_PLOT_POINTS,
                  &kByAttention),
    pl::sdk::plot("pstar_vs_L", "Transition P* vs L", "transition_points", "L", "P_star",
                  "attention,V", "", PL_PLOT_LOGX | PL_PLOT_LOGY),
    pl::sdk::plot("pstar_vs_V", "Transition P* vs V", "transition_points", "V", "P_star",
                  "attention,L", "", PL_PLOT_LOGX | PL_PLOT_LOGY),
    pl::sdk::plot("pstar_over_L_ln2L", "Softmax: P*/(L ln^2 L) vs L", "transition_points", "L",
                  "P_star_over_L_ln2L", "V", "attention=softmax", PL_PLOT_LOGX | PL_PLOT_LOGY),
    pl::sdk::plot("pstar_over_V2", "Linear: P*/V^2 vs V", "transition_points", "V",
                  "P_star_over_V2", "L", "attention=linear", PL_PLOT_LOGX),
};

// A number cell, or an empty cell where the value does not apply (NaN).
pl::sdk::Cell num(double x) { return std::isnan(x) ? pl::sdk::Cell() : pl::sdk::Cell(x); }

std::string fmt(double x) {
  if (std::isnan(x)) return "";
  char b[32];
  std::snprintf(b, sizeof b, "%.10g", x);
  return b;
}

class CopyTheory {
 public:
  explicit CopyTheory(pl::sdk::Context& cx) {
    m_.L = int(cx.int_value("L"));
    m_.V = int(cx.int_value("V"));
    m_.kappa = cx.float_value("kappa");
    m_.sw2 = cx.float_value("sw2");
    m_.sg2 = cx.float_value("sg2");
    m_.beta_conv = parse_beta(cx.string_value("beta_convention"));
    m_.wrap = parse_wrap(cx.string_value("wrap"));
    softmax_ = cx.is("attention", "softmax");
    if (cx.is("rest_logits", "zero")) m_.rest_var = 0;
    m_.map = cx.is("objective", "map");
    const double P_min = cx.float_value("P_min"), P_max = cx.float_value("P_max");
    const int n = int(cx.int_value("num_P"));
    for (int i = 0; i < n; ++i)
      grid_.push_back(n == 1 ? P_min : P_min * std::pow(P_max / P_min, double(i) / (n - 1)));
    exact_ = cx.bool_value("exact_check") && m_.V <= cx.int_value("exact_V_max");
    if (exact_) {
      int Pe = 0;
      for (double P : grid_)
        if (P <= cx.float_value("exact_P_max")) Pe = std::max(Pe, int(std::lround(P)));
      // stream 1 = copy_task's training data stream: the same sequences for the same seed and P.
      if (Pe > 0)
        tokens_ = pl::copy::make_tokens(cx.k, cx.seed(), cx.seed_stream(1), Pe, m_.L, m_.V);
      if (Pe == 0) exact_ = false;
    }
    configure(cx);
  }

  pl_status run(pl::sdk::Context& cx) {
    const double t0 = now();
    const int L = m_.L;
    Transition t;
    if (transitions_) t = find_transition(m_, softmax_, search_lo_, search_hi_, rel_tol_);
    for (size_t ip = 0; ip < grid_.size(); ++ip) {
      if (cx.cancelled()) return PL_CANCELLED;
      const double P = grid_[ip];
      std::vector<Branch> br = softmax_ ? softmax_minima(m_, P) : linear_minima(m_, P);
      if (br.empty()) return cx.fail("no minimum of the reduced action found at P = " + fmt(P));
      // Softmax: a single minimum continues the low branch below the coexistence window and the
      // high branch above it; without a first-order transition it is just "single".
      if (softmax_ && br.size() == 1 && transitions_)
        br[0].name = t.order != "first" ? "single" : P < t.P_star ? "low" : "high";
      // Exact finite-P check on the first round(P) sampled sequences.
      const int Pi = int(std::lround(P));
      std::unique_ptr<ExactMarginal> em;
      if (exact_ && Pi >= 1 && size_t(Pi) * L <= tokens_.size()) {
        MarginalConfig mc;
        mc.L = L;
        mc.V = m_.V;
        mc.kappa = m_.kappa;
        mc.sw2 = m_.sw2;
        mc.sg2 = m_.sg2;
        mc.beta = m_.beta_conv;
        mc.wrap = m_.wrap;
        mc.attention = softmax_ ? Attention::softmax : Attention::linear;
        em.reset(new ExactMarginal(mc, tokens_.data(), Pi));
        // Ctrl-C inside the check (minutes per evaluation at L = V = 4096): the evaluation
        // stops between blocks of its loops and the point is recorded as cancelled.
        em->set_cancel([&] { return cx.cancelled() != 0; });
      }
      for (size_t b = 0; b < br.size(); ++b) {
        const Branch& x = br[b];
        double sd = NAN, spA = NAN, rel = NAN, relr = NAN, mse_ex = NAN;
        if (em) {
          // The branch's attention matrix. Softmax: copy logit Delta, the other logits drawn
          // N(0, sg2) (the reduced action self-averages them); rows outside the loss at G = 0.
          std::vector<double> A(size_t(L) * L);
          if (softmax_) {
            std::vector<float> z(size_t(L) * L);
            cx.k.gaussian(z.data(), z.size(), cx.seed(), cx.point_stream(1000 + ip * 8 + b), 0);
            std::vector<double> G(size_t(L) * L);
            const int first = L - m_.R();
            for (int l = 0; l < L; ++l)
              for (int j = 0; j < L; ++j)
                G[size_t(l) * L + j] = l < first ? 0.0
                                       : j == (l + L - 1) % L
                                           ? x.x1
                                           : std::sqrt(m_.rest_variance()) * z[size_t(l) * L + j];
            em->attention_of(G.data(), A.data());
          } else {
            const int first = L - m_.R();
            for (int l = 0; l < L; ++l)
              for (int j = 0; j < L; ++j)
                A[size_t(l) * L + j] =
                    l < first ? 0.0 : x.x1 / L + (j == (l + L - 1) % L ? x.x2 : 0.0);
          }
          // Differences relative to the action of A = 0, beta P L_loss / 2 (S itself can pass
          // through 0 on the copy branch, so it is no scale).
          const double Pd = double(Pi), scale = 0.5 * m_.beta() * Pd * m_.R();
          sd = em->s_data(A.data(), nullptr);
          if (em->cancelled()) return PL_CANCELLED;
          // S_data is the marginal: compare with the marginal S_pop also for objective = map
          Model mm = m_;
          mm.map = false;
          spA = s_pop(mm, Pd, stats_of(mm, A.data()));
          rel = (sd - spA) / scale;
          // the reduced action's own S_pop (self-averaged rest logits) at the same (rounded) P
          relr = (sd - s_pop(mm, Pd, x.st)) / scale;
          mse_ex = em->train_mse(A.data());
          if (em->cancelled()) return PL_CANCELLED;
        }
        const double a = softmax_ ? x.st.D / m_.R() : NAN;
        cx.emit(kResults, {P, x.name, x.global, int(br.size()), num(softmax_ ? x.x1 : NAN), num(a),
                           x.a_1, x.a_G, std::fabs(x.a_G), x.st.Q, x.st.D, x.action, x.mse,
                           em ? pl::sdk::Cell(Pi) : pl::sdk::Cell(), num(sd), num(spA), num(rel),
                           num(relr), num(mse_ex)});
      }
      cx.progress(0.5 * double(ip + 1) / double(grid_.size()));
    }
    if (transitions_) {
      const double lnL = std::log(double(L));
      const double r1 = t.P_star / (L * lnL * lnL), r2 = t.P_star / (double(m_.V) * m_.V);
      const double r3 = t.P_star / (L * lnL);
      const double rc = t.P_star / linear_threshold_closed(m_);
      const double secs = now() - t0;
      cx.emit(kTrans, {num(t.P_star), num(t.P_spinodal), num(t.P_low), t.order, num(t.P_closed),
                       num(t.P_plane), num(t.a_jump), num(r1), num(r3), num(r2), num(rc), secs});
    }
    cx.progress(1.0);
    return PL_OK;
  }

  void configure(const pl::sdk::Context& cx) {
    transitions_ = cx.bool_value("transitions");
    search_lo_ = cx.float_value("search_P_min");
    search_hi_ = cx.float_value("search_P_max");
    rel_tol_ = cx.float_value("rel_tol");
  }

 private:
  static double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  Model m_;
  bool softmax_ = true, exact_ = false, transitions_ = true;
  double search_lo_ = 1, search_hi_ = 1e9, rel_tol_ = 1e-3;
  std::vector<double> grid_;
  std::vector<int32_t> tokens_;
};

constexpr int kExactLMax = 4096;

int validate(const pl_value* v, uint32_t n, char* err, size_t len) {
  auto idx = [&](const char* name) {
    for (uint32_t i = 0; i < n && i < sizeof(kParams) / sizeof(kParams[0]); ++i)
      if (!std::strcmp(kParams[i].name, name)) return int(i);
    return -1;
  };
  const int a = idx("P_min"), b = idx("P_max"), c = idx("search_P_min"), d = idx("search_P_max");
  if (a >= 0 && b >= 0 && v[a].f > v[b].f) {
    std::snprintf(err, len, "copy_theory.P_min (%g) must be <= copy_theory.P_max (%g)", v[a].f,
                  v[b].f);
    return 1;
  }
  if (c >= 0 && d >= 0 && !(v[c].f < v[d].f)) {
    std::snprintf(err, len, "copy_theory.search_P_min (%g) must be < copy_theory.search_P_max (%g)",
                  v[c].f, v[d].f);
    return 1;
  }
  const int L = idx("L"), w = idx("wrap"), ex = idx("exact_check"), np = idx("num_P");
  if (L >= 0 && ex >= 0 && np >= 0 && v[L].i > kExactLMax && v[ex].i != 0 && v[np].i > 0) {
    std::snprintf(err, len,
                  "copy_theory.L = %lld needs exact_check = false or num_P = 0: the exact check "
                  "holds L x L matrices and takes L <= %d",
                  static_cast<long long>(v[L].i), kExactLMax);
    return 1;
  }
  if (L >= 0 && w >= 0 && v[L].i < 3 && v[w].s && std::string(v[w].s) == "drop_first") {
    std::snprintf(err, len, "copy_theory.L must be >= 3 with wrap = drop_first");
    return 1;
  }
  return 0;
}

// ---------------------------------------------------------------- finish: scaling fits

// Least-squares slope of ln y on ln x.
double loglog_slope(const std::vector<double>& x, const std::vector<double>& y) {
  const size_t n = x.size();
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; ++i) {
    mx += std::log(x[i]) / n;
    my += std::log(y[i]) / n;
  }
  double sxy = 0, sxx = 0;
  for (size_t i = 0; i < n; ++i) {
    sxy += (std::log(x[i]) - mx) * (std::log(y[i]) - my);
    sxx += (std::log(x[i]) - mx) * (std::log(x[i]) - mx);
  }
  return sxx > 0 ? sxy / sxx : NAN;
}

// scaling_fit.csv from the rows of transition_points.csv (columns read by name; the table has
// every parameter): softmax P* vs L at fixed (V, kappa, sw2, sg2, conventions, order) and linear
// P* vs V at fixed L, each fit within one transition order (first-order points and crossovers
// follow different laws). Points without a P* or with order "none" are left out. Throws
// std::out_of_range when a column is missing.
std::string scaling_fits(const pl::sdk::Table& t) {
  const size_t c_att = t.col("attention"), c_L = t.col("L"), c_V = t.col("V"),
               c_kappa = t.col("kappa"), c_sw2 = t.col("sw2"), c_sg2 = t.col("sg2"),
               c_beta = t.col("beta_convention"), c_wrap = t.col("wrap"),
               c_obj = t.col("objective"), c_rest = t.col("rest_logits"), c_P = t.col("P_star"),
               c_order = t.col("order");
  struct Pt {
    double L, V, P;
  };
  struct Group {
    std::vector<std::string> key;  // attention, fixed, fixed value, kappa, ..., order
    std::vector<Pt> pts;
  };
  // Keyed by the group's cells joined with '|' (the order of the fits in the file).
  std::map<std::string, Group> by_V, by_L;
  for (size_t r = 0; r < t.rows(); ++r) {
    if (t.str(r, c_P).empty() || t.str(r, c_order) == "none") continue;
    const Pt p{t.num(r, c_L), t.num(r, c_V), t.num(r, c_P)};
    const std::vector<std::string> rest = {
        fmt(t.num(r, c_kappa)), fmt(t.num(r, c_sw2)), fmt(t.num(r, c_sg2)), t.str(r, c_beta),
        t.str(r, c_wrap),       t.str(r, c_obj),      t.str(r, c_rest),     t.str(r, c_order)};
    for (const bool fix_V : {true, false}) {
      std::vector<std::string> key = {t.str(r, c_att), fix_V ? "V" : "L",
                                      t.str(r, fix_V ? c_V : c_L)};
      key.insert(key.end(), rest.begin(), rest.end());
      std::string joined;
      for (const auto& k : key) joined += (joined.empty() ? "" : "|") + k;
      Group& g = (fix_V ? by_V : by_L)[joined];
      g.key = key;
      g.pts.push_back(p);
    }
  }
  std::ostringstream out;
  out << "attention,fixed,fixed_value,kappa,sw2,sg2,beta_convention,wrap,objective,rest_logits,"
         "order,varied,n,exponent,exponent_of_ratio,ratio_min,ratio_max,ratio_name,"
         "exponent_of_ratio_L_lnL\n";
  auto emit_fit = [&](const Group& g, bool vary_L) {
    std::vector<Pt> v = g.pts;
    std::stable_sort(v.begin(), v.end(),
                     [&](const Pt& a, const Pt& b) { return vary_L ? a.L < b.L : a.V < b.V; });
    // drop duplicate x (several seeds give the same theory)
    std::vector<double> x, y, ratio, ratio2;
    for (const auto& p : v) {
      const double xv = vary_L ? p.L : p.V;
      if (!x.empty() && x.back() == xv) continue;
      x.push_back(xv);
      y.push_back(p.P);
      const double lnL = std::log(p.L);
      ratio.push_back(vary_L ? p.P / (p.L * lnL * lnL) : p.P / (p.V * p.V));
      ratio2.push_back(p.P / (p.L * lnL));
    }
    if (x.size() < 2) return;
    const auto mm = std::minmax_element(ratio.begin(), ratio.end());
    for (const auto& k : g.key) out << k << ',';
    out << (vary_L ? "L" : "V") << ',' << x.size() << ',' << fmt(loglog_slope(x, y)) << ','
        << fmt(loglog_slope(x, ratio)) << ',' << fmt(*mm.first) << ',' << fmt(*mm.second) << ','
        << (vary_L ? "P_star/(L ln^2 L)" : "P_star/V^2") << ','
        << (vary_L ? fmt(loglog_slope(x, ratio2)) : std::string()) << '\n';
  };
  for (const auto& g : by_V) emit_fit(g.second, true);
  for (const auto& g : by_L) emit_fit(g.second, false);
  return out.str();
}

// After all points: scaling_fit.csv from transition_points.csv (none when transitions were off).
pl_status finish(const pl_host* host, const std::string& run_dir) {
  pl::sdk::Table t;
  std::string why;
  if (!t.read(run_dir + "/transition_points.csv", &why)) throw std::runtime_error(why);
  if (t.rows() == 0) return PL_OK;
  std::ofstream out(run_dir + "/scaling_fit.csv", std::ios::trunc);
  out << scaling_fits(t);
  out.close();
  if (!out) throw std::runtime_error("cannot write " + run_dir + "/scaling_fit.csv");
  host->log(host->ctx, PL_LOG_INFO,
            ("copy_theory: " + std::to_string(t.rows()) +
             " transitions in transition_points.csv, fits in scaling_fit.csv")
                .c_str());
  return PL_OK;
}

}  // namespace

// The cost the dispatcher and `run --shard` order points by (phaselab_plugin.h), in action
// evaluations: a softmax probe scans the copy logit on a 0.01 grid of (2 ln L + 3 sg2 + 16) (a
// linear probe: a few Newton solves, ~500 evaluations); the transition search takes ~200 probes,
// the branch grid num_P; the exact finite-P check evaluates S_data and the train MSE on each
// branch of each grid P <= exact_P_max, each ~P L^2 V + V^3 multiply-adds (counted here as
// that / 150: an action evaluation, with its exp and logs, measured ~150 of them
// (bench/cost_rank.py, bench/cost/copy_theory.toml).
extern "C" __attribute__((visibility("default"))) double phaselab_plugin_point_cost(
    const pl_value* v, uint32_t n) {
  const pl::sdk::Params p(kParams, PL_SDK_COUNT(kParams), v, n);
  const double L = double(p.int_value("L")), V = double(p.int_value("V"));
  const double sg2 = p.float_value("sg2");
  const bool softmax = p.is("attention", "softmax");
  const double probe = softmax ? (2 * std::log(L) + 3 * sg2 + 16) / 0.01 : 500.0;
  const int num_P = int(p.int_value("num_P"));
  double cost = probe * ((p.bool_value("transitions") ? 200.0 : 0.0) + num_P);
  if (p.bool_value("exact_check") && V <= double(p.int_value("exact_V_max"))) {
    const double P_min = p.float_value("P_min"), P_max = p.float_value("P_max");
    for (int i = 0; i < num_P; ++i) {
      const double P =
          num_P == 1 ? P_min : P_min * std::pow(P_max / P_min, double(i) / (num_P - 1));
      if (P <= p.float_value("exact_P_max")) cost += 4 * (P * L * L * V + V * V * V) / 150;
    }
  }
  return cost;
}

PL_DEFINE_PLUGIN(
    CopyTheory, "copy_theory", "0.1.0",
    "copy-task theory: reduced actions, branches, P* and spinodals, exact finite-P check", kParams,
    kTables, kPlots, validate, pl::sdk::finish_with<finish>)
