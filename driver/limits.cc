// SPDX-License-Identifier: Apache-2.0
#include "driver/limits.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "driver/config.hpp"
#include "driver/fsio.hpp"
#include "driver/plugins.hpp"
#include "driver/text.hpp"

namespace pl::driver {

std::string abbreviate(const std::string& s, size_t max) {
  if (s.size() <= max) return s;
  return s.substr(0, max) + "... (" + std::to_string(s.size()) + " bytes)";
}

bool read_config_text(const std::string& file, std::string* text,
                      std::vector<std::string>* errors) {
  auto fail = [&](const std::string& why) {
    errors->push_back("phaselab: error: cannot read config file " + quoted(file) + ": " + why);
    return false;
  };
  struct stat st;
  if (::stat(file.c_str(), &st) != 0) return fail(std::strerror(errno));
  if (S_ISDIR(st.st_mode)) return fail("it is a folder, not a TOML file");
  if (!S_ISREG(st.st_mode))
    return fail("not a regular file (a FIFO, device or socket is not read)");
  if (uint64_t(st.st_size) > kMaxConfigBytes)
    return fail("it has " + std::to_string(st.st_size) + " bytes, more than the limit of " +
                std::to_string(kMaxConfigBytes) + " for a config");
  // O_NONBLOCK: a file swapped for a FIFO after the stat still does not block.
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return fail(std::strerror(errno));
  text->clear();
  char buf[65536];
  while (true) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return fail(std::strerror(e));
    }
    if (n == 0) break;
    text->append(buf, size_t(n));
    if (text->size() > kMaxConfigBytes) {
      ::close(fd);
      return fail("it has more than " + std::to_string(kMaxConfigBytes) +
                  " bytes, the limit for a config");
    }
  }
  ::close(fd);
  return true;
}

bool prescan_toml(const std::string& file, const std::string& text,
                  std::vector<std::string>* errors) {
  const size_t before = errors->size();
  size_t line = 1, col = 1, nest = 0, dots = 0;
  size_t i = 0;
  const size_t n = text.size();
  auto err = [&](size_t l, size_t c, const std::string& m) {
    errors->push_back(file + ":" + std::to_string(l) + ":" + std::to_string(c) + ": error: " + m);
  };
  auto advance = [&](size_t k) {
    for (size_t j = 0; j < k && i < n; ++j, ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
  };
  bool reported_dots = false, reported_nest = false;
  while (i < n && errors->size() - before < 5) {
    const char c = text[i];
    if (c == '\0') {
      err(line, col, "the file holds a NUL byte (a TOML file is text)");
      return false;
    }
    if (c == '#') {  // comment to the end of the line
      while (i < n && text[i] != '\n') {
        if (text[i] == '\0') break;
        advance(1);
      }
      continue;
    }
    if (c == '"' || c == '\'') {
      const bool multi = text.compare(i, 3, std::string(3, c)) == 0;
      const std::string close = multi ? std::string(3, c) : std::string(1, c);
      advance(close.size());
      while (i < n) {
        if (text[i] == '\0') break;
        if (c == '"' && text[i] == '\\') {
          advance(2);
          continue;
        }
        if (!multi && text[i] == '\n') break;  // unterminated: the parser reports it
        if (text.compare(i, close.size(), close) == 0) {
          advance(close.size());
          break;
        }
        advance(1);
      }
      continue;
    }
    if (c == '\n') {
      dots = 0;
      reported_dots = false;
    } else if (c == '.') {
      // A dot between digits belongs to a number (1.5, a time's seconds); others join keys.
      const bool digit_before = i > 0 && std::isdigit(static_cast<unsigned char>(text[i - 1]));
      const bool digit_after = i + 1 < n && std::isdigit(static_cast<unsigned char>(text[i + 1]));
      if (!(digit_before && digit_after) && ++dots >= kMaxDottedParts && !reported_dots) {
        err(line, col,
            "a dotted key with more than " + std::to_string(kMaxDottedParts) +
                " parts (phaselab's keys have at most 2)");
        reported_dots = true;
      }
    } else if (c == '[' || c == '{') {
      if (++nest > kMaxNesting && !reported_nest) {
        err(line, col, "brackets nested more than " + std::to_string(kMaxNesting) + " deep");
        reported_nest = true;
      }
    } else if (c == ']' || c == '}') {
      if (nest > 0) --nest;
    }
    advance(1);
  }
  return errors->size() == before;
}

uint64_t machine_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 0;
  return uint64_t(pages) * uint64_t(page);
}

namespace {

// A cgroup limit file's value: "max" (v2) or a number; values of 2^60 and more are v1's
// "unlimited". 0 when absent, unreadable or unlimited.
uint64_t read_limit(const std::string& path) {
  std::string text, why;
  if (!read_file(path, &text, &why)) return 0;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (text.empty() || text == "max") return 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (!end || *end || v == 0 || v >= (1ull << 60)) return 0;
  return uint64_t(v);
}

// The smallest limit on the way from `dir` (root + path) up to `root`, each level's file `name`.
uint64_t smallest_limit(const std::string& root, std::string path, const char* name) {
  uint64_t best = 0;
  while (true) {
    const uint64_t v = read_limit(root + path + (path == "/" ? "" : "/") + name);
    if (v && (!best || v < best)) best = v;
    if (path.empty() || path == "/") break;
    const size_t slash = path.find_last_of('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
  return best;
}

uint64_t env_mb(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return 0;
  char* end = nullptr;
  const unsigned long long mb = std::strtoull(v, &end, 10);
  return end && (*end == 0 || *end == 'M') && mb > 0 && mb < (1ull << 40) ? uint64_t(mb) << 20 : 0;
}

}  // namespace

uint64_t cgroup_memory_limit() {
  const char* r = std::getenv("PHASELAB_CGROUP_ROOT");  // tests point these at a fake tree
  const char* c = std::getenv("PHASELAB_PROC_CGROUP");
  const std::string root = r && *r ? r : "/sys/fs/cgroup";
  std::string text, why;
  if (!read_file(c && *c ? c : "/proc/self/cgroup", &text, &why)) return 0;
  uint64_t best = 0;
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    const std::string line = text.substr(at, nl - at);
    at = nl + 1;
    const size_t c1 = line.find(':'), c2 = c1 == std::string::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string::npos) continue;
    const std::string id = line.substr(0, c1), ctl = line.substr(c1 + 1, c2 - c1 - 1),
                      path = line.substr(c2 + 1);
    uint64_t v = 0;
    if (id == "0" && ctl.empty())  // v2: one unified tree
      v = smallest_limit(root, path, "memory.max");
    else if (("," + ctl + ",").find(",memory,") != std::string::npos)  // v1: the memory tree
      v = smallest_limit(root + "/memory", path, "memory.limit_in_bytes");
    if (v && (!best || v < best)) best = v;
  }
  return best;
}

MemoryLimit memory_limit() {
  MemoryLimit m;
  m.bytes = machine_memory_bytes();
  m.source = "this machine's memory";
  auto take = [&](uint64_t v, const std::string& source) {
    if (v && (!m.bytes || v < m.bytes)) {
      m.bytes = v;
      m.source = source;
    }
  };
  take(cgroup_memory_limit(), "this process's cgroup memory limit");
  take(env_mb("SLURM_MEM_PER_NODE"), "the Slurm job's memory (SLURM_MEM_PER_NODE)");
  if (const uint64_t per_cpu = env_mb("SLURM_MEM_PER_CPU")) {
    const char* n = std::getenv("SLURM_CPUS_ON_NODE");
    const long cpus = n && *n ? std::strtol(n, nullptr, 10) : 1;
    take(per_cpu * uint64_t(std::max(1L, cpus)),
         "the Slurm job's memory (SLURM_MEM_PER_CPU x SLURM_CPUS_ON_NODE)");
  }
  return m;
}

std::string format_bytes(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30))
    std::snprintf(buf, sizeof buf, "%.1f GB", double(b) / double(1ull << 30));
  else if (b >= (1ull << 20))
    std::snprintf(buf, sizeof buf, "%.1f MB", double(b) / double(1ull << 20));
  else
    std::snprintf(buf, sizeof buf, "%.0f KB", double(b) / 1024.0);
  return buf;
}

MemoryEstimate estimate_memory(const RunConfig& cfg, const Plugin& plugin, int threads) {
  MemoryEstimate m;
  const uint64_t points = count_points(cfg);
  // The driver holds every point's resolved values and record (~ 64 bytes a parameter + 512).
  m.bookkeeping = points * (uint64_t(cfg.base.size()) * 64 + 512);
  pl_point_bytes_fn fn = nullptr;
  if (void* h = ::dlopen(plugin.path.c_str(), RTLD_LAZY | RTLD_NOLOAD)) {
    fn = reinterpret_cast<pl_point_bytes_fn>(::dlsym(h, PL_POINT_BYTES_SYMBOL));
    ::dlclose(h);
  }
  if (fn) {
    // The largest point of the sweep (seeds share a combination's size).
    std::vector<size_t> pos(cfg.sweep.size(), 0);
    std::vector<ParamValue> params = cfg.base;
    while (true) {
      for (size_t a = 0; a < cfg.sweep.size(); ++a)
        params[cfg.sweep[a].param] = cfg.sweep[a].values[pos[a]];
      for (int end = 0; end < (cfg.search.on ? 2 : 1); ++end) {  // a search: both ends of its key
        if (cfg.search.on) {
          ParamValue& k = params[cfg.search.param];
          k.f = end ? cfg.search.max : cfg.search.min;
          k.i = int64_t(k.f);
        }
        const auto v = to_pl_values(params);
        const uint64_t b = fn(v.data(), uint32_t(v.size()));
        if (b > m.per_point) {
          m.per_point = b;
          m.at.clear();
          for (const auto& a : cfg.sweep)
            m.at += (m.at.empty() ? "" : " ") + a.key + "=" + value_text(params[a.param]);
          if (cfg.search.on)
            m.at += (m.at.empty() ? "" : " ") + cfg.search.key + "=" +
                    value_text(params[cfg.search.param]);
        }
      }
      if (cfg.sweep.empty()) break;
      size_t a = cfg.sweep.size();
      bool last = true;
      while (a > 0) {  // odometer: the last key varies fastest
        --a;
        if (++pos[a] < cfg.sweep[a].values.size()) {
          last = false;
          break;
        }
        pos[a] = 0;
      }
      if (last) break;
    }
  }
  const uint64_t concurrent = std::min<uint64_t>(uint64_t(std::max(threads, 1)), points);
  m.total = m.per_point * concurrent + m.bookkeeping;
  return m;
}

bool check_memory(const RunConfig& cfg, const Plugin& plugin, int threads, std::string* error) {
  const MemoryLimit limit = memory_limit();
  const uint64_t have = limit.bytes;
  if (have == 0) return true;
  const MemoryEstimate m = estimate_memory(cfg, plugin, threads);
  if (m.total <= have / 10 * 8) return true;
  std::string what;
  const uint64_t at_once = std::min<uint64_t>(uint64_t(std::max(threads, 1)), count_points(cfg));
  if (m.per_point)
    what = format_bytes(m.per_point) + " per point" + (m.at.empty() ? "" : " (at " + m.at + ")") +
           " x " + std::to_string(at_once) + " point" + (at_once > 1 ? "s" : "") + " at once + " +
           format_bytes(m.bookkeeping) + " for the point list";
  else
    what = format_bytes(m.bookkeeping) + " for the point list";
  *error = cfg.file + ": error: this run needs about " + format_bytes(m.total) + " (" + what +
           "), more than 80% of " + limit.source + ", " + format_bytes(have) +
           "; use smaller sizes or fewer --threads, or pass --force to try anyway";
  return false;
}

}  // namespace pl::driver
