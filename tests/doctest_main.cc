// SPDX-License-Identifier: Apache-2.0
// Shared doctest main for every phaselab test binary. Besides doctest's own report it appends
// "<binary> <passed> <failed> <skipped>" (test cases) to $PHASELAB_TEST_COUNTS, which the README's
// test command sums into its closing "N passed, N failed" line.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "tests/emulation.hpp"

namespace {

std::string g_binary = "tests";

struct CountsListener : doctest::IReporter {
  explicit CountsListener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& s) override {
    const char* path = std::getenv("PHASELAB_TEST_COUNTS");
    if (!path || !*path) return;
    if (FILE* f = std::fopen(path, "a")) {
      const unsigned failed = s.numTestCasesFailed;
      const unsigned run = s.numTestCasesPassingFilters;
      const unsigned skipped = s.numTestCases - s.numTestCasesPassingFilters;
      std::fprintf(f, "%s %u %u %u\n", g_binary.c_str(), run - failed, failed, skipped);
      std::fclose(f);
    }
  }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

}  // namespace

REGISTER_LISTENER("phaselab_counts", 1, CountsListener);

int main(int argc, char** argv) {
  if (argc > 0) {
    std::string a = argv[0];
    g_binary = a.substr(a.find_last_of('/') + 1);
  }
  if (pl::test::emulated())
    std::fprintf(stderr,
                 "[phaselab] PHASELAB_EMULATED=1: the heaviest checks run at reduced sizes "
                 "(tests/emulation.hpp)\n");
  doctest::Context ctx;
  ctx.applyCommandLine(argc, argv);
  return ctx.run();
}
