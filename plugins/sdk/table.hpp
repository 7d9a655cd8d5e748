// SPDX-License-Identifier: Apache-2.0
// A table of a run folder read back (results.csv, a side table such as transition_points.csv):
// the one reader a plugin's finish() hook uses for its post-run analysis. Header only.
//
//   pl::sdk::Table t;
//   std::string why;
//   if (!t.read(std::string(run_dir) + "/transition_points.csv", &why)) ...;
//   const size_t c = t.col("P_star");               // throws std::out_of_range if absent
//   for (size_t r = 0; r < t.rows(); ++r) use(t.str(r, t.col("L")), t.num(r, c));
//
// The file is RFC 4180 CSV as the driver writes it (quoted fields, "" for a quote inside them,
// LF or CRLF line ends); its first record is the header. Every record must have as many fields
// as the header: a table the driver finished never has a short row, so one is an error here.
#pragma once

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "text.hpp"

namespace pl::sdk {

class Table {
 public:
  // Parses CSV text; `name` names the table in messages (e.g. its file). False with *error on an
  // unterminated quote, no header, a column named twice, or a record of another width.
  bool parse(const std::string& text, const std::string& name, std::string* error) {
    name_ = name;
    header_.clear();
    rows_.clear();
    std::vector<std::vector<std::string>> recs;
    if (!parse_csv(text, &recs))
      return fail(error, name + " is not valid CSV (unterminated quote)");
    if (recs.empty()) return fail(error, name + " has no header line");
    header_ = std::move(recs[0]);
    for (size_t c = 0; c < header_.size(); ++c)
      for (size_t d = 0; d < c; ++d)
        if (header_[c] == header_[d])
          return fail(error, name + " names column '" + header_[c] + "' twice");
    for (size_t r = 1; r < recs.size(); ++r) {
      if (recs[r].size() != header_.size())
        return fail(error, name + " record " + std::to_string(r + 1) + " has " +
                               std::to_string(recs[r].size()) + " fields, the header has " +
                               std::to_string(header_.size()));
      rows_.push_back(std::move(recs[r]));
    }
    return true;
  }
  // Reads and parses a file (named by its path in messages).
  bool read(const std::string& path, std::string* error) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return fail(error, "cannot read " + path);
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) return fail(error, "cannot read " + path);
    return parse(text.str(), path, error);
  }

  const std::string& name() const { return name_; }
  const std::vector<std::string>& header() const { return header_; }
  size_t rows() const { return rows_.size(); }
  const std::vector<std::string>& row(size_t r) const { return rows_.at(r); }

  // The position of a column, or -1 when the table has none of that name.
  int find(const std::string& column) const {
    for (size_t c = 0; c < header_.size(); ++c)
      if (header_[c] == column) return int(c);
    return -1;
  }
  bool has(const std::string& column) const { return find(column) >= 0; }
  // The position of a column; throws std::out_of_range naming the table and its columns.
  size_t col(const std::string& column) const {
    const int c = find(column);
    if (c < 0) {
      std::string all;
      for (const auto& h : header_) all += (all.empty() ? "" : ", ") + h;
      throw std::out_of_range(name_ + " has no column '" + column + "' (columns: " + all + ")");
    }
    return size_t(c);
  }

  // A cell as text.
  const std::string& str(size_t r, size_t c) const { return rows_.at(r).at(c); }
  // A cell as a number: an empty cell is NaN (the driver writes NaN and "does not apply" as
  // empty); text that is not a whole number (strtod: decimal, hex, inf, nan) throws
  // std::invalid_argument naming the table, record and column.
  double num(size_t r, size_t c) const {
    const std::string& s = str(r, c);
    if (s.empty()) return NAN;
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || *end != '\0')
      throw std::invalid_argument(name_ + " record " + std::to_string(r + 2) + " column '" +
                                  header_[c] + "': '" + s + "' is not a number");
    return v;
  }

 private:
  bool fail(std::string* error, const std::string& msg) {
    header_.clear();
    rows_.clear();
    if (error) *error = msg;
    return false;
  }
  std::string name_;
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace pl::sdk
