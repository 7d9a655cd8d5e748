// Per-run summary of a markov_icl run folder, read back from results.csv: for every
// (sweep point, seed) the final phase, the phase path, transition times; and the estimated
// K boundaries (K1*: memorise directly vs generalise-then-memorise; K2*: memorise vs stay in
// 2-Gen) per seed and other sweep keys. Writes summary.csv and summary.txt beside results.csv.
#pragma once

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace mk {

inline std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool q = false;
  for (char ch : line) {
    if (ch == '"') q = !q;
    else if (ch == ',' && !q) {
      out.push_back(cur);
      cur.clear();
    } else if (ch != '\r') cur += ch;
  }
  out.push_back(cur);
  return out;
}

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

// Reads <run_dir>/results.csv and writes summary.csv, summary.txt. False if nothing to read.
inline bool write_summary(const std::string& run_dir, std::string* msg) {
  std::ifstream in(run_dir + "/results.csv");
  std::string line;
  if (!in || !std::getline(in, line)) {
    *msg = "markov_icl summary: no results.csv in " + run_dir;
    return false;
  }
  const auto head = split_csv(line);
  auto col = [&](const char* n) {
    for (size_t i = 0; i < head.size(); ++i)
      if (head[i] == n) return int(i);
    return -1;
  };
  const int c_step = col("step"), c_phase = col("phase"), c_K = col("K"), c_seed = col("seed");
  if (c_step < 0 || c_phase < 0) {
    *msg = "markov_icl summary: results.csv lacks step/phase columns";
    return false;
  }
  std::map<std::vector<std::string>, RunHistory> runs;
  std::vector<std::vector<std::string>> order;
  while (std::getline(in, line)) {
    const auto f = split_csv(line);
    if (int(f.size()) != int(head.size())) continue;
    std::vector<std::string> key(f.begin(), f.begin() + c_step);
    auto it = runs.find(key);
    if (it == runs.end()) {
      order.push_back(key);
      it = runs.emplace(key, RunHistory{}).first;
      it->second.key = key;
    }
    it->second.steps.push_back(std::atof(f[size_t(c_step)].c_str()));
    it->second.phase.push_back(f[size_t(c_phase)]);
  }
  std::ofstream sc(run_dir + "/summary.csv");
  for (int i = 0; i < c_step; ++i) sc << head[size_t(i)] << ",";
  sc << "final_phase,class,path,t_2gen,t_2mem,t_final\n";
  auto num = [](double v) {
    std::ostringstream o;
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
  // K boundaries per (other keys incl. seed): geometric mean of the neighbouring K values
  std::ostringstream txt;
  txt << "markov_icl summary (" << order.size() << " runs)\n\n";
  for (const auto& k : order) {
    const RunHistory& h = runs[k];
    for (int i = 0; i < c_step; ++i) txt << head[size_t(i)] << "=" << k[size_t(i)] << " ";
    txt << ": final " << h.final_phase << ", path " << h.path << ", class " << h.cls
        << ", t_2gen " << num(h.t_2gen) << ", t_2mem " << num(h.t_mem) << "\n";
  }
  if (c_K >= 0 && c_K < c_step) {
    std::map<std::vector<std::string>, std::vector<std::pair<double, std::string>>> byrest;
    for (const auto& k : order) {
      std::vector<std::string> rest = k;
      rest.erase(rest.begin() + c_K);
      byrest[rest].push_back({std::atof(k[size_t(c_K)].c_str()), runs[k].cls});
    }
    txt << "\nK boundaries (geometric mean of the neighbouring K; NaN if not bracketed)\n";
    std::map<std::vector<std::string>, std::vector<double>> k1s, k2s;  // without seed
    for (auto& [rest, v] : byrest) {
      std::sort(v.begin(), v.end());
      // K2*: above the largest K that memorises, below the next K that does not
      double k2 = NAN, k1 = NAN;
      for (size_t i = 0; i + 1 < v.size(); ++i) {
        if (v[i].second != "gen" && v[i + 1].second == "gen") k2 = std::sqrt(v[i].first * v[i + 1].first);
        if (v[i].second == "mem" && v[i + 1].second == "gen_then_mem") k1 = std::sqrt(v[i].first * v[i + 1].first);
      }
      for (size_t i = 0; i < rest.size(); ++i) {
        const size_t hi = size_t(i) < size_t(c_K) ? i : i + 1;
        txt << head[hi] << "=" << rest[i] << " ";
      }
      txt << ": K1* " << num(k1) << ", K2* " << num(k2) << "\n";
      std::vector<std::string> noseed;
      for (size_t i = 0; i < rest.size(); ++i) {
        const size_t hi = size_t(i) < size_t(c_K) ? i : i + 1;
        if (int(hi) != c_seed) noseed.push_back(head[hi] + "=" + rest[i]);
      }
      if (!std::isnan(k1)) k1s[noseed].push_back(k1);
      if (!std::isnan(k2)) k2s[noseed].push_back(k2);
    }
    auto spread = [&](const char* name, std::map<std::vector<std::string>, std::vector<double>>& m) {
      for (auto& [ks, v] : m) {
        double s = 0;
        for (double x : v) s += std::log2(x);
        const double mean = s / double(v.size());
        txt << name << " over " << v.size() << " seed(s)";
        for (const auto& kk : ks) txt << " " << kk;
        txt << ": 2^" << mean << " (min " << *std::min_element(v.begin(), v.end()) << ", max "
            << *std::max_element(v.begin(), v.end()) << ")\n";
      }
    };
    spread("K1*", k1s);
    spread("K2*", k2s);
  }
  std::ofstream(run_dir + "/summary.txt") << txt.str();
  *msg = "markov_icl summary: " + run_dir + "/summary.txt";
  return true;
}

}  // namespace mk
