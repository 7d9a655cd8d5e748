// SPDX-License-Identifier: Apache-2.0
// One writer per run folder: <out>/run.lock holds "pid host start" of the phaselab writing the
// folder, under an exclusive flock(2) kept for the whole run. A second phaselab is refused with
// the holder named. A lock left by a process that died (crash, SIGKILL, power loss) is stale:
// the kernel drops a dead process's flock, so the next run takes the lock and says it replaced
// a stale one. Where flock is not supported (some network filesystems) the pid decides: a lock
// of this host whose pid is not running, or runs a process started at another time (pid
// reused), is stale; a lock of another host is never taken over.
#pragma once

#include <string>

namespace pl::driver {

class RunLock {
 public:
  RunLock() = default;
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  ~RunLock() { release(); }
  // Takes the lock of `dir`. False with a message naming the holder; *note receives a line when
  // a stale lock was replaced.
  bool acquire(const std::string& dir, std::string* error, std::string* note);
  // Removes the lock file (clean end of the run).
  void release();

 private:
  int fd_ = -1;
  std::string path_;
};

// This process's start time (clock ticks since boot, /proc/self/stat field 22); 0 if unknown.
unsigned long long process_start_ticks(long pid);

}  // namespace pl::driver
