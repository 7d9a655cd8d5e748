// SPDX-License-Identifier: Apache-2.0
// The SDK: Rng against direct kernel calls (the scalar reference and the selected variant),
// Params by name and its type errors, validate_with, the kernel-table size check, FakeHost, the
// table reader (Table) and the all-parameters table flag.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "phaselab/kernels.hpp"
#include "sdk/phaselab_sdk.hpp"
#include "sdk/table.hpp"
#include "sdk/test_host.hpp"

namespace {

// A small plugin: draws n Gaussians and n uniforms from cx.rng("draws") one at a time and
// reports their means; validate refuses n > limit by name.
struct Draws {
  explicit Draws(pl::sdk::Context&) {}
  pl_status run(pl::sdk::Context& cx) {
    const int64_t n = cx.int_value("n");
    pl::sdk::Rng r = cx.rng("draws");
    double g = 0, u = 0;
    for (int64_t i = 0; i < n; ++i) g += r.gaussian(), u += r.uniform();
    cx.emit(0, {g / double(n), u / double(n), cx.string_value("tag")});
    cx.emit(1, {n, g});
    return PL_OK;
  }
};

std::string check(const pl::sdk::Params& p) {
  if (p.int_value("n") > p.int_value("limit"))
    return "draws.n = " + std::to_string(p.int_value("n")) +
           " must be <= draws.limit = " + std::to_string(p.int_value("limit"));
  if (p.is("tag", "boom")) (void)p.float_value("tag");  // a wrong-type read: becomes the message
  return "";
}

const pl_param_decl kParams[] = {
    pl::sdk::int_param("n", 1000, "draws", 1, 1000000),
    pl::sdk::int_param("limit", 100000, "largest n", 1),
    pl::sdk::enum_param("tag", "a", "a|b|boom", "free"),
};
const char* const kCols[] = {"gauss_mean", "uniform_mean", "tag"};
const char* const kSumCols[] = {"draws", "gauss_sum"};
const pl_table_decl kTables[] = {pl::sdk::table("results", kCols),
                                 pl::sdk::table("sums", kSumCols, pl::sdk::kAllParams)};

}  // namespace

PL_DEFINE_PLUGIN_NO_PLOTS(Draws, "draws", "0.1", "SDK test plugin", kParams, kTables,
                          pl::sdk::validate_with<check>, nullptr)

namespace {

pl_kernel_table table_for(const std::string& target) { return pl::test_host::kernel_table(target); }

}  // namespace

TEST_CASE("Rng: single draws, blocks and direct kernel calls give the same numbers") {
  for (const char* target : {"scalar", ""}) {
    CAPTURE(target);
    const pl_kernel_table k = table_for(target);
    const uint64_t seed = 7, stream = pl::sdk::derive(3, 99);
    const size_t n = 3 * pl::sdk::Rng::kBuffer + 37;  // several refills, a ragged end
    // Oracle: one direct call of each kernel over the whole range.
    std::vector<float> g_ref(n);
    std::vector<uint32_t> u_ref(n);
    k.gaussian(g_ref.data(), n, seed, stream, 0);
    k.uniform_bits(u_ref.data(), n, seed, pl::sdk::derive(stream, 1), 0);

    pl::sdk::Rng one(k, seed, stream);
    for (size_t i = 0; i < n; ++i) {
      const float g = one.gaussian();
      REQUIRE(std::memcmp(&g, &g_ref[i], sizeof g) == 0);
      const float u = one.uniform();
      REQUIRE(u == float(u_ref[i] >> 8) * 0x1.0p-24f);
      REQUIRE(u >= 0.f);
      REQUIRE(u < 1.f);
    }
    CHECK(one.gaussian_counter() == n);
    CHECK(one.uniform_counter() == n);

    // Mixed: a few singles, a block that crosses the buffer end, singles again.
    pl::sdk::Rng mix(k, seed, stream);
    std::vector<float> got;
    for (int i = 0; i < 5; ++i) got.push_back(mix.gaussian());
    std::vector<float> block(600);
    mix.gaussian(block.data(), block.size());
    got.insert(got.end(), block.begin(), block.end());
    while (got.size() < n) got.push_back(mix.gaussian());
    CHECK(std::memcmp(got.data(), g_ref.data(), n * sizeof(float)) == 0);

    // skip_gaussian then draw: sample number gaussian_counter().
    pl::sdk::Rng sk(k, seed, stream);
    (void)sk.gaussian();
    sk.skip_gaussian(500);
    CHECK(sk.gaussian_counter() == 501);
    const float after = sk.gaussian();
    CHECK(std::memcmp(&after, &g_ref[501], sizeof after) == 0);
  }
}

TEST_CASE("Rng: the uniform numbers are identical on every target and below() stays in range") {
  pl::sdk::Rng a(table_for("scalar"), 1, 2), b(table_for(""), 1, 2);
  for (int i = 0; i < 2000; ++i) REQUIRE(a.bits() == b.bits());
  pl::sdk::Rng c(table_for(""), 5, 6);
  std::vector<int> hits(7, 0);
  for (int i = 0; i < 70000; ++i) {
    const uint32_t x = c.below(7);
    REQUIRE(x < 7u);
    ++hits[x];
  }
  // 10000 expected per bin, sd ~93: a 6-sd band.
  for (int h : hits) CHECK(std::abs(h - 10000) < 560);
}

TEST_CASE("Params: named reads, and errors that name the parameter and both types") {
  std::vector<pl_value> v(3);
  v[0] = {PL_PARAM_INT, 12, 12.0, nullptr};
  v[1] = {PL_PARAM_INT, 40, 40.0, nullptr};
  v[2] = {PL_PARAM_ENUM, 1, 0.0, "b"};
  const pl::sdk::Params p(kParams, 3, v.data(), 3);
  CHECK(p.int_value("n") == 12);
  CHECK(p.float_value("limit") == 40.0);  // ints convert
  CHECK(p.string_value("tag") == "b");
  CHECK(p.is("tag", "b"));
  CHECK(p.has("limit"));
  CHECK_FALSE(p.has("seed"));
  CHECK_THROWS_WITH_AS(
      p.bool_value("n"),
      "parameter 'n' is declared int but was read as bool (read it with int_value())",
      std::invalid_argument);
  CHECK_THROWS_WITH_AS(p.int_value("tag"),
                       "parameter 'tag' is declared enum but was read as int (read it with "
                       "string_value() or is())",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(p.int_value("m"), "plugin asked for undeclared parameter 'm'",
                       std::invalid_argument);
  // SDK 0.1's one-letter names still read the same values (deprecated).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  CHECK(p.i("n") == 12);
  CHECK(p.f("limit") == 40.0);
  CHECK(p.s("tag") == "b");
  CHECK_THROWS_AS(p.b("n"), std::invalid_argument);
#pragma GCC diagnostic pop
}

TEST_CASE("validate_with reads by name; FakeHost runs the plugin and keeps its rows") {
  pl::test_host::FakeHost h(PL_PLUGIN_ENTRY);
  CHECK(h.run({{"n", "50"}, {"limit", "10"}}, 1) == PL_FAILED);
  CHECK(h.failure == "draws.n = 50 must be <= draws.limit = 10");
  CHECK(h.run({{"tag", "boom"}}, 1) == PL_FAILED);
  CHECK(h.failure ==
        "parameter 'tag' is declared enum but was read as float (read it with "
        "string_value() or is())");

  REQUIRE(h.run({{"n", "20000"}}, 3) == PL_OK);
  REQUIRE(h.rows[0].size() == 1);
  const double g = h.column(0, "gauss_mean")[0], u = h.column(0, "uniform_mean")[0];
  // Means of 20000 draws: sd 0.0071 (Gaussian) and 0.0020 (uniform); 5-sd bands.
  CHECK(std::abs(g) < 0.036);
  CHECK(std::abs(u - 0.5) < 0.011);
  CHECK(h.rows[0][0][2] == "a");
  CHECK(std::isnan(h.column(0, "tag")[0]));
  CHECK_THROWS_AS(h.column(0, "nope"), std::invalid_argument);

  // Same seed and point: the same row; another seed: another.
  const std::vector<std::string> first = h.rows[0][0];
  REQUIRE(h.run({{"n", "20000"}}, 3) == PL_OK);
  CHECK(h.rows[0][0] == first);
  REQUIRE(h.run({{"n", "20000"}}, 4) == PL_OK);
  CHECK(h.rows[0][0] != first);
}

TEST_CASE("a host whose kernel table is shorter than the plugin's is refused with the reason") {
  pl::test_host::FakeHost h(PL_PLUGIN_ENTRY);
  h.k.struct_size = uint32_t(sizeof(pl_kernel_table) - sizeof(void*));
  h.k.num_kernels -= 1;
  CHECK(h.run({}, 1) == PL_FAILED);
  CHECK(h.failure.find("the host's kernel table has " + std::to_string(pl::kNumKernels - 1) +
                       " kernels") == 0);
  CHECK(h.failure.find("this plugin was compiled with " + std::to_string(pl::kNumKernels)) !=
        std::string::npos);
  h.k.struct_size = sizeof(pl_kernel_table);
  h.k.num_kernels += 1;
  CHECK(h.run({}, 1) == PL_OK);
}

TEST_CASE("Table: quoting, \"\" escapes, CRLF, empty cells as NaN, columns by name, errors") {
  pl::sdk::Table t;
  std::string why;
  // A header and three records: a quoted comma, "" inside quotes, a quoted line break, CRLF
  // line ends, empty cells, a last line without its end.
  REQUIRE_MESSAGE(t.parse("L,name,P_star\r\n8,\"a,\"\"b\"\"\",1.5\r\n16,\"x\ny\",\r\n"
                          "32,,-2e3",
                          "t.csv", &why),
                  why);
  CHECK(t.name() == "t.csv");
  CHECK(t.header() == std::vector<std::string>{"L", "name", "P_star"});
  REQUIRE(t.rows() == 3);
  CHECK(t.col("P_star") == 2);
  CHECK(t.find("nope") == -1);
  CHECK(t.has("L"));
  CHECK_FALSE(t.has("l"));  // names are case-sensitive
  CHECK(t.str(0, t.col("name")) == "a,\"b\"");
  CHECK(t.str(1, 1) == "x\ny");
  CHECK(t.num(0, 2) == 1.5);
  CHECK(t.num(2, 2) == -2000.0);
  CHECK(t.num(1, 0) == 16.0);
  CHECK(std::isnan(t.num(1, 2)));  // empty cell
  CHECK(t.str(2, 1).empty());
  // A missing column: std::out_of_range naming the column, the table and what it has.
  try {
    (void)t.col("P_spinodal");
    FAIL("col() of a missing column must throw");
  } catch (const std::out_of_range& e) {
    CHECK(std::string(e.what()) == "t.csv has no column 'P_spinodal' (columns: L, name, P_star)");
  }
  // Text that is not a number: std::invalid_argument naming the record and column.
  try {
    (void)t.num(0, 1);
    FAIL("num() of text must throw");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()) == "t.csv record 2 column 'name': 'a,\"b\"' is not a number");
  }
  // Malformed tables are refused with a reason; the table is left empty.
  CHECK_FALSE(t.parse("a,b\n1,2,3\n", "w.csv", &why));
  CHECK(why == "w.csv record 2 has 3 fields, the header has 2");
  CHECK(t.rows() == 0);
  CHECK(t.header().empty());
  CHECK_FALSE(t.parse("a,b\n\"1,2\n", "q.csv", &why));
  CHECK(why == "q.csv is not valid CSV (unterminated quote)");
  CHECK_FALSE(t.parse("a,b,a\n", "d.csv", &why));
  CHECK(why == "d.csv names column 'a' twice");
  CHECK_FALSE(t.parse("", "e.csv", &why));
  CHECK(why == "e.csv has no header line");
  CHECK(t.parse("a,b\n", "h.csv", &why));  // a header alone: no rows
  CHECK(t.rows() == 0);
  CHECK_FALSE(t.read("/nonexistent/phaselab/t.csv", &why));
  CHECK(why == "cannot read /nonexistent/phaselab/t.csv");
}

TEST_CASE(
    "PL_TABLE_ALL_PARAMS: the flag sits in the old reserved slot; FakeHost writes its tables") {
  // The flag took reserved[0]: the layout (and so every plugin's table array) is unchanged.
  static_assert(sizeof(pl_table_decl) == 5 * sizeof(void*), "pl_table_decl layout");
  static_assert(offsetof(pl_table_decl, flags) == 3 * sizeof(void*), "flags = old reserved[0]");
  CHECK(kTables[0].flags == 0);
  CHECK(kTables[1].flags == PL_TABLE_ALL_PARAMS);
  pl::test_host::FakeHost h(PL_PLUGIN_ENTRY);
  h.keep_rows = true;
  REQUIRE(h.run({{"n", "50"}, {"tag", "b"}}, 7, 1) == PL_OK);
  REQUIRE(h.run({{"n", "20"}}, 7, 0) == PL_OK);
  h.write_tables({"n"});
  pl::sdk::Table res, sums;
  std::string why;
  REQUIRE_MESSAGE(res.read(h.dir + "/results.csv", &why), why);
  REQUIRE_MESSAGE(sums.read(h.dir + "/sums.csv", &why), why);
  // results: the swept key and seed; sums: then every other parameter in declaration order.
  CHECK(res.header() == std::vector<std::string>{"n", "seed", "gauss_mean", "uniform_mean", "tag"});
  CHECK(sums.header() ==
        std::vector<std::string>{"n", "seed", "limit", "tag", "draws", "gauss_sum"});
  REQUIRE(sums.rows() == 2);  // in point order: index 0 (n = 20) first
  CHECK(sums.row(0) == std::vector<std::string>{"20", "7", "100000", "a", "20", sums.str(0, 5)});
  CHECK(sums.row(1) == std::vector<std::string>{"50", "7", "100000", "b", "50", sums.str(1, 5)});
  // the sums are n times the means of results.csv (same rows, same order)
  for (size_t r = 0; r < 2; ++r)
    CHECK(std::fabs(sums.num(r, sums.col("gauss_sum")) -
                    sums.num(r, 0) * res.num(r, res.col("gauss_mean"))) <=
          1e-12 + 1e-12 * std::fabs(sums.num(r, sums.col("gauss_sum"))));
}
