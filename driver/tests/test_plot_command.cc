// SPDX-License-Identifier: Apache-2.0
// `phaselab plot` as a command (the binary started as the other driver tests start it): usage
// errors, a column not in its table, gnuplot absent (data written, exit 0, a message), --help,
// and a PNG drawn when gnuplot is installed. The selection itself: test_plot.cc.
#include <doctest/doctest.h>
#include <stdlib.h>

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
}

}  // namespace
}  // namespace pl::test
