// SPDX-License-Identifier: Apache-2.0
// An SDK 0.1 plugin still compiles and runs: the driver tests' toy plugin as it was written for
// SDK 0.1 (namespace plsdk, cx.i / f / b / s), with the one change the ABI version 2 requires
// (cx.k.variant.exp -> cx.k.variant->exp; docs/plugins.md, "Migrating from SDK 0.1").
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "sdk/phaselab_sdk.hpp"
#include "sdk/test_host.hpp"

// The 0.1 accessors are deprecated on purpose; this file checks that they still work.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace {

struct Toy {
  std::vector<float> x, y;  // [n] inputs and exp outputs

  explicit Toy(plsdk::Context& cx) : x(size_t(cx.i("n"))), y(size_t(cx.i("n"))) {}

  pl_status run(plsdk::Context& cx) {
    const int64_t n = cx.i("n");
    const double scale = cx.f("scale"), shift = cx.b("shift") ? 1.0 : 0.0;
    uint64_t s = cx.point_stream(1);
    for (auto& v : x) {  // x_i = scale * u_i + shift, u_i uniform in [-1, 1)
      s = plsdk::mix64(s);
      const double u = double(s >> 11) * 0x1.0p-53 * 2.0 - 1.0;
      v = float(scale * u + shift);
    }
    if (n == cx.i("fail_at")) return cx.fail("requested failure at n = " + std::to_string(n));
    cx.k.exp(x.data(), y.data(), size_t(n));
    const std::string mode = cx.s("mode");
    double value = 0.0, ref = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      value += y[size_t(i)];
      ref += std::exp(double(x[size_t(i)]));
    }
    if (mode == "mean") value /= double(n), ref /= double(n);
    cx.emit(0, {value, ref, cx.s("label"), cx.k.variant->exp});  // 0.1: cx.k.variant.exp
    return PL_OK;
  }
};

int validate(const pl_value* p, uint32_t, char* err, size_t len) {
  if (p[3].i && p[2].i == 1) {
    std::snprintf(err, len, "toy.shift = true cannot be combined with toy.mode = \"mean\"");
    return 1;
  }
  return 0;
}

const pl_param_decl kParams[] = {
    plsdk::int_param("n", 8, "number of values", 1, 100000),
    plsdk::float_param("scale", 1.0, "multiplier of the uniform values",
                       PL_RANGE_MIN | PL_RANGE_MIN_EXCLUSIVE, 0.0),
    plsdk::enum_param("mode", "sum", "sum|mean", "how exp(x) is reduced"),
    plsdk::bool_param("shift", false, "add 1 to every x"),
    plsdk::string_param("label", "x", "free text copied into results.csv"),
    plsdk::int_param("fail_at", -1, "n at which the point fails with a reason (-1: never)"),
};
const char* const kResultCols[] = {"value", "ref", "label", "exp_variant"};
const pl_table_decl kTables[] = {plsdk::table("results", kResultCols)};
const pl_plot_decl kPlots[] = {
    plsdk::plot("value_vs_n", "toy value and reference vs n", "results", "n", "value,ref", "mode",
                "", PL_PLOT_LOGX),
};

}  // namespace

PL_DEFINE_PLUGIN(Toy, "toy01", "0.1", "an SDK 0.1 plugin", kParams, kTables, kPlots, validate,
                 nullptr)

namespace {

TEST_CASE("an SDK 0.1 plugin (namespace plsdk, cx.i/f/b/s) compiles and runs") {
  pl::test_host::FakeHost h(PL_PLUGIN_ENTRY);
  REQUIRE(h.run({{"n", "64"}, {"mode", "mean"}, {"label", "old"}}, 1) == PL_OK);
  REQUIRE(h.rows[0].size() == 1);
  const double value = h.column(0, "value")[0], ref = h.column(0, "ref")[0];
  CHECK(std::abs(value - ref) < 1e-4 * std::abs(ref));
  CHECK(h.rows[0][0][2] == "old");
  CHECK(h.run({{"n", "5"}, {"fail_at", "5"}}, 1) == PL_FAILED);
  CHECK(h.failure == "requested failure at n = 5");
  CHECK(h.run({{"shift", "1"}, {"mode", "mean"}}, 1) == PL_FAILED);
}

}  // namespace
