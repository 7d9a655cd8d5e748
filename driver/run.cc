// SPDX-License-Identifier: Apache-2.0
#include "driver/run.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <ctime>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
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
#include "driver/json_text.hpp"
#include "driver/limits.hpp"
#include "driver/lockfile.hpp"
#include "driver/mpi_run.hpp"
#include "driver/outputs.hpp"
#include "driver/progress.hpp"
#include "driver/run_record.hpp"
#include "driver/search.hpp"
#include "driver/text.hpp"
#include "driver/version.h"
#include "phaselab/kernels.hpp"

namespace pl::driver {
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------- Ctrl-C
std::atomic<int> g_stop{0};
int g_abort_pipe[2] = {-1, -1};  // a second Ctrl-C writes here; the abort watcher records

// SIGINT, SIGTERM, SIGHUP (the terminal closed) and SIGPIPE (`phaselab run ... | head` and the
// reader gone) stop the run the same way: finished points kept, run.json "interrupted", the lock
// released. A SIGPIPE never escalates to the abort: every later write to the closed pipe raises
// another one, and each only fails with EPIPE.
extern "C" void on_signal(int sig) {
  if (sig == SIGPIPE && g_stop.load() != 0) return;
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
// Creates `path` and its parents; false with the reason unless it is then a writable folder.
bool make_dirs(const std::string& path, std::string* error) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (!fs::is_directory(path)) {
    *error = ec ? ec.message() : "not a directory";
    return false;
  }
  if (::access(path.c_str(), W_OK) != 0) {
    *error = std::strerror(errno);
    return false;
  }
  return true;
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
  bool labelled = false;  // [search]: the point's label, or why it has none
  std::string label;
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

// The host of one point (or of finish()): the callbacks above on `ctx`.
pl_host make_host(PointCtx* ctx, const pl_kernel_table& kt, const std::string& out, int threads) {
  pl_host host{};
  host.struct_size = sizeof(pl_host);
  host.abi_version = PL_PLUGIN_ABI_VERSION;
  host.kernels = &kt;
  host.ctx = ctx;
  host.emit = host_emit;
  host.progress = host_progress;
  host.cancelled = host_cancelled;
  host.log = host_log;
  host.fail = host_fail;
  host.out_dir = out.c_str();
  host.threads = threads;
  return host;
}

// Space kept aside in the run folder for the last run.json: freed just before that write, so a
// full disk still gets a run.json that says what happened.
struct SpaceReserve {
  std::string path;
  off_t bytes = 0;
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
  void release() {
    if (!path.empty() && ::unlink(path.c_str()) == 0) fault_credit(size_t(bytes));
    path.clear();
  }
};

int usage_error(const std::string& why) {
  std::fprintf(stderr, "phaselab: error: %s\n", why.c_str());
  return kExitUsage;
}

// `phaselab run` in three stages:
//   plan     the config resolved to points (this shard's), the kernel table, the run folder
//            (new, or --resume of a matching run), its lock;
//   execute  the points on the worker threads (and MPI ranks), Ctrl-C;
//   record   run.json (at the start, after resume, at the end), the tables, the figures and
//            the closing lines.
// Each stage returns 0 to go on or the exit status.
class Run {
 public:
  Run(const RunConfig& cfg, const Plugin& plugin, const RunOptions& opt)
      : cfg_(cfg), plugin_(plugin), p_(plugin.entry), opt_(opt) {}

  int go() {
    // Ctrl-C is caught from the start: one that comes while the folder is locked and the tables
    // are made (before any point runs) ends the run as interrupted, with run.json saying so and
    // the lock released, rather than killing the process with its lock left behind.
    struct StopHandlers {
      StopHandlers() { install_stop_handlers(); }
      ~StopHandlers() { restore_stop_handlers(); }
    } stop_handlers;
    if (int rc = plan_kernels()) return rc;
    if (int rc = plan_folder()) return rc;
    plan_points();
    if (int rc = open_store()) return rc;
    execute();
    return conclude();
  }

 private:
  // ---------------------------------------------------------------- plan
  // Kernel target: --target, else [run] target, else the best this CPU has.
  int plan_kernels() {
    const std::string target = !opt_.target.empty() ? opt_.target : cfg_.target;
    std::string why;
    if (!check_target(target, &why) || !pl::select_kernels(target, &kt_, &why))
      return usage_error(why);
    return 0;
  }

  // The run folder: --out, else [run] out, else runs/<name>-<time>; DIR/shard-I-of-N for a
  // shard. Refused (exit 2, nothing written) when the memory estimate is too large, the folder
  // holds other files or another run, or --resume meets a config that differs from the run's.
  int plan_folder() {
    out_ = !opt_.out.empty() ? opt_.out : cfg_.out;
    if (out_.empty()) {
      if (opt_.resume)
        return usage_error("--resume needs the run folder: pass --out DIR or set [run] out");
      if (opt_.shard.count)
        return usage_error(
            "--shard needs the run folder that holds the shards: pass --out DIR or set [run] "
            "out (every shard writes DIR/" +
            shard_dir_name(opt_.shard) + "-style subfolders)");
      out_ = "runs/" + cfg_.name + "-" + utc_now("%Y%m%d-%H%M%S");
    }
    while (out_.size() > 1 && out_.back() == '/') out_.pop_back();
    if (opt_.shard.count) out_ += "/" + shard_dir_name(opt_.shard);
    threads_ = resolve_threads(cfg_, opt_);
    std::string why;
    if (!opt_.force && !check_memory(cfg_, plugin_, threads_, &why)) {  // before any work
      std::fprintf(stderr, "%s\n", why.c_str());
      return kExitUsage;
    }
    // phaselab writes only into a new or empty folder, or a folder holding a phaselab run.
    if (!out_folder_usable(out_, &why)) return usage_error(why);
    if (!make_dirs(out_, &why))
      return usage_error("cannot use output folder " + driver::quoted(out_) + ": " + why);
    if (!lock_.acquire(out_, &why, &lock_note_)) return usage_error(why);
    json_path_ = out_ + "/run.json";
    if (!opt_.resume && (fs::exists(out_ + "/results.csv") || fs::exists(json_path_)))
      return usage_error(out_ + " already holds a run (" +
                         (fs::exists(out_ + "/results.csv") ? "results.csv" : "run.json") +
                         "); pass --resume to continue it, or choose another --out");
    if (opt_.resume && fs::exists(json_path_) &&
        !check_resume_matches(out_, resolved_config(cfg_, plugin_, kt_.target ? kt_.target : ""),
                              &why))
      return usage_error(why);
    if (opt_.resume && fs::exists(json_path_) &&
        !check_resume_shard(out_, cfg_.file, opt_.shard, opt_.target, &why))
      return usage_error(why);
    return 0;
  }

  // With --shard only this shard's points (their indices stay those of the whole run).
  void plan_points() {
    if (cfg_.search.on) return plan_searches();
    const std::vector<Point> all = enumerate_points(cfg_, plugin_);
    const std::vector<Point> mine = shard_points(
        all, opt_.shard, opt_.shard.count ? point_costs(all, plugin_) : std::vector<double>{});
    points_.assign(mine.begin(), mine.end());
    for (const Point& pt : points_) recs_[pt.index];
  }

  // [search]: this run's (this shard's) searches; their points are planned round by round. A
  // shard takes whole searches, dealt by the cost of their first grid where the plugin has
  // an estimate.
  void plan_searches() {
    plan_ = std::make_unique<SearchPlan>(cfg_, plugin_);
    const std::vector<uint64_t> shard_of = opt_.shard.count
                                               ? search_shards(*plan_, plugin_, opt_.shard.count)
                                               : std::vector<uint64_t>{};
    for (uint64_t s = 0; s < plan_->size(); ++s)
      if (shard_of.empty() || shard_of[size_t(s)] == opt_.shard.index) searches_.insert(s);
  }

  // Creates the tables (or reads them back on --resume): the points done before are skipped.
  int open_store() {
    // run.json first (a new run's folder is then recognisably phaselab's); on --resume the old
    // run.json stays until the files are read back.
    if (!opt_.resume && !start_record()) return kExitWrite;
    std::unordered_map<std::string, uint64_t> key_index;
    for (const auto& pt : points_) key_index[pt.key] = pt.index;
    KeyLookup lookup = key_lookup(key_index);
    if (plan_)
      lookup = [this](const Row& cells, uint64_t* index) {
        uint64_t s = 0, off = 0;
        if (!plan_->decode(cells, &s, &off) || !searches_.count(s)) return false;
        *index = plan_->index(s, off);
        return true;
      };
    std::vector<std::string> notes;
    if (!lock_note_.empty()) notes.push_back(lock_note_);
    std::string why;
    if (!store_.open(out_, p_, leading_columns(cfg_, plugin_.param_names), opt_.resume, lookup,
                     &done_, &notes, &why)) {
      if (why.rfind("cannot resume", 0) == 0) {
        std::fprintf(stderr, "phaselab: error: %s\n", why.c_str());
        return kExitUsage;
      }
      // Disk full while the tables are made: a new run's run.json says so (the reserve freed);
      // on --resume the old run.json stays.
      std::fprintf(stderr, "phaselab: error: %s; nothing was run%s\n", why.c_str(),
                   continue_hint().c_str());
      std::string e;
      if (!opt_.resume)
        write_record("write_error", kExitWrite, why + "; nothing was run", {}, "", &e);
      return kExitWrite;
    }
    for (const auto& n : notes) std::fprintf(stderr, "phaselab: %s\n", n.c_str());
    if (plan_ && !done_.empty() && !read_done_rows(&why)) {
      std::fprintf(stderr, "phaselab: error: %s\n", why.c_str());
      return kExitWrite;
    }
    kept_rows_ = store_.row_counts();
    const std::map<uint64_t, size_t>& kept_rows = kept_rows_;
    for (const auto& pt : points_) {
      if (done_.count(pt.index)) {
        recs_[pt.index].status = PointStatus::resumed;
        const auto it = kept_rows.find(pt.index);  // its rows, for merge's check
        recs_[pt.index].rows = it == kept_rows.end() ? 0 : it->second;
      } else {
        todo_.push_back(&pt);
      }
    }
    costliest_first(&todo_);
    if (opt_.resume && !start_record()) return kExitWrite;
    return 0;
  }

  // [search] --resume: the results rows of the points done before (their labels decide the
  // rounds that follow), read back from results.csv as the store kept it.
  bool read_done_rows(std::string* error) {
    const std::string path = out_ + "/" + p_.tables[0].name + ".csv";
    std::string text;
    std::vector<Row> recs;
    if (!read_file(path, &text, error) || !parse_csv(text, &recs)) {
      *error = "cannot read " + path + " back: " + *error;
      return false;
    }
    const LeadingColumns lead = leading_columns(cfg_, plugin_.param_names);
    const size_t nkey = lead.keys.size();
    const size_t nlead = nkey + (LeadingColumns::all_params(p_.tables[0]) ? lead.params.size() : 0);
    for (size_t r = 1; r < recs.size(); ++r) {
      uint64_t s = 0, off = 0;
      if (recs[r].size() < nlead ||
          !plan_->decode(Row(recs[r].begin(), recs[r].begin() + long(nkey)), &s, &off))
        continue;
      done_rows_[plan_->index(s, off)].push_back(Row(recs[r].begin() + long(nlead), recs[r].end()));
    }
    return true;
  }

  // Points run (and go to MPI ranks) in decreasing order of the plugin's cost estimate, ties in
  // run order, so the longest points do not start last; without an estimate, in run order. The
  // tables are rewritten in run order at the end, so the order changes no result.
  void costliest_first(std::vector<const Point*>* todo) const {
    std::vector<Point> pts;
    for (const Point* p : *todo) pts.push_back(*p);
    const std::vector<double> costs = point_costs(pts, plugin_);
    if (costs.empty()) return;
    std::vector<size_t> order(todo->size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return costs[a] > costs[b]; });
    std::vector<const Point*> sorted;
    for (size_t i : order) sorted.push_back((*todo)[i]);
    *todo = std::move(sorted);
  }

  // ---------------------------------------------------------------- execute
  // The points on the workers (and MPI ranks) with the progress bar and the abort watcher. A
  // [search] plans its points round by round (search_rounds), a plain run has them all.
  void execute() {
    // Per-worker progress fractions of the running point, for the bar.
    fractions_.reset(new std::atomic<double>[size_t(threads_)]);
    for (int w = 0; w < threads_; ++w) fractions_[size_t(w)] = 0;
    progress_ = std::make_unique<Progress>(plan_ ? 0 : todo_.size(), opt_.quiet, [this] {
      double s = 0;
      for (int w = 0; w < threads_; ++w) s += fractions_[size_t(w)].load(std::memory_order_relaxed);
      return s;
    });
    announce();
    start_abort_watcher();
    start_recorder();
    progress_->start();
    if (plan_ && mpi_size() > 1)
      run_mpi_search();
    else if (plan_)
      search_rounds();
    else if (mpi_size() > 1)
      run_mpi();
    else
      run_local();
    drain_recorder();
    stop_recorder();
    progress_->stop();
    stop_abort_watcher();
  }

  void announce() {
    const std::string shard = opt_.shard.count ? " in shard " + std::to_string(opt_.shard.index) +
                                                     "/" + std::to_string(opt_.shard.count)
                                               : "";
    const SearchSpec& sr = cfg_.search;
    const std::string what =
        plan_ ? std::to_string(searches_.size()) + " search" + (searches_.size() == 1 ? "" : "es") +
                    " for the boundaries of " + sr.column + " along " + sr.key + " in [" +
                    format_double(sr.min) + ", " + format_double(sr.max) + "] (" +
                    (sr.log ? "log" : "linear") + ", rel_tol " + format_double(sr.rel_tol) + ")" +
                    (done_.empty() ? ""
                                   : " (" + std::to_string(done_.size()) + " points done before)")
              : std::to_string(points_.size()) + " points" +
                    (done_.empty() ? ""
                                   : " (" + std::to_string(done_.size()) + " done before, " +
                                         std::to_string(todo_.size()) + " to run)");
    progress_->info("phaselab: " + std::string(p_.name) + " " + (p_.version ? p_.version : "") +
                    ": " + what + shard + " on " + std::to_string(threads_) + " thread" +
                    (threads_ > 1 ? "s" : "") +
                    (mpi_size() > 1 ? " x " + std::to_string(mpi_size()) + " MPI ranks" : "") +
                    ", kernels " + kt_.target + " -> " + out_);
    if (opt_.resume && done_.empty() && (!points_.empty() || plan_))
      progress_->info("phaselab: nothing to resume in " + out_ + ", running every point");
  }

  // [search]: round after round, every search's planned points (the first grid, then the
  // midpoints of its open brackets) run at once on the workers; a point done before (--resume)
  // gives its label from its rows. Which points run depends only on the config and the labels.
  // Ends with search_over_ set.
  void search_rounds() {
    struct Over {  // however the rounds end, the worker ranks are then told there is no more
      Run* r;
      ~Over() {
        std::lock_guard<std::mutex> l(r->round_mu_);
        r->search_over_ = true;
      }
    } over{this};
    std::map<uint64_t, std::map<uint64_t, SearchEval>> state;  // search -> offset -> point
    std::map<uint64_t, std::vector<uint64_t>> planned;         // this round's offsets
    for (uint64_t s : searches_) planned[s] = plan_->initial();
    for (int round = 0; !planned.empty() && !g_stop.load(); ++round) {
      std::vector<const Point*> round_points, todo;
      for (const auto& [s, offs] : planned)
        for (uint64_t off : offs) {
          {
            std::lock_guard<std::mutex> l(recs_mu_);
            points_.push_back(plan_->point(s, off, round));
            recs_[points_.back().index];
          }
          const Point& pt = points_.back();
          round_points.push_back(&pt);
          SearchEval& e = state[s][off];
          e.offset = off;
          e.value = plan_->value(off);
          e.round = round;
          if (done_.count(pt.index)) {
            std::lock_guard<std::mutex> l(recs_mu_);
            PointRecord& r = recs_.at(pt.index);
            r.status = PointStatus::resumed;
            const auto it = kept_rows_.find(pt.index);  // its rows, for merge's check
            r.rows = it == kept_rows_.end() ? 0 : it->second;
            r.labelled =
                point_label(cfg_.search, p_.tables[0], done_rows_[pt.index], &r.label, &r.error);
          } else {
            todo.push_back(&pt);
          }
        }
      rounds_ = round + 1;
      if (!todo.empty()) {
        progress_->add_total(todo.size());
        if (!opt_.quiet && round > 0)
          progress_->info("phaselab: search round " + std::to_string(round) + ": " +
                          std::to_string(todo.size()) + " point" + (todo.size() > 1 ? "s" : "") +
                          " in " + std::to_string(planned.size()) + " search" +
                          (planned.size() > 1 ? "es" : ""));
        costliest_first(&todo);
        {
          std::lock_guard<std::mutex> l(round_mu_);
          todo_ = todo;
          next_ = 0;
          round_recorded_ = 0;
        }
        run_local();
        // Points handed to other MPI ranks may still run: the round ends when all are recorded.
        std::unique_lock<std::mutex> l(round_mu_);
        while (round_recorded_ < todo_.size() && !g_stop.load())  // a stop wakes no one: poll
          round_cv_.wait_for(l, std::chrono::milliseconds(50));
      }
      if (g_stop.load()) break;
      planned.clear();
      for (const Point* pt : round_points) {
        uint64_t s = pt->index / kSearchSlot, off = pt->index % kSearchSlot;
        SearchEval& e = state[s][off];
        const PointRecord& r = recs_.at(pt->index);
        const bool ok = (r.status == PointStatus::ok || r.status == PointStatus::resumed);
        e.state = ok && r.labelled ? SearchEval::kOk : SearchEval::kFailed;
        e.label = r.label;
        if (ok && !r.labelled)
          progress_->warn("phaselab: " + pt->label + ": no label (" + r.error +
                          "); the brackets around it are broken");
      }
      std::set<uint64_t> looked;
      for (const Point* pt : round_points) {
        const uint64_t s = pt->index / kSearchSlot;
        if (!looked.insert(s).second) continue;
        std::vector<SearchEval> evals;
        for (const auto& kv : state[s]) evals.push_back(kv.second);
        std::vector<uint64_t> nx = plan_->next(evals);
        if (!nx.empty()) planned[s] = std::move(nx);
      }
    }
  }

  // One worker per thread pulls points in todo_'s order (costliest first where the plugin has an
  // estimate). When fewer
  // points than threads are left, the idle threads join the running points' parallel loops.
  void run_local() {
    run_on_workers(threads_, [&](int w) {
      while (!g_stop.load()) {
        const size_t j = next_++;
        if (j >= todo_.size()) break;
        record_point(*todo_[j], compute_point(p_, *todo_[j], kt_, out_, threads_, progress_.get(),
                                              &fractions_[size_t(w)]));
      }
    });
  }

  // Rank 0 computes with its own threads and hands the other points to the worker ranks as
  // they ask; it alone writes the run folder.
  void run_mpi() {
    std::vector<uint64_t> todo_index;
    std::unordered_map<uint64_t, const Point*> by_index;
    for (const Point* pt : todo_) {
      todo_index.push_back(pt->index);
      by_index[pt->index] = pt;
    }
    std::string why;
    if (!mpi_coordinate(
            list_source(todo_index, &next_), out_, kt_.target ? kt_.target : "",
            [this] { run_local(); },
            [&](uint64_t index, PointOutcome&& o) {
              record_point(*by_index.at(index), std::move(o));
            },
            &why))
      io_failed(why);
  }

  // [search] under mpirun: the rounds run on a second thread (rank 0's own threads take each
  // round's points as in one process) while this one serves the worker ranks from the same
  // round; between rounds they are told to ask again, after the last round that there is none.
  void run_mpi_search() {
    PointSource source;
    source.take = [this](size_t k, size_t* left, bool* more) {
      std::lock_guard<std::mutex> l(round_mu_);
      std::vector<uint64_t> block;
      if (k > 0) {
        const size_t j = next_.fetch_add(k);
        for (size_t i = j; i < j + k && i < todo_.size(); ++i) block.push_back(todo_[i]->index);
      }
      const size_t taken = next_.load();
      *left = taken < todo_.size() ? todo_.size() - taken : 0;
      *more = !search_over_;
      return block;
    };
    std::string why;
    if (!mpi_coordinate(
            source, out_, kt_.target ? kt_.target : "", [this] { search_rounds(); },
            [&](uint64_t index, PointOutcome&& o) {
              const Point* pt = nullptr;
              {
                std::lock_guard<std::mutex> l(round_mu_);
                for (const Point* p : todo_)
                  if (p->index == index) pt = p;
              }
              if (pt) record_point(*pt, std::move(o));
            },
            &why))
      io_failed(why);
  }

  // A write that failed stops the run (its reason is kept for the closing message).
  void io_failed(const std::string& why) {
    std::lock_guard<std::mutex> l(io_mu_);
    if (!io_error_) io_why_ = why;
    io_error_ = true;
    g_stop = 1;
  }

  // A finished point (computed here or on an MPI worker rank) goes to the recorder thread, which
  // writes it to the run folder: the worker (or rank 0's dispatcher) goes on at once.
  void record_point(const Point& pt, PointOutcome&& o) {
    {
      std::lock_guard<std::mutex> l(rq_mu_);
      rq_.push_back({&pt, std::move(o)});
    }
    rq_cv_.notify_all();
  }

  // The recorder: takes every point that finished while it wrote the previous batch and writes
  // them as one batch (ResultStore::commit: one fdatasync per file). A point is recorded (its
  // status, the progress line, a [search] round's count) only after its rows and journal line
  // are on disk, so nothing reported done is lost by a crash.
  void start_recorder() {
    rq_quit_ = false;
    recorder_ = std::thread([this] {
      for (;;) {
        std::vector<std::pair<const Point*, PointOutcome>> batch;
        {
          std::unique_lock<std::mutex> l(rq_mu_);
          rq_cv_.wait(l, [this] { return !rq_.empty() || rq_quit_; });
          if (rq_.empty()) return;
          for (auto& item : rq_) batch.push_back(std::move(item));
          rq_.clear();
          rq_busy_ = true;
        }
        record_batch(&batch);
        {
          std::lock_guard<std::mutex> l(rq_mu_);
          rq_busy_ = false;
        }
        rq_cv_.notify_all();
      }
    });
  }

  // Waits until every point handed to the recorder is recorded.
  void drain_recorder() {
    std::unique_lock<std::mutex> l(rq_mu_);
    rq_cv_.wait(l, [this] { return rq_.empty() && !rq_busy_; });
  }

  void stop_recorder() {
    if (!recorder_.joinable()) return;
    {
      std::lock_guard<std::mutex> l(rq_mu_);
      rq_quit_ = true;
    }
    rq_cv_.notify_all();
    recorder_.join();
  }

  void record_batch(std::vector<std::pair<const Point*, PointOutcome>>* batch) {
    std::vector<PointRecord> recs(batch->size());
    std::vector<ResultStore::Commit> commits;
    for (size_t i = 0; i < batch->size(); ++i) {
      const Point& pt = *(*batch)[i].first;
      const PointOutcome& o = (*batch)[i].second;
      PointRecord& rec = recs[i];
      rec.seconds = o.seconds;
      rec.rank = o.rank;
      classify(pt, o, &rec);
      if (rec.status == PointStatus::ok) {
        commits.push_back({pt.index, &pt.key_cells, &o.rows});
        if (plan_)
          rec.labelled = point_label(cfg_.search, p_.tables[0], o.rows[0], &rec.label, &rec.error);
      }
    }
    std::string err;
    if (!store_.commit(commits, &err)) {
      for (PointRecord& rec : recs)
        if (rec.status == PointStatus::ok) {
          rec.status = PointStatus::not_run;  // its rows are not on disk: run it again
          rec.error = err;
        }
      io_failed(err);
    }
    for (size_t i = 0; i < batch->size(); ++i) {
      const Point& pt = *(*batch)[i].first;
      const PointRecord& rec = recs[i];
      {
        std::lock_guard<std::mutex> l(recs_mu_);
        recs_[pt.index] = rec;
      }
      if (plan_) {  // [search]: the round waits for every point of it to be recorded
        {
          std::lock_guard<std::mutex> l(round_mu_);
          ++round_recorded_;
        }
        round_cv_.notify_all();
      }
      if (rec.status == PointStatus::cancelled ||
          (rec.status == PointStatus::not_run && !rec.error.empty()))
        continue;
      char secs[32];
      std::snprintf(secs, sizeof secs, "%.2f s", rec.seconds);
      progress_->point_done(rec.status == PointStatus::failed,
                            pt.label + ": " +
                                (rec.status == PointStatus::ok ? "ok" : "FAILED: " + rec.error) +
                                " (" + secs + ")");
    }
  }

  // The point's status; a failure's line in failures.csv (a point's rows are written by
  // record_batch, with the rest of its batch).
  void classify(const Point& pt, const PointOutcome& o, PointRecord* rec) {
    const pl_status st = pl_status(o.status);
    std::string err;
    if (st == PL_OK && o.fail_reason.empty()) {
      rec->status = PointStatus::ok;
      for (const auto& t : o.rows) rec->rows += t.size();
    } else if ((o.stop_seen || g_stop.load()) &&
               (st == PL_CANCELLED || (st != PL_OK && o.fail_reason.empty()))) {
      rec->status = PointStatus::cancelled;  // stopped by Ctrl-C: run it again on --resume
    } else {
      rec->status = PointStatus::failed;
      rec->error = !o.fail_reason.empty() ? o.fail_reason
                   : st == PL_CANCELLED   ? "plugin returned cancelled without a stop request"
                                          : "plugin reported failure without a reason";
      if (!store_.record_failure(pt.index, pt.key_cells, rec->error, &err)) io_failed(err);
    }
  }

  // A second Ctrl-C: no point is half-written once the store is frozen; record and exit.
  void start_abort_watcher() {
    if (::pipe2(g_abort_pipe, O_CLOEXEC) != 0) return;
    watcher_ = std::thread([this] {
      char c = 0;
      while (::read(g_abort_pipe[0], &c, 1) < 0 && errno == EINTR) {
      }
      if (c != 'x') return;  // closed: the run ended normally
      store_.freeze();
      size_t kept;
      {
        std::lock_guard<std::mutex> l(recs_mu_);
        kept = count({PointStatus::ok, PointStatus::resumed});
      }
      std::string e;
      const bool ok =
          write_record("aborted", kExitInterrupted, "aborted by a second Ctrl-C", {}, "", &e);
      std::fprintf(stderr,
                   "phaselab: aborted: %zu of %zu points done are kept%s; continue with: %s\n",
                   kept, points_.size(), ok ? "" : (" (" + e + ")").c_str(), resume_cmd().c_str());
      lock_.release();
      ::_exit(kExitInterrupted);
    });
  }

  void stop_abort_watcher() {
    if (!watcher_.joinable()) return;
    ::close(g_abort_pipe[1]);  // wakes the watcher with end-of-file
    g_abort_pipe[1] = -1;
    watcher_.join();
    ::close(g_abort_pipe[0]);
    g_abort_pipe[0] = -1;
  }

  // ---------------------------------------------------------------- record
  // Points of this run (this shard's) with one of these statuses.
  size_t count(std::initializer_list<PointStatus> which) const {
    size_t n = 0;
    for (const Point& p : points_)
      n += std::find(which.begin(), which.end(), recs_.at(p.index).status) != which.end();
    return n;
  }

  // After the points: interrupted, a write error, or the tables in point order, the plugin's
  // finish and figures (not for a shard: `merge` makes them once) and the last run.json.
  int conclude() {
    if (io_error_) return write_failure(io_why_);
    if (g_stop.load()) return interrupted();
    std::string why;
    if (!store_.finalize(&why)) return write_failure(why);
    int code = count({PointStatus::failed}) ? kExitFailed : kExitOk;
    std::vector<FigureResult> figs;
    std::string tool;
    bool have_tool = true;
    if (!opt_.shard.count &&
        !finish_run(cfg_, plugin_, kt_, out_, threads_, progress_.get(), &figs, &tool, &have_tool))
      code = kExitFailed;
    // A search's boundaries.csv and search_points.csv (a shard's too: its own searches), and
    // its figures (a shard's are drawn by merge).
    if (plan_) {
      std::string search_tool;
      if (!write_search_outputs(out_, cfg_, plugin_, !opt_.shard.count, &figs, &search_tool, &why))
        return write_failure(why);
      if (!opt_.shard.count && (tool.empty() || !have_tool)) {
        tool = search_tool;
        have_tool = search_tool.rfind("gnuplot", 0) == 0;
      }
    }
    report_figures(figs, have_tool, tool, &code);
    std::string e;
    if (!write_record(code == kExitOk      ? "ok"
                      : code == kExitWrite ? "write_error"
                                           : "failed",
                      code, code == kExitWrite ? "a figure could not be written (see figures)" : "",
                      figs, tool, &e)) {
      std::fprintf(stderr, "phaselab: error: %s\n", e.c_str());
      return kExitWrite;
    }
    lock_.release();
    print_summary(figs);
    return code;
  }

  // A write that failed (disk full, I/O error) stops the run: say so loudly, keep run.json true.
  int write_failure(const std::string& what) {
    store_.close();
    std::string e;
    const bool json_ok = write_record("write_error", kExitWrite, what, {}, "", &e);
    std::fprintf(stderr,
                 "phaselab: error: %s\nphaselab: the run stopped: %zu of %zu points are done and "
                 "kept (whole rows only); free space and continue with: %s\n",
                 what.c_str(), count({PointStatus::ok, PointStatus::resumed}), points_.size(),
                 resume_cmd().c_str());
    if (!json_ok)
      std::fprintf(stderr, "phaselab: error: %s (run.json may still say \"running\")\n", e.c_str());
    return kExitWrite;
  }

  // Interrupted: the files keep the rows appended so far (complete points only).
  int interrupted() {
    store_.close();
    std::fprintf(stderr, "phaselab: interrupted: %zu of %zu points done; continue with: %s\n",
                 count({PointStatus::ok, PointStatus::resumed}), points_.size(),
                 resume_cmd().c_str());
    std::string e;
    if (!write_record("interrupted", kExitInterrupted, "", {}, "", &e)) {
      std::fprintf(stderr, "phaselab: error: %s\n", e.c_str());
      return kExitWrite;
    }
    return kExitInterrupted;
  }

  // Figures for samplers, modes or swept keys this run does not have are not a problem: one
  // info line. Other reasons: one warning per distinct reason, naming its figures. A figure
  // that could not be written makes the exit status 5 (the results are whole; --resume redraws).
  void report_figures(const std::vector<FigureResult>& figs, bool have_tool,
                      const std::string& tool, int* code) {
    if (!figs.empty() && !have_tool) {
      progress_->warn("phaselab: no figures drawn: " + tool + "; the .gp scripts are in " + out_ +
                      "/figures");
      return;
    }
    std::vector<std::string> not_here;
    std::vector<std::pair<std::string, std::string>> reasons;  // (note, figure names)
    for (const auto& f : figs) {
      if (!f.also_note.empty()) {  // the PNG is drawn, a PDF or SVG beside it is not
        const bool write = f.also_note.find("cannot write") != std::string::npos;
        if (write) *code = kExitWrite;
        if (write)
          std::fprintf(stderr, "phaselab: error: figure %s: %s\n", f.name.c_str(),
                       f.also_note.c_str());
        else
          progress_->warn("phaselab: figure " + f.name + " drawn as a PNG only: " + f.also_note);
      }
      if (!f.png.empty()) continue;
      if (f.note.rfind("no rows to plot", 0) == 0 ||
          f.note.find("excludes this run") != std::string::npos) {
        not_here.push_back(f.name);
      } else if (f.note.rfind("cannot write", 0) == 0) {
        std::fprintf(stderr, "phaselab: error: figure %s: %s\n", f.name.c_str(), f.note.c_str());
        *code = kExitWrite;
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
      progress_->warn("phaselab: figure" +
                      std::string(r.second.find(',') != std::string::npos ? "s " : " ") + r.second +
                      " not drawn: " + r.first);
    if (!not_here.empty() && !opt_.quiet)
      progress_->info("phaselab: " + std::to_string(not_here.size()) + " figure" +
                      (not_here.size() > 1 ? "s" : "") +
                      " for samplers or modes this run does not use not drawn (see run.json)");
  }

  void print_summary(const std::vector<FigureResult>& figs) {
    const size_t ok = count({PointStatus::ok, PointStatus::resumed});
    const size_t failed = count({PointStatus::failed});
    if (!opt_.quiet || failed) {
      std::string summary = "phaselab: " + std::to_string(ok) + " of " +
                            std::to_string(points_.size()) + " points ok";
      if (failed)
        summary += ", " + std::to_string(failed) + " failed (see " + out_ + "/failures.csv)";
      std::fprintf(stderr, "%s\n", summary.c_str());
    }
    if (opt_.quiet) return;
    size_t drawn = 0;
    for (const auto& f : figs) drawn += !f.png.empty();
    std::printf("results: %s/results.csv\nrun record: %s\n", out_.c_str(), json_path_.c_str());
    if (drawn) std::printf("figures: %s/figures/ (%zu drawn)\n", out_.c_str(), drawn);
    if (opt_.shard.count) {
      const std::string parent = out_.substr(0, out_.rfind('/'));
      std::printf("shard %llu of %llu done; when all are: phaselab merge %s %s/shard-*\n",
                  (unsigned long long)opt_.shard.index, (unsigned long long)opt_.shard.count,
                  parent.c_str(), parent.c_str());
    }
  }

  std::string continue_hint() const { return "; free space and continue with: " + resume_cmd(); }
  // The whole command that continues this run: the config's absolute path, --shard, --target.
  std::string resume_cmd() const {
    return resume_command(cfg_.file, opt_.shard, opt_.target, out_, cfg_.overrides);
  }

  // Points this run records: a search's are not known before it ends (its first grid and
  // about eight more per search are reserved for; run.json grows past that only if the disk has
  // room).
  size_t expected_points() const {
    if (!plan_) return points_.size();
    return searches_.size() *
           size_t(std::min<int64_t>(cfg_.search.max_evaluations, cfg_.search.initial + 8));
  }

  // run.json with a reserve for the last one; on failure says so (and records it where a
  // run.json could be written at all).
  bool start_record() {
    std::string why;
    if (write_record("running", -1, "", {}, "", &why) &&
        reserve_.make(out_ + "/run.reserve", off_t(8192 + 2 * (4096 + expected_points() * 200)),
                      &why))
      return true;
    std::fprintf(stderr, "phaselab: error: %s; nothing was run%s\n", why.c_str(),
                 continue_hint().c_str());
    reserve_.release();
    std::string e;
    if (fs::exists(json_path_))
      write_record("write_error", kExitWrite, why + "; nothing was run", {}, "", &e);
    return false;
  }

  // Writes run.json; the final one (code >= 0) first frees the reserve and, if even then the
  // disk is full, replaces the file in place. False with *err naming the path and errno.
  bool write_record(const char* status, int code, const std::string& error,
                    const std::vector<FigureResult>& figs, const std::string& tool,
                    std::string* err) {
    std::string text;
    {
      std::lock_guard<std::mutex> l(recs_mu_);
      text = json_text(record_json(status, code, error, figs, tool), {"shard", "counts"});
    }
    if (code >= 0) reserve_.release();
    std::string w;
    if (write_file_atomic(json_path_, text, &w)) return true;
    *err = "cannot write " + json_path_ + ": " + w;
    return code >= 0 && overwrite_in_place(json_path_, text, &w);
  }

  // The run record (docs/config.md "run.json"); a running run (code < 0) has no end time and
  // exit status -1.
  ordered_json record_json(const char* status, int code, const std::string& error,
                           const std::vector<FigureResult>& figs, const std::string& tool) const {
    ordered_json j;
    j["phaselab_version"] = PHASELAB_VERSION;
    j["git_commit"] = git_commit();
    j["command"] = opt_.argv;
    j["status"] = status;
    j["exit_status"] = code < 0 ? -1 : code;
    if (!error.empty()) j["error"] = error;
    j["start_time"] = start_time_;
    j["end_time"] = code < 0 ? "" : utc_now();
    j["wall_seconds"] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start_).count();
    j["out"] = out_;
    j["cpu"] = cpu_model();
    j["threads"] = threads_;
    if (opt_.shard.count)
      j["shard"] = {{"index", opt_.shard.index},
                    {"count", opt_.shard.count},
                    {"source", opt_.shard.source},
                    {"points_in_run", count_points(cfg_)}};
    if (mpi_size() > 1) j["mpi_ranks"] = mpi_size();
    j["plugin"] = {{"name", p_.name},
                   {"version", p_.version ? p_.version : ""},
                   {"path", plugin_.abs_path.empty() ? plugin_.path : plugin_.abs_path},
                   {"sha256", plugin_.sha256}};
    j["config"] = config_json();
    j["kernel_target"] = kt_.target ? kt_.target : "";
    j["kernels"] = ordered_json::object();
#define PL_KERNEL(name, Camel, ret, params) \
  j["kernels"][#name] = kt_.variant->name ? kt_.variant->name : "";
#include "phaselab/kernels.def"
#undef PL_KERNEL
    if (plan_)
      j["search"] = {{"searches", searches_.size()},
                     {"evaluations", points_.size()},
                     {"rounds", rounds_},
                     {"outputs", {"boundaries.csv", "search_points.csv"}}};
    j["counts"] = {{"points", points_.size()},
                   {"ok", count({PointStatus::ok})},
                   {"failed", count({PointStatus::failed})},
                   {"done_before", count({PointStatus::resumed})},
                   {"cancelled", count({PointStatus::cancelled})},
                   {"not_run", count({PointStatus::not_run})}};
    // How the finished points reached the disk (this process's writes; batches of points that
    // finished together, one fdatasync per file touched).
    j["writes"] = {{"batches", store_.batches()}, {"fdatasync", store_.syncs()}};
    j["figure_tool"] = tool;
    j["figures"] = ordered_json::array();
    for (const auto& f : figs) j["figures"].push_back(figure_json<ordered_json>(f));
    j["points"] = points_json();
    return j;
  }

  // The config as resolved: [run], the sweep, every parameter outside the sweep (the plugin
  // table's value, else the default) and the TOML text.
  ordered_json config_json() const {
    ordered_json c;
    c["file"] = cfg_.file;
    c["plugin"] = cfg_.plugin;
    c["name"] = cfg_.name;
    c["run"] = {{"seeds", cfg_.seeds},
                {"threads", opt_.threads >= 0 ? opt_.threads : cfg_.threads},
                {"out", out_},
                {"target", kt_.target ? kt_.target : ""},
                {"figure_formats", cfg_.figure_formats},
                {"resume", opt_.resume}};
    c["sweep"] = ordered_json::object();
    for (const auto& a : cfg_.sweep) {
      ordered_json values = ordered_json::array();
      for (const auto& v : a.values) values.push_back(param_json<ordered_json>(v));
      c["sweep"][a.key] = values;
    }
    c["params"] = ordered_json::object();
    for (size_t i = 0; i < cfg_.base.size(); ++i)
      if (!swept(cfg_, i))
        c["params"][plugin_.param_names[i]] = param_json<ordered_json>(cfg_.base[i]);
    if (cfg_.search.on) c["search"] = search_json<ordered_json>(cfg_.search);
    c["toml"] = cfg_.text;
    if (!cfg_.overrides.empty()) c["overrides"] = cfg_.overrides;
    return c;
  }

  ordered_json points_json() const {
    ordered_json a = ordered_json::array();
    // The plugin's cost estimate of each point beside its seconds, so estimate and measurement
    // can be compared (bench/cost_rank.py) and `phaselab status` users see what it dispatched by.
    const std::vector<double> costs =
        point_costs(std::vector<Point>(points_.begin(), points_.end()), plugin_);
    size_t k = 0;
    for (const Point& p : points_) {
      const PointRecord& r = recs_.at(p.index);
      const size_t ip = k++;
      ordered_json o = {{"index", p.index}};
      for (const auto& s : cfg_.sweep) o[s.key] = param_json<ordered_json>(p.params[s.param]);
      if (plan_) o[cfg_.search.key] = param_json<ordered_json>(p.params[cfg_.search.param]);
      o["seed"] = p.seed;
      if (plan_) {
        o["search_round"] = std::stoi(p.key_cells.back());
        if (r.labelled) o["label"] = r.label;
      }
      o["status"] = status_name(r.status);
      o["seconds"] = r.seconds;
      if (!costs.empty()) o["cost"] = costs[ip];
      o["rows"] = r.rows;
      if (mpi_size() > 1 && r.status != PointStatus::resumed) o["rank"] = r.rank;
      if (!r.error.empty()) o["error"] = r.error;
      a.push_back(std::move(o));
    }
    return a;
  }

  const RunConfig& cfg_;
  const Plugin& plugin_;
  const pl_plugin& p_;
  const RunOptions& opt_;
  const std::chrono::steady_clock::time_point wall_start_ = std::chrono::steady_clock::now();
  const std::string start_time_ = utc_now();
  // plan
  pl_kernel_table kt_{};
  std::string out_, json_path_;
  int threads_ = 1;
  RunLock lock_;
  std::string lock_note_;
  std::deque<Point> points_;  // a [search] run adds each round's points (references stay valid)
  std::unique_ptr<SearchPlan> plan_;                // [search]
  std::set<uint64_t> searches_;                     // [search]: this run's (this shard's) searches
  std::map<uint64_t, std::vector<Row>> done_rows_;  // [search] --resume: rows of points done
  std::map<uint64_t, size_t> kept_rows_;            // --resume: rows kept per point done before
  int rounds_ = 0;
  std::mutex round_mu_;  // [search]: todo_ and next_ of the round (MPI serves from them), and:
  std::condition_variable round_cv_;
  size_t round_recorded_ = 0;  // points of the round recorded
  bool search_over_ = false;   // no round follows
  // execute
  ResultStore store_;
  std::set<uint64_t> done_;
  std::map<uint64_t, PointRecord> recs_;  // by point index, one for every point of points_
  std::mutex recs_mu_;                    // guards recs_ against the abort watcher's snapshot
  std::vector<const Point*> todo_;
  std::unique_ptr<std::atomic<double>[]> fractions_;
  std::unique_ptr<Progress> progress_;
  std::thread watcher_;
  // The recorder thread's queue of finished points (record_point, start_recorder).
  std::mutex rq_mu_;
  std::condition_variable rq_cv_;
  std::deque<std::pair<const Point*, PointOutcome>> rq_;
  bool rq_busy_ = false, rq_quit_ = false;
  std::thread recorder_;
  std::atomic<size_t> next_{0};
  std::mutex io_mu_;
  bool io_error_ = false;
  std::string io_why_;
  // record
  SpaceReserve reserve_;
};

}  // namespace

bool stop_requested() { return g_stop.load() != 0; }

namespace {
struct sigaction g_old_int {
}, g_old_term{}, g_old_hup{}, g_old_pipe{};
}  // namespace

void install_stop_handlers() {
  g_stop = 0;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, &g_old_int);
  ::sigaction(SIGTERM, &sa, &g_old_term);
  ::sigaction(SIGHUP, &sa, &g_old_hup);
  ::sigaction(SIGPIPE, &sa, &g_old_pipe);
}

void restore_stop_handlers() {
  ::sigaction(SIGINT, &g_old_int, nullptr);
  ::sigaction(SIGTERM, &g_old_term, nullptr);
  ::sigaction(SIGHUP, &g_old_hup, nullptr);
  ::sigaction(SIGPIPE, &g_old_pipe, nullptr);
}

void run_on_workers(int threads, const std::function<void(int)>& worker) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(threads));
  tbb::task_arena arena(threads);
  arena.execute([&] {
    tbb::task_group g;
    for (int w = 0; w < threads; ++w) g.run([&, w] { worker(w); });
    g.wait();
  });
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
  pl_host host = make_host(&ctx, kt, out, threads);
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
                std::vector<FigureResult>* figs, std::string* tool, bool* have_tool,
                const std::string& title_note) {
  const pl_plugin& p = plugin.entry;
  bool ok = true;
  if (p.finish) {
    Shared sh{&p, progress};
    PointCtx ctx;
    ctx.sh = &sh;
    Point none;
    none.label = "finish";
    ctx.pt = &none;
    ctx.rows.resize(p.num_tables);
    std::atomic<double> frac{0};
    ctx.fraction = &frac;
    pl_host host = make_host(&ctx, kt, out, threads);
    if (p.finish(&host, out.c_str()) != PL_OK) {
      progress->warn("phaselab: " + std::string(p.name) + " finish failed: " +
                     (ctx.fail_reason.empty() ? "no reason given" : ctx.fail_reason));
      ok = false;
    }
  }
  // Figures from the finished files; the values of parameters that are not columns let
  // filters on them work.
  std::map<std::string, std::string> constants;
  for (size_t i = 0; i < cfg.base.size(); ++i)
    if (!swept(cfg, i)) constants[plugin.param_names[i]] = value_text(cfg.base[i]);
  *figs = render_figures(p, out, constants, tool, have_tool, title_note, cfg.figure_formats);
  return ok;
}

int execute_run(const RunConfig& cfg, const Plugin& plugin, const RunOptions& opt) {
  return Run(cfg, plugin, opt).go();
}

}  // namespace pl::driver
