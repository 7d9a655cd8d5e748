// SPDX-License-Identifier: Apache-2.0
// The GEMM shapes the benchmarks compare with OpenBLAS and PyTorch, in one place for the harness's
// cases, bench/openblas_bench.cc and bench/compare.py (which reads them from
// `phaselab_bench --compared-shapes` and `--model-shapes`, one "m n k tr" a line).
#pragma once

#include <cstddef>

namespace pl::gemm_shapes {

// The Markov model's products (plugins/markov_common/model.hpp), one chunk of R = 1024 rows,
// d_model 32 and 64, ffn 4d, C = 10: Y = X W^T ("nt", n = out), dX = dY W ("nn", n = in) and
// dW = dY^T X ("tn", k = R). Calls f(m, n, k, "nn" | "nt" | "tn") for every product of a step.
template <class F>
void for_each_model_gemm(F&& f) {
  for (size_t d : {32, 64}) {
    for (size_t o : {size_t(10), d, 3 * d, 4 * d}) {
      f(size_t(1024), o, d, "nt");
      f(size_t(1024), d, o, "nn");
      f(o, d, size_t(1024), "tn");
    }
    f(size_t(1024), d, 4 * d, "nt");
    f(size_t(1024), 4 * d, d, "nn");
    f(d, 4 * d, size_t(1024), "tn");
  }
}

// The square and tall shapes compared with the peers (a subset of the harness's benchmark
// shapes): C = A B at 64^3 and 8192 rows, and the tall-skinny products of the model at 8192 rows,
// the unembedding (Y = X Wu^T, n = C = 10) and a weight gradient over all rows (k = 8192).
template <class F>
void for_each_compared_gemm(F&& f) {
  f(size_t(64), size_t(64), size_t(64), "nn");
  for (size_t k : {64, 256})
    for (size_t n : {64, 256}) f(size_t(8192), n, k, "nn");
  f(size_t(8192), size_t(256), size_t(64), "nt");
  f(size_t(8192), size_t(10), size_t(64), "nt");
  f(size_t(64), size_t(256), size_t(8192), "tn");
}

}  // namespace pl::gemm_shapes
