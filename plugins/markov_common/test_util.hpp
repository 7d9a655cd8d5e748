// SPDX-License-Identifier: Apache-2.0
// Helpers of the Markov plugins' tests (doctest): the tolerance check, the kernel table, random
// token sequences and N(0,1) draws.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "phaselab/kernels.hpp"

namespace pl::markov::test {

// |got - ref| <= atol + rtol |ref| and got finite.
inline bool close(double got, double ref, double atol, double rtol) {
  return std::isfinite(got) && std::fabs(got - ref) <= atol + rtol * std::fabs(ref);
}

// The kernel table of `target` ("" = the best this machine supports).
inline pl_kernel_table table(const std::string& target = "") {
  pl_kernel_table t{};
  std::string err;
  REQUIRE_MESSAGE(pl::select_kernels(target, &t, &err), err);
  return t;
}

// Random tokens in [0, C) for nb sequences of N + 1 (a fixed LCG of `seed`).
inline std::vector<int32_t> tokens(int nb, int N, int C, uint32_t seed) {
  std::vector<int32_t> x(size_t(nb) * (N + 1));
  uint32_t s = seed;
  for (auto& v : x) {
    s = s * 1664525u + 1013904223u;
    v = int32_t((s >> 16) % uint32_t(C));
  }
  return x;
}

// n N(0,1) draws of sub-stream `stream` of seed 1234.
inline std::vector<float> normals(size_t n, uint64_t stream) {
  std::vector<float> z(n);
  table().gaussian(z.data(), n, 1234, stream, 0);
  return z;
}

}  // namespace pl::markov::test
