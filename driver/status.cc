// SPDX-License-Identifier: Apache-2.0
#include "driver/status.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "driver/config.hpp"
#include "driver/merge.hpp"
#include "driver/plugins.hpp"
#include "driver/progress.hpp"
#include "driver/run.hpp"
#include "driver/shard.hpp"
#include "driver/text.hpp"

namespace pl::driver {
namespace {

using json = nlohmann::json;

// Records of a CSV table (header excluded); 0 when absent.
size_t records(const std::string& path) {
  std::string text, why;
  if (!read_file(path, &text, &why)) return 0;
  std::vector<Row> recs;
  if (!parse_csv(text, &recs) || recs.empty()) return 0;
  return recs.size() - 1;
}

// The lock of a folder: "none", "held" (a live phaselab writes it) or "stale" (left by a process
// that died: nobody holds its flock).
std::string lock_state(const std::string& dir) {
  const std::string path = dir + "/run.lock";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "none";
  std::string state = "held";
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
    state = "stale";
    ::flock(fd, LOCK_UN);
  }
  ::close(fd);
  return state;
}

struct Part {
  std::string dir;
  bool present = false;
  uint64_t index = 0, count = 0;  // shard (count 0: not a shard)
  std::string status;             // run.json's, or "missing"
  std::string lock = "none";
  uint64_t points = 0, done = 0, failed = 0;
  double point_seconds = 0;  // of the points run.json records as finished
  size_t timed = 0;          // points with seconds
  json rec;
};

std::string shard_name(uint64_t i, uint64_t n) { return shard_dir_name(ShardSpec{i, n, ""}); }

}  // namespace

int execute_status(const std::string& out_arg, bool as_json) {
  std::string out = out_arg;
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  std::vector<Part> parts;
  auto read_part = [&](const std::string& dir, Part* p) {
    p->dir = dir;
    std::string text, why;
    if (!read_file(dir + "/run.json", &text, &why)) return false;
    try {
      p->rec = json::parse(text);
      p->present = true;
      p->status = p->rec.value("status", std::string("unknown"));
      if (p->rec.contains("shard") && p->rec["shard"].is_object()) {
        p->index = p->rec["shard"].value("index", uint64_t(0));
        p->count = p->rec["shard"].value("count", uint64_t(0));
      }
      if (p->rec.contains("counts") && p->rec["counts"].is_object())
        p->points = p->rec["counts"].value("points", uint64_t(0));
      if (p->rec.contains("points") && p->rec["points"].is_array())
        for (const json& pt : p->rec["points"]) {
          const std::string st = pt.value("status", std::string());
          if (st == "ok" || st == "failed") {
            p->point_seconds += pt.value("seconds", 0.0);
            ++p->timed;
          }
        }
    } catch (const std::exception&) {
      p->status = "unreadable run.json";
    }
    // journal.csv is appended as each point finishes: it is current while run.json says
    // "running"; failures.csv likewise.
    p->done = records(dir + "/journal.csv");
    p->failed = records(dir + "/failures.csv");
    p->lock = lock_state(dir);
    return true;
  };
  Part single;
  bool is_single = false;    // one folder: a run, or one shard of a run
  std::string parent = out;  // where the shards are
  if (read_part(out, &single)) {
    parts.push_back(single);
    is_single = true;
    if (single.count) {
      const size_t slash = out.find_last_of('/');
      parent = slash == std::string::npos ? "." : out.substr(0, slash);
    }
  } else {
    // A folder of shards: shard-I-of-N subfolders (the count from their names).
    DIR* d = ::opendir(out.c_str());
    if (!d) {
      std::fprintf(stderr, "phaselab status: error: cannot read %s: %s\n", out.c_str(),
                   std::strerror(errno));
      return kExitUsage;
    }
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n.rfind("shard-", 0) == 0) names.push_back(n);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    uint64_t count = 0;
    std::map<uint64_t, Part> by_index;
    for (const auto& n : names) {
      unsigned long long i = 0, c = 0;
      if (std::sscanf(n.c_str(), "shard-%llu-of-%llu", &i, &c) != 2 || c == 0 || i >= c) continue;
      if (count && c != count) {
        std::fprintf(stderr, "phaselab status: error: %s holds shards of %llu and of %llu\n",
                     out.c_str(), (unsigned long long)count, c);
        return kExitUsage;
      }
      count = c;
      Part p;
      if (!read_part(out + "/" + n, &p)) {
        p.dir = out + "/" + n;
        p.status = "no run.json (killed while starting)";
        p.lock = lock_state(p.dir);
      }
      p.index = i;
      p.count = c;
      by_index[i] = p;
    }
    if (!count) {
      std::fprintf(stderr,
                   "phaselab status: error: %s is neither a run folder (run.json) nor a folder "
                   "of shards (shard-I-of-N)\n",
                   out.c_str());
      return kExitUsage;
    }
    for (uint64_t i = 0; i < count; ++i) {
      if (by_index.count(i)) {
        parts.push_back(by_index[i]);
        continue;
      }
      Part m;
      m.dir = out + "/" + shard_name(i, count);
      m.index = i;
      m.count = count;
      m.status = "missing";
      parts.push_back(m);
    }
  }
  // The config (from any run.json), for the points of missing shards and the commands.
  const Part* ref = nullptr;
  for (const Part& p : parts)
    if (p.present) ref = ref ? ref : &p;
  Plugin plugin;
  RunConfig cfg;
  std::string why, config_file = "CONFIG.toml";
  bool have_cfg = false;
  std::vector<Point> all;
  std::vector<double> costs;
  if (ref) {
    config_file = ref->rec["config"].value("file", config_file);
    have_cfg = load_recorded_config(ref->rec, &plugin, &cfg, &why);
    if (have_cfg && !cfg.search.on) {
      all = enumerate_points(cfg, plugin);
      costs = point_costs(all, plugin);
    }
  }
  // Points per shard where run.json does not say (missing shards, killed at start-up).
  if (have_cfg && !cfg.search.on && parts[0].count) {
    const std::vector<uint64_t> shard = shard_of_points(all.size(), parts[0].count, costs);
    for (Part& p : parts)
      if (!p.points) p.points = uint64_t(std::count(shard.begin(), shard.end(), p.index));
  }
  // Seconds per point (or per unit of the plugin's cost estimate) from the finished points.
  double seconds = 0;
  size_t timed = 0;
  for (const Part& p : parts) seconds += p.point_seconds, timed += p.timed;
  const double per_point = timed ? seconds / double(timed) : 0;
  double left_seconds = 0;
  uint64_t total = 0, done = 0, failed = 0;
  for (const Part& p : parts) {
    total += p.points;
    done += p.done;
    failed += p.failed;
    const uint64_t finished = p.done + p.failed;
    left_seconds += per_point * double(p.points > finished ? p.points - finished : 0);
  }
  // What finishes the run: every part that is not done, and (shards) the merge.
  std::vector<std::string> commands;
  std::vector<uint64_t> resubmit;
  for (const Part& p : parts) {
    const bool finished = p.status == "ok" || p.status == "failed";
    if (finished || p.lock == "held") continue;
    if (!p.count) {
      commands.push_back("phaselab run " + config_file + " --out " + out + " --resume");
    } else {
      commands.push_back("phaselab run " + config_file + " --shard " + std::to_string(p.index) +
                         "/" + std::to_string(p.count) + " --out " + parent + " --resume");
      resubmit.push_back(p.index);
    }
  }
  std::string array;
  for (uint64_t i : resubmit) array += (array.empty() ? "" : ",") + std::to_string(i);
  // The same shards as tasks of a Slurm array (sweep.sbatch runs its shard step when Slurm
  // sets SLURM_ARRAY_TASK_ID).
  if (!resubmit.empty())
    commands.push_back("sbatch --array=" + array + " --export=ALL scripts/slurm/sweep.sbatch " +
                       config_file + " " + parent + " " + std::to_string(parts[0].count));
  if (parts[0].count) commands.push_back("phaselab merge " + parent + " " + parent + "/shard-*");

  if (as_json) {
    json j;
    j["out"] = out;
    j["kind"] = !parts[0].count ? "run" : is_single ? "shard" : "shards";
    j["search"] = have_cfg && cfg.search.on;
    j["points"] = total;
    j["done"] = done;
    j["failed"] = failed;
    j["point_seconds"] = seconds;
    j["estimated_seconds_left"] = per_point > 0 ? json(left_seconds) : json(nullptr);
    j["parts"] = json::array();
    for (const Part& p : parts) {
      json o = {{"dir", p.dir},
                {"status", p.status},
                {"lock", p.lock},
                {"points", p.points},
                {"done", p.done},
                {"failed", p.failed},
                {"point_seconds", p.point_seconds}};
      if (p.count) o["shard"] = p.index, o["of"] = p.count;
      j["parts"].push_back(o);
    }
    j["commands"] = commands;
    std::printf("%s\n", j.dump(2).c_str());
    return kExitOk;
  }
  const std::string what = !parts[0].count ? "a run folder"
                           : is_single     ? "shard " + std::to_string(parts[0].index) + " of " +
                                             std::to_string(parts[0].count)
                                       : std::to_string(parts[0].count) + " shards";
  std::printf(
      "%s: %s, %s%llu points: %llu done, %llu failed, %llu left\n", out.c_str(), what.c_str(),
      have_cfg && cfg.search.on ? "a boundary search (points are planned round by round), " : "",
      (unsigned long long)total, (unsigned long long)done, (unsigned long long)failed,
      (unsigned long long)(total > done + failed ? total - done - failed : 0));
  std::printf("%-28s %-34s %-6s %8s %8s %8s %10s\n", "part", "status", "lock", "points", "done",
              "failed", "seconds");
  for (const Part& p : parts) {
    const std::string name = p.count ? shard_name(p.index, p.count) : std::string(".");
    std::string st = p.status;
    if (p.status == "running" && p.lock != "held") st = "running, but no phaselab holds it";
    std::printf("%-28s %-34s %-6s %8llu %8llu %8llu %10.1f\n", name.c_str(), st.c_str(),
                p.lock.c_str(), (unsigned long long)p.points, (unsigned long long)p.done,
                (unsigned long long)p.failed, p.point_seconds);
  }
  if (per_point > 0)
    std::printf("point time so far: %.1f s over %zu finished points; left: about %s of points\n",
                seconds, timed, format_duration(left_seconds).c_str());
  if (!have_cfg && ref) std::printf("(the recorded config could not be loaded: %s)\n", why.c_str());
  if (!commands.empty()) {
    std::printf("to finish:\n");
    for (const auto& c : commands) std::printf("  %s\n", c.c_str());
  }
  return kExitOk;
}

}  // namespace pl::driver
