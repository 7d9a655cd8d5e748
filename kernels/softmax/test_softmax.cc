// SPDX-License-Identifier: Apache-2.0
// softmax_rows / softmax_rows_bwd: what is not a shape sweep. The sweeps against the double oracle
// (every width, masks, scales, extreme inputs) and the finite-difference check of the backward
// pass are harness cases in cases_softmax.cc; here: x may alias y, dx may alias dy.
#include <algorithm>

#include "tests/support.hpp"

namespace {

using SoftmaxFn = decltype(&pl::scalar::SoftmaxRows);
using SoftmaxBwdFn = decltype(&pl::scalar::SoftmaxRowsBwd);

struct Inputs {
  float lo, hi, scale;
};
const Inputs kInputs[] = {
    {-4.f, 4.f, 1.f}, {90.f, 100.f, 1.f}, {-30.f, 30.f, 2.7f}, {-3.f, 3.f, -0.7f}};

// f(rows, cols, causal, inputs) over the shapes of cases_softmax.cc's sweep.
template <class F>
void for_each_shape(F f) {
  for (size_t cols : pl::test::sizes_around_widths(512))
    for (int causal : {0, 1})
      for (const Inputs& k : kInputs) {
        const size_t rows = causal ? std::min<size_t>(cols + 3, 40) : 3;
        CAPTURE(cols);
        CAPTURE(causal);
        CAPTURE(k.lo);
        CAPTURE(k.scale);
        f(rows, cols, causal, k);
      }
}

}  // namespace

TEST_CASE("softmax_rows: in place (x == y) gives the same numbers, every variant and width") {
  for (const auto* v : pl::test::runnable(pl::KernelId::softmax_rows)) {
    CAPTURE(v->name);
    auto fn = pl::as<SoftmaxFn>(*v);
    for_each_shape([&](size_t rows, size_t cols, int causal, const Inputs& k) {
      auto x = pl::test::uniform(rows * cols, k.lo, k.hi, uint32_t(cols * 31 + causal));
      std::vector<float> y(rows * cols);
      fn(x.data(), y.data(), rows, cols, k.scale, causal);
      fn(x.data(), x.data(), rows, cols, k.scale, causal);
      CHECK(std::equal(x.begin(), x.end(), y.begin()));
    });
  }
}

TEST_CASE("softmax_rows_bwd: dx may alias dy, every variant and width") {
  for (const auto* v : pl::test::runnable(pl::KernelId::softmax_rows_bwd)) {
    CAPTURE(v->name);
    auto fn = pl::as<SoftmaxBwdFn>(*v);
    for_each_shape([&](size_t rows, size_t cols, int causal, const Inputs& k) {
      // y: a forward pass of the scalar reference (any probabilities do here).
      auto y = pl::test::uniform(rows * cols, k.lo, k.hi, uint32_t(cols * 7 + causal));
      pl::scalar::SoftmaxRows(y.data(), y.data(), rows, cols, k.scale, causal);
      auto dy = pl::test::uniform(rows * cols, -1.f, 1.f, uint32_t(cols * 13 + causal));
      std::vector<float> dx(rows * cols);
      fn(y.data(), dy.data(), dx.data(), rows, cols, k.scale, causal);
      fn(y.data(), dy.data(), dy.data(), rows, cols, k.scale, causal);
      CHECK(std::equal(dy.begin(), dy.end(), dx.begin()));
    });
  }
}
