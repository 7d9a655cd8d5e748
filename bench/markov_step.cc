// SPDX-License-Identifier: Apache-2.0
// Times one markov_icl training step (batch sampling, forward, backward, AdamW) on the kernel
// table and prints one line of key=value pairs; bench/markov_vs_torch.py runs it beside PyTorch.
// The step is timed as markov_icl runs it between checkpoints (all but 20 of 4000 steps in
// markov_default): the gradients and the update, with the loss's log-sum-exp not summed
// (Trainer::train_step(step, false)); --with-loss times the steps that report it.
//   markov_step [--threads T] [--d 64] [--N 128] [--batch 64] [--heads 1] [--C 10]
//               [--layers 2] [--mlp-mult 4] [--attn-only] [--reps 20] [--chunks 8]
//               [--target NAME] [--peak] [--breakdown] [--with-loss]
//               [--eval N_EVAL [--eval-forward]] [--K 64]
// (the model keys as markov_icl names them: C, layers, mlp_mult, attn_only; bench/markov_shapes.py
// times every shape the shipped configs train with them).
// --breakdown (1 thread): where one step's time goes, phase by phase (GEMMs, attention,
// LayerNorm, GELU, softmax of the loss, AdamW, batch sampling, and the model's own loops:
// embedding, residual adds, the cross-entropy in double (--with-loss), the gradient reduction), in
// this thread's CPU time per step, each kernel timed through a wrapped kernel table.
// --eval N_EVAL (1 thread): the work of a run outside the training steps, in this thread's CPU
// time: building the ID and OOD evaluation sets of N_EVAL sequences each (sampling and the exact
// predictors, once per run) and one evaluation (every checkpoint), split into the model's forward
// pass (with the log-probabilities) and the loss/KL sums; --eval-forward: through forward() and
// log_probs() instead of forward_log_probs() (what evaluations ran before it).
// FLOPs counted: matrix products only (linear layers 2 m n k; attention the causal half,
// 2 N(N+1)/2 d per product), backward = 2 x forward.
#include <tbb/global_control.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "bench/peak.hpp"
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
// The attention part of flops_per_step (Q K^T and P V of every layer, fwd + bwd).
double attention_flops_per_step(const pl::markov::ModelConfig& c, int B) {
  return 3.0 * c.layers * double(B) * 2 * (2.0 * c.N * (c.N + 1) / 2 * c.d);
}

// --breakdown: every kernel of the table wrapped in a timer (this thread's CPU time), so the
// step's time splits by kernel without touching the model. Single-threaded only.
double thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e9 + double(ts.tv_nsec);
}
constexpr int kMaxKernels = 64;
double g_kernel_ns[kMaxKernels];
int64_t g_kernel_calls[kMaxKernels];
const char* const kKernelNames[] = {
#define PL_KERNEL(kname, Camel, ret, params) #kname,
#include "phaselab/kernels.def"
#undef PL_KERNEL
};
constexpr int kNumKernels = int(sizeof(kKernelNames) / sizeof(kKernelNames[0]));
static_assert(kNumKernels <= kMaxKernels, "raise kMaxKernels");

template <int Id, class F>
struct Timed;
template <int Id, class R, class... A>
struct Timed<Id, R (*)(A...)> {
  static inline R (*orig)(A...) = nullptr;
  static R call(A... a) {
    const double t0 = thread_cpu_ns();
    struct Done {
      double t0;
      ~Done() {
        g_kernel_ns[Id] += thread_cpu_ns() - t0;
        ++g_kernel_calls[Id];
      }
    } done{t0};
    return orig(a...);
  }
};
void wrap_timed(pl_kernel_table* t) {
#define PL_KERNEL(kname, Camel, ret, params)                       \
  if (t->kname) {                                                  \
    using W = Timed<int(pl::KernelId::kname), decltype(t->kname)>; \
    W::orig = t->kname;                                            \
    t->kname = &W::call;                                           \
  }
#include "phaselab/kernels.def"
#undef PL_KERNEL
}

// GEMM time by shape (trans_a, trans_b, m, n, k, gemm_epilogue's epilogue or 0 for gemm),
// wrapped around the timed gemm and gemm_epilogue.
struct GemmShape {
  int ta, tb;
  size_t m, n, k;
  int epi;
  bool operator<(const GemmShape& o) const {
    return std::tie(ta, tb, m, n, k, epi) < std::tie(o.ta, o.tb, o.m, o.n, o.k, o.epi);
  }
};
std::map<GemmShape, std::pair<double, int64_t>> g_gemm_shapes;  // ns, calls
decltype(pl_kernel_table::gemm) g_gemm_inner = nullptr;
void gemm_by_shape(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float* a,
                   size_t lda, const float* b, size_t ldb, float beta, float* c, size_t ldc) {
  const double t0 = thread_cpu_ns();
  g_gemm_inner(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  auto& e = g_gemm_shapes[{ta, tb, m, n, k, 0}];
  e.first += thread_cpu_ns() - t0;
  ++e.second;
}
decltype(pl_kernel_table::gemm_epilogue) g_gemm_epi_inner = nullptr;
void gemm_epi_by_shape(int ta, int tb, size_t m, size_t n, size_t k, float alpha, const float* a,
                       size_t lda, const float* b, size_t ldb, int epi, const float* ep, size_t lde,
                       float* c, size_t ldc) {
  const double t0 = thread_cpu_ns();
  g_gemm_epi_inner(ta, tb, m, n, k, alpha, a, lda, b, ldb, epi, ep, lde, c, ldc);
  auto& e = g_gemm_shapes[{ta, tb, m, n, k, epi}];
  e.first += thread_cpu_ns() - t0;
  ++e.second;
}

// Which phase of the step a kernel belongs to.
const char* phase_of(const std::string& k) {
  if (k == "gemm" || k == "gemm_batched" || k == "gemm_epilogue") return "GEMM";
  if (k == "attention" || k == "attention_bwd") return "attention";
  if (k == "layernorm" || k == "layernorm_bwd") return "LayerNorm";
  if (k == "gelu" || k == "gelu_bwd" || k == "gelu_fwd_grad") return "GELU";
  if (k == "softmax_rows" || k == "softmax_rows_bwd" || k == "exp")
    return "cross-entropy (softmax)";
  if (k == "adamw" || k == "adam") return "AdamW";
  return "other kernels";
}

// --eval: the evaluation sets (built once per run) and one evaluation (every checkpoint), with
// the evaluation's forward pass, log-probabilities and loss/KL sums apart (medians of reps).
int eval_cost(pl::markov::TrainConfig tc, const pl_kernel_table& t, int n_eval, int reps,
              bool old_path) {
  tc.n_eval = n_eval;
  tc.alpha1 = 0;  // matched to the ensemble, as in markov_default
  const double c0 = thread_cpu_ns();
  pl::markov::Trainer tr(tc, t);
  const double build = (thread_cpu_ns() - c0) * 1e-6;
  for (int s = 1; s <= 3; ++s) tr.train_step(s);  // weights off their initial values
  std::vector<double> total, fwd, lp;
  for (int r = 0; r < reps + 1; ++r) {
    double f = 0, l = 0;
    const double e0 = thread_cpu_ns();
    const auto res = tr.evaluate_with([&](const int32_t* seq, int nb, double* logp) {
      const double a = thread_cpu_ns();
      double loss;
      if (old_path) {  // forward() with its activations, then log_probs()
        loss = tr.model().forward(seq, nb);
        const double b = thread_cpu_ns();
        tr.model().log_probs(nb, logp);
        l += thread_cpu_ns() - b;
        f += b - a;
      } else {  // what Trainer::evaluate runs
        loss = tr.model().forward_log_probs(seq, nb, logp);
        f += thread_cpu_ns() - a;
      }
      return loss;
    });
    const double e = thread_cpu_ns() - e0;
    if (r == 0) {
      std::printf("eval: loss ID %.6f OOD %.6f\n", res.loss[0], res.loss[1]);
      continue;
    }
    total.push_back(e * 1e-6), fwd.push_back(f * 1e-6), lp.push_back(l * 1e-6);
  }
  auto med = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double T = med(total), F = med(fwd), L = med(lp);
  std::printf(
      "eval: d=%d N=%d batch=%d chunks=%d K=%d n_eval=%d target=%s, 1 thread, CPU ms (median of "
      "%d)\n"
      "  %-40s %9.3f\n  %-40s %9.3f\n",
      tc.model.d, tc.model.N, tc.batch, tc.chunks, tc.K, n_eval, t.target ? t.target : "?", reps,
      "evaluation sets (once per run)", build, "one evaluation (every checkpoint)", T);
  if (old_path)
    std::printf("    %-38s %9.3f\n    %-38s %9.3f\n", "model forward()", F, "log_probs()", L);
  else
    std::printf("    %-38s %9.3f\n", "forward_log_probs()", F);
  std::printf("    %-38s %9.3f\n", "loss and KL sums", T - F - L);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, reps = 20, batch = 64, chunks = 8;
  int n_eval = 0, K = 64, mlp_mult = 4;
  bool peak = false, breakdown = false, eval_forward = false, with_loss = false;
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
    else if (a == "--C")
      mc.C = next();
    else if (a == "--layers")
      mc.layers = next();
    else if (a == "--mlp-mult")
      mlp_mult = next();
    else if (a == "--attn-only")
      mc.mlp = false;
    else if (a == "--reps")
      reps = next();
    else if (a == "--chunks")
      chunks = next();
    else if (a == "--target" && i + 1 < argc)
      target = argv[++i];
    else if (a == "--peak")
      peak = true;
    else if (a == "--breakdown")
      breakdown = true;
    else if (a == "--with-loss")
      with_loss = true;
    else if (a == "--eval")
      n_eval = next();
    else if (a == "--eval-forward")
      eval_forward = true;
    else if (a == "--K")
      K = next();
    else {
      std::fprintf(stderr,
                   "usage: markov_step [--threads T] [--d D] [--N N] [--batch B] [--heads H] "
                   "[--C STATES] [--layers L] [--mlp-mult M] [--attn-only] [--reps R] "
                   "[--chunks CH] [--target NAME] [--peak] [--breakdown] [--with-loss] "
                   "[--eval N_EVAL [--eval-forward]] [--K K]\n");
      return 2;
    }
  }
  // The ranges markov_icl's config keys allow (a bad value here would crash the model).
  if (threads < 1 || mc.d < 2 || mc.N < 2 || batch < 1 || mc.heads < 1 || mc.d % mc.heads != 0 ||
      mc.C < 2 || mc.C > 64 || mc.layers < 1 || mlp_mult < 1 || reps < 1 || chunks < 1 || K < 1) {
    std::fprintf(
        stderr,
        "markov_step: out of range (threads, batch, heads, layers, mlp-mult, reps, chunks, "
        "K >= 1; d, N >= 2; C in [2, 64]; heads dividing d)\n");
    return 2;
  }
  mc.ffn = mlp_mult * mc.d;
  if (breakdown || n_eval > 0) threads = 1;
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
  tc.K = K;
  tc.batch = batch;
  tc.chunks = chunks;
  tc.n_eval = 1;
  tc.steps = reps + 3;
  if (breakdown) {
    wrap_timed(&t);
    g_gemm_inner = t.gemm;
    t.gemm = &gemm_by_shape;
    g_gemm_epi_inner = t.gemm_epilogue;
    t.gemm_epilogue = &gemm_epi_by_shape;
  }
  if (n_eval > 0) return eval_cost(tc, t, n_eval, reps, eval_forward);
  pl::markov::Trainer tr(tc, t);
  if (breakdown) {
    // Batch sampling alone (train_step samples the same way, on its own step numbers).
    std::vector<double> samp;
    for (int s = 1; s <= reps; ++s) {
      const double c0 = thread_cpu_ns();
      tr.make_batch(1000000 + s);
      samp.push_back(thread_cpu_ns() - c0);
    }
    std::sort(samp.begin(), samp.end());
    for (int s = 1; s <= 3; ++s) tr.train_step(s, with_loss);  // warm-up
    std::fill(g_kernel_ns, g_kernel_ns + kMaxKernels, 0.0);
    std::fill(g_kernel_calls, g_kernel_calls + kMaxKernels, int64_t(0));
    g_gemm_shapes.clear();
    const double c0 = thread_cpu_ns();
    for (int s = 4; s < 4 + reps; ++s) tr.train_step(s, with_loss);
    const double step = (thread_cpu_ns() - c0) / reps * 1e-6;  // ms
    const double sampling = samp[samp.size() / 2] * 1e-6;
    // Sampling's own kernel calls (random bits) are inside `sampling`.
    std::vector<std::pair<std::string, double>> phases;
    double kernels = 0;
    for (int k = 0; k < kNumKernels; ++k) {
      if (!g_kernel_calls[k]) continue;
      const std::string name = kKernelNames[k];
      if (name == "uniform_bits" || name == "gaussian") continue;
      const double v = g_kernel_ns[k] / reps * 1e-6;
      kernels += v;
      const char* ph = phase_of(name);
      auto it = std::find_if(phases.begin(), phases.end(), [&](auto& p) { return p.first == ph; });
      if (it == phases.end())
        phases.push_back({ph, v});
      else
        it->second += v;
    }
    phases.push_back({"batch sampling", sampling});
    phases.push_back({"model loops (embed, residual, loss, reduce)", step - kernels - sampling});
    const double fl = flops_per_step(mc, batch), fa = attention_flops_per_step(mc, batch);
    const auto isas = pl::bench::peak_isas();
    const double pk = isas.empty() ? 0 : pl::bench::peak_gflops(isas[0], 0.5);
    std::printf(
        "breakdown: d=%d N=%d batch=%d heads=%d target=%s, 1 thread, CPU ms per step (mean of "
        "%d)\n",
        mc.d, mc.N, batch, mc.heads, t.target ? t.target : "?", reps);
    std::printf("  %-44s %9s %7s %10s\n", "phase", "ms", "%", "GFLOP/s");
    for (const auto& [name, v] : phases) {
      double g = 0;
      if (name == "GEMM") g = (fl - fa) / v * 1e-6;
      if (name == "attention") g = fa / v * 1e-6;
      std::printf("  %-44s %9.3f %6.1f%% ", name.c_str(), v, 100 * v / step);
      if (g > 0)
        std::printf("%10.1f\n", g);
      else
        std::printf("%10s\n", "");
    }
    std::printf("  %-44s %9.3f %6.1f%% %10.1f\n", "step", step, 100.0, fl / step * 1e-6);
    std::printf(
        "  peak (%s FMA loop) %.1f GFLOP/s: step at %.1f%% of peak; GEMM FLOPs %.4g, "
        "attention FLOPs %.4g; at peak the step would take %.3f ms\n",
        isas.empty() ? "none" : isas[0].c_str(), pk, 100 * fl / step * 1e-6 / pk, fl - fa, fa,
        fl / pk * 1e-6);
    std::printf(
        "  GEMMs by shape (op(A) m x k times op(B) k x n; t = stored transposed; .*E, +E: "
        "gemm_epilogue):\n");
    for (const auto& [sh, v] : g_gemm_shapes)
      std::printf("    %c%c m %5zu n %5zu k %5zu %3s calls/step %4.0f  %8.3f ms  %6.1f GFLOP/s\n",
                  sh.ta ? 't' : 'n', sh.tb ? 't' : 'n', sh.m, sh.n, sh.k,
                  sh.epi == 0   ? ""
                  : sh.epi == 1 ? ".*E"
                                : "+E",
                  double(v.second) / reps, v.first / reps * 1e-6,
                  2.0 * sh.m * sh.n * sh.k * double(v.second) / v.first);
    // A forced narrower target: also against that ISA's own peak.
    const std::string tgt = t.target ? t.target : "";
    if (!isas.empty() && tgt != isas[0] && std::find(isas.begin(), isas.end(), tgt) != isas.end()) {
      const double pt = pl::bench::peak_gflops(tgt, 0.5);
      std::printf("  peak (%s FMA loop) %.1f GFLOP/s: step at %.1f%% of the %s peak\n", tgt.c_str(),
                  pt, 100 * fl / step * 1e-6 / pt, tgt.c_str());
    }
    return 0;
  }
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
    tr.train_step(s, with_loss);
    const double e =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (s > 3) ms.push_back(e), cpu.push_back(cpu_now() - c0);
  }
  std::sort(ms.begin(), ms.end());
  std::sort(cpu.begin(), cpu.end());
  const double med = ms[ms.size() / 2], fl = flops_per_step(mc, batch);
  std::printf(
      "impl=phaselab threads=%d d=%d N=%d batch=%d heads=%d C=%d layers=%d median_ms=%.3f "
      "min_ms=%.3f cpu_ms=%.3f flops=%.4g gflops=%.2f target=%s with_loss=%d",
      threads, mc.d, mc.N, batch, mc.heads, mc.C, mc.layers, med, ms.front(), cpu[cpu.size() / 2],
      fl, fl / med * 1e-6, t.target ? t.target : "?", int(with_loss));
  if (peak) {
    // The widest ISA's peak (what "% of peak" is quoted against), and every ISA's.
    const auto isas = pl::bench::peak_isas();
    if (!isas.empty())
      std::printf(" peak_isa=%s peak_gflops_1core=%.1f", isas[0].c_str(),
                  pl::bench::peak_gflops(isas[0], 1.0));
    for (const auto& isa : isas)
      std::printf(" peak_%s=%.1f", isa.c_str(), pl::bench::peak_gflops(isa, 0.5));
  }
  std::printf("\n");
  return 0;
}
