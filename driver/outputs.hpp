// SPDX-License-Identifier: Apache-2.0
// The run folder's CSV files. results.csv is table 0 of the plugin, <name>.csv the others,
// failures.csv the points that failed. Every file starts with the sweep keys and seed; a table
// declared with PL_TABLE_ALL_PARAMS continues with every other parameter (LeadingColumns).
//
// Durability: the rows of a point are written whole or not at all. Finished points are written
// in batches (the run's recorder thread takes every point that finished while the previous batch
// was being written): the batch's side-table rows, then its results.csv rows, then one line per
// point in journal.csv (the point's key cells), each file with one checked write and one
// fdatasync. A point counts as done (progress, run.json) only once its journal line is on disk.
// A write that fails (disk full, I/O error) is cut back to the file's last good length and
// reported with the path and errno; no point of that batch counts as done.
// journal.csv decides on --resume which points are done: rows of points not in it (a point
// interrupted while writing) are dropped, and a torn last line (no newline: a kill or a full
// disk mid-write) is dropped with a message; that point runs again. At the end of a completed
// run every table is rewritten in point order, the same for any thread count.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "phaselab_plugin.h"

namespace pl::driver {

using Row = std::vector<std::string>;

struct RunConfig;

// The columns the driver writes before a table's own: the sweep keys (file order) and seed in
// every table (the point's key: resume and merge match rows by it; a [search] run has the
// searched key before the seed and search_round after it); a table declared with
// PL_TABLE_ALL_PARAMS continues with every parameter that is not swept, in declaration order,
// with the run's value (the same in every row).
struct LeadingColumns {
  Row keys;         // sweep keys, "seed"
  Row params;       // the parameters that are not swept
  Row param_cells;  // their values, as value_text writes them
  static bool all_params(const pl_table_decl& td) { return (td.flags & PL_TABLE_ALL_PARAMS) != 0; }
  // The header of a table: the leading columns it gets, then its own.
  Row header(const pl_table_decl& td) const;
};
LeadingColumns leading_columns(const RunConfig& cfg, const std::vector<std::string>& param_names);

// Maps a row's key cells to its point index; false when they are not a point of the run.
using KeyLookup = std::function<bool(const Row& key_cells, uint64_t* index)>;
// The lookup of a run whose points are known: join_key(cells) in `key_index`.
KeyLookup key_lookup(const std::unordered_map<std::string, uint64_t>& key_index);

class ResultStore {
 public:
  ~ResultStore();
  // Creates (or, with resume, reads back and keeps) the files. `lookup` maps a row's key cells
  // to its point index; `done` receives the points found finished. `notes` receives what resume
  // repaired (torn rows dropped), one line each.
  bool open(const std::string& dir, const pl_plugin& plugin, const LeadingColumns& lead,
            bool resume, const KeyLookup& lookup, std::set<uint64_t>* done,
            std::vector<std::string>* notes, std::string* error);
  // One finished point: its index, key cells and rows (rows[t]: the rows of table t, measured
  // cells only).
  struct Commit {
    uint64_t index;
    const Row* key_cells;
    const std::vector<std::vector<Row>>* rows;
  };
  // Appends the rows of finished points, one write and one fdatasync per file for all of them
  // (side tables, results, journal: see the header comment). False: none of them is done.
  bool commit(const std::vector<Commit>& points, std::string* error);
  // Batches written by commit (each: one fdatasync per file it touched).
  size_t batches() const { return batches_; }
  size_t syncs() const { return syncs_; }
  bool record_failure(uint64_t index, const Row& key_cells, const std::string& reason,
                      std::string* error);
  // Rewrites every file in point order and closes them.
  bool finalize(std::string* error);
  void close();
  // Holds the store's lock for good (the process is about to _exit): no half-written point.
  void freeze() { mu_.lock(); }
  size_t failures() const { return failures_.lines.size(); }
  std::vector<std::string> table_files() const;
  // Rows per point in the tables (after open with resume: the rows of the points done before).
  std::map<uint64_t, size_t> row_counts() const;

 private:
  struct File {
    std::string path;
    Row header;
    bool all_params = false;  // rows get the parameter cells after the key cells
    int fd = -1;
    off_t size = 0;                                       // bytes known good
    std::vector<std::pair<uint64_t, std::string>> lines;  // (point index, CSV line), emission order
  };
  bool open_append(File& file, std::string* error);
  // Appends lines (point index, CSV line) with one checked write and one fdatasync.
  bool append(File& file, const std::vector<std::pair<uint64_t, std::string>>& lines,
              std::string* error);
  bool rewrite(File& file, std::string* error);
  std::vector<File> tables_;
  File failures_, journal_;
  Row param_cells_;  // LeadingColumns::param_cells
  std::mutex mu_;
  size_t batches_ = 0, syncs_ = 0;
};

}  // namespace pl::driver
