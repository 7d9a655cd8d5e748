// SPDX-License-Identifier: Apache-2.0
// ou_process: n independent particles of the Ornstein-Uhlenbeck process
//   dx = -theta x dt + sqrt(2 T) dW,
// integrated with Euler-Maruyama: x <- a x + s xi, a = 1 - theta dt, s = sqrt(2 T dt), xi ~ N(0,1).
// That chain's stationary variance is s^2 / (1 - a^2) = T / (theta (1 - theta dt / 2)), which
// results.csv sets beside the measured one. Written by `phaselab new`; docs/plugins.md explains
// every part. Rename things, keep the shape.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "sdk/phaselab_sdk.hpp"
#include "sdk/table.hpp"

namespace {

struct OuProcess {
  std::vector<float> x, noise;  // the particles, one step's Gaussians

  // create(): allocate everything here; run() must not allocate per step.
  explicit OuProcess(pl::sdk::Context& cx)
      : x(size_t(cx.int_value("particles"))), noise(size_t(cx.int_value("particles"))) {}

  pl_status run(pl::sdk::Context& cx) {
    const int64_t steps = cx.int_value("steps"), every = cx.int_value("record_every");
    const double theta = cx.float_value("theta"), temp = cx.float_value("T"),
                 dt = cx.float_value("dt");
    const float a = float(1 - theta * dt), s = float(std::sqrt(2 * temp * dt));
    // Gaussians from the kernel table, stream (seed, this point, "noise"), counters kept.
    pl::sdk::Rng rng = cx.rng("noise");
    if (cx.is("start", "spread"))
      rng.gaussian(x.data(), x.size());  // x0 ~ N(0, 1)
    else
      std::fill(x.begin(), x.end(), 0.f);
    const size_t n = x.size();
    double var = 0;
    for (int64_t t = 1; t <= steps; ++t) {
      rng.gaussian(noise.data(), n);
      for (size_t i = 0; i < n; ++i) x[i] = a * x[i] + s * noise[i];
      if (t % every == 0 || t == steps) {
        var = cx.k.dot(x.data(), x.data(), n) / double(n);  // fixed-order sum in double
        cx.emit(1, {t, var});                               // a row of history.csv
        if (cx.cancelled()) return PL_CANCELLED;
        cx.progress(double(t) / double(steps));
      }
    }
    if (!std::isfinite(var)) return cx.fail("the variance is not finite at the last step");
    const double theory = temp / (theta * (1 - theta * dt / 2));
    cx.emit(0, {var, theory, var / theory - 1, cx.k.variant->gaussian});  // results.csv
    return PL_OK;
  }
};

// Cross-parameter check of one resolved point, by name: "" if fine, else the message.
std::string check(const pl::sdk::Params& p) {
  const double theta_dt = p.float_value("theta") * p.float_value("dt");
  if (theta_dt >= 2)
    return "ou_process.theta * ou_process.dt = " + std::to_string(theta_dt) +
           " must be below 2 (the Euler-Maruyama step diverges)";
  if (p.int_value("record_every") > p.int_value("steps"))
    return "ou_process.record_every exceeds steps";
  return "";
}

// After all points: summary.txt with the largest |rel_err| over results.csv, read back by column
// name (pl::sdk::Table; a missing column or file throws, finish_with reports it).
pl_status finish(const pl_host* host, const std::string& run_dir) {
  pl::sdk::Table t;
  std::string why;
  if (!t.read(run_dir + "/results.csv", &why)) throw std::runtime_error(why);
  const size_t col = t.col("rel_err");
  double worst = 0;
  for (size_t r = 0; r < t.rows(); ++r) worst = std::max(worst, std::fabs(t.num(r, col)));
  if (t.rows() == 0) {
    host->fail(host->ctx, "results.csv has no rows");
    return PL_FAILED;
  }
  std::ofstream out(run_dir + "/summary.txt");
  out << t.rows() << " points, largest |var / var_theory - 1| = " << worst << "\n";
  return PL_OK;
}

const pl_param_decl kParams[] = {
    pl::sdk::int_param("particles", 4000, "independent particles", 1, 10000000),
    pl::sdk::int_param("steps", 1000, "Euler-Maruyama steps", 1, 100000000),
    pl::sdk::float_param("dt", 0.01, "time step", PL_RANGE_MIN | PL_RANGE_MIN_EXCLUSIVE, 0),
    pl::sdk::float_param("theta", 1.0, "restoring rate", PL_RANGE_MIN | PL_RANGE_MIN_EXCLUSIVE, 0),
    pl::sdk::float_param("T", 1.0, "temperature", PL_RANGE_MIN | PL_RANGE_MIN_EXCLUSIVE, 0),
    pl::sdk::enum_param("start", "zero", "zero|spread", "x0 = 0, or x0 ~ N(0, 1)"),
    pl::sdk::int_param("record_every", 10, "steps between history rows", 1),
};
const char* const kResults[] = {"var", "var_theory", "rel_err", "gaussian_variant"};
const char* const kHistory[] = {"step", "var"};
const pl_table_decl kTables[] = {pl::sdk::table("results", kResults),
                                 pl::sdk::table("history", kHistory)};
// The theory as a dashed line without markers in the colour of the measurement it predicts.
constexpr pl::sdk::PlotStyle kTheory = pl::sdk::PlotStyle().references("var_theory=var");
const pl_plot_decl kPlots[] = {
    // x, y (several: "a,b"), one curve per value of group_by, rows kept by filter "col=value".
    pl::sdk::plot("var_vs_T", "stationary variance: measured and theory (dashed)", "results", "T",
                  "var,var_theory", "theta", "", PL_PLOT_LOGX | PL_PLOT_LOGY, &kTheory),
    pl::sdk::plot("relaxation", "variance vs step at T = 1", "history", "step", "var", "theta",
                  "T=1"),
};

}  // namespace

PL_DEFINE_PLUGIN(OuProcess, "ou_process", "0.1", "Ornstein-Uhlenbeck particles (template)", kParams,
                 kTables, kPlots, pl::sdk::validate_with<check>, pl::sdk::finish_with<finish>)
