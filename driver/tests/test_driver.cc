// SPDX-License-Identifier: Apache-2.0
// Driver tests: run the built `phaselab` binary (PHASELAB_EXE) on configs written to a
// temporary folder, with the test plugins of PHASELAB_TEST_PLUGINS (toy, badabi, noentry, badtable)
// on the plugin path. Every bad input checks its exit status and its message.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "driver/sha256.hpp"
#include "driver/tests/support.hpp"
#include "sdk/table.hpp"
#include "sdk/text.hpp"

namespace {

using namespace pl::driver_test;

// PHASELAB_PLUGIN_PATH for the next commands (empty: the test plugins' folder).
std::string g_plugin_path;

// Starts phaselab with `args`; stdout and stderr go to files in `dir`.
pid_t spawn(const std::vector<std::string>& args, const TempDir& dir, const std::string& tag,
            bool with_gnuplot) {
  SpawnOptions o;
  o.plugin_path = g_plugin_path;
  o.gnuplot = with_gnuplot;
  return pl::driver_test::spawn(phaselab_exe(), args, dir, tag, o);
}

Result phaselab(const std::vector<std::string>& args, const TempDir& dir,
                bool with_gnuplot = false) {
  const std::string tag = next_tag();
  return finish(spawn(args, dir, tag, with_gnuplot), dir, tag);
}

// Writes `toml` as <dir>/<name>.toml and checks it: returns the result.
Result check(const TempDir& dir, const std::string& toml, const std::string& name = "bad") {
  spit(dir / (name + ".toml"), toml);
  return phaselab({"check", dir / (name + ".toml")}, dir);
}

// Expects exit status `rc` and `message` somewhere in stderr; `run` must refuse too and
// create nothing.
void expect_bad(const TempDir& dir, const std::string& toml, int rc, const std::string& message) {
  CAPTURE(toml);
  const Result c = check(dir, toml);
  CAPTURE(c.err);
  CHECK(c.rc == rc);
  CHECK(c.err.find(message) != std::string::npos);
  const Result r = phaselab({"run", dir / "bad.toml", "--out", dir / "never"}, dir);
  CHECK(r.rc == rc);
  CHECK(r.err.find(message) != std::string::npos);
  CHECK_FALSE(exists(dir / "never"));
}

const char* kGood = R"(plugin = "toy"
[run]
seeds = 2
[sweep]
n = [4, 16, 64]
mode = ["sum", "mean"]
[toy]
scale = 0.5
)";

}  // namespace

TEST_CASE("the shared CSV reader and list splitter") {
  using Recs = std::vector<std::vector<std::string>>;
  Recs r;
  // Quoted fields with commas, "" escapes and line ends; CRLF; an empty line; a last line without
  // its end; empty fields.
  REQUIRE(pl::sdk::parse_csv("a,\"b,\"\"c\"\"\",d\r\n\n\"x\ny\",,\n1,2", &r));
  CHECK(r == Recs{{"a", "b,\"c\"", "d"}, {"x\ny", "", ""}, {"1", "2"}});
  CHECK_FALSE(pl::sdk::parse_csv("a,\"open", &r));
  CHECK(pl::sdk::csv_fields("p,\"say \"\"hi\"\"\",3\r") ==
        std::vector<std::string>{"p", "say \"hi\"", "3"});
  CHECK(pl::sdk::csv_fields("") == std::vector<std::string>{""});
  CHECK(pl::sdk::split_list(" a, b,,c ,  ", ',') == std::vector<std::string>{"a", "b", "c"});
  CHECK(pl::sdk::split_list("/x:/y z", ':') == std::vector<std::string>{"/x", "/y z"});
  CHECK(pl::sdk::split_list("", ',').empty());
}

TEST_CASE("list shows the toy plugin with its keys and warns about broken ones") {
  TempDir d;
  const Result r = phaselab({"list"}, d);
  CHECK(r.rc == 0);
  CHECK(r.out.find("toy 0.1") != std::string::npos);
  CHECK(r.out.find("scale") != std::string::npos);
  CHECK(r.out.find("a number > 0") != std::string::npos);
  CHECK(r.out.find("one of \"sum\", \"mean\", \"max\"") != std::string::npos);
  CHECK(r.err.find("skipping badabi") != std::string::npos);
  CHECK(r.err.find("skipping noentry") != std::string::npos);
}

TEST_CASE("list NAME, a plugin file on the path, and a name found in two folders") {
  TempDir d;
  Result r = phaselab({"list", "toy"}, d);
  CHECK(r.rc == 0);
  CHECK(r.out.find("toy 0.1") == 0);
  CHECK(r.out.find("toy_v2") == std::string::npos);
  CHECK(r.err.empty());  // the broken test plugins are not loaded
  r = phaselab({"list", "toi"}, d);
  CHECK(r.rc == 3);
  CHECK(r.err.find("phaselab list: error: plugin \"toi\" not found (did you mean \"toy\"?)") == 0);

  const std::string plugins = env_or("PHASELAB_TEST_PLUGINS", "");
  const std::string so = plugins + "/toy/phaselab_toy.so";
  g_plugin_path = so;
  r = phaselab({"list", "toy"}, d);
  CHECK(r.rc == 3);
  CHECK(r.err.find("PHASELAB_PLUGIN_PATH entry \"" + so +
                   "\" is a file; entries must be folders (holding phaselab_<name>.so or "
                   "<name>/phaselab_<name>.so): use \"" +
                   plugins + "/toy\"") != std::string::npos);

  // A copy of the toy in a folder searched first: it wins, and the clash says so.
  REQUIRE(::mkdir((d / "first").c_str(), 0755) == 0);
  REQUIRE(std::system(("cp '" + so + "' '" + d / "first" + "/'").c_str()) == 0);
  g_plugin_path = d / "first" + ":" + plugins;
  r = phaselab({"list", "toy"}, d);
  g_plugin_path.clear();
  CHECK(r.rc == 0);
  CHECK(r.out.find(d / "first/phaselab_toy.so") != std::string::npos);
  CHECK(r.err.find("plugin \"toy\" found twice: using " + d / "first/phaselab_toy.so" +
                   " (PHASELAB_PLUGIN_PATH, searched earlier), not " + so +
                   " (PHASELAB_PLUGIN_PATH)") != std::string::npos);
}

TEST_CASE("new writes a renamed plugin folder from the template and refuses to overwrite") {
  TempDir d;
  Result r = phaselab({"new", "ising_1d", "--dir", d / "ising"}, d);
  CHECK(r.rc == 0);
  CHECK(r.out.find("wrote " + d / "ising" +
                   "/: ising_1d.cc, test_ising_1d.cc, ising_1d.toml, meson.build") == 0);
  const std::string src = slurp(d / "ising/ising_1d.cc");
  CHECK(src.find("struct Ising1d {") != std::string::npos);
  CHECK(src.find("PL_DEFINE_PLUGIN(Ising1d, \"ising_1d\"") != std::string::npos);
  CHECK(src.find("ou_process") == std::string::npos);
  CHECK(slurp(d / "ising/ising_1d.toml").find("plugin = \"ising_1d\"") != std::string::npos);
  CHECK(slurp(d / "ising/meson.build").find("shared_module('ising_1d'") != std::string::npos);
  // A new plugin builds optimised by default (meson's default, debug at -O0, ran 1.3-2.8x slower).
  CHECK(slurp(d / "ising/meson.build").find("'buildtype=release'") != std::string::npos);
  r = phaselab({"new", "ising_1d", "--dir", d / "ising"}, d);
  CHECK(r.rc == 2);
  CHECK(r.err.find("already exists") != std::string::npos);
  r = phaselab({"new", "Ising"}, d);
  CHECK(r.rc == 2);
  CHECK(r.err.find("must be a lower-case letter") != std::string::npos);
  // A 250-character name (test_<name>.cc is past the 255-byte file name limit) is refused
  // before anything is made; it left a half-written folder that blocked the retry.
  const std::string longname(250, 'a');
  r = phaselab({"new", longname, "--dir", d / "long"}, d);
  CHECK(r.rc == 2);
  CHECK(r.err.find("plugin name is 250 characters long, at most 64") != std::string::npos);
  CHECK_FALSE(exists(d / "long"));
  // A full disk: nothing is left, and the retry works.
  ::setenv("PHASELAB_FAULT_WRITE_BYTES", "2000", 1);
  r = phaselab({"new", "walk", "--dir", d / "walk"}, d);
  ::unsetenv("PHASELAB_FAULT_WRITE_BYTES");
  CHECK(r.rc == 5);
  CHECK(r.err.find("No space left on device") != std::string::npos);
  CHECK(r.err.find("nothing was left") != std::string::npos);
  CHECK_FALSE(exists(d / "walk"));
  r = phaselab({"new", "walk", "--dir", d / "walk"}, d);
  CHECK(r.rc == 0);
  CHECK(exists(d / "walk/walk.cc"));
}

TEST_CASE("help, version and usage errors") {
  TempDir d;
  Result r = phaselab({"--help"}, d);
  CHECK(r.rc == 0);
  CHECK(r.out.find("usage: phaselab") != std::string::npos);
  for (const char* cmd : {"list", "kernels", "check", "run"}) {
    r = phaselab({cmd, "--help"}, d);
    CHECK(r.rc == 0);
    CHECK(r.out.find(std::string("usage: phaselab ") + cmd) != std::string::npos);
  }
  r = phaselab({"--version"}, d);
  CHECK(r.rc == 0);
  CHECK(r.out.rfind("phaselab ", 0) == 0);
  CHECK(phaselab({}, d).rc == 2);
  r = phaselab({"rnu", "x.toml"}, d);
  CHECK(r.rc == 2);
  CHECK(r.err.find("did you mean run?") != std::string::npos);
  spit(d / "good.toml", kGood);
  r = phaselab({"run", d / "good.toml", "--thread", "2"}, d);
  CHECK(r.rc == 2);
  CHECK(r.err.find("unknown option --thread (did you mean --threads?)") != std::string::npos);
  r = phaselab({"run", d / "good.toml", "--threads", "two"}, d);
  CHECK(r.rc == 2);
  CHECK(r.err.find("--threads must be an integer in [0, 4096]") != std::string::npos);
  r = phaselab({"run", d / "good.toml", "--threads", "100000"}, d);  // said ">= 0" before
  CHECK(r.rc == 2);
  CHECK(r.err.find("--threads must be an integer in [0, 4096] (0 = all cores), got \"100000\"") !=
        std::string::npos);
  r = phaselab({"run"}, d);
  CHECK(r.rc == 2);
  CHECK(r.err.find("missing CONFIG.toml") != std::string::npos);
  // An option's value may be any word, a command's name included (the SDK check runs
  // `--out run`; read as the command, it was refused as a missing value).
  SpawnOptions in_d;
  in_d.cwd = d.path;
  r = finish(pl::driver_test::spawn(phaselab_exe(), {"run", "good.toml", "--out", "run", "--quiet"},
                                    d, "out-run", in_d),
             d, "out-run");
  CHECK_MESSAGE(r.rc == 0, r.err);
  CHECK(exists(d / "run/results.csv"));
  r = finish(pl::driver_test::spawn(phaselab_exe(), {"run", "good.toml", "--out=merge", "--quiet"},
                                    d, "out-merge", in_d),
             d, "out-merge");
  CHECK_MESSAGE(r.rc == 0, r.err);
  CHECK(exists(d / "merge/results.csv"));
}

TEST_CASE("kernels --json keeps its format") {
  TempDir d;
  const Result r = phaselab({"kernels", "--json"}, d);
  CHECK(r.rc == 0);
  CHECK(r.out.find("\"best_target\"") != std::string::npos);
  CHECK(r.out.find("{\"kernel\": \"exp\", \"selected\": \"exp.") != std::string::npos);
  CHECK(r.out.find("{\"name\": \"exp.scalar\", \"backend\": \"scalar\", \"isa\": \"scalar\", "
                   "\"supported\": true, \"selected\": ") != std::string::npos);
}

TEST_CASE("check accepts a good config and counts its points") {
  TempDir d;
  const Result r = check(d, kGood, "good");
  CHECK(r.rc == 0);
  CHECK(r.out.find("ok: plugin toy 0.1, 12 points (3 n x 2 mode x 2 seeds)") != std::string::npos);
}

TEST_CASE("key=value overrides: checked like the file, win over it, recorded in run.json") {
  TempDir d;
  spit(d / "good.toml", kGood);
  const std::string f = d / "good.toml";
  SUBCASE("check counts the overridden sweep and seeds") {
    const Result r = phaselab({"check", f, "toy.scale=2.0", "run.seeds=3", "sweep.n=[4,16]"}, d);
    CAPTURE(r.err);
    CHECK(r.rc == 0);
    CHECK(r.out.find("12 points (2 n x 2 mode x 3 seeds)") != std::string::npos);
  }
  SUBCASE("a plugin-table override stops the file's sweep of that key; a word is a string") {
    const Result r = phaselab({"check", f, "toy.mode=mean"}, d);
    CHECK(r.rc == 0);
    CHECK(r.out.find("6 points (3 n x 2 seeds)") != std::string::npos);
    const Result s = phaselab({"check", f, "sweep.scale=[1,2]"}, d);  // replaces toy.scale
    CHECK(s.rc == 0);
    CHECK(s.out.find("24 points (3 n x 2 mode x 2 scale x 2 seeds)") != std::string::npos);
  }
  SUBCASE("bad overrides: exit 2, named by the override and the key, nothing run") {
    const std::pair<std::vector<std::string>, std::string> bad[] = {
        {{"toy.n=\"16\""},
         "override toy.n=\"16\": error: toy.n must be an integer in [1, 100000], got \"16\""},
        {{"toy.n=abc"}, "override toy.n=abc: error: toy.n must be an integer"},
        {{"toy.nn=3"}, "override toy.nn=3: error: unknown key toy.nn (did you mean toy.n?)"},
        {{"sweep.n=[4,0]"},
         "override sweep.n=[4,0]: error: toy.n must be an integer in [1, "
         "100000], got 0 (in sweep.n)"},
        {{"run.seeds=0"}, "override run.seeds=0: error: run.seeds must be a seed count >= 1"},
        {{"plugin.x=1"},
         "override plugin.x=1: error: plugin is \"toy\" in the config, not a table"},
        {{"=3"}, "override =3: error: an override is KEY=VALUE"},
        {{"toy..n=3"}, "override toy..n=3: error: an override is KEY=VALUE"},
        {{"toy.n=[1,"}, "override toy.n=[1,: error: \"[1,\" is not a TOML value"},
        {{"toy.scale=1.5", "toy.shift=2"}, "override toy.shift=2: error: toy.shift must be"},
    };
    for (const auto& b : bad) {
      const std::vector<std::string>& args = b.first;
      const std::string& message = b.second;  // not a structured binding: CAPTURE takes it
      CAPTURE(message);
      std::vector<std::string> c = {"check", f}, r = {"run", f, "--out", d / "never"};
      c.insert(c.end(), args.begin(), args.end());
      r.insert(r.end(), args.begin(), args.end());
      const Result rc = phaselab(c, d), rr = phaselab(r, d);
      CAPTURE(rc.err);
      CHECK(rc.rc == 2);
      CHECK(rc.err.find(message) != std::string::npos);
      CHECK(rr.rc == 2);
      CHECK(rr.err.find(message) != std::string::npos);
      CHECK_FALSE(exists(d / "never"));
    }
  }
  SUBCASE("run applies them, run.json records them; --resume needs the same values") {
    const Result r = phaselab({"run", f, "--out", d / "o", "--quiet", "toy.scale=2.0",
                               "sweep.n=[4]", "toy.label=\"a b\""},
                              d);
    CAPTURE(r.err);
    REQUIRE(r.rc == 0);
    CHECK(count_lines(slurp(d / "o/results.csv")) == 1 + 2 * 2);  // n=4 x 2 modes x 2 seeds
    CHECK(slurp(d / "o/results.csv").find(",a b,") != std::string::npos);
    const std::string json = slurp(d / "o/run.json");
    CHECK(json.find(
              "\"overrides\": [\"toy.scale=2.0\", \"sweep.n=[4]\", \"toy.label=\\\"a b\\\"\"]") !=
          std::string::npos);
    CHECK(json.find("\"scale\": 2") != std::string::npos);
    CHECK(json.find("\"n\": [4]") != std::string::npos);
    const Result same = phaselab({"run", f, "--out", d / "o", "--resume", "--quiet",
                                  "toy.scale=2.0", "sweep.n=[4]", "toy.label=\"a b\""},
                                 d);
    CHECK(same.rc == 0);
    const Result other = phaselab({"run", f, "--out", d / "o", "--resume", "--quiet"}, d);
    CHECK(other.rc == 2);
    CHECK(other.err.find("params.scale: run has 2") != std::string::npos);
  }
}

TEST_CASE("bad configs: exit status and message, nothing run") {
  TempDir d;
  const std::string f = d / "bad.toml";
  SUBCASE("bad TOML syntax") {
    expect_bad(d, "plugin = \"toy\"\n[sweep]\nn = [1, 2\n", 2, f + ":3:");
  }
  SUBCASE("missing plugin key") {
    expect_bad(d, "[toy]\nn = 3\n", 2, f + ":1:1: error: missing key plugin");
  }
  SUBCASE("wrong type (string for an integer)") {
    expect_bad(d, "plugin = \"toy\"\n[toy]\nn = \"16\"\n", 2,
               f + ":3:5: error: toy.n must be an integer in [1, 100000], got \"16\"");
  }
  SUBCASE("wrong type (float for an integer)") {
    expect_bad(d, "plugin = \"toy\"\n[toy]\nn = 4.0\n", 2,
               f + ":3:5: error: toy.n must be an integer in [1, 100000], got 4.0");
  }
  SUBCASE("out of range") {
    expect_bad(d, "plugin = \"toy\"\n[toy]\nscale = 0.0\n", 2,
               f + ":3:9: error: toy.scale must be a number > 0, got 0.0");
  }
  SUBCASE("out of range inside a sweep list") {
    expect_bad(d, "plugin = \"toy\"\n[sweep]\nn = [4, 0]\n", 2,
               f + ":3:9: error: toy.n must be an integer in [1, 100000], got 0 (in sweep.n)");
  }
  SUBCASE("unknown key with did-you-mean") {
    expect_bad(d, "plugin = \"toy\"\n[toy]\nscal = 2.0\n", 2,
               f + ":3:1: error: unknown key toy.scal (did you mean toy.scale?)");
  }
  SUBCASE("unknown sweep key with did-you-mean") {
    expect_bad(d, "plugin = \"toy\"\n[sweep]\nmdoe = [\"sum\"]\n", 2,
               f + ":3:1: error: unknown key sweep.mdoe (did you mean sweep.mode?)");
  }
  SUBCASE("unknown table with did-you-mean") {
    expect_bad(d, "plugin = \"toy\"\n[sweeep]\nn = [1]\n", 2,
               "error: unknown key sweeep (did you mean sweep?)");
  }
  SUBCASE("enum value not a choice") {
    expect_bad(d, "plugin = \"toy\"\n[toy]\nmode = \"summ\"\n", 2,
               f + ":3:8: error: toy.mode must be one of \"sum\", \"mean\", \"max\", got \"summ\" "
                   "(did you mean \"sum\"?)");
  }
  SUBCASE("unknown plugin") {
    expect_bad(d, "plugin = \"tox\"\n", 3,
               f + ":1:10: error: plugin \"tox\" not found (did you mean \"toy\"?)");
  }
  SUBCASE("empty sweep list") {
    expect_bad(d, "plugin = \"toy\"\n[sweep]\nn = []\n", 2,
               f + ":3:5: error: sweep.n must be a non-empty list of values, each an integer in "
                   "[1, 100000], got an empty list");
  }
  SUBCASE("duplicate sweep key (TOML)") {
    expect_bad(d, "plugin = \"toy\"\n[sweep]\nn = [1]\nn = [2]\n", 2, f + ":4:");
    CHECK(check(d, "plugin = \"toy\"\n[sweep]\nn = [1]\nn = [2]\n").err.find("cannot redefine") !=
          std::string::npos);
  }
  SUBCASE("key both swept and set") {
    expect_bad(d, "plugin = \"toy\"\n[sweep]\nn = [1, 2]\n[toy]\nn = 3\n", 2,
               f + ":3:1: error: duplicate key n: it is swept in [sweep] and also set in [toy]");
  }
  SUBCASE("duplicate value in a sweep list") {
    expect_bad(d, "plugin = \"toy\"\n[sweep]\nn = [4, 8, 4]\n", 2,
               f + ":3:12: error: sweep.n lists 4 twice");
  }
  SUBCASE("seeds: zero count") {
    expect_bad(
        d, "plugin = \"toy\"\n[run]\nseeds = 0\n", 2,
        f + ":3:9: error: run.seeds must be a seed count >= 1 or a non-empty list of seeds, got 0");
  }
  SUBCASE("plugin's own check of a point (validate hook)") {
    expect_bad(d, "plugin = \"toy\"\n[sweep]\nmode = [\"sum\", \"max\"]\n[toy]\nshift = true\n", 2,
               f + ": error: toy: toy.shift = true cannot be combined with toy.mode = \"max\" (at "
                   "mode=max)");
  }
  SUBCASE("plugin with a wrong ABI version") {
    expect_bad(
        d, "plugin = \"badabi\"\n", 3,
        "was built for plugin ABI version 1, this phaselab speaks version 2; rebuild the plugin "
        "against this phaselab's SDK");
  }
  SUBCASE("library without the entry symbol") {
    expect_bad(d, "plugin = \"noentry\"\n", 3,
               "is not a phaselab plugin: it does not export phaselab_plugin_entry");
  }
  SUBCASE("kernel target of another architecture in the config") {
#if defined(__x86_64__)
    const std::string other = "neon";
#else
    const std::string other = "avx2";
#endif
    expect_bad(d, "plugin = \"toy\"\n[run]\ntarget = \"" + other + "\"\n", 2,
               f + ":3:10: error: run.target: unknown kernel target \"" + other + "\"");
  }
  SUBCASE("missing config file") {
    const Result r = phaselab({"check", d / "nope.toml"}, d);
    CHECK(r.rc == 2);
    CHECK(r.err.find("error: cannot read config file \"" + d / "nope.toml" +
                     "\": No such file or directory") != std::string::npos);
    CHECK(phaselab({"run", d / "nope.toml"}, d).rc == 2);
  }
}

TEST_CASE("run refuses a forced kernel target the CPU lacks and an unusable output folder") {
  TempDir d;
  spit(d / "good.toml", kGood);
#if defined(__x86_64__)
  const std::string other = "sve";
#else
  const std::string other = "avx512";
#endif
  Result r = phaselab({"run", d / "good.toml", "--target", other, "--out", d / "o1"}, d);
  CHECK(r.rc == 2);
  CHECK(r.err.find("kernel target \"" + other + "\"") != std::string::npos);
  CHECK_FALSE(exists(d / "o1"));
  // A target of this architecture that this CPU lacks (e.g. avx512 on an AVX2-only machine).
  const std::string kj = phaselab({"kernels", "--json"}, d).out;
  const size_t unsupported = kj.find("\"supported\": false");
  if (unsupported != std::string::npos) {
    const size_t isa = kj.rfind("\"isa\": \"", unsupported) + 8;
    const std::string name = kj.substr(isa, kj.find('"', isa) - isa);
    r = phaselab({"run", d / "good.toml", "--target", name, "--out", d / "o3"}, d);
    CHECK(r.rc == 2);
    CHECK(r.err.find("kernel target \"" + name + "\" is not supported by this CPU") !=
          std::string::npos);
    CHECK_FALSE(exists(d / "o3"));
  } else {
    MESSAGE("this CPU supports every compiled target; only other-architecture targets tested");
  }
  r = phaselab({"run", d / "good.toml", "--target", "bogus"}, d);
  CHECK(r.rc == 2);
  CHECK(r.err.find("unknown kernel target \"bogus\" (this build knows: best, ") !=
        std::string::npos);
  // A folder below a regular file cannot be created (root ignores permission bits).
  spit(d / "file", "x");
  r = phaselab({"run", d / "good.toml", "--out", d / "file/sub"}, d);
  CHECK(r.rc == 2);
  CHECK(r.err.find("cannot use output folder \"" + d / "file/sub" + "\"") != std::string::npos);
  // An existing run is not overwritten.
  CHECK(phaselab({"run", d / "good.toml", "--out", d / "o2", "--quiet"}, d).rc == 0);
  r = phaselab({"run", d / "good.toml", "--out", d / "o2"}, d);
  CHECK(r.rc == 2);
  CHECK(r.err.find("already holds a run") != std::string::npos);
}

TEST_CASE("run writes results in point order, with values matching the double oracle") {
  TempDir d;
  spit(d / "good.toml", kGood);
  const Result r = phaselab({"run", d / "good.toml", "--out", d / "out", "--threads", "2"}, d);
  CHECK(r.rc == 0);
  const std::string csv = slurp(d / "out/results.csv");
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);
  CHECK(line == "n,mode,seed,value,ref,label,exp_variant");
  const char* order[] = {"4,sum,0,",  "4,sum,1,",  "4,mean,0,",  "4,mean,1,",
                         "16,sum,0,", "16,sum,1,", "16,mean,0,", "16,mean,1,",
                         "64,sum,0,", "64,sum,1,", "64,mean,0,", "64,mean,1,"};
  for (const char* prefix : order) {
    REQUIRE(std::getline(in, line));
    CHECK(line.rfind(prefix, 0) == 0);
    // value (float kernels) against ref (std::exp in double): a few float ulps per term.
    double value = 0, ref = 0;
    char label[16], variant[64];
    int n = 0, seed = 0;
    char mode[8];
    REQUIRE(std::sscanf(line.c_str(), "%d,%7[a-z],%d,%lf,%lf,%15[^,],%63s", &n, mode, &seed, &value,
                        &ref, label, variant) == 7);
    CHECK(std::fabs(value - ref) <= 1e-6 + 1e-5 * std::fabs(ref));
    CHECK(std::string(label) == "x");
  }
  CHECK_FALSE(std::getline(in, line));
  CHECK(count_lines(slurp(d / "out/history.csv")) == 1 + 12 * 3);
  const std::string json = slurp(d / "out/run.json");
  for (const char* key : {"\"status\": \"ok\"", "\"exit_status\": 0", "\"git_commit\"", "\"cpu\"",
                          "\"kernel_target\"", "\"exp\": \"exp.", "\"threads\": 2",
                          "\"start_time\"", "\"end_time\"", "\"seconds\"", "\"n\": [4, 16, 64]"})
    CHECK_MESSAGE(json.find(key) != std::string::npos, key);
}

TEST_CASE("point streams depend on the values, not on keys left at their defaults") {
  // The toy's inputs come from cx.point_stream(). toy_v2 is the same plugin with one more key
  // (a later version): left at its default it reproduces the toy's values; set to another value
  // it changes them, as another value of an existing key does.
  TempDir d;
  std::string v2 = kGood;
  v2.replace(v2.find("\"toy\""), 5, "\"toy_v2\"");
  v2.replace(v2.find("[toy]"), 5, "[toy_v2]");
  spit(d / "a.toml", kGood);
  spit(d / "b.toml", v2);
  spit(d / "c.toml", v2 + "extra = 1.5\n");
  spit(d / "e.toml", std::string(kGood) + "steps = 4\n");
  for (const char* n : {"a", "b", "c", "e"}) {
    const Result r =
        phaselab({"run", d / (std::string(n) + ".toml"), "--out", d / n, "--quiet"}, d);
    CAPTURE(r.err);
    REQUIRE(r.rc == 0);
  }
  auto values = [&](const char* n) {  // the n,mode,seed,value columns of results.csv
    std::istringstream in(slurp(d / (std::string(n) + "/results.csv")));
    std::string line, out;
    while (std::getline(in, line)) {
      size_t cut = 0;
      for (int k = 0; k < 4; ++k) cut = line.find(',', cut) + 1;
      out += line.substr(0, cut) + "\n";
    }
    return out;
  };
  CHECK(values("a").size() > 100);
  CHECK(values("a") == values("b"));
  CHECK(values("a") != values("c"));
  CHECK(values("a") != values("e"));
}

TEST_CASE("--target scalar hands the plugin the scalar kernels") {
  TempDir d;
  spit(d / "good.toml", kGood);
  CHECK(phaselab({"run", d / "good.toml", "--out", d / "s", "--target", "scalar"}, d).rc == 0);
  const std::string csv = slurp(d / "s/results.csv");
  CHECK(csv.find(",x,exp.scalar\n") != std::string::npos);
  CHECK(csv.find("hwy") == std::string::npos);
  const std::string json = slurp(d / "s/run.json");
  CHECK(json.find("\"kernel_target\": \"scalar\"") != std::string::npos);
  CHECK(json.find("\"exp\": \"exp.scalar\"") != std::string::npos);
}

TEST_CASE("--quiet prints no progress; plain log lines otherwise") {
  TempDir d;
  spit(d / "good.toml", kGood);
  const Result q = phaselab({"run", d / "good.toml", "--out", d / "q", "--quiet"}, d);
  CHECK(q.rc == 0);
  CHECK(q.out.empty());
  CHECK(q.err.find("points ok") == std::string::npos);
  CHECK(q.err.find("[ 1/12]") == std::string::npos);
  const Result v = phaselab({"run", d / "good.toml", "--out", d / "v"}, d);
  CHECK(v.rc == 0);
  CHECK(v.err.find("[ 1/12] ") != std::string::npos);
  CHECK(v.err.find("[12/12] ") != std::string::npos);
  CHECK(v.err.find("12 of 12 points ok") != std::string::npos);
  CHECK(v.out.find("results: " + d / "v/results.csv") != std::string::npos);
}

TEST_CASE("--threads 1 and --threads 2 give identical files") {
  TempDir d;
  spit(d / "s.toml",
       "plugin = \"toy\"\n[run]\nseeds = [3, 1, 2]\n[sweep]\nn = [1, 7, 33, 100]\nmode = [\"sum\", "
       "\"max\"]\n");
  CHECK(phaselab({"run", d / "s.toml", "--out", d / "t1", "--threads", "1"}, d).rc == 0);
  CHECK(phaselab({"run", d / "s.toml", "--out", d / "t2", "--threads", "2"}, d).rc == 0);
  const std::string a = slurp(d / "t1/results.csv"), b = slurp(d / "t2/results.csv");
  CHECK(count_lines(a) == 1 + 4 * 2 * 3);
  CHECK(a == b);
  CHECK(slurp(d / "t1/history.csv") == slurp(d / "t2/history.csv"));
}

TEST_CASE("a NaN point is recorded as failed, the others run, exit 4") {
  TempDir d;
  spit(d / "nan.toml",
       "plugin = \"toy\"\n[sweep]\nn = [4, 16, 64]\n[toy]\nnan_at = 16\n[run]\nseeds = 2\n");
  const Result r = phaselab({"run", d / "nan.toml", "--out", d / "out"}, d);
  CHECK(r.rc == 4);
  CHECK(r.err.find("n=16 seed=0: FAILED: non-finite value nan in column value of table results") !=
        std::string::npos);
  const std::string res = slurp(d / "out/results.csv");
  CHECK(count_lines(res) == 1 + 4);
  CHECK(res.find("\n16,") == std::string::npos);
  CHECK(slurp(d / "out/failures.csv") ==
        "n,seed,error\n16,0,non-finite value nan in column value of table results\n"
        "16,1,non-finite value nan in column value of table results\n");
  const std::string json = slurp(d / "out/run.json");
  CHECK(json.find("\"status\": \"failed\"") != std::string::npos);
  CHECK(json.find("\"exit_status\": 4") != std::string::npos);
  CHECK(json.find("\"failed\": 2") != std::string::npos);
  // --resume runs the failed points again (they fail again, deterministically).
  const Result again = phaselab({"run", d / "nan.toml", "--out", d / "out", "--resume"}, d);
  CHECK(again.rc == 4);
  CHECK(again.err.find("4 done before, 2 to run") != std::string::npos);
  CHECK(count_lines(slurp(d / "out/failures.csv")) == 3);
  CHECK(slurp(d / "out/results.csv") == res);
  // A point that fails with its own reason.
  spit(d / "fail.toml", "plugin = \"toy\"\n[sweep]\nn = [4, 16]\n[toy]\nfail_at = 4\n");
  const Result f = phaselab({"run", d / "fail.toml", "--out", d / "out2"}, d);
  CHECK(f.rc == 4);
  CHECK(slurp(d / "out2/failures.csv") == "n,seed,error\n4,0,requested failure at n = 4\n");
  CHECK(count_lines(slurp(d / "out2/results.csv")) == 2);
}

TEST_CASE("Ctrl-C keeps finished rows; --resume completes them like an uninterrupted run") {
  TempDir d;
  spit(d / "slow.toml",
       "plugin = \"toy\"\n[run]\nseeds = 2\n[sweep]\nn = [2, 3, 5, 8]\n[toy]\nsleep_ms = 300\n");
  const pid_t pid =
      spawn({"run", d / "slow.toml", "--out", d / "int", "--threads", "2"}, d, "int", false);
  // Wait until some (not all) points are in results.csv, then interrupt.
  const auto t0 = std::chrono::steady_clock::now();
  while (count_lines(slurp(d / "int/results.csv")) < 3 &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ::kill(pid, SIGINT);
  CHECK(wait_rc(pid) == 130);
  const size_t kept = count_lines(slurp(d / "int/results.csv")) - 1;
  CHECK(kept >= 2);
  CHECK(kept < 8);
  const std::string json = slurp(d / "int/run.json");
  CHECK(json.find("\"status\": \"interrupted\"") != std::string::npos);
  // the whole command: the config's absolute path, --out, --resume
  CHECK(slurp(d / "int.err")
            .find("continue with: phaselab run " + d / "slow.toml" + " --out " +
                  d / "int --resume") != std::string::npos);

  const Result r =
      phaselab({"run", d / "slow.toml", "--out", d / "int", "--resume", "--threads", "2"}, d);
  CHECK(r.rc == 0);
  CHECK(r.err.find(std::to_string(kept) + " done before") != std::string::npos);
  CHECK(slurp(d / "int/run.json").find("\"done_before\": " + std::to_string(kept)) !=
        std::string::npos);
  CHECK(phaselab({"run", d / "slow.toml", "--out", d / "full", "--threads", "2"}, d).rc == 0);
  CHECK(slurp(d / "int/results.csv") == slurp(d / "full/results.csv"));
  CHECK(slurp(d / "int/history.csv") == slurp(d / "full/history.csv"));
  // Resuming a complete run runs nothing and changes nothing.
  const Result again = phaselab({"run", d / "slow.toml", "--out", d / "full", "--resume"}, d);
  CHECK(again.rc == 0);
  CHECK(again.err.find("8 done before, 0 to run") != std::string::npos);
}

// SIGHUP (the terminal closed) and SIGPIPE (the reader of `phaselab run ... | head` gone) stop a
// run like Ctrl-C: exit 130, finished rows kept, run.json "interrupted", the lock released, and
// --resume completes it. Before, either signal killed phaselab with run.json "running".
// run.json records the plugin file a run loaded by its absolute path (PHASELAB_PLUGIN_PATH may be
// relative) and its SHA-256, so that a result can be traced to the exact binary.
TEST_CASE("run.json records the plugin's absolute path and SHA-256") {
  TempDir d;
  CHECK(pl::driver::sha256_hex("") ==
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(pl::driver::sha256_hex("abc") ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(pl::driver::sha256_hex(std::string(1000000, 'a')) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  spit(d / "t.toml", "plugin = \"toy\"\n[sweep]\nn = [2]\n");
  // the test plugins' folder given relative to the working folder
  const std::string plugins = env_or("PHASELAB_TEST_PLUGINS", "");
  REQUIRE(!plugins.empty());
  SpawnOptions o;
  o.cwd = plugins;
  o.plugin_path = ".";
  const std::string tag = "abs";
  const Result r =
      finish(pl::driver_test::spawn(phaselab_exe(),
                                    {"run", d / "t.toml", "--out", d / "o", "--quiet"}, d, tag, o),
             d, tag);
  CAPTURE(r.err);
  REQUIRE(r.rc == 0);
  const std::string so = plugins + "/toy/phaselab_toy.so";
  const std::string rec = slurp(d / "o/run.json");
  CHECK(rec.find("\"path\": \"" + so + "\"") != std::string::npos);
  CHECK(rec.find("\"sha256\": \"" + pl::driver::sha256_hex(slurp(so)) + "\"") != std::string::npos);
}

TEST_CASE("SIGHUP and SIGPIPE stop a run like Ctrl-C: run.json interrupted, lock released") {
  for (int sig : {SIGHUP, SIGPIPE}) {
    CAPTURE(sig);
    TempDir d;
    spit(d / "slow.toml",
         "plugin = \"toy\"\n[run]\nseeds = 2\n[sweep]\nn = [2, 3, 5, 8]\n[toy]\nsleep_ms = 300\n");
    const pid_t pid =
        spawn({"run", d / "slow.toml", "--out", d / "int", "--threads", "2"}, d, "int", false);
    const auto t0 = std::chrono::steady_clock::now();
    while (count_lines(slurp(d / "int/results.csv")) < 3 &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30))
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ::kill(pid, sig);
    CHECK(wait_rc(pid) == 130);
    const size_t kept = count_lines(slurp(d / "int/results.csv")) - 1;
    CHECK(kept >= 2);
    CHECK(kept < 8);
    CHECK(slurp(d / "int/run.json").find("\"status\": \"interrupted\"") != std::string::npos);
    CHECK_FALSE(exists(d / "int/run.lock"));
    CHECK(slurp(d / "int.err")
              .find("continue with: phaselab run " + d / "slow.toml" + " --out " +
                    d / "int --resume") != std::string::npos);
    const Result r =
        phaselab({"run", d / "slow.toml", "--out", d / "int", "--resume", "--threads", "2"}, d);
    CHECK(r.rc == 0);
    CHECK(r.err.find("replaced a stale") == std::string::npos);
    CHECK(count_lines(slurp(d / "int/results.csv")) == 9);
  }
}

TEST_CASE("resume refuses a folder written by a different config") {
  TempDir d;
  spit(d / "a.toml", "plugin = \"toy\"\n[sweep]\nn = [2, 3]\n");
  spit(d / "b.toml", "plugin = \"toy\"\n[sweep]\nn = [2, 4]\n");
  spit(d / "c.toml", "plugin = \"toy\"\n[sweep]\nmode = [\"sum\"]\n");
  CHECK(phaselab({"run", d / "a.toml", "--out", d / "o", "--quiet"}, d).rc == 0);
  const std::string before = slurp(d / "o/results.csv") + slurp(d / "o/run.json");
  Result r = phaselab({"run", d / "b.toml", "--out", d / "o", "--resume"}, d);
  CHECK(r.rc == 2);
  CHECK(r.err.find("the config resolves to other values than the run's (1 key differs)") !=
        std::string::npos);
  CHECK(r.err.find("sweep.n: run has [2,3], config has [2,4]") != std::string::npos);
  r = phaselab({"run", d / "c.toml", "--out", d / "o", "--resume"}, d);
  CHECK(r.rc == 2);
  CHECK(r.err.find("cannot resume") != std::string::npos);
  CHECK(r.err.find("params.n: run has (absent), config has 8") != std::string::npos);
  CHECK(r.err.find("sweep.mode: run has (absent), config has [\"sum\"]") != std::string::npos);
  CHECK(r.err.find("sweep.n: run has [2,3], config has (absent)") != std::string::npos);
  CHECK(slurp(d / "o/results.csv") + slurp(d / "o/run.json") == before);  // nothing touched
}

TEST_CASE("figures: drawn with gnuplot when present, the run succeeds without it") {
  TempDir d;
  spit(d / "good.toml", kGood);
  const Result no = phaselab({"run", d / "good.toml", "--out", d / "nofig"}, d, false);
  CHECK(no.rc == 0);
  CHECK(no.err.find("no figures drawn: gnuplot not found") != std::string::npos);
  CHECK(exists(d / "nofig/figures/value_vs_n.gp"));
  CHECK(exists(d / "nofig/figures/value_vs_n.dat"));
  CHECK_FALSE(exists(d / "nofig/figures/value_vs_n.png"));
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    MESSAGE("gnuplot not installed: figure drawing not tested");
    return;
  }
  const Result yes = phaselab({"run", d / "good.toml", "--out", d / "fig"}, d, true);
  CHECK(yes.rc == 0);
  for (const char* png : {"value_vs_n.png", "value_hist.png", "history.png"}) {
    struct stat st;
    CHECK_MESSAGE(::stat((d / "fig/figures/" + png).c_str(), &st) == 0, png);
    CHECK(st.st_size > 1000);
    // PNG signature.
    CHECK(slurp(d / "fig/figures/" + png).compare(0, 4, "\x89PNG") == 0);
  }
  // The data file holds the mean over the two seeds per (mode, n).
  const std::string dat = slurp(d / "fig/figures/value_vs_n.dat");
  CHECK(dat.find("# mode=sum value") != std::string::npos);
  CHECK(slurp(d / "fig/run.json").find("\"png\": ") != std::string::npos);
}

namespace {

// A whole PDF (%PDF- first, %%EOF last) or SVG (ends with </svg>), as gnuplot finishes them.
std::string trimmed(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}
bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

TEST_CASE("figure_formats: a PDF and an SVG beside every PNG, the PNG unchanged, all recorded") {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    MESSAGE("gnuplot not installed: figure formats not tested");
    return;
  }
  TempDir d;
  spit(d / "png.toml", kGood);
  std::string all = kGood;
  all.replace(all.find("seeds = 2\n"), 10,
              "seeds = 2\nfigure_formats = [\"png\", \"pdf\", \"svg\"]\n");
  spit(d / "all.toml", all);
  const Result png = phaselab({"run", d / "png.toml", "--out", d / "png", "--quiet"}, d, true);
  REQUIRE(png.rc == 0);
  const Result r = phaselab({"run", d / "all.toml", "--out", d / "all", "--quiet"}, d, true);
  CAPTURE(r.err);
  REQUIRE(r.rc == 0);
  CHECK(r.err.find("PNG only") == std::string::npos);
  const std::string rec = slurp(d / "all/run.json");
  CHECK(rec.find("\"figure_formats\": [\"png\", \"pdf\", \"svg\"]") != std::string::npos);
  CHECK(slurp(d / "png/run.json").find("\"figure_formats\": [\"png\"]") != std::string::npos);
  for (const std::string name : {"value_vs_n", "value_hist", "history"}) {
    CAPTURE(name);
    const std::string base = d / ("all/figures/" + name);
    // The PNG is the PNG-only run's, byte for byte; its script is unchanged.
    const std::string p = slurp(base + ".png");
    CHECK(p.size() > 1000);
    CHECK(p == slurp(d / ("png/figures/" + name + ".png")));
    CHECK(slurp(base + ".gp") == slurp(d / ("png/figures/" + name + ".gp")));
    CHECK_FALSE(exists(d / ("png/figures/" + name + ".pdf")));
    CHECK_FALSE(exists(d / ("png/figures/" + name + ".svg")));
    const std::string pdf = slurp(base + ".pdf"), svg = slurp(base + ".svg");
    CHECK(pdf.size() > 1000);
    CHECK(pdf.rfind("%PDF-", 0) == 0);
    CHECK(ends_with(trimmed(pdf), "%%EOF"));
    CHECK(svg.find("<svg") != std::string::npos);
    CHECK(ends_with(trimmed(svg), "</svg>"));
    // Each drawn from its own script over the same data: the PNG's but for terminal and output.
    const std::string gp = slurp(base + ".gp"), pdf_gp = slurp(base + ".pdf.gp");
    CHECK(pdf_gp.find("set terminal pdfcairo") != std::string::npos);
    CHECK(pdf_gp.find("set output '" + name + ".pdf'") != std::string::npos);
    CHECK(slurp(base + ".svg.gp").find("set terminal svg") != std::string::npos);
    const auto plot_part = [](const std::string& g) {
      const size_t at = g.find("set title");
      return at == std::string::npos ? g : g.substr(at);
    };
    CHECK(plot_part(pdf_gp) == plot_part(gp));
    // run.json lists every file of the figure.
    CHECK(rec.find("\"png\": \"" + base + ".png\", \"pdf\": \"" + base + ".pdf\", \"svg\": \"" +
                   base + ".svg\"") != std::string::npos);
  }
  // Through an override too, in the order given (the PNG is drawn first all the same).
  const Result o = phaselab({"run", d / "png.toml", "--out", d / "svg", "--quiet",
                             "run.figure_formats=[\"svg\", \"png\"]"},
                            d, true);
  CAPTURE(o.err);
  REQUIRE(o.rc == 0);
  CHECK(ends_with(trimmed(slurp(d / "svg/figures/history.svg")), "</svg>"));
  CHECK(slurp(d / "svg/figures/history.png") == slurp(d / "png/figures/history.png"));
  CHECK_FALSE(exists(d / "svg/figures/history.pdf"));
  CHECK(slurp(d / "svg/run.json").find("\"figure_formats\": [\"svg\", \"png\"]") !=
        std::string::npos);
  // Without gnuplot nothing is drawn and the run succeeds, as for PNGs alone.
  const Result none = phaselab({"run", d / "all.toml", "--out", d / "none", "--quiet"}, d, false);
  CHECK(none.rc == 0);
  CHECK_FALSE(exists(d / "none/figures/history.pdf"));
}

TEST_CASE("figure_formats: an unknown, repeated or PNG-less list is refused at file:line:col") {
  TempDir d;
  const std::string f = d / "bad.toml";
  const std::string head = "plugin = \"toy\"\n[run]\nfigure_formats = ";
  expect_bad(d, head + "[\"png\", \"jpg\"]\n", 2,
             f + ":3:26: error: run.figure_formats: unknown format \"jpg\" (png, pdf or svg)");
  expect_bad(d, head + "[\"png\", \"PDF\"]\n", 2,
             f + ":3:26: error: run.figure_formats: unknown format \"PDF\" (png, pdf or svg) "
                 "(did you mean \"pdf\"?)");
  expect_bad(d, head + "[\"png\", 1]\n", 2,
             f + ":3:26: error: run.figure_formats: unknown format 1 (png, pdf or svg)");
  expect_bad(d, head + "[\"png\", \"svg\", \"svg\"]\n", 2,
             f + ":3:33: error: run.figure_formats lists \"svg\" twice");
  expect_bad(d, head + "[\"pdf\"]\n", 2,
             f + ":3:18: error: run.figure_formats must include \"png\"");
  expect_bad(d, head + "\"pdf\"\n", 2,
             f + ":3:18: error: run.figure_formats must be a non-empty list of \"png\", \"pdf\", "
                 "\"svg\"");
  expect_bad(d, head + "[]\n", 2, f + ":3:18: error: run.figure_formats must be a non-empty list");
  expect_bad(d, "plugin = \"toy\"\n[run]\nfigure_format = [\"png\"]\n", 2,
             f + ":3:1: error: unknown key run.figure_format (did you mean run.figure_formats?)");
  // An override: named by the override.
  spit(d / "good.toml", kGood);
  const Result r = phaselab({"check", d / "good.toml", "run.figure_formats=[\"png\",\"eps\"]"}, d);
  CHECK(r.rc == 2);
  CHECK(r.err.find("override run.figure_formats=[\"png\",\"eps\"]: error: run.figure_formats: "
                   "unknown format \"eps\"") != std::string::npos);
  CHECK(
      phaselab({"check", d / "good.toml", "run.figure_formats=[\"png\",\"pdf\",\"svg\"]"}, d).rc ==
      0);
}

// ------------------------------------------------------------------ nothing lost, nothing silent

namespace {

// Every line of every CSV in `dir` ends with a newline and has the header's field count (no
// quoted fields in the toy's tables, so commas count fields).
void expect_whole_rows(const std::string& dir) {
  for (const char* name : {"results.csv", "history.csv", "journal.csv"}) {
    const std::string text = slurp(dir + "/" + name);
    CAPTURE(name);
    if (text.empty()) continue;
    CHECK(text.back() == '\n');
    std::istringstream in(text);
    std::string line;
    std::getline(in, line);
    const auto commas = std::count(line.begin(), line.end(), ',');
    while (std::getline(in, line)) CHECK(std::count(line.begin(), line.end(), ',') == commas);
  }
}

const char* kSteps = R"(plugin = "toy"
[run]
seeds = 2
[sweep]
n = [4, 16, 64]
mode = ["sum", "mean"]
[toy]
steps = 40
)";

}  // namespace

TEST_CASE("disk full (injected at the Nth byte): exit 5, path and errno, whole rows, resume") {
  // PHASELAB_FAULT_WRITE_BYTES makes the driver's writes fail with ENOSPC after N bytes: at
  // every budget the run either completes or stops with exit 5 naming the file, run.json says
  // write_error, no row is torn, and --resume (space back) gives the uninterrupted files.
  TempDir d;
  spit(d / "s.toml", kSteps);
  REQUIRE(phaselab({"run", d / "s.toml", "--out", d / "full", "--quiet"}, d).rc == 0);
  const std::string full = slurp(d / "full/results.csv"), hist = slurp(d / "full/history.csv");
  int stopped = 0;
  for (long budget = 20000; budget <= 64000; budget += 4001) {
    CAPTURE(budget);
    const std::string out = d / ("df" + std::to_string(budget));
    ::setenv("PHASELAB_FAULT_WRITE_BYTES", std::to_string(budget).c_str(), 1);
    const Result r = phaselab({"run", d / "s.toml", "--out", out, "--quiet"}, d);
    ::unsetenv("PHASELAB_FAULT_WRITE_BYTES");
    CAPTURE(r.err);
    if (r.rc == 0) continue;
    ++stopped;
    CHECK(r.rc == 5);
    CHECK(r.err.find("No space left on device (ENOSPC)") != std::string::npos);
    if (!exists(out + "/results.csv")) {  // too small even for run.json: nothing started
      CHECK(r.err.find("nothing was run") != std::string::npos);
      continue;
    }
    CHECK(r.err.find("error: cannot write " + out + "/") != std::string::npos);
    CHECK(r.err.find("continue with: phaselab run " + d / "s.toml" + " --out " + out +
                     " --resume") != std::string::npos);
    const std::string json = slurp(out + "/run.json");
    CHECK(json.find("\"status\": \"write_error\"") != std::string::npos);
    CHECK(json.find("\"exit_status\": 5") != std::string::npos);
    CHECK(json.find("\"error\": \"cannot write " + out + "/") != std::string::npos);
    CHECK_FALSE(exists(out + "/run.reserve"));
    CHECK_FALSE(exists(out + "/run.lock"));
    CHECK_FALSE(exists(out + "/failures.csv"));
    expect_whole_rows(out);
    const Result again = phaselab({"run", d / "s.toml", "--out", out, "--resume", "--quiet"}, d);
    CAPTURE(again.err);
    CHECK(again.rc == 0);
    CHECK(slurp(out + "/results.csv") == full);
    CHECK(slurp(out + "/history.csv") == hist);
  }
  CHECK(stopped >= 5);  // the budgets above cut the run at different places
}

TEST_CASE("a tiny filesystem: disk full, space freed, --resume gives the same results.csv") {
  if (::geteuid() != 0) {
    MESSAGE("not root: cannot mount a tmpfs; the injected disk-full test covers the logic");
    return;
  }
  TempDir d;
  const std::string mnt = d / "mnt";
  ::mkdir(mnt.c_str(), 0755);
  const std::string mount = "mount -t tmpfs -o size=512k tmpfs '" + mnt + "' 2>/dev/null";
  if (std::system(mount.c_str()) != 0) {
    MESSAGE(
        "mounting a tmpfs is not possible here (no privilege in this container): skipped; "
        "the injected disk-full test covers the logic");
    return;
  }
  struct Umount {
    std::string m;
    ~Umount() { (void)!std::system(("umount '" + m + "'").c_str()); }
  } umount{mnt};
  std::string toml = kSteps;
  toml.replace(toml.find("steps = 40"), 10, "steps = 400");
  spit(d / "s.toml", toml);
  REQUIRE(phaselab({"run", d / "s.toml", "--out", d / "full", "--quiet"}, d).rc == 0);
  // Leave ~90 KB free: the history rows (~170 KB) do not fit; all of it does once freed.
  REQUIRE(std::system(("head -c 430080 /dev/zero > '" + mnt + "/filler'").c_str()) == 0);
  const Result r = phaselab({"run", d / "s.toml", "--out", mnt + "/run", "--quiet"}, d);
  CAPTURE(r.err);
  CHECK(r.rc == 5);
  CHECK(r.err.find("No space left on device (ENOSPC)") != std::string::npos);
  CHECK(slurp(mnt + "/run/run.json").find("\"status\": \"write_error\"") != std::string::npos);
  expect_whole_rows(mnt + "/run");
  ::unlink((mnt + "/filler").c_str());  // space freed
  const Result again = phaselab({"run", d / "s.toml", "--out", mnt + "/run", "--resume"}, d);
  CAPTURE(again.err);
  CHECK(again.rc == 0);
  CHECK(slurp(mnt + "/run/results.csv") == slurp(d / "full/results.csv"));
  CHECK(slurp(mnt + "/run/history.csv") == slurp(d / "full/history.csv"));
}

TEST_CASE("torn rows after a kill: --resume drops them with a message and reruns the point") {
  TempDir d;
  spit(d / "s.toml", kSteps);
  REQUIRE(phaselab({"run", d / "s.toml", "--out", d / "full", "--quiet"}, d).rc == 0);
  // A run stopped by the disk after some points, then the state a kill mid-write leaves: a torn
  // last line in every table, and whole rows of a point that never reached the journal.
  ::setenv("PHASELAB_FAULT_WRITE_BYTES", "31000", 1);
  const Result r = phaselab({"run", d / "s.toml", "--out", d / "t", "--quiet"}, d);
  ::unsetenv("PHASELAB_FAULT_WRITE_BYTES");
  REQUIRE(r.rc == 5);
  auto append = [&](const std::string& f, const std::string& text) {
    std::ofstream o(d / ("t/" + f), std::ios::app | std::ios::binary);
    o << text;
  };
  std::string undone;  // a point not in the journal: its whole rows are dropped too
  const std::string journal = slurp(d / "t/journal.csv");
  for (const char* k : {"4,sum,0", "16,mean,1", "64,sum,0", "64,mean,1"})
    if (journal.find(std::string("\n") + k + "\n") == std::string::npos) undone = k;
  REQUIRE_FALSE(undone.empty());
  append("history.csv", undone + ",1,0.99\n" + undone + ",2,0.9");  // whole row + torn row
  append("results.csv", "64,mean,1,1.03086,1.0308662,x,exp.sc");    // torn, no newline
  append("journal.csv", "64,me");                                   // torn
  const Result again = phaselab({"run", d / "s.toml", "--out", d / "t", "--resume"}, d);
  CAPTURE(again.err);
  CHECK(again.rc == 0);
  for (const char* f : {"results.csv", "history.csv", "journal.csv"})
    CHECK(again.err.find("dropped a torn last row of " + d / "t/" + f) != std::string::npos);
  CHECK(again.err.find("its point runs again") != std::string::npos);
  CHECK(slurp(d / "t/results.csv") == slurp(d / "full/results.csv"));
  CHECK(slurp(d / "t/history.csv") == slurp(d / "full/history.csv"));
  // A corrupt row in the middle (not a torn tail) is refused, naming the record: phaselab did
  // not write it.
  std::string res = slurp(d / "t/results.csv");
  res.insert(res.find('\n') + 1, "4,sum\n");
  spit(d / "t/results.csv", res);
  const Result bad = phaselab({"run", d / "s.toml", "--out", d / "t", "--resume"}, d);
  CHECK(bad.rc == 2);
  CHECK(bad.err.find("record 2 has 2 fields, expected 7") != std::string::npos);
}

TEST_CASE("resume with a changed value is refused, naming the keys; files untouched") {
  TempDir d;
  spit(d / "a.toml", kSteps);
  ::setenv("PHASELAB_FAULT_WRITE_BYTES", "31000", 1);
  REQUIRE(phaselab({"run", d / "a.toml", "--out", d / "o", "--quiet"}, d).rc == 5);
  ::unsetenv("PHASELAB_FAULT_WRITE_BYTES");
  const std::string before = slurp(d / "o/results.csv") + slurp(d / "o/run.json");
  std::string b = kSteps;
  b.replace(b.find("steps = 40"), 10, "steps = 41\nscale = 2.0");
  spit(d / "b.toml", b);
  const Result r = phaselab({"run", d / "b.toml", "--out", d / "o", "--resume"}, d);
  CAPTURE(r.err);
  CHECK(r.rc == 2);
  CHECK(r.err.find("(2 keys differ); resuming would mix two runs") != std::string::npos);
  CHECK(r.err.find("params.scale: run has 1, config has 2.0") != std::string::npos);
  CHECK(r.err.find("params.steps: run has 40, config has 41") != std::string::npos);
  CHECK(slurp(d / "o/results.csv") + slurp(d / "o/run.json") == before);
  // Another kernel target changes results too.
  const Result t =
      phaselab({"run", d / "a.toml", "--out", d / "o", "--resume", "--target", "scalar"}, d);
  CHECK(t.rc == 2);
  CHECK(t.err.find("kernel_target: run has") != std::string::npos);
}

TEST_CASE("one writer per run folder: a second run is refused; a stale lock is replaced") {
  TempDir d;
  // The lock holder runs until it is interrupted (a point sleeps 10 minutes, polling
  // cancellation), so that the refusals below do not depend on how fast a process starts (under
  // qemu, starting phaselab can take longer than a short run: the second run then found the
  // folder free and ran).
  spit(d / "hold.toml",
       "plugin = \"toy\"\n[run]\nseeds = 2\n[sweep]\nn = [2, 3]\n[toy]\nsleep_ms = 600000\n");
  spit(d / "slow.toml",
       "plugin = \"toy\"\n[run]\nseeds = 2\n[sweep]\nn = [2, 3]\n[toy]\nsleep_ms = 200\n");
  const pid_t a = spawn({"run", d / "hold.toml", "--out", d / "o", "--quiet"}, d, "a", false);
  const auto t0 = std::chrono::steady_clock::now();
  while (!exists(d / "o/run.json") &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  for (const bool resume : {false, true}) {
    std::vector<std::string> args = {"run", d / "hold.toml", "--out", d / "o", "--quiet"};
    if (resume) args.push_back("--resume");
    const Result b = phaselab(args, d);
    CAPTURE(b.err);
    CHECK(b.rc == 2);
    CHECK(b.err.find(d / "o/run.lock is held by phaselab pid " + std::to_string(a)) !=
          std::string::npos);
  }
  ::kill(a, SIGINT);
  CHECK(wait_rc(a) == 130);
  CHECK_FALSE(exists(d / "o/run.lock"));
  // Two started together: exactly one runs (20 trials would be slow; the lock is an flock, so
  // any overlap refuses one of them). The refused one exits by itself; the other holds the
  // folder until it is interrupted.
  for (int trial = 0; trial < 3; ++trial) {
    const std::string out = d / ("c" + std::to_string(trial));
    const pid_t x = spawn({"run", d / "hold.toml", "--out", out, "--quiet"}, d, "x", false);
    const pid_t y = spawn({"run", d / "hold.toml", "--out", out, "--quiet"}, d, "y", false);
    int st = 0;
    pid_t first = 0;
    const auto t1 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t1 < std::chrono::seconds(120)) {
      if (::waitpid(x, &st, WNOHANG) == x) {
        first = x;
        break;
      }
      if (::waitpid(y, &st, WNOHANG) == y) {
        first = y;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    REQUIRE((first == x || first == y));
    const pid_t holder = first == x ? y : x;
    CHECK((WIFEXITED(st) && WEXITSTATUS(st) == 2));
    CHECK(slurp(d / (first == x ? "x.err" : "y.err")).find("run.lock is held by") !=
          std::string::npos);
    // Interrupted at once, typically before its points have started: it still stops cleanly
    // (Ctrl-C is caught from the start of a run; it used to kill a run that had taken the lock
    // but not yet started its points, leaving the lock behind).
    ::kill(holder, SIGINT);
    CHECK(wait_rc(holder) == 130);
    CHECK_FALSE(exists(out + "/run.lock"));
    CHECK(slurp(out + "/run.json").find("\"status\": \"interrupted\"") != std::string::npos);
  }
  // A lock left by a dead process (kill -9) is stale: the next run replaces it and says so.
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  ::mkdir((d / "s").c_str(), 0755);
  spit(d / "s/run.lock", "pid 999999999 host " + std::string(host) + " start 1\n");
  const Result s = phaselab({"run", d / "slow.toml", "--out", d / "s", "--quiet"}, d);
  CHECK(s.rc == 0);
  CHECK(s.err.find("replaced a stale lock in " + d / "s/run.lock") != std::string::npos);
}

TEST_CASE("--out refuses a non-empty folder that is not a phaselab run") {
  TempDir d;
  spit(d / "good.toml", kGood);
  ::mkdir((d / "mine").c_str(), 0755);
  spit(d / "mine/failures.csv", "my notes\n");
  spit(d / "mine/spectrum.csv", "1,2\n");
  for (const bool resume : {false, true}) {
    std::vector<std::string> args = {"run", d / "good.toml", "--out", d / "mine"};
    if (resume) args.push_back("--resume");
    const Result r = phaselab(args, d);
    CAPTURE(r.err);
    CHECK(r.rc == 2);
    CHECK(r.err.find("\"" + d / "mine" + "\" is not empty and is not a phaselab run folder") !=
          std::string::npos);
    CHECK(r.err.find("it holds: failures.csv, spectrum.csv") != std::string::npos);
  }
  CHECK(slurp(d / "mine/failures.csv") == "my notes\n");
  CHECK(slurp(d / "mine/spectrum.csv") == "1,2\n");
  CHECK_FALSE(exists(d / "mine/results.csv"));
  // An empty folder is fine.
  ::mkdir((d / "empty").c_str(), 0755);
  CHECK(phaselab({"run", d / "good.toml", "--out", d / "empty", "--quiet"}, d).rc == 0);
}

TEST_CASE("up-front limits: exit 2 before any work, short messages") {
  TempDir d;
  const std::string f = d / "bad.toml";
  SUBCASE("a folder as the config") {
    const Result r = phaselab({"check", d.path}, d);
    CHECK(r.rc == 2);
    CHECK(r.err.find("cannot read config file \"" + d.path + "\": it is a folder") !=
          std::string::npos);
  }
  SUBCASE("a FIFO as the config does not block") {
    REQUIRE(::mkfifo((d / "fifo").c_str(), 0644) == 0);
    const Result r = phaselab({"check", d / "fifo"}, d);
    CHECK(r.rc == 2);
    CHECK(r.err.find("not a regular file") != std::string::npos);
  }
  SUBCASE("a device as the config") {
    const Result r = phaselab({"check", "/dev/zero"}, d);
    CHECK(r.rc == 2);
    CHECK(r.err.find("not a regular file") != std::string::npos);
  }
  SUBCASE("a config over the size limit") {
    expect_bad(d, "plugin = \"toy\"\n# " + std::string(1100000, 'x') + "\n", 2,
               "more than the limit of 1048576 for a config");
  }
  SUBCASE("40,000-part dotted table name (overflowed the parser's stack)") {
    std::string k = "a";
    for (int i = 1; i < 40000; ++i) k += ".a";
    expect_bad(d, "plugin = \"toy\"\n[" + k + "]\n", 2,
               f + ":2:33: error: a dotted key with more than 16 parts");
  }
  SUBCASE("50,000-part dotted key = value") {
    std::string k = "a";
    for (int i = 1; i < 50000; ++i) k += ".a";
    expect_bad(d, "plugin = \"toy\"\n" + k + " = 1\n", 2, "a dotted key with more than 16 parts");
  }
  SUBCASE("deeply nested arrays") {
    expect_bad(d,
               "plugin = \"toy\"\nx = " + std::string(30000, '[') + std::string(30000, ']') + "\n",
               2, f + ":2:21: error: brackets nested more than 16 deep");
  }
  SUBCASE("dots inside strings and numbers are not key parts") {
    const Result r = check(d,
                           "plugin = \"toy\"\nname = \"" + std::string(100, '.') +
                               "x\"\n[toy]\nscale = 1.5 # ...............................\n",
                           "ok");
    CAPTURE(r.err);
    CHECK(r.rc == 0);
  }
  SUBCASE("a NUL byte in the file, and one escaped into a name") {
    expect_bad(d, std::string("plugin = \"toy\"\n\0", 16), 2, "holds a NUL byte");
    expect_bad(d, "plugin = \"toy\"\nname = \"a\\u0000b\"\n", 2,
               "name must be a non-empty string of at most 255 bytes without '/' or control");
  }
  SUBCASE("a 500 KB unknown key: no did-you-mean, abbreviated") {
    const std::string k(500000, 'k');
    const Result r = check(d, "plugin = \"toy\"\n[toy]\n" + k + " = 1\n");
    CHECK(r.rc == 2);
    CHECK(r.err.find("unknown key toy.kkkk") != std::string::npos);
    CHECK(r.err.find("(500000 bytes): longer than any key (limit 128 bytes)") != std::string::npos);
    CHECK(r.err.size() < 400);
  }
  SUBCASE("a 500 KB enum value is not echoed whole") {
    const Result r =
        check(d, "plugin = \"toy\"\n[toy]\nmode = \"" + std::string(500000, 's') + "\"\n");
    CHECK(r.rc == 2);
    CHECK(r.err.find("(500000 bytes)") != std::string::npos);
    CHECK(r.err.size() < 400);
  }
  SUBCASE("a string value over 4096 bytes") {
    expect_bad(d, "plugin = \"toy\"\n[toy]\nlabel = \"" + std::string(5000, 'x') + "\"\n", 2,
               "toy.label must be a string of at most 4096 bytes, got 5000 bytes");
  }
  SUBCASE("a 100,000-value sweep list is checked (duplicates found by sorting)") {
    std::string list;
    for (int i = 1; i <= 99999; ++i) list += std::to_string(i) + ", ";
    Result r = check(d, "plugin = \"toy\"\n[sweep]\nn = [" + list + "100000]\n", "big");
    CHECK(r.rc == 0);
    CHECK(r.out.find("100000 points") != std::string::npos);
    r = check(d, "plugin = \"toy\"\n[sweep]\nn = [" + list + "77]\n");
    CHECK(r.rc == 2);
    CHECK(r.err.find("sweep.n lists 77 twice") != std::string::npos);
  }
  SUBCASE("more sweep points than the limit") {
    std::string list;
    for (int i = 1; i < 400; ++i) list += std::to_string(i) + ", ";
    expect_bad(d, "plugin = \"toy\"\n[sweep]\nn = [" + list + "400]\nscale = [" + list + "400]\n",
               2, "the sweep has 160000 points, more than the limit of 100000");
  }
  SUBCASE("a point's memory estimate over the machine's memory: refused unless --force") {
    spit(f,
         "plugin = \"toy\"\n[run]\nthreads = 2\n[sweep]\nn = [4, 8]\n[toy]\nmem_mb = 900000000\n");
    Result r = phaselab({"check", f}, d);
    CHECK(r.rc == 2);
    CHECK(r.err.find("error: this run needs about") != std::string::npos);
    CHECK(r.err.find("per point (at n=8) x 2 points at once") != std::string::npos);
    CHECK(r.err.find("pass --force to try anyway") != std::string::npos);
    r = phaselab({"run", f, "--out", d / "never"}, d);
    CHECK(r.rc == 2);
    CHECK_FALSE(exists(d / "never"));
    // The toy does not really allocate it: with --force the run goes ahead.
    r = phaselab({"run", f, "--out", d / "forced", "--force", "--quiet"}, d);
    CHECK(r.rc == 0);
  }
}

TEST_CASE("a second Ctrl-C still records what finished; --resume completes the run") {
  // Two points on two threads compute for 1 s and 4 s without polling cancellation. After the
  // short one is done, the first SIGINT cannot stop the long one, which is still running (3 s of
  // margin, so a loaded machine cannot finish it first); the second exits at once with run.json
  // saying aborted and the finished point recorded; --resume then gives the uninterrupted files.
  TempDir d;
  spit(d / "deaf.toml", "plugin = \"toy\"\n[run]\nseeds = 1\n[sweep]\ndeaf_ms = [1000, 4000]\n");
  const pid_t pid =
      spawn({"run", d / "deaf.toml", "--out", d / "o", "--threads", "2"}, d, "ab", false);
  const auto t0 = std::chrono::steady_clock::now();
  auto wait_for = [&](const char* what) {
    while (slurp(d / "ab.err").find(what) == std::string::npos &&
           std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60))
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  };
  wait_for("[1/2]");  // the short point is done (and journaled) after 1 s
  ::kill(pid, SIGINT);
  wait_for("phaselab: stopping");
  ::kill(pid, SIGINT);
  CHECK(wait_rc(pid) == 130);
  const std::string err = slurp(d / "ab.err");
  CAPTURE(err);
  CHECK(err.find("phaselab: aborted: ") != std::string::npos);
  CHECK(err.find("points done are kept; continue with: phaselab run " + d / "deaf.toml" +
                 " --out " + d / "o --resume") != std::string::npos);
  const std::string json = slurp(d / "o/run.json");
  CHECK(json.find("\"status\": \"aborted\"") != std::string::npos);
  CHECK(json.find("\"exit_status\": 130") != std::string::npos);
  CHECK(json.find("\"status\": \"ok\"") != std::string::npos);  // the finished point(s)
  CHECK_FALSE(exists(d / "o/run.lock"));
  CHECK_FALSE(exists(d / "o/run.reserve"));
  expect_whole_rows(d / "o");
  const size_t kept = count_lines(slurp(d / "o/journal.csv")) - 1;
  CHECK(kept == 1);
  const Result r =
      phaselab({"run", d / "deaf.toml", "--out", d / "o", "--resume", "--threads", "2"}, d);
  CHECK(r.rc == 0);
  CHECK(r.err.find(std::to_string(kept) + " done before") != std::string::npos);
  REQUIRE(
      phaselab({"run", d / "deaf.toml", "--out", d / "full", "--threads", "2", "--quiet"}, d).rc ==
      0);
  CHECK(slurp(d / "o/results.csv") == slurp(d / "full/results.csv"));
}

// The number after `"key": ` in run.json (-1 when absent).
long json_number(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\": ");
  return at == std::string::npos ? -1 : std::atol(json.c_str() + at + key.size() + 4);
}

TEST_CASE(
    "finished points are written in batches: a slow disk groups them, the tables do not change") {
  // 60 points of microseconds on one thread. With every fdatasync 25 ms slower (a slow disk),
  // the points that finish while a batch is being written go to disk together: far fewer
  // batches than points, one fdatasync per file per batch (results, history, points, journal),
  // and the same tables as a run on a fast disk.
  TempDir d;
  std::string sweep = "n = [";
  for (int n = 1; n <= 60; ++n) sweep += std::to_string(n) + (n < 60 ? ", " : "]\n");
  spit(d / "many.toml", "plugin = \"toy\"\n[run]\nthreads = 1\n[sweep]\n" + sweep);
  REQUIRE(phaselab({"run", d / "many.toml", "--out", d / "fast", "--quiet"}, d).rc == 0);
  {
    const ScopedEnv slow("PHASELAB_FAULT_SYNC_MS", "25");
    REQUIRE(phaselab({"run", d / "many.toml", "--out", d / "slow", "--quiet"}, d).rc == 0);
  }
  for (const char* f : {"results.csv", "history.csv", "points.csv"})
    CHECK(slurp(d / (std::string("fast/") + f)) == slurp(d / (std::string("slow/") + f)));
  CHECK(count_lines(slurp(d / "slow/journal.csv")) == 1 + 60);
  for (const char* run : {"fast", "slow"}) {
    const std::string json = slurp(d / (std::string(run) + "/run.json"));
    const long batches = json_number(json, "batches"), syncs = json_number(json, "fdatasync");
    CAPTURE(run);
    CAPTURE(batches);
    CAPTURE(syncs);
    CHECK(batches >= 1);
    CHECK(batches <= 60);
    CHECK(syncs <= 4 * batches);
    CHECK(syncs >= batches);
    if (std::string(run) == "slow") CHECK(batches <= 20);  // a sync per point would be 60
  }
}

TEST_CASE("a point reported done is on disk: kill -9 while points are being written") {
  // Every point whose progress line says ok must be in journal.csv and results.csv after a
  // SIGKILL: the progress line comes after the batch's fdatasync. Points of 5 ms on 2 threads
  // (1 s in all) and a slow disk (30 ms per sync) keep batches in flight when the kill arrives.
  TempDir d;
  std::string sweep = "n = [";
  for (int n = 1; n <= 400; ++n) sweep += std::to_string(n) + (n < 400 ? ", " : "]\n");
  spit(d / "many.toml",
       "plugin = \"toy\"\n[run]\nthreads = 2\n[toy]\nsleep_ms = 5\n[sweep]\n" + sweep);
  pid_t pid;
  {
    const ScopedEnv slow("PHASELAB_FAULT_SYNC_MS", "30");
    pid = spawn({"run", d / "many.toml", "--out", d / "o"}, d, "k9", false);
  }
  const auto t0 = std::chrono::steady_clock::now();
  while (slurp(d / "k9.err").find(" 30/400]") == std::string::npos &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ::kill(pid, SIGKILL);
  wait_rc(pid);
  const std::string err = slurp(d / "k9.err"), journal = slurp(d / "o/journal.csv"),
                    results = slurp(d / "o/results.csv");
  size_t reported = 0;
  for (size_t at = err.find("] n="); at != std::string::npos; at = err.find("] n=", at + 1)) {
    const std::string n = err.substr(at + 4, err.find(' ', at + 4) - at - 4);
    if (err.compare(err.find(':', at), 5, ": ok ") != 0) continue;
    ++reported;
    CAPTURE(n);
    CHECK(journal.find("\n" + n + ",0\n") != std::string::npos);
    CHECK(results.find("\n" + n + ",0,") != std::string::npos);
  }
  CHECK(reported >= 30);
  CHECK(count_lines(journal) - 1 >= reported);  // written, not yet reported: allowed
  CHECK(count_lines(journal) - 1 < 400);        // the kill came before the end
}

TEST_CASE("a PNG that gnuplot could not finish is not counted as drawn: exit 5") {
  // A stand-in gnuplot that answers the probe and then writes half a PNG, as a full disk would
  // leave it (signature, no IEND chunk).
  TempDir d;
  spit(d / "gnuplot",
       "#!/bin/sh\n"
       "if [ \"$1\" = -e ]; then echo 5.4; exit 0; fi\n"
       "printf '\\211PNG\\r\\n\\032\\nhalf a picture' > \"${1%.gp}.png\"\n");
  ::chmod((d / "gnuplot").c_str(), 0755);
  spit(d / "good.toml", kGood);
  const Result r = [&] {
    const ScopedEnv gnuplot("PHASELAB_GNUPLOT", (d / "gnuplot").c_str());
    return phaselab({"run", d / "good.toml", "--out", d / "o", "--quiet"}, d, true);
  }();
  CAPTURE(r.err);
  CHECK(r.rc == 5);
  CHECK(r.err.find("error: figure value_vs_n: cannot write " + d / "o/figures/value_vs_n.png" +
                   ": the file gnuplot wrote is truncated (22 bytes, no PNG end chunk") !=
        std::string::npos);
  CHECK_FALSE(exists(d / "o/figures/value_vs_n.png"));
  const std::string json = slurp(d / "o/run.json");
  CHECK(json.find("\"status\": \"write_error\"") != std::string::npos);
  CHECK(json.find("\"png\": ") == std::string::npos);        // none counted as drawn
  CHECK(count_lines(slurp(d / "o/results.csv")) == 1 + 12);  // the results are whole
}

TEST_CASE("disk full while the tables are created: run.json says write_error, no reserve left") {
  // Between run.json (+ its reserve) and the first point the driver creates the tables; a disk
  // that fills there (a 512 KB tmpfs with copy_default hit it at samples.csv) must leave the
  // same record as a later stop. Coarse budgets find where the reserve first fits, then 4-byte
  // steps below that cross the few bytes of table headers.
  TempDir d;
  spit(d / "s.toml", kSteps);
  REQUIRE(phaselab({"run", d / "s.toml", "--out", d / "full", "--quiet"}, d).rc == 0);
  const std::string full = slurp(d / "full/results.csv");
  auto attempt = [&](const std::string& out, long budget) {
    ::setenv("PHASELAB_FAULT_WRITE_BYTES", std::to_string(budget).c_str(), 1);
    Result r = phaselab({"run", d / "s.toml", "--out", out, "--quiet"}, d);
    ::unsetenv("PHASELAB_FAULT_WRITE_BYTES");
    return r;
  };
  long fits = 0;  // the first coarse budget where the reserve fits
  for (long budget = 16000; budget <= 40000 && !fits; budget += 500)
    if (attempt(d / ("c" + std::to_string(budget)), budget).err.find("cannot reserve") ==
        std::string::npos)
      fits = budget;
  REQUIRE(fits > 0);
  int in_setup = 0;
  for (long budget = fits - 500; budget <= fits; budget += 4) {
    CAPTURE(budget);
    const std::string out = d / ("w" + std::to_string(budget));
    const Result r = attempt(out, budget);
    CAPTURE(r.err);
    if (r.rc == 0 || !exists(out + "/run.json")) continue;
    CHECK(r.rc == 5);
    if (r.err.find("cannot reserve") != std::string::npos || exists(out + "/journal.csv"))
      continue;  // the reserve did not fit, or the tables were made (the tests above)
    ++in_setup;
    CHECK(r.err.find("error: cannot write " + out + "/") != std::string::npos);
    CHECK(r.err.find("nothing was run; free space and continue with: phaselab run " + d / "s.toml" +
                     " --out " + out + " --resume") != std::string::npos);
    const std::string json = slurp(out + "/run.json");
    CHECK(json.find("\"status\": \"write_error\"") != std::string::npos);
    CHECK(json.find("\"exit_status\": 5") != std::string::npos);
    CHECK_FALSE(exists(out + "/run.reserve"));
    CHECK_FALSE(exists(out + "/run.lock"));
    const Result again = phaselab({"run", d / "s.toml", "--out", out, "--resume", "--quiet"}, d);
    CAPTURE(again.err);
    CHECK(again.rc == 0);
    CHECK(slurp(out + "/results.csv") == full);
  }
  CHECK(in_setup >= 1);
}

TEST_CASE("a table with every parameter: config order, values, resume and merge keep it") {
  // toy's points.csv is declared with PL_TABLE_ALL_PARAMS: the sweep keys in file order (mode
  // before n here, unlike their declaration) and seed, then every parameter that is not swept
  // in declaration order with the run's value, then the table's own column.
  TempDir d;
  spit(d / "p.toml",
       "plugin = \"toy\"\n[run]\nseeds = 2\n[sweep]\nmode = [\"sum\", \"mean\"]\n"
       "n = [4, 16]\n[toy]\nscale = 0.25\nlabel = \"a,\\\"b\\\"\"\nsteps = 2\n");
  const Result full = phaselab({"run", d / "p.toml", "--out", d / "full", "--quiet"}, d);
  REQUIRE_MESSAGE(full.rc == 0, full.err);
  pl::sdk::Table t, res;
  std::string why;
  REQUIRE_MESSAGE(t.read(d / "full/points.csv", &why), why);
  REQUIRE_MESSAGE(res.read(d / "full/results.csv", &why), why);
  const std::vector<std::string> rest = {"scale",    "shift", "label",  "nan_at", "fail_at",
                                         "sleep_ms", "steps", "mem_mb", "deaf_ms"};
  std::vector<std::string> want = {"mode", "n", "seed"};
  want.insert(want.end(), rest.begin(), rest.end());
  want.push_back("history_rows");
  CHECK(t.header() == want);
  // The other tables keep only the key: results.csv has no parameter columns.
  CHECK(res.header() ==
        std::vector<std::string>{"mode", "n", "seed", "value", "ref", "label", "exp_variant"});
  const std::vector<std::string> values = {"0.25", "false", "a,\"b\"", "-1", "-1",
                                           "0",    "2",     "0",       "0"};
  REQUIRE(t.rows() == 8);  // 2 modes x 2 n x 2 seeds, in point order (n faster, seed innermost)
  size_t r = 0;
  for (const char* mode : {"sum", "mean"})
    for (const char* n : {"4", "16"})
      for (const char* seed : {"0", "1"}) {
        std::vector<std::string> row = {mode, n, seed};
        row.insert(row.end(), values.begin(), values.end());
        row.push_back("2");
        CHECK(t.row(r) == row);
        // the key cells are those of results.csv's row of the same point
        for (size_t c = 0; c < 3; ++c) CHECK(res.str(r, c) == row[c]);
        ++r;
      }
  // The quoted label is written as CSV quotes it.
  CHECK(slurp(d / "full/points.csv").find(",\"a,\"\"b\"\"\",") != std::string::npos);

  // --resume: two points that never reached the journal (a kill) run again; the files come out
  // byte for byte as the uninterrupted run's.
  REQUIRE(std::system(("cp -r '" + d / "full" + "' '" + d / "res" + "'").c_str()) == 0);
  std::string journal = slurp(d / "res/journal.csv");
  for (int k = 0; k < 2; ++k) journal.erase(journal.rfind('\n', journal.size() - 2) + 1);
  spit(d / "res/journal.csv", journal);
  const Result again = phaselab({"run", d / "p.toml", "--out", d / "res", "--resume"}, d);
  CAPTURE(again.err);
  CHECK(again.rc == 0);
  CHECK(again.err.find("6 done before, 2 to run") != std::string::npos);
  for (const char* f : {"points.csv", "results.csv", "history.csv"})
    CHECK(slurp(d / ("res/" + std::string(f))) == slurp(d / ("full/" + std::string(f))));
  // A points.csv with the key columns only (as a phaselab before the flag wrote it) is refused.
  std::string old = slurp(d / "res/points.csv");
  old.replace(0, old.find('\n'), "mode,n,seed,history_rows");
  spit(d / "res/points.csv", old);
  const Result refused = phaselab({"run", d / "p.toml", "--out", d / "res", "--resume"}, d);
  CHECK(refused.rc == 2);
  CHECK(refused.err.find("points.csv has columns (mode,n,seed,history_rows) but this config "
                         "writes (mode,n,seed,scale,") != std::string::npos);

  // Shards and merge: the merged points.csv is the one-process run's.
  for (const char* s : {"0/2", "1/2"})
    REQUIRE(phaselab({"run", d / "p.toml", "--shard", s, "--out", d / "sh", "--quiet"}, d).rc == 0);
  const Result m =
      phaselab({"merge", d / "merged", d / "sh/shard-0-of-2", d / "sh/shard-1-of-2"}, d);
  CAPTURE(m.err);
  CHECK(m.rc == 0);
  for (const char* f : {"points.csv", "results.csv", "history.csv"})
    CHECK(slurp(d / ("merged/" + std::string(f))) == slurp(d / ("full/" + std::string(f))));
}

TEST_CASE("an all-parameters table with a column named like a parameter is refused at load") {
  // badtable's points table is declared with PL_TABLE_ALL_PARAMS and has a column n, which is
  // also its parameter: the prepended parameter and the column would share a name.
  TempDir d;
  const Result l = phaselab({"list"}, d);
  CHECK(l.rc == 0);
  CHECK(l.err.find("skipping badtable") != std::string::npos);
  spit(d / "bad.toml", "plugin = \"badtable\"\n");
  const Result r = phaselab({"run", d / "bad.toml", "--out", d / "never"}, d);
  CHECK(r.rc == 3);
  CHECK(r.err.find("table points has every parameter prepended but a column named like "
                   "parameter n") != std::string::npos);
  CHECK_FALSE(exists(d / "never"));
}
