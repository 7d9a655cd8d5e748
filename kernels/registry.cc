// SPDX-License-Identifier: Apache-2.0
// Expands variants.def into the variant list, and selects one variant per kernel for a target.
#include <hwy/highway.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "phaselab/isas.h"
#include "phaselab/kernels.hpp"

// Declarations of every kernel in every implementation namespace (isas.h): the Highway
// per-target namespaces, pl::intrin_<isa>, pl::xsimd_<isa> and pl::scalar. Only the ones that
// variants.def names are referred to, and those must be defined: a missing variant is a link
// error, not a silent gap.
namespace pl {
#define PL_DECLARE_IN(isa, arch, hwy_target, hwy_ns, rank, implies, Camel, ret, params) \
  namespace hwy_ns {                                                                    \
  ret Camel params;                                                                     \
  }                                                                                     \
  namespace intrin_##isa {                                                              \
    ret Camel params;                                                                   \
  }                                                                                     \
  namespace xsimd_##isa {                                                               \
    ret Camel params;                                                                   \
  }
#define PL_KERNEL(name, Camel, ret, params) PL_ISAS(PL_DECLARE_IN, Camel, ret, params)
#include "phaselab/kernels.def"
#undef PL_KERNEL
#undef PL_DECLARE_IN
}  // namespace pl

namespace pl {
namespace {

constexpr int kArch_any = 1;
constexpr int kArch_x86 = HWY_ARCH_X86;
constexpr int kArch_arm = HWY_ARCH_ARM;

struct IsaInfo {
  const char* name;
  int64_t hwy_target;  // Highway's target bit, 0: none
  bool always;         // supported on every CPU (emu128, scalar)
  bool compiled;       // an ISA of this build's architecture
  int rank;
  const char* implies;  // the next ISA down the chain, or nullptr
};

#define PL_ISA_ROW(isa, arch, hwy_target, hwy_ns, rank, implies, unused)              \
  {#isa, int64_t(hwy_target),           kArch_##arch == kArch_any, kArch_##arch != 0, \
   rank, *#implies ? #implies : nullptr},
// Ordered best first within each architecture.
const IsaInfo kIsas[] = {PL_ISAS(PL_ISA_ROW, 0)};
#undef PL_ISA_ROW

const IsaInfo* isa_info(const std::string& name) {
  for (const auto& i : kIsas)
    if (name == i.name) return &i;
  return nullptr;
}

bool isa_supported(const IsaInfo& i) {
  return i.always || (hwy::SupportedTargets() & i.hwy_target) != 0;
}

int backend_bonus(const char* backend) {
  if (!std::strcmp(backend, "intrin")) return 3;
  if (!std::strcmp(backend, "hwy")) return 2;
  if (!std::strcmp(backend, "xsimd")) return 1;
  return 0;
}

void add(std::vector<Variant>& out, KernelId k, const char* backend, const char* isa, void* fn) {
  if (!fn) return;
  const IsaInfo* info = isa_info(isa);
  Variant v;
  v.kernel = static_cast<int>(k);
  v.name = std::string(kernel_name(v.kernel)) +
           (std::strcmp(backend, "scalar") ? std::string(".") + backend + "." + isa : ".scalar");
  v.backend = backend;
  v.isa = info->name;
  v.fn = fn;
  v.rank = info->rank * 4 + backend_bonus(backend);
  v.supported = isa_supported(*info);
  out.push_back(std::move(v));
}

#define PL_FN(f) reinterpret_cast<void*>(&f)
#define PL_SCALAR(k, C) add(out, KernelId::k, "scalar", "scalar", PL_FN(scalar::C));
#define PL_INTRIN(k, C, isa) add(out, KernelId::k, "intrin", #isa, PL_FN(intrin_##isa::C));
#define PL_XSIMD(k, C, isa) add(out, KernelId::k, "xsimd", #isa, PL_FN(xsimd_##isa::C));
// One row per ISA that has a Highway target compiled into this build. `if constexpr` in a
// template: the rows of targets not compiled are discarded, so their functions are never named.
#define PL_HWY_ROW(isa, arch, hwy_target, hwy_ns, rank, implies, k, C) \
  if constexpr ((HWY_TARGETS & int64_t(hwy_target)) != 0)              \
    add(out, KernelId::k, "hwy", #isa, PL_FN(hwy_ns::C));
#define PL_HWY(k, C) PL_ISAS(PL_HWY_ROW, k, C)
#if HWY_ARCH_X86
#define PL_X86(...) __VA_ARGS__
#define PL_ARM(...)
#elif HWY_ARCH_ARM
#define PL_X86(...)
#define PL_ARM(...) __VA_ARGS__
#else
#define PL_X86(...)
#define PL_ARM(...)
#endif

template <int kUnused = 0>
std::vector<Variant> build_variants() {
  std::vector<Variant> out;
#include "variants.def"
  std::stable_sort(out.begin(), out.end(),
                   [](const Variant& a, const Variant& b) { return a.kernel < b.kernel; });
  return out;
}

bool implies(const IsaInfo* target, const std::string& isa) {
  for (const IsaInfo* t = target; t; t = t->implies ? isa_info(t->implies) : nullptr)
    if (isa == t->name) return true;
  return false;
}

}  // namespace

const char* kernel_name(int id) {
  static const char* const names[] = {
#define PL_KERNEL(name, Camel, ret, params) #name,
#include "phaselab/kernels.def"
#undef PL_KERNEL
  };
  return (id >= 0 && id < kNumKernels) ? names[id] : "?";
}

const std::vector<Variant>& variants() {
  static const std::vector<Variant> all = build_variants();
  return all;
}

const Variant* find_variant(const std::string& name) {
  for (const auto& v : variants())
    if (v.name == name) return &v;
  return nullptr;
}

// A target is known when this build has at least one variant for its ISA (scalar always).
bool isa_has_variants(const std::string& isa) {
  if (isa == "scalar") return true;
  for (const auto& v : variants())
    if (isa == v.isa) return true;
  return false;
}

const char* isa_of_hwy_target(int64_t hwy_target) {
  for (const auto& i : kIsas)
    if (i.hwy_target == hwy_target) return i.name;
  return nullptr;
}

std::vector<std::string> known_targets() {
  std::vector<std::string> out;
  for (const auto& i : kIsas)
    if (i.compiled && isa_has_variants(i.name)) out.push_back(i.name);
  return out;
}

bool target_known(const std::string& isa) {
  const IsaInfo* i = isa_info(isa);
  return i && i->compiled && isa_has_variants(isa);
}

bool target_supported(const std::string& isa) {
  return target_known(isa) && isa_supported(*isa_info(isa));
}

std::string best_target() {
  // The best supported ISA that at least one variant uses.
  const Variant* best = nullptr;
  for (const auto& v : variants())
    if (v.supported && (!best || isa_info(v.isa)->rank > isa_info(best->isa)->rank)) best = &v;
  return best ? best->isa : "scalar";
}

const Variant* selected_variant(int kernel, const std::string& target) {
  const IsaInfo* t = target.empty() ? nullptr : isa_info(target);
  const Variant* best = nullptr;
  for (const auto& v : variants()) {
    if (v.kernel != kernel || !v.supported) continue;
    if (t && !implies(t, v.isa)) continue;
    if (!best || v.rank > best->rank) best = &v;
  }
  return best;
}

bool select_kernels(const std::string& target, pl_kernel_table* table, std::string* error) {
  if (!target.empty() && target != "best") {
    if (!target_known(target)) {
      std::string list;
      for (const auto& t : known_targets()) list += (list.empty() ? "" : ", ") + t;
      if (error) *error = "unknown kernel target \"" + target + "\" (known: " + list + ")";
      return false;
    }
    if (!target_supported(target)) {
      if (error)
        *error = "kernel target \"" + target +
                 "\" is not supported by this CPU (best: " + best_target() + ")";
      return false;
    }
  }
  const std::string t = (target == "best") ? std::string() : target;
  std::memset(table, 0, sizeof(*table));
  table->struct_size = sizeof(pl_kernel_table);
  table->num_kernels = kNumKernels;
  const std::string shown = t.empty() ? best_target() : t;
  table->target = isa_info(shown)->name;  // static storage
#define PL_KERNEL(kname, Camel, ret, params)                                     \
  {                                                                              \
    const Variant* sel = selected_variant(static_cast<int>(KernelId::kname), t); \
    if (!sel) {                                                                  \
      if (error) *error = "no variant of kernel " #kname " for target " + shown; \
      return false;                                                              \
    }                                                                            \
    table->kname = reinterpret_cast<ret(*) params>(sel->fn);                     \
  }
#include "phaselab/kernels.def"
#undef PL_KERNEL
  table->variant = selected_names(t);
  return true;
}

const pl_kernel_names* selected_names(const std::string& target) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<pl_kernel_names>> cache;
  const std::string t = target == "best" ? std::string() : target;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[t];
  if (!slot) {
    slot = std::make_unique<pl_kernel_names>();
#define PL_KERNEL(kname, Camel, ret, params)                                     \
  if (const Variant* v = selected_variant(static_cast<int>(KernelId::kname), t)) \
    slot->kname = v->name.c_str();
#include "phaselab/kernels.def"
#undef PL_KERNEL
  }
  return slot.get();
}

}  // namespace pl
