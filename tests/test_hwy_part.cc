// SPDX-License-Identifier: Apache-2.0
// phaselab/hwy_part-inl.h on every compiled Highway target this CPU runs: part::Load gives the
// first `valid` elements and zeros after them, part::Store writes exactly the first `valid`
// elements; both at the very end of a readable mapping followed by an inaccessible page, so an
// access past the array (a masked instruction touching masked-off elements, a full-vector load
// or blend) faults and fails the suite.
// foreach_target.h must follow HWY_TARGET_INCLUDE and precede the other includes.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tests/test_hwy_part.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "phaselab/hwy_part-inl.h"
// clang-format on

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

HWY_BEFORE_NAMESPACE();
namespace pl {
namespace HWY_NAMESPACE {
namespace {
namespace hn = hwy::HWY_NAMESPACE;

// Appends a message to `failures` for every wrong element; `mem` has `avail` writable elements
// of T and an inaccessible page after them.
template <typename T>
void CheckType(T* mem, size_t avail, std::vector<std::string>* failures) {
  const hn::ScalableTag<T> d;
  const size_t N = hn::Lanes(d);
  auto fail = [&](const char* what, size_t valid, size_t i) {
    failures->push_back(std::string(hwy::TargetName(HWY_TARGET)) + " " +
                        (sizeof(T) == 4 ? "f32" : "f64") + " " + what + ": valid " +
                        std::to_string(valid) + ", element " + std::to_string(i));
  };
  auto same = [](T a, T b) { return std::memcmp(&a, &b, sizeof(T)) == 0; };
  auto pattern = [](size_t i) { return static_cast<T>(1.5) + static_cast<T>(i); };
  std::vector<T> got(N);
  for (size_t valid = 0; valid < N; ++valid) {
    // The last `valid` elements before the inaccessible page, N - 1 sentinels before them.
    T* p = mem + avail - valid;
    T* sentinels = p - (N - 1);
    for (T* q = sentinels; q < p + valid; ++q) *q = static_cast<T>(-7);
    for (size_t i = 0; i < valid; ++i) p[i] = pattern(i);
    hn::StoreU(part::Load(d, p, valid), d, got.data());
    for (size_t i = 0; i < N; ++i)
      if (!same(got[i], i < valid ? pattern(i) : static_cast<T>(0))) fail("Load", valid, i);
    // Store a vector of other values over the same elements.
    const auto v = hn::Add(hn::Iota(d, 100), hn::Set(d, static_cast<T>(0.25)));
    part::Store(d, v, p, valid);
    for (size_t i = 0; i < valid; ++i)
      if (!same(p[i], static_cast<T>(100.25) + static_cast<T>(i))) fail("Store", valid, i);
    for (T* q = sentinels; q < p; ++q)
      if (!same(*q, static_cast<T>(-7))) fail("Store before p", valid, size_t(q - sentinels));
  }
}

}  // namespace

void CheckPart(std::vector<std::string>* failures) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  // Two pages for the arrays (the widest vector is at most 256 bytes on these targets), then
  // an inaccessible one.
  const size_t bytes = 3 * page;
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) {
    failures->push_back("mmap failed");
    return;
  }
  char* base = static_cast<char*>(m);
  if (mprotect(base + 2 * page, page, PROT_NONE) != 0) failures->push_back("mprotect failed");
  CheckType(reinterpret_cast<float*>(base), 2 * page / sizeof(float), failures);
  CheckType(reinterpret_cast<double*>(base), 2 * page / sizeof(double), failures);
  munmap(m, bytes);
}

}  // namespace HWY_NAMESPACE
}  // namespace pl
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <hwy/targets.h>

#include "tests/support.hpp"

namespace pl {
HWY_EXPORT(CheckPart);
}  // namespace pl

TEST_CASE("hwy_part: partial loads and stores touch only the valid elements, every target") {
  size_t targets = 0;
  for (int64_t t : hwy::SupportedAndGeneratedTargets()) {
    const std::string target = hwy::TargetName(t);
    CAPTURE(target);
    hwy::SetSupportedTargetsForTest(t);
    std::vector<std::string> failures;
    HWY_DYNAMIC_DISPATCH(pl::CheckPart)(&failures);
    for (const auto& f : failures) FAIL_CHECK(f);
    CHECK(failures.empty());
    ++targets;
  }
  hwy::SetSupportedTargetsForTest(0);
  CHECK(targets >= 1);
}
#endif  // HWY_ONCE
