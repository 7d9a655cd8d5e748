// SPDX-License-Identifier: Apache-2.0
// Boundary search ([search]) against the `labels` test plugin, whose boundaries are known in
// closed form (a label changes at x = 37.3 m, or at k = 37.3 m and 300 m). The oracles: the
// thresholds themselves, the number of bisection rounds they imply, and the same config run
// another way (threads, a kill then --resume, shards then merge) byte for byte.
#include <doctest/doctest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "driver/tests/support.hpp"

namespace {

using namespace pl::driver_test;

Result phaselab(const std::vector<std::string>& args, const TempDir& dir) {
  const std::string tag = next_tag();
  return finish(spawn(phaselab_exe(), args, dir, tag), dir, tag);
}

std::vector<std::vector<std::string>> csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::string line;
  for (char c : text) {
    if (c != '\n') {
      line += c;
      continue;
    }
    std::vector<std::string> cells;
    std::string cell;
    for (char d : line) {
      if (d == ',') {
        cells.push_back(cell);
        cell.clear();
      } else {
        cell += d;
      }
    }
    cells.push_back(cell);
    rows.push_back(cells);
    line.clear();
  }
  return rows;
}

// The rows of a CSV file as maps from column name to cell (notes hold no commas here).
std::vector<std::map<std::string, std::string>> table(const std::string& path) {
  const auto rows = csv(slurp(path));
  std::vector<std::map<std::string, std::string>> out;
  for (size_t r = 1; r < rows.size(); ++r) {
    std::map<std::string, std::string> m;
    for (size_t c = 0; c < rows[0].size() && c < rows[r].size(); ++c) m[rows[0][c]] = rows[r][c];
    out.push_back(m);
  }
  return out;
}

double num(const std::string& s) { return std::strtod(s.c_str(), nullptr); }

std::string search_toml(const std::string& run, const std::string& sweep, const std::string& labels,
                        const std::string& search) {
  return "plugin = \"labels\"\n[run]\n" + run + "\n[sweep]\n" + sweep + "\n[labels]\n" + labels +
         "\n[search]\n" + search + "\n";
}

void expect_same_outputs(const std::string& a, const std::string& b) {
  for (const char* f : {"results.csv", "boundaries.csv", "search_points.csv", "failures.csv"}) {
    INFO("file " << f << " in " << a << " and " << b);
    CHECK(exists(a + "/" + f) == exists(b + "/" + f));
    CHECK(slurp(a + "/" + f) == slurp(b + "/" + f));
  }
}

}  // namespace

TEST_CASE("search: x > 37.3 found within rel_tol in the predicted number of evaluations") {
  TempDir dir;
  // rows = 3: the label is read from the final row (the others say "early").
  spit(dir / "s.toml", search_toml("seeds = 2", "", "rows = 3",
                                   "key = \"x\"\nmin = 1\nmax = 1024\nscale = \"log\"\n"
                                   "column = \"phase\"\nrel_tol = 0.2\ninitial = 5"));
  const Result r = phaselab({"run", dir / "s.toml", "--out", dir / "r", "--quiet"}, dir);
  REQUIRE(r.rc == 0);
  // The first grid is 1024^(i/4): 1, 5.66, 32, 181, 1024; 37.3 lies in (32, 181). Each round
  // halves the bracket's log width, so it takes the smallest n with (181/32)^(2^-n) <= 1.2.
  const double first = std::pow(1024.0, 0.75) / 32.0;
  const int rounds = int(std::ceil(std::log2(std::log(first) / std::log(1.2))));
  CHECK(rounds == 4);
  const auto b = table(dir / "r/boundaries.csv");
  REQUIRE(b.size() == 2);  // one per seed
  for (const auto& row : b) {
    CHECK(row.at("left") == "low");
    CHECK(row.at("right") == "high");
    CHECK(num(row.at("lo")) < 37.3);
    CHECK(num(row.at("hi")) >= 37.3);
    CHECK(num(row.at("hi")) / num(row.at("lo")) <= 1.2 + 1e-12);
    CHECK(num(row.at("estimate")) ==
          doctest::Approx(std::sqrt(num(row.at("lo")) * num(row.at("hi")))));
    CHECK(row.at("evaluations") == std::to_string(5 + rounds));
    CHECK(row.at("converged") == "1");
    CHECK(row.at("monotone") == "1");
    CHECK(row.at("key") == "x");
  }
  // results.csv: every evaluated point with its rows, the key and search_round as columns.
  const auto res = table(dir / "r/results.csv");
  CHECK(res.size() == size_t(2 * (5 + rounds) * 3));
  CHECK(slurp(dir / "r/results.csv").rfind("x,seed,search_round,row,phase,score,final\n", 0) == 0);
  int max_round = 0;
  for (const auto& row : res) max_round = std::max(max_round, int(num(row.at("search_round"))));
  CHECK(max_round == rounds);
  // search_points.csv: labels from the final rows only.
  const auto pts = table(dir / "r/search_points.csv");
  CHECK(pts.size() == size_t(2 * (5 + rounds)));
  for (const auto& p : pts) {
    CHECK(p.at("label") == (num(p.at("x")) <= 37.3 ? "low" : "high"));
    CHECK(p.at("status") == "ok");
  }
  // run.json records the settings and the work.
  const std::string rec = slurp(dir / "r/run.json");
  CHECK(rec.find("\"rel_tol\": 0.2") != std::string::npos);
  CHECK(rec.find("\"evaluations\": " + std::to_string(2 * (5 + rounds))) != std::string::npos);
}

TEST_CASE("search: a numeric column with above, and a linear scale") {
  TempDir dir;
  spit(dir / "s.toml", search_toml("seeds = 1", "", "",
                                   "key = \"x\"\nmin = 0\nmax = 100\nscale = \"linear\"\n"
                                   "column = \"score\"\nabove = 0\nrel_tol = 0.01"));
  REQUIRE(phaselab({"run", dir / "s.toml", "--out", dir / "r", "--quiet"}, dir).rc == 0);
  const auto b = table(dir / "r/boundaries.csv");
  REQUIRE(b.size() == 1);
  CHECK(b[0].at("left") == "below");
  CHECK(b[0].at("right") == "above");
  CHECK(num(b[0].at("lo")) <= 37.3);
  CHECK(num(b[0].at("hi")) > 37.3);
  CHECK(num(b[0].at("hi")) - num(b[0].at("lo")) <= 1.0 + 1e-9);
  CHECK(num(b[0].at("estimate")) ==
        doctest::Approx(0.5 * (num(b[0].at("lo")) + num(b[0].at("hi")))));
}

TEST_CASE("search: two boundaries on an int key end in brackets of adjacent integers") {
  TempDir dir;
  spit(dir / "s.toml",
       search_toml("seeds = 1", "m = [0.5, 1.0, 2.0]", "use = \"k\"\nrule = \"two\"",
                   "key = \"k\"\nmin = 1\nmax = 4096\ncolumn = \"phase\"\n"
                   "rel_tol = 0.0001"));
  REQUIRE(phaselab({"run", dir / "s.toml", "--out", dir / "r", "--quiet"}, dir).rc == 0);
  const auto b = table(dir / "r/boundaries.csv");
  REQUIRE(b.size() == 6);
  for (size_t i = 0; i < b.size(); ++i) {
    const double m = num(b[i].at("m"));
    const bool first = i % 2 == 0;
    const double t = (first ? 37.3 : 300.0) * m;
    INFO("m = " << m << ", boundary " << (first ? "a|b" : "b|c"));
    CHECK(b[i].at("left") == (first ? "a" : "b"));
    CHECK(b[i].at("right") == (first ? "b" : "c"));
    // The labels change between floor(t) and floor(t) + 1 (a label holds for k <= t).
    CHECK(num(b[i].at("lo")) == std::floor(t));
    CHECK(num(b[i].at("hi")) == std::floor(t) + 1);
    CHECK(b[i].at("converged") == "1");
  }
}

TEST_CASE("search: a non-monotone label sequence is reported, not smoothed") {
  TempDir dir;
  spit(dir / "s.toml", search_toml("seeds = 1", "", "rule = \"nonmono\"",
                                   "key = \"x\"\nmin = 1\nmax = 1024\ncolumn = \"phase\""));
  REQUIRE(phaselab({"run", dir / "s.toml", "--out", dir / "r", "--quiet"}, dir).rc == 0);
  const auto b = table(dir / "r/boundaries.csv");
  REQUIRE(b.size() == 2);
  CHECK(b[0].at("left") == "a");
  CHECK(b[0].at("right") == "b");
  CHECK(b[1].at("left") == "b");
  CHECK(b[1].at("right") == "a");
  for (const auto& row : b) {
    CHECK(row.at("monotone") == "0");
    CHECK(row.at("nth") == "1");  // the first a | b and the first b | a along x
  }
  CHECK(num(b[0].at("lo")) < 37.3);
  CHECK(num(b[0].at("hi")) >= 37.3);
  CHECK(num(b[1].at("lo")) < 300);
  CHECK(num(b[1].at("hi")) >= 300);
}

TEST_CASE("search: a failing point is recorded and its bracket reported as broken") {
  TempDir dir;
  // k = 181 is on the first grid (round(1024^0.75)); with rule two the labels around it are
  // a (k = 32) and c (k = 1024): one broken a|c bracket, nothing bisected across it.
  spit(dir / "s.toml", search_toml("seeds = 1", "", "use = \"k\"\nrule = \"two\"\nfail_k = 181",
                                   "key = \"k\"\nmin = 1\nmax = 1024\ncolumn = \"phase\""));
  const Result r = phaselab({"run", dir / "s.toml", "--out", dir / "r", "--quiet"}, dir);
  CHECK(r.rc == 4);
  const auto f = table(dir / "r/failures.csv");
  REQUIRE(f.size() == 1);
  CHECK(f[0].at("k") == "181");
  CHECK(f[0].at("error").find("requested failure") != std::string::npos);
  const auto b = table(dir / "r/boundaries.csv");
  REQUIRE(b.size() == 1);
  CHECK(b[0].at("left") == "a");
  CHECK(b[0].at("right") == "c");
  CHECK(b[0].at("lo") == "32");
  CHECK(b[0].at("hi") == "1024");
  CHECK(b[0].at("converged") == "0");
  CHECK(b[0].at("note").find("broken") != std::string::npos);
  CHECK(b[0].at("evaluations") == "5");
  const auto pts = table(dir / "r/search_points.csv");
  CHECK(pts.size() == 5);
}

TEST_CASE(
    "search: the same outputs at 1 and 2 threads, after a kill and --resume, and from shards") {
  TempDir dir;
  const std::string sweep = "m = [0.5, 1.0, 2.0]";
  const std::string search = "key = \"k\"\nmin = 1\nmax = 1024\ncolumn = \"phase\"\nrel_tol = 0.1";
  spit(dir / "s.toml", search_toml("seeds = 2", sweep, "use = \"k\"\nrule = \"two\"", search));
  const Result one =
      phaselab({"run", dir / "s.toml", "--out", dir / "t1", "--quiet", "--threads", "1"}, dir);
  REQUIRE(one.rc == 0);
  const Result two =
      phaselab({"run", dir / "s.toml", "--out", dir / "t2", "--quiet", "--threads", "2"}, dir);
  REQUIRE(two.rc == 0);
  expect_same_outputs(dir / "t1", dir / "t2");
  CHECK(table(dir / "t1/boundaries.csv").size() == 12);

  SUBCASE("a kill mid-run, then --resume") {
    // 20 ms a point: killed after about a third of the 90 points, in a later round.
    spit(dir / "slow.toml",
         search_toml("seeds = 2", sweep, "use = \"k\"\nrule = \"two\"\nsleep_ms = 20", search));
    spit(dir / "slow_ref.toml",
         search_toml("seeds = 2", sweep, "use = \"k\"\nrule = \"two\"\nsleep_ms = 20", search));
    const std::string tag = next_tag();
    const pid_t pid = spawn(
        phaselab_exe(), {"run", dir / "slow.toml", "--out", dir / "k", "--quiet", "--threads", "2"},
        dir, tag);
    // Wait until some points of round 1 or later are journaled, then kill -9.
    for (int i = 0; i < 400; ++i) {
      const std::string j = slurp(dir / "k/journal.csv");
      if (count_lines(j) > 35) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(pid, SIGKILL);
    CHECK(wait_rc(pid) == 128 + SIGKILL);
    const size_t done = count_lines(slurp(dir / "k/journal.csv")) - 1;
    CHECK(done > 30);
    CHECK(done < 90);
    const Result res =
        phaselab({"run", dir / "slow.toml", "--out", dir / "k", "--resume", "--quiet"}, dir);
    REQUIRE(res.rc == 0);
    const Result ref =
        phaselab({"run", dir / "slow_ref.toml", "--out", dir / "kref", "--quiet"}, dir);
    REQUIRE(ref.rc == 0);
    expect_same_outputs(dir / "k", dir / "kref");
    // The resumed run ran only what was left.
    CHECK(slurp(dir / "k/run.json").find("\"done_before\": " + std::to_string(done)) !=
          std::string::npos);
  }

  SUBCASE("shards then merge") {
    const std::string parent = dir / "sh";
    for (int i = 0; i < 4; ++i)
      REQUIRE(phaselab({"run", dir / "s.toml", "--shard", std::to_string(i) + "/4", "--out", parent,
                        "--quiet", "--threads", "1"},
                       dir)
                  .rc == 0);
    // Shards hold whole searches: 6 searches over 4 shards, 2 + 2 + 1 + 1.
    size_t searches = 0;
    for (int i = 0; i < 4; ++i) {
      const auto b = table(parent + "/shard-" + std::to_string(i) + "-of-4/boundaries.csv");
      CHECK((b.size() == 4 || b.size() == 2));
      searches += b.size() / 2;
    }
    CHECK(searches == 6);
    const Result m = phaselab({"merge", parent, parent + "/shard-0-of-4", parent + "/shard-1-of-4",
                               parent + "/shard-2-of-4", parent + "/shard-3-of-4"},
                              dir);
    REQUIRE(m.rc == 0);
    expect_same_outputs(dir / "t1", parent);
    // A shard missing: refused, naming it.
    const Result miss = phaselab({"merge", dir / "sh2", parent + "/shard-0-of-4",
                                  parent + "/shard-1-of-4", parent + "/shard-3-of-4"},
                                 dir);
    CHECK(miss.rc == 2);
    CHECK(miss.err.find("missing shard 2 of 4") != std::string::npos);
  }
}

TEST_CASE("search: figure_formats draws the search figures as PDF and SVG too; shards none") {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    MESSAGE("gnuplot not installed: search figures not tested");
    return;
  }
  TempDir dir;
  spit(dir / "s.toml",
       search_toml("seeds = 2\nfigure_formats = [\"png\", \"pdf\", \"svg\"]", "m = [1.0, 2.0]", "",
                   "key = \"x\"\nmin = 1\nmax = 1024\ncolumn = \"phase\"\nrel_tol = 0.5"));
  SpawnOptions o;
  o.gnuplot = true;
  const std::string parent = dir / "sh";
  for (int i = 0; i < 2; ++i) {
    const std::string tag = next_tag();
    REQUIRE(finish(spawn(phaselab_exe(),
                         {"run", dir / "s.toml", "--shard", std::to_string(i) + "/2", "--out",
                          parent, "--quiet"},
                         dir, tag, o),
                   dir, tag)
                .rc == 0);
    const std::string shard = parent + "/shard-" + std::to_string(i) + "-of-2";
    for (const char* ext : {".png", ".pdf", ".svg"})  // a shard draws no figures: merge does
      CHECK_FALSE(exists(shard + "/figures/search_boundaries" + ext));
  }
  const std::string tag = next_tag();
  const Result m = finish(
      spawn(phaselab_exe(), {"merge", parent, parent + "/shard-0-of-2", parent + "/shard-1-of-2"},
            dir, tag, o),
      dir, tag);
  CAPTURE(m.err);
  REQUIRE(m.rc == 0);
  const std::string rec = slurp(parent + "/run.json");
  for (const std::string name : {"search_boundaries", "search_labels"}) {
    CAPTURE(name);
    const std::string base = parent + "/figures/" + name;
    CHECK(slurp(base + ".png").rfind("\x89PNG", 0) == 0);
    const std::string pdf = slurp(base + ".pdf"), svg = slurp(base + ".svg");
    CHECK(pdf.rfind("%PDF-", 0) == 0);
    CHECK(pdf.find("%%EOF", pdf.size() - 8) != std::string::npos);
    CHECK(svg.find("</svg>", svg.size() - 10) != std::string::npos);
    CHECK(slurp(base + ".pdf.gp").find("set output '" + name + ".pdf'") != std::string::npos);
    CHECK(rec.find("\"pdf\": \"" + base + ".pdf\", \"svg\": \"" + base + ".svg\"") !=
          std::string::npos);
  }
  CHECK(rec.find("\"figure_formats\": [\"png\", \"pdf\", \"svg\"]") != std::string::npos);
}

TEST_CASE("search: mpirun -n 3 hands each round's points to the ranks, same tables" *
          doctest::skip(env_or("PHASELAB_MPIRUN", "").empty())) {
  TempDir dir;
  spit(dir / "s.toml",
       search_toml("seeds = 2", "m = [0.5, 1.0, 2.0]", "use = \"k\"\nrule = \"two\"\nsleep_ms = 5",
                   "key = \"k\"\nmin = 1\nmax = 1024\ncolumn = \"phase\"\n"
                   "rel_tol = 0.1"));
  REQUIRE(phaselab({"run", dir / "s.toml", "--out", dir / "one", "--quiet", "--threads", "1"}, dir)
              .rc == 0);
  SpawnOptions o;
  // Open MPI refuses root without these (CI runs as root); --oversubscribe: more ranks than cores.
  o.env = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"};
  o.own_group = true;
  const std::string tag = next_tag();
  const Result r = finish(spawn(env_or("PHASELAB_MPIRUN", ""),
                                {"-n", "3", "--oversubscribe", phaselab_exe(), "run",
                                 dir / "s.toml", "--out", dir / "mpi", "--quiet", "--threads", "1"},
                                dir, tag, o),
                          dir, tag);
  REQUIRE(r.rc == 0);
  expect_same_outputs(dir / "one", dir / "mpi");
  // Points of later rounds ran on the worker ranks too.
  const std::string rec = slurp(dir / "mpi/run.json");
  CHECK(rec.find("\"mpi_ranks\": 3") != std::string::npos);
  CHECK(count_of(rec, "\"rank\": 1") + count_of(rec, "\"rank\": 2") > 0);
  CHECK(count_of(rec, "\"search_round\": 3") > 0);
}

TEST_CASE("search: a float key's points map back from their cells (resume, merge)") {
  // x on a log grid of 2^40 steps: merge and --resume must find every point from its cell text.
  TempDir dir;
  spit(dir / "s.toml", search_toml("seeds = 2", "m = [0.7, 1.3]", "",
                                   "key = \"x\"\nmin = 0.5\nmax = 3000\ncolumn = \"phase\"\n"
                                   "rel_tol = 0.01\ninitial = 7"));
  REQUIRE(phaselab({"run", dir / "s.toml", "--out", dir / "one", "--quiet"}, dir).rc == 0);
  const auto b = table(dir / "one/boundaries.csv");
  REQUIRE(b.size() == 4);
  for (const auto& row : b) {
    const double t = 37.3 * num(row.at("m"));
    CHECK(num(row.at("lo")) <= t);
    CHECK(num(row.at("hi")) > t);
    CHECK(num(row.at("hi")) / num(row.at("lo")) <= 1.01 + 1e-12);
  }
  const std::string parent = dir / "sh";
  for (int i = 0; i < 3; ++i)
    REQUIRE(phaselab({"run", dir / "s.toml", "--shard", std::to_string(i) + "/3", "--out", parent,
                      "--quiet"},
                     dir)
                .rc == 0);
  REQUIRE(phaselab({"merge", parent, parent + "/shard-0-of-3", parent + "/shard-1-of-3",
                    parent + "/shard-2-of-3"},
                   dir)
              .rc == 0);
  expect_same_outputs(dir / "one", parent);
  // --resume of the finished run: every point is found done, nothing runs, same tables.
  const std::string before = slurp(dir / "one/results.csv");
  const Result again =
      phaselab({"run", dir / "s.toml", "--out", dir / "one", "--resume", "--quiet"}, dir);
  REQUIRE(again.rc == 0);
  CHECK(slurp(dir / "one/results.csv") == before);
  CHECK(slurp(dir / "one/run.json").find("\"ok\": 0,") != std::string::npos);
}

TEST_CASE("search: check refuses bad [search] tables, naming file:line:col and key") {
  TempDir dir;
  struct Case {
    std::string search, sweep, expect;
  };
  const std::vector<Case> cases = {
      {"key = \"x\"\nmin = 1\nmax = 2\ncolumn = \"phse\"", "",
       "search.column \"phse\" is not a column of labels's results.csv (did you mean \"phase\"?); "
       "its columns: row, phase, score, final"},
      {"key = \"x\"\nmin = 1\nmax = 2\ncolumn = \"phase\"", "x = [1.0, 2.0]",
       "search.key x is also in [sweep]"},
      {"key = \"rule\"\nmin = 1\nmax = 2\ncolumn = \"phase\"", "",
       "search.key rule must be an int or float parameter"},
      {"key = \"x\"\nmin = 4\nmax = 2\ncolumn = \"phase\"", "",
       "search.max must be larger than search.min"},
      {"key = \"x\"\nmin = 0\nmax = 2\ncolumn = \"phase\"", "",
       "search.min must be > 0 on a log scale"},
      {"key = \"k\"\nmin = 1.5\nmax = 8\ncolumn = \"phase\"", "", "search.min must be"},
      {"key = \"x\"\nmin = 1\nmax = 2\ncolumn = \"phase\"\nrel_tol = 0", "",
       "search.rel_tol must be > 0"},
      {"key = \"x\"\nmin = 1\nmax = 2\ncolumn = \"phase\"\ninitial = 1", "",
       "search.initial must be an integer in [2, 1000]"},
      {"key = \"x\"\nmin = 1\nmax = 2\ncolum = \"phase\"", "", "unknown key search.colum"},
      {"min = 1\nmax = 2\ncolumn = \"phase\"", "", "[search] needs key"},
  };
  int i = 0;
  for (const auto& c : cases) {
    INFO(c.search);
    const std::string f = dir / ("c" + std::to_string(i++) + ".toml");
    spit(f, "plugin = \"labels\"\n[sweep]\n" + (c.sweep.empty() ? "m = [1.0]" : c.sweep) +
                "\n[search]\n" + c.search + "\n");
    const Result r = phaselab({"check", f}, dir);
    CHECK(r.rc == 2);
    CHECK(r.err.find(c.expect) != std::string::npos);
    CHECK(r.err.find(f + ":") != std::string::npos);  // file:line:col
  }
  // A good one: the searches and the range are printed.
  spit(dir / "ok.toml",
       "plugin = \"labels\"\n[run]\nseeds = 3\n[sweep]\nm = [1.0, 2.0]\n[search]\n"
       "key = \"x\"\nmin = 1\nmax = 1024\ncolumn = \"phase\"\n");
  const Result ok = phaselab({"check", dir / "ok.toml"}, dir);
  CHECK(ok.rc == 0);
  CHECK(
      ok.out.find("6 searches (2 m x 3 seeds) for the boundaries of phase along x in [1, 1024]") !=
      std::string::npos);
}
