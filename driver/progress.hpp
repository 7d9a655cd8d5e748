// SPDX-License-Identifier: Apache-2.0
// Progress reporting on stderr: on a terminal a bar redrawn a few times a second (points done /
// total, percent, elapsed, ETA); otherwise one plain line per finished point. --quiet keeps
// only warnings and errors. All output goes through here so lines never interleave with the bar.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace pl::driver {

class Progress {
 public:
  // total: points to run in this invocation. running_work(): fractions of running points, summed.
  Progress(size_t total, bool quiet, std::function<double()> running_work);
  ~Progress();
  void start();
  void stop();
  // More points to run (a boundary search plans each round when the last one is done).
  void add_total(size_t n);
  // A point finished (ok or failed); `line` describes it.
  void point_done(bool failed, const std::string& line);
  // Informational line (hidden by --quiet).
  void info(const std::string& line);
  // Warning or error line (always shown).
  void warn(const std::string& line);
  bool tty() const { return tty_; }

 private:
  void print_line(const std::string& line);  // mu_ held
  void draw();                               // mu_ held
  std::string format_bar() const;
  size_t total_;
  bool quiet_, tty_;
  std::function<double()> running_work_;
  std::atomic<size_t> done_{0}, failed_{0};
  std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false, bar_shown_ = false;
  std::thread thread_;
};

std::string format_duration(double seconds);

}  // namespace pl::driver
