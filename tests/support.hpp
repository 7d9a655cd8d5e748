// SPDX-License-Identifier: Apache-2.0
// Shared helpers for the doctest suites: variant iteration, tolerances, deterministic inputs.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/harness/harness.hpp"  // runnable, uniform
#include "phaselab/kernels.hpp"
#include "tests/emulation.hpp"

namespace pl::test {

// Sizes at, around and far from every vector width we compile for (4, 8, 16 lanes of float).
inline std::vector<size_t> sizes_around_widths(size_t max_n = 1000) {
  std::vector<size_t> s = {1,  2,  3,  4,   5,   7,   8,   9,   15,  16,  17,  31,  32,  33,  48,
                           63, 64, 65, 100, 127, 128, 129, 255, 256, 257, 511, 512, 513, 1000};
  std::vector<size_t> out;
  for (size_t n : s)
    if (n <= max_n) out.push_back(n);
  return out;
}

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

// |got - ref| <= atol + rtol * |ref|
inline bool close(double got, double ref, double atol, double rtol) {
  return std::fabs(got - ref) <= atol + rtol * std::fabs(ref) && std::isfinite(got);
}

// Checks every element and reports the worst one (index, values) on failure.
inline void check_close(const std::string& what, const float* got, const double* ref, size_t n,
                        double atol, double rtol) {
  size_t worst = 0;
  double worst_excess = -1;
  bool ok = true;
  for (size_t i = 0; i < n; ++i) {
    const double excess = std::fabs(got[i] - ref[i]) - (atol + rtol * std::fabs(ref[i]));
    if (!close(got[i], ref[i], atol, rtol)) ok = false;
    if (excess > worst_excess || !std::isfinite(got[i])) {
      worst_excess = std::isfinite(got[i]) ? excess : 1e300;
      worst = i;
    }
  }
  INFO(what << ": worst at " << worst << " got " << (n ? got[worst] : 0.f) << " ref "
            << (n ? ref[worst] : 0.0) << " (atol " << atol << ", rtol " << rtol << ")");
  CHECK(ok);
}

}  // namespace pl::test
