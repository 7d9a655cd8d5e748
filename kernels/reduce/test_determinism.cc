// SPDX-License-Identifier: Apache-2.0
// Thread-count determinism: the same seed and target give bit-identical results whatever the
// number of threads, because (a) every gaussian sample depends only on (seed, stream, index),
// whatever chunk of a parallel loop produces it, and (b) the reductions have a fixed order: the
// kernels inside a chunk, and tbb::parallel_deterministic_reduce across chunks (its splits
// depend on the range and grain size only).
#include <tbb/blocked_range.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>
#include <tbb/task_arena.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/support.hpp"

namespace {

struct Kernels {
  decltype(&pl::scalar::Gaussian) gaussian;
  decltype(&pl::scalar::Sum) sum;
  decltype(&pl::scalar::Dot) dot;
};

struct Result {
  std::vector<float> z;
  double sum = 0, sum_sq = 0;
};

Result run(const Kernels& k, int threads, size_t n) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, threads);
  tbb::task_arena arena(threads);
  Result r;
  r.z.resize(n);
  arena.execute([&] {
    // Auto-partitioned fill: chunk boundaries change with the thread count and timing.
    tbb::parallel_for(tbb::blocked_range<size_t>(0, n), [&](const tbb::blocked_range<size_t>& b) {
      k.gaussian(r.z.data() + b.begin(), b.size(), 2027, 3, b.begin());
    });
    const tbb::blocked_range<size_t> all(0, n, 8192);
    r.sum = tbb::parallel_deterministic_reduce(
        all, 0.0,
        [&](const tbb::blocked_range<size_t>& b, double acc) {
          return acc + k.sum(r.z.data() + b.begin(), b.size());
        },
        [](double a, double b) { return a + b; });
    r.sum_sq = tbb::parallel_deterministic_reduce(
        all, 0.0,
        [&](const tbb::blocked_range<size_t>& b, double acc) {
          return acc + k.dot(r.z.data() + b.begin(), r.z.data() + b.begin(), b.size());
        },
        [](double a, double b) { return a + b; });
  });
  return r;
}

}  // namespace

TEST_CASE(
    "determinism: parallel gaussian fill and reductions are bit-identical at 1, 2, 4 threads") {
  // 1e6 samples for the variant that dispatch selects (what experiments run); 2^17 for the
  // others, which keeps the suite short under emulation (qemu-aarch64).
  const pl::Variant* best = pl::selected_variant(static_cast<int>(pl::KernelId::gaussian), "");
  // Every runnable gaussian variant, with the sum and dot of the same backend and ISA (the
  // scalar ones where that backend has none).
  for (const auto* g : pl::test::runnable(pl::KernelId::gaussian)) {
    const std::string suffix = g->name.substr(std::string("gaussian").size());
    const pl::Variant* s = pl::find_variant("sum" + suffix);
    const pl::Variant* d = pl::find_variant("dot" + suffix);
    if (!s || !s->supported) s = pl::find_variant("sum.scalar");
    if (!d || !d->supported) d = pl::find_variant("dot.scalar");
    REQUIRE(s != nullptr);
    REQUIRE(d != nullptr);
    const size_t n = g == best ? 1000000 : size_t{1} << 17;
    CAPTURE(g->name);
    CAPTURE(s->name);
    CAPTURE(n);
    const Kernels k{pl::as<decltype(&pl::scalar::Gaussian)>(*g),
                    pl::as<decltype(&pl::scalar::Sum)>(*s), pl::as<decltype(&pl::scalar::Dot)>(*d)};
    // The single-call stream is the reference for the parallel fills.
    std::vector<float> whole(n);
    k.gaussian(whole.data(), n, 2027, 3, 0);
    const Result one = run(k, 1, n);
    CHECK(std::memcmp(one.z.data(), whole.data(), n * sizeof(float)) == 0);
    CHECK(one.sum_sq > 0.9 * n);  // the buffer really holds N(0, 1) samples
    for (int threads : {2, 4}) {
      CAPTURE(threads);
      const Result r = run(k, threads, n);
      CHECK(std::memcmp(r.z.data(), whole.data(), n * sizeof(float)) == 0);
      CHECK(std::memcmp(&r.sum, &one.sum, sizeof(double)) == 0);
      CHECK(std::memcmp(&r.sum_sq, &one.sum_sq, sizeof(double)) == 0);
    }
  }
}
