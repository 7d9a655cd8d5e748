// SPDX-License-Identifier: Apache-2.0
// phaselab: the command-line driver. Commands: list, kernels, check, run, merge, plot, new (see
// cli.cc for the options and driver/run.cc for what a run writes).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>

#include "driver/cli.hpp"
#include "driver/config.hpp"
#include "driver/figures.hpp"
#include "driver/json_text.hpp"
#include "driver/limits.hpp"
#include "driver/merge.hpp"
#include "driver/mpi_run.hpp"
#include "driver/new_plugin.hpp"
#include "driver/plan.hpp"
#include "driver/plugins.hpp"
#include "driver/run.hpp"
#include "driver/status.hpp"
#include "driver/text.hpp"
#include "driver/version.h"
#include "phaselab/kernels.hpp"

namespace pl::driver {
namespace {

int cmd_kernels(bool json) {
  const std::string best = pl::best_target();
  if (json) {
    ordered_json kernels = ordered_json::array();
    for (int k = 0; k < pl::kNumKernels; ++k) {
      const pl::Variant* sel = pl::selected_variant(k, "");
      ordered_json variants = ordered_json::array();
      for (const auto& v : pl::variants())
        if (v.kernel == k)
          variants.push_back({{"name", v.name},
                              {"backend", v.backend},
                              {"isa", v.isa},
                              {"supported", v.supported},
                              {"selected", &v == sel}});
      kernels.push_back({{"kernel", pl::kernel_name(k)},
                         {"selected", sel ? sel->name : ""},
                         {"variants", variants}});
    }
    const ordered_json doc = {{"best_target", best}, {"kernels", kernels}};
    std::fputs(json_text(doc).c_str(), stdout);
    return 0;
  }
  std::printf("best target: %s\n", best.c_str());
  for (int k = 0; k < pl::kNumKernels; ++k) {
    const pl::Variant* sel = pl::selected_variant(k, "");
    std::printf("%s\n", pl::kernel_name(k));
    for (const auto& v : pl::variants()) {
      if (v.kernel != k) continue;
      std::printf("  %s %-28s %s\n", &v == sel ? "*" : " ", v.name.c_str(),
                  v.supported ? "supported" : "not supported by this CPU");
    }
  }
  return 0;
}

const char* type_name(pl_param_type t) {
  switch (t) {
    case PL_PARAM_INT:
      return "int";
    case PL_PARAM_FLOAT:
      return "float";
    case PL_PARAM_BOOL:
      return "bool";
    case PL_PARAM_STRING:
      return "string";
    default:
      return "enum";
  }
}

// Warnings about the search path and name clashes, on stderr.
void warn_search(const std::vector<SearchDir>& path, const std::vector<std::string>& clashes) {
  for (const auto& w : search_path_problems(path))
    std::fprintf(stderr, "phaselab: warning: %s\n", w.c_str());
  for (const auto& w : clashes) std::fprintf(stderr, "phaselab: warning: %s\n", w.c_str());
}

std::string not_found(const std::string& name, const std::vector<PluginFile>& files,
                      const std::vector<SearchDir>& path) {
  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(f.name);
  std::string msg = "plugin " + driver::quoted(name) + " not found";
  const std::string dym = did_you_mean(name, names);
  if (!dym.empty()) msg += " (did you mean " + driver::quoted(dym) + "?)";
  return msg + "; searched " + search_path_text(path) +
         " (set PHASELAB_PLUGIN_PATH to add folders)";
}

int cmd_list(const std::string& only) {
  const auto path = plugin_search_path();
  std::vector<std::string> clashes;
  const auto files = discover_plugins(path, &clashes);
  warn_search(path, clashes);
  int shown = 0;
  for (const auto& f : files) {
    if (!only.empty() && f.name != only) continue;
    Plugin p;
    std::string why;
    if (!load_plugin(f, &p, &why)) {
      std::fprintf(stderr, "phaselab: warning: skipping %s: %s\n", f.name.c_str(), why.c_str());
      continue;
    }
    const pl_plugin& e = p.entry;
    std::printf("%s%s %s  %s\n    %s\n", shown ? "\n" : "", e.name, e.version ? e.version : "",
                e.description ? e.description : "", p.path.c_str());
    std::printf("  keys ([%s] or [sweep]):\n", e.name);
    for (uint32_t i = 0; i < e.num_params; ++i) {
      const pl_param_decl& d = e.params[i];
      std::printf("    %-16s %-6s = %-12s %s%s%s\n", d.name, type_name(d.type),
                  describe_default(d).c_str(), d.help ? d.help : "",
                  (d.type == PL_PARAM_INT || d.type == PL_PARAM_FLOAT || d.type == PL_PARAM_ENUM)
                      ? "; "
                      : "",
                  (d.type == PL_PARAM_INT || d.type == PL_PARAM_FLOAT || d.type == PL_PARAM_ENUM)
                      ? describe_expected(d).c_str()
                      : "");
    }
    std::printf("  tables:");
    for (uint32_t t = 0; t < e.num_tables; ++t) {
      std::printf(" %s.csv (", e.tables[t].name);
      for (uint32_t c = 0; c < e.tables[t].num_columns; ++c)
        std::printf("%s%s", c ? ", " : "", e.tables[t].columns[c]);
      std::printf(")%s", t + 1 < e.num_tables ? "," : "");
    }
    std::printf("\n");
    if (e.num_plots) {
      std::printf("  figures:");
      for (uint32_t i = 0; i < e.num_plots; ++i)
        std::printf(" %s%s", e.plots[i].name, i + 1 < e.num_plots ? "," : "");
      std::printf("\n");
    }
    ++shown;
  }
  if (!only.empty() && !shown) {
    bool exists = false;
    for (const auto& f : files) exists = exists || f.name == only;
    if (exists) return kExitPlugin;  // found but not loadable: the warning said why
    std::fprintf(stderr, "phaselab list: error: %s\n", not_found(only, files, path).c_str());
    return kExitPlugin;
  }
  if (!shown) std::printf("no plugins found (searched: %s)\n", search_path_text(path).c_str());
  return 0;
}

void print_errors(const std::vector<std::string>& errors) {
  for (const auto& e : errors) std::fprintf(stderr, "%s\n", e.c_str());
}

// Reads, loads the plugin and resolves: shared by check and run. Returns 0 or an exit code.
int prepare(const std::string& file, const std::vector<std::string>& overrides,
            const std::string& cli_target, Plugin* plugin, RunConfig* cfg) {
  std::vector<std::string> errors;
  toml::table t;
  std::string text;
  if (!parse_config_file(file, &t, &text, &errors) || !apply_overrides(overrides, &t, &errors)) {
    print_errors(errors);
    return kExitUsage;
  }
  std::string name, at;
  if (!config_plugin_name(t, file, &name, &at, &errors)) {
    print_errors(errors);
    return kExitUsage;
  }
  const auto path = plugin_search_path();
  std::vector<std::string> clashes, mine;
  const auto files = discover_plugins(path, &clashes);
  const PluginFile* found = nullptr;
  for (const auto& f : files)
    if (f.name == name) found = &f;
  // Only the clash of the plugin this config uses is worth a warning here.
  for (const auto& c : clashes)
    if (c.rfind("plugin " + driver::quoted(name) + " ", 0) == 0) mine.push_back(c);
  warn_search(path, mine);
  if (!found) {
    std::fprintf(stderr, "%s: error: %s\n", at.c_str(), not_found(name, files, path).c_str());
    return kExitPlugin;
  }
  std::string why;
  if (!load_plugin(*found, plugin, &why)) {
    std::fprintf(stderr, "%s: error: plugin %s: %s\n", at.c_str(), driver::quoted(name).c_str(),
                 why.c_str());
    return kExitPlugin;
  }
  cfg->text = text;
  cfg->overrides = overrides;
  if (!resolve_config(t, file, *plugin, cfg, &errors) || !validate_points(*cfg, *plugin, &errors)) {
    print_errors(errors);
    return kExitUsage;
  }
  if (!check_target(cli_target, &why)) {
    std::fprintf(stderr, "phaselab: error: --target: %s\n", why.c_str());
    return kExitUsage;
  }
  return 0;
}

int cmd_check(const Args& a) {
  Plugin plugin;
  RunConfig cfg;
  const std::string target = a.has("--target") ? a.options.at("--target") : "";
  if (int rc = prepare(a.positional[0], a.overrides, target, &plugin, &cfg)) return rc;
  std::string why;
  if (!a.has("--force") &&
      !check_memory(cfg, plugin,
                    cfg.threads > 0 ? int(cfg.threads) : int(std::thread::hardware_concurrency()),
                    &why)) {
    std::fprintf(stderr, "%s\n", why.c_str());
    return kExitUsage;
  }
  std::string shape;
  for (const auto& ax : cfg.sweep) shape += std::to_string(ax.values.size()) + " " + ax.key + " x ";
  if (cfg.search.on) {
    const SearchSpec& s = cfg.search;
    const uint64_t n = count_points(cfg);
    std::printf(
        "%s: ok: plugin %s %s, %llu search%s (%s%zu seed%s) for the boundaries of %s along %s in "
        "[%s, %s] (%s, rel_tol %s, initial grid of %lld, at most %lld points each)\n",
        cfg.file.c_str(), cfg.plugin.c_str(), plugin.entry.version ? plugin.entry.version : "",
        (unsigned long long)n, n == 1 ? "" : "es", shape.c_str(), cfg.seeds.size(),
        cfg.seeds.size() == 1 ? "" : "s", s.column.c_str(), s.key.c_str(),
        format_double(s.min).c_str(), format_double(s.max).c_str(), s.log ? "log" : "linear",
        format_double(s.rel_tol).c_str(), (long long)s.initial, (long long)s.max_evaluations);
    return 0;
  }
  std::printf("%s: ok: plugin %s %s, %llu points (%s%zu seed%s)\n", cfg.file.c_str(),
              cfg.plugin.c_str(), plugin.entry.version ? plugin.entry.version : "",
              (unsigned long long)count_points(cfg), shape.c_str(), cfg.seeds.size(),
              cfg.seeds.size() == 1 ? "" : "s");
  return 0;
}

int cmd_run(const Args& a, int argc, char** argv) {
  RunOptions opt;
  if (a.has("--threads")) {
    const std::string& s = a.options.at("--threads");
    char* end = nullptr;
    const long n = std::strtol(s.c_str(), &end, 10);
    if (s.empty() || *end || n < 0 || n > 4096) {
      std::fprintf(
          stderr,
          "phaselab run: error: --threads must be an integer in [0, 4096] (0 = all cores), got "
          "%s\n",
          driver::quoted(s).c_str());
      return kExitUsage;
    }
    opt.threads = n;
  }
  if (a.has("--out")) opt.out = a.options.at("--out");  // never empty (parse_args)
  if (a.has("--target")) opt.target = a.options.at("--target");
  opt.resume = a.has("--resume");
  opt.quiet = a.has("--quiet");
  opt.force = a.has("--force");
  for (int i = 0; i < argc; ++i) opt.argv.push_back(argv[i]);
  std::string why;
  // --plan --shard auto/N (or N): only the count matters, no scheduler environment needed.
  std::string shard_text = a.has("--shard") ? a.options.at("--shard") : "";
  if (a.has("--plan") && !shard_text.empty() &&
      shard_text.find_first_not_of("0123456789") == std::string::npos)
    shard_text = "0/" + shard_text;
  if (a.has("--plan") && shard_text.rfind("auto/", 0) == 0)
    shard_text = "0/" + shard_text.substr(5);
  if (a.has("--shard") &&
      !parse_shard(
          shard_text, [](const char* v) -> const char* { return std::getenv(v); }, &opt.shard,
          &why)) {
    std::fprintf(stderr, "phaselab run: error: %s\n", why.c_str());
    return kExitUsage;
  }
  if (!mpi_start(&argc, &argv, &why)) {
    std::fprintf(stderr, "phaselab run: error: %s\n", why.c_str());
    return mpi_end(kExitUsage);
  }
  Plugin plugin;
  RunConfig cfg;
  if (int rc = prepare(a.positional[0], a.overrides, opt.target, &plugin, &cfg)) return mpi_end(rc);
  if (a.has("--plan")) return mpi_end(mpi_rank() > 0 ? 0 : plan_run(cfg, plugin, opt));
  if (mpi_rank() > 0) return mpi_end(mpi_worker(cfg, plugin, opt));
  return mpi_end(execute_run(cfg, plugin, opt));
}

int cmd_merge(const Args& a, int argc, char** argv) {
  MergeOptions opt;
  opt.out = a.positional[0];
  opt.shards.assign(a.positional.begin() + 1, a.positional.end());
  opt.quiet = a.has("--quiet");
  opt.partial = a.has("--partial");
  for (int i = 0; i < argc; ++i) opt.argv.push_back(argv[i]);
  return execute_merge(opt);
}

int cmd_plot(const Args& a) {
  if (!a.has("--out")) {
    std::fprintf(stderr, "phaselab plot: error: --out FIG.png (or .pdf, .svg) is required\n");
    return kExitUsage;
  }
  PlotSpec spec;
  spec.out = a.options.at("--out");
  if (a.has("--title")) spec.title = a.options.at("--title");
  if (a.has("--xlabel")) spec.xlabel = a.options.at("--xlabel");
  if (a.has("--ylabel")) spec.ylabel = a.options.at("--ylabel");
  spec.logx = a.has("--logx");
  spec.logy = a.has("--logy");
  for (const auto& word : a.positional) {
    SeriesSpec s;
    std::string why;
    if (!parse_series(word, &s, &why)) {
      std::fprintf(stderr, "phaselab plot: error: %s\n", why.c_str());
      return kExitUsage;
    }
    spec.series.push_back(s);
  }
  const PlotOutcome o = draw_plot(spec);
  for (const auto& w : o.warnings) std::fprintf(stderr, "phaselab plot: warning: %s\n", w.c_str());
  if (o.status) {
    std::fprintf(stderr, "phaselab plot: error: %s\n", o.error.c_str());
    return o.status;
  }
  if (o.figure.png.empty())
    std::fprintf(stderr, "phaselab plot: %s not drawn: %s; wrote its .gp, .dat and .csv\n",
                 spec.out.c_str(), o.figure.note.c_str());
  return 0;
}

}  // namespace
}  // namespace pl::driver

namespace pl::driver {
namespace {
int main_command(int argc, char** argv) {
  Args a;
  if (!parse_args(argc, argv, &a)) return kExitUsage;
  if (a.command.empty()) {
    if (a.has("--version")) {
      std::printf("phaselab %s (git %s)\n", PHASELAB_VERSION, git_commit().c_str());
      return 0;
    }
    if (a.has("--help")) {
      print_usage(stdout);
      return 0;
    }
    print_usage(stderr);
    return kExitUsage;
  }
  if (a.has("--help")) {
    print_command_help(a.command);
    return 0;
  }
  if (a.command == "kernels") return cmd_kernels(a.has("--json"));
  if (a.command == "list") return cmd_list(a.positional.empty() ? "" : a.positional[0]);
  if (a.command == "check") return cmd_check(a);
  if (a.command == "new")
    return cmd_new(a.positional[0], a.has("--dir") ? a.options.at("--dir") : "");
  if (a.command == "merge") return cmd_merge(a, argc, argv);
  if (a.command == "plot") return cmd_plot(a);
  if (a.command == "status") return execute_status(a.positional[0], a.has("--json"));
  return cmd_run(a, argc, argv);
}
}  // namespace
}  // namespace pl::driver

int main(int argc, char** argv) {
  // An allocation that fails anywhere (a huge sweep, a corrupt file's sizes) ends with a message
  // and exit status 5, not an abort; the objects on the way out release the run folder's lock.
  try {
    return pl::driver::main_command(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "phaselab: error: out of memory (an allocation failed)\n");
  } catch (const std::length_error& e) {
    std::fprintf(stderr, "phaselab: error: out of memory (a size too large: %s)\n", e.what());
  }
  return pl::driver::kExitWrite;
}
