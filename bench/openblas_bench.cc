// SPDX-License-Identifier: Apache-2.0
// openblas_bench: OpenBLAS cblas_sgemm on the shapes of phaselab_bench's gemm benchmarks
// (row-major, C = op(A) op(B), beta = 0), named "openblas/sgemm/<ta><tb>/m:M/n:N/k:K" (t = the
// operand stored transposed, as in phaselab_bench's names) with the same GFLOPS
// counter. bench/compare.py runs it single-threaded (OPENBLAS_NUM_THREADS=1) next to
// phaselab_bench and prints the ratios.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/gemm/model_shapes.hpp"

namespace {

void register_sgemm(size_t m, size_t n, size_t k, const char* trans) {
  const bool ta = trans[0] == 't', tb = trans[1] == 't';
  const std::string name = std::string("openblas/sgemm/") + trans + "/m:" + std::to_string(m) +
                           "/n:" + std::to_string(n) + "/k:" + std::to_string(k);
  benchmark::RegisterBenchmark(name.c_str(), [m, n, k, ta, tb](benchmark::State& st) {
    std::mt19937 g(1);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<float> a(m * k), b(k * n), c(m * n);
    for (auto& x : a) x = u(g);
    for (auto& x : b) x = u(g);
    for (auto _ : st) {
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                  int(m), int(n), int(k), 1.f, a.data(), ta ? int(m) : int(k), b.data(),
                  tb ? int(k) : int(n), 0.f, c.data(), int(n));
      benchmark::DoNotOptimize(c.data());
      benchmark::ClobberMemory();
    }
    st.counters["GFLOPS"] =
        benchmark::Counter(2.0 * m * n * k * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  });
}

}  // namespace

int main(int argc, char** argv) {
  // The shapes bench/compare.py sets beside phaselab_bench's (kernels/gemm/model_shapes.hpp).
  pl::gemm_shapes::for_each_compared_gemm(register_sgemm);
  pl::gemm_shapes::for_each_model_gemm(register_sgemm);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
