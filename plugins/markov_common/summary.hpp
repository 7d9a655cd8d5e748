// SPDX-License-Identifier: Apache-2.0
// Per-run summary of a markov_icl run folder, read back from results.csv: for every
// (sweep point, seed) the final phase, the phase path, transition times; and the estimated
// K boundaries (K1*: memorise directly vs generalise-then-memorise; K2*: memorise vs stay in
// 2-Gen) per seed and other sweep keys with their seed spread (the rule: k_boundaries below); the
// divergence exponent gamma of the switch time below K2* and the power law of tau_2Gen vs N.
// Writes summary.csv (per run), summary_fits.csv (boundaries and fits), summary_boundaries.csv
// (per seed and other sweep keys: the classes by K and the K1*/K2* brackets, one row each, for
// `phaselab plot`) and summary.txt beside results.csv.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "sdk/table.hpp"

namespace pl::markov {

inline bool is_mem(const std::string& p) { return p == "2mem" || p == "1mem" || p == "hybrid"; }

struct RunHistory {
  std::vector<std::string> key;  // values of the columns before "step"
  std::vector<double> steps;
  std::vector<std::string> phase;
  std::string final_phase, path, cls;
  double t_2gen = NAN, t_mem = NAN, t_final = NAN;
};

// Stable segments: runs of >= 2 checkpoints, or the last run; returns (label, first step).
inline std::vector<std::pair<std::string, double>> stable_segments(const RunHistory& h) {
  std::vector<std::pair<std::string, double>> seg;
  size_t i = 0;
  while (i < h.phase.size()) {
    size_t j = i;
    while (j + 1 < h.phase.size() && h.phase[j + 1] == h.phase[i]) ++j;
    if (j > i || j + 1 == h.phase.size())
      if (seg.empty() || seg.back().first != h.phase[i]) seg.push_back({h.phase[i], h.steps[i]});
    i = j + 1;
  }
  return seg;
}

inline void analyse(RunHistory& h) {
  if (h.phase.empty()) return;
  h.final_phase = h.phase.back();
  const auto seg = stable_segments(h);
  h.path.clear();
  bool gen2_before_mem = false, seen_mem = false;
  for (const auto& [lab, t] : seg) {
    h.path += (h.path.empty() ? "" : ">") + lab;
    if (lab == "2gen" && std::isnan(h.t_2gen)) h.t_2gen = t;
    if (lab == "2mem" && std::isnan(h.t_mem)) h.t_mem = t;  // bigram memorisation
    seen_mem = seen_mem || lab == "2mem";
    if (lab == "2gen" && !seen_mem) gen2_before_mem = true;
  }
  size_t i = h.phase.size() - 1;  // t_final: first checkpoint of the last run of the final label
  while (i > 0 && h.phase[i - 1] == h.final_phase) --i;
  h.t_final = h.steps[i];
  h.cls = is_mem(h.final_phase) ? (gen2_before_mem ? "gen_then_mem" : "mem") : "gen";
}

// Least squares y = a + b x, with b's standard error and the RMS residual (n >= 2 points).
struct LineFit {
  double a = NAN, b = NAN, se_b = NAN, rms = NAN;
  int n = 0;
};
inline LineFit fit_line(const std::vector<double>& x, const std::vector<double>& y) {
  LineFit f;
  f.n = int(x.size());
  if (x.size() < 2 || y.size() != x.size()) return f;
  double mx = 0, my = 0;
  for (size_t i = 0; i < x.size(); ++i) mx += x[i], my += y[i];
  mx /= double(x.size());
  my /= double(x.size());
  double sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i)
    sxx += (x[i] - mx) * (x[i] - mx), sxy += (x[i] - mx) * (y[i] - my);
  if (!(sxx > 0)) return f;
  f.b = sxy / sxx;
  f.a = my - f.b * mx;
  double sse = 0;
  for (size_t i = 0; i < x.size(); ++i) sse += std::pow(y[i] - f.a - f.b * x[i], 2);
  f.rms = std::sqrt(sse / double(x.size()));
  if (x.size() > 2) f.se_b = std::sqrt(sse / double(x.size() - 2) / sxx);
  return f;
}

// Escape time vs context length: the power law log tau = a + p log N (p = power.b) and the
// one-parameter law tau = c N / ln N (a claim quoted in docs/markov-icl.md), both by least squares
// in log tau; the RMS log residuals say which describes the points better.
struct TauFit {
  LineFit power;
  double c_nlogn = NAN, rms_nlogn = NAN;
};
inline TauFit fit_tau_vs_N(const std::vector<double>& N, const std::vector<double>& tau) {
  TauFit f;
  std::vector<double> lx, ly;
  for (size_t i = 0; i < N.size(); ++i)
    if (N[i] > 1 && tau[i] > 0) lx.push_back(std::log(N[i])), ly.push_back(std::log(tau[i]));
  f.power = fit_line(lx, ly);
  if (lx.size() < 2) return f;
  double m = 0;  // log c = mean(log tau - log(N / ln N))
  for (size_t i = 0; i < lx.size(); ++i) m += ly[i] - (lx[i] - std::log(lx[i]));
  m /= double(lx.size());
  double sse = 0;
  for (size_t i = 0; i < lx.size(); ++i) sse += std::pow(ly[i] - m - (lx[i] - std::log(lx[i])), 2);
  f.c_nlogn = std::exp(m);
  f.rms_nlogn = std::sqrt(sse / double(lx.size()));
  return f;
}

// Divergence near K2*: log t = a - gamma log(K2 - K) over the points with K < K2; returns the
// line fit, gamma = -b.
inline LineFit fit_divergence(const std::vector<double>& K, const std::vector<double>& t,
                              double K2) {
  std::vector<double> lx, ly;
  for (size_t i = 0; i < K.size(); ++i)
    if (K[i] < K2 && t[i] > 0) lx.push_back(std::log(K2 - K[i])), ly.push_back(std::log(t[i]));
  return fit_line(lx, ly);
}

// A boundary between two neighbouring grid values of K: lo is on the lower side, hi above.
struct Bracket {
  double lo = NAN, hi = NAN;
  double mid() const { return std::sqrt(lo * hi); }  // geometric mean (K is on a log grid)
  bool ok() const { return !std::isnan(lo); }
};
// The K boundaries of one (other sweep keys, seed) from its classes (K, class) sorted by K, by one
// rule (the only one in phaselab; docs/markov-icl.md, "What is measured"):
//   K1*: the last K of the leading run of "mem" (memorised without a 2-Gen phase) vs the next K,
//        which went through 2-Gen ("gen_then_mem", or "gen": it generalised and did not memorise
//        within the budget);
//   K2*: the last K of the leading run of memorising classes ("mem", "gen_then_mem") vs the next K,
//        which ends in a generalising phase ("gen").
// Why the leading run, and why "gen" counts for K1*: the docs define K1* as the K below which the
// network memorises directly and K2* as the K above which it stays in 2-Gen, so K1* <= K2*, and
// when a memorising K is followed directly by "gen" the generalise-then-memorise window is empty
// on the grid and K1* = K2* (the same bracket), not "unbracketed". This is the rule the kinetic
// table of docs/markov-minimal.md was made with. A sequence in which a class of the lower side
// reappears above the bracket (e.g. mem, gen_then_mem, mem, gen) is non-monotone: the brackets
// still come from the leading runs (the first change), and the return value is false so that the
// tables flag it. A bracket is missing when the leading run is empty (the smallest K is already
// on the upper side) or covers the whole grid.
inline bool k_boundaries(const std::vector<std::pair<double, std::string>>& v, Bracket* k1,
                         Bracket* k2) {
  auto side = [&](auto lower, Bracket* b) {
    size_t n = 0;  // length of the leading run of lower-side classes
    while (n < v.size() && lower(v[n].second)) ++n;
    *b = n > 0 && n < v.size() ? Bracket{v[n - 1].first, v[n].first} : Bracket{};
    for (size_t i = n; i < v.size(); ++i)
      if (lower(v[i].second)) return false;  // the lower side reappears above the bracket
    return true;
  };
  const bool m1 = side([](const std::string& c) { return c == "mem"; }, k1);
  const bool m2 = side([](const std::string& c) { return c != "gen"; }, k2);
  return m1 && m2;
}

// The classes in K order as one letter each: m = "mem", G = "gen_then_mem", g = "gen".
inline std::string class_code(const std::vector<std::pair<double, std::string>>& v) {
  std::string s;
  for (const auto& [K, c] : v)
    s += c == "mem" ? 'm' : c == "gen_then_mem" ? 'G' : c == "gen" ? 'g' : '?';
  return s;
}

// One row of summary_boundaries.csv: the other sweep keys (seed last), the classes by K, the
// brackets and whether the class sequence is monotone.
struct BoundaryRow {
  std::vector<std::string> keys;
  std::string classes;
  Bracket k1, k2;
  bool monotone = true;
};

namespace detail {
inline std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}
inline std::string fmt_num(double v) {
  std::ostringstream o;
  o.precision(12);
  if (!std::isnan(v)) o << v;
  return o.str();
}
// a < b comparing cell by cell, as numbers when both parse fully as numbers, else as strings
inline bool keys_less(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  auto as_num = [](const std::string& s, double* x) {
    char* end = nullptr;
    *x = std::strtod(s.c_str(), &end);
    return !s.empty() && end == s.c_str() + s.size();
  };
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    double x, y;
    if (as_num(a[i], &x) && as_num(b[i], &y)) {
      if (x != y) return x < y;
    } else if (a[i] != b[i]) {
      return a[i] < b[i];
    }
  }
  return a.size() < b.size();
}
}  // namespace detail

// summary_boundaries.csv: the columns in key_names (the sweep keys other than K, seed last), then
// classes, k1_lo, k1_hi, k1 (geometric mean of the bracket), k2_lo, k2_hi, k2, monotone (1/0);
// an unbracketed boundary has empty cells. Rows sorted by the keys (numerically where numbers).
inline std::string boundaries_csv(const std::vector<std::string>& key_names,
                                  std::vector<BoundaryRow> rows) {
  std::stable_sort(rows.begin(), rows.end(), [](const BoundaryRow& a, const BoundaryRow& b) {
    return detail::keys_less(a.keys, b.keys);
  });
  std::ostringstream o;
  for (const auto& n : key_names) o << detail::csv_cell(n) << ",";
  o << "classes,k1_lo,k1_hi,k1,k2_lo,k2_hi,k2,monotone\n";
  auto br = [](const Bracket& b) {
    return b.ok() ? detail::fmt_num(b.lo) + "," + detail::fmt_num(b.hi) + "," +
                        detail::fmt_num(b.mid())
                  : std::string(",,");
  };
  for (const auto& r : rows) {
    for (const auto& k : r.keys) o << detail::csv_cell(k) << ",";
    o << r.classes << "," << br(r.k1) << "," << br(r.k2) << "," << (r.monotone ? 1 : 0) << "\n";
  }
  return o.str();
}

namespace detail {
inline bool write_summary(const std::string& run_dir, std::string* msg) {
  pl::sdk::Table tab;
  std::string why;
  if (!tab.read(run_dir + "/results.csv", &why)) {
    *msg = "markov_icl summary: " + why;
    return false;
  }
  const std::vector<std::string>& head = tab.header();
  const int c_step = tab.find("step"), c_phase = tab.find("phase"), c_K = tab.find("K"),
            c_seed = tab.find("seed");
  if (c_step < 0 || c_phase < 0) {
    *msg = "markov_icl summary: results.csv lacks step/phase columns";
    return false;
  }
  std::map<std::vector<std::string>, RunHistory> runs;
  std::vector<std::vector<std::string>> order;
  for (size_t r = 0; r < tab.rows(); ++r) {
    const std::vector<std::string>& f = tab.row(r);
    std::vector<std::string> key(f.begin(), f.begin() + c_step);
    auto it = runs.find(key);
    if (it == runs.end()) {
      order.push_back(key);
      it = runs.emplace(key, RunHistory{}).first;
      it->second.key = key;
    }
    it->second.steps.push_back(tab.num(r, size_t(c_step)));
    it->second.phase.push_back(f[size_t(c_phase)]);
  }
  std::ofstream sc(run_dir + "/summary.csv");
  for (int i = 0; i < c_step; ++i) sc << head[size_t(i)] << ",";
  sc << "final_phase,class,path,t_2gen,t_2mem,t_final\n";
  auto num = [](double v) {
    std::ostringstream o;
    o.precision(12);
    if (!std::isnan(v)) o << v;
    return o.str();
  };
  for (const auto& k : order) {
    RunHistory& h = runs[k];
    analyse(h);
    for (const auto& v : k) sc << v << ",";
    sc << h.final_phase << "," << h.cls << "," << h.path << "," << num(h.t_2gen) << ","
       << num(h.t_mem) << "," << num(h.t_final) << "\n";
  }
  std::ostringstream txt, fc;  // summary.txt; summary_fits.csv (one row per boundary or fit)
  fc << "quantity,group,seeds,points,value,stderr,lo,hi,rms,alt,alt_rms\n";
  txt << "markov_icl summary (" << order.size() << " runs)\n\n";
  for (const auto& k : order) {
    const RunHistory& h = runs[k];
    for (int i = 0; i < c_step; ++i) txt << head[size_t(i)] << "=" << k[size_t(i)] << " ";
    txt << ": final " << h.final_phase << ", path " << h.path << ", class " << h.cls << ", t_2gen "
        << num(h.t_2gen) << ", t_2mem " << num(h.t_mem) << ", t_final " << num(h.t_final) << "\n";
  }
  // the run key without some columns, as "name=value ..." (the group a fit runs over)
  auto group = [&](const std::vector<std::string>& k, std::vector<int> drop) {
    std::string g;
    for (int i = 0; i < c_step; ++i)
      if (std::find(drop.begin(), drop.end(), i) == drop.end())
        g += (g.empty() ? "" : " ") + head[size_t(i)] + "=" + k[size_t(i)];
    return g;
  };
  auto row = [&](const std::string& q, const std::string& g, size_t seeds, int pts, double v,
                 double se, double lo, double hi, double rms, double alt, double alt_rms) {
    fc << q << ",\"" << g << "\"," << seeds << "," << pts << "," << num(v) << "," << num(se) << ","
       << num(lo) << "," << num(hi) << "," << num(rms) << "," << num(alt) << "," << num(alt_rms)
       << "\n";
  };
  auto minmax = [](const std::vector<double>& v) {
    return std::make_pair(*std::min_element(v.begin(), v.end()),
                          *std::max_element(v.begin(), v.end()));
  };
  // K boundaries per (other keys incl. seed), then their spread over seeds; gamma per seed from
  // the memorising runs that went through 2-Gen first (K1* < K < K2*), t = t_final.
  std::map<std::string, Bracket> k2_of;  // group with seed -> K2* bracket
  if (c_K >= 0 && c_K < c_step) {
    std::map<std::string, std::vector<std::pair<double, std::string>>> byrest;
    std::map<std::string, std::string> noseed_of;
    std::map<std::string, std::vector<std::string>> rest_of;
    for (const auto& k : order) {
      const std::string g = group(k, {c_K});
      byrest[g].push_back({std::atof(k[size_t(c_K)].c_str()), runs[k].cls});
      noseed_of[g] = group(k, {c_K, c_seed});
      std::vector<std::string>& kv = rest_of[g];  // the other keys, then the seed
      kv.clear();
      for (int i = 0; i < c_step; ++i)
        if (i != c_K && i != c_seed) kv.push_back(k[size_t(i)]);
      if (c_seed >= 0 && c_seed < c_step) kv.push_back(k[size_t(c_seed)]);
    }
    txt << "\nK boundaries per seed: between neighbouring grid values [lo, hi], estimate = "
           "geometric mean\n";
    std::map<std::string, std::vector<Bracket>> k1s, k2s;  // without seed
    std::vector<BoundaryRow> brows;
    for (auto& [g, v] : byrest) {
      std::sort(v.begin(), v.end());
      Bracket k1, k2;
      const bool mono = k_boundaries(v, &k1, &k2);
      brows.push_back({rest_of[g], class_code(v), k1, k2, mono});
      txt << g << " : K1* "
          << (k1.ok() ? "[" + num(k1.lo) + ", " + num(k1.hi) + "] " + num(k1.mid())
                      : "not bracketed")
          << ", K2* "
          << (k2.ok() ? "[" + num(k2.lo) + ", " + num(k2.hi) + "] " + num(k2.mid())
                      : "not bracketed")
          << (mono ? "" : " (non-monotone: " + brows.back().classes + ")") << "\n";
      if (k1.ok())
        k1s[noseed_of[g]].push_back(k1),
            row("K1*", g, 1, 0, k1.mid(), NAN, k1.lo, k1.hi, NAN, NAN, NAN);
      if (k2.ok())
        k2s[noseed_of[g]].push_back(k2),
            row("K2*", g, 1, 0, k2.mid(), NAN, k2.lo, k2.hi, NAN, NAN, NAN);
      k2_of[g] = k2;
    }
    std::vector<std::string> bhead;
    for (int i = 0; i < c_step; ++i)
      if (i != c_K && i != c_seed) bhead.push_back(head[size_t(i)]);
    if (c_seed >= 0 && c_seed < c_step) bhead.push_back(head[size_t(c_seed)]);
    std::ofstream(run_dir + "/summary_boundaries.csv") << boundaries_csv(bhead, brows);
    auto spread = [&](const char* name, std::map<std::string, std::vector<Bracket>>& m) {
      for (auto& [g, v] : m) {
        std::vector<double> mids;
        double s = 0;
        for (const auto& b : v) mids.push_back(b.mid()), s += std::log2(b.mid());
        const auto [mn, mx] = minmax(mids);
        txt << name << " over " << v.size() << " seed(s) " << g << ": 2^" << s / double(v.size())
            << " = " << std::exp2(s / double(v.size())) << " (seed estimates " << mn << " .. " << mx
            << ")\n";
        row(std::string(name) + " seeds", g, v.size(), 0, std::exp2(s / double(v.size())), NAN, mn,
            mx, NAN, NAN, NAN);
      }
    };
    spread("K1*", k1s);
    spread("K2*", k2s);
    txt << "\ngamma near K2*: log t_switch = a - gamma log(K2* - K), t_switch = t_final of the "
           "runs that went "
           "2-Gen then memorised, K2* = the seed's estimate (alt: K2* = bracket top)\n";
    std::map<std::string, std::vector<double>> gammas;
    for (auto& [g, v] : byrest) {
      const Bracket k2 = k2_of[g];
      if (!k2.ok()) continue;
      std::vector<double> Ks, ts;
      for (const auto& k : order)
        if (group(k, {c_K}) == g && runs[k].cls == "gen_then_mem" && !std::isnan(runs[k].t_final))
          Ks.push_back(std::atof(k[size_t(c_K)].c_str())), ts.push_back(runs[k].t_final);
      const LineFit f = fit_divergence(Ks, ts, k2.mid()), fh = fit_divergence(Ks, ts, k2.hi);
      txt << g << " : " << f.n << " point(s)";
      if (f.n >= 3) {  // two points fit any exponent exactly
        txt << ", gamma " << -f.b << " +- " << num(f.se_b) << " (rms log residual " << f.rms
            << "; K2* = " << k2.hi << ": gamma " << -fh.b << ")";
        gammas[noseed_of[g]].push_back(-f.b);
      } else {
        txt << ", too few for a fit (need 3)";
      }
      txt << "\n";
      if (f.n >= 3) row("gamma", g, 1, f.n, -f.b, f.se_b, NAN, NAN, f.rms, -fh.b, fh.rms);
    }
    for (auto& [g, v] : gammas) {
      double s = 0;
      for (double x : v) s += x;
      const auto [mn, mx] = minmax(v);
      txt << "gamma over " << v.size() << " seed(s) " << g << ": mean " << s / double(v.size())
          << " (" << mn << " .. " << mx << ")\n";
      row("gamma seeds", g, v.size(), 0, s / double(v.size()), NAN, mn, mx, NAN, NAN, NAN);
    }
  }
  // tau_2Gen (first checkpoint of the first stable 2-Gen segment) vs N, per other keys: pooled over
  // seeds, and per seed for the spread of the exponent.
  const int c_N = tab.find("N");
  if (c_N >= 0 && c_N < c_step) {
    struct Pts {
      std::vector<double> N, t;
      std::set<std::string> seeds, Ns;
    };
    std::map<std::string, Pts> pooled, perseed;
    for (const auto& k : order) {
      const RunHistory& h = runs[k];
      if (std::isnan(h.t_2gen)) continue;
      const double N = std::atof(k[size_t(c_N)].c_str());
      for (auto* m : {&pooled, &perseed}) {
        Pts& p = (*m)[m == &pooled ? group(k, {c_N, c_seed}) : group(k, {c_N})];
        p.N.push_back(N);
        p.t.push_back(h.t_2gen);
        p.seeds.insert(c_seed >= 0 ? k[size_t(c_seed)] : "");
        p.Ns.insert(k[size_t(c_N)]);
      }
    }
    txt << "\ntau_2Gen vs N: power law tau = A N^p (least squares in log tau) vs tau = c N / ln "
           "N\n";
    std::map<std::string, std::vector<double>> pseed;
    for (auto& [g, p] : perseed) {
      if (p.Ns.size() < 3) continue;  // two points fit any power law exactly
      const TauFit f = fit_tau_vs_N(p.N, p.t);
      for (const auto& k : order)
        if (group(k, {c_N}) == g) {
          pseed[group(k, {c_N, c_seed})].push_back(f.power.b);
          break;
        }
    }
    for (auto& [g, p] : pooled) {
      if (p.Ns.size() < 3) {
        txt << g << " : " << p.Ns.size()
            << " N value(s) with a 2-Gen escape, too few for a fit (need 3)\n";
        continue;
      }
      const TauFit f = fit_tau_vs_N(p.N, p.t);
      txt << g << " : " << p.N.size() << " runs, " << p.Ns.size() << " N values, " << p.seeds.size()
          << " seed(s): p = " << f.power.b << " +- " << num(f.power.se_b) << " (rms log residual "
          << f.power.rms << "); N/ln N: c = " << f.c_nlogn << " (rms log residual " << f.rms_nlogn
          << ")";
      if (pseed.count(g) && pseed[g].size() > 1) {
        const auto [mn, mx] = minmax(pseed[g]);
        txt << "; per-seed p " << mn << " .. " << mx;
      }
      txt << "\n";
      row("tau_2gen_vs_N power p", g, p.seeds.size(), int(p.N.size()), f.power.b, f.power.se_b, NAN,
          NAN, f.power.rms, f.c_nlogn, f.rms_nlogn);
    }
  }
  std::ofstream(run_dir + "/summary.txt") << txt.str();
  std::ofstream(run_dir + "/summary_fits.csv") << fc.str();
  *msg = "markov_icl summary: " + run_dir + "/summary.txt";
  return true;
}
}  // namespace detail

// Reads <run_dir>/results.csv and writes summary.csv, summary.txt, summary_fits.csv and (when K
// is a sweep key) summary_boundaries.csv. False
// with *msg if the table cannot be read or lacks the step/phase columns (no exception leaves:
// finish() hooks call it across the C boundary).
inline bool write_summary(const std::string& run_dir, std::string* msg) {
  try {
    return detail::write_summary(run_dir, msg);
  } catch (const std::exception& e) {
    *msg = std::string("markov_icl summary: ") + e.what();
    return false;
  }
}

}  // namespace pl::markov
