// SPDX-License-Identifier: Apache-2.0
#include "driver/lockfile.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "driver/fsio.hpp"
#include "driver/text.hpp"

namespace pl::driver {
namespace {

std::string host_name() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

struct Holder {
  long pid = 0;
  std::string host;
  unsigned long long start = 0;
  std::string text;  // as read, for messages
};

Holder read_holder(int fd) {
  Holder h;
  char buf[512];
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return h;
  buf[n] = 0;
  h.text = buf;
  while (!h.text.empty() && h.text.back() == '\n') h.text.pop_back();
  std::istringstream in(h.text);
  std::string key;
  // "pid 1234 host name start 567890"
  while (in >> key) {
    if (key == "pid")
      in >> h.pid;
    else if (key == "host")
      in >> h.host;
    else if (key == "start")
      in >> h.start;
  }
  return h;
}

// Whether the holder is certainly gone: same host, and its pid is not running or now belongs to
// a process started at another time.
bool holder_dead(const Holder& h) {
  if (h.pid <= 0 || h.host != host_name()) return false;
  if (::kill(pid_t(h.pid), 0) != 0 && errno == ESRCH) return true;
  const unsigned long long now = process_start_ticks(h.pid);
  return h.start != 0 && now != 0 && now != h.start;
}

std::string describe(const Holder& h) {
  if (h.pid <= 0) return "another phaselab";
  return "phaselab pid " + std::to_string(h.pid) + " on " + h.host;
}

}  // namespace

unsigned long long process_start_ticks(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s;
  if (!std::getline(in, s)) return 0;
  const size_t rp = s.rfind(')');  // the command name may hold spaces
  if (rp == std::string::npos) return 0;
  std::istringstream rest(s.substr(rp + 2));
  std::string f;
  for (int field = 3; field <= 22 && rest >> f; ++field)
    if (field == 22) return std::strtoull(f.c_str(), nullptr, 10);
  return 0;
}

bool RunLock::acquire(const std::string& dir, std::string* error, std::string* note) {
  path_ = dir + "/run.lock";
  for (int attempt = 0; attempt < 8; ++attempt) {
    const int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      *error = "cannot create the lock file " + path_ + ": " + errno_text(errno);
      return false;
    }
    const Holder h = read_holder(fd);
    bool locked = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
    const bool no_flock = !locked && (errno == ENOLCK || errno == EOPNOTSUPP || errno == ENOSYS);
    if (!locked && !no_flock) {
      ::close(fd);
      *error = path_ + " is held by " + describe(h) + ": another phaselab is " +
               "writing this run folder (" + (h.text.empty() ? "starting" : h.text) +
               "); wait for it or choose another --out";
      return false;
    }
    if (no_flock && !h.text.empty() && !holder_dead(h)) {
      ::close(fd);
      *error = path_ + " names " + describe(h) + " (" + h.text +
               "), which may still be running (this filesystem has no flock, so phaselab cannot "
               "tell); if it is not, delete " +
               path_ + " and run again";
      return false;
    }
    // Locked: make sure the file is still the one at path_ (a releasing run may have removed it
    // between our open and flock).
    struct stat a, b;
    if (::fstat(fd, &a) != 0 || ::stat(path_.c_str(), &b) != 0 || a.st_ino != b.st_ino ||
        a.st_dev != b.st_dev) {
      ::close(fd);
      continue;
    }
    if (!h.text.empty())
      *note = "replaced a stale lock in " + path_ + " (" + h.text + ": " + describe(h) +
              " is not running)";
    const std::string me = "pid " + std::to_string(long(::getpid())) + " host " + host_name() +
                           " start " + std::to_string(process_start_ticks(long(::getpid()))) + "\n";
    int e = 0;
    if (::ftruncate(fd, 0) != 0 || !write_all(fd, me.data(), me.size(), &e)) {
      if (e == 0) e = errno;
      ::close(fd);
      *error = "cannot write the lock file " + path_ + ": " + errno_text(e);
      return false;
    }
    ::fsync(fd);
    fd_ = fd;
    return true;
  }
  *error = "cannot take the lock " + path_ + ": it keeps changing (another phaselab starting?)";
  return false;
}

void RunLock::release() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // while still holding the flock (see acquire's inode check)
  ::close(fd_);
  fd_ = -1;
}

}  // namespace pl::driver
