#include "driver/outputs.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "driver/config.hpp"
#include "driver/text.hpp"

namespace pl::driver {

ResultStore::~ResultStore() { close(); }

void ResultStore::close() {
  for (auto& t : tables_)
    if (t.f) std::fclose(t.f), t.f = nullptr;
  if (failures_.f) std::fclose(failures_.f), failures_.f = nullptr;
}

std::vector<std::string> ResultStore::table_files() const {
  std::vector<std::string> out;
  for (const auto& t : tables_) out.push_back(t.path);
  return out;
}

bool ResultStore::open(const std::string& dir, const pl_plugin& plugin, const Row& key_header,
                       bool resume, const std::unordered_map<std::string, uint64_t>& key_index,
                       std::set<uint64_t>* done, std::string* error) {
  const size_t nkey = key_header.size();
  tables_.clear();
  for (uint32_t t = 0; t < plugin.num_tables; ++t) {
    File f;
    f.path = dir + "/" + plugin.tables[t].name + ".csv";
    f.header = key_header;
    for (uint32_t c = 0; c < plugin.tables[t].num_columns; ++c)
      f.header.push_back(plugin.tables[t].columns[c]);
    tables_.push_back(std::move(f));
  }
  failures_ = File{};
  failures_.path = dir + "/failures.csv";
  failures_.header = key_header;
  failures_.header.push_back("error");

  if (resume) {
    // results.csv decides which points are done; side rows of other points are dropped (a
    // point's side rows are written before its results rows, so they may be left over).
    for (size_t t = 0; t < tables_.size(); ++t) {
      File& f = tables_[t];
      std::string text, why;
      if (!read_file(f.path, &text, &why)) {
        if (errno == ENOENT) continue;
        *error = "cannot read " + f.path + ": " + why;
        return false;
      }
      std::vector<Row> recs;
      if (!parse_csv(text, &recs)) {
        *error = "cannot resume: " + f.path + " is not valid CSV (unterminated quote)";
        return false;
      }
      if (recs.empty()) continue;
      if (recs[0] != f.header) {
        *error = "cannot resume: " + f.path + " has columns (" + csv_line(recs[0]) +
                 ") but this config writes (" + csv_line(f.header) + ")";
        return false;
      }
      for (size_t r = 1; r < recs.size(); ++r) {
        const Row& rec = recs[r];
        if (rec.size() != f.header.size()) {
          *error = "cannot resume: " + f.path + " record " + std::to_string(r + 1) + " has " +
                   std::to_string(rec.size()) + " fields, expected " +
                   std::to_string(f.header.size());
          return false;
        }
        const std::string key = join_key(Row(rec.begin(), rec.begin() + long(nkey)));
        auto it = key_index.find(key);
        if (it == key_index.end()) {
          if (t == 0) {
            *error = "cannot resume: " + f.path + " record " + std::to_string(r + 1) + " (" +
                     csv_line(Row(rec.begin(), rec.begin() + long(nkey))) +
                     ") is not a point of this config";
            return false;
          }
          continue;
        }
        if (t == 0)
          done->insert(it->second);
        else if (!done->count(it->second))
          continue;
        f.lines.push_back({it->second, csv_line(rec)});
      }
    }
  }
  // (Re)write every file with its header and kept rows, then keep it open for appending.
  for (auto& f : tables_)
    if (!rewrite(f, error)) return false;
  std::remove(failures_.path.c_str());  // failed points are run again
  for (auto& f : tables_) {
    f.f = std::fopen(f.path.c_str(), "ab");
    if (!f.f) {
      *error = "cannot open " + f.path + ": " + std::strerror(errno);
      return false;
    }
  }
  return true;
}

bool ResultStore::append(File& file, uint64_t index, const std::string& line, std::string* error) {
  if (!file.f) {  // failures.csv is created on the first failure
    file.f = std::fopen(file.path.c_str(), "wb");
    if (!file.f || std::fputs((csv_line(file.header) + "\n").c_str(), file.f) < 0) {
      *error = "cannot write " + file.path + ": " + std::strerror(errno);
      return false;
    }
  }
  file.lines.push_back({index, line});
  if (std::fputs((line + "\n").c_str(), file.f) < 0) {
    *error = "cannot write " + file.path + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

bool ResultStore::commit(uint64_t index, const Row& key_cells,
                         const std::vector<std::vector<Row>>& rows, std::string* error) {
  std::lock_guard<std::mutex> lock(mu_);
  // Side tables first, results last (see the header comment).
  for (size_t k = 0; k < tables_.size(); ++k) {
    const size_t t = (k + 1) % tables_.size();
    for (const Row& r : rows[t]) {
      Row full = key_cells;
      full.insert(full.end(), r.begin(), r.end());
      if (!append(tables_[t], index, csv_line(full), error)) return false;
    }
    if (!rows[t].empty() && std::fflush(tables_[t].f) != 0) {
      *error = "cannot write " + tables_[t].path + ": " + std::strerror(errno);
      return false;
    }
  }
  return true;
}

bool ResultStore::record_failure(uint64_t index, const Row& key_cells, const std::string& reason,
                                 std::string* error) {
  std::lock_guard<std::mutex> lock(mu_);
  Row full = key_cells;
  full.push_back(reason);
  if (!append(failures_, index, csv_line(full), error)) return false;
  std::fflush(failures_.f);
  return true;
}

bool ResultStore::rewrite(File& file, std::string* error) {
  // Stable: rows of one point keep their emission order.
  std::stable_sort(file.lines.begin(), file.lines.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string text = csv_line(file.header) + "\n";
  for (const auto& l : file.lines) text += l.second + "\n";
  std::string why;
  if (!write_file_atomic(file.path, text, &why)) {
    *error = "cannot write " + file.path + ": " + why;
    return false;
  }
  return true;
}

bool ResultStore::finalize(std::string* error) {
  std::lock_guard<std::mutex> lock(mu_);
  close();
  for (auto& f : tables_)
    if (!rewrite(f, error)) return false;
  if (!failures_.lines.empty() && !rewrite(failures_, error)) return false;
  return true;
}

}  // namespace pl::driver
