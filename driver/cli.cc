// SPDX-License-Identifier: Apache-2.0
#include "driver/cli.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>

#include "driver/text.hpp"

namespace pl::driver {
namespace {

struct OptionSpec {
  const char* name;
  bool takes_value;
};
struct CommandSpec {
  const char* name;
  const char* synopsis;
  int positional;  // expected positional arguments (-1: zero or one; -n, n >= 2: at least n - 1)
  std::vector<OptionSpec> options;
  const char* help;
};

const std::vector<CommandSpec>& commands() {
  static const std::vector<CommandSpec> c = {
      {"list",
       "phaselab list [NAME]",
       -1,
       {{"--help", false}},
       "Lists the plugins found on the search path (the folders of PHASELAB_PLUGIN_PATH,\n"
       "colon-separated, then the plugin folder of this phaselab: the build's, or the installed\n"
       "one) with their file, version, description, the config keys they accept (type, default,\n"
       "range, help), result tables and figures; with NAME only that plugin (exit 3 if absent).\n"
       "A name found in two folders is reported: the first folder on the path wins.\n"},
      {"kernels",
       "phaselab kernels [--json]",
       0,
       {{"--json", false}, {"--help", false}},
       "Lists every kernel with every compiled variant, whether this CPU supports it, and the\n"
       "one dispatch selects (marked *). --json prints the same as JSON.\n"},
      {"new",
       "phaselab new NAME [--dir DIR]",
       1,
       {{"--dir", true}, {"--help", false}},
       "Writes a new plugin folder (DIR, default NAME) from the template: NAME.cc (a working\n"
       "experiment, Ornstein-Uhlenbeck particles, showing parameters, validate, tables, plots,\n"
       "random streams, kernels and finish), test_NAME.cc (tests through the SDK's test host),\n"
       "NAME.toml (a config) and meson.build (finds the installed SDK with pkg-config). Then:\n"
       "  cd DIR && meson setup build && meson test -C build\n"
       "  PHASELAB_PLUGIN_PATH=build phaselab run NAME.toml\n"
       "The guide: docs/plugins.md.\n"},
      {"check",
       "phaselab check CONFIG.toml [KEY=VALUE...] [--target NAME]",
       1,
       {{"--target", true}, {"--force", false}, {"--help", false}},
       "Validates a config without running it: TOML syntax, every key, type and range against the\n"
       "plugin's declarations, the sweep, the kernel target, and the plugin's own check of every\n"
       "sweep point. Prints the number of points. Exit 0 if valid, 2 if not, 3 if the plugin\n"
       "cannot be loaded. KEY=VALUE overrides as for `phaselab run`.\n"},
      {"run",
       "phaselab run CONFIG.toml [KEY=VALUE...] [--out DIR] [--threads N] [--target NAME]\n"
       "             [--resume] [--quiet] [--force] [--shard I/N|auto|auto/N] [--plan]",
       1,
       {{"--out", true},
        {"--plan", false},
        {"--shard", true},
        {"--threads", true},
        {"--target", true},
        {"--resume", false},
        {"--quiet", false},
        {"--force", false},
        {"--help", false}},
       "Runs every sweep point x seed of the config in parallel and writes the run folder:\n"
       "  results.csv    one row per point (more if the plugin emits several): sweep keys, seed,\n"
       "                 then the plugin's columns; appended as each point finishes, rewritten in\n"
       "                 point order at the end (identical for any --threads)\n"
       "  <table>.csv    the plugin's other tables, same leading columns\n"
       "  failures.csv   points that failed (sweep keys, seed, error); only if any failed\n"
       "  run.json       config, versions, git commit, CPU, kernel variants, threads, times,\n"
       "                 per-point status and duration, exit status\n"
       "  figures/       <plot>.png drawn by gnuplot from <plot>.gp and <plot>.dat\n"
       "overrides (after the config, any number):\n"
       "  KEY=VALUE      sets KEY (a dotted path: copy_task.L=32, run.seeds=3, sweep.P=[10,100])\n"
       "                 as if the config file said it; VALUE is a TOML value (a word that is\n"
       "                 not one is a string: copy_task.attention=linear). Checked like the file;\n"
       "                 recorded in run.json (config.overrides)\n"
       "options:\n"
       "  --out DIR      run folder (default: [run] out, else runs/<name>-<UTC timestamp>)\n"
       "  --threads N    points run in parallel (default: [run] threads; 0 = all cores)\n"
       "  --target NAME  force a kernel target for the whole run (scalar, avx2, avx512, neon, "
       "sve,\n"
       "                 ...; see `phaselab kernels`); refused if the CPU lacks it\n"
       "  --resume       continue the run in --out: skip points already in results.csv,\n"
       "                 run again those that failed or were not run\n"
       "  --quiet        no progress output (warnings, errors and failures still print)\n"
       "  --force        run even if the run's memory estimate exceeds 80% of this machine's\n"
       "                 memory\n"
       "  --plan         run nothing: print each shard's points, share of the plugin's cost\n"
       "                 estimate and memory estimate, and sbatch --cpus-per-task/--mem; with\n"
       "                 --out DIR holding finished points of this config (a run or shard\n"
       "                 folders), also CPU and wall seconds per shard and --time\n"
       "  --shard I/N    run shard I (0-based) of N, a fixed 1/N of the points, into\n"
       "                 DIR/shard-I-of-N (--out DIR is required); `phaselab merge` joins them.\n"
       "                 auto: I and N from a job array's environment (SLURM_ARRAY_TASK_ID/_MIN/\n"
       "                 _COUNT); auto/N: the index from SGE_TASK_ID, PBS_ARRAY_INDEX, "
       "PBS_ARRAYID,\n"
       "                 LSB_JOBINDEX, JOB_COMPLETION_INDEX (Kubernetes) or PARALLEL_SEQ (GNU\n"
       "                 parallel), the count N given (or PHASELAB_SHARD_COUNT)\n"
       "Under mpirun (a build with MPI) the ranks share the run: rank 0 writes the folder and\n"
       "hands points to the other ranks as they ask; each rank uses --threads threads.\n"
       "Ctrl-C stops cleanly: finished points stay in results.csv, run.json says interrupted\n"
       "(exit 130); a second Ctrl-C aborts at once, still recording in run.json which points\n"
       "finished. One phaselab at a time writes a run folder (run.lock).\n"
       "exit status: 0 ok, 2 usage or config error, 3 plugin load or ABI error, 4 a point failed\n"
       "(recorded with its reason; the other points still ran), 5 the run folder could not be\n"
       "written (disk full, I/O error: path and errno printed; --resume continues) or memory ran\n"
       "out.\n"},
      {"merge",
       "phaselab merge OUT SHARD_DIR... [--partial] [--quiet]",
       -3,
       {{"--quiet", false}, {"--partial", false}, {"--help", false}},
       "Joins the shard folders of `phaselab run --shard I/N` into the run folder OUT, as if the\n"
       "run had not been sharded: results.csv, the side tables and failures.csv byte-identical to\n"
       "an unsharded run's, run.json for every point (with the shards it came from), and the\n"
       "plugin's summaries and figures made once from the merged files. Refused (exit 2, nothing\n"
       "written) when a folder is not a finished shard (its `--resume` command is printed), when\n"
       "shards differ in config, phaselab or plugin version or kernel variants (the keys are\n"
       "named), when a shard is given twice or shards are missing (their points are named).\n"
       "  phaselab merge runs/x runs/x/shard-*\n"
       "--partial merges what has finished while shards are missing or unfinished (their\n"
       "journaled points; rows of a point cut off mid-write are left out): run.json says\n"
       "\"partial\" and lists the missing shards and points, figure titles say \"partial: N of\n"
       "M points\". Merging again into the same folder once every shard is done completes it,\n"
       "byte-identical to a full merge. ([search] runs: not yet.)\n"
       "exit status: 0 ok, 2 refused, 4 some points failed (failures.csv), 5 a file could not be\n"
       "written (disk full: free space and merge again into the same folder).\n"},
      {"status",
       "phaselab status OUT [--json]",
       1,
       {{"--json", false}, {"--help", false}},
       "Where a run folder, or a folder of shards (OUT/shard-I-of-N), stands, without changing\n"
       "it: per part its status, whether a live phaselab holds its lock (or the lock is stale:\n"
       "its process died), points done, failed and left (from journal.csv and failures.csv,\n"
       "current while a run goes on), missing shards, the point seconds so far and an estimate\n"
       "of what is left, and the commands that finish the run: each unfinished shard's --resume,\n"
       "the same as an `sbatch --array=` list for scripts/slurm/sweep.sbatch, and the merge.\n"
       "--json prints the same for scripts.\n"
       "exit status: 0 ok, 2 OUT is neither a run folder nor a folder of shards.\n"},
      {"plot",
       "phaselab plot --out FIG.png [--title T] [--xlabel X] [--ylabel Y] [--logx] [--logy]\n"
       "              SERIES...",
       -2,
       {{"--out", true},
        {"--title", true},
        {"--xlabel", true},
        {"--ylabel", true},
        {"--logx", false},
        {"--logy", false},
        {"--help", false}},
       "Draws series selected from the CSV tables of run folders on one figure, with the code\n"
       "that draws a run's figures. Each SERIES (one word; quote it) is\n"
       "  TABLE:x=COL:y=COL[,COL]:where=COL=V[,COL=V]:group=COL[,COL]:title=TEXT:style=KIND\n"
       "  TABLE     a CSV file, or a run folder (its results.csv)\n"
       "  x=, y=    the columns drawn (several y: one curve each); rows whose x or y is empty or\n"
       "            not a number (or <= 0 on a log axis) are skipped\n"
       "  where=    keep the rows where every COL equals V (numbers compare by value: 1 = 1.0)\n"
       "  group=    one curve per distinct combination of these columns' values\n"
       "  title=    the legend entry: {COL} is a group column's value, {param:NAME} a parameter\n"
       "            from run.json beside the table (default: the group values)\n"
       "  style=    lines (rows in order of x), points (every row), linespoints, or mean (mean\n"
       "            +- standard error per x, as run figures draw lines), then gnuplot options:\n"
       "            style=lines lw 2 dt 3 (a colour, dash or marker given replaces the default)\n"
       "x= and y= are needed; a colon starts a field only before x=, y=, where=, group=, title=\n"
       "or style=. A column named anywhere that is not in its table is an error naming both.\n"
       "Writes FIG.png and beside it FIG.gp (redraw: cd DIR && gnuplot FIG.gp), FIG.dat (the\n"
       "blocks drawn) and FIG.csv (series,x,y,se,n, then one column per group= column: the\n"
       "values drawn). --out FIG.pdf or FIG.svg draws a vector figure instead (gnuplot's\n"
       "pdfcairo or svg terminal), the same files beside. --title may use {param:NAME} of the\n"
       "first series' run. Example (docs/figures.md):\n"
       "  phaselab plot --out fig/cG.png --logx --title 'softmax, L={param:L}' \\\n"
       "    'runs/th:x=P:y=cG:where=attention=softmax,objective=map,rest_logits=zero:group=branch' "
       "\\\n"
       "    'runs/ex:x=P:y=cG:where=attention=softmax:group=init:title=Adam {init}:style=points'\n"
       "exit status: 0 drawn, or gnuplot missing (the .gp, .dat and .csv are written and a\n"
       "message says so), 2 usage or selection error (nothing written), 5 a file could not be\n"
       "written or gnuplot failed.\n"},
  };
  return c;
}

const CommandSpec* find_command(const std::string& name) {
  for (const auto& c : commands())
    if (name == c.name) return &c;
  return nullptr;
}

// The command's options and words, split by CLI11 (--key value, --key=value, -h, a repeated
// option: the last wins). The messages stay phaselab's own: an unknown option with a
// did-you-mean, an option without its value, a flag given a value.
bool split_options(const CommandSpec& spec, int argc, char** argv, Args* out) {
  // The words after the command's name only: no CLI11 subcommand, so that an option's value may
  // be any word, a command's name included (`--out run`).
  CLI::App cmd{"phaselab"};
  cmd.set_help_flag();  // the help texts above, not CLI11's
  cmd.allow_extras();   // unknown options are reported below, with a did-you-mean
  std::vector<std::pair<const OptionSpec*, CLI::Option*>> options;
  for (const auto& o : spec.options) {
    const std::string names = std::string(o.name) == "--help" ? "-h,--help" : o.name;
    // A value option takes 0 or 1 values, so that a missing one is reported by name below
    // (and `--threads --quiet` is not read as --threads "--quiet").
    options.push_back({&o, o.takes_value
                               ? cmd.add_option(names)->expected(0, 1)->multi_option_policy(
                                     CLI::MultiOptionPolicy::TakeLast)
                               : cmd.add_flag(names)});
  }
  std::vector<std::string> words;
  cmd.add_option("arguments", words);
  std::vector<std::string> rest(argv + std::min(argc, 2), argv + argc);
  std::reverse(rest.begin(), rest.end());  // CLI11 takes the words last first
  try {
    cmd.parse(rest);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "phaselab %s: error: %s\n", spec.name, e.what());
    return false;
  }
  for (std::string a : cmd.remaining()) {
    if (a.empty() || a[0] != '-') continue;
    a = a.substr(0, a.find('='));
    std::vector<std::string> names;
    for (const auto& o : spec.options) names.push_back(o.name);
    const std::string dym = did_you_mean(a, names);
    std::fprintf(stderr, "phaselab %s: error: unknown option %s%s\n", spec.name, a.c_str(),
                 dym.empty() ? "" : (" (did you mean " + dym + "?)").c_str());
    return false;
  }
  out->positional = words;
  for (const auto& [o, opt] : options) {
    if (!opt->count()) continue;
    // CLI11 gives a missing value (the option last, or before another option) as "", as it
    // gives --key= and --key '': every one of them is a value missing.
    if (o->takes_value && (opt->results().empty() || opt->results().back().empty())) {
      std::fprintf(stderr, "phaselab %s: error: option %s needs a value\n", spec.name, o->name);
      return false;
    }
    if (!o->takes_value && opt->results() != std::vector<std::string>(opt->count(), "true")) {
      std::fprintf(stderr, "phaselab %s: error: option %s takes no value\n", spec.name, o->name);
      return false;
    }
    out->options[o->name] = o->takes_value ? opt->as<std::string>() : "";
  }
  return true;
}

// Whether the command has the words it needs (help needs none).
bool check_positional(const CommandSpec& spec, const Args& args) {
  if (args.has("--help")) return true;
  if (spec.positional == -1 && args.positional.size() <= 1) return true;
  if (spec.positional <= -2) {
    if (int(args.positional.size()) >= -spec.positional - 1) return true;
    std::fprintf(stderr, "phaselab %s: error: missing arguments\nusage: %s\n", spec.name,
                 spec.synopsis);
    return false;
  }
  if (int(args.positional.size()) != spec.positional) {
    if (spec.positional == 1 && args.positional.empty())
      std::fprintf(stderr, "phaselab %s: error: missing %s\nusage: %s\n", spec.name,
                   std::string(spec.name) == "new" ? "NAME" : "CONFIG.toml", spec.synopsis);
    else
      std::fprintf(stderr, "phaselab %s: error: unexpected argument %s\nusage: %s\n", spec.name,
                   quoted(args.positional.back()).c_str(), spec.synopsis);
    return false;
  }
  return true;
}

}  // namespace

void print_usage(std::FILE* f) {
  std::fprintf(
      f,
      "usage: phaselab COMMAND [ARGS]\n"
      "\n"
      "commands:\n"
      "  list [NAME]               plugins found, with their config keys\n"
      "  kernels [--json]          every kernel variant: supported here? selected?\n"
      "  check CONFIG.toml         validate a config without running it\n"
      "  new NAME [--dir DIR]      write a new plugin folder from the template\n"
      "  run CONFIG.toml [...]     run a config (--out --threads --target --resume --quiet\n"
      "                            --shard)\n"
      "  merge OUT SHARD_DIR...    join the shards of a run into one run folder\n"
      "  status OUT [--json]       where a run or its shards stand, and what finishes it\n"
      "  plot --out FIG.png SERIES...\n"
      "                            draw series from run folders' tables on one figure\n"
      "\n"
      "  phaselab COMMAND --help   help for one command\n"
      "  phaselab --version        version and git commit\n"
      "\n"
      "exit status: 0 ok, 2 usage or config error, 3 plugin load or ABI error,\n"
      "4 a point failed (the others still ran), 5 a file could not be written (disk full,\n"
      "I/O error) or memory ran out, 130 interrupted (Ctrl-C, SIGTERM, SIGHUP, SIGPIPE).\n"
      "plugin search path: PHASELAB_PLUGIN_PATH, then this phaselab's plugin folder.\n");
}

bool print_command_help(const std::string& command) {
  const CommandSpec* c = find_command(command);
  if (!c) return false;
  std::printf("usage: %s\n\n%s", c->synopsis, c->help);
  return true;
}

bool parse_args(int argc, char** argv, Args* out) {
  *out = Args{};
  if (argc < 2) return true;
  const std::string first = argv[1];
  if (first.rfind("--", 0) == 0 || first == "-h") {
    if (first == "--help" || first == "-h" || first == "--version") {
      out->options[first == "-h" ? "--help" : first] = "";
      return true;
    }
    std::fprintf(stderr, "phaselab: error: unknown option %s (try phaselab --help)\n",
                 first.c_str());
    return false;
  }
  const CommandSpec* spec = find_command(first);
  if (!spec) {
    std::vector<std::string> names;
    for (const auto& c : commands()) names.push_back(c.name);
    const std::string dym = did_you_mean(first, names);
    std::fprintf(
        stderr,
        "phaselab: error: unknown command %s%s (commands: list, kernels, check, run, merge, "
        "status, plot, new)\n",
        quoted(first).c_str(), dym.empty() ? "" : (" (did you mean " + dym + "?)").c_str());
    return false;
  }
  out->command = first;
  if (!split_options(*spec, argc, argv, out)) return false;
  if (out->command == "run" || out->command == "check") {
    // key=value overrides after the config (config.hpp: apply_overrides).
    std::vector<std::string> kept;
    for (size_t i = 0; i < out->positional.size(); ++i) {
      const std::string& w = out->positional[i];
      (i > 0 && w.find('=') != std::string::npos ? out->overrides : kept).push_back(w);
    }
    out->positional = kept;
  }
  return check_positional(*spec, *out);
}

}  // namespace pl::driver
