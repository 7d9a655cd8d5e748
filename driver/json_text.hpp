// SPDX-License-Identifier: Apache-2.0
// The text of phaselab's JSON files (run.json, `phaselab kernels --json`) from nlohmann-json
// values. nlohmann's dump() indents every level alike; these files keep one line per point, per
// figure and per kernel variant, so that they read and diff line by line:
//   - arrays of scalars, objects that are array elements, and objects under a key in
//     `one_line` are written on one line ({"a": 1, "b": [2, 3]});
//   - every other container, and the top level, is indented by two spaces per level.
// Floats are written in their shortest round-trip form (format_double: 0.5, 2, 1e+05),
// non-finite ones as null; strings as nlohmann escapes them (UTF-8 kept, invalid bytes replaced
// by U+FFFD, so the file always parses).
#pragma once

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "driver/text.hpp"

namespace pl::driver {

using ordered_json = nlohmann::ordered_json;

namespace json_text_detail {

template <class Json>
std::string scalar(const Json& j) {
  if (j.is_number_float()) {
    const double v = j.template get<double>();
    return std::isfinite(v) ? format_double(v) : "null";
  }
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

template <class Json>
bool holds_scalars(const Json& j) {
  for (const auto& e : j)
    if (e.is_structured()) return false;
  return true;
}

// Appends j; `depth` is the indentation level of the line j starts on.
template <class Json>
void put(const Json& j, bool one_line, size_t depth, const std::set<std::string>& keys,
         std::string* out) {
  if (!j.is_structured()) {
    *out += scalar(j);
    return;
  }
  const bool array = j.is_array();
  *out += array ? '[' : '{';
  size_t i = 0;
  for (auto it = j.begin(); it != j.end(); ++it, ++i) {
    if (i) *out += ',';
    if (one_line) {
      if (i) *out += ' ';
    } else {
      *out += '\n';
      out->append(2 * (depth + 1), ' ');
    }
    if (!array) *out += scalar(Json(it.key())) + ": ";
    const Json& v = it.value();
    const bool child_one_line =
        v.is_array() ? holds_scalars(v) : (array || keys.count(it.key()) != 0);
    put(v, child_one_line, one_line ? depth : depth + 1, keys, out);
  }
  if (!one_line && i) {
    *out += '\n';
    out->append(2 * depth, ' ');
  }
  *out += array ? ']' : '}';
}

}  // namespace json_text_detail

// The text of j as described above, ending in a newline.
template <class Json>
std::string json_text(const Json& j, const std::set<std::string>& one_line = {}) {
  std::string out;
  json_text_detail::put(j, false, 0, one_line, &out);
  return out + "\n";
}

}  // namespace pl::driver
