// SPDX-License-Identifier: Apache-2.0
#include <hwy/targets.h>

#include <set>

#include "tests/support.hpp"

TEST_CASE(
    "registry: every kernel has a scalar reference and a Highway variant per generated target") {
  std::set<std::string> names;
  for (const auto& v : pl::variants()) {
    CHECK(names.insert(v.name).second);  // names are unique
    CHECK(v.fn != nullptr);
  }
  // Highway targets that were compiled and that this CPU supports.
  std::vector<std::string> hwy_isas;
  for (int64_t t : hwy::SupportedAndGeneratedTargets()) {
    if (t == HWY_SCALAR) continue;  // the scalar kernels are pl::scalar, not a Highway target
    CAPTURE(hwy::TargetName(t));
    const char* n = pl::isa_of_hwy_target(t);
    REQUIRE(n != nullptr);  // every compiled Highway target has its row in isas.h
    hwy_isas.push_back(n);
  }
  CHECK(!hwy_isas.empty());
  for (int k = 0; k < pl::kNumKernels; ++k) {
    const std::string kn = pl::kernel_name(k);
    CAPTURE(kn);
    CHECK(pl::find_variant(kn + ".scalar") != nullptr);
    for (const auto& isa : hwy_isas) {
      CAPTURE(isa);
      const pl::Variant* v = pl::find_variant(kn + ".hwy." + isa);
      REQUIRE(v != nullptr);
      CHECK(v->supported);
    }
  }
}

TEST_CASE("registry: selection and forced targets") {
  pl_kernel_table t;
  std::string err;
  REQUIRE(pl::select_kernels("", &t, &err));
  CHECK(t.struct_size == sizeof(pl_kernel_table));
  CHECK(t.num_kernels == static_cast<uint32_t>(pl::kNumKernels));
  CHECK(std::string(t.target) == pl::best_target());
  CHECK(reinterpret_cast<void*>(t.exp) != nullptr);
  CHECK(reinterpret_cast<void*>(t.max) != nullptr);

  REQUIRE(pl::select_kernels("scalar", &t, &err));
  CHECK(std::string(t.variant->exp) == "exp.scalar");
  CHECK(std::string(t.variant->gemm) == "gemm.scalar");
  CHECK(reinterpret_cast<void*>(t.exp) == pl::find_variant("exp.scalar")->fn);

  CHECK_FALSE(pl::select_kernels("pentium9", &t, &err));
  CHECK(err.find("unknown kernel target") != std::string::npos);

  // A target of the other architecture is unknown here; a known but unsupported one is refused.
  for (const auto& isa : pl::known_targets()) {
    if (!pl::target_supported(isa)) {
      CHECK_FALSE(pl::select_kernels(isa, &t, &err));
      CHECK(err.find("not supported by this CPU") != std::string::npos);
    } else {
      REQUIRE(pl::select_kernels(isa, &t, &err));
      // Every selected variant's ISA is the target or one it implies.
      const pl::Variant* v = pl::find_variant(t.variant->softmax_rows);
      REQUIRE(v != nullptr);
      if (isa == "scalar") CHECK(std::string(v->isa) == "scalar");
    }
  }
}
