// SPDX-License-Identifier: Apache-2.0
// The doctest side of the shared test helpers (kernels/harness/harness.hpp holds the rest:
// runnable variants, deterministic inputs, sizes around the vector widths, the comparison).
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/harness/harness.hpp"
#include "phaselab/kernels.hpp"
#include "tests/emulation.hpp"

namespace pl::test {

// Distance in units in the last place between two finite floats of any sign.
inline int64_t ulp_distance(float a, float b) {
  auto key = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, 4);
    return i < 0 ? int64_t(INT32_MIN) - i : int64_t(i);
  };
  const int64_t d = key(a) - key(b);
  return d < 0 ? -d : d;
}

// Checks one output (every element, or its condition) and reports the worst element on failure.
inline void check_output(const std::string& what, const Output& o, double atol, double rtol) {
  const Verdict r = compare(o, atol, rtol);
  if (o.kind == Output::Kind::condition) {
    INFO(what << " does not hold");
    CHECK(r.bad == 0);
    return;
  }
  char detail[200];
  std::snprintf(detail, sizeof detail,
                "%zu of %zu outside; worst at %zu: got %.9g ref %.9g tol %.3g%s", r.bad, o.n,
                r.worst, r.got, r.ref, r.tol, o.exact ? " (bit-exact)" : "");
  INFO(what << ": " << std::string(detail));
  CHECK(r.bad == 0);
}

// |got - ref| <= atol + rtol |ref| for every element; reports the worst one on failure.
inline void check_close(const std::string& what, const float* got, const double* ref, size_t n,
                        double atol, double rtol) {
  check_output(what, out(what, got, ref, n), atol, rtol);
}

}  // namespace pl::test
