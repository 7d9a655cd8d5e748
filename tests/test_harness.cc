// SPDX-License-Identifier: Apache-2.0
// The harness's correctness sweep: every registered case (kernels/*/cases_*.cc) on every runnable
// variant of its kernel, every output element against the case's double reference.
#include "kernels/harness/harness.hpp"
#include "tests/support.hpp"

TEST_CASE("harness: every case, every runnable variant vs its double reference") {
  REQUIRE(!pl::test::cases().empty());
  for (const auto& c : pl::test::cases()) {
    const auto vs = pl::test::runnable(c.kernel);
    REQUIRE(vs.size() >= 2);  // the scalar reference and at least one vector variant
    for (const auto* v : vs) {
      CAPTURE(v->name);
      CAPTURE(c.label);
      auto inst = c.make();
      inst->run(*v);
      for (const auto& o : inst->outputs())
        pl::test::check_close(v->name + "/" + c.label + " " + o.name, o.got, o.ref, o.n, c.atol,
                              c.rtol);
    }
  }
}
