// Times one markov_icl training step (batch sampling, forward, backward, AdamW) on the kernel
// table and prints one line of key=value pairs; bench/markov_vs_torch.py runs it beside PyTorch.
//   markov_step [--threads T] [--d 64] [--N 128] [--batch 64] [--heads 1] [--reps 20]
//               [--chunks 8] [--target NAME] [--peak]
// FLOPs counted: matrix products only (linear layers 2 m n k; attention the causal half,
// 2 N(N+1)/2 d per product), backward = 2 x forward.
#include <tbb/global_control.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "markov_common/trainer.hpp"
#include "phaselab/kernels.hpp"

namespace {

double flops_per_step(const pl::markov::ModelConfig& c, int B) {
  const double R = double(B) * c.N, d = c.d, f = c.ffn;
  double fwd = 0;
  for (int l = 0; l < c.layers; ++l) {
    fwd += 2 * R * d * 3 * d + 2 * R * d * d;                // qkv, output projection
    if (c.mlp) fwd += 2 * (2 * R * d * f);                   // fc, proj
    fwd += double(B) * 2 * (2.0 * c.N * (c.N + 1) / 2 * d);  // Q K^T and P V (causal)
  }
  fwd += 2 * R * d * c.C;  // unembedding
  return 3 * fwd;
}

#if defined(__x86_64__)
// Single-core FMA throughput: 12 independent 16-lane accumulators (2 FMA ports x latency 4..6),
// per second of this process's CPU time (so a loaded, shared machine does not lower it).
double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}
__attribute__((target("avx512f"))) double peak_avx512(double seconds) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(float(i) * 1e-3f);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  const double t0 = cpu_seconds();
  long iters = 0;
  double el = 0;
  do {
    for (int r = 0; r < 100000; ++r)
      for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
    iters += 100000;
    el = cpu_seconds() - t0;
  } while (el < seconds);
  float sink = 0, lanes[16];  // (not _mm512_reduce_add_ps: GCC 12's header warns)
  for (int i = 0; i < 12; ++i) {
    _mm512_storeu_ps(lanes, acc[i]);
    for (float v : lanes) sink += v;
  }
  if (sink == 12345.f) std::puts("");
  return double(iters) * 12 * 16 * 2 / el;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, reps = 20, batch = 64, chunks = 8;
  bool peak = false;
  std::string target;
  pl::markov::ModelConfig mc;
  mc.d = 64;
  mc.N = 128;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
    if (a == "--threads")
      threads = next();
    else if (a == "--d")
      mc.d = next();
    else if (a == "--N")
      mc.N = next();
    else if (a == "--batch")
      batch = next();
    else if (a == "--heads")
      mc.heads = next();
    else if (a == "--reps")
      reps = next();
    else if (a == "--chunks")
      chunks = next();
    else if (a == "--target" && i + 1 < argc)
      target = argv[++i];
    else if (a == "--peak")
      peak = true;
    else {
      std::fprintf(stderr,
                   "usage: markov_step [--threads T] [--d D] [--N N] [--batch B] [--heads H] "
                   "[--reps R] [--chunks C] [--target NAME] [--peak]\n");
      return 2;
    }
  }
  mc.ffn = 4 * mc.d;
  tbb::global_control gc(tbb::global_control::max_allowed_parallelism,
                         size_t(std::max(1, threads)));
  pl_kernel_table t{};
  std::string err;
  if (!pl::select_kernels(target, &t, &err)) {
    std::fprintf(stderr, "markov_step: %s\n", err.c_str());
    return 2;
  }
  pl::markov::TrainConfig tc;
  tc.model = mc;
  tc.K = 64;
  tc.batch = batch;
  tc.chunks = chunks;
  tc.n_eval = 1;
  tc.steps = reps + 3;
  pl::markov::Trainer tr(tc, t);
  // Wall time per step, and process CPU time (all threads): on a shared, loaded machine the CPU
  // time of a 1-thread run is the better estimate of the unloaded step time.
  auto cpu_now = [] {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
  };
  std::vector<double> ms, cpu;
  for (int s = 1; s <= reps + 3; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_now();
    tr.train_step(s);
    const double e =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (s > 3) ms.push_back(e), cpu.push_back(cpu_now() - c0);
  }
  std::sort(ms.begin(), ms.end());
  std::sort(cpu.begin(), cpu.end());
  const double med = ms[ms.size() / 2], fl = flops_per_step(mc, batch);
  std::printf(
      "impl=phaselab threads=%d d=%d N=%d batch=%d heads=%d median_ms=%.3f min_ms=%.3f "
      "cpu_ms=%.3f flops=%.4g gflops=%.2f target=%s",
      threads, mc.d, mc.N, batch, mc.heads, med, ms.front(), cpu[cpu.size() / 2], fl,
      fl / med * 1e-6, t.target ? t.target : "?");
#if defined(__x86_64__)
  if (peak && __builtin_cpu_supports("avx512f"))
    std::printf(" peak_gflops_1core=%.1f", peak_avx512(1.0) * 1e-9);
#endif
  std::printf("\n");
  return 0;
}
