// SPDX-License-Identifier: Apache-2.0
// A minimal JSON writer for run.json: objects and arrays nest, commas and indentation are
// handled here; a compact container keeps its members on one line.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "driver/text.hpp"

namespace pl::driver {

class JsonWriter {
 public:
  JsonWriter& begin_object(bool compact = false) { return open('{', compact); }
  JsonWriter& end_object() { return close('}'); }
  JsonWriter& begin_array(bool compact = false) { return open('[', compact); }
  JsonWriter& end_array() { return close(']'); }
  JsonWriter& key(const std::string& k) {
    separate();
    out_ += json_string(k) + ": ";
    after_key_ = true;
    return *this;
  }
  JsonWriter& str(const std::string& v) { return raw(json_string(v)); }
  JsonWriter& num(double v) { return raw(std::isfinite(v) ? format_double(v) : "null"); }
  JsonWriter& integer(int64_t v) { return raw(std::to_string(v)); }
  JsonWriter& uinteger(uint64_t v) { return raw(std::to_string(v)); }
  JsonWriter& boolean(bool v) { return raw(v ? "true" : "false"); }
  JsonWriter& null() { return raw("null"); }
  // A value already formatted as JSON.
  JsonWriter& raw(const std::string& json) {
    separate();
    out_ += json;
    return *this;
  }
  const std::string& text() const { return out_; }

 private:
  struct Level {
    bool compact, empty;
  };
  void separate() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (stack_.empty()) return;
    Level& l = stack_.back();
    if (!l.empty) out_ += ',';
    if (l.compact) {
      if (!l.empty) out_ += ' ';
    } else {
      newline(stack_.size());
    }
    l.empty = false;
  }
  void newline(size_t depth) {
    out_ += '\n';
    out_.append(2 * depth, ' ');
  }
  JsonWriter& open(char c, bool compact) {
    separate();
    out_ += c;
    // A container inside a compact one stays compact.
    stack_.push_back({compact || (!stack_.empty() && stack_.back().compact), true});
    return *this;
  }
  JsonWriter& close(char c) {
    const Level l = stack_.back();
    stack_.pop_back();
    if (!l.compact && !l.empty) newline(stack_.size());
    out_ += c;
    if (stack_.empty()) out_ += '\n';
    return *this;
  }
  std::string out_;
  std::vector<Level> stack_;
  bool after_key_ = false;
};

}  // namespace pl::driver
