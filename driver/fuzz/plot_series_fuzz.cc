// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for `phaselab plot`'s inputs: the first line of an input is a SERIES
// (TABLE:x=COL:y=COL:where=...:group=...:title=...:style=KIND OPTIONS), the rest a CSV table. The
// series goes through parse_series (which refuses style options that could reach gnuplot as
// code), the table through the CSV reader. Any crash, sanitizer report, leak or timeout is a bug;
// so is a parsed series whose style options hold a character outside words, numbers and quoted
// colours (a comma, semicolon, parenthesis, backquote or control character).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "driver/figures.hpp"
#include "driver/text.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pl::driver;
  if (size > (1 << 20)) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const size_t nl = text.find('\n');
  const std::string series = text.substr(0, nl);
  SeriesSpec s;
  std::string error;
  if (parse_series(series, &s, &error)) {
    if (s.x.empty() || s.ys.empty() || s.table.empty()) __builtin_trap();
    for (char c : s.options)
      if (c == ',' || c == ';' || c == '(' || c == ')' || c == '`' || c == '@' || c == '$' ||
          static_cast<unsigned char>(c) < 0x20)
        __builtin_trap();
  } else if (error.empty()) {
    __builtin_trap();  // a refusal always says why
  }
  if (nl != std::string::npos) {
    std::vector<std::vector<std::string>> recs;
    (void)parse_csv(text.substr(nl + 1), &recs);
  }
  return 0;
}
