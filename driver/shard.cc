// SPDX-License-Identifier: Apache-2.0
#include "driver/shard.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "driver/limits.hpp"

namespace pl::driver {
namespace {

// A decimal integer >= 0 (no sign, no spaces); false otherwise.
bool parse_u64(const std::string& s, uint64_t* v) {
  if (s.empty() || s.size() > 18) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  *v = std::strtoull(s.c_str(), nullptr, 10);
  return true;
}

bool env_u64(const char* (*env)(const char*), const char* name, uint64_t* v, bool* present,
             std::string* error) {
  const char* s = env(name);
  *present = s != nullptr && *s;
  if (!*present) return true;
  if (!parse_u64(s, v)) {
    *error = std::string(name) + "=" + s + " is not a non-negative integer";
    return false;
  }
  return true;
}

}  // namespace

bool parse_shard(const std::string& text, const char* (*env)(const char*), ShardSpec* out,
                 std::string* error) {
  *out = ShardSpec{};
  const size_t slash = text.find('/');
  const std::string head = text.substr(0, slash);
  const std::string tail = slash == std::string::npos ? "" : text.substr(slash + 1);
  uint64_t given_n = 0;
  if (slash != std::string::npos && (!parse_u64(tail, &given_n) || given_n == 0)) {
    *error = "--shard: N in " + text + " must be an integer >= 1";
    return false;
  }
  if (given_n > kMaxPoints) {
    *error = "--shard " + text + ": N must be at most " + std::to_string(kMaxPoints) +
             " (the most points a run may have; more shards than points are empty)";
    return false;
  }
  if (head != "auto") {
    uint64_t i = 0;
    if (slash == std::string::npos || !parse_u64(head, &i)) {
      *error = "--shard must be I/N (0 <= I < N), auto or auto/N, got " + text;
      return false;
    }
    if (i >= given_n) {
      *error = "--shard " + text + ": I must be in [0, " + std::to_string(given_n) +
               ") (shards are numbered from 0)";
      return false;
    }
    out->index = i;
    out->count = given_n;
    out->source = "--shard " + text;
    return true;
  }
  // The scheduler's environment. Index: 0-based after subtracting the first index where the
  // scheduler gives it. Count: from the scheduler, else auto/N, else PHASELAB_SHARD_COUNT.
  struct Source {
    const char* index;
    const char* min;    // first index of the array (nullptr: fixed base)
    uint64_t base;      // subtracted when min is nullptr
    const char* count;  // nullptr: the scheduler does not export it
  };
  static const Source kSources[] = {
      {"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_MIN", 0, "SLURM_ARRAY_TASK_COUNT"},
      {"SGE_TASK_ID", "SGE_TASK_FIRST", 1, nullptr},  // Grid Engine (-t FIRST-LAST)
      {"PBS_ARRAY_INDEX", nullptr, 0, nullptr},       // PBS Pro (qsub -J 0-(N-1))
      {"PBS_ARRAYID", nullptr, 0, nullptr},           // Torque (qsub -t 0-(N-1))
      {"LSB_JOBINDEX", nullptr, 1, nullptr},          // LSF (bsub -J "x[1-N]")
      {"JOB_COMPLETION_INDEX", nullptr, 0, nullptr},  // Kubernetes indexed jobs
      {"PARALLEL_SEQ", nullptr, 1, nullptr},          // GNU parallel (1-based)
  };
  for (const Source& src : kSources) {
    uint64_t idx = 0, first = src.base, n = 0;
    bool have = false, have_min = false, have_n = false;
    if (!env_u64(env, src.index, &idx, &have, error)) return false;
    if (!have) continue;
    if (src.min && !env_u64(env, src.min, &first, &have_min, error)) return false;
    if (src.min && !have_min) first = src.base;
    if (src.count && !env_u64(env, src.count, &n, &have_n, error)) return false;
    std::string count_from = have_n ? std::string(src.count) : "";
    if (have_n && (n == 0 || n > kMaxPoints)) {
      *error = "--shard auto: " + count_from + "=" + std::to_string(n) + " must be in [1, " +
               std::to_string(kMaxPoints) + "] (the number of tasks in the array)";
      return false;
    }
    if (!std::string(src.index).compare(0, 5, "SLURM")) {
      const char* step = env("SLURM_ARRAY_TASK_STEP");
      if (step && *step && std::string(step) != "1") {
        *error = "--shard auto: SLURM_ARRAY_TASK_STEP=" + std::string(step) +
                 ": the array's indices must be consecutive (--array=0-" +
                 "(N-1)); pass --shard I/N to number the shards yourself";
        return false;
      }
    }
    if (given_n) {
      if (have_n && n != given_n) {
        *error = "--shard " + text + ": " + count_from + "=" + std::to_string(n) +
                 " says the array has " + std::to_string(n) + " tasks";
        return false;
      }
      n = given_n;
      count_from = "--shard " + text;
      have_n = true;
    }
    if (!have_n) {
      bool have_env = false;
      if (!env_u64(env, "PHASELAB_SHARD_COUNT", &n, &have_env, error)) return false;
      if (have_env && n > kMaxPoints) {
        *error = "--shard auto: PHASELAB_SHARD_COUNT=" + std::to_string(n) + " must be at most " +
                 std::to_string(kMaxPoints) + " (the most points a run may have)";
        return false;
      }
      if (!have_env || n == 0) {
        *error = std::string("--shard auto: ") + src.index +
                 " gives the index but this scheduler does not export the number of tasks: "
                 "pass --shard auto/N or set PHASELAB_SHARD_COUNT=N";
        return false;
      }
      count_from = "PHASELAB_SHARD_COUNT";
    }
    if (idx < first || idx - first >= n) {
      *error = "--shard auto: " + std::string(src.index) + "=" + std::to_string(idx) +
               " is outside the array [" + std::to_string(first) + ", " +
               std::to_string(first + n - 1) + "] (" + std::to_string(n) + " tasks from " +
               count_from + ")";
      return false;
    }
    out->index = idx - first;
    out->count = n;
    out->source = std::string(src.index) + "=" + std::to_string(idx) + ", " + count_from + "=" +
                  std::to_string(n);
    return true;
  }
  *error =
      "--shard auto: no array index in the environment (SLURM_ARRAY_TASK_ID, SGE_TASK_ID, "
      "PBS_ARRAY_INDEX, PBS_ARRAYID, LSB_JOBINDEX, JOB_COMPLETION_INDEX, PARALLEL_SEQ); pass "
      "--shard I/N";
  return false;
}

std::string shard_dir_name(const ShardSpec& s) {
  const size_t width = std::to_string(s.count > 0 ? s.count - 1 : 0).size();
  std::string i = std::to_string(s.index);
  if (i.size() < width) i.insert(0, width - i.size(), '0');
  return "shard-" + i + "-of-" + std::to_string(s.count);
}

std::vector<double> point_costs(const std::vector<Point>& all, const Plugin& plugin) {
  pl_point_cost_fn fn = nullptr;
  if (void* h = ::dlopen(plugin.path.c_str(), RTLD_LAZY | RTLD_NOLOAD)) {
    fn = reinterpret_cast<pl_point_cost_fn>(::dlsym(h, PL_POINT_COST_SYMBOL));
    ::dlclose(h);
  }
  if (!fn) return {};
  std::vector<double> costs(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    const auto v = to_pl_values(all[i].params);
    const double c = fn(v.data(), uint32_t(v.size()));
    costs[i] = std::isfinite(c) && c > 0 ? c : 0.0;  // a nonsense estimate counts as free
  }
  return costs;
}

std::vector<uint64_t> shard_of_points(uint64_t num_points, uint64_t count,
                                      const std::vector<double>& costs) {
  // Deal the points in a fixed pseudo-random order (sorted by a 64-bit mix of the index):
  // round-robin over that order keeps the sizes within one of each other, and unlike
  // round-robin in run order it cannot alias with the sweep grid (with 12 shards over a
  // K x 4 N x 3 seeds grid, round-robin would give each shard a single N).
  auto mix = [](uint64_t z) {  // splitmix64's finaliser
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  std::vector<std::pair<uint64_t, uint64_t>> order(num_points);
  for (uint64_t i = 0; i < num_points; ++i) order[i] = {mix(i), i};
  std::sort(order.begin(), order.end());
  std::vector<uint64_t> shard(num_points);
  if (costs.size() != num_points) {
    for (uint64_t j = 0; j < num_points; ++j) shard[order[j].second] = j % count;
    return shard;
  }
  // Longest processing time first: within 4/3 of the best split of the total cost.
  std::stable_sort(order.begin(), order.end(),
                   [&](const auto& a, const auto& b) { return costs[a.second] > costs[b.second]; });
  std::vector<double> load(count, 0.0);
  std::vector<uint64_t> size(count, 0);
  for (const auto& o : order) {
    uint64_t best = 0;
    for (uint64_t k = 1; k < count; ++k)
      if (load[k] < load[best] || (load[k] == load[best] && size[k] < size[best])) best = k;
    shard[o.second] = best;
    load[best] += costs[o.second];
    ++size[best];
  }
  return shard;
}

std::vector<Point> shard_points(const std::vector<Point>& all, const ShardSpec& s,
                                const std::vector<double>& costs) {
  if (s.count == 0) return all;
  const std::vector<uint64_t> shard = shard_of_points(all.size(), s.count, costs);
  std::vector<Point> out;
  for (size_t j = 0; j < all.size(); ++j)
    if (shard[j] == s.index) out.push_back(all[j]);
  return out;
}

}  // namespace pl::driver
