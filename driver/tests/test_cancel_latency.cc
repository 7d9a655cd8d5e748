// SPDX-License-Identifier: Apache-2.0
// Ctrl-C latency of a long kernel: a copy_task point whose single sequence is over the plugin's
// piece budget is stopped by SIGINT within a few row blocks. The budget is lowered for the test
// (PHASELAB_COPY_CHUNK_COST = 1.95e9 instead of 8e9) and L, V with it (640, 1500 instead of
// 1024, 2400: ~2.05e9 multiply-adds per sequence), so the sequence is cut into the same 9 row
// blocks as at the default budget, at a quarter of the work and 40% of the memory. The bound is
// computed here from the measured CPU time of one such block (posattn_onehot_sse_rows, the
// plugin's block size) and compared with the CPU time the run spends after the signal, so
// machine load does not move it; before row blocks, the whole sequence (9 blocks) ran first (with
// the budget above one sequence the run spends ~2 s CPU after the signal, over the bound). A
// second Ctrl-C right after the first still records the finished point. Runs the built phaselab
// (PHASELAB_EXE) with its own plugin folder.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "phaselab/kernel_table.h"
#include "phaselab/kernels.hpp"

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t count_lines(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

struct TempDir {
  std::string path;
  TempDir() {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t ? t : "/tmp") + "/phaselab-cancel-test-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back(0);
    REQUIRE(::mkdtemp(buf.data()) != nullptr);
    path = buf.data();
  }
  ~TempDir() {
    const std::string cmd = "rm -rf '" + path + "'";
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", path.c_str());
  }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

pid_t spawn_run(const TempDir& d, const std::string& out) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::unsetenv("PHASELAB_PLUGIN_PATH");                 // the binary's own plugin folder: copy_task
    ::setenv("PHASELAB_GNUPLOT", "", 1);                // no figures
    ::setenv("PHASELAB_COPY_CHUNK_COST", "1.95e9", 1);  // kChunk: 9 row blocks at kL, kV
    const int e = ::open((d / (out + ".err")).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(e, 2);
    const char* exe_env = std::getenv("PHASELAB_EXE");
    const std::string exe = exe_env ? exe_env : "phaselab";
    const std::string cfg = d / "big.toml", dir = d / out;
    ::execl(exe.c_str(), exe.c_str(), "run", cfg.c_str(), "--out", dir.c_str(), "--threads", "2",
            "--force", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// CPU time (user + system) of a running process from /proc/PID/stat, seconds.
double proc_cpu(pid_t pid) {
  const std::string s = slurp("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = s.rfind(')');
  REQUIRE(close != std::string::npos);
  std::istringstream in(s.substr(close + 2));
  std::string f;
  std::vector<std::string> fields;
  while (in >> f) fields.push_back(f);
  REQUIRE(fields.size() > 13);  // fields 14, 15 (utime, stime) are [11], [12] after the name
  return double(std::stoll(fields[11]) + std::stoll(fields[12])) / double(::sysconf(_SC_CLK_TCK));
}

double thread_cpu() {
  timespec t;
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

void wait_for(const std::string& path, const char* what, double seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  while (slurp(path).find(what) == std::string::npos &&
         std::chrono::steady_clock::now() - t0 < std::chrono::duration<double>(seconds))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

constexpr size_t kL = 640, kV = 1500;
constexpr double kChunk = 1.95e9;  // PHASELAB_COPY_CHUNK_COST of the runs

}  // namespace

TEST_CASE("Ctrl-C stops a long copy_task sequence between row blocks; a second Ctrl-C records") {
  // One row block as the plugin cuts it (model.cc: rows = chunk_cost / (8 (V^2 + L V))), timed on
  // this thread with the kernels the run selects; the second call is timed (the first also faults
  // in the scratch memory).
  pl_kernel_table k;
  std::string err;
  REQUIRE(pl::select_kernels("", &k, &err));
  const double per_row = double(kV) * kV + double(kL) * kV;
  REQUIRE(double(kL) * per_row > kChunk);  // one sequence is over the budget: row blocks
  const size_t rows = size_t(kChunk / (8.0 * per_row));
  REQUIRE((kL + rows - 1) / rows == 9);
  std::vector<float> a(kL * kL, 1.f / kL), w(kV * kV, 0.01f), da(kL * kL), dw(kV * kV);
  std::vector<int32_t> x(kL), y(kL);
  for (size_t i = 0; i < kL; ++i) {
    x[i] = int32_t((i * 7919) % kV);
    y[i] = x[(i + kL - 1) % kL];
  }
  double block = 0;
  for (int rep = 0; rep < 2; ++rep) {
    const double t0 = thread_cpu();
    k.posattn_onehot_sse_rows(a.data(), w.data(), x.data(), y.data(), da.data(), dw.data(), 1, kL,
                              kV, 0, rows);
    block = thread_cpu() - t0;
  }
  // Three blocks, and the exit itself: ~0.1 s measured in a release build; under AddressSanitizer
  // the leak check at exit scans the heap, so more (blocks are slower there too, in proportion).
  // Finishing the sequence instead would take the 8 blocks after the first: the bound must be
  // below that for the test to tell the two apart (a block is ~0.3 s CPU at these sizes).
#if defined(__SANITIZE_ADDRESS__)
  const double exit_allowance = 2.0;
#else
  const double exit_allowance = 0.5;
#endif
  const double bound = 3 * block + exit_allowance;
  WARN_MESSAGE(bound < 8 * block, "blocks too fast here to tell row blocks from whole sequences");
  MESSAGE("one block (" << rows << " of " << kL << " rows): " << block << " s CPU; bound " << bound
                        << " s");

  TempDir d;
  {
    std::ofstream cfg(d / "big.toml");
    cfg << "plugin = \"copy_task\"\n[run]\nseeds = [1]\n[sweep]\nV = [4, " << kV
        << "]\n[copy_task]\nL = " << kL
        << "\nP = 2\nP_test = 0\ninit = \"uniform\"\nmax_steps = 20\nloss_path = \"direct\"\n";
  }
  // First run: one SIGINT once the small point is done and the large one is inside its first
  // sequence (a block's CPU time in).
  pid_t pid = spawn_run(d, "one");
  wait_for(d / "one.err", "[1/2]", 120);
  const double cpu_small = proc_cpu(pid);
  while (proc_cpu(pid) < cpu_small + block)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const double cpu0 = proc_cpu(pid);
  const auto w0 = std::chrono::steady_clock::now();
  ::kill(pid, SIGINT);
  int st = 0;
  rusage ru{};
  REQUIRE(::wait4(pid, &st, 0, &ru) == pid);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  const double cpu1 = double(ru.ru_utime.tv_sec) + 1e-6 * double(ru.ru_utime.tv_usec) +
                      double(ru.ru_stime.tv_sec) + 1e-6 * double(ru.ru_stime.tv_usec);
  MESSAGE("after SIGINT: " << cpu1 - cpu0 << " s CPU, " << wall << " s wall");
  CHECK(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 130);
  CHECK(cpu1 - cpu0 < bound);
  const std::string json = slurp(d / "one/run.json");
  CHECK(json.find("\"status\": \"interrupted\"") != std::string::npos);
  const std::string res = slurp(d / "one/results.csv");
  CHECK(count_lines(res) == 2);  // header and the small point's row
  CHECK(res.find("\n4,") != std::string::npos);

  // Second run: two SIGINTs back to back. Whether the second lands before the first has ended
  // the run (aborted) or after (interrupted), the finished point is recorded.
  pid = spawn_run(d, "two");
  wait_for(d / "two.err", "[1/2]", 120);
  ::kill(pid, SIGINT);
  ::kill(pid, SIGINT);
  REQUIRE(::waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 130);
  const std::string json2 = slurp(d / "two/run.json");
  CHECK((json2.find("\"status\": \"aborted\"") != std::string::npos ||
         json2.find("\"status\": \"interrupted\"") != std::string::npos));
  const std::string res2 = slurp(d / "two/results.csv");
  CHECK(count_lines(res2) == 2);
  CHECK(res2.find("\n4,") != std::string::npos);
}
