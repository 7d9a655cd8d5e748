// SPDX-License-Identifier: Apache-2.0
// Reading a run config (TOML) against a plugin's declarations. Every problem becomes one
// "file:line:col: error: ..." line; the caller prints them and exits 2 without running anything.
//
//   plugin = "copy_task"        # which plugin; its table below holds scalar parameter values
//   name = "copy_default"       # optional, names the default output folder
//   [run]    seeds = 4 (count: seeds 0..3) or [1, 7, 9]; threads = 0 (all cores);
//            out = "runs/x"; target = "avx2" (kernel target, default best);
//            figure_formats = ["png", "pdf", "svg"] (run and merge figures; default ["png"])
//   [sweep]  every key is a plugin parameter with a non-empty list of values; the run is the
//            Cartesian product, in file order (last key varies fastest), times the seeds
//   [search] key = "K" (an int or float parameter, not swept), min, max, scale = "log"|"linear",
//            column = "phase" (a results column that labels a point), above = X (optional:
//            a numeric column labelled "above"/"below" X), rel_tol = 0.2, initial = 5,
//            max_evaluations = 64: each sweep combination x seed is a bisection search for the
//            values of `key` where the label changes (driver/search.hpp)
//   [copy_task]  scalar parameter values (defaults from the plugin otherwise)
#pragma once

#include <toml++/toml.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "phaselab_plugin.h"

namespace pl::driver {

struct Plugin;

struct ParamValue {
  pl_param_type type = PL_PARAM_INT;
  int64_t i = 0;  // int, bool (0/1), enum index
  double f = 0;   // float, and ints converted
  std::string s;  // string, enum choice
};
// CSV text of a value: 16, 0.5, true, softmax.
std::string value_text(const ParamValue& v);

struct SweepAxis {
  std::string key;
  uint32_t param = 0;  // index into the plugin's declarations
  std::vector<ParamValue> values;
};

// [search]: a boundary search along one numeric parameter (driver/search.hpp).
struct SearchSpec {
  bool on = false;
  std::string key;
  uint32_t param = 0;    // index into the plugin's declarations
  bool integer = false;  // an int parameter: values rounded, adjacent integers are final
  double min = 0, max = 0;
  bool log = true;     // scale = "log" (geometric midpoints) or "linear"
  std::string column;  // results.csv column whose value on a point's final row labels it
  bool has_above = false;
  double above = 0;      // numeric column: label "above" when the value is > above, else "below"
  double rel_tol = 0.2;  // done when hi/lo <= 1 + rel_tol (log) or hi - lo <= rel_tol (max - min)
  int64_t initial = 5;   // first grid, evenly spaced in the scale, both ends included
  int64_t max_evaluations = 64;  // per search; a search that reaches it is reported unconverged
};

struct RunConfig {
  std::string file;  // as given on the command line (used in messages)
  std::string text;  // the TOML source, recorded in run.json
  std::string plugin;
  std::string name;                    // config `name`, else the file's stem
  std::vector<uint64_t> seeds{0};      // default: one seed, 0
  int64_t threads = 0;                 // 0: all cores
  std::string out;                     // empty: runs/<name>-<timestamp>
  std::string target;                  // empty: best
  std::vector<SweepAxis> sweep;        // in file order
  std::vector<ParamValue> base;        // per declared parameter: plugin table value or default
  std::vector<bool> base_set;          // set in the plugin's table (else the default)
  SearchSpec search;                   // [search], when on
  std::vector<std::string> overrides;  // key=value from the command line, as given
  // [run] figure_formats: "png", and "pdf" / "svg" drawn beside each PNG (run and merge figures)
  std::vector<std::string> figure_formats{"png"};
};

// Whether the plugin parameter `param` varies across points: a sweep key, or the searched key.
bool swept(const RunConfig& cfg, size_t param);

// Reads and parses the file. On failure appends a message line and returns false.
bool parse_config_file(const std::string& file, toml::table* out, std::string* text,
                       std::vector<std::string>* errors);
// Applies command-line overrides ("copy_task.L=32", "sweep.P=[10,100]", "run.seeds=3") to the
// parsed file before resolve_config, which then checks them exactly like the file's keys: the
// value is parsed as a TOML value (a word that does not parse is taken as a string), and the
// dotted key is set in its table (created if absent). A problem of an override, here or in
// resolve_config, is reported at "override KEY=VALUE" instead of a file position. False (with
// messages) if an override is malformed or its key path runs through a non-table.
bool apply_overrides(const std::vector<std::string>& overrides, toml::table* t,
                     std::vector<std::string>* errors);

// The plugin name from `plugin = "..."` (with its position for messages).
bool config_plugin_name(const toml::table& t, const std::string& file, std::string* name,
                        std::string* where, std::vector<std::string>* errors);
// Checks every key, type and range against the plugin and fills `cfg`. False if any errors.
bool resolve_config(const toml::table& t, const std::string& file, const Plugin& plugin,
                    RunConfig* cfg, std::vector<std::string>* errors);
// Checks a kernel target name ("" or "best" = best); on failure returns a message.
bool check_target(const std::string& target, std::string* error);

// The sweep point x seed list, in run order: sweep combinations in file order (last key
// fastest), seeds innermost.
struct Point {
  uint64_t index = 0;
  uint64_t seed = 0;
  std::vector<ParamValue> params;      // every declared parameter, resolved
  std::vector<std::string> key_cells;  // sweep values then seed, as written in results.csv
  std::string key;                     // key_cells joined: identifies the point on --resume
  uint64_t point_key = 0;              // hash of all parameter values (not the seed)
  std::string label;                   // "L=16 attention=softmax seed=1"
};
// Sweep combinations x seeds: the points of a plain run, the searches of a [search] run.
uint64_t count_points(const RunConfig& cfg);
std::vector<Point> enumerate_points(const RunConfig& cfg, const Plugin& plugin);
std::string join_key(const std::vector<std::string>& cells);
// Every sweep combination (all declared parameters resolved), in run order.
std::vector<std::vector<ParamValue>> sweep_combinations(const RunConfig& cfg);
// A point's point_key: a hash of every parameter value that differs from its default.
uint64_t point_params_hash(const Plugin& plugin, const std::vector<ParamValue>& params);
// "L=16 attention=softmax": the sweep keys' values of `params`.
std::string sweep_label(const RunConfig& cfg, const std::vector<ParamValue>& params);

// Calls the plugin's validate() once per sweep combination; appends errors.
bool validate_points(const RunConfig& cfg, const Plugin& plugin, std::vector<std::string>* errors);

std::vector<pl_value> to_pl_values(const std::vector<ParamValue>& params);

}  // namespace pl::driver
