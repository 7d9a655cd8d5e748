// SPDX-License-Identifier: Apache-2.0
// Scale-out tests: `run --shard` + `merge` against the one-process run (byte for byte), merge's
// refusals, `--shard auto` from job-array environments, and (in a build with MPI) `mpirun -n 3`
// against the one-process run, a rank killed mid-run then --resume. The oracle everywhere is the
// same config run by one process.
#include <dirent.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "driver/tests/support.hpp"

namespace {

using namespace pl::driver_test;

// Starts `exe args` with extra environment, in a process group of its own.
pid_t spawn(const std::string& exe, const std::vector<std::string>& args, const TempDir& dir,
            const std::string& tag, const std::vector<std::string>& env) {
  SpawnOptions o;
  o.env = env;
  o.own_group = true;
  return pl::driver_test::spawn(exe, args, dir, tag, o);
}

int g_counter = 0;

Result phaselab(const std::vector<std::string>& args, const TempDir& dir,
                const std::vector<std::string>& env = {}) {
  const std::string tag = "cmd" + std::to_string(g_counter++);
  return finish(spawn(phaselab_exe(), args, dir, tag, env), dir, tag);
}

const std::string kExe = phaselab_exe();
const std::string kMpirun = env_or("PHASELAB_MPIRUN", "");
// Open MPI refuses root without these (CI runs as root); --oversubscribe: more ranks than cores.
const std::vector<std::string> kMpiEnv = {"OMPI_ALLOW_RUN_AS_ROOT=1",
                                          "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"};

std::vector<std::string> mpirun_args(int ranks, const std::vector<std::string>& args) {
  std::vector<std::string> a = {"-n", std::to_string(ranks), "--oversubscribe", kExe};
  a.insert(a.end(), args.begin(), args.end());
  return a;
}

// A 20-point toy sweep (5 n x 2 modes x 2 seeds) with a 3-row side table.
std::string sweep_toml(const std::string& extra = "") {
  return "plugin = \"toy\"\n[run]\nseeds = [0, 1]\n[sweep]\nn = [4, 16, 64, 256, 1024]\n"
         "mode = [\"sum\", \"mean\"]\n[toy]\nsteps = 3\n" +
         extra;
}

void expect_same_tables(const std::string& a, const std::string& b) {
  for (const char* f : {"results.csv", "history.csv", "failures.csv"}) {
    INFO("file " << f << " in " << a << " and " << b);
    CHECK(exists(a + "/" + f) == exists(b + "/" + f));
    CHECK(slurp(a + "/" + f) == slurp(b + "/" + f));
  }
}

std::vector<std::string> shard_dirs(const std::string& parent) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(parent.c_str())) {
    while (const dirent* e = ::readdir(d))
      if (std::strncmp(e->d_name, "shard-", 6) == 0) out.push_back(parent + "/" + e->d_name);
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result merge(const TempDir& dir, const std::string& out, const std::vector<std::string>& shards) {
  std::vector<std::string> a = {"merge", out};
  a.insert(a.end(), shards.begin(), shards.end());
  return phaselab(a, dir);
}

}  // namespace

TEST_CASE("shards merged equal the one-process run byte for byte, for N = 1, 2, 3, 7, 25") {
  TempDir dir;
  // fail_at = 64: four points fail, so failures.csv and exit 4 are compared too.
  spit(dir / "s.toml", sweep_toml("fail_at = 64\n"));
  const Result one = phaselab({"run", dir / "s.toml", "--out", dir / "one", "--quiet"}, dir);
  REQUIRE(one.rc == 4);
  REQUIRE(count_lines(slurp(dir / "one/results.csv")) == 1 + 16);
  REQUIRE(count_lines(slurp(dir / "one/failures.csv")) == 1 + 4);
  for (int n : {1, 2, 3, 7, 25}) {  // 25 > 20 points: five shards are empty
    INFO("N = " << n);
    const std::string parent = dir / ("sh" + std::to_string(n));
    for (int i = 0; i < n; ++i) {
      const Result r =
          phaselab({"run", dir / "s.toml", "--shard", std::to_string(i) + "/" + std::to_string(n),
                    "--out", parent, "--quiet", "--threads", "1"},
                   dir);
      CHECK(r.rc == (r.rc == 4 ? 4 : 0));
    }
    const auto shards = shard_dirs(parent);
    REQUIRE(shards.size() == size_t(n));
    const Result m = merge(dir, parent, shards);
    CHECK(m.rc == 4);  // the failed points, as in the one-process run
    expect_same_tables(dir / "one", parent);
    const std::string rec = slurp(parent + "/run.json");
    CHECK(rec.find("\"merged_from\"") != std::string::npos);
    CHECK(rec.find("\"ok\": 16,") != std::string::npos);
    CHECK(rec.find("\"failed\": 4,") != std::string::npos);
  }
  // The shards partition the points, their sizes within one of each other: 7, 7, 6 of 20.
  size_t total = 0;
  for (int i = 0; i < 3; ++i) {
    const std::string d = dir / ("sh3/shard-" + std::to_string(i) + "-of-3");
    const size_t ok = count_lines(slurp(d + "/results.csv")) - 1;
    const size_t failed =
        exists(d + "/failures.csv") ? count_lines(slurp(d + "/failures.csv")) - 1 : 0;
    CHECK(ok + failed == (i < 2 ? 7u : 6u));
    total += ok + failed;
  }
  CHECK(total == 20);
  // N > points: shard 24 of 25 has no point, only the header.
  CHECK(count_lines(slurp(dir / "sh25/shard-24-of-25/results.csv")) == 1);
}

TEST_CASE("points run costliest first where the plugin estimates cost; the tables keep run order") {
  // toy's estimate is 1 + sleep_ms: on one thread the points must finish 40, 20, 0 (journal
  // order), while results.csv stays in run order (sleep_ms 0, 20, 40 for each n).
  TempDir dir;
  spit(dir / "c.toml",
       "plugin = \"toy\"\n[run]\nseeds = 1\n[sweep]\nn = [4, 8]\nsleep_ms = [0, 20, 40]\n");
  const Result r =
      phaselab({"run", dir / "c.toml", "--out", dir / "one", "--quiet", "--threads", "1"}, dir);
  REQUIRE(r.rc == 0);
  CHECK(slurp(dir / "one/journal.csv") ==
        "n,sleep_ms,seed\n4,40,0\n8,40,0\n4,20,0\n8,20,0\n4,0,0\n8,0,0\n");
  const std::string res = slurp(dir / "one/results.csv");
  const size_t a = res.find("\n4,0,0,"), b = res.find("\n4,20,0,"), c = res.find("\n4,40,0,"),
               d = res.find("\n8,0,0,");
  CHECK(a < b);
  CHECK(b < c);
  CHECK(c < d);
}

TEST_CASE("--shard balances by the plugin's cost estimate; merge follows the same deal") {
  // Three points cost 61 (sleep_ms = 60) and three cost 1: largest first to the least-loaded
  // shard gives {61, 61} and {61, 1, 1, 1}, i.e. 2 and 4 points; a deal by count would give 3
  // and 3. The merge recomputes the deal from the same estimates.
  TempDir dir;
  spit(dir / "c.toml",
       "plugin = \"toy\"\n[run]\nseeds = 1\n[sweep]\nn = [4, 8, 16]\nsleep_ms = [0, 60]\n");
  const Result one = phaselab({"run", dir / "c.toml", "--out", dir / "one", "--quiet"}, dir);
  REQUIRE(one.rc == 0);
  const std::string parent = dir / "sh";
  std::vector<size_t> sizes;
  for (int i = 0; i < 2; ++i) {
    const Result r = phaselab(
        {"run", dir / "c.toml", "--shard", std::to_string(i) + "/2", "--out", parent, "--quiet"},
        dir);
    REQUIRE(r.rc == 0);
    sizes.push_back(
        count_lines(slurp(parent + "/shard-" + std::to_string(i) + "-of-2/results.csv")) - 1);
  }
  std::sort(sizes.begin(), sizes.end());
  CHECK(sizes == std::vector<size_t>{2, 4});
  const Result m = merge(dir, parent, shard_dirs(parent));
  CHECK(m.rc == 0);
  expect_same_tables(dir / "one", parent);
}

TEST_CASE("merge refuses missing, duplicated, foreign and unfinished shards") {
  TempDir dir;
  spit(dir / "s.toml", sweep_toml());
  spit(dir / "other.toml", sweep_toml("scale = 0.5\n"));
  REQUIRE(phaselab({"run", dir / "s.toml", "--out", dir / "one", "--quiet"}, dir).rc == 0);
  for (int i = 0; i < 3; ++i)
    REQUIRE(phaselab({"run", dir / "s.toml", "--shard", std::to_string(i) + "/3", "--out",
                      dir / "sh", "--quiet"},
                     dir)
                .rc == 0);
  REQUIRE(phaselab({"run", dir / "other.toml", "--shard", "1/3", "--out", dir / "other", "--quiet"},
                   dir)
              .rc == 0);
  const std::string s0 = dir / "sh/shard-0-of-3", s1 = dir / "sh/shard-1-of-3",
                    s2 = dir / "sh/shard-2-of-3";
  SUBCASE("missing: the shard and its points are named") {
    const Result r = merge(dir, dir / "m", {s0, s2});
    CHECK(r.rc == 2);
    CHECK(r.err.find("missing shard 1 of 3 (7 points: ") != std::string::npos);
    // The points named are shard 1's: "n=16 mode=sum seed=0" is the row "16,sum,0,".
    const size_t from = r.err.find("points: ") + 8, to = r.err.find(')', from);
    REQUIRE(to != std::string::npos);
    std::string names = r.err.substr(from, to - from) + "; ";
    size_t named = 0;
    for (size_t at = 0, next; (next = names.find("; ", at)) != std::string::npos; at = next + 2) {
      std::string label = names.substr(at, next - at);  // n=16 mode=sum seed=0
      std::string row = "\n";
      for (size_t f = 0, e; f < label.size(); f = e + 1) {
        e = std::min(label.find(' ', f), label.size());
        row += label.substr(label.find('=', f) + 1, e - label.find('=', f) - 1) + ",";
      }
      INFO(label);
      CHECK(slurp(s1 + "/results.csv").find(row) != std::string::npos);
      CHECK(slurp(s0 + "/results.csv").find(row) == std::string::npos);
      CHECK(slurp(s2 + "/results.csv").find(row) == std::string::npos);
      ++named;
    }
    CHECK(named == 7);
    CHECK(r.err.find("--shard 1/3") != std::string::npos);
    CHECK(!exists(dir / "m/results.csv"));
  }
  SUBCASE("duplicated") {
    const Result r = merge(dir, dir / "m", {s0, s1, s2, s1});
    CHECK(r.rc == 2);
    CHECK(r.err.find("are both shard 1 of 3") != std::string::npos);
    CHECK(!exists(dir / "m/results.csv"));
  }
  SUBCASE("foreign: a shard of another config, the differing key named") {
    const Result r = merge(dir, dir / "m", {s0, dir / "other/shard-1-of-3", s2});
    CHECK(r.rc == 2);
    CHECK(r.err.find("not part of the same run") != std::string::npos);
    CHECK(r.err.find("config.params.scale (1 vs 0.5)") != std::string::npos);
    CHECK(!exists(dir / "m/results.csv"));
  }
  SUBCASE("not a shard") {
    const Result r = merge(dir, dir / "m", {s0, dir / "one", s2});
    CHECK(r.rc == 2);
    CHECK(r.err.find("is not a shard") != std::string::npos);
  }
  SUBCASE("unfinished: a lost point and an interrupted record; --resume on the shard finishes it") {
    // Drop the last point of shard 1 from its results (as if the run had stopped before it).
    std::string res = slurp(s1 + "/results.csv");
    const size_t last = res.rfind('\n', res.size() - 2) + 1;
    std::string row = res.substr(last);  // n,mode,seed,...
    res.erase(last);
    spit(s1 + "/results.csv", res);
    const size_t c1 = row.find(','), c2 = row.find(',', c1 + 1), c3 = row.find(',', c2 + 1);
    // The run's journal (which points finished) loses it too, as if the run stopped before it.
    if (exists(s1 + "/journal.csv")) {
      std::string journal = slurp(s1 + "/journal.csv");
      const size_t at = journal.find("\n" + row.substr(0, c3) + "\n");
      REQUIRE(at != std::string::npos);
      journal.erase(at + 1, c3 + 1);
      spit(s1 + "/journal.csv", journal);
    }
    const std::string label = "n=" + row.substr(0, c1) +
                              " mode=" + row.substr(c1 + 1, c2 - c1 - 1) +
                              " seed=" + row.substr(c2 + 1, c3 - c2 - 1);
    Result r = merge(dir, dir / "m", {s0, s1, s2});
    CHECK(r.rc == 2);
    CHECK(r.err.find("lacks 1 of its points (" + label + ")") != std::string::npos);
    std::string rec = slurp(s1 + "/run.json");
    const size_t at = rec.find("\"status\": \"ok\"");
    REQUIRE(at != std::string::npos);
    rec.replace(at, 14, "\"status\": \"interrupted\"");
    spit(s1 + "/run.json", rec);
    r = merge(dir, dir / "m", {s0, s1, s2});
    CHECK(r.rc == 2);
    CHECK(r.err.find("is unfinished (status \"interrupted\"") != std::string::npos);
    CHECK(r.err.find("--shard 1/3 --out " + dir.path + "/sh --resume") != std::string::npos);
    // The printed remedy works: the shard is finished, then the merge is the one-process run.
    const Result fin = phaselab(
        {"run", dir / "s.toml", "--shard", "1/3", "--out", dir / "sh", "--resume", "--quiet"}, dir);
    CHECK(fin.rc == 0);
    CHECK(slurp(s1 + "/run.json").find("\"done_before\": 6") != std::string::npos);
    r = merge(dir, dir / "m", {s0, s1, s2});
    CHECK(r.rc == 0);
    expect_same_tables(dir / "one", dir / "m");
    // A second merge into the same folder is refused rather than overwriting it.
    CHECK(merge(dir, dir / "m", {s0, s1, s2}).rc == 2);
    // A merge that stopped before its run.json was final (Ctrl-C, disk full) left "merging":
    // merging again redoes it (it was refused for good before).
    const std::string done_rec = slurp(dir / "m/run.json");
    std::string merging = done_rec;
    const size_t st = merging.find("\"status\": \"ok\"");
    REQUIRE(st != std::string::npos);
    merging.replace(st, 14, "\"status\": \"merging\"");
    spit(dir / "m/run.json", merging);
    spit(dir / "m/results.csv", "torn");
    r = merge(dir, dir / "m", {s0, s1, s2});
    CHECK(r.rc == 0);
    CHECK(r.err.find("holds an unfinished merge: merging again") != std::string::npos);
    expect_same_tables(dir / "one", dir / "m");
    CHECK(slurp(dir / "m/run.json").find("\"status\": \"ok\"") != std::string::npos);
    // A full disk during the merge: exit 5 (a write error, as for a run), not 2; then redone.
    {
      const ScopedEnv fault("PHASELAB_FAULT_WRITE_BYTES", "3000");
      r = merge(dir, dir / "m5", {s0, s1, s2});
    }
    CAPTURE(r.err);
    CHECK(r.rc == 5);
    CHECK(r.err.find("No space left on device") != std::string::npos);
    r = merge(dir, dir / "m5", {s0, s1, s2});
    CHECK(r.rc == 0);
    expect_same_tables(dir / "one", dir / "m5");
  }
}

// merge checks the rows against the journal and run.json: a row removed, a results.csv emptied,
// a row or a journal line repeated is an error (exit 2, nothing merged), not a whole-looking
// table. A hand-edited run.json (a wrong type, shard.count = 0) is an error too, not a crash.
TEST_CASE("merge refuses tables whose rows do not match the journal, and bad shard records") {
  TempDir dir;
  spit(dir / "s.toml", sweep_toml());
  for (int i = 0; i < 2; ++i)
    REQUIRE(phaselab({"run", dir / "s.toml", "--shard", std::to_string(i) + "/2", "--out",
                      dir / "sh", "--quiet"},
                     dir)
                .rc == 0);
  const std::string s0 = dir / "sh/shard-0-of-2", s1 = dir / "sh/shard-1-of-2";
  const std::string res = slurp(s1 + "/results.csv"), hist = slurp(s1 + "/history.csv"),
                    journal = slurp(s1 + "/journal.csv"), rec = slurp(s1 + "/run.json");
  REQUIRE(count_lines(res) == 11);
  auto restore = [&] {
    spit(s1 + "/results.csv", res);
    spit(s1 + "/history.csv", hist);
    spit(s1 + "/journal.csv", journal);
    spit(s1 + "/run.json", rec);
  };
  auto refused = [&](const std::string& what) {
    const Result r = merge(dir, dir / "m", {s0, s1});
    CAPTURE(r.err);
    CHECK(r.rc == 2);
    CHECK(r.err.find(what) != std::string::npos);
    CHECK_FALSE(exists(dir / "m/results.csv"));
    restore();
  };
  const size_t second = res.find('\n') + 1, third = res.find('\n', second) + 1;
  const std::string row = res.substr(second, third - second);
  SUBCASE("a row removed") {
    spit(s1 + "/results.csv", res.substr(0, second) + res.substr(third));
    refused(
        "wrote 5 rows (run.json), its tables (results.csv, history.csv, points.csv) hold 4 "
        "(rows were removed); remove " +
        s1 + " and run the shard again: phaselab run");
  }
  SUBCASE("results.csv emptied") {
    spit(s1 + "/results.csv", "");
    refused("(rows were removed)");
  }
  SUBCASE("a row repeated") {
    spit(s1 + "/results.csv", res + row);
    refused("hold 6 (rows were added)");
  }
  SUBCASE("a journal line repeated") {
    const size_t j2 = journal.find('\n') + 1, j3 = journal.find('\n', j2) + 1;
    spit(s1 + "/journal.csv", journal + journal.substr(j2, j3 - j2));
    refused("/journal.csv lists point ");
  }
  SUBCASE("shard.count = 0") {
    std::string r = rec;
    const size_t at = r.find("\"count\": 2");
    REQUIRE(at != std::string::npos);
    r.replace(at, 10, "\"count\": 0");
    spit(s1 + "/run.json", r);
    refused("shard 1 of 0 is not a shard I of N");
  }
  SUBCASE("shard.count huge") {
    std::string r = rec;
    const size_t at = r.find("\"count\": 2");
    REQUIRE(at != std::string::npos);
    r.replace(at, 10, "\"count\": 999999999999999999");
    spit(s1 + "/run.json", r);
    refused("shard.count 999999999999999999 is more than the most points a run may have");
  }
  SUBCASE("a string where a number goes") {
    std::string r = rec;
    const size_t at = r.find("\"index\": 1");
    REQUIRE(at != std::string::npos);
    r.replace(at, 10, "\"index\": \"1\"");
    spit(s1 + "/run.json", r);
    refused("shard.index must be a whole number >= 0, got \"1\"");
  }
  SUBCASE("a wrong type deeper in run.json") {
    std::string r = rec;
    const size_t at = r.find("\"counts\": {");
    REQUIRE(at != std::string::npos);
    r.replace(at, 11, "\"counts\": [1], \"x\": {");
    const size_t st = r.find("\"status\": \"ok\"");
    REQUIRE(st != std::string::npos);
    r.replace(st, 14, "\"status\": \"interrupted\"");
    spit(s1 + "/run.json", r);
    refused("has a field of the wrong type");
  }
  SUBCASE("untouched shards merge; resumed points keep their row counts") {
    const Result fin = phaselab(
        {"run", dir / "s.toml", "--shard", "1/2", "--out", dir / "sh", "--resume", "--quiet"}, dir);
    CHECK(fin.rc == 0);
    CHECK(slurp(s1 + "/run.json").find("\"status\": \"done_before\", \"seconds\": ") !=
          std::string::npos);
    // (the test plugin has a cost estimate, recorded between seconds and rows)
    CHECK(std::regex_search(
        slurp(s1 + "/run.json"),
        std::regex(R"("status": "done_before", "seconds": 0, ("cost": [^,]+, )?"rows": 5\})")));
    CHECK(merge(dir, dir / "m", {s0, s1}).rc == 0);
    // the last row of a point done before the --resume removed
    spit(s1 + "/history.csv", hist.substr(0, hist.rfind('\n', hist.size() - 2) + 1));
    const Result m2 = merge(dir, dir / "m2", {s0, s1});
    CHECK(m2.rc == 2);
    CHECK(m2.err.find("(rows were removed)") != std::string::npos);
  }
}

// --resume on a shard's folder without --shard would run the whole sweep inside it: refused, with
// the command that continues the shard; an interrupted shard's hint is that whole command.
TEST_CASE("--resume of a shard folder needs its --shard; the hints give the whole command") {
  TempDir dir;
  spit(dir / "s.toml", sweep_toml("sleep_ms = 100\n"));
  const std::string parent = dir / "sh", s1 = parent + "/shard-1-of-2";
  const pid_t pid =
      spawn(kExe, {"run", dir / "s.toml", "--shard", "1/2", "--out", parent, "--threads", "1"}, dir,
            "int", std::vector<std::string>{});
  const auto t0 = std::chrono::steady_clock::now();
  while (count_lines(slurp(s1 + "/results.csv")) < 3 &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ::kill(pid, SIGINT);
  CHECK(wait_rc(pid) == 130);
  const std::string cont =
      "phaselab run " + dir / "s.toml" + " --shard 1/2 --out " + parent + " --resume";
  CHECK(slurp(dir / "int.err").find("continue with: " + cont) != std::string::npos);
  const std::string res = slurp(s1 + "/results.csv"), rec = slurp(s1 + "/run.json");
  // the hint of before: --resume --out the shard's folder, no --shard
  Result r = phaselab({"run", dir / "s.toml", "--resume", "--out", s1, "--quiet"}, dir);
  CAPTURE(r.err);
  CHECK(r.rc == 2);
  CHECK(r.err.find("the run there is shard 1 of 2, this one is not sharded") != std::string::npos);
  CHECK(r.err.find("continue it with: " + cont) != std::string::npos);
  CHECK(slurp(s1 + "/results.csv") == res);
  CHECK(slurp(s1 + "/run.json") == rec);
  // the printed command works
  r = phaselab({"run", dir / "s.toml", "--shard", "1/2", "--out", parent, "--resume", "--quiet"},
               dir);
  CHECK(r.rc == 0);
  CHECK(count_lines(slurp(s1 + "/results.csv")) == 11);
}

TEST_CASE("--shard: I/N, auto from job-array environments, and its errors") {
  TempDir dir;
  spit(dir / "s.toml", sweep_toml());
  auto shard_of = [&](const std::vector<std::string>& env, const std::string& spec) {
    return phaselab({"run", dir / "s.toml", "--shard", spec, "--out", dir / "a", "--quiet"}, dir,
                    env);
  };
  // Slurm: --array=1-4 -> task 3 is shard 2 of 4.
  CHECK(shard_of({"SLURM_ARRAY_TASK_ID=3", "SLURM_ARRAY_TASK_MIN=1", "SLURM_ARRAY_TASK_COUNT=4"},
                 "auto")
            .rc == 0);
  CHECK(exists(dir / "a/shard-2-of-4/results.csv"));
  CHECK(slurp(dir / "a/shard-2-of-4/run.json").find("SLURM_ARRAY_TASK_ID=3") != std::string::npos);
  // GNU parallel (1-based) with the count given.
  CHECK(shard_of({"PARALLEL_SEQ=1"}, "auto/5").rc == 0);
  CHECK(exists(dir / "a/shard-0-of-5/results.csv"));
  // Kubernetes indexed job with the count from PHASELAB_SHARD_COUNT.
  CHECK(shard_of({"JOB_COMPLETION_INDEX=4", "PHASELAB_SHARD_COUNT=5"}, "auto").rc == 0);
  CHECK(exists(dir / "a/shard-4-of-5/results.csv"));
  // Errors, nothing run.
  Result r = shard_of({"PBS_ARRAY_INDEX=2"}, "auto");
  CHECK(r.rc == 2);
  CHECK(r.err.find("does not export the number of tasks: pass --shard auto/N") !=
        std::string::npos);
  r = shard_of({}, "auto");
  CHECK(r.rc == 2);
  CHECK(r.err.find("no array index in the environment") != std::string::npos);
  r = shard_of({"SLURM_ARRAY_TASK_ID=9", "SLURM_ARRAY_TASK_COUNT=4"}, "auto");
  CHECK(r.rc == 2);
  CHECK(r.err.find("outside the array [0, 3]") != std::string::npos);
  r = shard_of({}, "4/4");
  CHECK(r.rc == 2);
  CHECK(r.err.find("I must be in [0, 4)") != std::string::npos);
  r = shard_of({}, "1/x");
  CHECK(r.rc == 2);
  // A huge N is refused before anything is made (it aborted with bad_alloc, folder and lock
  // left); a Slurm array of 0 tasks names itself.
  r = shard_of({}, "1/999999999999999999");
  CHECK(r.rc == 2);
  CHECK(r.err.find("--shard 1/999999999999999999: N must be at most 100000") != std::string::npos);
  CHECK_FALSE(exists(dir / "a/shard-1-of-999999999999999999"));
  r = shard_of({"SLURM_ARRAY_TASK_ID=0", "SLURM_ARRAY_TASK_COUNT=0"}, "auto");
  CHECK(r.rc == 2);
  CHECK(r.err.find("SLURM_ARRAY_TASK_COUNT=0 must be in [1, 100000]") != std::string::npos);
  CHECK(r.err.find("18446744073709551615") == std::string::npos);
  r = phaselab({"run", dir / "s.toml", "--shard", "0/2", "--quiet"}, dir);
  CHECK(r.rc == 2);
  CHECK(r.err.find("--shard needs the run folder") != std::string::npos);
}

TEST_CASE("a single Markov point: the same results at 1 and 2 threads") {
  TempDir dir;
  spit(dir / "m.toml",
       "plugin = \"markov_icl\"\n[sweep]\nK = [4]\n[markov_icl]\nC = 3\nN = 16\nd_model = 8\n"
       "batch = 8\nsteps = 20\nn_eval = 16\ncheckpoints = 2\nchunks = 4\n");
  // One point, two threads: the spare thread works inside the point (its batch chunks).
  const Result a =
      phaselab({"run", dir / "m.toml", "--out", dir / "t1", "--threads", "1", "--quiet"}, dir);
  const Result b =
      phaselab({"run", dir / "m.toml", "--out", dir / "t2", "--threads", "2", "--quiet"}, dir);
  REQUIRE(a.rc == 0);
  REQUIRE(b.rc == 0);
  CHECK(count_lines(slurp(dir / "t1/results.csv")) == 1 + 3);
  CHECK(slurp(dir / "t1/results.csv") == slurp(dir / "t2/results.csv"));
}

// Skipped (and counted so) in a build without MPI.
TEST_CASE("mpirun -n 3 equals the one-process run" * doctest::skip(kMpirun.empty())) {
  TempDir dir;
  spit(dir / "s.toml", sweep_toml("fail_at = 64\nsleep_ms = 100\n"));
  REQUIRE(phaselab({"run", dir / "s.toml", "--out", dir / "one", "--quiet"}, dir).rc == 4);
  const std::string tag = "mpi" + std::to_string(g_counter++);
  const Result r = finish(spawn(kMpirun,
                                mpirun_args(3, {"run", dir / "s.toml", "--out", dir / "mpi",
                                                "--threads", "1", "--quiet"}),
                                dir, tag, kMpiEnv),
                          dir, tag);
  INFO(r.err);
  CHECK(r.rc == 4);
  expect_same_tables(dir / "one", dir / "mpi");
  const std::string rec = slurp(dir / "mpi/run.json");
  CHECK(rec.find("\"mpi_ranks\": 3") != std::string::npos);
  // Every point ran once, on some rank; rank 0 (one thread of 100 ms points) did not run them
  // all: the worker ranks took some.
  CHECK(count_of(rec, "\"rank\": ") == 20);
  CHECK(count_of(rec, "\"rank\": 0") < 20);
  // A second mpirun resuming the finished folder runs nothing and keeps the files.
  const std::string tag2 = "mpi" + std::to_string(g_counter++);
  const Result again = finish(
      spawn(kMpirun,
            mpirun_args(3, {"run", dir / "s.toml", "--out", dir / "mpi", "--resume", "--quiet"}),
            dir, tag2, kMpiEnv),
      dir, tag2);
  CHECK(again.rc == 4);  // the 4 failed points are run again and fail again
  expect_same_tables(dir / "one", dir / "mpi");
}

// Skipped (and counted so) in a build without MPI.
TEST_CASE("a rank killed mid-run: finished points kept, --resume without mpirun completes" *
          doctest::skip(kMpirun.empty())) {
  TempDir dir;
  spit(dir / "s.toml", sweep_toml("sleep_ms = 150\n"));
  REQUIRE(phaselab({"run", dir / "s.toml", "--out", dir / "one", "--quiet"}, dir).rc == 0);
  const std::string tag = "kill" + std::to_string(g_counter++);
  const pid_t launcher = spawn(
      kMpirun,
      mpirun_args(3, {"run", dir / "s.toml", "--out", dir / "k", "--threads", "1", "--quiet"}), dir,
      tag, kMpiEnv);
  // Wait until a few points are on disk, then SIGKILL rank 1 (found by its environment).
  size_t before = 0;
  for (int i = 0; i < 600 && before < 1 + 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    before = count_lines(slurp(dir / "k/results.csv"));
  }
  REQUIRE(before >= 1 + 4);
  pid_t victim = -1;
  if (DIR* d = ::opendir("/proc")) {
    while (const dirent* e = ::readdir(d)) {
      const pid_t pid = pid_t(std::atoi(e->d_name));
      if (pid <= 0) continue;
      const std::string environ = slurp("/proc/" + std::string(e->d_name) + "/environ");
      const std::string cmd = slurp("/proc/" + std::string(e->d_name) + "/cmdline");
      if (cmd.find(dir / "k") != std::string::npos &&
          environ.find(std::string("OMPI_COMM_WORLD_RANK=1") + '\0') != std::string::npos)
        victim = pid;
    }
    ::closedir(d);
  }
  REQUIRE(victim > 0);
  REQUIRE(::kill(victim, SIGKILL) == 0);
  const Result killed = finish(launcher, dir, tag);
  CHECK(killed.rc != 0);
  // Whole points only: every row of results.csv is complete, none is repeated.
  const std::string partial = slurp(dir / "k/results.csv");
  const size_t kept = count_lines(partial) - 1;
  INFO("points kept after the kill: " << kept);
  CHECK(kept >= 4);
  CHECK(kept < 20);
  const Result res =
      phaselab({"run", dir / "s.toml", "--out", dir / "k", "--resume", "--quiet"}, dir);
  CHECK(res.rc == 0);
  expect_same_tables(dir / "one", dir / "k");
  // None re-run, none lost: the kept points are "done before", the others ran now.
  const std::string rec = slurp(dir / "k/run.json");
  CHECK(rec.find("\"done_before\": " + std::to_string(kept)) != std::string::npos);
  CHECK(rec.find("\"ok\": " + std::to_string(20 - kept)) != std::string::npos);
}

TEST_CASE("markov_icl: the plugin's summaries are made once, from the merged files") {
  TempDir dir;
  spit(dir / "m.toml",
       "plugin = \"markov_icl\"\n[run]\nseeds = [0, 1]\n[sweep]\nK = [1, 4, 16]\n[markov_icl]\n"
       "C = 3\nN = 16\nd_model = 8\nbatch = 8\nsteps = 20\nn_eval = 16\ncheckpoints = 2\n"
       "chunks = 4\n");
  REQUIRE(phaselab({"run", dir / "m.toml", "--out", dir / "one", "--quiet"}, dir).rc == 0);
  std::vector<std::string> shards;
  for (int i = 0; i < 4; ++i) {
    REQUIRE(phaselab({"run", dir / "m.toml", "--shard", std::to_string(i) + "/4", "--out",
                      dir / "sh", "--quiet"},
                     dir)
                .rc == 0);
    shards.push_back(dir / ("sh/shard-" + std::to_string(i) + "-of-4"));
    CHECK(!exists(shards.back() + "/summary.csv"));  // finish() does not run on a shard
  }
  REQUIRE(merge(dir, dir / "sh", shards).rc == 0);
  for (const char* f : {"results.csv", "summary.csv", "summary.txt", "summary_fits.csv",
                        "summary_boundaries.csv"}) {
    INFO(f);
    REQUIRE(exists(dir / ("one/" + std::string(f))));
    CHECK(slurp(dir / ("one/" + std::string(f))) == slurp(dir / ("sh/" + std::string(f))));
  }
}

TEST_CASE(
    "merge counts a point done by its journal line: copy_theory with num_P = 0 writes no "
    "results rows") {
  // Only transition_points rows (the driver's all-parameters table): results.csv stays empty.
  TempDir dir;
  spit(dir / "t.toml",
       "plugin = \"copy_theory\"\n[run]\nseeds = 1\n[sweep]\nattention = [\"softmax\", "
       "\"linear\"]\nL = [8, 16, 32]\n[copy_theory]\nV = 4\nnum_P = 0\nexact_check = false\n");
  REQUIRE(phaselab({"run", dir / "t.toml", "--out", dir / "one", "--quiet"}, dir).rc == 0);
  std::vector<std::string> shards;
  for (int i = 0; i < 2; ++i) {
    REQUIRE(phaselab({"run", dir / "t.toml", "--shard", std::to_string(i) + "/2", "--out",
                      dir / "sh", "--quiet"},
                     dir)
                .rc == 0);
    shards.push_back(dir / ("sh/shard-" + std::to_string(i) + "-of-2"));
  }
  const Result m = merge(dir, dir / "sh", shards);
  CAPTURE(m.err);
  REQUIRE(m.rc == 0);
  // The fits from the merged rows equal the one-process run's (transition_points.csv differs
  // only in its wall-time column); results.csv is a header in both; the merged journal holds
  // every point (in point order; the run's is in completion order).
  for (const char* f : {"results.csv", "scaling_fit.csv"}) {
    INFO(f);
    REQUIRE(exists(dir / ("sh/" + std::string(f))));
    CHECK(slurp(dir / ("one/" + std::string(f))) == slurp(dir / ("sh/" + std::string(f))));
  }
  const std::string results = slurp(dir / "sh/results.csv");
  CHECK(std::count(results.begin(), results.end(), '\n') == 1);
  auto sorted_lines = [](const std::string& text) {
    std::vector<std::string> v;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) v.push_back(l);
    std::sort(v.begin(), v.end());
    return v;
  };
  const auto journal = sorted_lines(slurp(dir / "sh/journal.csv"));
  CHECK(journal.size() == 7);
  CHECK(journal == sorted_lines(slurp(dir / "one/journal.csv")));
  // --resume on the merged folder finds every point done.
  const Result r = phaselab({"run", dir / "t.toml", "--out", dir / "sh", "--resume"}, dir);
  CAPTURE(r.err);
  CHECK(r.rc == 0);
  CHECK(r.err.find("0 to run") != std::string::npos);
}

TEST_CASE(
    "the memory check reads the job's limit: cgroup v2 and v1, SLURM_MEM_PER_NODE and PER_CPU") {
  // toy claims mem_mb per point; 2 points at once. A fake cgroup tree stands in for the kernel's.
  TempDir dir;
  spit(dir / "c.toml",
       "plugin = \"toy\"\n[run]\nthreads = 2\n[sweep]\nn = [4, 8]\n[toy]\nmem_mb = 100\n");
  // No limit below the machine's memory: runs.
  const Result free_run =
      phaselab({"check", dir / "c.toml"}, dir, {"PHASELAB_PROC_CGROUP=" + (dir / "none")});
  CHECK(free_run.rc == 0);
  // v2: the parent's memory.max (200 MB) applies to the child ("max"): 2 x 100 MB > 80%.
  REQUIRE(::mkdir((dir / "v2").c_str(), 0755) == 0);
  REQUIRE(::mkdir((dir / "v2/job").c_str(), 0755) == 0);
  REQUIRE(::mkdir((dir / "v2/job/step").c_str(), 0755) == 0);
  spit(dir / "v2/job/memory.max", "209715200\n");
  spit(dir / "v2/job/step/memory.max", "max\n");
  spit(dir / "cg2", "0::/job/step\n");
  const Result v2 =
      phaselab({"check", dir / "c.toml"}, dir,
               {"PHASELAB_PROC_CGROUP=" + (dir / "cg2"), "PHASELAB_CGROUP_ROOT=" + (dir / "v2")});
  CHECK(v2.rc == 2);
  CHECK(v2.err.find("more than 80% of this process's cgroup memory limit, 200.0 MB") !=
        std::string::npos);
  // v1: the memory controller's tree.
  REQUIRE(::mkdir((dir / "v1").c_str(), 0755) == 0);
  REQUIRE(::mkdir((dir / "v1/memory").c_str(), 0755) == 0);
  REQUIRE(::mkdir((dir / "v1/memory/slurm").c_str(), 0755) == 0);
  spit(dir / "v1/memory/memory.limit_in_bytes", "9223372036854771712\n");  // unlimited
  spit(dir / "v1/memory/slurm/memory.limit_in_bytes", "157286400\n");
  spit(dir / "cg1", "5:cpuset:/\n4:memory:/slurm\n0::/\n");
  const Result v1 =
      phaselab({"check", dir / "c.toml"}, dir,
               {"PHASELAB_PROC_CGROUP=" + (dir / "cg1"), "PHASELAB_CGROUP_ROOT=" + (dir / "v1")});
  CHECK(v1.rc == 2);
  CHECK(v1.err.find("cgroup memory limit, 150.0 MB") != std::string::npos);
  // Slurm's --mem and --mem-per-cpu (MB), the smallest limit wins.
  const Result node =
      phaselab({"run", dir / "c.toml", "--out", dir / "r1"}, dir,
               {"PHASELAB_PROC_CGROUP=" + (dir / "none"), "SLURM_MEM_PER_NODE=240"});
  CHECK(node.rc == 2);
  CHECK(node.err.find("(SLURM_MEM_PER_NODE), 240.0 MB") != std::string::npos);
  CHECK(!exists(dir / "r1/results.csv"));
  const Result cpu = phaselab(
      {"check", dir / "c.toml"}, dir,
      {"PHASELAB_PROC_CGROUP=" + (dir / "none"), "SLURM_MEM_PER_CPU=100", "SLURM_CPUS_ON_NODE=2"});
  CHECK(cpu.rc == 2);
  CHECK(cpu.err.find("SLURM_MEM_PER_CPU x SLURM_CPUS_ON_NODE), 200.0 MB") != std::string::npos);
  const Result enough =
      phaselab({"check", dir / "c.toml"}, dir,
               {"PHASELAB_PROC_CGROUP=" + (dir / "none"), "SLURM_MEM_PER_NODE=1000"});
  CHECK(enough.rc == 0);
}

TEST_CASE("status: a half-finished folder of shards, with a killed shard and a missing one") {
  TempDir dir;
  spit(dir / "s.toml", sweep_toml("sleep_ms = 40\n"));
  const std::string parent = dir / "sh";
  REQUIRE(phaselab({"run", dir / "s.toml", "--shard", "0/3", "--out", parent, "--quiet"}, dir).rc ==
          0);
  // Shard 1 killed with SIGKILL after its first points: run.json says running, the lock is stale.
  const pid_t pid = spawn(
      kExe, {"run", dir / "s.toml", "--shard", "1/3", "--out", parent, "--quiet", "--threads", "1"},
      dir, "killed", std::vector<std::string>{});
  const std::string journal = parent + "/shard-1-of-3/journal.csv";
  for (int i = 0; i < 300 && count_lines(slurp(journal)) < 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  const size_t done1 = count_lines(slurp(journal)) - 1;
  REQUIRE(done1 >= 2);
  REQUIRE(done1 < 7);
  const Result st = phaselab({"status", parent}, dir);
  CHECK(st.rc == 0);
  CHECK(st.out.find("3 shards, 20 points: " + std::to_string(7 + done1) + " done, 0 failed") !=
        std::string::npos);
  CHECK(st.out.find("running, but no phaselab holds it  stale") != std::string::npos);
  CHECK(st.out.find("shard-2-of-3                 missing") != std::string::npos);
  CHECK(st.out.find("--shard 1/3 --out " + parent + " --resume") != std::string::npos);
  CHECK(st.out.find("--shard 2/3 --out " + parent + " --resume") != std::string::npos);
  CHECK(st.out.find("--shard 0/3") == std::string::npos);  // finished: no command
  CHECK(st.out.find("sbatch --array=1,2 ") != std::string::npos);
  CHECK(st.out.find("phaselab merge " + parent + " " + parent + "/shard-*") != std::string::npos);
  const Result js = phaselab({"status", parent, "--json"}, dir);
  CHECK(js.rc == 0);
  CHECK(js.out.find("\"kind\": \"shards\"") != std::string::npos);
  CHECK(js.out.find("\"done\": " + std::to_string(7 + done1)) != std::string::npos);
  CHECK(js.out.find("\"lock\": \"stale\"") != std::string::npos);
  // The printed commands finish the run: the merge then equals the one-process run.
  REQUIRE(
      phaselab({"run", dir / "s.toml", "--shard", "1/3", "--out", parent, "--resume", "--quiet"},
               dir)
          .rc == 0);
  REQUIRE(
      phaselab({"run", dir / "s.toml", "--shard", "2/3", "--out", parent, "--resume", "--quiet"},
               dir)
          .rc == 0);
  const Result after = phaselab({"status", parent}, dir);
  CHECK(after.out.find("20 done, 0 failed, 0 left") != std::string::npos);
  CHECK(after.out.find("--resume") == std::string::npos);
  REQUIRE(merge(dir, parent, shard_dirs(parent)).rc == 0);
  REQUIRE(phaselab({"run", dir / "s.toml", "--out", dir / "one", "--quiet"}, dir).rc == 0);
  expect_same_tables(dir / "one", parent);
  // Neither a run nor shards: exit 2.
  CHECK(phaselab({"status", dir / "nothing"}, dir).rc == 2);
}

TEST_CASE("merge --partial: what has finished, marked partial; merging again completes it") {
  TempDir dir;
  spit(dir / "s.toml", sweep_toml("sleep_ms = 30\n"));
  const std::string parent = dir / "sh";
  REQUIRE(phaselab({"run", dir / "s.toml", "--shard", "0/3", "--out", parent, "--quiet"}, dir).rc ==
          0);
  // Shard 1 killed after a few points; shard 2 never run.
  const pid_t pid = spawn(
      kExe, {"run", dir / "s.toml", "--shard", "1/3", "--out", parent, "--quiet", "--threads", "1"},
      dir, "killed", std::vector<std::string>{});
  const std::string journal = parent + "/shard-1-of-3/journal.csv";
  for (int i = 0; i < 300 && count_lines(slurp(journal)) < 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  const size_t done1 = count_lines(slurp(journal)) - 1;
  REQUIRE(done1 >= 2);
  REQUIRE(done1 < 7);
  const std::vector<std::string> two = {parent + "/shard-0-of-3", parent + "/shard-1-of-3"};
  // Without --partial: refused, pointing to --partial.
  const Result full = merge(dir, parent, two);
  CHECK(full.rc == 2);
  CHECK(full.err.find("--partial") != std::string::npos);
  std::vector<std::string> args = {"merge", parent};
  args.insert(args.end(), two.begin(), two.end());
  args.push_back("--partial");
  const Result part = phaselab(args, dir, {"PHASELAB_GNUPLOT="});
  REQUIRE(part.rc == 0);
  CHECK(part.err.find("PARTIAL: " + std::to_string(20 - 7 - done1) + " of 20 points are missing") !=
        std::string::npos);
  // Its rows are exactly the one-process run's rows of the points done.
  REQUIRE(phaselab({"run", dir / "s.toml", "--out", dir / "one", "--quiet"}, dir).rc == 0);
  const std::string one = slurp(dir / "one/results.csv"), merged = slurp(parent + "/results.csv");
  CHECK(count_lines(merged) == 1 + 7 + done1);
  size_t at = 0, found = 0;
  for (size_t nl = merged.find('\n'); nl != std::string::npos;
       at = nl + 1, nl = merged.find('\n', at))
    found += one.find(merged.substr(at, nl - at + 1)) != std::string::npos;
  CHECK(found == count_lines(merged));
  const std::string rec = slurp(parent + "/run.json");
  CHECK(rec.find("\"status\": \"partial\"") != std::string::npos);
  CHECK(rec.find("\"missing_shards\": [2]") != std::string::npos);
  CHECK(rec.find("\"unfinished_shards\": [1]") != std::string::npos);
  CHECK(count_of(rec, "\"status\": \"missing\"") == 20 - 7 - done1);
  // Figures of the partial merge say so (the .gp title; gnuplot is off in the tests).
  CHECK(slurp(parent + "/figures/value_vs_n.gp")
            .find("partial: " + std::to_string(7 + done1) + " of 20 points") != std::string::npos);
  // Finish the shards, merge again into the same folder: the one-process tables.
  REQUIRE(
      phaselab({"run", dir / "s.toml", "--shard", "1/3", "--out", parent, "--resume", "--quiet"},
               dir)
          .rc == 0);
  REQUIRE(phaselab({"run", dir / "s.toml", "--shard", "2/3", "--out", parent, "--quiet"}, dir).rc ==
          0);
  const Result again = merge(dir, parent, shard_dirs(parent));
  REQUIRE(again.rc == 0);
  CHECK(again.err.find("holds a partial merge: merging again") != std::string::npos);
  expect_same_tables(dir / "one", parent);
  CHECK(slurp(parent + "/run.json").find("\"status\": \"ok\"") != std::string::npos);
  CHECK(slurp(parent + "/figures/value_vs_n.gp").find("partial") == std::string::npos);
}
