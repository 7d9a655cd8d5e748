// SPDX-License-Identifier: Apache-2.0
// `phaselab plot` as a command (the binary started as the other driver tests start it): usage
// errors, a column not in its table, gnuplot absent (data written, exit 0, a message), --help,
// and a PNG drawn when gnuplot is installed. The selection itself: test_plot.cc.
#include <doctest/doctest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "driver/tests/support.hpp"

namespace pl::test {
namespace {

using pl::driver_test::exists;
using pl::driver_test::slurp;
using pl::driver_test::spit;
using pl::driver_test::TempDir;

// quoted cells, an empty y, a row another where clause leaves out
const char* kTable =
    "attention,branch,P,cG,note\n"
    "softmax,high,8,0.5,\"say \"\"hi\"\"\"\n"
    "softmax,low,8,0.125,x\n"
    "softmax,high,16,0.75,\n"
    "linear,high,8,9,\n";

bool have_gnuplot() { return std::system("command -v gnuplot > /dev/null 2>&1") == 0; }

TEST_CASE("plot: the command, its exit status and messages") {
  namespace dt = pl::driver_test;
  TempDir dir("pl_plot");
  spit(dir / "t.csv", kTable);
  auto run = [&](const std::vector<std::string>& args, bool gnuplot = false) {
    const std::string tag = dt::next_tag();
    dt::SpawnOptions so;
    so.gnuplot = gnuplot;
    return dt::finish(dt::spawn(dt::phaselab_exe(), args, dir, tag, so), dir, tag);
  };
  const std::string sel = dir / "t.csv:x=P:y=cG:where=attention=softmax:group=branch";
  auto r = run({"plot", sel});
  CHECK(r.rc == 2);
  CHECK(r.err.find("--out") != std::string::npos);
  r = run({"plot", "--out", dir / "c.png"});
  CHECK(r.rc == 2);
  r = run({"plot", "--out", dir / "c.png", dir / "t.csv:x=P:y=cG:where=atention=softmax"});
  CHECK(r.rc == 2);
  CHECK(r.err.find(dir / "t.csv: no column \"atention\"") != std::string::npos);
  r = run({"plot", "--out", dir / "c.png", "--logy", "--title", "t", sel});
  CHECK(r.rc == 0);
  CHECK(r.err.find("not drawn: gnuplot not found") != std::string::npos);
  CHECK(exists(dir / "c.dat"));
  CHECK(exists(dir / "c.csv"));
  CHECK(slurp(dir / "c.gp").find("set logscale y") != std::string::npos);
  r = run({"plot", "--help"});
  CHECK(r.rc == 0);
  CHECK(r.out.find("SERIES") != std::string::npos);
  if (!have_gnuplot()) {
    MESSAGE("gnuplot not installed: the PNG is not checked");
    return;
  }
  {
    const pl::driver_test::ScopedEnv gnuplot("PHASELAB_GNUPLOT", nullptr);  // gnuplot from PATH
    r = run({"plot", "--out", dir / "d.png", sel, dir / "t.csv:x=P:y=cG:style=points ps 2"}, true);
  }
  CAPTURE(r.err);
  CHECK(r.rc == 0);
  CHECK(r.err.empty());
  CHECK(slurp(dir / "d.png").compare(0, 4, "\x89PNG") == 0);
  // The vector formats: a whole PDF (%PDF- to %%EOF), an SVG document, the same files beside.
  for (const char* ext : {"pdf", "svg"}) {
    CAPTURE(ext);
    {
      const pl::driver_test::ScopedEnv gnuplot("PHASELAB_GNUPLOT", nullptr);
      r = run({"plot", "--out", dir / "v." + std::string(ext), sel}, true);
    }
    CAPTURE(r.err);
    CHECK(r.rc == 0);
    CHECK(r.err.empty());
    std::string v = slurp(dir / "v." + std::string(ext));
    while (!v.empty() && (v.back() == '\n' || v.back() == '\r')) v.pop_back();
    if (std::string(ext) == "pdf") {
      CHECK(v.compare(0, 5, "%PDF-") == 0);
      CHECK(v.size() > 5);
      CHECK(v.compare(v.size() - 5, 5, "%%EOF") == 0);
    } else {
      CHECK(v.find("<svg") != std::string::npos);
      CHECK(v.find("branch=high") != std::string::npos);  // text, not paths
      CHECK(v.size() > 6);
      CHECK(v.compare(v.size() - 6, 6, "</svg>") == 0);
    }
    CHECK(slurp(dir / "v.gp").find("set output 'v." + std::string(ext) + "'") != std::string::npos);
    CHECK(exists(dir / "v.dat"));
    CHECK(exists(dir / "v.csv"));
    CHECK_FALSE(exists(dir / "v.png"));
  }
}

// --out never overwrites a table the plot reads, a run folder's files or a run figure's script
// and data; it refuses with exit 2 and leaves every byte as it was. An earlier `phaselab plot`
// to the same FIG.png is redrawn in place.
TEST_CASE("plot: --out never overwrites an input table or a run folder's files") {
  namespace dt = pl::driver_test;
  TempDir dir("pl_plot_clobber");
  auto run = [&](const std::vector<std::string>& args) {
    const std::string tag = dt::next_tag();
    return dt::finish(dt::spawn(dt::phaselab_exe(), args, dir, tag), dir, tag);
  };
  const std::string rd = dir / "run";
  REQUIRE(::mkdir(rd.c_str(), 0755) == 0);
  REQUIRE(::mkdir((rd + "/figures").c_str(), 0755) == 0);
  const std::string journal = "attention,branch,P\nsoftmax,high,8\n";
  const std::string fig_dat = "# loss: from results.csv, written by phaselab\n1 2\n";
  const std::string fig_gp = "# loss.png from loss.dat; redraw with: gnuplot loss.gp\n";
  spit(rd + "/results.csv", kTable);
  spit(rd + "/journal.csv", journal);
  spit(rd + "/run.json", "{}");
  spit(rd + "/figures/loss.dat", fig_dat);
  spit(rd + "/figures/loss.gp", fig_gp);
  spit(dir / "t.csv", kTable);
  const std::string sel = rd + ":x=P:y=cG";
  struct Case {
    std::string out, victim, why;
  };
  const Case cases[] = {
      {rd + "/results.png", rd + "/results.csv", "a table this plot reads"},
      {rd + "/journal.png", rd + "/journal.csv", "which no earlier phaselab plot"},
      {rd + "/figures/loss.png", rd + "/figures/loss.gp", "which no earlier phaselab plot"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.out);
    const auto r = run({"plot", "--out", c.out, sel});
    CAPTURE(r.err);
    CHECK(r.rc == 2);
    CHECK(r.err.find("would overwrite " + c.victim) != std::string::npos);
    CHECK(r.err.find(c.why) != std::string::npos);
  }
  // a run's own file names, even before the run has written them (failures.csv appears with the
  // first failure)
  const auto rf = run({"plot", "--out", rd + "/failures.png", sel});
  CHECK(rf.rc == 2);
  CHECK(rf.err.find("would write failures.csv in a run folder") != std::string::npos);
  CHECK_FALSE(exists(rd + "/failures.csv"));
  // the input table itself, given as a file
  auto r = run({"plot", "--out", dir / "t.png", dir / "t.csv:x=P:y=cG"});
  CHECK(r.rc == 2);
  CHECK(r.err.find("would overwrite " + dir / "t.csv, a table this plot reads") !=
        std::string::npos);
  CHECK(slurp(rd + "/results.csv") == kTable);
  CHECK(slurp(rd + "/journal.csv") == journal);
  CHECK(slurp(rd + "/figures/loss.dat") == fig_dat);
  CHECK(slurp(rd + "/figures/loss.gp") == fig_gp);
  CHECK(slurp(dir / "t.csv") == kTable);
  CHECK_FALSE(exists(rd + "/results.dat"));
  CHECK_FALSE(exists(rd + "/journal.dat"));
  // A new name in the run folder is fine, and so is drawing it again.
  for (int i = 0; i < 2; ++i) {
    r = run({"plot", "--out", rd + "/cg.png", sel});
    CAPTURE(r.err);
    CHECK(r.rc == 0);
    CHECK(slurp(rd + "/cg.csv").rfind("series,x,y,se,n\n", 0) == 0);
  }
  CHECK(slurp(rd + "/results.csv") == kTable);
}

// Ctrl-C reaches gnuplot (the same process group): a gnuplot ended by a signal is reported as
// stopped by that signal, not as "gnuplot failed (exit -1)".
TEST_CASE("plot: a gnuplot stopped by a signal is named as such") {
  namespace dt = pl::driver_test;
  TempDir dir("pl_plot_signal");
  spit(dir / "t.csv", kTable);
  // answers the terminal probe, then dies of SIGINT as gnuplot does on Ctrl-C
  spit(dir / "gnuplot", "#!/bin/sh\nif [ \"$1\" = -e ]; then echo 5.4; exit 0; fi\nkill -INT $$\n");
  REQUIRE(::chmod((dir / "gnuplot").c_str(), 0755) == 0);
  const std::string tag = dt::next_tag();
  dt::SpawnOptions so;
  so.gnuplot = true;
  so.env = {"PHASELAB_GNUPLOT=" + dir / "gnuplot"};
  const auto r =
      dt::finish(dt::spawn(dt::phaselab_exe(),
                           {"plot", "--out", dir / "s.png", dir / "t.csv:x=P:y=cG"}, dir, tag, so),
                 dir, tag);
  CAPTURE(r.err);
  CHECK(r.rc == 5);
  CHECK(r.err.find("gnuplot was stopped by signal 2 (Interrupt); redraw with: cd " + dir.path +
                   " && gnuplot s.gp") != std::string::npos);
  CHECK(r.err.find("exit -1") == std::string::npos);
}

// A figure gnuplot would take minutes over (20,000 curves, millions of points) and leave as an
// empty PNG is refused before anything is written: exit 2 and a message saying how to narrow it.
TEST_CASE("plot: too many curves or values are refused with a message") {
  namespace dt = pl::driver_test;
  TempDir dir("pl_plot_caps");
  auto run = [&](const std::vector<std::string>& args) {
    const std::string tag = dt::next_tag();
    return dt::finish(dt::spawn(dt::phaselab_exe(), args, dir, tag), dir, tag);
  };
  std::string groups = "g,x,y\n";
  for (int g = 0; g < 300; ++g)
    groups += std::to_string(g) + ",1,2\n" + std::to_string(g) + ",2,3\n";
  spit(dir / "groups.csv", groups);
  auto r = run({"plot", "--out", dir / "g.png", dir / "groups.csv:x=x:y=y:group=g"});
  CAPTURE(r.err);
  CHECK(r.rc == 2);
  CHECK(r.err.find("300 curves (one per series, group value and y column), more than the 256") !=
        std::string::npos);
  CHECK_FALSE(exists(dir / "g.gp"));
  CHECK_FALSE(exists(dir / "g.dat"));
  r = run({"plot", "--out", dir / "g.png", dir / "groups.csv:x=x:y=y:group=g:where=g=7"});
  CHECK(r.rc == 0);
  std::string rows = "x,y\n";
  rows.reserve(12'000'000);
  for (int i = 0; i <= 1'000'000; ++i) rows += std::to_string(i % 1000) + ",1\n";
  spit(dir / "rows.csv", rows);
  r = run({"plot", "--out", dir / "r.png", dir / "rows.csv:x=x:y=y"});
  CHECK(r.rc == 2);
  CHECK(r.err.find("1000001 values to draw, more than the 1000000") != std::string::npos);
  CHECK_FALSE(exists(dir / "r.dat"));
  r = run({"plot", "--out", dir / "r.png", dir / "rows.csv:x=x:y=y:style=mean"});
  CHECK(r.rc == 0);  // one mean per x: 1000 values
}

// style=mean averages the rows at one x: a key the run sweeps that the series leaves out of x=,
// group= and where= is pooled, and the warning and the legend entry say which.
TEST_CASE("plot: style=mean names the swept keys it pools") {
  namespace dt = pl::driver_test;
  TempDir dir("pl_plot_pooled");
  auto run = [&](const std::vector<std::string>& args) {
    const std::string tag = dt::next_tag();
    return dt::finish(dt::spawn(dt::phaselab_exe(), args, dir, tag), dir, tag);
  };
  const std::string rd = dir / "run";
  REQUIRE(::mkdir(rd.c_str(), 0755) == 0);
  spit(rd + "/run.json", R"({"config": {"sweep": {"init": ["a", "b"], "P": [8, 16]}}})");
  spit(rd + "/results.csv",
       "init,P,seed,cG\na,8,0,1\na,8,1,2\nb,8,0,5\nb,8,1,6\na,16,0,1\nb,16,0,5\n");
  auto r = run({"plot", "--out", dir / "m.png", rd + ":x=P:y=cG:style=mean"});
  CAPTURE(r.err);
  CHECK(r.rc == 0);
  CHECK(r.err.find("averages over the swept keys init (style=mean") != std::string::npos);
  CHECK(slurp(dir / "m.gp").find("(pooled over init)'") != std::string::npos);
  r = run({"plot", "--out", dir / "g.png", rd + ":x=P:y=cG:style=mean:group=init"});
  CHECK(r.rc == 0);
  CHECK(r.err.find("averages over") == std::string::npos);
  CHECK(slurp(dir / "g.gp").find("pooled over") == std::string::npos);
  r = run({"plot", "--out", dir / "w.png", rd + ":x=P:y=cG:style=mean:where=init=a"});
  CHECK(r.rc == 0);
  CHECK(r.err.find("averages over") == std::string::npos);
}

// Nothing passed to gnuplot runs: a newline in --title, --xlabel, --ylabel, a series title= or a
// CSV group value stays inside its string, and style options that could start another plot
// element or call a function are refused.
TEST_CASE("plot: hostile titles, labels and CSV values never run anything") {
  namespace dt = pl::driver_test;
  TempDir dir("pl_plot_inject");
  auto run = [&](const std::vector<std::string>& args, bool gnuplot) {
    const std::string tag = dt::next_tag();
    dt::SpawnOptions so;
    so.gnuplot = gnuplot;
    return dt::finish(dt::spawn(dt::phaselab_exe(), args, dir, tag, so), dir, tag);
  };
  auto hostile = [&](const std::string& name) {
    return "x'\nsystem(\"touch " + dir / name + "\")\n!touch " + dir / name + "\n'";
  };
  // a group value with newlines (a quoted CSV cell), a single quote and a shell escape
  spit(dir / "hostile.csv", "g,P,y\n\"a'\nsystem(\"\"touch " + dir / "pwn_csv" + "\"\")\n!touch " +
                                dir / "pwn_csv" + "\",1,2\nb,2,3\n");
  const std::vector<std::string> args = {"plot",
                                         "--out",
                                         dir / "h.png",
                                         "--title",
                                         hostile("pwn_t"),
                                         "--xlabel",
                                         hostile("pwn_x"),
                                         "--ylabel",
                                         hostile("pwn_y"),
                                         dir / "hostile.csv:x=P:y=y:group=g",
                                         dir / "hostile.csv:x=P:y=y:title=" + hostile("pwn_s")};
  auto r = run(args, false);
  CAPTURE(r.err);
  CHECK(r.rc == 0);
  const std::string script = slurp(dir / "h.gp");
  CHECK(!script.empty());
  for (const auto& line : {std::string("\nsystem("), std::string("\n!touch")}) {
    CHECK(script.find(line) == std::string::npos);
    CHECK(slurp(dir / "h.dat").find(line) == std::string::npos);
  }
  if (have_gnuplot()) {
    const pl::driver_test::ScopedEnv gnuplot("PHASELAB_GNUPLOT", nullptr);
    r = run(args, true);
    CAPTURE(r.err);
    CHECK(r.rc == 0);
  } else {
    MESSAGE("gnuplot not installed: only the script is checked");
  }
  for (const char* pwn : {"pwn_t", "pwn_x", "pwn_y", "pwn_s", "pwn_csv"}) {
    CAPTURE(pwn);
    CHECK_FALSE(exists(dir / pwn));
  }
  // style options: a comma (another plot element), parentheses, a semicolon, an open quote
  for (const std::string& opt :
       {"lw 2, system(\"touch " + dir / "pwn_o" + "\")", std::string("lw 2; print 1"),
        std::string("lc rgb 'gray"), std::string("lc rgb `date`")}) {
    CAPTURE(opt);
    r = run({"plot", "--out", dir / "o.png", dir / "hostile.csv:x=P:y=y:style=lines " + opt}, true);
    CHECK(r.rc == 2);
    CHECK(r.err.find("style options") != std::string::npos);
  }
  CHECK_FALSE(exists(dir / "pwn_o"));
  CHECK_FALSE(exists(dir / "o.gp"));
  r = run({"plot", "--out", dir / "o.png",
           dir / "hostile.csv:x=P:y=y:style=lines lw 2 lc rgb '#ff8800'"},
          false);
  CHECK(r.rc == 0);
}

}  // namespace
}  // namespace pl::test
