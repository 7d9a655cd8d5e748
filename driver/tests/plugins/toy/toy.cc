// SPDX-License-Identifier: Apache-2.0
// toy: a tiny deterministic plugin for the driver tests. Each point draws n uniform values
// x_i in [-1, 1) from its own RNG stream and reports sum/mean/max of exp(scale * x_i + shift)
// computed with the kernel table (value) and in double with std::exp (ref, the oracle).
// Knobs for failure paths: nan_at (the value becomes NaN when n == nan_at), fail_at (the
// point calls fail() when n == fail_at), sleep_ms (a slow point that polls cancellation).
#include <chrono>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "plugins/sdk/phaselab_sdk.hpp"

namespace {

struct Toy {
  std::vector<float> x, y;  // [n] inputs and exp outputs

  explicit Toy(pl::sdk::Context& cx) : x(size_t(cx.int_value("n"))), y(size_t(cx.int_value("n"))) {}

  pl_status run(pl::sdk::Context& cx) {
    const int64_t n = cx.int_value("n");
    const double scale = cx.float_value("scale"), shift = cx.bool_value("shift") ? 1.0 : 0.0;
    uint64_t s = cx.point_stream(1);
    for (auto& v : x) {  // x_i = scale * u_i + shift, u_i uniform in [-1, 1)
      s = pl::sdk::mix64(s);
      const double u = double(s >> 11) * 0x1.0p-53 * 2.0 - 1.0;
      v = float(scale * u + shift);
    }
    // Slow mode: sleep in 10 ms slices, reporting progress and honouring Ctrl-C.
    const int64_t sleep_ms = cx.int_value("sleep_ms");
    for (int64_t t = 0; t < sleep_ms; t += 10) {
      if (cx.cancelled()) return PL_CANCELLED;
      cx.progress(double(t) / double(sleep_ms));
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(10, sleep_ms - t)));
    }
    // A long computation that cannot be interrupted (a second Ctrl-C is the way out).
    std::this_thread::sleep_for(std::chrono::milliseconds(cx.int_value("deaf_ms")));
    if (n == cx.int_value("fail_at"))
      return cx.fail("requested failure at n = " + std::to_string(n));
    cx.k.exp(x.data(), y.data(), size_t(n));
    const std::string mode = cx.string_value("mode");
    double value = mode == "max" ? -INFINITY : 0.0, ref = value;
    for (int64_t i = 0; i < n; ++i) {
      const double e = std::exp(double(x[size_t(i)]));
      if (mode == "max") {
        value = std::max(value, double(y[size_t(i)]));
        ref = std::max(ref, e);
      } else {
        value += y[size_t(i)];
        ref += e;
      }
    }
    if (mode == "mean") value /= double(n), ref /= double(n);
    if (n == cx.int_value("nan_at")) value = std::numeric_limits<double>::quiet_NaN();
    cx.emit(0, {value, ref, cx.string_value("label"), cx.k.variant->exp});
    const int64_t steps = cx.int_value("steps");
    for (int64_t k = 1; k <= steps; ++k) cx.emit(1, {k, value * double(k) / double(steps)});
    cx.emit(2, {steps});
    cx.progress(1.0);
    return PL_OK;
  }
};

// Reads the point by name (validate_with builds the view from the declarations).
std::string validate(const pl::sdk::Params& p) {
  if (p.bool_value("shift") && p.is("mode", "max"))
    return "toy.shift = true cannot be combined with toy.mode = \"max\"";
  return "";
}

const pl_param_decl kParams[] = {
    pl::sdk::int_param("n", 8, "number of values", 1, 100000),
    pl::sdk::float_param("scale", 1.0, "multiplier of the uniform values",
                         PL_RANGE_MIN | PL_RANGE_MIN_EXCLUSIVE, 0.0),
    pl::sdk::enum_param("mode", "sum", "sum|mean|max", "how exp(x) is reduced"),
    pl::sdk::bool_param("shift", false, "add 1 to every x"),
    pl::sdk::string_param("label", "x", "free text copied into results.csv"),
    pl::sdk::int_param("nan_at", -1, "n at which the value becomes NaN (-1: never)"),
    pl::sdk::int_param("fail_at", -1, "n at which the point fails with a reason (-1: never)"),
    pl::sdk::int_param("sleep_ms", 0, "sleep this long per point, polling cancellation", 0, 600000),
    pl::sdk::int_param("steps", 3, "rows per point in history.csv", 1, 1000),
    pl::sdk::int_param("mem_mb", 0, "memory the point claims to need (MB; not allocated)", 0,
                       1000000000),
    pl::sdk::int_param("deaf_ms", 0, "sleep this long per point without polling cancellation", 0,
                       600000),
#ifdef PL_TOY_V2
    pl::sdk::float_param("extra", 0.0, "a key added by a later version; not used", 0, 0.0),
#endif
};
const char* const kResultCols[] = {"value", "ref", "label", "exp_variant"};
const char* const kHistoryCols[] = {"step", "partial"};
const char* const kPointCols[] = {"history_rows"};
// points.csv: one row per point with every parameter (PL_TABLE_ALL_PARAMS), for the driver tests.
const pl_table_decl kTables[] = {pl::sdk::table("results", kResultCols),
                                 pl::sdk::table("history", kHistoryCols),
                                 pl::sdk::table("points", kPointCols, pl::sdk::kAllParams)};
const pl_plot_decl kPlots[] = {
    pl::sdk::plot("value_vs_n", "toy value and reference vs n", "results", "n", "value,ref", "mode",
                  "", PL_PLOT_LOGX),
    pl::sdk::plot("value_hist", "toy values", "results", "value", "", "mode", "",
                  PL_PLOT_HISTOGRAM),
    pl::sdk::plot("history", "partial values", "history", "step", "partial", "n", "mode=sum",
                  PL_PLOT_POINTS),
};

}  // namespace

// The memory estimate the driver checks before a run: n floats twice, plus mem_mb.
extern "C" __attribute__((visibility("default"))) uint64_t phaselab_plugin_point_bytes(
    const pl_value* p, uint32_t) {
  return uint64_t(p[0].i) * 8 + uint64_t(p[9].i) * (uint64_t(1) << 20);
}

// The cost estimate `run --shard` balances by: a point that sleeps longer costs more.
extern "C" __attribute__((visibility("default"))) double phaselab_plugin_point_cost(
    const pl_value* p, uint32_t) {
  return 1.0 + double(p[7].i);  // sleep_ms
}

#ifdef PL_TOY_V2
PL_DEFINE_PLUGIN(Toy, "toy_v2", "0.2", "the toy with one more parameter (driver tests)", kParams,
                 kTables, kPlots, pl::sdk::validate_with<validate>, nullptr)
#else
PL_DEFINE_PLUGIN(Toy, "toy", "0.1", "tiny deterministic plugin for the driver tests", kParams,
                 kTables, kPlots, pl::sdk::validate_with<validate>, nullptr)
#endif
