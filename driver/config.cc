// SPDX-License-Identifier: Apache-2.0
#include "driver/config.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <set>

#include "driver/limits.hpp"
#include "driver/plugins.hpp"
#include "driver/text.hpp"
#include "phaselab/kernels.hpp"
#include "plugins/sdk/phaselab_sdk.hpp"

namespace pl::driver {
namespace {

// Values from the command line (apply_overrides) carry their override as their source path.
constexpr const char* kOverrideSource = "override ";

std::string where(const std::string& file, const toml::source_region& r) {
  if (r.path && r.path->rfind(kOverrideSource, 0) == 0) return *r.path;
  return file + ":" + std::to_string(r.begin.line) + ":" + std::to_string(r.begin.column);
}

// What a TOML value looks like in a message: "16" for a string, 16, 4.0, true, a list, ...
std::string found_text(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string:
      return quoted(abbreviate(*n.value<std::string>()));
    case toml::node_type::integer:
      return std::to_string(*n.value<int64_t>());
    case toml::node_type::floating_point: {
      std::string s = format_double(*n.value<double>());
      if (s.find_first_of(".eni") == std::string::npos) s += ".0";  // show it is a float
      return s;
    }
    case toml::node_type::boolean:
      return *n.value<bool>() ? "true" : "false";
    case toml::node_type::array:
      return n.as_array()->empty() ? "an empty list" : "a list";
    case toml::node_type::table:
      return "a table";
    default:
      return "a date/time";
  }
}

// NUL, newlines and other control bytes: never in a name or a path.
bool has_control(const std::string& s) {
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return true;
  return false;
}

bool in_range(const pl_param_decl& d, double v) {
  if (d.range_flags & PL_RANGE_MIN) {
    if (d.range_flags & PL_RANGE_MIN_EXCLUSIVE ? !(v > d.min) : !(v >= d.min)) return false;
  }
  if (d.range_flags & PL_RANGE_MAX) {
    if (d.range_flags & PL_RANGE_MAX_EXCLUSIVE ? !(v < d.max) : !(v <= d.max)) return false;
  }
  return true;
}

// Converts one TOML value to a parameter value; false if the type or range is wrong.
bool convert(const toml::node& n, const pl_param_decl& d, ParamValue* out) {
  out->type = d.type;
  switch (d.type) {
    case PL_PARAM_INT: {
      auto v = n.value_exact<int64_t>();
      if (!v || !in_range(d, double(*v))) return false;
      out->i = *v;
      out->f = double(*v);
      return true;
    }
    case PL_PARAM_FLOAT: {
      if (!n.is_number()) return false;
      const double v = *n.value<double>();
      if (!std::isfinite(v) || !in_range(d, v)) return false;
      out->f = v;
      return true;
    }
    case PL_PARAM_BOOL: {
      auto v = n.value_exact<bool>();
      if (!v) return false;
      out->i = *v ? 1 : 0;
      out->f = double(out->i);
      return true;
    }
    case PL_PARAM_STRING: {
      auto v = n.value_exact<std::string>();
      if (!v || v->size() > kMaxStringBytes || v->find('\0') != std::string::npos) return false;
      out->s = *v;
      return true;
    }
    case PL_PARAM_ENUM: {
      auto v = n.value_exact<std::string>();
      if (!v) return false;
      const auto ch = enum_choices(d);
      auto it = std::find(ch.begin(), ch.end(), *v);
      if (it == ch.end()) return false;
      out->s = *v;
      out->i = int64_t(it - ch.begin());
      out->f = double(out->i);
      return true;
    }
  }
  return false;
}

ParamValue default_value(const pl_param_decl& d) {
  ParamValue v;
  v.type = d.type;
  switch (d.type) {
    case PL_PARAM_INT:
      v.i = d.def_int;
      v.f = double(d.def_int);
      break;
    case PL_PARAM_FLOAT:
      v.f = d.def_float;
      break;
    case PL_PARAM_BOOL:
      v.i = d.def_int ? 1 : 0;
      v.f = double(v.i);
      break;
    case PL_PARAM_STRING:
      v.s = d.def_string ? d.def_string : "";
      break;
    case PL_PARAM_ENUM: {
      v.s = d.def_string ? d.def_string : "";
      const auto ch = enum_choices(d);
      v.i = int64_t(std::find(ch.begin(), ch.end(), v.s) - ch.begin());
      v.f = double(v.i);
      break;
    }
  }
  return v;
}

// "must be <expected>, got <found>" with a did-you-mean for enum strings.
std::string bad_value(const std::string& key, const pl_param_decl& d, const toml::node& n) {
  std::string msg = key + " must be " + describe_expected(d) + ", got " + found_text(n);
  if (auto s = n.value_exact<std::string>(); s && d.type == PL_PARAM_STRING) {
    if (s->size() > kMaxStringBytes)
      return key + " must be a string of at most " + std::to_string(kMaxStringBytes) +
             " bytes, got " + std::to_string(s->size()) + " bytes";
    if (s->find('\0') != std::string::npos) return key + " must not hold a NUL byte (\\u0000)";
  }
  if (d.type == PL_PARAM_ENUM) {
    if (auto s = n.value_exact<std::string>()) {
      const std::string dym = did_you_mean(*s, enum_choices(d));
      if (!dym.empty()) msg += " (did you mean " + quoted(dym) + "?)";
    }
  }
  return msg;
}

std::string unknown_key(const std::string& prefix, const std::string& key,
                        const std::vector<std::string>& valid) {
  if (key.size() > kMaxKeyBytes)
    return "unknown key " + prefix + abbreviate(key) + ": longer than any key (limit " +
           std::to_string(kMaxKeyBytes) + " bytes)";
  std::string msg = "unknown key " + prefix + key;
  const std::string dym = did_you_mean(key, valid);
  if (!dym.empty()) return msg + " (did you mean " + prefix + dym + "?)";
  msg += " (valid: ";
  for (size_t i = 0; i < valid.size(); ++i) msg += (i ? ", " : "") + valid[i];
  return msg + ")";
}

int param_index(const Plugin& p, const std::string& key) {
  for (size_t i = 0; i < p.param_names.size(); ++i)
    if (p.param_names[i] == key) return int(i);
  return -1;
}

// Keys of a table in file order (toml++ keeps them sorted by name).
std::vector<std::pair<const toml::key*, const toml::node*>> in_file_order(const toml::table& t) {
  std::vector<std::pair<const toml::key*, const toml::node*>> kv;
  for (auto&& [k, v] : t) kv.push_back({&k, &v});
  std::stable_sort(kv.begin(), kv.end(), [](const auto& a, const auto& b) {
    const auto& x = a.first->source().begin;
    const auto& y = b.first->source().begin;
    return x.line != y.line ? x.line < y.line : x.column < y.column;
  });
  return kv;
}

void run_section(const toml::table& run, const std::string& file, RunConfig* cfg,
                 std::vector<std::string>* errors) {
  auto err = [&](const toml::source_region& r, const std::string& m) {
    errors->push_back(where(file, r) + ": error: " + m);
  };
  for (auto [k, v] : in_file_order(run)) {
    const std::string key = std::string(k->str());
    if (key == "seeds") {
      cfg->seeds.clear();
      if (auto n = v->value_exact<int64_t>()) {
        if (*n < 1 || *n > 1'000'000) {
          err(v->source(),
              "run.seeds must be a seed count >= 1 or a non-empty list of seeds, got " +
                  found_text(*v));
          continue;
        }
        for (int64_t s = 0; s < *n; ++s) cfg->seeds.push_back(uint64_t(s));
      } else if (const toml::array* a = v->as_array(); a && !a->empty()) {
        std::set<int64_t> seen;
        for (const toml::node& e : *a) {
          auto s = e.value_exact<int64_t>();
          if (!s || *s < 0)
            err(e.source(), "run.seeds must list integers >= 0, got " + found_text(e));
          else if (!seen.insert(*s).second)
            err(e.source(), "run.seeds lists seed " + std::to_string(*s) + " twice");
          else
            cfg->seeds.push_back(uint64_t(*s));
        }
      } else {
        err(v->source(), "run.seeds must be a seed count >= 1 or a non-empty list of seeds, got " +
                             found_text(*v));
      }
    } else if (key == "threads") {
      auto n = v->value_exact<int64_t>();
      if (!n || *n < 0 || *n > 4096)
        err(v->source(),
            "run.threads must be an integer in [0, 4096] (0: all cores), got " + found_text(*v));
      else
        cfg->threads = *n;
    } else if (key == "out") {
      auto s = v->value_exact<std::string>();
      if (!s || s->empty() || s->size() > kMaxStringBytes || has_control(*s))
        err(v->source(),
            "run.out must be a non-empty string (a folder) without control "
            "characters, got " +
                found_text(*v));
      else
        cfg->out = *s;
    } else if (key == "target") {
      auto s = v->value_exact<std::string>();
      std::string why;
      if (!s)
        err(v->source(), "run.target must be a kernel target name, got " + found_text(*v));
      else if (!check_target(*s, &why))
        err(v->source(), "run.target: " + why);
      else
        cfg->target = *s == "best" ? "" : *s;
    } else if (key == "figure_formats") {
      // A list of distinct formats, "png" among them: every run figure is a PNG (what the
      // README, `phaselab status` and notebooks show); PDF and SVG are drawn beside it.
      const toml::array* a = v->as_array();
      if (!a || a->empty()) {
        err(v->source(), "run.figure_formats must be a non-empty list of \"png\", \"pdf\", " +
                             std::string("\"svg\" (e.g. [\"png\", \"pdf\"]), got ") +
                             found_text(*v));
        continue;
      }
      std::vector<std::string> formats;
      bool ok = true;
      for (const toml::node& e : *a) {
        auto s = e.value_exact<std::string>();
        if (!s || (*s != "png" && *s != "pdf" && *s != "svg")) {
          std::string msg =
              "run.figure_formats: unknown format " + found_text(e) + " (png, pdf or svg)";
          if (s) {
            const std::string dym = did_you_mean(*s, {"png", "pdf", "svg"});
            if (!dym.empty()) msg += " (did you mean " + quoted(dym) + "?)";
          }
          err(e.source(), msg);
          ok = false;
        } else if (std::find(formats.begin(), formats.end(), *s) != formats.end()) {
          err(e.source(), "run.figure_formats lists " + quoted(*s) + " twice");
          ok = false;
        } else {
          formats.push_back(*s);
        }
      }
      if (ok && std::find(formats.begin(), formats.end(), "png") == formats.end()) {
        err(v->source(),
            "run.figure_formats must include \"png\" (the PDF and SVG files are drawn beside "
            "each PNG), got " +
                found_text(*v));
        ok = false;
      }
      if (ok) cfg->figure_formats = formats;
    } else {
      err(k->source(),
          unknown_key("run.", key, {"seeds", "threads", "out", "target", "figure_formats"}));
    }
  }
}

}  // namespace

std::string value_text(const ParamValue& v) {
  switch (v.type) {
    case PL_PARAM_INT:
      return std::to_string(v.i);
    case PL_PARAM_FLOAT:
      return format_double(v.f);
    case PL_PARAM_BOOL:
      return v.i ? "true" : "false";
    default:
      return v.s;
  }
}

bool swept(const RunConfig& cfg, size_t param) {
  if (cfg.search.on && cfg.search.param == param) return true;
  for (const auto& a : cfg.sweep)
    if (a.param == param) return true;
  return false;
}

bool check_target(const std::string& target, std::string* error) {
  if (target.empty() || target == "best") return true;
  if (!pl::target_known(target)) {
    std::string list = "best";
    for (const auto& t : pl::known_targets()) list += ", " + t;
    *error = "unknown kernel target " + quoted(target) + " (this build knows: " + list + ")";
    return false;
  }
  if (!pl::target_supported(target)) {
    *error = "kernel target " + quoted(target) +
             " is not supported by this CPU (best here: " + pl::best_target() + ")";
    return false;
  }
  return true;
}

bool parse_config_file(const std::string& file, toml::table* out, std::string* text,
                       std::vector<std::string>* errors) {
  // Limits first: a regular file of bounded size, then a scan for keys and nesting deep
  // enough to exhaust the parser's stack; only then the TOML library.
  if (!read_config_text(file, text, errors) || !prescan_toml(file, *text, errors)) return false;
  try {
    *out = toml::parse(*text, file);
  } catch (const toml::parse_error& e) {
    errors->push_back(where(file, e.source()) + ": error: " + std::string(e.description()));
    return false;
  } catch (const std::exception& e) {
    errors->push_back(file + ": error: cannot parse: " + e.what());
    return false;
  }
  return true;
}

bool apply_overrides(const std::vector<std::string>& overrides, toml::table* t,
                     std::vector<std::string>* errors) {
  const size_t before = errors->size();
  for (const std::string& o : overrides) {
    const std::string at = kOverrideSource + o;
    const size_t eq = o.find('=');
    const std::string key = eq == std::string::npos ? o : o.substr(0, eq);
    std::vector<std::string> parts;
    for (size_t s = 0;;) {
      const size_t dot = key.find('.', s);
      parts.push_back(key.substr(s, dot == std::string::npos ? std::string::npos : dot - s));
      if (dot == std::string::npos) break;
      s = dot + 1;
    }
    const bool bare = std::all_of(parts.begin(), parts.end(), [](const std::string& p) {
      return !p.empty() && std::all_of(p.begin(), p.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
      });
    });
    if (eq == std::string::npos || !bare) {
      errors->push_back(at +
                        ": error: an override is KEY=VALUE with KEY a dotted name "
                        "(copy_task.L=32, run.seeds=3, sweep.P=[10,100])");
      continue;
    }
    const std::string value = o.substr(eq + 1);
    toml::table parsed;
    try {
      parsed = toml::parse("v = " + value, at);
    } catch (const toml::parse_error&) {
      // Not a TOML value: a plain word is a string (copy_task.attention=linear); anything
      // that looks like a TOML value but does not parse is an error.
      const bool word = !value.empty() && !has_control(value) &&
                        value.find_first_of("[]{}\"'=#, ") == std::string::npos;
      if (!word) {
        errors->push_back(at + ": error: " + quoted(value) +
                          " is not a TOML value (strings in quotes, lists in [...])");
        continue;
      }
      parsed = toml::parse("v = '" + value + "'", at);
    }
    // Keys carry the override as their source too (an unknown key is reported there), at a
    // line past any file's: a key an override adds comes after the file's keys in file order
    // (a new sweep key varies fastest), in the order of the overrides.
    toml::source_region src{};
    src.path = std::make_shared<const std::string>(at);
    src.begin.line = src.end.line =
        toml::source_index(1u << 30) + toml::source_index(&o - &overrides[0]);
    toml::table* dest = t;
    bool ok = true;
    for (size_t i = 0; i + 1 < parts.size() && ok; ++i) {
      toml::node* n = dest->get(parts[i]);
      if (!n) {
        dest->insert(toml::key(parts[i], toml::source_region(src)), toml::table{});
        n = dest->get(parts[i]);
      }
      if (!n->is_table()) {
        std::string path;
        for (size_t j = 0; j <= i; ++j) path += (j ? "." : "") + parts[j];
        errors->push_back(at + ": error: " + path + " is " + found_text(*n) +
                          " in the config, not a table, so " + key + " cannot be set");
        ok = false;
        break;
      }
      dest = n->as_table();
    }
    if (!ok) continue;
    // Moved, not copied: a copied toml++ node loses its source (the override, in messages).
    dest->insert_or_assign(toml::key(parts.back(), toml::source_region(src)),
                           std::move(*parsed.get("v")));
    // An override wins over the file's other place for the same parameter: PLUGIN.KEY=v stops
    // the file's sweep of KEY, sweep.KEY=[...] replaces the file's PLUGIN.KEY.
    const auto* plugin = t->get_as<std::string>("plugin");
    if (parts.size() == 2 && plugin && (parts[0] == **plugin || parts[0] == "sweep")) {
      auto* other = t->get_as<toml::table>(parts[0] == "sweep" ? **plugin : std::string("sweep"));
      if (other) other->erase(parts[1]);
    }
  }
  return errors->size() == before;
}

bool config_plugin_name(const toml::table& t, const std::string& file, std::string* name,
                        std::string* at, std::vector<std::string>* errors) {
  const toml::node* n = t.get("plugin");
  if (!n) {
    errors->push_back(file + ":1:1: error: missing key plugin (e.g. plugin = \"copy_task\")");
    return false;
  }
  *at = where(file, n->source());
  auto s = n->value_exact<std::string>();
  if (!s || s->empty()) {
    errors->push_back(*at + ": error: plugin must be a plugin name (a string), got " +
                      found_text(*n));
    return false;
  }
  *name = *s;
  return true;
}

namespace {

// resolve_config's steps: the top-level keys, the plugin's table, the sweep. Every problem is
// one "file:line:col: error: ..." line in `errors`.
struct Resolver {
  const toml::table& t;
  const std::string& file;
  const Plugin& plugin;
  RunConfig* cfg;
  std::vector<std::string>* errors;
  const pl_plugin& p = plugin.entry;
  const std::string pname = p.name;
  const toml::table* sweep = nullptr;
  const toml::table* params = nullptr;
  const toml::table* search = nullptr;
  const toml::node* search_node = nullptr;

  void err(const toml::source_region& r, const std::string& m) {
    errors->push_back(where(file, r) + ": error: " + m);
  }

  // Defaults: every parameter's declared default, the name from the file's stem.
  void defaults() {
    cfg->file = file;
    cfg->plugin = pname;
    cfg->base.clear();
    for (uint32_t i = 0; i < p.num_params; ++i) cfg->base.push_back(default_value(p.params[i]));
    cfg->base_set.assign(p.num_params, false);
    const size_t slash = file.find_last_of('/');
    std::string stem = file.substr(slash == std::string::npos ? 0 : slash + 1);
    if (stem.size() > 5 && stem.compare(stem.size() - 5, 5, ".toml") == 0)
      stem.resize(stem.size() - 5);
    cfg->name = stem;
  }

  void top_level() {
    for (auto [k, v] : in_file_order(t)) {
      const std::string key = std::string(k->str());
      if (key == "plugin") continue;
      if (key == "name") {
        auto s = v->value_exact<std::string>();
        if (!s || s->empty() || s->find('/') != std::string::npos || s->size() > 255 ||
            has_control(*s) || *s == "." || *s == "..")
          err(v->source(),
              "name must be a non-empty string of at most 255 bytes without '/' or control "
              "characters, got " +
                  found_text(*v));
        else
          cfg->name = *s;
      } else if (key == "run" || key == "sweep" || key == "search" || key == pname) {
        const toml::table* tab = v->as_table();
        if (!tab) {
          err(v->source(), key + " must be a table ([" + key + "]), got " + found_text(*v));
          continue;
        }
        if (key == "run") run_section(*tab, file, cfg, errors);
        if (key == "sweep") sweep = tab;
        if (key == "search") search = tab, search_node = v;
        if (key == pname) params = tab;
      } else if (param_index(plugin, key) >= 0) {
        err(k->source(),
            "parameter " + key + " belongs in the [" + pname + "] table (or in [sweep])");
      } else {
        err(k->source(), unknown_key("", key, {"plugin", "name", "run", "sweep", "search", pname}));
      }
    }
  }

  // Scalar values from the plugin's own table.
  void plugin_table() {
    if (!params) return;
    for (auto [k, v] : in_file_order(*params)) {
      const std::string key = std::string(k->str());
      const int idx = param_index(plugin, key);
      if (idx < 0) {
        err(k->source(), unknown_key(pname + ".", key, plugin.param_names));
        continue;
      }
      ParamValue val;
      if (!convert(*v, p.params[idx], &val)) {
        err(v->source(), bad_value(pname + "." + key, p.params[idx], *v));
        continue;
      }
      cfg->base[idx] = val;
      cfg->base_set[idx] = true;
    }
  }

  // Sweep lists.
  void sweep_section() {
    cfg->sweep.clear();
    if (!sweep) return;
    std::set<std::string> columns = {"seed"};
    for (uint32_t ti = 0; ti < p.num_tables; ++ti)
      for (uint32_t c = 0; c < p.tables[ti].num_columns; ++c)
        columns.insert(p.tables[ti].columns[c]);
    for (auto [k, v] : in_file_order(*sweep)) {
      const std::string key = std::string(k->str());
      if (key == "seed" || key == "seeds") {
        err(k->source(), "seeds are not swept here: set them in [run] seeds");
        continue;
      }
      const int idx = param_index(plugin, key);
      if (idx < 0) {
        err(k->source(), unknown_key("sweep.", key, plugin.param_names));
        continue;
      }
      if (params && params->contains(key)) {
        err(k->source(), "duplicate key " + key + ": it is swept in [sweep] and also set in [" +
                             pname + "] (" + where(file, params->get(key)->source()) +
                             "); keep one");
        continue;
      }
      if (columns.count(key)) {
        err(k->source(), "sweep key " + key + " clashes with a result column of plugin " + pname);
        continue;
      }
      sweep_axis(key, uint32_t(idx), *v);
    }
  }

  void sweep_axis(const std::string& key, uint32_t idx, const toml::node& v) {
    const pl_param_decl& d = p.params[idx];
    const toml::array* a = v.as_array();
    if (!a || a->empty()) {
      err(v.source(), "sweep." + key + " must be a non-empty list of values, each " +
                          describe_expected(d) + ", got " + found_text(v));
      return;
    }
    SweepAxis axis;
    axis.key = key;
    axis.param = idx;
    bool ok = true;
    std::set<std::string> seen;  // O(n log n) duplicate check
    for (const toml::node& e : *a) {
      ParamValue val;
      if (!convert(e, d, &val)) {
        err(e.source(), bad_value(pname + "." + key, d, e) + " (in sweep." + key + ")");
        ok = false;
        continue;
      }
      if (!seen.insert(value_text(val)).second) {  // one type per axis
        err(e.source(), "sweep." + key + " lists " + found_text(e) + " twice");
        ok = false;
        continue;
      }
      axis.values.push_back(val);
    }
    if (ok) cfg->sweep.push_back(std::move(axis));
  }

  // [search]: one numeric parameter bisected for the values where a results column changes.
  void search_section() {
    cfg->search = SearchSpec{};
    if (!search) return;
    SearchSpec& s = cfg->search;
    const toml::node *key_node = nullptr, *min_node = nullptr, *max_node = nullptr;
    bool ok = true;
    auto bad = [&](const toml::node& n, const std::string& m) {
      err(n.source(), m);
      ok = false;
    };
    auto number = [&](const toml::node& n, const std::string& name, double* out) {
      if (!n.is_number() || !std::isfinite(*n.value<double>())) {
        bad(n, "search." + name + " must be a finite number, got " + found_text(n));
        return false;
      }
      *out = *n.value<double>();
      return true;
    };
    auto integer = [&](const toml::node& n, const std::string& name, int64_t lo, int64_t hi,
                       int64_t* out) {
      auto v = n.value_exact<int64_t>();
      if (!v || *v < lo || *v > hi) {
        bad(n, "search." + name + " must be an integer in [" + std::to_string(lo) + ", " +
                   std::to_string(hi) + "], got " + found_text(n));
        return false;
      }
      *out = *v;
      return true;
    };
    for (auto [k, v] : in_file_order(*search)) {
      const std::string key = std::string(k->str());
      if (key == "key") {
        key_node = v;
      } else if (key == "min") {
        min_node = v;
      } else if (key == "max") {
        max_node = v;
      } else if (key == "scale") {
        auto t = v->value_exact<std::string>();
        if (!t || (*t != "log" && *t != "linear"))
          bad(*v, "search.scale must be \"log\" or \"linear\", got " + found_text(*v));
        else
          s.log = *t == "log";
      } else if (key == "column") {
        auto t = v->value_exact<std::string>();
        std::vector<std::string> cols;
        if (p.num_tables > 0)
          for (uint32_t c = 0; c < p.tables[0].num_columns; ++c)
            cols.push_back(p.tables[0].columns[c]);
        if (!t || t->empty()) {
          bad(*v, "search.column must be the name of a column of " + pname + "'s " +
                      (p.num_tables ? p.tables[0].name : "results") + ".csv, got " +
                      found_text(*v));
        } else if (std::find(cols.begin(), cols.end(), *t) == cols.end()) {
          std::string list;
          for (size_t i = 0; i < cols.size(); ++i) list += (i ? ", " : "") + cols[i];
          const std::string dym = did_you_mean(*t, cols);
          bad(*v, "search.column " + quoted(abbreviate(*t)) + " is not a column of " + pname +
                      "'s " + (p.num_tables ? p.tables[0].name : "results") + ".csv" +
                      (dym.empty() ? "" : " (did you mean " + quoted(dym) + "?)") +
                      "; its columns: " + list);
        } else {
          s.column = *t;
        }
      } else if (key == "above") {
        if (number(*v, "above", &s.above)) s.has_above = true;
      } else if (key == "rel_tol") {
        double r = 0;
        if (number(*v, "rel_tol", &r)) {
          if (!(r > 0) || r > 100)
            bad(*v, "search.rel_tol must be > 0 and <= 100, got " + found_text(*v));
          else
            s.rel_tol = r;
        }
      } else if (key == "initial") {
        integer(*v, "initial", 2, 1000, &s.initial);
      } else if (key == "max_evaluations") {
        integer(*v, "max_evaluations", 2, 100000, &s.max_evaluations);
      } else {
        err(k->source(), unknown_key("search.", key,
                                     {"key", "min", "max", "scale", "column", "above", "rel_tol",
                                      "initial", "max_evaluations"}));
        ok = false;
      }
    }
    if (!key_node) bad(*search_node, "[search] needs key = \"NAME\" (an int or float parameter)");
    if (s.column.empty() && ok && !search->contains("column"))
      bad(*search_node, "[search] needs column = \"NAME\" (a results column that labels a point)");
    if (!min_node || !max_node)
      bad(*search_node, "[search] needs min and max (the range of the searched key)");
    if (!key_node) return;
    auto name = key_node->value_exact<std::string>();
    const int idx = name ? param_index(plugin, *name) : -1;
    if (!name || idx < 0) {
      if (!name)
        bad(*key_node, "search.key must be a parameter name, got " + found_text(*key_node));
      else
        err(key_node->source(), unknown_key("search.key ", *name, plugin.param_names)), ok = false;
      return;
    }
    const pl_param_decl& d = p.params[idx];
    if (d.type != PL_PARAM_INT && d.type != PL_PARAM_FLOAT) {
      bad(*key_node, "search.key " + *name + " must be an int or float parameter, it is " +
                         describe_expected(d));
      return;
    }
    if (sweep && sweep->contains(*name)) {
      bad(*key_node, "search.key " + *name + " is also in [sweep] (" +
                         where(file, sweep->get(*name)->source()) +
                         "): a key is either swept or searched");
      return;
    }
    if (params && params->contains(*name)) {
      bad(*key_node, "search.key " + *name + " is also set in [" + pname + "] (" +
                         where(file, params->get(*name)->source()) + "); keep one");
      return;
    }
    s.key = *name;
    s.param = uint32_t(idx);
    s.integer = d.type == PL_PARAM_INT;
    if (!min_node || !max_node) return;
    ParamValue lo, hi;
    if (!convert(*min_node, d, &lo)) {
      bad(*min_node, bad_value("search.min", d, *min_node) + " (the range of " + *name + ")");
      return;
    }
    if (!convert(*max_node, d, &hi)) {
      bad(*max_node, bad_value("search.max", d, *max_node) + " (the range of " + *name + ")");
      return;
    }
    s.min = s.integer ? double(lo.i) : lo.f;
    s.max = s.integer ? double(hi.i) : hi.f;
    if (!(s.min < s.max)) {
      bad(*max_node, "search.max must be larger than search.min, got " + found_text(*min_node) +
                         " and " + found_text(*max_node));
      return;
    }
    if (s.log && !(s.min > 0)) {
      bad(*min_node, "search.min must be > 0 on a log scale, got " + found_text(*min_node) +
                         " (or set scale = \"linear\")");
      return;
    }
    if (s.integer && s.max - s.min > double(int64_t(1) << 40)) {
      bad(*max_node, "search.max - search.min must be at most 2^40 for an int key");
      return;
    }
    for (uint32_t ti = 0; ti < p.num_tables; ++ti)
      for (uint32_t c = 0; c < p.tables[ti].num_columns; ++c)
        if (s.key == p.tables[ti].columns[c] ||
            std::string("search_round") == p.tables[ti].columns[c]) {
          bad(*key_node, "search.key " + s.key + ": plugin " + pname + " has a result column " +
                             p.tables[ti].columns[c] +
                             ", which the search's columns would clash with");
          return;
        }
    s.on = ok;
  }
};

}  // namespace

bool resolve_config(const toml::table& t, const std::string& file, const Plugin& plugin,
                    RunConfig* cfg, std::vector<std::string>* errors) {
  const size_t errors_before = errors->size();
  Resolver r{t, file, plugin, cfg, errors};
  r.defaults();
  r.top_level();
  r.plugin_table();
  r.sweep_section();
  r.search_section();
  // Report in file order (sections are checked in a fixed order): sort by line, column.
  auto pos = [&](const std::string& e) {
    unsigned line = 0, col = 0;
    std::sscanf(e.c_str() + std::min(e.size(), file.size()), ":%u:%u", &line, &col);
    return std::make_pair(line, col);
  };
  std::stable_sort(errors->begin() + long(errors_before), errors->end(),
                   [&](const std::string& a, const std::string& b) { return pos(a) < pos(b); });
  if (errors->size() == errors_before && count_points(*cfg) > kMaxPoints)
    errors->push_back(file + ": error: the sweep has " + std::to_string(count_points(*cfg)) +
                      " points, more than the limit of " + std::to_string(kMaxPoints));
  return errors->size() == errors_before;
}

uint64_t count_points(const RunConfig& cfg) {
  uint64_t n = cfg.seeds.size();
  for (const auto& a : cfg.sweep) {
    n *= a.values.size();
    if (n > kMaxPoints * 1000) break;  // saturate: only compared against the limit
  }
  return n;
}

std::string join_key(const std::vector<std::string>& cells) {
  std::string k;
  for (size_t i = 0; i < cells.size(); ++i) {
    if (i) k += '\x1f';
    k += cells[i];
  }
  return k;
}

namespace {

// Visits every sweep combination (without seeds) in run order.
void for_each_combo(
    const RunConfig& cfg,
    const std::function<void(const std::vector<ParamValue>&, const std::vector<size_t>&)>& fn) {
  std::vector<size_t> pos(cfg.sweep.size(), 0);
  std::vector<ParamValue> params = cfg.base;
  while (true) {
    for (size_t a = 0; a < cfg.sweep.size(); ++a)
      params[cfg.sweep[a].param] = cfg.sweep[a].values[pos[a]];
    fn(params, pos);
    // Odometer: the last key varies fastest.
    size_t a = cfg.sweep.size();
    while (a > 0) {
      --a;
      if (++pos[a] < cfg.sweep[a].values.size()) break;
      pos[a] = 0;
      if (a == 0) return;
    }
    if (cfg.sweep.empty()) return;
  }
}

uint64_t hash_params(const Plugin& plugin, const std::vector<ParamValue>& params) {
  // FNV-1a over "name=value;" for every parameter that differs from its declared default, then
  // mixed: stable across runs and builds, and across plugin versions that add parameters (a new
  // key at its default leaves every existing point's streams as they were).
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string text = value_text(params[i]);
    if (i < plugin.entry.num_params && text == value_text(default_value(plugin.entry.params[i])))
      continue;
    const std::string s = plugin.param_names[i] + "=" + text + ";";
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  }
  return pl::sdk::mix64(h);
}

std::string combo_label(const RunConfig& cfg, const std::vector<ParamValue>& params) {
  std::string l;
  for (const auto& a : cfg.sweep)
    l += (l.empty() ? "" : " ") + a.key + "=" + value_text(params[a.param]);
  return l;
}

}  // namespace

uint64_t point_params_hash(const Plugin& plugin, const std::vector<ParamValue>& params) {
  return hash_params(plugin, params);
}

std::string sweep_label(const RunConfig& cfg, const std::vector<ParamValue>& params) {
  return combo_label(cfg, params);
}

std::vector<std::vector<ParamValue>> sweep_combinations(const RunConfig& cfg) {
  std::vector<std::vector<ParamValue>> out;
  for_each_combo(cfg, [&](const std::vector<ParamValue>& params, const std::vector<size_t>&) {
    out.push_back(params);
  });
  return out;
}

std::vector<Point> enumerate_points(const RunConfig& cfg, const Plugin& plugin) {
  std::vector<Point> out;
  for_each_combo(cfg, [&](const std::vector<ParamValue>& params, const std::vector<size_t>&) {
    const uint64_t h = hash_params(plugin, params);
    const std::string label = combo_label(cfg, params);
    for (uint64_t seed : cfg.seeds) {
      Point pt;
      pt.index = out.size();
      pt.seed = seed;
      pt.params = params;
      for (const auto& a : cfg.sweep) pt.key_cells.push_back(value_text(params[a.param]));
      pt.key_cells.push_back(std::to_string(seed));
      pt.key = join_key(pt.key_cells);
      pt.point_key = h;
      pt.label = label + (label.empty() ? "" : " ") + "seed=" + std::to_string(seed);
      out.push_back(std::move(pt));
    }
  });
  return out;
}

std::vector<pl_value> to_pl_values(const std::vector<ParamValue>& params) {
  std::vector<pl_value> v(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    v[i].type = params[i].type;
    v[i].i = params[i].i;
    v[i].f = params[i].f;
    v[i].s = (params[i].type == PL_PARAM_STRING || params[i].type == PL_PARAM_ENUM)
                 ? params[i].s.c_str()
                 : nullptr;
  }
  return v;
}

bool validate_points(const RunConfig& cfg, const Plugin& plugin, std::vector<std::string>* errors) {
  if (!plugin.entry.validate) return true;
  const size_t before = errors->size();
  for_each_combo(cfg, [&](const std::vector<ParamValue>& combo, const std::vector<size_t>&) {
    for (int end = 0; end < (cfg.search.on ? 2 : 1); ++end) {
      if (errors->size() - before >= 10) return;  // enough to see the pattern
      std::vector<ParamValue> params = combo;
      if (cfg.search.on) {  // a search: the combination at both ends of the searched range
        ParamValue& k = params[cfg.search.param];
        k.f = end ? cfg.search.max : cfg.search.min;
        k.i = int64_t(k.f);
      }
      const auto v = to_pl_values(params);
      char buf[1024] = {0};
      if (plugin.entry.validate(v.data(), uint32_t(v.size()), buf, sizeof buf) != 0) {
        buf[sizeof buf - 1] = 0;
        std::string label = combo_label(cfg, params);
        if (cfg.search.on)
          label += (label.empty() ? "" : " ") + cfg.search.key + "=" +
                   value_text(params[cfg.search.param]);
        errors->push_back(cfg.file + ": error: " + cfg.plugin + ": " +
                          (buf[0] ? buf : "invalid parameter combination") +
                          (label.empty() ? "" : " (at " + label + ")"));
      }
    }
  });
  return errors->size() == before;
}

}  // namespace pl::driver
