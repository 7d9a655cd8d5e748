// SPDX-License-Identifier: Apache-2.0
#include "driver/run.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#define TBB_PREVIEW_GLOBAL_CONTROL 1
#include <tbb/global_control.h>
#include <tbb/info.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>

#include "driver/figures.hpp"
#include "driver/fsio.hpp"
#include "driver/json.hpp"
#include "driver/limits.hpp"
#include "driver/lockfile.hpp"
#include "driver/mpi_run.hpp"
#include "driver/outputs.hpp"
#include "driver/progress.hpp"
#include "driver/run_record.hpp"
#include "driver/text.hpp"
#include "driver/version.h"
#include "phaselab/kernels.hpp"

namespace pl::driver {
namespace {

// ---------------------------------------------------------------- Ctrl-C
std::atomic<int> g_stop{0};
int g_abort_pipe[2] = {-1, -1};  // a second Ctrl-C writes here; the abort watcher records

extern "C" void on_signal(int sig) {
  if (g_stop.exchange(1) != 0) {  // second Ctrl-C: record what finished and exit at once
    if (g_abort_pipe[1] >= 0) {
      (void)!::write(g_abort_pipe[1], "x", 1);
    } else {
      std::signal(sig, SIG_DFL);
      std::raise(sig);
    }
    return;
  }
  static const char msg[] =
      "\nphaselab: stopping: running points are cancelled, finished points are kept "
      "(Ctrl-C again to abort at once)\n";
  (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
}

// ---------------------------------------------------------------- folders, times
bool make_dirs(const std::string& path, std::string* error) {
  std::string cur;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    cur = path.substr(0, pos);
    if (cur.empty()) continue;
    if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) {
      *error = std::strerror(errno);
      return false;
    }
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    *error = "not a directory";
    return false;
  }
  if (::access(path.c_str(), W_OK) != 0) {
    *error = std::strerror(errno);
    return false;
  }
  return true;
}

bool exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

std::string utc_now(const char* fmt = "%Y-%m-%dT%H:%M:%SZ") {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, fmt, &tm);
  return buf;
}

// ---------------------------------------------------------------- one point
enum class PointStatus { not_run, ok, failed, cancelled, resumed };
const char* status_name(PointStatus s) {
  switch (s) {
    case PointStatus::ok:
      return "ok";
    case PointStatus::failed:
      return "failed";
    case PointStatus::cancelled:
      return "cancelled";
    case PointStatus::resumed:
      return "done_before";
    default:
      return "not_run";
  }
}

struct PointRecord {
  PointStatus status = PointStatus::not_run;
  double seconds = 0;
  size_t rows = 0;
  int rank = 0;  // MPI rank that ran it
  std::string error;
};

struct Shared;

// Host context of one running point (host->ctx).
struct PointCtx {
  Shared* sh = nullptr;
  const Point* pt = nullptr;
  std::vector<std::vector<Row>> rows;  // per table
  std::string fail_reason;             // first reason wins
  std::atomic<double>* fraction = nullptr;
};

struct Shared {
  const pl_plugin* plugin = nullptr;
  Progress* progress = nullptr;
};

int host_emit(void* ctx, uint32_t table, const pl_cell* cells, uint32_t n) {
  auto* c = static_cast<PointCtx*>(ctx);
  const pl_plugin& p = *c->sh->plugin;
  if (table >= p.num_tables) {
    if (c->fail_reason.empty())
      c->fail_reason = "emit to undeclared table " + std::to_string(table);
    return 1;
  }
  const pl_table_decl& td = p.tables[table];
  if (n != td.num_columns) {
    if (c->fail_reason.empty())
      c->fail_reason = std::string("emit to table ") + td.name + " with " + std::to_string(n) +
                       " cells, declared " + std::to_string(td.num_columns);
    return 1;
  }
  Row row(n);
  for (uint32_t i = 0; i < n; ++i) {
    switch (cells[i].kind) {
      case PL_CELL_NUM:
        if (!std::isfinite(cells[i].num)) {
          // A NaN/Inf measurement means the point diverged: fail it rather than write it.
          if (c->fail_reason.empty())
            c->fail_reason = "non-finite value " + format_double(cells[i].num) + " in column " +
                             td.columns[i] + " of table " + td.name;
          return 1;
        }
        row[i] = format_double(cells[i].num);
        break;
      case PL_CELL_INT:
        row[i] = std::to_string(cells[i].i);
        break;
      case PL_CELL_STR:
        row[i] = cells[i].str ? cells[i].str : "";
        break;
      default:
        break;  // empty
    }
  }
  c->rows[table].push_back(std::move(row));
  return 0;
}

void host_progress(void* ctx, double f) {
  auto* c = static_cast<PointCtx*>(ctx);
  if (std::isfinite(f))
    c->fraction->store(std::min(1.0, std::max(0.0, f)), std::memory_order_relaxed);
}

int host_cancelled(void*) { return g_stop.load(std::memory_order_relaxed); }

void host_log(void* ctx, pl_log_level level, const char* msg) {
  auto* c = static_cast<PointCtx*>(ctx);
  if (level == PL_LOG_DEBUG) return;
  const std::string line =
      std::string(c->sh->plugin->name) + " [" + c->pt->label +
      "]: " + (level >= PL_LOG_WARN ? (level == PL_LOG_ERROR ? "error: " : "warning: ") : "") +
      (msg ? msg : "");
  if (level >= PL_LOG_WARN)
    c->sh->progress->warn(line);
  else
    c->sh->progress->info(line);
}

void host_fail(void* ctx, const char* reason) {
  auto* c = static_cast<PointCtx*>(ctx);
  if (c->fail_reason.empty())
    c->fail_reason = reason && *reason ? reason : "failed (no reason given)";
}

std::string run_json_text(const RunConfig& cfg, const Plugin& plugin, const RunOptions& opt,
                          const std::vector<Point>& points, const std::vector<PointRecord>& recs,
                          const pl_kernel_table& kt, int threads, const std::string& out,
                          const std::string& start, const std::string& end, double wall,
                          const char* status, int exit_code, const std::string& error,
                          const std::vector<FigureResult>& figures,
                          const std::string& figure_tool) {
  JsonWriter j;
  j.begin_object();
  j.key("phaselab_version").str(PHASELAB_VERSION);
  j.key("git_commit").str(git_commit());
  j.key("command").begin_array(true);
  for (const auto& a : opt.argv) j.str(a);
  j.end_array();
  j.key("status").str(status);
  j.key("exit_status").integer(exit_code);
  if (!error.empty()) j.key("error").str(error);
  j.key("start_time").str(start);
  j.key("end_time").str(end);
  j.key("wall_seconds").num(wall);
  j.key("out").str(out);
  j.key("cpu").str(cpu_model());
  j.key("threads").integer(threads);
  if (opt.shard.count) {
    j.key("shard").begin_object(true);
    j.key("index").uinteger(opt.shard.index);
    j.key("count").uinteger(opt.shard.count);
    j.key("source").str(opt.shard.source);
    j.key("points_in_run").uinteger(count_points(cfg));
    j.end_object();
  }
  if (mpi_size() > 1) j.key("mpi_ranks").integer(mpi_size());
  j.key("plugin").begin_object();
  j.key("name").str(plugin.entry.name);
  j.key("version").str(plugin.entry.version ? plugin.entry.version : "");
  j.key("path").str(plugin.path);
  j.end_object();
  j.key("config").begin_object();
  j.key("file").str(cfg.file);
  j.key("plugin").str(cfg.plugin);
  j.key("name").str(cfg.name);
  j.key("run").begin_object();
  j.key("seeds").begin_array(true);
  for (auto s : cfg.seeds) j.uinteger(s);
  j.end_array();
  j.key("threads").integer(opt.threads >= 0 ? opt.threads : cfg.threads);
  j.key("out").str(out);
  j.key("target").str(kt.target ? kt.target : "");
  j.key("resume").boolean(opt.resume);
  j.end_object();
  j.key("sweep").begin_object();
  for (const auto& a : cfg.sweep) {
    j.key(a.key).begin_array(true);
    for (const auto& v : a.values) j.raw(value_json(v));
    j.end_array();
  }
  j.end_object();
  // Every parameter's value outside the sweep (the plugin table's, else the default).
  j.key("params").begin_object();
  for (size_t i = 0; i < cfg.base.size(); ++i) {
    bool swept = false;
    for (const auto& a : cfg.sweep) swept = swept || a.param == i;
    if (!swept) j.key(plugin.param_names[i]).raw(value_json(cfg.base[i]));
  }
  j.end_object();
  j.key("toml").str(cfg.text);
  j.end_object();
  j.key("kernel_target").str(kt.target ? kt.target : "");
  j.key("kernels").begin_object();
#define PL_KERNEL(name, Camel, ret, params) \
  j.key(#name).str(kt.variant->name ? kt.variant->name : "");
#include "phaselab/kernels.def"
#undef PL_KERNEL
  j.end_object();
  size_t counts[5] = {0, 0, 0, 0, 0};
  for (const auto& p : points) counts[int(recs[p.index].status)]++;
  j.key("counts").begin_object(true);
  j.key("points").integer(int64_t(points.size()));
  j.key("ok").integer(int64_t(counts[int(PointStatus::ok)]));
  j.key("failed").integer(int64_t(counts[int(PointStatus::failed)]));
  j.key("done_before").integer(int64_t(counts[int(PointStatus::resumed)]));
  j.key("cancelled").integer(int64_t(counts[int(PointStatus::cancelled)]));
  j.key("not_run").integer(int64_t(counts[int(PointStatus::not_run)]));
  j.end_object();
  j.key("figure_tool").str(figure_tool);
  j.key("figures").begin_array();
  for (const auto& f : figures) {
    j.begin_object(true).key("name").str(f.name);
    if (!f.png.empty()) j.key("png").str(f.png);
    if (!f.note.empty()) j.key("note").str(f.note);
    j.end_object();
  }
  j.end_array();
  j.key("points").begin_array();
  for (size_t i = 0; i < points.size(); ++i) {
    const Point& p = points[i];
    const PointRecord& r = recs[p.index];
    j.begin_object(true);
    j.key("index").uinteger(p.index);
    for (const auto& a : cfg.sweep) j.key(a.key).raw(value_json(p.params[a.param]));
    j.key("seed").uinteger(p.seed);
    j.key("status").str(status_name(r.status));
    j.key("seconds").num(r.seconds);
    j.key("rows").integer(int64_t(r.rows));
    if (mpi_size() > 1 && r.status != PointStatus::resumed) j.key("rank").integer(r.rank);
    if (!r.error.empty()) j.key("error").str(r.error);
    j.end_object();
  }
  j.end_array();
  j.end_object();
  return j.text();
}

// Space kept aside in the run folder for the last run.json: freed just before that write, so a
// full disk still gets a run.json that says what happened.
struct SpaceReserve {
  std::string path;
  bool make(const std::string& p, off_t n, std::string* error) {
    path = p;
    bytes = n;
    const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
      *error = "cannot create " + p + ": " + errno_text(errno);
      return false;
    }
    int e = ::posix_fallocate(fd, 0, bytes);
    if (e == EOPNOTSUPP || e == EINVAL) {  // no fallocate here: write zeros
      const std::string zeros(size_t(bytes), '\0');
      e = 0;
      if (!write_all(fd, zeros.data(), zeros.size(), &e)) e = e ? e : EIO;
    } else if (e == 0) {
      if (!fault_take(size_t(bytes))) e = ENOSPC;  // fallocate bypasses write_all's test hook
    }
    ::close(fd);
    if (e != 0) {
      ::unlink(p.c_str());
      *error = "cannot reserve " + std::to_string(bytes) + " bytes in " + p + ": " + errno_text(e);
      return false;
    }
    return true;
  }
  off_t bytes = 0;
  void release() {
    if (!path.empty() && ::unlink(path.c_str()) == 0) fault_credit(size_t(bytes));
    path.clear();
  }
};

}  // namespace

bool stop_requested() { return g_stop.load() != 0; }

namespace {
struct sigaction g_old_int {
}, g_old_term{};
}  // namespace

void install_stop_handlers() {
  g_stop = 0;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, &g_old_int);
  ::sigaction(SIGTERM, &sa, &g_old_term);
}

void restore_stop_handlers() {
  ::sigaction(SIGINT, &g_old_int, nullptr);
  ::sigaction(SIGTERM, &g_old_term, nullptr);
}

int resolve_threads(const RunConfig& cfg, const RunOptions& opt) {
  int threads = int(opt.threads >= 0 ? opt.threads : cfg.threads);
  if (threads <= 0) threads = tbb::info::default_concurrency();
  return std::max(1, threads);
}

std::string select_kernel_table(const std::string& target, pl_kernel_table* kt) {
  std::string why;
  if (pl::select_kernels(target, kt, &why)) return {};
  return why;
}

PointOutcome compute_point(const pl_plugin& p, const Point& pt, const pl_kernel_table& kt,
                           const std::string& out, int threads, Progress* progress,
                           std::atomic<double>* fraction) {
  Shared sh{&p, progress};
  PointCtx ctx;
  ctx.sh = &sh;
  ctx.pt = &pt;
  ctx.rows.resize(p.num_tables);
  ctx.fraction = fraction;
  ctx.fraction->store(0);
  pl_host host{};
  host.struct_size = sizeof(pl_host);
  host.abi_version = PL_PLUGIN_ABI_VERSION;
  host.kernels = &kt;
  host.ctx = &ctx;
  host.emit = host_emit;
  host.progress = host_progress;
  host.cancelled = host_cancelled;
  host.log = host_log;
  host.fail = host_fail;
  host.out_dir = out.c_str();
  host.threads = threads;
  const std::vector<pl_value> values = to_pl_values(pt.params);
  pl_point point{};
  point.index = pt.index;
  point.seed = pt.seed;
  point.point_key = pt.point_key;
  point.params = values.data();
  point.num_params = uint32_t(values.size());

  const auto t0 = std::chrono::steady_clock::now();
  pl_status st = PL_FAILED;
  void* state = nullptr;
  // A thread waiting inside this point's parallel loops works only on this point's tasks, never
  // starts another point (which would stall this one until that one ends); threads without a
  // point of their own still join this point's loops.
  tbb::this_task_arena::isolate([&] {
    try {  // a plugin that lets a C++ exception escape still only fails its point
      st = p.create(&host, &point, &state);
      if (st == PL_OK) st = p.run(state, &host, &point);
    } catch (const std::exception& e) {
      st = PL_FAILED;
      host_fail(&ctx, (std::string("exception escaped the plugin: ") + e.what()).c_str());
    } catch (...) {
      st = PL_FAILED;
      host_fail(&ctx, "exception escaped the plugin");
    }
  });
  if (state) p.destroy(state);
  PointOutcome o;
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ctx.fraction->store(0);
  o.status = int(st);
  o.fail_reason = std::move(ctx.fail_reason);
  o.rows = std::move(ctx.rows);
  o.stop_seen = g_stop.load() != 0;
  o.rank = mpi_rank();
  return o;
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, implementer, part;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string k = line.substr(0, colon), v = line.substr(colon + 1);
    while (!k.empty() && (k.back() == ' ' || k.back() == '\t')) k.pop_back();
    while (!v.empty() && v.front() == ' ') v.erase(v.begin());
    if (k == "model name" || k == "Model" || k == "Hardware") return v;
    if (k == "CPU implementer" && implementer.empty()) implementer = v;
    if (k == "CPU part" && part.empty()) part = v;
  }
  if (!implementer.empty()) return "arm implementer " + implementer + " part " + part;
  return "unknown";
}

std::string git_commit() {
  const std::string c = PHASELAB_GIT_COMMIT;
  return c.empty() ? "unknown" : c;
}

bool finish_run(const RunConfig& cfg, const Plugin& plugin, const pl_kernel_table& kt,
                const std::string& out, int threads, Progress* progress,
                std::vector<FigureResult>* figs, std::string* tool, bool* have_tool) {
  const pl_plugin& p = plugin.entry;
  bool ok = true;
  if (p.finish) {
    Shared sh{&p, progress};
    pl_host host{};
    host.struct_size = sizeof(pl_host);
    host.abi_version = PL_PLUGIN_ABI_VERSION;
    host.kernels = &kt;
    PointCtx ctx;
    ctx.sh = &sh;
    Point none;
    none.label = "finish";
    ctx.pt = &none;
    ctx.rows.resize(p.num_tables);
    std::atomic<double> frac{0};
    ctx.fraction = &frac;
    host.ctx = &ctx;
    host.emit = host_emit;
    host.progress = host_progress;
    host.cancelled = host_cancelled;
    host.log = host_log;
    host.fail = host_fail;
    host.out_dir = out.c_str();
    host.threads = threads;
    if (p.finish(&host, out.c_str()) != PL_OK) {
      progress->warn("phaselab: " + std::string(p.name) + " finish failed: " +
                     (ctx.fail_reason.empty() ? "no reason given" : ctx.fail_reason));
      ok = false;
    }
  }
  // Figures from the finished files; the values of parameters that are not columns let
  // filters on them work.
  std::map<std::string, std::string> constants;
  for (size_t i = 0; i < cfg.base.size(); ++i) {
    bool swept = false;
    for (const auto& a : cfg.sweep) swept = swept || a.param == i;
    if (!swept) constants[plugin.param_names[i]] = value_text(cfg.base[i]);
  }
  *figs = render_figures(p, out, constants, tool, have_tool);
  return ok;
}

int execute_run(const RunConfig& cfg, const Plugin& plugin, const RunOptions& opt) {
  const pl_plugin& p = plugin.entry;
  const auto wall_start = std::chrono::steady_clock::now();
  const std::string start_time = utc_now();

  // Kernel target: --target, else [run] target, else the best this CPU has.
  const std::string target = !opt.target.empty() ? opt.target : cfg.target;
  pl_kernel_table kt;
  std::string why;
  if (!check_target(target, &why)) {
    std::fprintf(stderr, "phaselab: error: %s\n", why.c_str());
    return kExitUsage;
  }
  if (!pl::select_kernels(target, &kt, &why)) {
    std::fprintf(stderr, "phaselab: error: %s\n", why.c_str());
    return kExitUsage;
  }

  std::string out = !opt.out.empty() ? opt.out : cfg.out;
  if (out.empty()) {
    if (opt.resume) {
      std::fprintf(
          stderr,
          "phaselab: error: --resume needs the run folder: pass --out DIR or set [run] out\n");
      return kExitUsage;
    }
    if (opt.shard.count) {
      std::fprintf(stderr,
                   "phaselab: error: --shard needs the run folder that holds the shards: pass "
                   "--out DIR or set [run] out (every shard writes DIR/%s-style subfolders)\n",
                   shard_dir_name(opt.shard).c_str());
      return kExitUsage;
    }
    out = "runs/" + cfg.name + "-" + utc_now("%Y%m%d-%H%M%S");
  }
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  if (opt.shard.count) out += "/" + shard_dir_name(opt.shard);
  // Memory: refuse before any work unless --force.
  {
    int t = int(opt.threads >= 0 ? opt.threads : cfg.threads);
    if (t <= 0) t = tbb::info::default_concurrency();
    if (!opt.force && !check_memory(cfg, plugin, t, &why)) {
      std::fprintf(stderr, "%s\n", why.c_str());
      return kExitUsage;
    }
  }
  // phaselab writes only into a new or empty folder, or a folder holding a phaselab run.
  if (!out_folder_usable(out, &why)) {
    std::fprintf(stderr, "phaselab: error: %s\n", why.c_str());
    return kExitUsage;
  }
  if (!make_dirs(out, &why)) {
    std::fprintf(stderr, "phaselab: error: cannot use output folder %s: %s\n",
                 pl::driver::quoted(out).c_str(), why.c_str());
    return kExitUsage;
  }
  RunLock lock;
  std::string lock_note;
  if (!lock.acquire(out, &why, &lock_note)) {
    std::fprintf(stderr, "phaselab: error: %s\n", why.c_str());
    return kExitUsage;
  }
  if (!opt.resume && (exists(out + "/results.csv") || exists(out + "/run.json"))) {
    std::fprintf(stderr,
                 "phaselab: error: %s already holds a run (results.csv); pass --resume to continue "
                 "it, or choose another --out\n",
                 out.c_str());
    return kExitUsage;
  }

  if (opt.resume && exists(out + "/run.json") &&
      !check_resume_matches(out, resolved_config(cfg, plugin, kt.target ? kt.target : ""), &why)) {
    std::fprintf(stderr, "phaselab: error: %s\n", why.c_str());
    return kExitUsage;
  }

  // With --shard only this shard's points (their indices stay those of the whole run).
  const std::vector<Point> all_points = enumerate_points(cfg, plugin);
  const std::vector<Point> points =
      shard_points(all_points, opt.shard,
                   opt.shard.count ? point_costs(all_points, plugin) : std::vector<double>{});
  const size_t total_points = points.empty() ? 0 : size_t(points.back().index) + 1;
  std::unordered_map<std::string, uint64_t> key_index;
  for (const auto& pt : points) key_index[pt.key] = pt.index;
  std::vector<std::string> key_header;
  for (const auto& a : cfg.sweep) key_header.push_back(a.key);
  key_header.push_back("seed");

  ResultStore store;
  std::set<uint64_t> done;
  std::vector<PointRecord> recs(total_points);
  std::vector<const Point*> todo;

  const int threads = resolve_threads(cfg, opt);

  const std::string json_path = out + "/run.json";
  SpaceReserve reserve;
  std::mutex recs_mu;  // guards recs against the abort watcher's snapshot
  // Writes run.json; the final one (code >= 0) first frees the reserve and, if even then the
  // disk is full, replaces the file in place. False with *err naming the path and errno.
  auto record = [&](const char* status, int code, const std::string& error,
                    const std::vector<FigureResult>& figs, const std::string& tool,
                    std::string* err) {
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    std::string text;
    {
      std::lock_guard<std::mutex> l(recs_mu);
      text = run_json_text(cfg, plugin, opt, points, recs, kt, threads, out, start_time,
                           code < 0 ? "" : utc_now(), wall, status, code < 0 ? -1 : code, error,
                           figs, tool);
    }
    if (code >= 0) reserve.release();
    std::string w;
    if (write_file_atomic(json_path, text, &w)) return true;
    *err = "cannot write " + json_path + ": " + w;
    if (code >= 0 && overwrite_in_place(json_path, text, &w)) return true;
    return false;
  };
  // run.json first (a new run's folder is then recognisably phaselab's), with space kept aside
  // for the last one; on --resume the old run.json stays until the files are read back.
  auto start_record = [&] {
    if (record("running", -1, "", {}, "", &why) &&
        reserve.make(out + "/run.reserve", off_t(8192 + 2 * (4096 + points.size() * 200)), &why))
      return true;
    std::fprintf(stderr, "phaselab: error: %s; nothing was run\n", why.c_str());
    reserve.release();
    std::string e;  // run.json says so where it could be written at all
    if (exists(json_path)) record("write_error", kExitWrite, why + "; nothing was run", {}, "", &e);
    return false;
  };
  if (!opt.resume && !start_record()) return kExitWrite;
  std::vector<std::string> notes;
  if (!lock_note.empty()) notes.push_back(lock_note);
  if (!store.open(out, p, key_header, opt.resume, key_index, &done, &notes, &why)) {
    std::fprintf(stderr, "phaselab: error: %s\n", why.c_str());
    return why.rfind("cannot resume", 0) == 0 ? kExitUsage : kExitWrite;
  }
  for (const auto& n : notes) std::fprintf(stderr, "phaselab: %s\n", n.c_str());
  for (const auto& pt : points) {
    if (done.count(pt.index))
      recs[pt.index].status = PointStatus::resumed;
    else
      todo.push_back(&pt);
  }

  if (opt.resume && !start_record()) return kExitWrite;

  // Per-worker progress fractions of the running point, for the bar.
  std::unique_ptr<std::atomic<double>[]> fractions(new std::atomic<double>[size_t(threads)]);
  for (int w = 0; w < threads; ++w) fractions[size_t(w)] = 0;
  Progress progress(todo.size(), opt.quiet, [&] {
    double s = 0;
    for (int w = 0; w < threads; ++w) s += fractions[size_t(w)].load(std::memory_order_relaxed);
    return s;
  });

  progress.info("phaselab: " + std::string(p.name) + " " + (p.version ? p.version : "") + ": " +
                std::to_string(points.size()) + " points" +
                (done.empty() ? ""
                              : " (" + std::to_string(done.size()) + " done before, " +
                                    std::to_string(todo.size()) + " to run)") +
                (opt.shard.count ? " in shard " + std::to_string(opt.shard.index) + "/" +
                                       std::to_string(opt.shard.count)
                                 : "") +
                " on " + std::to_string(threads) + " thread" + (threads > 1 ? "s" : "") +
                (mpi_size() > 1 ? " x " + std::to_string(mpi_size()) + " MPI ranks" : "") +
                ", kernels " + kt.target + " -> " + out);
  if (opt.resume && done.empty() && !points.empty())
    progress.info("phaselab: nothing to resume in " + out + ", running every point");

  g_stop = 0;
  std::thread watcher;
  if (::pipe2(g_abort_pipe, O_CLOEXEC) == 0) {
    watcher = std::thread([&] {
      char c = 0;
      while (::read(g_abort_pipe[0], &c, 1) < 0 && errno == EINTR) {
      }
      if (c != 'x') return;  // closed: the run ended normally
      // Second Ctrl-C: no point is half-written once the store is frozen; record and exit.
      store.freeze();
      size_t kept = 0;
      {
        std::lock_guard<std::mutex> l(recs_mu);
        for (const auto& r : recs)
          kept += r.status == PointStatus::ok || r.status == PointStatus::resumed;
      }
      std::string e;
      const bool ok = record("aborted", kExitInterrupted, "aborted by a second Ctrl-C", {}, "", &e);
      std::fprintf(stderr,
                   "phaselab: aborted: %zu of %zu points done are kept%s; continue with --resume "
                   "--out %s\n",
                   kept, points.size(), ok ? "" : (" (" + e + ")").c_str(), out.c_str());
      lock.release();
      ::_exit(kExitInterrupted);
    });
  }
  struct sigaction sa {
  }, old_int{}, old_term{};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGTERM, &sa, &old_term);

  std::atomic<size_t> next{0};
  std::atomic<bool> io_error{false};
  std::string io_why;
  std::mutex io_mu;

  // Writes one finished point (computed here or on an MPI worker rank).
  auto record_point = [&](const Point& pt, PointOutcome&& o) {
    PointRecord rec;
    struct Publish {  // recs[pt.index] = rec at every exit, under recs_mu
      std::mutex& mu;
      PointRecord& dst;
      const PointRecord& src;
      ~Publish() {
        std::lock_guard<std::mutex> l(mu);
        dst = src;
      }
    } publish{recs_mu, recs[pt.index], rec};
    rec.seconds = o.seconds;
    rec.rank = o.rank;
    const pl_status st = pl_status(o.status);
    if (st == PL_OK && o.fail_reason.empty()) {
      rec.status = PointStatus::ok;
      for (const auto& t : o.rows) rec.rows += t.size();
      std::string err;
      if (!store.commit(pt.index, pt.key_cells, o.rows, &err)) {
        std::lock_guard<std::mutex> l(io_mu);
        rec.status = PointStatus::not_run;  // its rows are not on disk: run it again
        rec.error = err;
        if (!io_error) io_why = err;
        io_error = true;
        g_stop = 1;
        return;
      }
    } else if ((o.stop_seen || g_stop.load()) &&
               (st == PL_CANCELLED || (st != PL_OK && o.fail_reason.empty()))) {
      rec.status = PointStatus::cancelled;  // stopped by Ctrl-C: run it again on --resume
      return;
    } else {
      rec.status = PointStatus::failed;
      rec.error = !o.fail_reason.empty() ? o.fail_reason
                  : st == PL_CANCELLED   ? "plugin returned cancelled without a stop request"
                                         : "plugin reported failure without a reason";
      std::string err;
      if (!store.record_failure(pt.index, pt.key_cells, rec.error, &err)) {
        std::lock_guard<std::mutex> l(io_mu);
        if (!io_error) io_why = err;
        io_error = true;
        g_stop = 1;
      }
    }
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.2f s", rec.seconds);
    progress.point_done(rec.status == PointStatus::failed,
                        pt.label + ": " +
                            (rec.status == PointStatus::ok ? "ok" : "FAILED: " + rec.error) + " (" +
                            secs + ")");
  };

  auto run_local = [&] {
    // One worker per thread pulls points in order, so early points finish first. When fewer
    // points than threads are left, the idle threads join the running points' parallel loops.
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(threads));
    tbb::task_arena arena(threads);
    arena.execute([&] {
      tbb::task_group g;
      for (int w = 0; w < threads; ++w)
        g.run([&, w] {
          while (!g_stop.load()) {
            const size_t j = next++;
            if (j >= todo.size()) break;
            record_point(*todo[j], compute_point(p, *todo[j], kt, out, threads, &progress,
                                                 &fractions[size_t(w)]));
          }
        });
      g.wait();
    });
  };
  progress.start();
  if (mpi_size() > 1) {
    // Rank 0 computes with its own threads and hands the other points to the worker ranks
    // as they ask; it alone writes the run folder.
    std::vector<uint64_t> todo_index;
    for (const Point* pt : todo) todo_index.push_back(pt->index);
    std::unordered_map<uint64_t, const Point*> by_index;
    for (const Point* pt : todo) by_index[pt->index] = pt;
    std::string mpi_why;
    if (!mpi_coordinate(
            todo_index, out, kt.target ? kt.target : "", &next, run_local,
            [&](uint64_t index, PointOutcome&& o) {
              record_point(*by_index.at(index), std::move(o));
            },
            &mpi_why)) {
      std::lock_guard<std::mutex> l(io_mu);
      if (!io_error) io_why = mpi_why;
      io_error = true;
    }
  } else {
    run_local();
  }
  progress.stop();
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  if (watcher.joinable()) {
    ::close(g_abort_pipe[1]);  // wakes the watcher with end-of-file
    g_abort_pipe[1] = -1;
    watcher.join();
    ::close(g_abort_pipe[0]);
    g_abort_pipe[0] = -1;
  }

  size_t kept = 0;
  for (const auto& r : recs)
    kept += r.status == PointStatus::ok || r.status == PointStatus::resumed;
  // A write that failed (disk full, I/O error) stops the run: say so loudly, keep run.json true.
  auto write_failure = [&](const std::string& what) {
    store.close();
    std::string e;
    const bool json_ok = record("write_error", kExitWrite, what, {}, "", &e);
    std::fprintf(stderr,
                 "phaselab: error: %s\nphaselab: the run stopped: %zu of %zu points are done and "
                 "kept (whole rows only); free space and continue with --resume --out %s\n",
                 what.c_str(), kept, points.size(), out.c_str());
    if (!json_ok)
      std::fprintf(stderr, "phaselab: error: %s (run.json may still say \"running\")\n", e.c_str());
    return kExitWrite;
  };
  if (io_error) return write_failure(io_why);
  size_t failed = 0, ok = 0;
  for (const auto& r : recs) {
    failed += r.status == PointStatus::failed;
    ok += r.status == PointStatus::ok || r.status == PointStatus::resumed;
  }
  if (g_stop.load()) {
    // Interrupted: the files keep the rows appended so far (complete points only).
    store.close();
    std::fprintf(stderr,
                 "phaselab: interrupted: %zu of %zu points done; continue with --resume --out %s\n",
                 ok, points.size(), out.c_str());
    std::string e;
    if (!record("interrupted", kExitInterrupted, "", {}, "", &e)) {
      std::fprintf(stderr, "phaselab: error: %s\n", e.c_str());
      return kExitWrite;
    }
    return kExitInterrupted;
  }
  if (!store.finalize(&why)) return write_failure(why);
  int code = failed ? kExitFailed : kExitOk;
  // A shard's summaries and figures would cover a fraction of the points: `phaselab merge` runs
  // them once on the merged folder.
  std::vector<FigureResult> figs;
  std::string tool;
  bool have_tool = true;
  if (!opt.shard.count &&
      !finish_run(cfg, plugin, kt, out, threads, &progress, &figs, &tool, &have_tool))
    code = kExitFailed;
  size_t drawn = 0;
  for (const auto& f : figs) drawn += !f.png.empty();
  if (!figs.empty() && !have_tool) {
    progress.warn("phaselab: no figures drawn: " + tool + "; the .gp scripts are in " + out +
                  "/figures");
  } else {
    // Figures for samplers, modes or swept keys this run does not have are not a problem: one
    // info line. Other reasons: one warning per distinct reason, naming its figures.
    std::vector<std::string> not_here;
    std::vector<std::pair<std::string, std::string>> reasons;  // (note, figure names)
    for (const auto& f : figs) {
      if (!f.png.empty()) continue;
      if (f.note.rfind("no rows to plot", 0) == 0 ||
          f.note.find("excludes this run") != std::string::npos) {
        not_here.push_back(f.name);
      } else if (f.note.rfind("cannot write", 0) == 0) {
        std::fprintf(stderr, "phaselab: error: figure %s: %s\n", f.name.c_str(), f.note.c_str());
        code = kExitWrite;  // the results are whole; --resume redraws the figures
      } else {
        auto it = std::find_if(reasons.begin(), reasons.end(),
                               [&](const auto& r) { return r.first == f.note; });
        if (it == reasons.end())
          reasons.push_back({f.note, f.name});
        else
          it->second += ", " + f.name;
      }
    }
    for (const auto& r : reasons)
      progress.warn("phaselab: figure" +
                    std::string(r.second.find(',') != std::string::npos ? "s " : " ") + r.second +
                    " not drawn: " + r.first);
    if (!not_here.empty() && !opt.quiet)
      progress.info("phaselab: " + std::to_string(not_here.size()) + " figure" +
                    (not_here.size() > 1 ? "s" : "") +
                    " for samplers or modes this run does not use not drawn (see run.json)");
  }
  {
    std::string e;
    if (!record(code == kExitOk      ? "ok"
                : code == kExitWrite ? "write_error"
                                     : "failed",
                code, code == kExitWrite ? "a figure could not be written (see figures)" : "", figs,
                tool, &e)) {
      std::fprintf(stderr, "phaselab: error: %s\n", e.c_str());
      return kExitWrite;
    }
  }
  lock.release();

  if (!opt.quiet || failed) {
    std::string summary =
        "phaselab: " + std::to_string(ok) + " of " + std::to_string(points.size()) + " points ok";
    if (failed) summary += ", " + std::to_string(failed) + " failed (see " + out + "/failures.csv)";
    std::fprintf(stderr, "%s\n", summary.c_str());
  }
  if (!opt.quiet) {
    std::printf("results: %s/results.csv\nrun record: %s\n", out.c_str(), json_path.c_str());
    if (drawn) std::printf("figures: %s/figures/ (%zu drawn)\n", out.c_str(), drawn);
    if (opt.shard.count) {
      const std::string parent = out.substr(0, out.rfind('/'));
      std::printf("shard %llu of %llu done; when all are: phaselab merge %s %s/shard-*\n",
                  (unsigned long long)opt.shard.index, (unsigned long long)opt.shard.count,
                  parent.c_str(), parent.c_str());
    }
  }
  return code;
}

}  // namespace pl::driver
