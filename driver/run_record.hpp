// SPDX-License-Identifier: Apache-2.0
// Reading a run folder back: is a folder a phaselab run, and does a config resolve to the same
// values as the run recorded in its run.json. `--resume` (and a later `merge` of shards) refuse
// a config whose resolved values differ from the run's, naming the keys.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "driver/config.hpp"
#include "driver/figures.hpp"
#include "driver/plugins.hpp"
#include "driver/shard.hpp"

namespace pl::driver {

using json = nlohmann::json;

// A parameter value as JSON: 16, 0.5, true, "softmax".
template <class Json = json>
Json param_json(const ParamValue& v) {
  switch (v.type) {
    case PL_PARAM_INT:
      return Json(v.i);
    case PL_PARAM_FLOAT:
      return Json(v.f);
    case PL_PARAM_BOOL:
      return Json(v.i != 0);
    default:
      return Json(v.s);
  }
}

// The [search] settings as JSON (run.json's config.search; absent without a search).
template <class Json = json>
Json search_json(const SearchSpec& s) {
  Json j;
  j["key"] = s.key;
  if (s.integer) {
    j["min"] = int64_t(s.min);
    j["max"] = int64_t(s.max);
  } else {
    j["min"] = s.min;
    j["max"] = s.max;
  }
  j["scale"] = s.log ? "log" : "linear";
  j["column"] = s.column;
  if (s.has_above) j["above"] = s.above;
  j["rel_tol"] = s.rel_tol;
  j["initial"] = s.initial;
  j["max_evaluations"] = s.max_evaluations;
  return j;
}

// One figure of run.json's "figures": {"name", "png": path (when drawn), "pdf", "svg" (the
// other figure_formats drawn beside it), "note" (why not drawn, or why a PDF or SVG was not)}.
template <class Json = json>
Json figure_json(const FigureResult& f) {
  Json o;
  o["name"] = f.name;
  if (!f.png.empty()) o["png"] = f.png;
  for (const std::string& path : f.also) {
    const size_t dot = path.rfind('.');
    o[dot == std::string::npos ? path : path.substr(dot + 1)] = path;
  }
  std::string note = f.note;
  if (!f.also_note.empty()) note += (note.empty() ? "" : "; ") + f.also_note;
  if (!note.empty()) o["note"] = note;
  return o;
}

// The values that decide a run's results, as JSON:
//   {"plugin": ..., "seeds": [...], "sweep": {key: [values]}, "params": {key: value},
//    "kernel_target": ..., "search": {...} (with [search])}
// params holds every parameter that is not swept (set in the config or at its default).
json resolved_config(const RunConfig& cfg, const Plugin& plugin, const std::string& kernel_target);
// The same object from a run.json that phaselab wrote.
json resolved_from_record(const json& run_json);

// Dotted paths ("params.L", "sweep.P", "seeds") whose values differ between a and b, or that one
// of them lacks; sorted. Objects are compared key by key, anything else as a whole value
// (numbers by value: 2 and 2.0 are equal).
std::vector<std::string> differing_keys(const json& a, const json& b);

// Reads <dir>/run.json. False with *error when it is missing or not phaselab's.
bool read_run_record(const std::string& dir, json* out, std::string* error);

// Whether `dir` may be used as a new run's --out: it does not exist, is empty, or holds a
// phaselab run (run.json written by phaselab, or only a lock file). Otherwise false with a
// message: phaselab never writes into a folder of other files.
bool out_folder_usable(const std::string& dir, std::string* error);

// --resume: the config must resolve to the run's values. False with a message naming the keys
// and both values.
bool check_resume_matches(const std::string& dir, const json& now, std::string* error);

// The command that continues the run in `out` (a shard's own folder for a shard): phaselab run
// with the config's absolute path, --shard I/N and --out of the shards' parent for a shard,
// --target when one was forced, --resume.
std::string resume_command(const std::string& config_file, const ShardSpec& shard,
                           const std::string& target, const std::string& out,
                           const std::vector<std::string>& overrides = {});

// --resume of the folder `dir` must name the same shard as the run did (or none when the run was
// not sharded): resuming a shard's folder without --shard would run every point of the sweep in
// it. False with the message (and the command that continues it).
bool check_resume_shard(const std::string& dir, const std::string& config_file,
                        const ShardSpec& shard, const std::string& target, std::string* error);

}  // namespace pl::driver
