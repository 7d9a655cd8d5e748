// SPDX-License-Identifier: Apache-2.0
#include "driver/outputs.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "driver/config.hpp"
#include "driver/fsio.hpp"
#include "driver/text.hpp"

namespace pl::driver {
namespace {

// Splits off a torn last line (text not ending in a newline). Returns the dropped bytes.
std::string drop_torn_tail(std::string* text) {
  if (text->empty() || text->back() == '\n') return "";
  const size_t nl = text->find_last_of('\n');
  const size_t keep = nl == std::string::npos ? 0 : nl + 1;
  std::string torn = text->substr(keep);
  text->resize(keep);
  return torn;
}

}  // namespace

Row LeadingColumns::header(const pl_table_decl& td) const {
  Row h = keys;
  if (all_params(td)) h.insert(h.end(), params.begin(), params.end());
  for (uint32_t c = 0; c < td.num_columns; ++c) h.push_back(td.columns[c]);
  return h;
}

LeadingColumns leading_columns(const RunConfig& cfg, const std::vector<std::string>& param_names) {
  LeadingColumns lc;
  for (const auto& a : cfg.sweep) lc.keys.push_back(a.key);
  if (cfg.search.on) lc.keys.push_back(cfg.search.key);  // the searched key, then its round
  lc.keys.push_back("seed");
  if (cfg.search.on) lc.keys.push_back("search_round");
  for (size_t i = 0; i < cfg.base.size() && i < param_names.size(); ++i)
    if (!swept(cfg, i)) {
      lc.params.push_back(param_names[i]);
      lc.param_cells.push_back(value_text(cfg.base[i]));
    }
  return lc;
}

ResultStore::~ResultStore() { close(); }

void ResultStore::close() {
  for (File* f : {&failures_, &journal_})
    if (f->fd >= 0) ::close(f->fd), f->fd = -1;
  for (auto& t : tables_)
    if (t.fd >= 0) ::close(t.fd), t.fd = -1;
}

std::vector<std::string> ResultStore::table_files() const {
  std::vector<std::string> out;
  for (const auto& t : tables_) out.push_back(t.path);
  return out;
}

KeyLookup key_lookup(const std::unordered_map<std::string, uint64_t>& key_index) {
  return [&key_index](const Row& cells, uint64_t* index) {
    auto it = key_index.find(join_key(cells));
    if (it == key_index.end()) return false;
    *index = it->second;
    return true;
  };
}

bool ResultStore::open(const std::string& dir, const pl_plugin& plugin, const LeadingColumns& lead,
                       bool resume, const KeyLookup& lookup, std::set<uint64_t>* done,
                       std::vector<std::string>* notes, std::string* error) {
  const Row& key_header = lead.keys;
  const size_t nkey = key_header.size();
  param_cells_ = lead.param_cells;
  tables_.clear();
  for (uint32_t t = 0; t < plugin.num_tables; ++t) {
    File f;
    f.path = dir + "/" + plugin.tables[t].name + ".csv";
    f.header = lead.header(plugin.tables[t]);
    f.all_params = LeadingColumns::all_params(plugin.tables[t]);
    tables_.push_back(std::move(f));
  }
  failures_ = File{};
  failures_.path = dir + "/failures.csv";
  failures_.header = key_header;
  failures_.header.push_back("error");
  journal_ = File{};
  journal_.path = dir + "/journal.csv";
  journal_.header = key_header;

  // Reads one file's records (header checked, torn last line dropped with a note). False with
  // *error when the file cannot be used; *present false when it does not exist.
  auto read_records = [&](const File& f, std::vector<Row>* recs, bool* present) {
    *present = false;
    std::string text, why;
    if (!read_file(f.path, &text, &why)) {
      if (errno == ENOENT) return true;
      *error = "cannot read " + f.path + ": " + why;
      return false;
    }
    *present = true;
    const std::string torn = drop_torn_tail(&text);
    if (!torn.empty())
      notes->push_back("dropped a torn last row of " + f.path + " (" + std::to_string(torn.size()) +
                       " bytes without a newline, left by a kill or a full disk); its point runs "
                       "again");
    if (!parse_csv(text, recs)) {
      *error = "cannot resume: " + f.path + " is not valid CSV (unterminated quote)";
      return false;
    }
    if (recs->empty()) return true;
    if ((*recs)[0] != f.header) {
      *error = "cannot resume: " + f.path + " has columns (" + csv_line((*recs)[0]) +
               ") but this config writes (" + csv_line(f.header) + ")";
      return false;
    }
    for (size_t r = 1; r < recs->size(); ++r) {
      if ((*recs)[r].size() == f.header.size()) continue;
      if (r + 1 == recs->size()) {  // a last row cut short inside a quoted field
        notes->push_back("dropped a short last row of " + f.path + " (" +
                         std::to_string((*recs)[r].size()) + " of " +
                         std::to_string(f.header.size()) + " fields); its point runs again");
        recs->pop_back();
        break;
      }
      *error = "cannot resume: " + f.path + " record " + std::to_string(r + 1) + " has " +
               std::to_string((*recs)[r].size()) + " fields, expected " +
               std::to_string(f.header.size()) +
               " (the file was changed by something other than phaselab)";
      return false;
    }
    return true;
  };

  if (resume) {
    // journal.csv decides which points are done (a point is journaled after all its rows are on
    // disk). A folder from before the journal: results.csv decides.
    std::vector<Row> recs;
    bool present = false;
    if (!read_records(journal_, &recs, &present)) return false;
    const bool have_journal = present;
    for (size_t r = 1; r < recs.size(); ++r) {
      uint64_t index = 0;
      if (!lookup(recs[r], &index)) {
        *error = "cannot resume: " + journal_.path + " record " + std::to_string(r + 1) + " (" +
                 csv_line(recs[r]) + ") is not a point of this config";
        return false;
      }
      if (done->insert(index).second) journal_.lines.push_back({index, csv_line(recs[r])});
    }
    for (size_t t = 0; t < tables_.size(); ++t) {
      File& f = tables_[t];
      if (!read_records(f, &recs, &present)) return false;
      for (size_t r = 1; r < recs.size(); ++r) {
        const Row& rec = recs[r];
        const Row key(rec.begin(), rec.begin() + long(nkey));
        uint64_t index = 0;
        if (!lookup(key, &index)) {
          if (t == 0) {
            *error = "cannot resume: " + f.path + " record " + std::to_string(r + 1) + " (" +
                     csv_line(key) + ") is not a point of this config";
            return false;
          }
          continue;
        }
        if (t == 0 && !have_journal && done->insert(index).second)
          journal_.lines.push_back({index, csv_line(key)});
        if (!done->count(index)) continue;  // rows of a point that did not finish
        f.lines.push_back({index, csv_line(rec)});
      }
    }
  }
  // (Re)write every file with its header and kept rows, then keep it open for appending.
  for (auto& f : tables_)
    if (!rewrite(f, error)) return false;
  if (!rewrite(journal_, error)) return false;
  ::unlink(failures_.path.c_str());  // failed points are run again
  for (auto& f : tables_)
    if (!open_append(f, error)) return false;
  return open_append(journal_, error);
}

bool ResultStore::open_append(File& f, std::string* error) {
  f.fd = ::open(f.path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  struct stat st;
  if (f.fd < 0 || ::fstat(f.fd, &st) != 0) {
    *error = "cannot open " + f.path + ": " + errno_text(errno);
    return false;
  }
  f.size = st.st_size;
  return true;
}

bool ResultStore::append(File& file, const std::vector<std::pair<uint64_t, std::string>>& lines,
                         std::string* error) {
  if (file.fd < 0) {  // failures.csv is created on the first failure
    file.fd = ::open(file.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (file.fd < 0) {
      *error = "cannot create " + file.path + ": " + errno_text(errno);
      return false;
    }
    file.size = 0;
    const std::string head = csv_line(file.header) + "\n";
    int e = 0;
    if (!write_all(file.fd, head.data(), head.size(), &e)) {
      ::close(file.fd);
      file.fd = -1;
      ::unlink(file.path.c_str());  // no header-only or empty file left behind
      *error = "cannot write " + file.path + ": " + errno_text(e);
      return false;
    }
    file.size = off_t(head.size());
  }
  std::string text;
  for (const auto& l : lines) text += l.second + "\n";
  int e = 0;
  ++syncs_;
  if (!write_all(file.fd, text.data(), text.size(), &e) || data_sync(file.fd) != 0) {
    if (e == 0) e = errno;
    // Cut back to the last whole row: a torn row never stays (if even this fails, --resume
    // drops the torn tail).
    if (::ftruncate(file.fd, file.size) == 0) ::fdatasync(file.fd);
    *error = "cannot write " + file.path + ": " + errno_text(e);
    return false;
  }
  file.size += off_t(text.size());
  file.lines.insert(file.lines.end(), lines.begin(), lines.end());
  return true;
}

bool ResultStore::commit(const std::vector<Commit>& points, std::string* error) {
  if (points.empty()) return true;
  std::lock_guard<std::mutex> lock(mu_);
  ++batches_;
  // Side tables first, results next, the journal last (see the header comment): a point's
  // journal line reaches the disk after all its rows.
  for (size_t k = 0; k < tables_.size(); ++k) {
    const size_t t = (k + 1) % tables_.size();
    std::vector<std::pair<uint64_t, std::string>> lines;
    for (const Commit& c : points)
      for (const Row& r : (*c.rows)[t]) {
        Row full = *c.key_cells;
        if (tables_[t].all_params)
          full.insert(full.end(), param_cells_.begin(), param_cells_.end());
        full.insert(full.end(), r.begin(), r.end());
        lines.push_back({c.index, csv_line(full)});
      }
    if (!lines.empty() && !append(tables_[t], lines, error)) return false;
  }
  std::vector<std::pair<uint64_t, std::string>> journal;
  for (const Commit& c : points) journal.push_back({c.index, csv_line(*c.key_cells)});
  return append(journal_, journal, error);
}

bool ResultStore::record_failure(uint64_t index, const Row& key_cells, const std::string& reason,
                                 std::string* error) {
  std::lock_guard<std::mutex> lock(mu_);
  Row full = key_cells;
  full.push_back(reason);
  return append(failures_, {{index, csv_line(full)}}, error);
}

bool ResultStore::rewrite(File& file, std::string* error) {
  // Stable: rows of one point keep their emission order.
  std::stable_sort(file.lines.begin(), file.lines.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string text = csv_line(file.header) + "\n";
  for (const auto& l : file.lines) text += l.second + "\n";
  std::string why;
  if (!write_file_durable(file.path, text, &why)) {
    *error = "cannot write " + file.path + ": " + why;
    return false;
  }
  return true;
}

std::map<uint64_t, size_t> ResultStore::row_counts() const {
  std::map<uint64_t, size_t> n;
  for (const auto& f : tables_)
    for (const auto& l : f.lines) ++n[l.first];
  return n;
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
