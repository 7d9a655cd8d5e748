// SPDX-License-Identifier: Apache-2.0
// Tests of `phaselab plot` (driver/figures.cc draw_plot, parse_series; driver/cli.cc, main.cc):
// the SERIES syntax, the rows selected and grouped from small CSV tables written here (quoted
// cells included), the data files compared in full with texts written out by hand, the errors
// (a column not in its table, no rows), {param:NAME} from run.json, two run folders on one
// figure. gnuplot is not needed (it is turned off); the command itself is tested in
// test_plot_command.cc (driver suite).
#include <doctest/doctest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "driver/figures.hpp"
#include "driver/tests/support.hpp"

namespace pl::test {
namespace {

using pl::driver::draw_plot;
using pl::driver::parse_series;
using pl::driver::PlotOutcome;
using pl::driver::PlotSpec;
using pl::driver::SeriesSpec;
using pl::driver_test::exists;
using pl::driver_test::slurp;
using pl::driver_test::spit;
using pl::driver_test::TempDir;

SeriesSpec series(const std::string& text) {
  SeriesSpec s;
  std::string why;
  INFO(text);
  REQUIRE(parse_series(text, &s, &why));
  return s;
}

// draw_plot with gnuplot off (PHASELAB_GNUPLOT empty): the script and data files only.
PlotOutcome plot_without_gnuplot(const PlotSpec& spec) {
  const pl::driver_test::ScopedEnv gnuplot("PHASELAB_GNUPLOT", "");
  return draw_plot(spec);
}

// A table with quoted cells: a comma inside a group value, doubled quotes in a value a where
// clause selects, an empty y (skipped), a row of another attention (filtered out).
const char* kTable =
    "attention,branch,P,cG,note\n"
    "softmax,high,8,0.5,\"say \"\"hi\"\"\"\n"
    "softmax,low,8,0.125,x\n"
    "softmax,high,16,0.75,\n"
    "linear,high,8,9,\n"
    "softmax,high,4,0.25,\"say \"\"hi\"\"\"\n"
    "softmax,high,32,,\n"
    "softmax,\"lo,w\",8,0.375,y\n";

TEST_CASE("plot: SERIES fields, colons in titles and paths, style options") {
  SeriesSpec s = series(
      "runs/a:b/t.csv:x=P:y=cG,abs_cG:where=attention=softmax,is_global=1:group=branch,init:"
      "title=theory: {branch}:style=points pt 7 ps 1");
  CHECK(s.table == "runs/a:b/t.csv");
  CHECK(s.x == "P");
  CHECK(s.ys == std::vector<std::string>{"cG", "abs_cG"});
  REQUIRE(s.where.size() == 2);
  CHECK(s.where[0] == std::make_pair(std::string("attention"), std::string("softmax")));
  CHECK(s.where[1] == std::make_pair(std::string("is_global"), std::string("1")));
  CHECK(s.group == std::vector<std::string>{"branch", "init"});
  CHECK(s.title == "theory: {branch}");
  CHECK(s.style == "points");
  CHECK(s.options == "pt 7 ps 1");
  // Defaults: lines, no options, no title.
  s = series("t.csv:y=b:x=a");
  CHECK(s.style == "lines");
  CHECK(s.options.empty());
  CHECK(s.title.empty());
  // An empty value in where selects empty cells.
  s = series("t.csv:x=a:y=b:where=c=");
  REQUIRE(s.where.size() == 1);
  CHECK(s.where[0].second.empty());

  for (const char* bad :
       {"t.csv:x=a", "t.csv:y=b", ":x=a:y=b", "t.csv:x=a:y=b:x=c", "t.csv:x=a:y=b:style=bars",
        "t.csv:x=a:y=b:where=c", "t.csv:x=a:y=b:where==1"}) {
    std::string why;
    CAPTURE(bad);
    CHECK_FALSE(parse_series(bad, &s, &why));
    CHECK(why.find(bad) != std::string::npos);  // the message quotes the series
  }
}

TEST_CASE("plot: where, group, quoted cells and the data files, in full") {
  TempDir dir("pl_plot");
  spit(dir / "t.csv", kTable);
  PlotSpec spec;
  spec.out = dir / "fig/sel.png";  // the folder is made
  spec.series = {series(dir / "t.csv:x=P:y=cG:where=attention=softmax:group=branch"),
                 series(dir / "t.csv:x=P:y=cG:where=note=say \"hi\":title=quoted:style=points")};
  const PlotOutcome o = plot_without_gnuplot(spec);
  INFO(o.error);
  REQUIRE(o.status == 0);
  CHECK(o.warnings.empty());
  CHECK(o.figure.png.empty());
  CHECK(o.figure.note.find("gnuplot") != std::string::npos);
  // Series in order of first appearance; lines in order of x; 32 (empty cG) and linear left out.
  const std::string t = dir / "t.csv";
  CHECK(slurp(dir / "fig/sel.dat") == "# sel: written by phaselab plot from " + t +
                                          "\n"
                                          "# branch=high\n# x y\n4 0.25\n8 0.5\n16 0.75\n\n\n"
                                          "# branch=low\n# x y\n8 0.125\n\n\n"
                                          "# branch=lo,w\n# x y\n8 0.375\n\n\n"
                                          "# quoted\n# x y\n8 0.5\n4 0.25\n\n\n");
  // FIG.csv: the group column's value beside each value drawn (empty for the ungrouped series).
  CHECK(slurp(dir / "fig/sel.csv") ==
        "series,x,y,se,n,branch\n"
        "branch=high,4,0.25,,,high\nbranch=high,8,0.5,,,high\nbranch=high,16,0.75,,,high\n"
        "branch=low,8,0.125,,,low\n"
        "\"branch=lo,w\",8,0.375,,,\"lo,w\"\n"
        "quoted,8,0.5,,,\nquoted,4,0.25,,,\n");
  const std::string gp = slurp(dir / "fig/sel.gp");
  CHECK(gp.find("set output 'sel.png'") != std::string::npos);
  CHECK(gp.find("'sel.dat' index 3 using 1:2 with points") != std::string::npos);
  CHECK(gp.find("keyentry with lines lc 1 dt 1 title 'branch=high'") != std::string::npos);
  CHECK(gp.find("title 'quoted'") != std::string::npos);
  CHECK(gp.find("set key outside below") != std::string::npos);  // 4 entries
}

TEST_CASE("plot: a column named that is not in its table is an error naming both") {
  TempDir dir("pl_plot");
  spit(dir / "t.csv", kTable);
  for (const char* bad : {":x=Q:y=cG", ":x=P:y=cG,cg", ":x=P:y=cG:where=atention=softmax",
                          ":x=P:y=cG:group=brnach"}) {
    CAPTURE(bad);
    PlotSpec spec;
    spec.out = dir / "bad.png";
    spec.series = {series(dir / "t.csv:x=P:y=cG"), series(dir / "t.csv" + bad)};
    const PlotOutcome o = plot_without_gnuplot(spec);
    CHECK(o.status == 2);
    CHECK(o.error.find(dir / "t.csv") != std::string::npos);
    CHECK(o.error.find("no column") != std::string::npos);
    CHECK(!exists(dir / "bad.dat"));  // nothing written
  }
  // A title placeholder that is not a group column.
  PlotSpec spec;
  spec.out = dir / "bad.png";
  spec.series = {series(dir / "t.csv:x=P:y=cG:title={branch}")};
  PlotOutcome o = plot_without_gnuplot(spec);
  CHECK(o.status == 2);
  CHECK(o.error.find("{branch}") != std::string::npos);
  // A series without rows is a warning; no rows at all an error.
  spec.series = {series(dir / "t.csv:x=P:y=cG:where=attention=linear"),
                 series(dir / "t.csv:x=P:y=cG:where=attention=none")};
  o = plot_without_gnuplot(spec);
  CHECK(o.status == 0);
  REQUIRE(o.warnings.size() == 1);
  CHECK(o.warnings[0].find("series 2") != std::string::npos);
  spec.series.erase(spec.series.begin());
  o = plot_without_gnuplot(spec);
  CHECK(o.status == 2);
  CHECK(o.error.find("no rows") != std::string::npos);
  // --out must be a PNG, a PDF or an SVG.
  for (const char* bad : {"bad.jpg", "bad.eps", "bad", ".pdf"}) {
    CAPTURE(bad);
    spec.out = dir / bad;
    o = plot_without_gnuplot(spec);
    CHECK(o.status == 2);
    CHECK(o.error.find("--out must name a .png, .pdf or .svg file") != std::string::npos);
  }
}

// FIG.pdf and FIG.svg: the script draws with gnuplot's vector terminals (even when gnuplot is
// absent, so the .gp redraws it later), the page with the PNG's proportions of text to page.
TEST_CASE("plot: --out FIG.pdf and FIG.svg write scripts for the vector terminals") {
  TempDir dir("pl_plot");
  spit(dir / "t.csv", kTable);
  PlotSpec spec;
  spec.series = {series(dir / "t.csv:x=P:y=cG:where=attention=softmax:group=branch")};
  spec.out = dir / "v.pdf";
  PlotOutcome o = plot_without_gnuplot(spec);
  INFO(o.error);
  REQUIRE(o.status == 0);
  std::string gp = slurp(dir / "v.gp");
  CHECK(gp.rfind("# v.pdf from v.dat", 0) == 0);
  CHECK(gp.find("set terminal pdfcairo size 7.50in,5.") != std::string::npos);
  CHECK(gp.find("set output 'v.pdf'") != std::string::npos);
  CHECK(gp.find("png") == std::string::npos);
  CHECK(exists(dir / "v.csv"));
  spec.out = dir / "v.svg";  // redraws the same .gp, .dat and .csv
  o = plot_without_gnuplot(spec);
  REQUIRE(o.status == 0);
  gp = slurp(dir / "v.gp");
  CHECK(gp.find("set terminal svg size 720,") != std::string::npos);
  CHECK(gp.find("set output 'v.svg'") != std::string::npos);
  CHECK(gp.find("pdf") == std::string::npos);
}

// FIG.csv carries each group column by name (pandas groups by it, not by parsing the legend); a
// group column named like one of FIG.csv's own gets the prefix group_.
TEST_CASE("plot: FIG.csv has one column per group= column") {
  TempDir dir("pl_plot");
  spit(dir / "t.csv", "n,init,P,cG\n8,copy,1,0.5\n8,rand,1,0.25\n16,copy,2,1\n");
  PlotSpec spec;
  spec.out = dir / "g.png";
  spec.series = {series(dir / "t.csv:x=P:y=cG:group=init,n:style=points")};
  const PlotOutcome o = plot_without_gnuplot(spec);
  INFO(o.error);
  REQUIRE(o.status == 0);
  CHECK(slurp(dir / "g.csv") ==
        "series,x,y,se,n,init,group_n\n"
        "\"init=copy, n=8\",1,0.5,,,copy,8\n"
        "\"init=rand, n=8\",1,0.25,,,rand,8\n"
        "\"init=copy, n=16\",2,1,,,copy,16\n");
  // Drawn again: the FIG.csv with group columns is recognised as this plot's own.
  CHECK(plot_without_gnuplot(spec).status == 0);
}

TEST_CASE("plot: two run folders, {param:NAME} from run.json, mean +- s.e.") {
  TempDir dir("pl_plot");
  ::mkdir((dir / "th").c_str(), 0755);
  ::mkdir((dir / "ex").c_str(), 0755);
  spit(dir / "th/results.csv", "P,branch,cG\n1,low,0.5\n2,low,0.25\n");
  spit(dir / "th/run.json", R"({"config": {"sweep": {"P": [1, 2]}, "params": {"L": 8,
      "V": 4, "kappa": 0.5, "attention": "softmax"}}})");
  spit(dir / "ex/results.csv", "P,seed,init,cG\n2,0,copy,1\n2,1,copy,3\n1,0,copy,2\n");
  spit(dir / "ex/run.json", R"({"config": {"params": {"L": 16}}})");
  PlotSpec spec;
  spec.out = dir / "two.png";
  spec.logx = true;
  spec.title = "{param:attention}, L={param:L} kappa={param:kappa}";
  spec.series = {
      series(dir / "th:x=P:y=cG:group=branch:title=theory {branch}, L={param:L}"),
      series(dir / "ex:x=P:y=cG:group=init:title=Adam {init}, L={param:L}:style=mean lw 2")};
  const PlotOutcome o = plot_without_gnuplot(spec);
  INFO(o.error);
  REQUIRE(o.status == 0);
  // Mean and standard error by hand: P=1: one row (2, se 0); P=2: rows 1 and 3, mean 2,
  // sample variance 2, se sqrt(2/2) = 1.
  // One column per group= column of any series: branch (theory), init (Adam).
  CHECK(slurp(dir / "two.csv") ==
        "series,x,y,se,n,branch,init\n"
        "\"theory low, L=8\",1,0.5,,,low,\n\"theory low, L=8\",2,0.25,,,low,\n"
        "\"Adam copy, L=16\",1,2,0,1,,copy\n\"Adam copy, L=16\",2,2,1,2,,copy\n");
  const std::string gp = slurp(dir / "two.gp");
  CHECK(gp.find("set title 'softmax, L=8 kappa=0.5'") != std::string::npos);
  CHECK(gp.find("set logscale x") != std::string::npos);
  CHECK(gp.find("using 1:2:3 with yerrorlines ps 0.7 lc 2 dt 1 pt 5 lw 2") != std::string::npos);
  CHECK(gp.find("set ylabel 'cG (mean +- s.e.)'") != std::string::npos);
  // A swept parameter, or one the run does not have, is an error naming the run.json.
  for (const char* t : {"{param:P}", "{param:nope}"}) {
    spec.title = t;
    const PlotOutcome e = plot_without_gnuplot(spec);
    CHECK(e.status == 2);
    CHECK(e.error.find(dir / "th/run.json") != std::string::npos);
  }
}

}  // namespace
}  // namespace pl::test
