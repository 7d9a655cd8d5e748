// SPDX-License-Identifier: Apache-2.0
#include "driver/text.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "driver/fsio.hpp"

namespace pl::driver {

std::string format_double(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
  return std::string(buf, r.ptr);
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) {
    if (c == '"') o += '"';
    o += c;
  }
  return o + "\"";
}

std::string csv_line(const std::vector<std::string>& fields) {
  std::string o;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (i) o += ',';
    o += csv_field(fields[i]);
  }
  return o;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  // Optimal string alignment: insertions, deletions, substitutions and adjacent transpositions
  // ("mdoe" -> "mode" is one edit), case-insensitive.
  auto eq = [](char x, char y) { return std::tolower(x) == std::tolower(y); };
  const size_t n = a.size(), m = b.size();
  std::vector<size_t> d((n + 1) * (m + 1));
  auto at = [&](size_t i, size_t j) -> size_t& { return d[i * (m + 1) + j]; };
  for (size_t i = 0; i <= n; ++i) at(i, 0) = i;
  for (size_t j = 0; j <= m; ++j) at(0, j) = j;
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j) {
      at(i, j) = std::min({at(i - 1, j) + 1, at(i, j - 1) + 1,
                           at(i - 1, j - 1) + (eq(a[i - 1], b[j - 1]) ? 0 : 1)});
      if (i > 1 && j > 1 && eq(a[i - 1], b[j - 2]) && eq(a[i - 2], b[j - 1]))
        at(i, j) = std::min(at(i, j), at(i - 2, j - 2) + 1);
    }
  return at(n, m);
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
  // Allow about one edit per three characters (at least one, at most three).
  const size_t limit = std::clamp<size_t>(word.size() / 3, 1, 3);
  std::string best;
  size_t best_d = limit + 1;
  if (word.size() > 64) return best;  // no suggestion for long words (edit distance is O(n m))
  for (const auto& c : candidates) {
    if (c.size() > word.size() + limit || word.size() > c.size() + limit) continue;
    const size_t d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  if (!best.empty() || word.size() < 2) return best;
  // No close spelling: a unique candidate that starts the word or that the word starts
  // ("lr_rate" -> "lr", "temp" -> "temperature").
  for (const auto& c : candidates) {
    if (c.size() < 2) continue;
    if (word.compare(0, c.size(), c) == 0 || c.compare(0, word.size(), word) == 0) {
      if (!best.empty()) return "";
      best = c;
    }
  }
  return best;
}

std::string json_string(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        o += "\\\"";
        break;
      case '\\':
        o += "\\\\";
        break;
      case '\n':
        o += "\\n";
        break;
      case '\r':
        o += "\\r";
        break;
      case '\t':
        o += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          o += buf;
        } else {
          o += char(c);
        }
    }
  }
  return o + "\"";
}

std::string quoted(const std::string& s) { return json_string(s); }

bool read_file(const std::string& path, std::string* text, std::string* error) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (error) *error = std::strerror(errno);
    return false;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  *text = ss.str();
  return true;
}

bool write_file_atomic(const std::string& path, const std::string& text, std::string* error) {
  return write_file_durable(path, text, error);  // checked writes, fsync, rename
}

std::string utc_now(const char* fmt) {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, fmt, &tm);
  return buf;
}

}  // namespace pl::driver
