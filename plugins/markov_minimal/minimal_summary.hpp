// SPDX-License-Identifier: Apache-2.0
// Post-run summary of a markov_minimal run folder, from run.csv (one row per point x seed):
//   symmetric: for each definition of the escape time (tau, tau_drop, tau_takeoff) vs N per
//              group (the other swept keys), pooled over seeds: tau = A N^p and tau = c N / ln N
//              by least squares in log tau (markov_icl's fit_tau_vs_N), plus the two-parameter
//              tau = A (N / ln N)^q; RMS log residuals say which fits better. c_beta, c_delta
//              (optimal read-out) and c_beta_fixed, c_delta_fixed (frozen read-out) vs N (seed
//              means): |c| = A N^s, and the one-parameter c = a ln N / N beside it.
//   memoriser: per (other keys, seed) K_max = the largest K of the grid such that every K' <= K
//              was fitted (final KL to 2-Mem below kl_fit); per group the seed mean of log2 K_max;
//              K_max = A width^a over the widths.
// Writes minimal_summary.txt and minimal_fits.csv beside run.csv.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "markov_common/summary.hpp"

namespace pl::markov::minimal {

// Draws figures/tau_fits.png (points and both fits) with gnuplot when draw is set and gnuplot is
// on the PATH (PHASELAB_GNUPLOT = "" turns it off, as for the driver's figures); the .gp and .dat
// files are written either way.
inline void tau_fit_figure(const std::string& run_dir, const std::string& tag,
                           const std::vector<double>& N, const std::vector<double>& tau,
                           const TauFit& f, bool draw) {
  const std::string dir = run_dir + "/figures";
  std::filesystem::create_directories(dir);
  const std::string base = "tau_fits" + tag;  // tag: "" | "_drop" | "_takeoff", then "_<group>"
  {
    std::ofstream d(dir + "/" + base + ".dat");
    d.precision(10);
    for (size_t i = 0; i < N.size(); ++i) d << N[i] << " " << tau[i] << "\n";
  }
  {
    std::ofstream g(dir + "/" + base + ".gp");
    g.precision(10);
    g << "set terminal pngcairo size 800,560\nset output '" << base << ".png'\n"
      << "set logscale xy 2\nset xlabel 'N'\nset ylabel 'tau (steps)'\nset key top left\n"
      << "set title 'symmetric model: escape time "
      << (tag.rfind("_drop", 0) == 0      ? "tau_drop"
          : tag.rfind("_takeoff", 0) == 0 ? "tau_takeoff"
                                          : "tau")
      << " vs N, fits over all N'\n"
      << "pw(x) = " << std::exp(f.power.a) << " * x**" << f.power.b << "\n"
      << "nl(x) = " << f.c_nlogn << " * x / log(x)\n"
      << "plot '" << base << ".dat' u 1:2 w p pt 7 t 'runs', pw(x) t sprintf('A N^p, p = %.3f', "
      << f.power.b << "), nl(x) t 'c N / ln N'\n";
  }
  const char* env = std::getenv("PHASELAB_GNUPLOT");
  if (!draw || (env && !*env)) return;
  const std::string cmd = "cd '" + dir + "' && command -v gnuplot >/dev/null 2>&1 && gnuplot " +
                          base + ".gp >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) return;  // no gnuplot: the .gp and .dat stay
}

namespace detail {
inline bool write_minimal_summary(const std::string& run_dir, std::string* msg, bool draw) {
  pl::sdk::Table tab;
  std::string why;
  if (!tab.read(run_dir + "/run.csv", &why)) {
    *msg = "markov_minimal summary: " + why;
    return false;
  }
  const std::vector<std::string>& head = tab.header();
  auto col = [&](const char* n) { return tab.find(n); };
  const int c_model = col("model");
  if (c_model < 0) {
    *msg = "markov_minimal summary: run.csv lacks the model column";
    return false;
  }
  auto num = [](double v) {
    std::ostringstream o;
    o.precision(10);
    if (std::isnan(v))
      o << "nan";
    else
      o << v;
    return o.str();
  };
  auto val = [&](size_t r, int c) { return c < 0 ? NAN : tab.num(r, size_t(c)); };
  // group key: the key columns (before "model") except the named ones
  auto group = [&](const std::vector<std::string>& r, const std::vector<std::string>& drop) {
    std::string g;
    for (int i = 0; i < c_model; ++i)
      if (std::find(drop.begin(), drop.end(), head[size_t(i)]) == drop.end())
        g += (g.empty() ? "" : " ") + head[size_t(i)] + "=" + r[size_t(i)];
    return g;
  };
  const int c_N = col("N"), c_K = col("K"), c_w = col("width");
  std::ostringstream txt, fc;
  fc << "quantity,group,points,value,stderr,rms,alt,alt_rms\n";
  txt << "markov_minimal summary (" << tab.rows() << " runs)\n";
  auto fitrow = [&](const std::string& q, const std::string& g, int n, double v, double se,
                    double rms, double alt, double alt_rms) {
    fc << q << ",\"" << g << "\"," << n << "," << num(v) << "," << num(se) << "," << num(rms) << ","
       << num(alt) << "," << num(alt_rms) << "\n";
  };

  // ---- symmetric: tau(N) for each definition of tau, c(N) at the optimal and the frozen read-out
  if (c_N >= 0 && c_N < c_model) {
    // tau definitions (run.csv columns; the first is the threshold tau of the fits' old names)
    const char* const tau_cols[] = {"tau", "tau_drop", "tau_takeoff"};
    // plateau coefficients: column, its standard error, label
    const char* const c_cols[][2] = {{"c_beta", "c_beta_se"},
                                     {"c_delta", "c_delta_se"},
                                     {"c_beta_fixed", "c_beta_fixed_se"},
                                     {"c_delta_fixed", "c_delta_fixed_se"}};
    struct G {
      std::map<std::string, std::map<double, std::vector<double>>> tau, c, cse;
      std::map<std::string, int> censored;
      std::set<double> Ns;
    };
    std::map<std::string, G> gs;
    for (size_t ri = 0; ri < tab.rows(); ++ri) {
      const std::vector<std::string>& r = tab.row(ri);
      if (r[size_t(c_model)] != "symmetric") continue;
      G& g = gs[group(r, {"N", "seed"})];
      const double N = val(ri, c_N);
      g.Ns.insert(N);
      for (const char* tc : tau_cols) {
        if (col(tc) < 0) continue;
        const double t = val(ri, col(tc));
        if (std::isnan(t))
          ++g.censored[tc];
        else
          g.tau[tc][N].push_back(t);
      }
      for (const auto& cc : c_cols) {
        if (col(cc[0]) < 0) continue;
        const double v = val(ri, col(cc[0]));
        if (std::isnan(v)) continue;
        g.c[cc[0]][N].push_back(v);
        g.cse[cc[0]][N].push_back(val(ri, col(cc[1])));
      }
    }
    int fig = 0;
    for (auto& group : gs) {
      // Named, not a structured binding: the lambdas below capture it (C++17 lets a lambda capture
      // variables only, and clang refuses a binding).
      const std::string& gname = group.first;
      auto& g = group.second;
      txt << "\nsymmetric model " << (gname.empty() ? "(all)" : gname) << "\n";
      txt << "  N: tau median [min, max] over seeds (n) per definition; c seed means +- se\n";
      auto se_mean = [](const std::vector<double>& v) {  // of the seed mean
        double q = 0;
        for (double x : v) q += x * x;
        return std::sqrt(q) / double(v.size());
      };
      for (double N : g.Ns) {
        txt << "  N=" << N << ":";
        bool first = true;
        for (const char* tc : tau_cols) {
          if (!g.tau.count(tc) && !g.censored.count(tc)) continue;
          auto& t = g.tau[tc][N];
          std::sort(t.begin(), t.end());
          txt << (first ? " " : "; ") << tc << " ";
          first = false;
          if (t.empty())
            txt << "none";
          else
            txt << num(t[t.size() / 2]) << " [" << num(t.front()) << ", " << num(t.back()) << "] ("
                << t.size() << ")";
        }
        for (const auto& cc : c_cols) {
          if (!g.c.count(cc[0]) || !g.c[cc[0]].count(N)) continue;
          const std::vector<double>& v = g.c[cc[0]][N];
          double m = 0;
          for (double x : v) m += x;
          m /= double(v.size());
          txt << "; " << cc[0] << " " << num(m) << " +- " << num(se_mean(g.cse[cc[0]][N]));
        }
        txt << "\n";
      }
      for (const char* tc : tau_cols)
        if (g.censored.count(tc) && g.censored[tc])
          txt << "  " << tc << ": " << g.censored[tc] << " run(s) without a value (censored)\n";
      for (const char* tc : tau_cols) {
        if (!g.tau.count(tc)) continue;
        const std::string name = tc;
        std::vector<double> Ns, taus;
        for (auto& [N, t] : g.tau[name])
          for (double x : t) Ns.push_back(N), taus.push_back(x);
        if (Ns.empty()) continue;
        // fits on every N, and on the large-N branch (N >= the N of the smallest median tau)
        auto tau_fits = [&](const std::string& label, double Nmin) {
          std::vector<double> n, t;
          for (size_t i = 0; i < Ns.size(); ++i)
            if (Ns[i] >= Nmin) n.push_back(Ns[i]), t.push_back(taus[i]);
          std::set<double> withN(n.begin(), n.end());
          if (withN.size() < 3) {
            txt << "  " << name << " " << label
                << ": fewer than 3 N values with a value, no tau fit\n";
            return;
          }
          const TauFit f = fit_tau_vs_N(n, t);
          if (Nmin == 0)
            tau_fit_figure(run_dir,
                           (name == "tau" ? "" : name.substr(3)) +
                               (gs.size() > 1 ? "_" + std::to_string(fig++) : ""),
                           n, t, f, draw);
          std::vector<double> lx, ly;  // two-parameter tau = A (N / ln N)^q
          for (size_t i = 0; i < n.size(); ++i)
            lx.push_back(std::log(n[i] / std::log(n[i]))), ly.push_back(std::log(t[i]));
          const LineFit q = fit_line(lx, ly);
          txt << "  " << name << ", " << label << " (" << n.size() << " runs, " << withN.size()
              << " N values):\n";
          txt << "    " << name << " = A N^p: p = " << num(f.power.b) << " +- " << num(f.power.se_b)
              << ", A = " << num(std::exp(f.power.a)) << ", rms log residual " << num(f.power.rms)
              << " (2 parameters)\n";
          txt << "    " << name << " = c N / ln N: c = " << num(f.c_nlogn) << ", rms log residual "
              << num(f.rms_nlogn) << " (1 parameter)\n";
          txt << "    " << name << " = A (N / ln N)^q: q = " << num(q.b) << " +- " << num(q.se_b)
              << ", rms log residual " << num(q.rms) << " (2 parameters)\n";
          txt << "    N^p vs c N / ln N: rms " << num(f.power.rms) << " vs " << num(f.rms_nlogn)
              << " (ratio " << num(f.rms_nlogn / f.power.rms)
              << "); N^p vs (N / ln N)^q: " << (f.power.rms <= q.rms ? "N^p" : "(N / ln N)^q")
              << " better, rms ratio "
              << num(std::max(f.power.rms, q.rms) / std::min(f.power.rms, q.rms)) << "\n";
          fitrow(name + " power p " + label, gname, int(n.size()), f.power.b, f.power.se_b,
                 f.power.rms, f.c_nlogn, f.rms_nlogn);
          fitrow(name + " (N/lnN)^q q " + label, gname, int(n.size()), q.b, q.se_b, q.rms, NAN,
                 NAN);
        };
        tau_fits("all N", 0);
        double nmin = NAN, tmin = INFINITY;
        for (auto& [N, t] : g.tau[name])
          if (!t.empty() && t[t.size() / 2] < tmin) tmin = t[t.size() / 2], nmin = N;
        if (!std::isnan(nmin) && nmin > *std::min_element(Ns.begin(), Ns.end()))
          tau_fits("N >= " + num(nmin) + " (large-N branch)", nmin);
      }
      // |c| = A N^s over the N with a positive seed mean; alt: a of c = a ln N / N, its rms
      for (const auto& cc : c_cols) {
        if (!g.c.count(cc[0])) continue;
        std::vector<double> lN, lc;
        for (auto& [N, v] : g.c[cc[0]]) {
          double m = 0;
          for (double x : v) m += x;
          m /= double(v.size());
          if (m > 0) lN.push_back(std::log(N)), lc.push_back(std::log(m));
        }
        if (lc.size() < 3) continue;
        const LineFit fb = fit_line(lN, lc);
        double la = 0, sse = 0;  // log a = mean(log c - log(ln N / N))
        for (size_t i = 0; i < lN.size(); ++i) la += lc[i] - (std::log(lN[i]) - lN[i]);
        la /= double(lN.size());
        for (size_t i = 0; i < lN.size(); ++i)
          sse += std::pow(lc[i] - la - (std::log(lN[i]) - lN[i]), 2);
        const double rms_ln = std::sqrt(sse / double(lN.size()));
        txt << "  " << cc[0] << " = A N^s (" << fb.n
            << " N values with a positive mean): s = " << num(fb.b) << " +- " << num(fb.se_b)
            << " (rms " << num(fb.rms) << "); " << cc[0]
            << " = a ln N / N: a = " << num(std::exp(la)) << " (rms " << num(rms_ln) << ")\n";
        fitrow(std::string(cc[0]) + " power s", gname, fb.n, fb.b, fb.se_b, fb.rms, std::exp(la),
               rms_ln);
      }
    }
  }

  // ---- memoriser: K_max per (group, seed), K_max vs width
  if (c_K >= 0 && c_K < c_model) {
    const int c_fit = col("fits");
    std::map<std::string, std::map<double, bool>> per;  // group with seed -> K -> fitted
    std::map<std::string, std::string> noseed;
    std::map<std::string, double> width_of;
    for (size_t ri = 0; ri < tab.rows(); ++ri) {
      const std::vector<std::string>& r = tab.row(ri);
      if (r[size_t(c_model)] != "memoriser") continue;
      const std::string g = group(r, {"K"});
      per[g][val(ri, c_K)] = val(ri, c_fit) == 1;
      noseed[g] = group(r, {"K", "seed"});
      width_of[noseed[g]] = c_w >= 0 && c_w < c_model ? val(ri, c_w) : NAN;
    }
    if (!per.empty()) txt << "\nmemoriser capacity: K_max = largest K with every K' <= K fitted\n";
    std::map<std::string, std::vector<double>> kmax;
    double Ktop = 0;  // the largest K of the grid
    for (auto& [g, m] : per) Ktop = std::max(Ktop, m.rbegin()->first);
    for (auto& [g, m] : per) {
      double km = 0;
      bool all = true;
      for (auto& [K, ok] : m) {
        if (!ok) {
          all = false;
          break;
        }
        km = K;
      }
      txt << "  " << g << ": K_max " << km << " (fitted:";
      for (auto& [K, ok] : m) txt << " " << K << (ok ? "+" : "-");
      txt << ")";
      if (all && km < Ktop) {  // a run stopped before the rest of this grid: only a lower bound
        txt << " incomplete grid, K_max >= " << km << ", left out\n";
        continue;
      }
      txt << "\n";
      kmax[noseed[g]].push_back(km);
    }
    std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> byw;
    for (auto& [g, v] : kmax) {
      double s = 0;
      int n = 0;
      for (double x : v)
        if (x > 0) s += std::log2(x), ++n;
      txt << "  " << g << ": K_max seed mean 2^" << num(n ? s / n : NAN) << " = "
          << num(n ? std::exp2(s / n) : NAN) << " over " << v.size() << " seed(s)\n";
      fitrow("K_max", g, int(v.size()), n ? std::exp2(s / n) : NAN, NAN, NAN, NAN, NAN);
      // group over width: the key without width and seed
      std::string gw;
      {
        std::istringstream ss(g);
        std::string tok;
        while (ss >> tok)
          if (tok.rfind("width=", 0) != 0) gw += (gw.empty() ? "" : " ") + tok;
      }
      for (double x : v)
        if (x > 0 && width_of[g] > 0)
          byw[gw].first.push_back(std::log(width_of[g])), byw[gw].second.push_back(std::log(x));
    }
    for (auto& [gw, xy] : byw) {
      std::set<double> ws(xy.first.begin(), xy.first.end());
      if (ws.size() < 2) continue;
      const LineFit f = fit_line(xy.first, xy.second);
      txt << "  K_max = A width^a " << gw << ": a = " << num(f.b) << " +- " << num(f.se_b)
          << " (rms log residual " << num(f.rms) << ", " << f.n << " points)\n";
      fitrow("K_max width power a", gw, f.n, f.b, f.se_b, f.rms, NAN, NAN);
    }
  }
  std::ofstream(run_dir + "/minimal_summary.txt") << txt.str();
  std::ofstream(run_dir + "/minimal_fits.csv") << fc.str();
  *msg = "markov_minimal summary: " + run_dir + "/minimal_summary.txt";
  return true;
}
}  // namespace detail

// Reads <run_dir>/run.csv and writes minimal_summary.txt and minimal_fits.csv. False with *msg
// if the table cannot be read or lacks the model column (no exception leaves: finish() hooks
// call it across the C boundary).
inline bool write_minimal_summary(const std::string& run_dir, std::string* msg, bool draw = true) {
  try {
    return detail::write_minimal_summary(run_dir, msg, draw);
  } catch (const std::exception& e) {
    *msg = std::string("markov_minimal summary: ") + e.what();
    return false;
  }
}

}  // namespace pl::markov::minimal
