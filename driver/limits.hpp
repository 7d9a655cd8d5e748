// SPDX-License-Identifier: Apache-2.0
// Up-front limits on what phaselab accepts, checked before any work (exit 2): the config file
// (a regular file, at most kMaxConfigBytes), its text before the TOML library sees it (dotted
// key depth and bracket nesting, which would otherwise recurse deeply inside the parser; NUL
// bytes), key and string lengths, the number of sweep points, and the memory a run would need
// against the machine's (refused unless --force).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pl::driver {

struct Plugin;
struct RunConfig;

constexpr uint64_t kMaxConfigBytes = 1 << 20;  // 1 MiB: the largest shipped config is ~4 KB
constexpr size_t kMaxDottedParts = 16;         // a.b.c... parts of one key
constexpr size_t kMaxNesting = 16;             // [ and { open at once
constexpr size_t kMaxKeyBytes = 128;           // one key (part)
constexpr size_t kMaxStringBytes = 4096;       // one string value
constexpr uint64_t kMaxPoints = 100'000;       // sweep combinations x seeds
constexpr size_t kMaxSuggestBytes = 64;        // did-you-mean only for words this short

// Reads a config file: refuses a missing file, a folder, a FIFO/device/socket and a file
// larger than kMaxConfigBytes without reading more than that. Appends one message on failure.
bool read_config_text(const std::string& file, std::string* text, std::vector<std::string>* errors);

// Scans TOML text (outside strings and comments) for a key with more than kMaxDottedParts
// parts, brackets nested deeper than kMaxNesting and NUL bytes; messages give file:line:col.
bool prescan_toml(const std::string& file, const std::string& text,
                  std::vector<std::string>* errors);

// `s` for a message: whole when short, else its start and its length.
std::string abbreviate(const std::string& s, size_t max = 48);

// Memory: the machine's physical memory in bytes (0 if unknown), and the estimate of a run:
// the largest per-point estimate of the plugin (its optional phaselab_plugin_point_bytes
// export) times the points that run at once, plus the driver's own per-point bookkeeping.
uint64_t machine_memory_bytes();
struct MemoryEstimate {
  uint64_t per_point = 0;  // the largest point's estimate (0: the plugin gives none)
  std::string at;          // that point's label
  uint64_t bookkeeping = 0;
  uint64_t total = 0;
};
MemoryEstimate estimate_memory(const RunConfig& cfg, const Plugin& plugin, int threads);
// The memory this process may use: the smallest of the machine's physical memory, its cgroup's
// limit (v2 memory.max, v1 memory.limit_in_bytes, on the way up to the root) and a Slurm job's
// SLURM_MEM_PER_NODE, or SLURM_MEM_PER_CPU x SLURM_CPUS_ON_NODE (MB); `source` says which.
struct MemoryLimit {
  uint64_t bytes = 0;  // 0: unknown
  std::string source;
};
MemoryLimit memory_limit();
uint64_t cgroup_memory_limit();  // 0: none found
// False with a message when the estimate exceeds 80% of memory_limit().
bool check_memory(const RunConfig& cfg, const Plugin& plugin, int threads, std::string* error);

// "1.5 GB".
std::string format_bytes(uint64_t b);

}  // namespace pl::driver
