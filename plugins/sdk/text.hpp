// SPDX-License-Identifier: Apache-2.0
// Text helpers shared by the driver and the plugins (header only, no dependencies): the one CSV
// reader and the one list splitter of the tree.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace pl::sdk {

// Parses CSV text (RFC 4180: quoted fields, "" inside quotes for a quote, LF or CRLF line ends)
// into records of fields; empty lines are skipped. Returns false on an unterminated quote.
inline bool parse_csv(const std::string& text, std::vector<std::vector<std::string>>* records) {
  records->clear();
  std::vector<std::string> rec;
  std::string field;
  bool in_quotes = false, any = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_quotes) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          in_quotes = false;
        }
      } else {
        field += c;
      }
      continue;
    }
    if (c == '"') {
      in_quotes = true;
      any = true;
    } else if (c == ',') {
      rec.push_back(std::move(field));
      field.clear();
      any = true;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      if (any || !field.empty()) {
        rec.push_back(std::move(field));
        records->push_back(std::move(rec));
      }
      rec.clear();
      field.clear();
      any = false;
    } else {
      field += c;
      any = true;
    }
  }
  if (in_quotes) return false;
  if (any || !field.empty()) {
    rec.push_back(std::move(field));
    records->push_back(std::move(rec));
  }
  return true;
}

// The fields of one CSV line (a trailing CR is dropped). An empty line, or one with an
// unterminated quote, gives one empty field.
inline std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::vector<std::string>> recs;
  parse_csv(line, &recs);
  if (recs.empty()) return {std::string()};
  return recs.front();
}

// "a, b,,c " split at `sep`, each item trimmed of spaces, empty items dropped: {"a", "b", "c"}.
inline std::vector<std::string> split_list(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = std::min(s.find(sep, start), s.size());
    const std::string part = s.substr(start, end - start);
    const size_t a = part.find_first_not_of(' '), b = part.find_last_not_of(' ');
    if (a != std::string::npos) out.push_back(part.substr(a, b - a + 1));
    start = end + 1;
  }
  return out;
}

}  // namespace pl::sdk
