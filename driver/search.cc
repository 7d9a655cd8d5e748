// SPDX-License-Identifier: Apache-2.0
#include "driver/search.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include "driver/fsio.hpp"
#include "driver/shard.hpp"
#include "driver/text.hpp"

namespace pl::driver {
namespace {

bool parse_number(const std::string& s, double* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  *v = std::strtod(s.c_str(), &end);
  return end && *end == 0 && std::isfinite(*v);
}

bool parse_int(const std::string& s, int64_t* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(s.c_str(), &end, 10);
  if (!end || *end || errno) return false;
  *v = x;
  return true;
}

// A bracket's width is compared with this slack, so a bracket of exactly 1 + rel_tol counts.
constexpr double kSlack = 1e-12;

}  // namespace

SearchPlan::SearchPlan(const RunConfig& cfg, const Plugin& plugin)
    : cfg_(cfg), plugin_(plugin), combos_(sweep_combinations(cfg)) {
  for (const auto& c : combos_) {
    Row cells;
    for (const auto& a : cfg_.sweep) cells.push_back(driver::value_text(c[a.param]));
    combo_index_.emplace(join_key(cells), uint64_t(combo_index_.size()));
  }
}

double SearchPlan::position(double v) const {
  const SearchSpec& s = cfg_.search;
  if (s.log) return (std::log(v) - std::log(s.min)) / (std::log(s.max) - std::log(s.min));
  return (v - s.min) / (s.max - s.min);
}

double SearchPlan::value(uint64_t offset) const {
  const SearchSpec& s = cfg_.search;
  if (s.integer) return s.min + double(offset);
  if (offset == 0) return s.min;
  if (offset >= kSearchGrid) return s.max;
  const double t = double(offset) / double(kSearchGrid);
  if (s.log) return std::exp(std::log(s.min) + t * (std::log(s.max) - std::log(s.min)));
  return s.min + t * (s.max - s.min);
}

std::string SearchPlan::value_text(uint64_t offset) const {
  const double v = value(offset);
  if (cfg_.search.integer) return std::to_string(int64_t(v));
  return format_double(v);
}

Row SearchPlan::outer_cells(uint64_t search) const {
  Row cells;
  for (const auto& a : cfg_.sweep) cells.push_back(driver::value_text(combo(search)[a.param]));
  return cells;
}

Point SearchPlan::point(uint64_t search, uint64_t offset, int round) const {
  const SearchSpec& s = cfg_.search;
  Point pt;
  pt.index = index(search, offset);
  pt.seed = seed(search);
  pt.params = combo(search);
  ParamValue& k = pt.params[s.param];
  if (s.integer) {
    k.i = int64_t(value(offset));
    k.f = double(k.i);
  } else {
    k.f = value(offset);
  }
  pt.key_cells = outer_cells(search);
  pt.key_cells.push_back(value_text(offset));
  pt.key_cells.push_back(std::to_string(pt.seed));
  pt.key_cells.push_back(std::to_string(round));
  // The key (resume's identity of a point) leaves out search_round: it follows from the rest.
  pt.key = join_key(Row(pt.key_cells.begin(), pt.key_cells.end() - 1));
  pt.point_key = point_params_hash(plugin_, pt.params);
  const std::string outer = sweep_label(cfg_, pt.params);
  pt.label = outer + (outer.empty() ? "" : " ") + s.key + "=" + pt.key_cells[cfg_.sweep.size()] +
             " seed=" + std::to_string(pt.seed) + " round=" + std::to_string(round);
  return pt;
}

bool SearchPlan::decode(const Row& cells, uint64_t* search, uint64_t* offset) const {
  const SearchSpec& s = cfg_.search;
  const size_t n = cfg_.sweep.size();
  if (cells.size() != n + 3) return false;
  const auto it = combo_index_.find(join_key(Row(cells.begin(), cells.begin() + long(n))));
  if (it == combo_index_.end()) return false;
  int64_t seed = 0, round = 0;
  if (!parse_int(cells[n + 1], &seed) || !parse_int(cells[n + 2], &round) || round < 0)
    return false;
  const auto sit = std::find(cfg_.seeds.begin(), cfg_.seeds.end(), uint64_t(seed));
  if (seed < 0 || sit == cfg_.seeds.end()) return false;
  uint64_t off = 0;
  if (s.integer) {
    int64_t v = 0;
    if (!parse_int(cells[n], &v) || double(v) < s.min || double(v) > s.max) return false;
    off = uint64_t(v - int64_t(s.min));
  } else {
    double v = 0;
    if (!parse_number(cells[n], &v) || v < s.min || v > s.max) return false;
    const double m = std::round(position(v) * double(kSearchGrid));
    if (!(m >= 0) || m > double(kSearchGrid)) return false;
    off = uint64_t(m);
    if (value_text(off) != cells[n]) return false;  // not a value the search evaluates
  }
  *search = it->second * cfg_.seeds.size() + uint64_t(sit - cfg_.seeds.begin());
  *offset = off;
  return true;
}

std::vector<uint64_t> SearchPlan::initial() const {
  const SearchSpec& s = cfg_.search;
  std::vector<uint64_t> out;
  for (int64_t i = 0; i < s.initial; ++i) {
    const uint64_t m =
        i + 1 == s.initial
            ? kSearchGrid
            : uint64_t(std::llround(double(i) * double(kSearchGrid) / double(s.initial - 1)));
    uint64_t off = m;
    if (s.integer) {
      const double t = double(m) / double(kSearchGrid);
      const double v = s.log ? std::exp(std::log(s.min) + t * (std::log(s.max) - std::log(s.min)))
                             : s.min + t * (s.max - s.min);
      off = uint64_t(std::clamp<int64_t>(std::llround(v), int64_t(s.min), int64_t(s.max)) -
                     int64_t(s.min));
    }
    if (out.empty() || out.back() != off) out.push_back(off);
  }
  return out;
}

bool SearchPlan::converged(const SearchEval& a, const SearchEval& b) const {
  const SearchSpec& s = cfg_.search;
  if (b.offset <= a.offset + 1) return true;  // adjacent integers, or the grid's resolution
  if (s.log) return b.value / a.value <= 1 + s.rel_tol + kSlack;
  return b.value - a.value <= s.rel_tol * (s.max - s.min) * (1 + kSlack);
}

std::vector<uint64_t> SearchPlan::next(const std::vector<SearchEval>& evals) const {
  const SearchSpec& s = cfg_.search;
  std::vector<uint64_t> out;
  size_t prev = evals.size();  // the last ok point before i
  for (size_t i = 0; i < evals.size(); ++i) {
    if (evals[i].state != SearchEval::kOk) continue;
    if (prev < evals.size()) {
      const SearchEval &a = evals[prev], &b = evals[i];
      const bool broken = i != prev + 1;  // a failed point lies between
      if (a.label != b.label && !broken && !converged(a, b)) {
        uint64_t mid;
        if (!s.integer) {
          mid = a.offset + (b.offset - a.offset) / 2;
        } else {
          const double va = value(a.offset), vb = value(b.offset);
          const double m = s.log ? std::sqrt(va * vb) : 0.5 * (va + vb);
          const int64_t v = std::clamp<int64_t>(std::llround(m), int64_t(va) + 1, int64_t(vb) - 1);
          mid = uint64_t(v - int64_t(s.min));
        }
        if (evals.size() + out.size() < uint64_t(s.max_evaluations)) out.push_back(mid);
      }
    }
    prev = i;
  }
  return out;
}

std::vector<SearchBoundary> SearchPlan::boundaries(const std::vector<SearchEval>& evals,
                                                   bool* monotone) const {
  const SearchSpec& s = cfg_.search;
  std::vector<SearchBoundary> out;
  std::vector<std::string> runs;  // labels in key order, repeats collapsed
  size_t prev = evals.size();
  bool capped = false;
  for (size_t i = 0; i < evals.size(); ++i) {
    if (evals[i].state != SearchEval::kOk) continue;
    if (runs.empty() || runs.back() != evals[i].label) runs.push_back(evals[i].label);
    if (prev < evals.size() && evals[prev].label != evals[i].label) {
      const SearchEval &a = evals[prev], &b = evals[i];
      SearchBoundary bd;
      bd.left = a.label;
      bd.right = b.label;
      bd.lo = a.value;
      bd.hi = b.value;
      bd.estimate = s.log ? std::sqrt(a.value * b.value) : 0.5 * (a.value + b.value);
      const bool conv = converged(a, b);
      if (i != prev + 1) {
        std::string failed;
        for (size_t j = prev + 1; j < i; ++j)
          failed += (failed.empty() ? "" : ", ") + s.key + "=" + value_text(evals[j].offset);
        bd.note = "broken: the point" + std::string(i > prev + 2 ? "s " : " ") + failed +
                  " between failed or has no label";
      } else if (!conv) {
        bd.note =
            "unconverged: max_evaluations (" + std::to_string(s.max_evaluations) + ") reached";
        capped = true;
      }
      bd.converged = conv && i == prev + 1;
      out.push_back(bd);
    }
    prev = i;
  }
  (void)capped;
  std::set<std::string> seen;
  *monotone = true;
  for (const auto& r : runs)
    if (!seen.insert(r).second) *monotone = false;
  if (out.empty()) {
    SearchBoundary none;
    none.lo = none.hi = none.estimate = NAN;
    if (runs.empty()) {
      none.note = "no labelled point: every point failed or has no label";
    } else {
      none.left = none.right = runs[0];
      none.note = "no boundary in [" + format_double(s.min) + ", " + format_double(s.max) +
                  "]: every labelled point is " + runs[0];
    }
    out.push_back(none);
  }
  return out;
}

std::vector<uint64_t> search_shards(const SearchPlan& plan, const Plugin& plugin, uint64_t count) {
  const std::vector<uint64_t> first = plan.initial();
  std::vector<Point> grid;
  for (uint64_t s = 0; s < plan.size(); ++s)
    for (uint64_t off : first) grid.push_back(plan.point(s, off, 0));
  const std::vector<double> pc = point_costs(grid, plugin);
  std::vector<double> costs;
  if (!pc.empty())
    for (uint64_t s = 0; s < plan.size(); ++s) {
      double c = 0;
      for (size_t j = 0; j < first.size(); ++j) c += pc[size_t(s) * first.size() + j];
      costs.push_back(c);
    }
  return shard_of_points(plan.size(), count, costs);
}

bool point_label(const SearchSpec& s, const pl_table_decl& results, const std::vector<Row>& rows,
                 std::string* label, std::string* why) {
  int col = -1, fin = -1;
  for (uint32_t c = 0; c < results.num_columns; ++c) {
    if (s.column == results.columns[c]) col = int(c);
    if (std::string("final") == results.columns[c]) fin = int(c);
  }
  if (col < 0) {
    *why = "no column " + s.column + " in " + results.name + ".csv";
    return false;
  }
  if (rows.empty()) {
    *why = "no rows in " + std::string(results.name) + ".csv";
    return false;
  }
  const Row* row = &rows.back();
  if (fin >= 0)
    for (const Row& r : rows)
      if (size_t(fin) < r.size() && r[size_t(fin)] == "1") row = &r;
  if (size_t(col) >= row->size() || (*row)[size_t(col)].empty()) {
    *why = "an empty " + s.column + " on its final row";
    return false;
  }
  const std::string& cell = (*row)[size_t(col)];
  if (!s.has_above) {
    *label = cell;
    return true;
  }
  double v = 0;
  if (!parse_number(cell, &v)) {
    *why = s.column + " = " + quoted(cell) + " on its final row is not a number (search.above)";
    return false;
  }
  *label = v > s.above ? "above" : "below";
  return true;
}

namespace {

// Reads a CSV table of the run folder; false with *error unless it is absent (then empty).
bool read_table_rows(const std::string& path, std::vector<Row>* recs, std::string* error) {
  std::string text, why;
  recs->clear();
  if (!read_file(path, &text, &why)) {
    if (errno == ENOENT) return true;
    *error = "cannot read " + path + ": " + why;
    return false;
  }
  if (!parse_csv(text, recs)) {
    *error = path + " is not valid CSV (unterminated quote)";
    return false;
  }
  return true;
}

std::string cell_or_empty(double v) { return std::isnan(v) ? "" : format_double(v); }

}  // namespace

bool write_search_outputs(const std::string& dir, const RunConfig& cfg, const Plugin& plugin,
                          bool figures, std::vector<FigureResult>* figs, std::string* tool,
                          std::string* error) {
  const SearchSpec& s = cfg.search;
  const pl_plugin& p = plugin.entry;
  const SearchPlan plan(cfg, plugin);
  const LeadingColumns lead = leading_columns(cfg, plugin.param_names);
  const size_t nkey = lead.keys.size();
  const size_t nlead =
      nkey + (p.num_tables && LeadingColumns::all_params(p.tables[0]) ? lead.params.size() : 0);
  // Every evaluated point of every search, from results.csv (rows by point) and failures.csv.
  std::map<uint64_t, std::map<uint64_t, SearchEval>> searches;
  std::map<uint64_t, std::vector<Row>> rows_of;  // point index -> own cells of its rows
  std::vector<Row> recs;
  const std::string results = dir + "/" + (p.num_tables ? p.tables[0].name : "results") + ".csv";
  if (!read_table_rows(results, &recs, error)) return false;
  for (size_t r = 1; r < recs.size(); ++r) {
    const Row& rec = recs[r];
    if (rec.size() < nlead) continue;
    uint64_t sid = 0, off = 0;
    if (!plan.decode(Row(rec.begin(), rec.begin() + long(nkey)), &sid, &off)) {
      *error = results + " record " + std::to_string(r + 1) + " is not a point of this search";
      return false;
    }
    SearchEval& e = searches[sid][off];
    e.offset = off;
    e.value = plan.value(off);
    e.round = std::atoi(rec[nkey - 1].c_str());
    rows_of[plan.index(sid, off)].push_back(Row(rec.begin() + long(nlead), rec.end()));
  }
  for (auto& [sid, evals] : searches)
    for (auto& [off, e] : evals) {
      std::string why;
      if (point_label(s, p.tables[0], rows_of[plan.index(sid, off)], &e.label, &why)) {
        e.state = SearchEval::kOk;
      } else {
        e.state = SearchEval::kFailed;
        e.label = "no label: " + why;
      }
    }
  if (!read_table_rows(dir + "/failures.csv", &recs, error)) return false;
  for (size_t r = 1; r < recs.size(); ++r) {
    const Row& rec = recs[r];
    uint64_t sid = 0, off = 0;
    if (rec.size() < nkey + 1 ||
        !plan.decode(Row(rec.begin(), rec.begin() + long(nkey)), &sid, &off))
      continue;
    SearchEval& e = searches[sid][off];
    e.offset = off;
    e.value = plan.value(off);
    e.round = std::atoi(rec[nkey - 1].c_str());
    e.state = SearchEval::kFailed;
    e.label = "failed: " + rec[nkey];
  }
  // boundaries.csv: one row per boundary (or one saying there is none), searches in run order.
  Row outer;
  for (const auto& a : cfg.sweep) outer.push_back(a.key);
  Row bh = outer;
  for (const char* c : {"seed", "key", "left", "right", "nth", "lo", "hi", "estimate",
                        "evaluations", "converged", "monotone", "note"})
    bh.push_back(c);
  Row ph = outer;
  for (const std::string& c : {std::string("seed"), s.key, std::string("search_round"),
                               std::string("label"), std::string("status"), std::string("search")})
    ph.push_back(c);
  std::string btext = csv_line(bh) + "\n", ptext = csv_line(ph) + "\n";
  uint64_t strip = 0;
  for (auto& [sid, m] : searches) {
    std::vector<SearchEval> evals;
    for (auto& [off, e] : m) evals.push_back(e);
    bool monotone = true;
    const Row oc = plan.outer_cells(sid);
    std::map<std::pair<std::string, std::string>, int> seen;  // boundaries of each kind so far
    for (const auto& b : plan.boundaries(evals, &monotone)) {
      Row row = oc;
      row.push_back(std::to_string(plan.seed(sid)));
      row.push_back(s.key);
      row.push_back(b.left);
      row.push_back(b.right);
      row.push_back(std::to_string(++seen[{b.left, b.right}]));
      row.push_back(cell_or_empty(b.lo));
      row.push_back(cell_or_empty(b.hi));
      row.push_back(cell_or_empty(b.estimate));
      row.push_back(std::to_string(evals.size()));
      row.push_back(b.converged ? "1" : "0");
      row.push_back(monotone ? "1" : "0");
      row.push_back(b.note);
      btext += csv_line(row) + "\n";
    }
    for (const auto& e : evals) {
      Row row = oc;
      row.push_back(std::to_string(plan.seed(sid)));
      row.push_back(plan.value_text(e.offset));
      row.push_back(std::to_string(e.round));
      row.push_back(e.state == SearchEval::kOk ? e.label : "");
      row.push_back(e.state == SearchEval::kOk ? "ok" : e.label);
      row.push_back(std::to_string(strip));
      ptext += csv_line(row) + "\n";
    }
    ++strip;
  }
  std::string why;
  for (const auto& [name, text] : {std::make_pair(std::string("boundaries.csv"), btext),
                                   std::make_pair(std::string("search_points.csv"), ptext)})
    if (!write_file_atomic(dir + "/" + name, text, &why)) {
      *error = "cannot write " + dir + "/" + name + ": " + why;
      return false;
    }
  if (!figures || searches.empty()) return true;
  // Figures: each boundary's estimate against the first sweep key (seed mean +- s.e., one curve
  // per boundary and per value of every other sweep key: nothing pooled), and the label of every
  // evaluated point along the key, one strip per search.
  PlotSpec b;
  b.out = dir + "/figures/search_boundaries.png";
  b.logy = s.log;
  SeriesSpec bs;
  bs.table = dir + "/boundaries.csv";
  bs.ys = {"estimate"};
  if (!cfg.sweep.empty()) {
    bs.x = cfg.sweep[0].key;
    bs.style = "mean";
    // One curve per kind of boundary (labels and, for a kind met twice in a search, its order
    // along the key) and value of every other sweep key: a seed mean never mixes the first
    // mem | gen of one seed with the second of another.
    bs.group = {"left", "right", "nth"};
    for (size_t i = 1; i < cfg.sweep.size(); ++i) bs.group.push_back(cfg.sweep[i].key);
    b.title = s.key + " boundaries (seed mean +- s.e.; lo-hi brackets in boundaries.csv)";
    bool positive = true;
    for (const auto& v : cfg.sweep[0].values)
      positive = positive && v.type != PL_PARAM_STRING && v.type != PL_PARAM_ENUM &&
                 v.type != PL_PARAM_BOOL && v.f > 0;
    double lo = INFINITY, hi = -INFINITY;
    for (const auto& v : cfg.sweep[0].values) lo = std::min(lo, v.f), hi = std::max(hi, v.f);
    b.logx = positive && hi >= 8 * lo;
  } else {
    bs.x = "seed";
    bs.style = "points";
    bs.group = {"left", "right", "nth"};
    b.title = s.key + " boundaries per seed (brackets in boundaries.csv)";
  }
  bs.title = "{left} | {right} (#{nth} along " + s.key + ")";
  bs.text = "boundaries.csv:x=" + bs.x + ":y=estimate";
  b.ylabel = s.key + " at the boundary";
  b.series = {bs};
  PlotSpec l;
  l.out = dir + "/figures/search_labels.png";
  l.logx = s.log;
  SeriesSpec ls;
  ls.table = dir + "/search_points.csv";
  ls.x = s.key;
  ls.ys = {"search"};
  ls.group = {"label"};
  ls.style = "points";
  ls.title = "{label}";
  ls.text = "search_points.csv:x=" + s.key + ":y=search";
  l.title = "label of every evaluated point (a row per search: " +
            std::string(cfg.sweep.empty() ? "seed" : "combination x seed, search_points.csv") + ")";
  l.xlabel = s.key;
  l.ylabel = "search";
  l.series = {ls};
  for (PlotSpec* ps : {&b, &l}) {
    ps->also = cfg.figure_formats;  // PDF and SVG beside the PNG where the config asks
    const PlotOutcome o = draw_plot(*ps);
    if (!o.figure.png.empty() || tool->empty()) *tool = o.tool;
    FigureResult f = o.figure;
    if (f.name.empty()) f.name = std::filesystem::path(ps->out).stem().string();
    if (o.status != 0 && f.note.empty()) f.note = o.error;
    figs->push_back(f);
  }
  return true;
}

}  // namespace pl::driver
