// SPDX-License-Identifier: Apache-2.0
#include "driver/fsio.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace pl::driver {
namespace {

// The fault-injection budget (bytes), or -1 when PHASELAB_FAULT_WRITE_BYTES is unset.
std::atomic<long long>& fault_budget() {
  static std::atomic<long long> budget{[] {
    const char* v = std::getenv("PHASELAB_FAULT_WRITE_BYTES");
    if (!v || !*v) return -1LL;
    char* end = nullptr;
    const long long n = std::strtoll(v, &end, 10);
    return (*end || n < 0) ? -1LL : n;
  }()};
  return budget;
}

int sync_delay_ms() {
  static const int ms = [] {
    const char* v = std::getenv("PHASELAB_FAULT_SYNC_MS");
    return v && *v ? std::max(0, std::atoi(v)) : 0;
  }();
  return ms;
}

}  // namespace

int data_sync(int fd) {
  if (const int ms = sync_delay_ms()) ::usleep(useconds_t(ms) * 1000);
  return ::fdatasync(fd);
}

bool write_all(int fd, const void* data, size_t n, int* err) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    size_t chunk = n;
    auto& budget = fault_budget();
    if (budget.load() >= 0) {
      long long left = budget.load();
      while (true) {
        const long long take = std::min<long long>(left, (long long)n);
        if (budget.compare_exchange_weak(left, left - take)) {
          chunk = size_t(take);
          break;
        }
      }
      if (chunk == 0) {
        *err = ENOSPC;
        return false;
      }
    }
    const ssize_t w = ::write(fd, p, chunk);
    if (w < 0) {
      if (errno == EINTR) continue;
      *err = errno;
      return false;
    }
    if (w == 0) {
      *err = EIO;
      return false;
    }
    p += w;
    n -= size_t(w);
  }
  return true;
}

std::string errno_text(int err) {
  const char* name = ::strerrorname_np(err);
  return std::string(std::strerror(err)) + (name ? std::string(" (") + name + ")" : "");
}

void sync_dir(const std::string& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

bool write_file_durable(const std::string& path, const std::string& text, std::string* error) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (error) *error = errno_text(errno);
    return false;
  }
  int e = 0;
  bool ok = write_all(fd, text.data(), text.size(), &e);
  if (ok && ::fsync(fd) != 0) ok = false, e = errno;
  if (::close(fd) != 0 && ok) ok = false, e = errno;
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) ok = false, e = errno;
  if (!ok) {
    if (error) *error = errno_text(e);
    ::unlink(tmp.c_str());
    return false;
  }
  const size_t slash = path.find_last_of('/');
  sync_dir(slash == std::string::npos ? "." : path.substr(0, slash));
  return true;
}

bool overwrite_in_place(const std::string& path, const std::string& text, std::string* error) {
  // No O_TRUNC: the old blocks are reused for the new text (no new space needed when it is not
  // longer), and the file is cut to length only once the text is written.
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (error) *error = errno_text(errno);
    return false;
  }
  int e = 0;
  bool ok = write_all(fd, text.data(), text.size(), &e);
  if (ok && ::ftruncate(fd, off_t(text.size())) != 0) ok = false, e = errno;
  if (ok && ::fsync(fd) != 0) ok = false, e = errno;
  if (::close(fd) != 0 && ok) ok = false, e = errno;
  if (!ok && error) *error = errno_text(e);
  return ok;
}

bool fault_take(size_t bytes) {
  auto& budget = fault_budget();
  long long left = budget.load();
  while (left >= 0) {
    if (left < (long long)bytes) return false;
    if (budget.compare_exchange_weak(left, left - (long long)bytes)) return true;
  }
  return true;
}

void fault_credit(size_t bytes) {
  auto& budget = fault_budget();
  if (budget.load() >= 0) budget += (long long)bytes;
}

}  // namespace pl::driver
