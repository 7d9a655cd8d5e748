// SPDX-License-Identifier: Apache-2.0
// Small text helpers shared by the driver: number formatting, CSV fields, edit distance,
// JSON string escaping.
#pragma once

#include <string>
#include <vector>

#include "sdk/text.hpp"

namespace pl::driver {

// Shortest text that reads back to the same double ("0.1", "1e-05", "nan", "inf", "-inf").
std::string format_double(double v);

// One CSV field (RFC 4180): quoted when it holds a comma, quote, CR or LF.
std::string csv_field(const std::string& s);
// A CSV line (no trailing newline) from fields.
std::string csv_line(const std::vector<std::string>& fields);
// The tree's one CSV reader and list splitter (shared with the plugins).
using pl::sdk::parse_csv;
using pl::sdk::split_list;

// Levenshtein distance, and the closest candidate within a distance that scales with length
// (empty when nothing is close enough).
size_t edit_distance(const std::string& a, const std::string& b);
std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates);

// "text" with JSON escapes, quotes included.
std::string json_string(const std::string& s);
// `s` as a double-quoted TOML/C-style string for messages: "16".
std::string quoted(const std::string& s);

bool read_file(const std::string& path, std::string* text, std::string* error);
// Writes via a temporary file and rename, so readers never see a half-written file.
bool write_file_atomic(const std::string& path, const std::string& text, std::string* error);
// The current UTC time in strftime's `fmt` (default: ISO 8601, as run.json records it).
std::string utc_now(const char* fmt = "%Y-%m-%dT%H:%M:%SZ");

}  // namespace pl::driver
