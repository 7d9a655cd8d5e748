// SPDX-License-Identifier: Apache-2.0
// Helpers of the driver's tests (test_driver.cc, test_scaleout.cc, test_figures.cc): files,
// temporary folders, and running the phaselab binary (or mpirun) with its output in files.
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace pl::driver_test {

inline std::string env_or(const char* name, const char* def) {
  const char* v = std::getenv(name);
  return v ? v : def;
}

// Sets (value) or unsets (nullptr) an environment variable for one scope and puts back what was
// there, unset included, so a test cannot change the environment of the tests after it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      ::setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_, old_;
  bool had_ = false;
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void spit(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

inline bool exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

inline size_t count_lines(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

// Occurrences of `what` in s (overlapping ones too).
inline size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// A fresh temporary folder ($TMPDIR or /tmp), removed with everything in it.
struct TempDir {
  std::string path;
  explicit TempDir(const std::string& prefix = "phaselab-test") {
    std::string tmpl = env_or("TMPDIR", "/tmp");
    if (tmpl.empty()) tmpl = "/tmp";
    tmpl += "/" + prefix + "-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back(0);
    REQUIRE(::mkdtemp(buf.data()) != nullptr);
    path = buf.data();
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    const std::string cmd = "rm -rf '" + path + "'";
    if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", path.c_str());
  }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

struct Result {
  int rc = -1;
  std::string out, err;
};

// How a child is started: PHASELAB_PLUGIN_PATH (empty: the test plugins' folder,
// PHASELAB_TEST_PLUGINS), gnuplot (off: PHASELAB_GNUPLOT empty, no figures drawn), extra
// NAME=VALUE environment, and its own process group (so that a test can signal the group).
struct SpawnOptions {
  std::string plugin_path;
  bool gnuplot = false;
  std::vector<std::string> env;
  bool own_group = false;
  std::string cwd;  // the child's working folder (empty: this process's)
};

// Starts `exe args` (exe found on PATH if it has no slash); stdout and stderr go to
// <dir>/<tag>.out and <dir>/<tag>.err.
inline pid_t spawn(const std::string& exe, const std::vector<std::string>& args, const TempDir& dir,
                   const std::string& tag, const SpawnOptions& o = {}) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (o.own_group) ::setpgid(0, 0);
    if (!o.cwd.empty() && ::chdir(o.cwd.c_str()) != 0) ::_exit(126);
    const std::string plugins =
        o.plugin_path.empty() ? env_or("PHASELAB_TEST_PLUGINS", "") : o.plugin_path;
    ::setenv("PHASELAB_PLUGIN_PATH", plugins.c_str(), 1);
    if (!o.gnuplot) ::setenv("PHASELAB_GNUPLOT", "", 1);  // figures are tested once
    for (const auto& kv : o.env) ::putenv(const_cast<char*>(kv.c_str()));
    const int out = ::open((dir / (tag + ".out")).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open((dir / (tag + ".err")).c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, 1);
    ::dup2(err, 2);
    std::vector<char*> argv{const_cast<char*>(exe.c_str())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execvp(exe.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

// The exit status of a child (128 + signal when killed).
inline int wait_rc(pid_t pid) {
  int st = 0;
  REQUIRE(::waitpid(pid, &st, 0) == pid);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// Waits for a child started with `tag` and reads what it wrote.
inline Result finish(pid_t pid, const TempDir& dir, const std::string& tag) {
  Result r;
  r.rc = wait_rc(pid);
  r.out = slurp(dir / (tag + ".out"));
  r.err = slurp(dir / (tag + ".err"));
  return r;
}

// A new tag for a child's output files.
inline std::string next_tag() {
  static int counter = 0;
  return "cmd" + std::to_string(counter++);
}

// The phaselab binary under test.
inline const std::string& phaselab_exe() {
  static const std::string exe = env_or("PHASELAB_EXE", "phaselab");
  return exe;
}

}  // namespace pl::driver_test
