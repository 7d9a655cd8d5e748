// SPDX-License-Identifier: Apache-2.0
// Tests of ou_process through the SDK's test host (no driver, no files): the stationary variance
// against its closed form, the relaxation from x0 = 0 against (1 - a^(2t)) times it, the validate
// message, and determinism. Exit status 0 when every check holds.
#include <cmath>
#include <cstdio>
#include <string>

#include "sdk/test_host.hpp"

extern "C" const pl_plugin PL_PLUGIN_ENTRY;  // ou_process.cc is compiled into this test

static int failures = 0;
static void expect(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok  " : "FAIL", what.c_str());
  failures += !ok;
}

int main() {
  pl::test_host::FakeHost h(PL_PLUGIN_ENTRY);
  const double n = 20000;
  for (const double theta : {0.5, 2.0}) {
    const std::string th = std::to_string(theta);
    h.run({{"particles", "20000"}, {"steps", "3000"}, {"theta", th}, {"T", "1.5"}}, 1);
    const double var = h.column(0, "var")[0];
    const double theory = 1.5 / (theta * (1 - theta * 0.01 / 2));  // oracle: closed form
    // A variance of n Gaussians has relative standard error sqrt(2 / n); the transient left
    // after 3000 steps is a^6000 < 1e-6.
    const double tol = 5 * std::sqrt(2 / n) * theory;
    expect(std::fabs(var - theory) < tol, "stationary variance at theta = " + th + ": " +
                                              std::to_string(var) + " vs " +
                                              std::to_string(theory));
  }
  // Relaxation from x0 = 0: Var x_t = (1 - a^(2t)) var_inf; history row 1 is step 10.
  h.run({{"particles", "20000"}, {"steps", "100"}}, 2);
  const double a = 1 - 0.01, inf = 1 / (1 - 0.005), v10 = (1 - std::pow(a, 20)) * inf;
  const double got = h.column(1, "var")[0];
  expect(std::fabs(got - v10) < 5 * std::sqrt(2 / n) * v10,
         "variance at step 10: " + std::to_string(got) + " vs " + std::to_string(v10));
  // validate names the keys.
  const pl_status st = h.run({{"theta", "300"}}, 1);
  expect(st == PL_FAILED && h.failure.find("ou_process.theta * ou_process.dt = 3.0") == 0,
         "validate refuses theta dt >= 2: " + h.failure);
  // Same seed: the same rows; another seed: others.
  h.run({}, 5);
  const auto first = h.rows[0];
  h.run({}, 5);
  expect(h.rows[0] == first, "same seed, same results");
  h.run({}, 6);
  expect(h.rows[0] != first, "another seed, other results");
  std::printf("%d failed\n", failures);
  return failures ? 1 : 0;
}
