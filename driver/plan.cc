// SPDX-License-Identifier: Apache-2.0
#include "driver/plan.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "driver/limits.hpp"
#include "driver/shard.hpp"
#include "driver/text.hpp"

namespace pl::driver {
namespace fs = std::filesystem;

namespace {

// Seconds per unit of cost from the finished points recorded in DIR/run.json and
// DIR/shard-*/run.json: sum of seconds / sum of cost over points with both.
struct Calibration {
  double seconds_per_cost = 0;
  size_t points = 0;
};

void add_record(const fs::path& json_path, Calibration* c, double* sec, double* cost) {
  std::ifstream f(json_path);
  if (!f) return;
  const nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
  if (!j.is_object() || !j.contains("points") || !j["points"].is_array()) return;
  for (const auto& p : j["points"]) {
    if (!p.is_object() || p.value("status", std::string()) != "ok") continue;
    const double s = p.value("seconds", 0.0), k = p.value("cost", 0.0);
    if (s > 0 && k > 0) *sec += s, *cost += k, ++c->points;
  }
}

Calibration calibrate(const std::string& dir) {
  Calibration c;
  double sec = 0, cost = 0;
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return c;
  add_record(fs::path(dir) / "run.json", &c, &sec, &cost);
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory() && e.path().filename().string().rfind("shard-", 0) == 0)
      add_record(e.path() / "run.json", &c, &sec, &cost);
  if (cost > 0) c.seconds_per_cost = sec / cost;
  return c;
}

std::string hms(double s) {  // Slurm's --time: D-HH:MM:SS
  const long t = long(std::ceil(std::max(s, 60.0)));
  char b[32];
  if (t >= 86400)
    std::snprintf(b, sizeof b, "%ld-%02ld:%02ld:%02ld", t / 86400, t % 86400 / 3600, t % 3600 / 60,
                  t % 60);
  else
    std::snprintf(b, sizeof b, "%02ld:%02ld:%02ld", t / 3600, t % 3600 / 60, t % 60);
  return b;
}

}  // namespace

int plan_run(const RunConfig& cfg, const Plugin& plugin, const RunOptions& opt) {
  const int threads = opt.threads > 0   ? int(opt.threads)
                      : cfg.threads > 0 ? int(cfg.threads)
                                        : int(std::max(1u, std::thread::hardware_concurrency()));
  const uint64_t n_shards = opt.shard.count ? opt.shard.count : 1;
  if (cfg.search.on) {
    std::printf(
        "%s: a [search] run: its points are planned round by round from what the earlier rounds "
        "found, so --plan cannot price them; %llu searches, dealt whole to %llu shard(s)\n",
        cfg.file.c_str(), (unsigned long long)count_points(cfg), (unsigned long long)n_shards);
    return 0;
  }
  const std::vector<Point> all = enumerate_points(cfg, plugin);
  const std::vector<double> costs = point_costs(all, plugin);
  const std::vector<uint64_t> shard_of = shard_of_points(all.size(), n_shards, costs);
  std::vector<uint64_t> npts(n_shards, 0);
  std::vector<double> cost(n_shards, 0.0);
  double total = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    ++npts[shard_of[i]];
    if (!costs.empty()) cost[shard_of[i]] += costs[i], total += costs[i];
  }
  const MemoryEstimate mem = estimate_memory(cfg, plugin, threads);
  const Calibration cal = calibrate(opt.out);
  std::printf("%s: %zu points (plugin %s %s), %llu shard%s, %d thread%s each\n", cfg.file.c_str(),
              all.size(), cfg.plugin.c_str(), plugin.entry.version ? plugin.entry.version : "",
              (unsigned long long)n_shards, n_shards == 1 ? "" : "s", threads,
              threads == 1 ? "" : "s");
  if (costs.empty())
    std::printf("cost: the plugin exports no estimate; points are dealt by count\n");
  else if (cal.points)
    std::printf(
        "cost: the plugin's estimate, %.4g CPU-s per unit from %zu finished point%s in %s\n",
        cal.seconds_per_cost, cal.points, cal.points == 1 ? "" : "s", opt.out.c_str());
  else
    std::printf(
        "cost: the plugin's estimate in its own units (give --out DIR with finished points of "
        "this config, e.g. one shard's, to turn it into CPU seconds)\n");
  std::printf("%-6s %8s %11s", "shard", "points", "cost share");
  const bool secs = cal.points && !costs.empty();
  if (secs) std::printf(" %12s %12s", "CPU-s", "wall-s");
  std::printf("\n");
  double worst = 0;
  for (uint64_t s = 0; s < n_shards; ++s) {
    std::printf("%-6llu %8llu %10.1f%%", (unsigned long long)s, (unsigned long long)npts[s],
                total > 0 ? 100 * cost[s] / total : 100.0 * double(npts[s]) / double(all.size()));
    if (secs) {
      const double cpu = cost[s] * cal.seconds_per_cost;
      // wall: the shard's points on `threads` threads, no faster than its largest point
      double largest = 0;
      for (size_t i = 0; i < all.size(); ++i)
        if (shard_of[i] == s) largest = std::max(largest, costs[i] * cal.seconds_per_cost);
      const double wall = std::max(cpu / threads, largest);
      worst = std::max(worst, wall);
      std::printf(" %12.0f %12.0f", cpu, wall);
    }
    std::printf("\n");
  }
  if (mem.per_point)
    std::printf("memory: %s per point at most (at %s) x %d at once + %s for the point list = %s\n",
                format_bytes(mem.per_point).c_str(), mem.at.c_str(), threads,
                format_bytes(mem.bookkeeping).c_str(), format_bytes(mem.total).c_str());
  else
    std::printf("memory: the plugin exports no estimate (%s for the point list)\n",
                format_bytes(mem.bookkeeping).c_str());
  // The estimate is the points' data; the process itself (binary, libraries, thread stacks)
  // measured 31-36 MB resident on small runs, so 64 MB are added before the 25% margin.
  const uint64_t process = uint64_t(64) << 20;
  const uint64_t need = mem.total + process;
  const uint64_t mb = (need + need / 4 + (1u << 20) - 1) >> 20;
  std::printf("sbatch: --cpus-per-task=%d --mem=%lluM", threads, (unsigned long long)mb);
  if (secs) std::printf(" --time=%s", hms(1.5 * worst).c_str());
  std::printf("%s\n", secs
                          ? "  (memory: the estimate + 64 MB for the process, +25%; time 1.5x the "
                            "slowest shard)"
                          : "  (memory: the estimate + 64 MB for the process, +25%; --time needs a "
                            "calibration, see above)");
  return 0;
}

}  // namespace pl::driver
