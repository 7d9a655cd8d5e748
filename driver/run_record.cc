// SPDX-License-Identifier: Apache-2.0
#include "driver/run_record.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "driver/text.hpp"

namespace pl::driver {
namespace {

void diff(const json& a, const json& b, const std::string& path, std::vector<std::string>* out) {
  if (a.is_object() && b.is_object()) {
    for (auto it = a.begin(); it != a.end(); ++it) {
      const std::string p = path.empty() ? it.key() : path + "." + it.key();
      if (!b.contains(it.key()))
        out->push_back(p);
      else
        diff(it.value(), b.at(it.key()), p, out);
    }
    for (auto it = b.begin(); it != b.end(); ++it)
      if (!a.contains(it.key())) out->push_back(path.empty() ? it.key() : path + "." + it.key());
    return;
  }
  if (a != b) out->push_back(path.empty() ? "(whole)" : path);
}

const json* at_path(const json& j, const std::string& dotted) {
  const json* cur = &j;
  size_t pos = 0;
  while (pos <= dotted.size()) {
    const size_t dot = dotted.find('.', pos);
    const std::string k =
        dotted.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    if (!cur->is_object() || !cur->contains(k)) return nullptr;
    cur = &cur->at(k);
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  return cur;
}

std::string shown(const json* v) {
  if (!v) return "(absent)";
  std::string s = v->dump();
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

}  // namespace

json resolved_config(const RunConfig& cfg, const Plugin& plugin, const std::string& kernel_target) {
  json j = json::object();
  j["plugin"] = cfg.plugin;
  j["seeds"] = cfg.seeds;
  j["sweep"] = json::object();
  for (const auto& a : cfg.sweep) {
    json vals = json::array();
    for (const auto& v : a.values) vals.push_back(param_json(v));
    j["sweep"][a.key] = vals;
  }
  j["params"] = json::object();
  for (size_t i = 0; i < cfg.base.size(); ++i)
    if (!swept(cfg, i)) j["params"][plugin.param_names[i]] = param_json(cfg.base[i]);
  j["kernel_target"] = kernel_target;
  if (cfg.search.on) j["search"] = search_json(cfg.search);
  return j;
}

json resolved_from_record(const json& r) {
  json j = json::object();
  const json& c = r.value("config", json::object());
  j["plugin"] = c.value("plugin", json());
  j["seeds"] = c.contains("run") ? c["run"].value("seeds", json()) : json();
  j["sweep"] = c.value("sweep", json::object());
  j["params"] = c.value("params", json::object());
  j["kernel_target"] = r.value("kernel_target", json());
  if (c.contains("search")) j["search"] = c["search"];
  return j;
}

std::vector<std::string> differing_keys(const json& a, const json& b) {
  std::vector<std::string> out;
  diff(a, b, "", &out);
  std::sort(out.begin(), out.end());
  return out;
}

bool read_run_record(const std::string& dir, json* out, std::string* error) {
  const std::string path = dir + "/run.json";
  std::string text, why;
  if (!read_file(path, &text, &why)) {
    *error = "cannot read " + path + ": " + why;
    return false;
  }
  try {
    *out = json::parse(text);
  } catch (const std::exception& e) {
    *error = path + " is not valid JSON (" + e.what() + ")";
    return false;
  }
  if (!out->is_object() || !out->contains("phaselab_version") || !out->contains("config")) {
    *error = path + " was not written by phaselab";
    return false;
  }
  return true;
}

bool out_folder_usable(const std::string& dir, std::string* error) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (!fs::exists(st)) return true;  // created by the run
  if (!fs::is_directory(st)) {
    *error = pl::driver::quoted(dir) + " exists and is not a folder";
    return false;
  }
  std::vector<std::string> names;
  fs::directory_iterator it(dir, ec);
  for (const fs::directory_iterator end; !ec && it != end; it.increment(ec))
    names.push_back(it->path().filename().string());
  if (ec) {
    *error = "cannot read folder " + pl::driver::quoted(dir) + ": " + ec.message();
    return false;
  }
  // phaselab's own transient files (a run starting or one that died at its start) do not count.
  names.erase(std::remove_if(names.begin(), names.end(),
                             [](const std::string& n) {
                               return n == "run.lock" || n == "run.reserve" || n == "run.json.tmp";
                             }),
              names.end());
  if (names.empty()) return true;
  json rec;
  std::string why;
  if (read_run_record(dir, &rec, &why)) return true;
  std::sort(names.begin(), names.end());
  std::string list;
  for (size_t i = 0; i < names.size() && i < 5; ++i) list += (i ? ", " : "") + names[i];
  if (names.size() > 5) list += ", ... (" + std::to_string(names.size()) + " entries)";
  *error = pl::driver::quoted(dir) + " is not empty and is not a phaselab run folder (" + why +
           "); it holds: " + list +
           ". phaselab does not write into it: choose a new or empty "
           "folder with --out";
  return false;
}

bool check_resume_matches(const std::string& dir, const json& now, std::string* error) {
  json rec;
  std::string why;
  if (!read_run_record(dir, &rec, &why)) {
    *error = "cannot resume: " + why;
    return false;
  }
  const json then = resolved_from_record(rec);
  const auto keys = differing_keys(then, now);
  if (keys.empty()) return true;
  std::string list;
  for (size_t i = 0; i < keys.size() && i < 12; ++i)
    list += "\n  " + keys[i] + ": run has " + shown(at_path(then, keys[i])) + ", config has " +
            shown(at_path(now, keys[i]));
  if (keys.size() > 12) list += "\n  ... and " + std::to_string(keys.size() - 12) + " more";
  *error = "cannot resume " + dir + ": the config resolves to other values than the run's (" +
           std::to_string(keys.size()) + " key" + (keys.size() == 1 ? " differs" : "s differ") +
           "); resuming would mix two runs in one results.csv:" + list +
           "\nrestore those values, or start a new run with another --out";
  return false;
}

std::string resume_command(const std::string& config_file, const ShardSpec& shard,
                           const std::string& target, const std::string& out,
                           const std::vector<std::string>& overrides) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path abs = fs::absolute(config_file, ec);
  std::string dir = out;
  if (shard.count) {  // the shard's folder is OUT/shard-I-of-N: --out names OUT
    const size_t slash = dir.rfind('/');
    dir = slash == std::string::npos ? "." : slash == 0 ? "/" : dir.substr(0, slash);
  }
  std::string c = "phaselab run " + (ec ? config_file : abs.lexically_normal().string());
  for (const auto& o : overrides) {  // single-quoted for the shell when it needs it
    const bool plain = o.find_first_not_of(
                           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                           "0123456789_-.=+,/:") == std::string::npos;
    std::string q;
    for (char ch : o) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    c += " " + (plain ? o : "'" + q + "'");
  }
  if (shard.count)
    c += " --shard " + std::to_string(shard.index) + "/" + std::to_string(shard.count);
  if (!target.empty()) c += " --target " + target;
  return c + " --out " + dir + " --resume";
}

bool check_resume_shard(const std::string& dir, const std::string& config_file,
                        const ShardSpec& shard, const std::string& target, std::string* error) {
  json rec;
  std::string why;
  if (!read_run_record(dir, &rec, &why)) return true;  // check_resume_matches says why
  const json* s = rec.contains("shard") && rec["shard"].is_object() ? &rec["shard"] : nullptr;
  ShardSpec then;
  if (s && s->contains("index") && (*s)["index"].is_number_unsigned() && s->contains("count") &&
      (*s)["count"].is_number_unsigned()) {
    then.index = (*s)["index"].get<uint64_t>();
    then.count = (*s)["count"].get<uint64_t>();
  }
  if (then.index == shard.index && then.count == shard.count) return true;
  auto name = [](const ShardSpec& x) {
    return x.count ? "shard " + std::to_string(x.index) + " of " + std::to_string(x.count)
                   : std::string("not sharded");
  };
  *error = "cannot resume " + dir + ": the run there is " + name(then) + ", this one is " +
           name(shard) + " (resuming would run other points in that folder)";
  if (then.count) *error += "; continue it with: " + resume_command(config_file, then, target, dir);
  return false;
}

}  // namespace pl::driver
