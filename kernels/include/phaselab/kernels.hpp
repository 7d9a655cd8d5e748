// SPDX-License-Identifier: Apache-2.0
// C++ view of the kernel library: every implementation namespace, the variant registry and
// selection. Plugins use the C table (kernel_table.h); tests, benchmarks and the driver use this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "phaselab/kernel_table.h"

namespace pl {

enum class KernelId : int {
#define PL_KERNEL(name, Camel, ret, params) name,
#include "phaselab/kernels.def"
#undef PL_KERNEL
  count
};
constexpr int kNumKernels = static_cast<int>(KernelId::count);
const char* kernel_name(int id);

// Scalar references: plain loops, double accumulation where it matters.
namespace scalar {
#define PL_KERNEL(name, Camel, ret, params) ret Camel params;
#include "phaselab/kernels.def"
#undef PL_KERNEL
}  // namespace scalar

struct Variant {
  int kernel;           // KernelId
  std::string name;     // "<kernel>.<backend>.<isa>" or "<kernel>.scalar"
  const char* backend;  // "scalar", "hwy", "intrin", "xsimd"
  const char* isa;      // "scalar", "emu128", "sse4", "avx2", "avx512", "neon", "sve", "sve2"
  void* fn;             // cast to the kernel's signature (see kernels.def)
  int rank;             // higher is preferred by dispatch
  bool supported;       // the CPU can run it
};

// Every compiled variant, grouped by kernel in kernels.def order.
const std::vector<Variant>& variants();
const Variant* find_variant(const std::string& name);

// ISA names this build knows, and whether the CPU supports each.
std::vector<std::string> known_targets();
bool target_supported(const std::string& isa);
bool target_known(const std::string& isa);
// The ISA name of a Highway target bit (HWY_AVX3 -> "avx512"), nullptr if it has none.
const char* isa_of_hwy_target(int64_t hwy_target);
// The best ISA the CPU supports ("avx512", "neon", ...).
std::string best_target();

// Fills `table` with the best supported variant of each kernel, restricted to variants whose
// ISA is `target` or one it implies (avx512 -> avx2 -> sse4 -> emu128 -> scalar). An empty target
// means best. Returns false with a message if the target is unknown or unsupported here.
bool select_kernels(const std::string& target, pl_kernel_table* table, std::string* error);

// The selected variant's name of every kernel under `target` ("" or "best": the best), NULL where
// a kernel has none; static storage, one struct per target (what pl_kernel_table::variant holds).
const pl_kernel_names* selected_names(const std::string& target);

// The selected variant for one kernel under `target` (nullptr if none).
const Variant* selected_variant(int kernel, const std::string& target);

// Typed access: call<KernelId::exp>(v)(x, y, n).
template <typename Fn>
Fn as(const Variant& v) {
  return reinterpret_cast<Fn>(v.fn);
}

}  // namespace pl
