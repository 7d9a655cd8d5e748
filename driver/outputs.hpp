// The run folder's CSV files. results.csv is table 0 of the plugin, <name>.csv the others,
// failures.csv the points that failed. Every file starts with the sweep keys and seed.
// Rows of a point are appended (and flushed) together when the point finishes: side tables
// first, results.csv last, so results.csv only names points whose rows are all on disk. At the
// end of a completed run every file is rewritten in point order, which makes the files the
// same for any thread count.
#pragma once

#include <cstdint>
#include <cstdio>
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
  // finished in results.csv.
  bool open(const std::string& dir, const pl_plugin& plugin,
            const std::vector<std::string>& key_header, bool resume,
            const std::unordered_map<std::string, uint64_t>& key_index, std::set<uint64_t>* done,
            std::string* error);
  // Appends the rows of one finished point: rows[t] are the rows of table t (measured cells).
  bool commit(uint64_t index, const Row& key_cells, const std::vector<std::vector<Row>>& rows,
              std::string* error);
  bool record_failure(uint64_t index, const Row& key_cells, const std::string& reason,
                      std::string* error);
  // Rewrites every file in point order and closes them.
  bool finalize(std::string* error);
  void close();
  size_t failures() const { return failures_.lines.size(); }
  std::vector<std::string> table_files() const;

 private:
  struct File {
    std::string path;
    Row header;
    FILE* f = nullptr;
    std::vector<std::pair<uint64_t, std::string>> lines;  // (point index, CSV line), emission order
  };
  bool append(File& file, uint64_t index, const std::string& line, std::string* error);
  bool rewrite(File& file, std::string* error);
  std::vector<File> tables_;
  File failures_;
  std::mutex mu_;
};

}  // namespace pl::driver
