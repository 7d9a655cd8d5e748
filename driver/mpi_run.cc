// SPDX-License-Identifier: Apache-2.0
#include "driver/mpi_run.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#define TBB_PREVIEW_GLOBAL_CONTROL 1

#include "driver/progress.hpp"
#include "driver/search.hpp"

#ifdef PHASELAB_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only (Open MPI's C++ bindings warn under -Wextra)
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace pl::driver {
namespace {

// Ranks as the launcher announces them (before MPI_Init, so a build without MPI can refuse).
int launched_size() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"}) {
    const char* s = std::getenv(v);
    if (s && *s) return std::atoi(s);
  }
  return 1;
}

int g_size = 1, g_rank = 0;

}  // namespace

int mpi_size() { return g_size; }
int mpi_rank() { return g_rank; }

PointSource list_source(const std::vector<uint64_t>& todo, std::atomic<size_t>* next) {
  PointSource s;
  s.take = [&todo, next](size_t k, size_t* left, bool* more) {
    std::vector<uint64_t> block;
    if (k > 0) {
      const size_t j = next->fetch_add(k);
      for (size_t i = j; i < j + k && i < todo.size(); ++i) block.push_back(todo[i]);
    }
    const size_t taken = next->load();
    *left = taken < todo.size() ? todo.size() - taken : 0;
    *more = false;
    return block;
  };
  return s;
}

#ifndef PHASELAB_MPI

bool mpi_built() { return false; }

bool mpi_start(int*, char***, std::string* error) {
  if (launched_size() > 1) {
    *error = "this phaselab was built without MPI, but was started as one of " +
             std::to_string(launched_size()) +
             " MPI ranks (every rank would run every point into the same folder); rebuild with "
             "Open MPI installed (libopenmpi-dev; meson option -Dmpi=enabled), or run one process";
    return false;
  }
  return true;
}

bool mpi_coordinate(const PointSource&, const std::string&, const std::string&,
                    const std::function<void()>& run_local,
                    const std::function<void(uint64_t, PointOutcome&&)>&, std::string*) {
  run_local();
  return true;
}

int mpi_worker(const RunConfig&, const Plugin&, const RunOptions&) { return kExitUsage; }

int mpi_end(int code) { return code; }

#else  // PHASELAB_MPI

namespace {

enum Tag { kTagRequest = 1, kTagAssign = 2, kTagResult = 3, kTagDone = 4 };

bool g_active = false;     // MPI_Init was called
bool g_go_done = false;    // the start broadcast happened
bool g_go = false;         // ... and said go
bool g_abandoned = false;  // rank 0 stopped waiting for the workers (a rank died)
std::mutex g_mpi_mu;       // worker ranks: one thread in MPI at a time (MPI_THREAD_SERIALIZED)

// Byte buffers for the messages: u64, f64 and length-prefixed strings, host byte order (the
// ranks of one job run the same binary).
struct Writer {
  std::string b;
  void u64(uint64_t v) { b.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void f64(double v) { b.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void str(const std::string& s) {
    u64(s.size());
    b += s;
  }
};
struct Reader {
  const std::string& b;
  size_t at = 0;
  bool ok = true;
  bool take(void* p, size_t n) {
    if (!ok || at + n > b.size()) return ok = false;
    std::memcpy(p, b.data() + at, n);
    at += n;
    return true;
  }
  uint64_t u64() {
    uint64_t v = 0;
    take(&v, sizeof v);
    return v;
  }
  double f64() {
    double v = 0;
    take(&v, sizeof v);
    return v;
  }
  std::string str() {
    const uint64_t n = u64();
    if (!ok || at + n > b.size()) {
      ok = false;
      return "";
    }
    std::string s = b.substr(at, n);
    at += n;
    return s;
  }
};

std::string encode(uint64_t index, const PointOutcome& o) {
  Writer w;
  w.u64(index);
  w.u64(uint64_t(o.status));
  w.f64(o.seconds);
  w.u64(o.stop_seen ? 1 : 0);
  w.u64(uint64_t(o.rank));
  w.str(o.fail_reason);
  w.u64(o.rows.size());
  for (const auto& table : o.rows) {
    w.u64(table.size());
    for (const Row& r : table) {
      w.u64(r.size());
      for (const auto& c : r) w.str(c);
    }
  }
  return w.b;
}

bool decode(const std::string& b, uint64_t* index, PointOutcome* o) {
  Reader r{b};
  *index = r.u64();
  o->status = int(r.u64());
  o->seconds = r.f64();
  o->stop_seen = r.u64() != 0;
  o->rank = int(r.u64());
  o->fail_reason = r.str();
  const uint64_t nt = r.u64();
  if (!r.ok || nt > 1u << 20) return false;
  o->rows.resize(nt);
  for (auto& table : o->rows) {
    const uint64_t nr = r.u64();
    for (uint64_t i = 0; r.ok && i < nr; ++i) {
      Row row(r.u64());
      for (auto& c : row) c = r.str();
      table.push_back(std::move(row));
    }
  }
  return r.ok && r.at == b.size();
}

// The start broadcast: go flag, run folder, kernel target. Every rank takes part exactly once.
bool broadcast_go(bool go, std::string* out, std::string* target) {
  Writer w;
  if (g_rank == 0) {
    w.u64(go ? 1 : 0);
    w.str(*out);
    w.str(*target);
  }
  uint64_t n = w.b.size();
  MPI_Bcast(&n, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  w.b.resize(n);
  MPI_Bcast(&w.b[0], int(n), MPI_BYTE, 0, MPI_COMM_WORLD);
  Reader r{w.b};
  g_go = r.u64() != 0;
  *out = r.str();
  *target = r.str();
  g_go_done = true;
  return g_go;
}

}  // namespace

bool mpi_built() { return true; }

bool mpi_start(int* argc, char*** argv, std::string* error) {
  if (launched_size() <= 1) return true;
  int provided = 0;
  if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
    *error = "MPI_Init_thread failed";
    return false;
  }
  g_active = true;
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  if (provided < MPI_THREAD_SERIALIZED) {
    *error = "the MPI library does not allow calls from several threads (MPI_THREAD_SERIALIZED)";
    return false;
  }
  return true;
}

bool mpi_coordinate(const PointSource& source, const std::string& out, const std::string& target,
                    const std::function<void()>& run_local,
                    const std::function<void(uint64_t, PointOutcome&&)>& record,
                    std::string* error) {
  std::string o = out, t = target;
  broadcast_go(true, &o, &t);
  std::thread local(run_local);
  int done_ranks = 0;
  bool bad = false;
  std::chrono::steady_clock::time_point stop_seen{};
  while (done_ranks < g_size - 1) {
    if (stop_requested()) {
      // After a stop the workers send their cancelled points and finish within moments; a rank
      // that was killed never does. The launcher kills the job soon after, so rank 0 does not
      // wait long: what finished is already on disk.
      const auto now = std::chrono::steady_clock::now();
      if (stop_seen == std::chrono::steady_clock::time_point{}) stop_seen = now;
      if (now - stop_seen > std::chrono::milliseconds(250)) {
        g_abandoned = true;
        break;
      }
    }
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
    if (!flag) {
      // Polling with a short sleep: Open MPI's blocking receive spins a core.
      std::this_thread::sleep_for(std::chrono::microseconds(500));
      continue;
    }
    const int src = st.MPI_SOURCE;
    if (st.MPI_TAG == kTagRequest) {
      int dummy = 0;
      MPI_Recv(&dummy, 1, MPI_INT, src, kTagRequest, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      // One point per request, the next in the source's order (costliest first where the
      // plugin has an estimate): a thread holds only the point it runs, so no thread waits
      // behind another's queue while a point is left. (Blocks of several points cost fewer
      // round trips but left threads idle at the end: 96 points of 2 s on 2 x 32 threads took
      // 8.8 s in blocks of ~left/(8 R).) A round trip is a few hundred microseconds, and finished
      // points are written off this thread (the recorder), so tiny points keep up.
      // An empty block: no more points; {-1}: none now, ask again (a search between rounds).
      std::vector<int64_t> block;
      if (!stop_requested()) {
        size_t left = 0;
        bool more = false;
        for (uint64_t i : source.take(1, &left, &more)) block.push_back(int64_t(i));
        if (block.empty() && more) block.push_back(-1);
      }
      MPI_Send(block.data(), int(block.size()), MPI_INT64_T, src, kTagAssign, MPI_COMM_WORLD);
    } else if (st.MPI_TAG == kTagResult) {
      int n = 0;
      MPI_Get_count(&st, MPI_BYTE, &n);
      std::string buf(size_t(n), '\0');
      MPI_Recv(n ? &buf[0] : nullptr, n, MPI_BYTE, src, kTagResult, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
      uint64_t index = 0;
      PointOutcome po;
      if (!decode(buf, &index, &po)) {
        *error = "a malformed result message from MPI rank " + std::to_string(src);
        bad = true;
        continue;
      }
      record(index, std::move(po));
    } else if (st.MPI_TAG == kTagDone) {
      int dummy = 0;
      MPI_Recv(&dummy, 1, MPI_INT, src, kTagDone, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      ++done_ranks;
    } else {
      *error = "an unexpected MPI message (tag " + std::to_string(st.MPI_TAG) + ") from rank " +
               std::to_string(src);
      g_abandoned = bad = true;
      break;  // the protocol is broken: mpi_end aborts the job
    }
  }
  local.join();
  return !bad;
}

int mpi_worker(const RunConfig& cfg, const Plugin& plugin, const RunOptions& opt) {
  std::string out, target;
  if (!broadcast_go(false, &out, &target)) return kExitOk;  // rank 0 reports its error
  pl_kernel_table kt;
  std::string why;
  if (!check_target(target, &why)) {
    std::fprintf(stderr, "phaselab: rank %d: error: kernel target %s: %s\n", g_rank, target.c_str(),
                 why.c_str());
    MPI_Abort(MPI_COMM_WORLD, kExitUsage);
  }
  select_kernel_table(target, &kt);
  const std::vector<Point> points =
      cfg.search.on ? std::vector<Point>{} : enumerate_points(cfg, plugin);
  const SearchPlan plan(cfg, plugin);  // [search]: a point from its index
  const int threads = resolve_threads(cfg, opt);
  std::unique_ptr<std::atomic<double>[]> fractions(new std::atomic<double>[size_t(threads)]);
  Progress progress(0, true, [] { return 0.0; });
  install_stop_handlers();
  run_on_workers(threads, [&](int w) {
    while (!stop_requested()) {
      std::vector<int64_t> block;  // empty: no points left
      {
        std::lock_guard<std::mutex> lock(g_mpi_mu);
        int dummy = 0, n = 0;
        MPI_Send(&dummy, 1, MPI_INT, 0, kTagRequest, MPI_COMM_WORLD);
        MPI_Status st;
        MPI_Probe(0, kTagAssign, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_INT64_T, &n);
        block.resize(size_t(n));
        MPI_Recv(block.data(), n, MPI_INT64_T, 0, kTagAssign, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      }
      if (block.empty()) break;
      if (block.size() == 1 && block[0] == -1) {  // a search between rounds: ask again soon
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        continue;
      }
      for (const int64_t idx : block) {
        if (stop_requested()) break;  // the rest is run again on --resume
        Point searched;
        const Point* pt = nullptr;
        if (cfg.search.on) {
          const uint64_t s = uint64_t(idx) / kSearchSlot, off = uint64_t(idx) % kSearchSlot;
          if (idx < 0 || s >= plan.size() || off > kSearchGrid) continue;
          searched = plan.point(s, off, 0);  // the round only names the point in messages
          pt = &searched;
        } else {
          if (idx < 0 || uint64_t(idx) >= points.size()) continue;
          pt = &points[size_t(idx)];
        }
        const PointOutcome o =
            compute_point(plugin.entry, *pt, kt, out, threads, &progress, &fractions[size_t(w)]);
        const std::string buf = encode(uint64_t(idx), o);
        std::lock_guard<std::mutex> lock(g_mpi_mu);
        MPI_Send(buf.data(), int(buf.size()), MPI_BYTE, 0, kTagResult, MPI_COMM_WORLD);
      }
    }
  });
  restore_stop_handlers();
  int dummy = 0;
  MPI_Send(&dummy, 1, MPI_INT, 0, kTagDone, MPI_COMM_WORLD);
  return kExitOk;
}

int mpi_end(int code) {
  if (!g_active) return code;
  if (!g_go_done) {
    std::string out, target;
    broadcast_go(false, &out, &target);
    if (g_rank != 0 && g_go) {  // rank 0 started but this rank could not: it takes no points
      int dummy = 0;
      MPI_Send(&dummy, 1, MPI_INT, 0, kTagDone, MPI_COMM_WORLD);
    }
  }
  if (g_abandoned) MPI_Abort(MPI_COMM_WORLD, code);  // some rank will not reach MPI_Finalize
  MPI_Finalize();
  return code;
}

#endif  // PHASELAB_MPI

}  // namespace pl::driver
