// SPDX-License-Identifier: Apache-2.0
// The run folder's CSV files. results.csv is table 0 of the plugin, <name>.csv the others,
// failures.csv the points that failed. Every file starts with the sweep keys and seed.
//
// Durability: the rows of a point are written whole or not at all. When a point finishes, its
// side-table rows, then its results.csv rows, then one line in journal.csv (the point's key
// cells) are each written with one checked write and fsync'd. A write that fails (disk full,
// I/O error) is cut back to the file's last good length and reported with the path and errno.
// journal.csv decides on --resume which points are done: rows of points not in it (a point
// interrupted while writing) are dropped, and a torn last line (no newline: a kill or a full
// disk mid-write) is dropped with a message; that point runs again. At the end of a completed
// run every table is rewritten in point order, the same for any thread count.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "phaselab_plugin.h"

namespace pl::driver {

using Row = std::vector<std::string>;

class ResultStore {
 public:
  ~ResultStore();
  // Creates (or, with resume, reads back and keeps) the files. `key_index` maps a point key
  // (join_key of sweep values and seed) to its point index; `done` receives the points found
  // finished. `notes` receives what resume repaired (torn rows dropped), one line each.
  bool open(const std::string& dir, const pl_plugin& plugin,
            const std::vector<std::string>& key_header, bool resume,
            const std::unordered_map<std::string, uint64_t>& key_index, std::set<uint64_t>* done,
            std::vector<std::string>* notes, std::string* error);
  // Appends the rows of one finished point: rows[t] are the rows of table t (measured cells).
  bool commit(uint64_t index, const Row& key_cells, const std::vector<std::vector<Row>>& rows,
              std::string* error);
  bool record_failure(uint64_t index, const Row& key_cells, const std::string& reason,
                      std::string* error);
  // Rewrites every file in point order and closes them.
  bool finalize(std::string* error);
  void close();
  // Holds the store's lock for good (the process is about to _exit): no half-written point.
  void freeze() { mu_.lock(); }
  size_t failures() const { return failures_.lines.size(); }
  std::vector<std::string> table_files() const;

 private:
  struct File {
    std::string path;
    Row header;
    int fd = -1;
    off_t size = 0;                                       // bytes known good
    std::vector<std::pair<uint64_t, std::string>> lines;  // (point index, CSV line), emission order
  };
  bool open_append(File& file, std::string* error);
  bool append(File& file, uint64_t index, const std::vector<std::string>& lines,
              std::string* error);
  bool rewrite(File& file, std::string* error);
  std::vector<File> tables_;
  File failures_, journal_;
  std::mutex mu_;
};

}  // namespace pl::driver
