// SPDX-License-Identifier: Apache-2.0
// Timing entry for bench/copy_vs_torch.py: full-batch Adam on the copy-task MAP objective
// (the plugin's own CopyNet and AdamTrainer on the selected kernels), fixed step count, one
// thread. Prints one line per repetition and the medians of wall and CPU time
// ("median_ms", "median_cpu_ms"; CPU time is the fairer figure on a shared machine).
//   phaselab_copy_bench [--L 16] [--V 4] [--P 1000] [--steps 1000] [--reps 5]
//                       [--attention softmax|linear] [--target NAME]
//                       [--path auto|direct|stats]   (NetConfig::loss_path)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "copy_common/data.hpp"
#include "copy_task/model.hpp"
#include "phaselab/kernels.hpp"

int main(int argc, char** argv) {
  int L = 16, V = 4, P = 1000, reps = 5;
  int64_t steps = 1000;
  std::string attention = "softmax", target, path = "auto";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--L")
      L = std::atoi(v.c_str());
    else if (a == "--V")
      V = std::atoi(v.c_str());
    else if (a == "--P")
      P = std::atoi(v.c_str());
    else if (a == "--steps")
      steps = std::atoll(v.c_str());
    else if (a == "--reps")
      reps = std::atoi(v.c_str());
    else if (a == "--attention")
      attention = v;
    else if (a == "--target")
      target = v;
    else if (a == "--path")
      path = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  pl_kernel_table k;
  std::string err;
  if (!pl::select_kernels(target, &k, &err)) {
    std::fprintf(stderr, "%s\n", err.c_str());
    return 3;
  }
  pl::copy::task::NetConfig c;
  c.L = L;
  c.V = V;
  c.softmax = attention == "softmax";
  using Path = pl::copy::task::NetConfig::LossPath;
  if (path == "direct")
    c.loss_path = Path::direct;
  else if (path == "stats")
    c.loss_path = Path::stats;
  else if (path != "auto") {
    std::fprintf(stderr, "--path must be auto, direct or stats\n");
    return 2;
  }
  auto tokens = pl::copy::make_tokens(k, 1, 1, P, L, V);
  const std::clock_t s0 = std::clock();
  pl::copy::task::CopyNet net(k, c, std::move(tokens), P);  // gathers the token counts (stats path)
  const double setup_ms = 1000.0 * double(std::clock() - s0) / CLOCKS_PER_SEC;
  pl::copy::task::AdamConfig a;
  a.max_steps = steps;
  a.tol = -1;  // never converged: exactly `steps` steps
  pl::copy::task::AdamTrainer tr(net, a);
  std::vector<float> theta(net.n_params());
  std::vector<double> ms, cpu;
  double obj = 0;
  for (int r = 0; r < reps; ++r) {
    k.gaussian(theta.data(), theta.size(), 1, 2, 0);
    for (auto& x : theta) x *= 0.1f;
    const std::clock_t c0 = std::clock();
    const auto t0 = std::chrono::steady_clock::now();
    const auto res = tr.train(theta.data(), k, [] { return false; });
    const auto t1 = std::chrono::steady_clock::now();
    const std::clock_t c1 = std::clock();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    cpu.push_back(1000.0 * double(c1 - c0) / CLOCKS_PER_SEC);
    obj = res.objective;
    std::printf("rep %d: %.3f ms cpu %.3f ms (%lld steps, objective %.6g)\n", r, ms.back(),
                cpu.back(), (long long)res.steps, obj);
  }
  std::sort(ms.begin(), ms.end());
  std::sort(cpu.begin(), cpu.end());
  std::printf("target %s posattn %s\n", k.target,
              net.uses_stats() ? (std::string("gram:") + k.variant->posattn_gram_sse).c_str()
                               : k.variant->posattn_onehot_sse);
  // The objective's and Adam's constants, which bench/copy_vs_torch.py gives its peers.
  std::printf("hyper kappa=%.17g sw2=%.17g sg2=%.17g lr=%.17g beta1=%.17g beta2=%.17g eps=%.17g\n",
              c.kappa, c.sw2, c.sg2, a.lr, a.beta1, a.beta2, a.eps);
  std::printf("setup_cpu_ms %.4f\n", setup_ms);
  std::printf("median_ms %.4f\n", ms[ms.size() / 2]);
  std::printf("median_cpu_ms %.4f\n", cpu[cpu.size() / 2]);
  return 0;
}
