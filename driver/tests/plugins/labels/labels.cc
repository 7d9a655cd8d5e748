// SPDX-License-Identifier: Apache-2.0
// labels: a plugin with known phase boundaries, for the boundary-search tests. A point labels
// v = x (float) or k (int), as `use` says, by a rule with thresholds t1 = m * t1_base and
// t2 = m * t2_base:
//   threshold  "low" for v <= t1, "high" above;
//   two        "a" for v <= t1, "b" for t1 < v <= t2, "c" above (two boundaries);
//   nonmono    "a" for v <= t1, "b" for t1 < v <= t2, "a" above (not monotone).
// It writes `rows` rows to results.csv; one has final = 1 (the second of three or more, else
// the last), the others are labelled "early" (a search must read the final row). score = v - t1
// (for search.above). fail_k makes the point with k == fail_k fail; fail_above makes every point
// with x > fail_above fail; sleep_ms makes a point slow (polling Ctrl-C), for the resume-after-kill
// test.
#include <chrono>
#include <cmath>
#include <string>
#include <thread>

#include "plugins/sdk/phaselab_sdk.hpp"

namespace {

struct Labels {
  explicit Labels(pl::sdk::Context&) {}

  pl_status run(pl::sdk::Context& cx) {
    const double v = cx.is("use", "k") ? double(cx.int_value("k")) : cx.float_value("x");
    const double m = cx.float_value("m");
    const double t1 = m * cx.float_value("t1"), t2 = m * cx.float_value("t2");
    const int64_t sleep_ms = cx.int_value("sleep_ms");
    for (int64_t t = 0; t < sleep_ms; t += 10) {
      if (cx.cancelled()) return PL_CANCELLED;
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(10, sleep_ms - t)));
    }
    if (cx.int_value("k") == cx.int_value("fail_k"))
      return cx.fail("requested failure at k = " + std::to_string(cx.int_value("k")));
    if (cx.float_value("x") > cx.float_value("fail_above"))
      return cx.fail("requested failure above x = " + std::to_string(cx.float_value("fail_above")));
    std::string label;
    if (cx.is("rule", "threshold"))
      label = v <= t1 ? "low" : "high";
    else if (cx.is("rule", "two"))
      label = v <= t1 ? "a" : v <= t2 ? "b" : "c";
    else
      label = v <= t1 || v > t2 ? "a" : "b";
    // The final row is the second of three or more (not the last): a search must use final.
    const int64_t rows = cx.int_value("rows");
    const int64_t fin = rows >= 3 ? 1 : rows - 1;
    for (int64_t r = 0; r < rows; ++r)
      if (r == fin)
        cx.emit(0, {r, label, v - t1, 1});
      else
        cx.emit(0, {r, std::string("early"), -1.0, 0});
    cx.progress(1.0);
    return PL_OK;
  }
};

const pl_param_decl kParams[] = {
    pl::sdk::float_param("x", 1.0, "the float value labelled", PL_RANGE_MIN, 0.0),
    pl::sdk::int_param("k", 1, "the int value labelled", 0, 1000000000),
    pl::sdk::enum_param("use", "x", "x|k", "which of x and k is labelled"),
    pl::sdk::enum_param("rule", "threshold", "threshold|two|nonmono", "the labelling rule"),
    pl::sdk::float_param("t1", 37.3, "first threshold (times m)"),
    pl::sdk::float_param("t2", 300.0, "second threshold (times m)"),
    pl::sdk::float_param("m", 1.0, "multiplies both thresholds",
                         PL_RANGE_MIN | PL_RANGE_MIN_EXCLUSIVE, 0.0),
    pl::sdk::int_param("rows", 2, "rows per point (the last is final)", 1, 100),
    pl::sdk::int_param("fail_k", -1, "k at which the point fails (-1: never)"),
    pl::sdk::float_param("fail_above", 1e300, "x above which points fail"),
    pl::sdk::int_param("sleep_ms", 0, "sleep this long per point, polling cancellation", 0, 600000),
};
const char* const kResultCols[] = {"row", "phase", "score", "final"};
const pl_table_decl kTables[] = {pl::sdk::table("results", kResultCols)};

}  // namespace

PL_DEFINE_PLUGIN_NO_PLOTS(Labels, "labels", "0.1", "known phase boundaries (boundary-search tests)",
                          kParams, kTables, nullptr, nullptr)
