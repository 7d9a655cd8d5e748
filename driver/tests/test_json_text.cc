// SPDX-License-Identifier: Apache-2.0
// json_text (driver/json_text.hpp), the writer of run.json and `kernels --json`: its layout
// against texts written out here by hand, and every value against nlohmann-json's own parser
// (the text must parse back to the same value, doubles bit for bit).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "driver/json_text.hpp"

namespace {

using pl::driver::json_text;
using pl::driver::ordered_json;

TEST_CASE("json_text layout: one line for lists of values, array elements and named objects") {
  ordered_json j;
  j["a"] = {1, 2};
  j["o"] = {{"x", 1}, {"y", "z"}};
  j["p"] = {{"x", 1}};
  j["list"] = ordered_json::array({ordered_json{{"k", 1}}, ordered_json{{"k", 2}}});
  j["empty"] = ordered_json::array();
  j["none"] = ordered_json::object();
  CHECK(json_text(j, {"o"}) ==
        "{\n"
        "  \"a\": [1, 2],\n"
        "  \"o\": {\"x\": 1, \"y\": \"z\"},\n"
        "  \"p\": {\n"
        "    \"x\": 1\n"
        "  },\n"
        "  \"list\": [\n"
        "    {\"k\": 1},\n"
        "    {\"k\": 2}\n"
        "  ],\n"
        "  \"empty\": [],\n"
        "  \"none\": {}\n"
        "}\n");
}

TEST_CASE("json_text layout: a list of objects inside a one-line object is indented") {
  // The shape of `kernels --json`: each kernel on its line, its variants one per line below.
  ordered_json v = ordered_json::array({ordered_json{{"x", true}}, ordered_json{{"x", false}}});
  ordered_json j = {{"k", ordered_json::array({ordered_json{{"n", "e"}, {"v", v}}})}};
  CHECK(json_text(j) ==
        "{\n"
        "  \"k\": [\n"
        "    {\"n\": \"e\", \"v\": [\n"
        "      {\"x\": true},\n"
        "      {\"x\": false}\n"
        "    ]}\n"
        "  ]\n"
        "}\n");
}

TEST_CASE("json_text numbers: shortest round-trip form, non-finite as null") {
  ordered_json j;
  j["n"] = {0.1, 1e5, 2.0, -0.5, 1e-300, 3, -7, uint64_t(18446744073709551615u)};
  CHECK(json_text(j) ==
        "{\n  \"n\": [0.1, 1e+05, 2, -0.5, 1e-300, 3, -7, 18446744073709551615]\n}\n");
  ordered_json bad;
  bad["n"] = {std::nan(""), std::numeric_limits<double>::infinity()};
  CHECK(json_text(bad) == "{\n  \"n\": [null, null]\n}\n");
}

TEST_CASE("json_text parses back to the same values") {
  ordered_json j;
  j["text"] =
      "quote \" backslash \\ newline \n tab \t bell \x07 back \b e\xc3\xa9 sum \xe2\x88\x91";
  j["path"] = "/tmp/a b/c,d";
  const double doubles[] = {0.1,     1.0 / 3.0,     6.02214076e23, 5e-324, 1.7976931348623157e308,
                            -2.5e-8, 123456789.125, 1e21,          1e-7};
  for (double d : doubles) j["doubles"].push_back(d);
  j["ints"] = {int64_t(-9223372036854775807 - 1), 0, 42};
  j["flags"] = {true, false, nullptr};
  j["nested"] = {{"points", ordered_json::array({ordered_json{{"index", 0}, {"P", 4.5}}})}};
  const ordered_json back = ordered_json::parse(json_text(j, {"nested"}));
  CHECK(back == j);
  for (size_t i = 0; i < std::size(doubles); ++i) {
    const double d = back["doubles"][i].get<double>();
    CHECK(std::memcmp(&d, &doubles[i], sizeof d) == 0);
  }
}

TEST_CASE("json_text: invalid UTF-8 becomes U+FFFD, so the file still parses") {
  const ordered_json j = {{"s", std::string("a\xff"
                                            "b")}};
  const std::string text = json_text(j);
  CHECK(text ==
        "{\n  \"s\": \"a\xef\xbf\xbd"
        "b\"\n}\n");
  CHECK(ordered_json::parse(text)["s"] ==
        "a\xef\xbf\xbd"
        "b");
}

}  // namespace
