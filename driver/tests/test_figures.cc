// SPDX-License-Identifier: Apache-2.0
// Tests of the figure writer (driver/figures.cc): the gnuplot scripts and data blocks written for
// each plot declaration feature (facets, categorical axes, heat maps, mean +- s.e., padded ranges,
// legends outside the data, the optional style's struct_size), checked against values computed
// here by hand. gnuplot itself is not needed, except by the last case, which draws every figure
// when gnuplot is installed.
#include <doctest/doctest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "driver/figures.hpp"
#include "driver/tests/support.hpp"
#include "sdk/phaselab_sdk.hpp"

namespace pl::test {
namespace {

// A run folder: its tables written here, its figures read back.
struct RunDir : pl::driver_test::TempDir {
  RunDir() : TempDir("pl_figures") {}
  void table(const std::string& name, const std::string& csv) const {
    std::ofstream(path + "/" + name + ".csv") << csv;
  }
  std::string read(const std::string& rel) const {
    std::ifstream f(path + "/" + rel);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }
};

// Renders `plots` without gnuplot (PHASELAB_GNUPLOT set to an empty path): only the scripts and
// data files are written.
std::vector<pl::driver::FigureResult> render(const RunDir& run,
                                             const std::vector<pl_plot_decl>& plots,
                                             bool with_gnuplot = false) {
  const pl::driver_test::ScopedEnv gnuplot("PHASELAB_GNUPLOT",
                                           with_gnuplot ? std::getenv("PHASELAB_GNUPLOT") : "");
  pl_plugin p{};
  p.plots = plots.data();
  p.num_plots = uint32_t(plots.size());
  std::string tool;
  bool have = false;
  return pl::driver::render_figures(p, run.path, {{"L", "16"}}, &tool, &have);
}

using pl::driver_test::count_of;

// The numeric rows of data block `index` (blocks are separated by two blank lines).
std::vector<std::vector<double>> block(const std::string& dat, size_t index) {
  std::vector<std::vector<double>> rows;
  std::istringstream in(dat);
  std::string line;
  size_t b = 0, blanks = 0;
  bool started = false;
  while (std::getline(in, line)) {
    if (line.empty()) {
      if (started && ++blanks == 2) ++b, blanks = 0, started = false;
      continue;
    }
    blanks = 0;
    if (line[0] == '#') continue;
    started = true;
    if (b != index) continue;
    std::istringstream ls(line);
    std::vector<double> v;
    double x;
    while (ls >> x) v.push_back(x);
    rows.push_back(v);
  }
  return rows;
}

bool near(double a, double b) { return std::fabs(a - b) <= 1e-12 + 1e-9 * std::fabs(b); }

// The numbers of the first "set <axis> [lo:hi]" line of a script.
std::pair<double, double> range_of(const std::string& g, const std::string& axis) {
  const size_t at = g.find("set " + axis + " [");
  if (at == std::string::npos) return {NAN, NAN};
  double lo = NAN, hi = NAN;
  std::sscanf(g.c_str() + at + axis.size() + 6, "%lf:%lf", &lo, &hi);
  return {lo, hi};
}

// A history table: K in {16, 1, 4} (in that order of appearance), 3 seeds, steps 10 and 20,
// columns a = hand-chosen values, b = 2a.
const char* kHistory =
    "K,N,seed,step,a,b\n"
    "16,64,0,10,1,2\n16,64,1,10,1,2\n16,64,2,10,1,2\n"
    "1,64,0,10,1,2\n1,64,1,10,2,4\n1,64,2,10,4,8\n"
    "1,64,0,20,3,6\n1,64,1,20,3,6\n1,64,2,20,3,6\n"
    "4,64,0,10,5,10\n4,64,1,10,5,10\n4,64,2,10,5,10\n";

TEST_CASE("figures: facets, one panel per value, shared legend, mean +- s.e. over seeds") {
  RunDir run;
  run.table("results", kHistory);
  constexpr pl::sdk::PlotStyle kFacet = pl::sdk::PlotStyle().facet("K");
  const auto res = render(
      run, {pl::sdk::plot("hist", "history", "results", "step", "a,b", "N", "", 0, &kFacet)});
  REQUIRE(res.size() == 1);
  const std::string g = run.read("figures/hist.gp"), dat = run.read("figures/hist.dat");
  CHECK(count_of(g, "# facets: 3 panels by K") == 1);
  // Panels in increasing K, not in order of appearance.
  const size_t p1 = g.find("set title 'K = 1'"), p4 = g.find("set title 'K = 4'"),
               p16 = g.find("set title 'K = 16'");
  REQUIRE(p1 != std::string::npos);
  REQUIRE(p4 != std::string::npos);
  REQUIRE(p16 != std::string::npos);
  CHECK(p1 < p4);
  CHECK(p4 < p16);
  CHECK(count_of(g, "\nplot ") == 4);  // 3 panels + the legend
  // One legend entry per series (a, b), in the legend strip only; no key inside a panel.
  CHECK(count_of(g, "keyentry") == 2);
  CHECK(count_of(g, "title 'a'") == 1);
  CHECK(g.find("set key center center") != std::string::npos);
  // N has one value: it goes into the title, not into every legend entry.
  CHECK(g.find("title 'history (N=64)'") != std::string::npos);
  // Blocks: panel K=1 (a, b), K=4 (a, b), K=16 (a, b). K=1, step 10, column a over the seeds:
  // values 1, 2, 4: mean 7/3, sample s.d. sqrt(7/3), s.e. sqrt(7/3)/sqrt(3) = sqrt(7)/3.
  const auto a1 = block(dat, 0);
  REQUIRE(a1.size() == 2);
  REQUIRE(a1[0].size() == 4);
  CHECK(near(a1[0][0], 10));
  CHECK(near(a1[0][1], 7.0 / 3.0));
  CHECK(near(a1[0][2], std::sqrt(7.0) / 3.0));
  CHECK(near(a1[0][3], 3));
  CHECK(near(a1[1][1], 3));  // step 20: all 3, s.e. 0
  CHECK(near(a1[1][2], 0));
  const auto b1 = block(dat, 1);
  REQUIRE(b1.size() == 2);
  CHECK(near(b1[0][2], 2 * std::sqrt(7.0) / 3.0));
  const auto a16 = block(dat, 4);
  REQUIRE(a16.size() == 1);
  CHECK(near(a16[0][1], 1));
  CHECK(block(dat, 6).empty());
  CHECK(g.find("yerrorlines") != std::string::npos);
  CHECK(g.find("(mean +- s.e. over seeds)") != std::string::npos);
  // Shared y range over all panels, padded 5% of the span on each side: the extremes are
  // mean - s.e. and mean + s.e. over every block: low 1 (K=16, a), high 10 (K=4, b).
  const auto yr = range_of(g, "yrange");
  CHECK(near(yr.first, 1 - 0.05 * 9));
  CHECK(near(yr.second, 10 + 0.05 * 9));
}

// A run figure that neither draws, groups, facets nor filters by a swept parameter averages over
// it: the title names the pooled keys and the y label does not say "over seeds" alone (before, a
// band labelled "mean +- s.e. over seeds" silently averaged every (init, temperature) setting).
TEST_CASE("figures: swept keys a figure averages over are named in its title and y label") {
  RunDir run;
  std::string csv = "init,temperature,seed,step,loss\n";
  for (const char* init : {"a", "b"})
    for (const char* t : {"1", "2"})
      for (const char* seed : {"0", "1"})
        for (const char* step : {"1", "2"})
          csv +=
              std::string(init) + "," + t + "," + seed + "," + step + "," + t + "." + seed + "\n";
  run.table("results", csv);
  const pl_param_decl params[] = {pl::sdk::enum_param("init", "a", "a|b", "initialisation"),
                                  pl::sdk::float_param("temperature", 1.0, "temperature"),
                                  pl::sdk::int_param("L", 16, "length")};
  const std::vector<pl_plot_decl> plots = {
      pl::sdk::plot("all", "loss", "results", "step", "loss", ""),
      pl::sdk::plot("by_init", "loss", "results", "step", "loss", "init"),
      pl::sdk::plot("one_t", "loss", "results", "step", "loss", "init", "temperature=1"),
  };
  const pl::driver_test::ScopedEnv gnuplot("PHASELAB_GNUPLOT", "");
  pl_plugin p{};
  p.params = params;
  p.num_params = 3;
  p.plots = plots.data();
  p.num_plots = uint32_t(plots.size());
  std::string tool;
  bool have = false;
  pl::driver::render_figures(p, run.path, {{"L", "16"}}, &tool, &have);
  const std::string all = run.read("figures/all.gp"), by_init = run.read("figures/by_init.gp"),
                    one_t = run.read("figures/one_t.gp");
  CHECK(all.find("set title 'loss (pooled over init, temperature)'") != std::string::npos);
  CHECK(all.find("(mean +- s.e. over seeds and init, temperature)'") != std::string::npos);
  CHECK(all.find("(mean +- s.e. over seeds)'") == std::string::npos);
  CHECK(by_init.find("set title 'loss (pooled over temperature)'") != std::string::npos);
  CHECK(by_init.find("(mean +- s.e. over seeds and temperature)'") != std::string::npos);
  // every swept key drawn, grouped or filtered: nothing pooled, the seeds alone
  CHECK(one_t.find("set title 'loss'") != std::string::npos);
  CHECK(one_t.find("(mean +- s.e. over seeds)'") != std::string::npos);
}

// A swept key that a grouped column determines (circuits: `chains` is "inf" at infinite = true,
// K otherwise) splits no curve: it is not named as pooled. A key that varies within a curve is.
TEST_CASE("figures: a swept key that a grouped column determines is not pooled") {
  RunDir run;
  std::string csv = "infinite,seed,step,chains,loss\n";
  for (const char* inf : {"true", "false"})
    for (const char* seed : {"0", "1"})
      for (const char* step : {"1", "2"})
        csv += std::string(inf) + "," + seed + "," + step + "," +
               (inf == std::string("true") ? "inf" : "4") + "," + seed + "\n";
  run.table("results", csv);
  const pl_param_decl params[] = {pl::sdk::bool_param("infinite", false, "fresh chains"),
                                  pl::sdk::int_param("K", 8, "chains")};
  const std::vector<pl_plot_decl> plots = {
      pl::sdk::plot("by_chains", "loss", "results", "step", "loss", "chains"),
      pl::sdk::plot("by_seed", "loss", "results", "step", "loss", "seed"),
  };
  const pl::driver_test::ScopedEnv gnuplot("PHASELAB_GNUPLOT", "");
  pl_plugin p{};
  p.params = params;
  p.num_params = 2;
  p.plots = plots.data();
  p.num_plots = uint32_t(plots.size());
  std::string tool;
  bool have = false;
  pl::driver::render_figures(p, run.path, {{"K", "4"}}, &tool, &have);
  const std::string by_chains = run.read("figures/by_chains.gp"),
                    by_seed = run.read("figures/by_seed.gp");
  CHECK(by_chains.find("set title 'loss'") != std::string::npos);
  CHECK(by_chains.find("pooled") == std::string::npos);
  CHECK(by_chains.find("chains=inf") != std::string::npos);
  CHECK(by_seed.find("set title 'loss (pooled over infinite)'") != std::string::npos);
}

TEST_CASE("figures: a categorical axis is labelled by name and spreads repeats over its band") {
  RunDir run;
  run.table("results",
            "K,seed,phase,final\n"
            "1,0,2mem,1\n1,1,2mem,1\n1,2,1gen,1\n"
            "64,0,2gen,1\n64,1,weird,1\n64,2,3,1\n"
            "64,0,1gen,0\n");
  constexpr pl::sdk::PlotStyle kPhase =
      pl::sdk::PlotStyle().y_categories("1gen=1-Gen|2gen=2-Gen|1mem=1-Mem|2mem=2-Mem");
  const auto res = render(run, {pl::sdk::plot("phase", "phase vs K", "results", "K", "phase", "",
                                              "final=1", PL_PLOT_LOGX, &kPhase)});
  const std::string g = run.read("figures/phase.gp"), dat = run.read("figures/phase.dat");
  CHECK(g.find("set ytics ('1-Gen' 0, '2-Gen' 1, '1-Mem' 2, '2-Mem' 3)") != std::string::npos);
  CHECK(g.find("set yrange [-0.5:3.5]") != std::string::npos);
  CHECK(g.find("with points") != std::string::npos);  // categories are never averaged
  CHECK(g.find("# 1 rows outside the declared categories") != std::string::npos);
  const auto rows = block(dat, 0);
  REQUIRE(rows.size() == 5);
  // K=1: two seeds in 2-Mem (position 3) at 3 -+ 0.25, one in 1-Gen (0); K=64: 2-Gen (1), and
  // the code 3 read as the 4th category (2-Mem).
  std::vector<std::pair<double, double>> xy;
  for (const auto& r : rows) xy.push_back({r[0], r[1]});
  CHECK(xy ==
        std::vector<std::pair<double, double>>{{1, 2.75}, {1, 3.25}, {1, 0}, {64, 1}, {64, 3}});
  // log x from 1 to 64, padded by the factor 64^0.05 on each side.
  const double f = std::pow(64.0, 0.05);
  const auto xr = range_of(g, "xrange");
  CHECK(near(xr.first, 1 / f));
  CHECK(near(xr.second, 64 * f));
  // A log axis spanning under two decades is ticked at the data's x.
  CHECK(g.find("set xtics (1, 64)") != std::string::npos);
  // One series: no legend.
  CHECK(g.find("unset key") != std::string::npos);
  CHECK(g.find("keyentry") == std::string::npos);
}

// xtic_column: x stays the number (order, spacing), its ticks are named by a text column of the
// same rows, as the circuits edge maps and ablations are (E->A1.q, not 0).
TEST_CASE("figures: x ticks named by a text column of the same table") {
  RunDir run;
  run.table("patching",
            "seed,edge_index,edge,corruption,kl_frac\n"
            "0,0,E->A1.q,0,0.5\n1,0,E->A1.q,0,0.7\n0,2,A1->M1,1,0.25\n0,1,E->A1.k,0,0.125\n"
            "0,1,E->A1.k,1,0\n");
  constexpr pl::sdk::PlotStyle kMap = pl::sdk::PlotStyle().heatmap("kl_frac").xtic_column("edge");
  constexpr pl::sdk::PlotStyle kPoints = pl::sdk::PlotStyle().xtic_column("edge");
  constexpr pl::sdk::PlotStyle kMissing = pl::sdk::PlotStyle().xtic_column("sender");
  render(run, {pl::sdk::plot("map", "edge map", "patching", "edge_index", "corruption", "", "", 0,
                             &kMap),
               pl::sdk::plot("pts", "edges", "patching", "edge_index", "kl_frac", "", "",
                             PL_PLOT_POINTS, &kPoints),
               pl::sdk::plot("plain", "edges", "patching", "edge_index", "kl_frac", "", "",
                             PL_PLOT_POINTS, &kMissing)});
  const std::string map = run.read("figures/map.gp");
  CHECK(map.find("set xtics ('E->A1.q' 0, 'E->A1.k' 1, 'A1->M1' 2)\n") != std::string::npos);
  CHECK(map.find("set ytics ('0' 0, '1' 1)") != std::string::npos);  // y keeps its numbers
  const std::string pts = run.read("figures/pts.gp");
  CHECK(pts.find("set xtics ('E->A1.q' 0, 'E->A1.k' 1, 'A1->M1' 2)\n") != std::string::npos);
  CHECK(pts.find("set xlabel 'edge_index'") != std::string::npos);
  CHECK(pts.find("rotate") == std::string::npos);  // 23 characters fit side by side
  // A column not in the table leaves the numbers.
  const std::string plain = run.read("figures/plain.gp");
  CHECK(plain.find("set xtics (") == std::string::npos);
  CHECK(plain.find("E->A1") == std::string::npos);
}

// Many long names are turned upright, the figure taller by their length; in panels each tick
// gets 14 pixels of width.
TEST_CASE("figures: long x tick names are turned and make room for themselves") {
  RunDir run;
  std::string csv = "K,index,ablation,kl\n";
  for (int k : {1, 2})
    for (int i = 0; i < 30; ++i)
      csv += std::to_string(k) + "," + std::to_string(i) + ",ablation number " + std::to_string(i) +
             "," + std::to_string(0.5 + i) + "\n";
  run.table("ablations", csv);
  constexpr pl::sdk::PlotStyle kNamed = pl::sdk::PlotStyle().xtic_column("ablation");
  constexpr pl::sdk::PlotStyle kPanels = pl::sdk::PlotStyle().xtic_column("ablation").facet("K", 2);
  render(
      run,
      {pl::sdk::plot("one", "one", "ablations", "index", "kl", "", "K=1", PL_PLOT_POINTS, &kNamed),
       pl::sdk::plot("two", "two", "ablations", "index", "kl", "", "", PL_PLOT_POINTS, &kPanels)});
  const std::string one = run.read("figures/one.gp");
  CHECK(one.find("'ablation number 29' 29) rotate by 90 right\n") != std::string::npos);
  CHECK(one.find("size 960,766\n") != std::string::npos);  // 640 + 7 x 18 characters
  const std::string two = run.read("figures/two.gp");
  CHECK(two.find("rotate by 90 right") != std::string::npos);
  // Two panels of 190 + 14 x 30 = 610 pixels and the legend's 240, 300 + 7 x 18 high under a
  // 50-pixel title.
  CHECK(two.find("size 1460,476 font ',9'") != std::string::npos);
}

// references("REF=DATA"): REF is a dashed line without markers (its mean per x, no error bars)
// in the colour of DATA's curve of the same group; a curve drawn under a later one with the same
// values says so in the legend.
TEST_CASE("figures: reference curves in their data's colour, hidden curves named") {
  RunDir run;
  run.table("results",
            "N,seed,step,loss,floor\n"
            "16,0,1,3,1\n16,1,1,5,1\n16,0,2,2,1\n16,1,2,4,1\n16,0,3,1,1\n16,1,3,3,1\n"
            "64,0,1,6,0.5\n64,1,1,8,0.5\n64,0,2,5,0.5\n64,1,2,7,0.5\n");
  constexpr pl::sdk::PlotStyle kRef = pl::sdk::PlotStyle().references("floor=loss");
  render(
      run,
      {pl::sdk::plot("ref", "loss and floor", "results", "step", "floor,loss", "N", "", 0, &kRef),
       pl::sdk::plot("seeds", "floor per seed", "results", "step", "floor", "N,seed", "", 0)});
  const std::string g = run.read("figures/ref.gp");
  // Series in order: N=16 floor, N=16 loss, N=64 floor, N=64 loss. The losses take colours 1
  // and 2; each floor its loss's colour, dashed, no marker.
  CHECK(g.find("index 0 using 1:2 with lines lw 1.5 lc 1 dt 2 notitle") != std::string::npos);
  CHECK(g.find("index 1 using 1:2:3 with yerrorlines ps 0.7 lc 1 dt 1 pt 7") != std::string::npos);
  CHECK(g.find("index 2 using 1:2 with lines lw 1.5 lc 2 dt 2 notitle") != std::string::npos);
  CHECK(g.find("index 3 using 1:2:3 with yerrorlines ps 0.7 lc 2 dt 1 pt 5") != std::string::npos);
  CHECK(g.find("keyentry with lines lw 1.5 lc 1 dt 2 title 'N=16 floor'") != std::string::npos);
  CHECK(g.find("(under") == std::string::npos);  // nothing hidden
  // The floor's block: its mean per x.
  const auto rows = block(run.read("figures/ref.dat"), 0);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0] == std::vector<double>{1, 1, 0, 2});
  // Per seed, seed 0's floor lies under seed 1's, the same values at the same steps, and so for
  // N=64: the note names the curve on top. A curve sharing under 90% of its points is not
  // hidden (test_plot.cc: branch=high under `quoted` at 2 of its 3 x).
  const std::string s = run.read("figures/seeds.gp");
  CHECK(s.find("title 'N=16, seed=0 (under N=16, seed=1: same values)'") != std::string::npos);
  CHECK(s.find("title 'N=64, seed=0 (under N=64, seed=1: same values)'") != std::string::npos);
  CHECK(s.find("title 'N=16, seed=1'") != std::string::npos);
  CHECK(count_of(s, "same values") == 2);
}

// The hidden-curve note looks for candidates through an index of (x, values) instead of all
// pairs of curves; it must still find a curve that covers 90% of another's x but not its first
// x, drawn several curves later, and must not name one that covers only 80%.
// A log x axis over under two decades with no power of ten inside (K = 16..52) would have no
// labelled tick at all: the data's x label it, every second one when there are 13.
TEST_CASE("figures: a narrow log x axis with many x is ticked at every k-th data x") {
  RunDir run;
  std::string t = "K,y\n";
  for (int K : {16, 20, 24, 28, 30, 32, 34, 36, 38, 40, 44, 48, 52})
    t += std::to_string(K) + "," + std::to_string(K * 100) + "\n";
  run.table("results", t);
  render(run, {pl::sdk::plot("k", "narrow", "results", "K", "y", "", "", PL_PLOT_LOGX)});
  const std::string g = run.read("figures/k.gp");
  CHECK(g.find("set xtics (16, 24, 30, 34, 38, 44, 52)\n") != std::string::npos);
}

TEST_CASE("figures: a curve hidden at 90% of its x is named even when its first x is not covered") {
  RunDir run;
  std::string t = "g,x,y\n";
  for (int x = 0; x < 10; ++x) {
    t += "a," + std::to_string(x) + "," + std::to_string(x * x) + "\n";    // hidden under d
    t += "b," + std::to_string(x) + "," + std::to_string(x + 100) + "\n";  // its own values
    if (x >= 1) t += "d," + std::to_string(x) + "," + std::to_string(x * x) + "\n";  // a's 9 of 10
    t += "f," + std::to_string(x) + "," + std::to_string(5 * x) + "\n";  // h covers 80%: shown
    if (x >= 2) t += "h," + std::to_string(x) + "," + std::to_string(5 * x) + "\n";
  }
  run.table("results", t);
  render(run, {pl::sdk::plot("h", "hidden", "results", "x", "y", "g", "", 0)});
  const std::string s = run.read("figures/h.gp");
  CAPTURE(s);
  CHECK(s.find("title 'g=a (under g=d: same values)'") != std::string::npos);
  CHECK(s.find("title 'g=b'") != std::string::npos);
  CHECK(s.find("title 'g=f'") != std::string::npos);
  CHECK(count_of(s, "same values") == 1);
}

TEST_CASE("figures: a heat map colours each (x, y) cell by its most frequent category") {
  RunDir run;
  run.table("results",
            "K,N,seed,phase,loss\n"
            "1,16,0,2mem,1\n1,16,1,2mem,2\n1,16,2,1gen,6\n"
            "1024,16,0,2gen,1\n1024,16,1,2gen,1\n1024,16,2,2gen,1\n"
            "4,32,0,1gen,1\n4,32,1,1gen,1\n4,32,2,1gen,4\n");
  constexpr pl::sdk::PlotStyle kMap =
      pl::sdk::PlotStyle().heatmap("phase", "1gen=1-Gen|2gen=2-Gen|1mem=1-Mem|2mem=2-Mem");
  constexpr pl::sdk::PlotStyle kLossMap = pl::sdk::PlotStyle().heatmap("loss");
  render(run, {pl::sdk::plot("map", "phase over (K, N)", "results", "K", "N", "", "", 0, &kMap),
               pl::sdk::plot("lossmap", "loss", "results", "K", "N", "", "", 0, &kLossMap)});
  const std::string g = run.read("figures/map.gp"), dat = run.read("figures/map.dat");
  // Evenly spaced cells labelled by value: K = 1, 4, 1024 at 0, 1, 2; N = 16, 32 at 0, 1.
  CHECK(g.find("set xtics ('1' 0, '4' 1, '1024' 2)") != std::string::npos);
  CHECK(g.find("set ytics ('16' 0, '32' 1)") != std::string::npos);
  CHECK(g.find("set cbtics ('1-Gen' 0, '2-Gen' 1, '1-Mem' 2, '2-Mem' 3)") != std::string::npos);
  CHECK(g.find("set palette maxcolors 4") != std::string::npos);
  CHECK(g.find("with boxxyerror") != std::string::npos);
  // Rows: x_pos y_pos z count agree x y. (1, 16): 2-Mem by 2 of 3 -> z 3, labelled "2/3".
  const auto rows = block(dat, 0);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0] == std::vector<double>{0, 0, 3, 3, 2, 1, 16});
  CHECK(rows[1] == std::vector<double>{1, 1, 0, 3, 3, 4, 32});
  CHECK(rows[2] == std::vector<double>{2, 0, 1, 3, 3, 1024, 16});
  CHECK(count_of(g, "set label '2/3' at 0,0") == 1);
  CHECK(count_of(g, "set label") == 1);
  // Numeric z: the mean over seeds, on a continuous palette.
  const auto lm = block(run.read("figures/lossmap.dat"), 0);
  REQUIRE(lm.size() == 3);
  CHECK(near(lm[0][2], 3.0));  // (1 + 2 + 6) / 3
  CHECK(near(lm[1][2], 2.0));  // (1 + 1 + 4) / 3
  CHECK(run.read("figures/lossmap.gp").find("set palette defined (0 '#440154'") !=
        std::string::npos);
}

TEST_CASE("figures: legends outside the data; styles from older plugins read up to struct_size") {
  RunDir run;
  run.table("results", kHistory);
  // Two series in one panel: the key outside the plot area.
  render(run, {pl::sdk::plot("two", "two", "results", "step", "a,b", "", "K=1")});
  const std::string g = run.read("figures/two.gp");
  CHECK(g.find("set key outside right top") != std::string::npos);
  CHECK(g.find("box opaque") == std::string::npos);
  CHECK(count_of(g, "keyentry") == 2);
  // A log y axis spanning under a decade (K=1, a: 7/3 +- sqrt(7)/3 and 3, so about 1.45 to 3)
  // has ticks at 1, 2, 5 x powers of ten inside its range: here only 2.
  render(run, {pl::sdk::plot("logy", "logy", "results", "step", "a", "", "K=1", PL_PLOT_LOGY)});
  CHECK(run.read("figures/logy.gp").find("set ytics (2)\n") != std::string::npos);
  // No style (a plugin built before pl_plot_style): one panel, as before.
  render(run, {pl::sdk::plot("plain", "plain", "results", "step", "a", "K", "")});
  CHECK(run.read("figures/plain.gp").find("# facets") == std::string::npos);
  CHECK(count_of(run.read("figures/plain.gp"), "keyentry") == 3);  // K = 16, 1, 4
  // A style whose struct_size stops before facet_by (an older, shorter struct): the field past
  // it is not read, even though this test put a value there.
  pl::sdk::PlotStyle shorter = pl::sdk::PlotStyle().facet("K");
  shorter.struct_size = uint32_t(offsetof(pl_plot_style, facet_by));
  render(run, {pl::sdk::plot("short", "short", "results", "step", "a", "", "", 0, &shorter)});
  CHECK(run.read("figures/short.gp").find("# facets") == std::string::npos);
  pl::sdk::PlotStyle full = shorter;
  full.struct_size = sizeof(pl_plot_style);
  render(run, {pl::sdk::plot("full", "full", "results", "step", "a", "", "", 0, &full)});
  CHECK(run.read("figures/full.gp").find("# facets: 3 panels by K") != std::string::npos);
  // The style took the place of reserved[0]: the declaration's size and layout are unchanged.
  struct OldDecl {
    const char* strings[7];
    uint32_t flags;
    const void* reserved[2];
  };
  CHECK(sizeof(pl_plot_decl) == sizeof(OldDecl));
  CHECK(offsetof(pl_plot_decl, style) == offsetof(OldDecl, reserved));
}

TEST_CASE("figures: gnuplot draws every kind of figure (when installed)") {
  RunDir run;
  run.table("results", kHistory);
  run.table("phases",
            "K,N,seed,phase\n1,16,0,2mem\n1,16,1,1gen\n4,16,0,2gen\n1,32,0,1mem\n4,32,0,2gen\n");
  constexpr pl::sdk::PlotStyle kFacet =
      pl::sdk::PlotStyle().facet("K").labels("step", "value of a and b");
  constexpr pl::sdk::PlotStyle kCat = pl::sdk::PlotStyle().y_categories("1gen|2gen|1mem|2mem");
  constexpr pl::sdk::PlotStyle kMap = pl::sdk::PlotStyle().heatmap("phase", "1gen|2gen|1mem|2mem");
  constexpr pl::sdk::PlotStyle kNumMap = pl::sdk::PlotStyle().heatmap("seed");
  const std::vector<pl_plot_decl> plots = {
      pl::sdk::plot("facets", "facets", "results", "step", "a,b", "", "", PL_PLOT_LOGY, &kFacet),
      pl::sdk::plot("cat", "categories", "phases", "K", "phase", "N", "", PL_PLOT_LOGX, &kCat),
      pl::sdk::plot("map", "heat map", "phases", "K", "N", "", "", 0, &kMap),
      // A numeric heat map (continuous palette and colour-box label: gnuplot 5.4 syntax).
      pl::sdk::plot("nummap", "numeric heat map", "phases", "K", "N", "", "", 0, &kNumMap),
      pl::sdk::plot("hist", "histogram", "results", "a", "", "K", "", PL_PLOT_HISTOGRAM),
  };
  if (system("command -v gnuplot > /dev/null 2>&1") != 0) {
    MESSAGE("gnuplot not installed: figures not drawn");
    return;
  }
  const auto res = render(run, plots, true);
  REQUIRE(res.size() == plots.size());
  for (const auto& r : res) {
    CAPTURE(r.name);
    CAPTURE(r.note);
    CHECK(!r.png.empty());
  }
}

}  // namespace
}  // namespace pl::test
