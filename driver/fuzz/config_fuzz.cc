// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for config checking: every input goes through what `phaselab check` does
// before a run (size limit, the pre-scan of dotted keys and nesting, the TOML parser, key/type/
// range resolution against a plugin's declarations, point enumeration for small sweeps). Any
// crash, sanitizer report, leak or timeout is a bug. Built with -Dfuzz=true by clang; see
// README (Fuzzing) for the commands, the seed corpus (configs/) and longer runs.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "driver/config.hpp"
#include "driver/limits.hpp"
#include "driver/plugins.hpp"
#include "phaselab/kernels.hpp"
#include "plugins/sdk/phaselab_sdk.hpp"

// The kernel registry is not linked into the fuzzer: the target names of this stub are enough
// for `[run] target` checks.
namespace pl {
std::vector<std::string> known_targets() { return {"scalar", "avx2", "avx512", "neon", "sve"}; }
bool target_known(const std::string& isa) {
  for (const auto& t : known_targets())
    if (t == isa) return true;
  return false;
}
bool target_supported(const std::string& isa) { return isa == "scalar" || isa == "avx2"; }
std::string best_target() { return "avx2"; }
}  // namespace pl

namespace {

// Declarations shaped like copy_task's (every parameter type, inclusive/exclusive ranges, an
// enum), named copy_task so the shipped configs are meaningful seeds.
const pl_param_decl kParams[] = {
    pl::sdk::enum_param("attention", "softmax", "softmax|linear", "attention"),
    pl::sdk::int_param("L", 16, "sequence length", 2, 1024),
    pl::sdk::int_param("V", 4, "vocabulary size", 2, 4096),
    pl::sdk::int_param("P", 1000, "training sequences", 1, 100000000),
    pl::sdk::int_param("P_test", 10000, "test sequences", 0, 100000000),
    pl::sdk::float_param("kappa", 1.0, "noise", PL_RANGE_MIN | PL_RANGE_MIN_EXCLUSIVE, 0),
    pl::sdk::float_param("beta1", 0.9, "Adam beta1",
                         PL_RANGE_MIN | PL_RANGE_MAX | PL_RANGE_MAX_EXCLUSIVE, 0, 1),
    pl::sdk::bool_param("causal_mask", false, "mask"),
    pl::sdk::string_param("label", "", "free text"),
    pl::sdk::enum_param("method", "adam", "adam|sgld|langevin", "trainer"),
    pl::sdk::enum_param("init", "both", "both|uniform|copy", "initialisation"),
    pl::sdk::int_param("max_steps", 20000, "steps", 1, INT64_MAX),
};
const char* const kCols[] = {"value"};
const pl_table_decl kTables[] = {pl::sdk::table("results", kCols)};

const pl::driver::Plugin& fuzz_plugin() {
  static const pl::driver::Plugin p = [] {
    pl::driver::Plugin q;
    q.path = "(fuzz)";
    q.entry.abi_version = PL_PLUGIN_ABI_VERSION;
    q.entry.struct_size = sizeof(pl_plugin);
    q.entry.name = "copy_task";
    q.entry.version = "fuzz";
    q.entry.params = kParams;
    q.entry.num_params = uint32_t(sizeof kParams / sizeof kParams[0]);
    q.entry.tables = kTables;
    q.entry.num_tables = 1;
    for (const auto& d : kParams) q.param_names.push_back(d.name);
    return q;
  }();
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pl::driver;
  if (size > kMaxConfigBytes) return 0;  // read_config_text refuses these before parsing
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> errors;
  if (!prescan_toml("fuzz.toml", text, &errors)) return 0;
  toml::table t;
  try {
    t = toml::parse(std::string_view(text), std::string_view("fuzz.toml"));
  } catch (const toml::parse_error&) {
    return 0;
  }
  std::string name, at;
  if (!config_plugin_name(t, "fuzz.toml", &name, &at, &errors)) return 0;
  RunConfig cfg;
  cfg.text = text;
  if (!resolve_config(t, "fuzz.toml", fuzz_plugin(), &cfg, &errors)) return 0;
  if (count_points(cfg) <= 4096) {
    const auto points = enumerate_points(cfg, fuzz_plugin());
    if (points.size() != count_points(cfg)) __builtin_trap();
  }
  return 0;
}
