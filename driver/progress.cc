// SPDX-License-Identifier: Apache-2.0
#include "driver/progress.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace pl::driver {

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  const long t = long(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  return buf;
}

Progress::Progress(size_t total, bool quiet, std::function<double()> running_work)
    : total_(total),
      quiet_(quiet),
      tty_(::isatty(STDERR_FILENO) == 1),
      running_work_(std::move(running_work)),
      start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() { stop(); }

void Progress::start() {
  start_ = std::chrono::steady_clock::now();
  if (!tty_ || quiet_) return;
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      draw();
      cv_.wait_for(lock, std::chrono::milliseconds(250));
    }
  });
}

void Progress::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    if (thread_.joinable()) draw();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (bar_shown_) std::fputc('\n', stderr);
  bar_shown_ = false;
}

void Progress::add_total(size_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  total_ += n;
}

std::string Progress::format_bar() const {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const size_t done = done_.load();
  const double work = std::min<double>(double(total_), double(done) + running_work_());
  const double frac = total_ ? work / double(total_) : 1.0;
  winsize ws{};
  int cols = 80;
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) cols = ws.ws_col;
  char tail[160];
  const std::string eta =
      work > 0 ? format_duration(elapsed * (double(total_) - work) / work) : "?";
  std::snprintf(tail, sizeof tail, " %zu/%zu %3.0f%% %s ETA %s", done, total_, 100 * frac,
                format_duration(elapsed).c_str(), eta.c_str());
  std::string t = tail;
  if (failed_) t += " (" + std::to_string(failed_.load()) + " failed)";
  const int width = std::clamp(cols - int(t.size()) - 3, 10, 50);
  const int fill = int(frac * width);
  std::string bar =
      "[" + std::string(size_t(fill), '#') + std::string(size_t(width - fill), ' ') + "]";
  return bar + t;
}

void Progress::draw() {
  std::fprintf(stderr, "\r%s\x1b[K", format_bar().c_str());
  std::fflush(stderr);
  bar_shown_ = true;
}

void Progress::print_line(const std::string& line) {
  if (bar_shown_) std::fputs("\r\x1b[K", stderr);
  std::fprintf(stderr, "%s\n", line.c_str());
  if (bar_shown_ && !stopping_) draw();
  std::fflush(stderr);
}

void Progress::point_done(bool failed, const std::string& line) {
  const size_t n = ++done_;
  if (failed) ++failed_;
  std::lock_guard<std::mutex> lock(mu_);
  if (quiet_) return;
  if (tty_) {
    if (failed) print_line(line);
    return;
  }
  const int w = int(std::to_string(total_).size());
  std::fprintf(stderr, "[%*zu/%zu] %s\n", w, n, total_, line.c_str());
  std::fflush(stderr);
}

void Progress::info(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!quiet_) print_line(line);
}

void Progress::warn(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  print_line(line);
}

}  // namespace pl::driver
