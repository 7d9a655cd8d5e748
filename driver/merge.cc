// SPDX-License-Identifier: Apache-2.0
#include "driver/merge.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "driver/config.hpp"
#include "driver/figures.hpp"
#include "driver/json_text.hpp"
#include "driver/limits.hpp"
#include "driver/outputs.hpp"
#include "driver/plugins.hpp"
#include "driver/progress.hpp"
#include "driver/run.hpp"
#include "driver/run_record.hpp"
#include "driver/search.hpp"
#include "driver/shard.hpp"
#include "driver/text.hpp"
#include "driver/version.h"

namespace pl::driver {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct Shard {
  std::string dir;
  json rec;              // run.json, for the checks
  ordered_json ordered;  // the same in its key order, for the merged run.json
  ShardSpec spec;
};

int fail(const std::string& msg) {
  std::fprintf(stderr, "phaselab merge: error: %s\n", msg.c_str());
  return kExitUsage;
}

// A file of the merged folder could not be written (disk full, I/O error): exit 5, as a run's.
int fail_write(const std::string& msg) {
  std::fprintf(stderr, "phaselab merge: error: %s\n", msg.c_str());
  return kExitWrite;
}

std::string short_json(const json& j) {
  std::string s = j.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

// The run.json fields that must agree for shards to be parts of one run. Returns the differing
// keys with both values ("" when they agree). This is the config-identity check of a merge; the
// resolved sweep, parameter values and seeds are what decide every point's result.
std::string identity_diff(const json& a, const json& b) {
  static const char* const kKeys[] = {"/phaselab_version", "/plugin/name",        "/plugin/version",
                                      "/config/plugin",    "/config/sweep",       "/config/params",
                                      "/config/run/seeds", "/kernel_target",      "/kernels",
                                      "/shard/count",      "/shard/points_in_run"};
  std::string diff;
  for (const char* k : kKeys) {
    const json::json_pointer ptr(k);
    const json va = a.contains(ptr) ? a.at(ptr) : json(), vb = b.contains(ptr) ? b.at(ptr) : json();
    if (va == vb) continue;
    // Name the innermost differing members of objects (config.params.L, kernels.gemm).
    if (va.is_object() && vb.is_object()) {
      std::set<std::string> names;
      for (auto it = va.begin(); it != va.end(); ++it) names.insert(it.key());
      for (auto it = vb.begin(); it != vb.end(); ++it) names.insert(it.key());
      for (const auto& n : names) {
        const json x = va.value(n, json()), y = vb.value(n, json());
        if (x != y)
          diff += std::string(diff.empty() ? "" : ", ") + (k + 1) + "/" + n + " (" + short_json(x) +
                  " vs " + short_json(y) + ")";
      }
    } else {
      diff += std::string(diff.empty() ? "" : ", ") + (k + 1) + " (" + short_json(va) + " vs " +
              short_json(vb) + ")";
    }
  }
  std::replace(diff.begin(), diff.end(), '/', '.');
  return diff;
}

std::string shard_command(const Shard& s, bool resume) {
  const json& c = s.rec["config"];
  const std::string dir =
      s.dir.substr(0, s.dir.rfind('/') == std::string::npos ? 0 : s.dir.rfind('/'));
  std::string overrides;
  if (c.contains("overrides") && c["overrides"].is_array())
    for (const auto& o : c["overrides"])
      if (o.is_string()) overrides += " '" + o.get<std::string>() + "'";
  return "phaselab run " + c.value("file", std::string("CONFIG.toml")) + overrides + " --shard " +
         std::to_string(s.spec.index) + "/" + std::to_string(s.spec.count) + " --out " +
         (dir.empty() ? std::string(".") : dir) + (resume ? " --resume" : "");
}

// Labels of points, the first few and a count.
std::string name_points(const std::vector<const Point*>& pts) {
  std::string s;
  for (size_t i = 0; i < pts.size() && i < 8; ++i) s += std::string(i ? "; " : "") + pts[i]->label;
  if (pts.size() > 8) s += "; and " + std::to_string(pts.size() - 8) + " more";
  return s;
}

struct Lines {
  std::vector<std::pair<uint64_t, std::string>> lines;  // (point index, CSV line)
};

// Reads one CSV file of a shard, checks its header and that every row belongs to one of the
// shard's points; appends (index, line). `seen` (results and failures) receives the points.
bool read_table(const std::string& path, const Row& header, const KeyLookup& lookup, size_t nkey,
                bool must_exist, Lines* out, std::set<uint64_t>* seen, std::string* error) {
  std::string text, why;
  if (!read_file(path, &text, &why)) {
    if (!must_exist && errno == ENOENT) return true;
    *error = "cannot read " + path + ": " + why;
    return false;
  }
  std::vector<Row> recs;
  if (!parse_csv(text, &recs)) {
    *error = path + " is not valid CSV (unterminated quote)";
    return false;
  }
  if (recs.empty()) return true;
  if (recs[0] != header) {
    *error = path + " has columns (" + csv_line(recs[0]) + "), expected (" + csv_line(header) + ")";
    return false;
  }
  for (size_t r = 1; r < recs.size(); ++r) {
    if (recs[r].size() != header.size()) {
      *error = path + " record " + std::to_string(r + 1) + " has " +
               std::to_string(recs[r].size()) + " fields, expected " +
               std::to_string(header.size());
      return false;
    }
    const Row key(recs[r].begin(), recs[r].begin() + long(nkey));
    uint64_t index = 0;
    if (!lookup(key, &index)) {
      *error = path + " record " + std::to_string(r + 1) + " (" + csv_line(key) +
               ") is not a point of this shard";
      return false;
    }
    if (seen) seen->insert(index);
    out->lines.push_back({index, csv_line(recs[r])});
  }
  return true;
}

bool write_table(const std::string& path, const Row& header, Lines* t, std::string* error) {
  // Stable: the rows of one point keep their emission order (they all come from one shard).
  std::stable_sort(t->lines.begin(), t->lines.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string text = csv_line(header) + "\n";
  for (const auto& l : t->lines) text += l.second + "\n";
  std::string why;
  if (!write_file_atomic(path, text, &why)) {
    *error = "cannot write " + path + ": " + why;
    return false;
  }
  return true;
}

// `phaselab merge` in stages: read and check the shards' records (one run, every shard once,
// all finished), gather their tables by point, write the merged folder (tables, the plugin's
// summaries and figures, run.json) and the closing lines. Each stage returns 0 to go on or the
// exit status (a refusal writes nothing).
class Merge {
 public:
  explicit Merge(const MergeOptions& opt) : opt_(opt) {}

  int go() {
    out_ = opt_.out;
    while (out_.size() > 1 && out_.back() == '/') out_.pop_back();
    if (int rc = read_shards()) return rc;
    if (int rc = check_one_run()) return rc;
    if (int rc = check_complete()) return rc;
    if (int rc = gather()) return rc;
    if (int rc = write_tables()) return rc;
    const int code = finish();
    if (!write_file_atomic(out_ + "/run.json", json_text(record(code), {"shard", "counts"}), &why_))
      return fail_write("cannot write " + out_ + "/run.json: " + why_);
    print_summary();
    return code;
  }

 private:
  int read_shards() {
    for (std::string dir : opt_.shards) {
      while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
      Shard s;
      s.dir = dir;
      std::string text;
      if (!read_file(dir + "/run.json", &text, &why_))
        return fail(dir + " is not a shard folder: cannot read run.json: " + why_);
      try {
        s.rec = json::parse(text);
        s.ordered = ordered_json::parse(text);
      } catch (const std::exception& e) {
        return fail(dir + "/run.json is not valid JSON: " + e.what());
      }
      if (!s.rec.is_object() || !s.rec.contains("shard") || !s.rec["shard"].is_object())
        return fail(dir + " is not a shard (its run did not use --shard)");
      const json& sh = s.rec["shard"];
      for (const char* k : {"index", "count", "points_in_run"})
        if (!sh.contains(k) || !sh[k].is_number_unsigned())
          return fail(dir + "/run.json: shard." + k + " must be a whole number >= 0, got " +
                      (sh.contains(k) ? short_json(sh[k]) : std::string("nothing")));
      s.spec.index = sh["index"].get<uint64_t>();
      s.spec.count = sh["count"].get<uint64_t>();
      if (s.spec.count > kMaxPoints)
        return fail(dir + "/run.json: shard.count " + std::to_string(s.spec.count) +
                    " is more than the most points a run may have (" + std::to_string(kMaxPoints) +
                    ")");
      if (s.spec.count == 0 || s.spec.index >= s.spec.count)
        return fail(dir + "/run.json: shard " + std::to_string(s.spec.index) + " of " +
                    std::to_string(s.spec.count) + " is not a shard I of N with 0 <= I < N");
      if (!s.rec.contains("config") || !s.rec["config"].is_object())
        return fail(dir + "/run.json has no config object");
      shards_.push_back(std::move(s));
    }
    if (shards_.empty()) return fail("no shard folders given");
    return 0;
  }

  // Same config, versions and kernels; each shard once.
  int check_one_run() {
    const Shard& ref = shards_[0];
    for (const Shard& s : shards_) {
      const std::string d = identity_diff(ref.rec, s.rec);
      if (!d.empty())
        return fail(s.dir + " is not part of the same run as " + ref.dir + ": they differ in " + d);
    }
    for (const Shard& s : shards_)
      if (s.rec.value("git_commit", std::string()) != ref.rec.value("git_commit", std::string()))
        std::fprintf(stderr, "phaselab merge: warning: %s was run by git commit %s, %s by %s\n",
                     s.dir.c_str(), s.rec.value("git_commit", std::string()).c_str(),
                     ref.dir.c_str(), ref.rec.value("git_commit", std::string()).c_str());
    n_ = ref.spec.count;
    for (const Shard& s : shards_) {
      auto ins = by_index_.insert({s.spec.index, &s});
      if (!ins.second)
        return fail(s.dir + " and " + ins.first->second->dir + " are both shard " +
                    std::to_string(s.spec.index) + " of " + std::to_string(n_) +
                    " (give each shard once)");
    }
    return 0;
  }

  // The config and its points; every shard present and finished.
  int check_complete() {
    const Shard& ref = shards_[0];
    if (!load_recorded_config(ref.rec, &plugin_, &cfg_, &why_)) return fail(ref.dir + ": " + why_);
    if (cfg_.search.on) return check_complete_search();
    all_ = enumerate_points(cfg_, plugin_);
    costs_ = point_costs(all_, plugin_);
    if (uint64_t(all_.size()) != ref.rec["shard"].value("points_in_run", uint64_t(0)))
      return fail("the recorded config has " + std::to_string(all_.size()) +
                  " points, the shards say " +
                  std::to_string(ref.rec["shard"].value("points_in_run", uint64_t(0))));
    std::string missing;
    std::vector<const Point*> pts;
    const std::vector<uint64_t> shard = shard_of_points(all_.size(), n_, costs_);
    for (uint64_t i = 0; i < n_; ++i) {
      if (by_index_.count(i)) continue;
      missing += (missing.empty() ? "" : ", ") + std::to_string(i);
      for (size_t j = 0; j < all_.size(); ++j)
        if (shard[j] == i) pts.push_back(&all_[j]);
    }
    if (!missing.empty() && opt_.partial) {  // their points are reported missing
      for (const Point* pt : pts) missing_points_.insert(pt->index);
      for (uint64_t i = 0; i < n_; ++i)
        if (!by_index_.count(i)) missing_shards_.push_back(i);
    } else if (!missing.empty()) {
      Shard hint = ref;
      hint.spec = ShardSpec{std::stoull(missing.substr(0, missing.find(','))), n_, ""};
      return fail("missing shard" +
                  std::string(missing.find(',') == std::string::npos ? " " : "s ") + missing +
                  " of " + std::to_string(n_) + " (" + std::to_string(pts.size()) +
                  " points: " + name_points(pts) + "); run each with e.g. " +
                  shard_command(hint, false) + " (or merge what has finished with --partial)");
    }
    return check_finished();
  }

  // [search]: shards hold whole searches (dealt as `run --shard` deals them); every shard given.
  int check_complete_search() {
    const Shard& ref = shards_[0];
    if (opt_.partial)
      return fail(
          "--partial does not merge [search] runs yet: finish every shard (its --resume), "
          "then merge");
    plan_ = std::make_unique<SearchPlan>(cfg_, plugin_);
    if (plan_->size() != ref.rec["shard"].value("points_in_run", uint64_t(0)))
      return fail("the recorded config has " + std::to_string(plan_->size()) +
                  " searches, the shards say " +
                  std::to_string(ref.rec["shard"].value("points_in_run", uint64_t(0))));
    search_shard_ = search_shards(*plan_, plugin_, n_);
    std::string missing;
    for (uint64_t i = 0; i < n_; ++i)
      if (!by_index_.count(i)) missing += (missing.empty() ? "" : ", ") + std::to_string(i);
    if (!missing.empty()) {
      Shard hint = ref;
      hint.spec = ShardSpec{std::stoull(missing.substr(0, missing.find(','))), n_, ""};
      return fail("missing shard" +
                  std::string(missing.find(',') == std::string::npos ? " " : "s ") + missing +
                  " of " + std::to_string(n_) + "; run each with e.g. " +
                  shard_command(hint, false));
    }
    return check_finished();
  }

  int check_finished() {
    for (const Shard& s : shards_) {
      const std::string st = s.rec.value("status", std::string());
      if (st == "ok" || st == "failed") continue;
      if (opt_.partial) {  // its journaled points are merged, the rest reported missing
        unfinished_.insert(s.spec.index);
        continue;
      }
      const json& c = s.rec["counts"];
      return fail(s.dir + " is unfinished (status " + driver::quoted(st) + ", " +
                  std::to_string(c.value("ok", 0) + c.value("done_before", 0)) + " of " +
                  std::to_string(c.value("points", 0)) + " points done); finish it with: " +
                  shard_command(s, true) + " (or merge what has finished with --partial)");
    }
    return 0;
  }

  // Every shard's rows and point records, checked against the shard's points.
  int gather() {
    const pl_plugin& p = plugin_.entry;
    const LeadingColumns lead = leading_columns(cfg_, plugin_.param_names);
    const Row& key_header = lead.keys;
    headers_.clear();
    for (uint32_t t = 0; t < p.num_tables; ++t) headers_.push_back(lead.header(p.tables[t]));
    key_header_ = key_header;
    failure_header_ = key_header;
    failure_header_.push_back("error");
    journal_ = Lines{};
    all_journaled_ = true;
    tables_.resize(p.num_tables);
    point_recs_.clear();
    for (const Shard& s : shards_)
      if (int rc = gather_shard(s, key_header.size())) return rc;
    return 0;
  }

  // Every journaled point once, and its rows once: journal.csv lists a point after all its rows
  // are written, and run.json records how many rows each point wrote. A point listed twice, or
  // rows removed or repeated since (by hand, or by a copy gone wrong), would merge into tables
  // that look whole and are not. Where run.json has no row count (a point done before a --resume
  // by an older phaselab), a row repeated word for word is taken as a copy.
  int check_rows(const Shard& s, size_t journal_from, const std::vector<size_t>& table_from,
                 const std::set<uint64_t>& done) {
    const std::string again =
        "; remove " + s.dir + " and run the shard again: " + shard_command(s, false);
    std::map<uint64_t, size_t> listed, rows;
    for (size_t l = journal_from; l < journal_.lines.size(); ++l)
      if (++listed[journal_.lines[l].first] == 2)
        return fail(s.dir + "/journal.csv lists point " + all_[journal_.lines[l].first].label +
                    " twice (the file was changed by something other than phaselab)" + again);
    std::map<uint64_t, std::string> repeated;  // point -> "TABLE.csv: LINE"
    for (size_t t = 0; t < tables_.size(); ++t) {
      std::map<uint64_t, std::set<std::string>> seen;
      for (size_t l = table_from[t]; l < tables_[t].lines.size(); ++l) {
        const auto& [i, line] = tables_[t].lines[l];
        ++rows[i];
        if (!seen[i].insert(line).second && !repeated.count(i))
          repeated[i] = std::string(plugin_.entry.tables[t].name) + ".csv: " + line;
      }
    }
    std::map<uint64_t, size_t> recorded;  // rows written, from run.json's point records
    if (s.rec.contains("points") && s.rec["points"].is_array())
      for (const json& pr : s.rec["points"]) {
        if (!pr.is_object() || !pr.contains("index") || !pr["index"].is_number_unsigned() ||
            !pr.contains("rows") || !pr["rows"].is_number_unsigned())
          continue;
        const std::string st = pr.value("status", std::string());
        const size_t want = pr["rows"].get<size_t>();
        if (st == "ok" || (st == "done_before" && want > 0))
          recorded[pr["index"].get<uint64_t>()] = want;
      }
    std::string tables;
    for (uint32_t t = 0; t < plugin_.entry.num_tables; ++t)
      tables += std::string(t ? ", " : "") + plugin_.entry.tables[t].name + ".csv";
    for (uint64_t i : done) {
      const size_t have = rows.count(i) ? rows.at(i) : 0;
      if (recorded.count(i) && have != recorded.at(i))
        return fail(
            s.dir + ": point " + all_[i].label + " wrote " + std::to_string(recorded.at(i)) +
            " rows (run.json), its tables (" + tables + ") hold " + std::to_string(have) +
            (have < recorded.at(i) ? " (rows were removed)" : " (rows were added)") + again);
      if (!recorded.count(i) && repeated.count(i))
        return fail(s.dir + " holds a row of point " + all_[i].label + " twice (" + repeated.at(i) +
                    ")" + again);
    }
    return 0;
  }

  int gather_shard(const Shard& s, size_t nkey) {
    const pl_plugin& p = plugin_.entry;
    const size_t journal_from = journal_.lines.size();
    std::vector<size_t> table_from;
    for (const Lines& t : tables_) table_from.push_back(t.lines.size());
    std::unordered_map<std::string, uint64_t> key_index;
    const std::vector<Point> mine =
        plan_ ? std::vector<Point>{} : shard_points(all_, s.spec, costs_);
    for (const Point& pt : mine) key_index[pt.key] = pt.index;
    KeyLookup lookup = key_lookup(key_index);
    if (plan_)  // a point of one of this shard's searches
      lookup = [this, &s](const Row& cells, uint64_t* index) {
        uint64_t sid = 0, off = 0;
        if (!plan_->decode(cells, &sid, &off) || search_shard_[size_t(sid)] != s.spec.index)
          return false;
        *index = plan_->index(sid, off);
        return true;
      };
    // journal.csv says which points are done (a point may write no results rows, e.g.
    // copy_theory with num_P = 0); a shard from before the journal: its results.csv rows.
    std::set<uint64_t> done, failed;
    const std::string journal = s.dir + "/journal.csv";
    const bool have_journal = fs::exists(journal);
    all_journaled_ = all_journaled_ && have_journal;
    if (have_journal &&
        !read_table(journal, key_header_, lookup, nkey, true, &journal_, &done, &why_))
      return fail(why_);
    for (uint32_t t = 0; t < p.num_tables; ++t)
      if (!read_table(s.dir + "/" + p.tables[t].name + ".csv", headers_[t], lookup, nkey, t == 0,
                      &tables_[t], t == 0 && !have_journal ? &done : nullptr, &why_))
        return fail(why_);
    if (!read_table(s.dir + "/failures.csv", failure_header_, lookup, nkey, false, &failures_,
                    &failed, &why_))
      return fail(why_);
    std::vector<const Point*> lost;
    for (const Point& pt : mine)
      if (!done.count(pt.index) && !failed.count(pt.index)) lost.push_back(&all_[pt.index]);
    if (!lost.empty() && opt_.partial && unfinished_.count(s.spec.index)) {
      // An unfinished shard: only its journaled points count (as --resume would keep them); rows
      // of a point that was being written when it stopped are left out.
      for (const Point* pt : lost) missing_points_.insert(pt->index);
      for (size_t t = 0; t < tables_.size(); ++t) {
        auto& lines = tables_[t].lines;
        lines.erase(std::remove_if(lines.begin() + long(table_from[t]), lines.end(),
                                   [&](const auto& l) { return !done.count(l.first); }),
                    lines.end());
      }
    } else if (!lost.empty()) {
      return fail(s.dir + " lacks " + std::to_string(lost.size()) + " of its points (" +
                  name_points(lost) + "); finish it with: " + shard_command(s, true) +
                  (opt_.partial ? "" : " (or merge what has finished with --partial)"));
    }
    if (int rc = check_rows(s, journal_from, table_from, done)) return rc;
    if (s.ordered.contains("points"))
      for (const ordered_json& pr : s.ordered["points"]) {
        const uint64_t i = pr.value("index", uint64_t(0));
        if (plan_) {  // a search's points are those its run.json lists: each must have its rows
          const std::string st = pr.value("status", std::string());
          if ((st == "ok" || st == "done_before") ? !done.count(i)
              : st == "failed"                    ? !failed.count(i)
                                                  : true)
            return fail(s.dir + " lacks the rows of its point " + std::to_string(i) + " (" +
                        driver::quoted(st) +
                        " in its run.json); finish it with: " + shard_command(s, true));
        } else if (i >= all_.size()) {
          continue;
        }
        point_recs_[i] = pr;
        point_recs_[i]["shard"] = s.spec.index;
        if (unfinished_.count(s.spec.index))  // its run.json predates its points
          point_recs_[i]["status"] = done.count(i) ? "ok" : failed.count(i) ? "failed" : "missing";
      }
    return 0;
  }

  int write_tables() {
    const pl_plugin& p = plugin_.entry;
    std::error_code ec;
    fs::create_directories(out_, ec);
    if (!fs::is_directory(out_))
      return fail("cannot create " + out_ + ": " + (ec ? ec.message() : "not a directory"));
    // run.json says "merging" until the merge is done: a merge that was interrupted (or ran out
    // of disk) is redone into its own folder; a finished one, or any other run, is kept.
    json prev;
    std::string why;
    const bool have_rec = read_run_record(out_, &prev, &why);
    // A partial merge is completed by merging again into the same folder.
    const bool redo = have_rec && (prev.value("status", json()) == json("merging") ||
                                   prev.value("status", json()) == json("partial"));
    if (!redo && (have_rec || fs::exists(out_ + "/results.csv")))
      return fail(out_ +
                  " already holds a run (results.csv); merge into another folder or remove it");
    if (redo) {  // what the last attempt wrote and this one may not write again
      std::fprintf(stderr, "phaselab merge: %s holds %s: merging again\n", out_.c_str(),
                   prev.value("status", json()) == json("partial") ? "a partial merge"
                                                                   : "an unfinished merge");
      fs::remove(out_ + "/failures.csv", ec);
      fs::remove(out_ + "/journal.csv", ec);
    }
    ordered_json start = shards_[0].ordered;
    start.erase("shard");
    start["command"] = opt_.argv;
    start["status"] = "merging";
    start["out"] = out_;
    if (!write_file_atomic(out_ + "/run.json", json_text(start, {"shard", "counts"}), &why_))
      return fail_write("cannot write " + out_ + "/run.json: " + why_);
    for (uint32_t t = 0; t < p.num_tables; ++t)
      if (!write_table(out_ + "/" + p.tables[t].name + ".csv", headers_[t], &tables_[t], &why_))
        return fail_write(why_ + "; free space and merge again (the folder is redone)");
    if (!failures_.lines.empty() &&
        !write_table(out_ + "/failures.csv", failure_header_, &failures_, &why_))
      return fail_write(why_ + "; free space and merge again (the folder is redone)");
    // The merged journal, so that --resume on the merged folder sees every point done.
    if (all_journaled_ && !write_table(out_ + "/journal.csv", key_header_, &journal_, &why_))
      return fail_write(why_ + "; free space and merge again (the folder is redone)");
    return 0;
  }

  // The plugin's summaries and figures, once, from the merged files; the exit status.
  int finish() {
    const std::string target = shards_[0].rec.value("kernel_target", std::string());
    pl_kernel_table kt;
    select_kernel_table(check_target(target, &why_) ? target : "", &kt);
    Progress progress(0, opt_.quiet, [] { return 0.0; });
    int code = failures_.lines.empty() ? kExitOk : kExitFailed;
    bool have_tool = true;
    // Figures of a partial merge say so in their titles.
    const std::string note =
        missing_points_.empty()
            ? ""
            : "partial: " + std::to_string(all_.size() - missing_points_.size()) + " of " +
                  std::to_string(all_.size()) + " points";
    if (!finish_run(cfg_, plugin_, kt, out_, 1, &progress, &figs_, &tool_, &have_tool, note))
      code = kExitFailed;
    std::string search_tool;
    if (plan_ && !write_search_outputs(out_, cfg_, plugin_, true, &figs_, &search_tool, &why_)) {
      progress.warn("phaselab merge: error: " + why_);
      code = kExitWrite;
    }
    if (plan_ && (tool_.empty() || !have_tool)) {
      tool_ = search_tool;
      have_tool = search_tool.rfind("gnuplot", 0) == 0;
    }
    if (!figs_.empty() && !have_tool) progress.warn("phaselab merge: no figures drawn: " + tool_);
    for (const auto& f : figs_)
      if (have_tool && f.png.empty() && f.note.rfind("no rows to plot", 0) != 0 &&
          f.note.find("excludes this run") == std::string::npos)
        progress.warn("phaselab merge: figure " + f.name + " not drawn: " + f.note);
    for (const auto& f : figs_)
      if (!f.also_note.empty()) {
        progress.warn("phaselab merge: figure " + f.name + " drawn as a PNG only: " + f.also_note);
        if (f.also_note.find("cannot write") != std::string::npos) code = kExitWrite;
      }
    return code;
  }

  // run.json: the first shard's record, made to describe the whole run.
  ordered_json record(int code) {
    ordered_json r = shards_[0].ordered;
    r.erase("shard");
    r["command"] = opt_.argv;
    r["status"] = !missing_points_.empty() ? "partial" : code == kExitOk ? "ok" : "failed";
    r["exit_status"] = code;
    r["out"] = out_;
    r["config"]["run"]["out"] = out_;
    std::string start = shards_[0].rec.value("start_time", std::string()), end;
    double cpu_seconds = 0;
    ordered_json parts = ordered_json::array();
    std::set<std::string> cpus;
    for (const auto& kv : by_index_) {
      const Shard& s = *kv.second;
      const std::string st0 = s.rec.value("start_time", std::string()),
                        st1 = s.rec.value("end_time", std::string());
      if (!st0.empty() && st0 < start) start = st0;
      if (st1 > end) end = st1;
      cpus.insert(s.rec.value("cpu", std::string()));
      parts.push_back({{"index", s.spec.index},
                       {"dir", s.dir},
                       {"status", s.rec.value("status", std::string())},
                       {"cpu", s.rec.value("cpu", std::string())},
                       {"threads", s.rec.value("threads", 0)},
                       {"start_time", st0},
                       {"end_time", st1},
                       {"wall_seconds", s.rec.value("wall_seconds", 0.0)}});
    }
    ordered_json points = ordered_json::array();
    if (!missing_points_.empty())  // the missing shards' points get their records first
      for (uint64_t i : missing_points_)
        if (!point_recs_.count(i)) {
          ordered_json o = {{"index", i}};
          for (const auto& a : cfg_.sweep)
            o[a.key] = param_json<ordered_json>(all_[i].params[a.param]);
          o["seed"] = all_[i].seed;
          o["status"] = "missing";
          point_recs_[i] = o;
        }
    for (const auto& [index, pr] : point_recs_) {
      points.push_back(pr);
      cpu_seconds += pr.value("seconds", 0.0);
      const std::string s = pr.value("status", std::string());
      ok_ += s == "ok" || s == "done_before";
      failed_ += s == "failed";
    }
    r["start_time"] = start;
    r["end_time"] = utc_now();
    r["cpu"] = cpus.size() == 1 ? *cpus.begin() : std::string("several (see merged_from)");
    r["merged_from"] = {
        {"shards", n_},
        {"last_shard_end_time", end},
        {"point_seconds_sum", cpu_seconds},
        {"merge_seconds",
         std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start_).count()},
        {"parts", parts}};
    r["wall_seconds"] = nullptr;  // the shards' wall times and threads are in merged_from.parts
    r["threads"] = nullptr;
    const size_t npoints = plan_ ? point_recs_.size() : all_.size();
    if (!missing_points_.empty()) {
      // What a later merge needs: the shards to finish or run, and the points still missing.
      ordered_json missing = ordered_json::array();
      for (uint64_t i : missing_points_) missing.push_back(i);
      r["partial"] = {{"missing_shards", missing_shards_},
                      {"unfinished_shards", unfinished_},
                      {"missing_points", missing},
                      {"finish_with",
                       "run the missing shards and --resume the unfinished ones, then merge again "
                       "into this folder"}};
    }
    r["counts"] = {{"points", npoints}, {"ok", ok_},      {"failed", failed_},
                   {"done_before", 0},  {"cancelled", 0}, {"not_run", npoints - ok_ - failed_}};
    if (plan_)
      r["search"] = {{"searches", plan_->size()},
                     {"evaluations", point_recs_.size()},
                     {"outputs", {"boundaries.csv", "search_points.csv"}}};
    r["figure_tool"] = tool_;
    ordered_json jf = ordered_json::array();
    for (const auto& f : figs_) jf.push_back(figure_json<ordered_json>(f));
    r["figures"] = jf;
    r["points"] = points;
    return r;
  }

  void print_summary() const {
    if (!opt_.quiet || failed_) {
      std::fprintf(
          stderr, "phaselab merge: %zu shards, %zu of %zu points ok%s\n", shards_.size(), ok_,
          plan_ ? point_recs_.size() : all_.size(),
          failed_
              ? (", " + std::to_string(failed_) + " failed (see " + out_ + "/failures.csv)").c_str()
              : "");
    }
    if (!missing_points_.empty()) {
      std::string shards;
      for (uint64_t i : missing_shards_) shards += (shards.empty() ? "" : ", ") + std::to_string(i);
      std::string unfinished;
      for (uint64_t i : unfinished_)
        unfinished += (unfinished.empty() ? "" : ", ") + std::to_string(i);
      std::fprintf(stderr,
                   "phaselab merge: PARTIAL: %zu of %zu points are missing (shards not given: "
                   "%s; unfinished: %s); run.json says \"partial\"; finish the shards "
                   "(phaselab status %s prints the commands), then merge again into %s\n",
                   missing_points_.size(), all_.size(), shards.empty() ? "none" : shards.c_str(),
                   unfinished.empty() ? "none" : unfinished.c_str(), out_.c_str(), out_.c_str());
    }
    if (opt_.quiet) return;
    size_t drawn = 0;
    for (const auto& f : figs_) drawn += !f.png.empty();
    std::printf("results: %s/results.csv\nrun record: %s/run.json\n", out_.c_str(), out_.c_str());
    if (drawn) std::printf("figures: %s/figures/ (%zu drawn)\n", out_.c_str(), drawn);
  }

  const MergeOptions& opt_;
  const std::chrono::steady_clock::time_point wall_start_ = std::chrono::steady_clock::now();
  std::string out_, why_;
  std::vector<Shard> shards_;
  std::map<uint64_t, const Shard*> by_index_;
  uint64_t n_ = 0;  // shards in the run
  Plugin plugin_;
  RunConfig cfg_;
  std::vector<Point> all_;
  std::vector<double> costs_;
  std::vector<Row> headers_;
  Row key_header_, failure_header_;
  std::vector<Lines> tables_;
  Lines failures_, journal_;
  bool all_journaled_ = true;  // every shard has a journal.csv (not one from before it)
  std::map<uint64_t, ordered_json> point_recs_;  // by point index
  std::set<uint64_t> missing_points_;            // --partial: not merged (missing, unfinished)
  std::vector<uint64_t> missing_shards_;         // --partial: shards not given
  std::set<uint64_t> unfinished_;                // --partial: shards merged unfinished
  std::unique_ptr<SearchPlan> plan_;             // [search]
  std::vector<uint64_t> search_shard_;           // [search]: the shard of each search
  std::vector<FigureResult> figs_;
  std::string tool_;
  size_t ok_ = 0, failed_ = 0;
};

}  // namespace

int execute_merge(const MergeOptions& opt) {
  try {
    return Merge(opt).go();
  } catch (const nlohmann::json::exception& e) {
    // A hand-edited run.json whose field has the wrong type (a string where a number goes).
    return fail(std::string("a shard's run.json has a field of the wrong type (was it edited?): ") +
                e.what());
  }
}

// The config recorded in a run.json, resolved against the plugin found on the search path.
bool load_recorded_config(const nlohmann::json& rec, Plugin* plugin, RunConfig* cfg,
                          std::string* error) {
  const nlohmann::json& c = rec["config"];
  const std::string file = c.value("file", std::string("run.json")),
                    text = c.value("toml", std::string());
  toml::table t;
  try {
    t = toml::parse(text, file);
  } catch (const toml::parse_error& e) {
    *error = "the config recorded in run.json does not parse: " + std::string(e.description());
    return false;
  }
  std::vector<std::string> errors;
  // The command-line overrides the run was started with, applied again.
  std::vector<std::string> overrides;
  if (c.contains("overrides") && c["overrides"].is_array())
    for (const auto& o : c["overrides"])
      if (o.is_string()) overrides.push_back(o.get<std::string>());
  if (!apply_overrides(overrides, &t, &errors)) {
    *error = "the overrides recorded in run.json do not apply: " + errors[0];
    return false;
  }
  cfg->overrides = overrides;
  std::string name, at;
  if (!config_plugin_name(t, file, &name, &at, &errors)) {
    *error = errors.empty() ? "no plugin in the recorded config" : errors[0];
    return false;
  }
  const PluginFile* found = nullptr;
  const auto files = discover_plugins(plugin_search_path());
  for (const auto& f : files)
    if (f.name == name) found = &f;
  if (!found) {
    *error = "plugin " + driver::quoted(name) + " not found (set PHASELAB_PLUGIN_PATH)";
    return false;
  }
  std::string why;
  if (!load_plugin(*found, plugin, &why)) {
    *error = "plugin " + driver::quoted(name) + ": " + why;
    return false;
  }
  const std::string have = plugin->entry.version ? plugin->entry.version : "";
  const std::string want = rec["plugin"].value("version", std::string());
  if (have != want) {
    *error = "the shards ran plugin " + name + " " + want + ", this phaselab finds " + have + " (" +
             found->path + ")";
    return false;
  }
  cfg->text = text;
  if (!resolve_config(t, file, *plugin, cfg, &errors)) {
    *error = errors.empty() ? "the recorded config does not resolve" : errors[0];
    return false;
  }
  return true;
}

}  // namespace pl::driver
