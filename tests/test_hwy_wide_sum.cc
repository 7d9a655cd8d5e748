// SPDX-License-Identifier: Apache-2.0
// phaselab/hwy_wide_sum-inl.h on every compiled Highway target this CPU runs: WideTotals (the
// totals of several rows at once, on targets that have it) gives, lane for lane, the bits of
// WideTotal of each row. The rows' lanes have random signs and exponents over 2^-12..2^12 (and
// some exact zeros of either sign, cancelling pairs and equal lanes), so most row sums round
// and a different order of the additions would show: the suite also counts the rows where a
// sequential sum differs from WideTotal and requires that to be at least a tenth of them.
// foreach_target.h must follow HWY_TARGET_INCLUDE and precede the other includes.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tests/test_hwy_wide_sum.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "phaselab/hwy_wide_sum-inl.h"
// clang-format on

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

HWY_BEFORE_NAMESPACE();
namespace pl {
namespace HWY_NAMESPACE {
namespace {
namespace hn = hwy::HWY_NAMESPACE;

#if PHASELAB_HWY_WIDE_TOTALS
// A lane value: mostly random sign, mantissa and exponent; sometimes +0, -0 or a repeat.
double RandomLane(std::mt19937_64& g, double previous) {
  const uint64_t r = g();
  switch (r % 16) {
    case 0:
      return 0.0;
    case 1:
      return -0.0;
    case 2:
      return -previous;  // cancels exactly
    case 3:
      return previous;
    default: {
      const double m = 1.0 + double(g() >> 11) * 0x1p-53;  // [1, 2)
      const int e = int((r >> 8) % 25) - 12;
      return ((r >> 4) & 1 ? -1 : 1) * std::ldexp(m, e);
    }
  }
}
#endif

}  // namespace

// rows_compared: rows whose WideTotals lane was compared; seq_differs: rows where a sequential
// sum differs from WideTotal (the data tells orders apart).
void CheckWideTotals(std::vector<std::string>* failures, size_t* rows_compared,
                     size_t* seq_differs) {
#if PHASELAB_HWY_WIDE_TOTALS
  const hn::ScalableTag<double> dd;
  using VD = hn::Vec<decltype(dd)>;
  const size_t NH = hn::Lanes(dd);
  constexpr size_t KR = kWideTotalRows;
  if (NH != KR) {
    failures->push_back(std::string(hwy::TargetName(HWY_TARGET)) + ": lanes != rows");
    return;
  }
  std::mt19937_64 g(1234);
  std::vector<double> lo(KR * NH), hi(KR * NH);
  HWY_ALIGN double got[KR];
  for (size_t rep = 0; rep < 20000; ++rep) {
    double prev = 1.0;
    for (size_t i = 0; i < KR * NH; ++i) {
      lo[i] = prev = RandomLane(g, prev);
      hi[i] = prev = RandomLane(g, prev);
    }
    VD s[KR];
    for (size_t k = 0; k < KR; ++k)
      s[k] = hn::Add(hn::LoadU(dd, lo.data() + k * NH), hn::LoadU(dd, hi.data() + k * NH));
    hn::Store(WideTotals(dd, s), dd, got);
    for (size_t k = 0; k < KR; ++k) {
      const double want =
          WideTotal(dd, hn::LoadU(dd, lo.data() + k * NH), hn::LoadU(dd, hi.data() + k * NH));
      if (std::memcmp(&got[k], &want, sizeof want) != 0)
        failures->push_back(std::string(hwy::TargetName(HWY_TARGET)) + ": rep " +
                            std::to_string(rep) + " row " + std::to_string(k));
      double seq = 0;
      for (size_t i = 0; i < NH; ++i) seq += lo[k * NH + i] + hi[k * NH + i];
      if (std::memcmp(&seq, &want, sizeof want) != 0) ++*seq_differs;
      ++*rows_compared;
    }
  }
#else
  (void)failures;
  (void)rows_compared;
  (void)seq_differs;
#endif
}

}  // namespace HWY_NAMESPACE
}  // namespace pl
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <hwy/targets.h>

#include "tests/support.hpp"

namespace pl {
HWY_EXPORT(CheckWideTotals);
}  // namespace pl

TEST_CASE("hwy_wide_sum: WideTotals has the bits of WideTotal per row, every target") {
  size_t targets = 0, compared = 0;
  for (int64_t t : hwy::SupportedAndGeneratedTargets()) {
    const std::string target = hwy::TargetName(t);
    CAPTURE(target);
    hwy::SetSupportedTargetsForTest(t);
    std::vector<std::string> failures;
    size_t rows = 0, seq_differs = 0;
    HWY_DYNAMIC_DISPATCH(pl::CheckWideTotals)(&failures, &rows, &seq_differs);
    for (size_t i = 0; i < failures.size() && i < 10; ++i) FAIL_CHECK(failures[i]);
    CHECK(failures.empty());
    if (rows) {
      // The inputs distinguish summation orders (about 28% of the rows at AVX2, 51% at AVX-512).
      CHECK(seq_differs > rows / 10);
      ++compared;
    }
    ++targets;
  }
  hwy::SetSupportedTargetsForTest(0);
  CHECK(targets >= 1);
  // x86 with AVX2 or AVX-512: WideTotals was compared on at least one target.
  if (hwy::SupportedTargets() & (HWY_AVX2 | HWY_AVX3)) CHECK(compared >= 1);
}
#endif  // HWY_ONCE
