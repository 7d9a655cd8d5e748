// SPDX-License-Identifier: Apache-2.0
// Boundary search ([search] in a config, docs/config.md "Boundary search"): instead of a grid,
// every sweep combination x seed is a search along one numeric parameter (the key) for the values
// where a results column (the label) changes. A search evaluates an initial grid, evenly spaced
// in the scale (log or linear), then round after round the midpoint of every adjacent pair of
// evaluated points whose labels differ and whose bracket is wider than rel_tol, until no bracket
// is left to split. Every boundary is reported (a key axis may hold several); a label sequence
// that changes back (a, b, a) is reported as non-monotone; a failed point breaks the brackets
// around it.
//
// Which points a search evaluates depends only on the config, the seed and the labels of its
// earlier points, never on threads or timing. A point's place in the run is a pure function of
// its key cells: index = search * kSearchSlot + offset, the offset being the key's value minus
// min for an int key, or its position m on a grid of 2^40 steps of the scale for a float key
// (value = min + (max - min) m / 2^40, or the same in log). A search's rows are therefore in
// key order in the tables, --resume and merge map rows back to points without replaying, and
// midpoints of float keys are exact (m_a + m_b) / 2.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "driver/config.hpp"
#include "driver/figures.hpp"
#include "driver/outputs.hpp"
#include "driver/plugins.hpp"

namespace pl::driver {

constexpr int kSearchGridBits = 40;
constexpr uint64_t kSearchGrid = uint64_t(1) << kSearchGridBits;  // float positions 0..2^40
constexpr uint64_t kSearchSlot = uint64_t(1) << (kSearchGridBits + 1);

// One evaluated (or planned) point of a search.
struct SearchEval {
  uint64_t offset = 0;
  double value = 0;
  int round = 0;
  enum State { kPending, kOk, kFailed } state = kPending;
  std::string label;  // kOk: the label; kFailed: why (failed, or no label on its final row)
};

// One boundary of a search, or the row that says a search found none.
struct SearchBoundary {
  std::string left, right;  // labels below and above
  double lo = 0, hi = 0;    // the bracket (NaN when there is none)
  double estimate = 0;      // geometric (log) or arithmetic (linear) mean of lo and hi
  bool converged = false;   // the bracket is within rel_tol (or adjacent integers)
  std::string note;         // why not converged, or "" when it is
};

class SearchPlan {
 public:
  SearchPlan(const RunConfig& cfg, const Plugin& plugin);
  // Searches: sweep combinations (run order) x seeds (innermost).
  uint64_t size() const { return uint64_t(combos_.size()) * cfg_.seeds.size(); }
  uint64_t index(uint64_t search, uint64_t offset) const { return search * kSearchSlot + offset; }
  // The key's value at an offset, and as written in the tables.
  double value(uint64_t offset) const;
  std::string value_text(uint64_t offset) const;
  // The point of `search` at `offset`, evaluated in `round`.
  Point point(uint64_t search, uint64_t offset, int round) const;
  // Key cells (sweep values, key, seed, search_round) back to the search and offset; false when
  // they are not a point of this config.
  bool decode(const Row& key_cells, uint64_t* search, uint64_t* offset) const;
  // The first grid's offsets (ascending, distinct).
  std::vector<uint64_t> initial() const;
  // The next round's offsets of one search: midpoints of the unconverged brackets between
  // differing labels (`evals` sorted by offset, every one decided), at most max_evaluations in
  // all. Empty when the search is over.
  std::vector<uint64_t> next(const std::vector<SearchEval>& evals) const;
  // The boundaries of one finished search (`evals` sorted by offset); *monotone whether the
  // labels never come back after changing.
  std::vector<SearchBoundary> boundaries(const std::vector<SearchEval>& evals,
                                         bool* monotone) const;
  // Searches' combination and seed.
  const std::vector<ParamValue>& combo(uint64_t search) const {
    return combos_[size_t(search / cfg_.seeds.size())];
  }
  uint64_t seed(uint64_t search) const { return cfg_.seeds[size_t(search % cfg_.seeds.size())]; }
  // The sweep values of a search's combination, as written in the tables.
  Row outer_cells(uint64_t search) const;
  const SearchSpec& spec() const { return cfg_.search; }

 private:
  bool converged(const SearchEval& a, const SearchEval& b) const;
  double position(double v) const;  // the scale's position in [0, 1] of a value
  const RunConfig& cfg_;
  const Plugin& plugin_;
  std::vector<std::vector<ParamValue>> combos_;
  std::unordered_map<std::string, uint64_t> combo_index_;  // join_key of sweep cells -> combo
};

// The shard (0..count-1) of each search: whole searches dealt as `run --shard` deals points, by
// the plugin's cost estimate of each search's first grid where it has one, else by count.
std::vector<uint64_t> search_shards(const SearchPlan& plan, const Plugin& plugin, uint64_t count);

// The label of a point from its results rows (the plugin's own cells): the `column` cell of the
// last row with final = 1 where the table has a `final` column, else of the last row; with
// `above`, "above" when that number is > above, else "below". False with *why when it has none.
bool point_label(const SearchSpec& s, const pl_table_decl& results, const std::vector<Row>& rows,
                 std::string* label, std::string* why);

// After the tables are final (a run, a shard, or a merge): reads results.csv and failures.csv of
// `dir`, writes boundaries.csv and search_points.csv (every evaluated point with its label) and,
// unless `figures` is false, figures/search_boundaries.png and figures/search_labels.png (their
// results appended to *figs, *tool set to the figure tool when one drew). False with *error
// when a table cannot be read or written.
bool write_search_outputs(const std::string& dir, const RunConfig& cfg, const Plugin& plugin,
                          bool figures, std::vector<FigureResult>* figs, std::string* tool,
                          std::string* error);

}  // namespace pl::driver
