// Expands variants.def into the variant list, and selects one variant per kernel for a target.
#include <hwy/highway.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "phaselab/kernels.hpp"

// Declarations of every kernel in every implementation namespace that variants.def may name.
// Declared weak: a family left out of a build (or not written yet) leaves a null pointer, which
// build_variants() skips; the registry test insists that every kernel has its scalar and
// Highway variants, so nothing goes missing silently.
namespace pl {
#define PL_KERNEL(name, Camel, ret, params) __attribute__((weak)) ret Camel params;
#if HWY_TARGETS & HWY_AVX3_DL
namespace N_AVX3_DL {
#include "phaselab/kernels.def"
}
#endif
#if HWY_TARGETS & HWY_AVX3
namespace N_AVX3 {
#include "phaselab/kernels.def"
}
#endif
#if HWY_TARGETS & HWY_AVX2
namespace N_AVX2 {
#include "phaselab/kernels.def"
}
#endif
#if HWY_TARGETS & HWY_SSE4
namespace N_SSE4 {
#include "phaselab/kernels.def"
}
#endif
#if HWY_TARGETS & HWY_SSSE3
namespace N_SSSE3 {
#include "phaselab/kernels.def"
}
#endif
#if HWY_TARGETS & HWY_SVE2
namespace N_SVE2 {
#include "phaselab/kernels.def"
}
#endif
#if HWY_TARGETS & HWY_SVE
namespace N_SVE {
#include "phaselab/kernels.def"
}
#endif
#if HWY_TARGETS & HWY_SVE_256
namespace N_SVE_256 {
#include "phaselab/kernels.def"
}
#endif
#if HWY_TARGETS & HWY_SVE2_128
namespace N_SVE2_128 {
#include "phaselab/kernels.def"
}
#endif
#if HWY_TARGETS & HWY_NEON
namespace N_NEON {
#include "phaselab/kernels.def"
}
#endif
#if HWY_TARGETS & HWY_EMU128
namespace N_EMU128 {
#include "phaselab/kernels.def"
}
#endif
#if HWY_TARGETS & HWY_SCALAR
namespace N_SCALAR {
#include "phaselab/kernels.def"
}
#endif
namespace scalar {
#include "phaselab/kernels.def"
}
namespace intrin_avx2 {
#include "phaselab/kernels.def"
}
namespace intrin_avx512 {
#include "phaselab/kernels.def"
}
namespace intrin_neon {
#include "phaselab/kernels.def"
}
namespace xsimd_avx2 {
#include "phaselab/kernels.def"
}
namespace xsimd_avx512 {
#include "phaselab/kernels.def"
}
namespace xsimd_neon {
#include "phaselab/kernels.def"
}
#undef PL_KERNEL
}  // namespace pl

namespace pl {
namespace {

struct IsaInfo {
  const char* name;
  int64_t hwy_bit;  // 0: always supported
  int rank;
  const char* implies;  // the next ISA down the chain, or nullptr
};

// Ordered best first within each architecture.
const IsaInfo kIsas[] = {
    {"avx512dl", HWY_AVX3_DL, 52, "avx512"},
    {"avx512", HWY_AVX3, 50, "avx2"},
    {"avx2", HWY_AVX2, 40, "sse4"},
    {"sse4", HWY_SSE4, 30, "ssse3"},
    {"ssse3", HWY_SSSE3, 25, "emu128"},
    {"sve2", HWY_SVE2, 48, "sve"},
    {"sve2_128", HWY_SVE2_128, 47, "sve"},
    {"sve256", HWY_SVE_256, 46, "sve"},
    {"sve", HWY_SVE, 45, "neon"},
    {"neon", HWY_NEON, 40, "emu128"},
    {"emu128", 0, 10, "scalar"},
    {"scalar", 0, 0, nullptr},
};

const IsaInfo* isa_info(const std::string& name) {
  for (const auto& i : kIsas)
    if (name == i.name) return &i;
  return nullptr;
}

bool isa_compiled_for_this_arch(const IsaInfo& i) {
#if HWY_ARCH_X86
  return i.hwy_bit == 0 || (i.hwy_bit & (HWY_AVX3_DL | HWY_AVX3 | HWY_AVX2 | HWY_SSE4 | HWY_SSSE3));
#elif HWY_ARCH_ARM
  return i.hwy_bit == 0 ||
         (i.hwy_bit & (HWY_SVE2 | HWY_SVE2_128 | HWY_SVE_256 | HWY_SVE | HWY_NEON));
#else
  return i.hwy_bit == 0;
#endif
}

bool isa_supported(const IsaInfo& i) {
  return i.hwy_bit == 0 || (hwy::SupportedTargets() & i.hwy_bit) != 0;
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

#if HWY_TARGETS & HWY_AVX3_DL
#define PL_HWY_AVX3_DL(k, C) add(out, KernelId::k, "hwy", "avx512dl", PL_FN(N_AVX3_DL::C));
#else
#define PL_HWY_AVX3_DL(k, C)
#endif
#if HWY_TARGETS & HWY_AVX3
#define PL_HWY_AVX3(k, C) add(out, KernelId::k, "hwy", "avx512", PL_FN(N_AVX3::C));
#else
#define PL_HWY_AVX3(k, C)
#endif
#if HWY_TARGETS & HWY_AVX2
#define PL_HWY_AVX2(k, C) add(out, KernelId::k, "hwy", "avx2", PL_FN(N_AVX2::C));
#else
#define PL_HWY_AVX2(k, C)
#endif
#if HWY_TARGETS & HWY_SSE4
#define PL_HWY_SSE4(k, C) add(out, KernelId::k, "hwy", "sse4", PL_FN(N_SSE4::C));
#else
#define PL_HWY_SSE4(k, C)
#endif
#if HWY_TARGETS & HWY_SSSE3
#define PL_HWY_SSSE3(k, C) add(out, KernelId::k, "hwy", "ssse3", PL_FN(N_SSSE3::C));
#else
#define PL_HWY_SSSE3(k, C)
#endif
#if HWY_TARGETS & HWY_SVE2
#define PL_HWY_SVE2(k, C) add(out, KernelId::k, "hwy", "sve2", PL_FN(N_SVE2::C));
#else
#define PL_HWY_SVE2(k, C)
#endif
#if HWY_TARGETS & HWY_SVE
#define PL_HWY_SVE(k, C) add(out, KernelId::k, "hwy", "sve", PL_FN(N_SVE::C));
#else
#define PL_HWY_SVE(k, C)
#endif
#if HWY_TARGETS & HWY_SVE_256
#define PL_HWY_SVE_256(k, C) add(out, KernelId::k, "hwy", "sve256", PL_FN(N_SVE_256::C));
#else
#define PL_HWY_SVE_256(k, C)
#endif
#if HWY_TARGETS & HWY_SVE2_128
#define PL_HWY_SVE2_128(k, C) add(out, KernelId::k, "hwy", "sve2_128", PL_FN(N_SVE2_128::C));
#else
#define PL_HWY_SVE2_128(k, C)
#endif
#if HWY_TARGETS & HWY_NEON
#define PL_HWY_NEON(k, C) add(out, KernelId::k, "hwy", "neon", PL_FN(N_NEON::C));
#else
#define PL_HWY_NEON(k, C)
#endif
#if HWY_TARGETS & HWY_EMU128
#define PL_HWY_EMU128(k, C) add(out, KernelId::k, "hwy", "emu128", PL_FN(N_EMU128::C));
#else
#define PL_HWY_EMU128(k, C)
#endif
#define PL_HWY(k, C)                                                                        \
  PL_HWY_AVX3_DL(k, C)                                                                      \
  PL_HWY_AVX3(k, C)                                                                         \
  PL_HWY_AVX2(k, C) PL_HWY_SSE4(k, C) PL_HWY_SSSE3(k, C) PL_HWY_SVE2(k, C) PL_HWY_SVE(k, C) \
      PL_HWY_SVE_256(k, C) PL_HWY_SVE2_128(k, C) PL_HWY_NEON(k, C) PL_HWY_EMU128(k, C)

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

std::vector<std::string> known_targets() {
  std::vector<std::string> out;
  for (const auto& i : kIsas)
    if (isa_compiled_for_this_arch(i) && isa_has_variants(i.name)) out.push_back(i.name);
  return out;
}

bool target_known(const std::string& isa) {
  const IsaInfo* i = isa_info(isa);
  return i && isa_compiled_for_this_arch(*i) && isa_has_variants(isa);
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
