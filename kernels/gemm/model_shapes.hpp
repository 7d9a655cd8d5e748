// SPDX-License-Identifier: Apache-2.0
// The GEMM shapes the Markov model runs (plugins/markov_common/model.hpp), one chunk of R = 1024
// rows, d_model 32 and 64, ffn 4d, C = 10: Y = X W^T ("nt", n = out), dX = dY W ("nn", n = in)
// and dW = dY^T X ("tn", k = R). One list for the harness's cases and the OpenBLAS benchmark.
#pragma once

#include <cstddef>

namespace pl::gemm_shapes {

// Calls f(m, n, k, "nn" | "nt" | "tn") for every product of the model's step.
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

}  // namespace pl::gemm_shapes
