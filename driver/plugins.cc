// SPDX-License-Identifier: Apache-2.0
#include "driver/plugins.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>

#include "driver/sha256.hpp"
#include "driver/text.hpp"

#ifndef PHASELAB_PLUGIN_BUILD_DIR
#define PHASELAB_PLUGIN_BUILD_DIR ""
#endif
#ifndef PHASELAB_BUILD_EXE
#define PHASELAB_BUILD_EXE ""
#endif
#ifndef PHASELAB_INSTALL_BINDIR
#define PHASELAB_INSTALL_BINDIR "bin"
#endif
#ifndef PHASELAB_INSTALL_PLUGINDIR
#define PHASELAB_INSTALL_PLUGINDIR "lib/phaselab/plugins"
#endif

namespace pl::driver {
namespace {

namespace fs = std::filesystem;

bool is_file(const std::string& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

bool is_dir(const std::string& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

// Names in a folder, sorted, without hidden ones; none if it cannot be read.
std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name[0] != '.') out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// "phaselab_<name>.so" -> name, else "".
std::string plugin_name_of(const std::string& file) {
  const std::string pre = "phaselab_", suf = ".so";
  if (file.size() <= pre.size() + suf.size() || file.compare(0, pre.size(), pre) != 0 ||
      file.compare(file.size() - suf.size(), suf.size(), suf) != 0)
    return "";
  return file.substr(pre.size(), file.size() - pre.size() - suf.size());
}

// Config keys and file names: a letter, then letters, digits and '_' (the physics keeps its
// case: L, P, K, N).
bool valid_identifier(const char* s) {
  auto letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  if (!s || !letter(*s)) return false;
  for (; *s; ++s)
    if (!(letter(*s) || (*s >= '0' && *s <= '9') || *s == '_')) return false;
  return true;
}

std::string num_text(const pl_param_decl& d, double v) {
  return d.type == PL_PARAM_INT ? std::to_string(int64_t(v)) : format_double(v);
}

// Checks the declarations so the driver can trust them later; returns "" if fine.
std::string check_declarations(const pl_plugin& p) {
  if (p.num_params && !p.params) return "num_params > 0 but params is NULL";
  std::set<std::string> seen;
  for (uint32_t i = 0; i < p.num_params; ++i) {
    const pl_param_decl& d = p.params[i];
    if (!valid_identifier(d.name))
      return "parameter " + std::to_string(i) + " has an invalid name (want [A-Za-z][A-Za-z0-9_]*)";
    if (!seen.insert(d.name).second) return std::string("parameter ") + d.name + " declared twice";
    if (!std::strcmp(d.name, "seed")) return "parameter name 'seed' is reserved for the driver";
    if (d.type < PL_PARAM_INT || d.type > PL_PARAM_ENUM)
      return std::string("parameter ") + d.name + " has an unknown type";
    if (d.type == PL_PARAM_ENUM) {
      const auto ch = enum_choices(d);
      if (ch.empty()) return std::string("enum parameter ") + d.name + " has no choices";
      if (!d.def_string || std::find(ch.begin(), ch.end(), d.def_string) == ch.end())
        return std::string("enum parameter ") + d.name + " has a default that is not a choice";
    }
  }
  if (p.num_tables < 1 || !p.tables) return "no result tables declared (tables[0] is results)";
  if (!p.tables[0].name || std::strcmp(p.tables[0].name, "results") != 0)
    return "tables[0] must be named \"results\"";
  std::set<std::string> tnames;
  for (uint32_t t = 0; t < p.num_tables; ++t) {
    const pl_table_decl& td = p.tables[t];
    if (!valid_identifier(td.name)) return "table " + std::to_string(t) + " has an invalid name";
    if (!tnames.insert(td.name).second) return std::string("table ") + td.name + " declared twice";
    if (td.num_columns && !td.columns) return std::string("table ") + td.name + " has no columns";
    std::set<std::string> cols;
    for (uint32_t c = 0; c < td.num_columns; ++c) {
      if (!td.columns[c] || !*td.columns[c])
        return std::string("table ") + td.name + " has an empty column name";
      if (!cols.insert(td.columns[c]).second)
        return std::string("table ") + td.name + " has column " + td.columns[c] + " twice";
    }
    if (td.flags & ~uintptr_t(PL_TABLE_ALL_PARAMS))
      return std::string("table ") + td.name +
             " has flags this phaselab does not know (built with a newer SDK?)";
    if (td.flags & PL_TABLE_ALL_PARAMS)
      for (uint32_t i = 0; i < p.num_params; ++i)
        if (cols.count(p.params[i].name))
          return std::string("table ") + td.name + " has every parameter prepended but a column " +
                 "named like parameter " + p.params[i].name;
  }
  if (p.num_plots && !p.plots) return "num_plots > 0 but plots is NULL";
  for (uint32_t i = 0; i < p.num_plots; ++i) {
    const pl_plot_decl& pd = p.plots[i];
    if (!valid_identifier(pd.name)) return "plot " + std::to_string(i) + " has an invalid name";
    if (!pd.table || !tnames.count(pd.table))
      return std::string("plot ") + pd.name + " names an undeclared table";
    if (!pd.x || !*pd.x) return std::string("plot ") + pd.name + " has no x column";
  }
  if (!p.create || !p.run || !p.destroy) return "create, run and destroy must all be set";
  return "";
}

}  // namespace

std::vector<SearchDir> plugin_search_path() {
  std::vector<SearchDir> path;
  if (const char* env = std::getenv("PHASELAB_PLUGIN_PATH")) {
    std::string s = env;
    size_t start = 0;
    while (start <= s.size()) {
      const size_t end = std::min(s.find(':', start), s.size());
      if (end > start) path.push_back({s.substr(start, end - start), "PHASELAB_PLUGIN_PATH"});
      start = end + 1;
    }
  }
  // The folder that comes with this binary: the build tree's when this is the build tree's
  // binary, else the installed one relative to the binary (<prefix>/<bindir>/phaselab ->
  // <prefix>/<libdir>/phaselab/plugins).
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  const std::string exe = n > 0 ? std::string(buf, size_t(n)) : std::string();
  const std::string build_exe = PHASELAB_BUILD_EXE, bindir = PHASELAB_INSTALL_BINDIR;
  const std::string exe_dir =
      exe.substr(0, exe.rfind('/') == std::string::npos ? 0 : exe.rfind('/'));
  char* real_build = ::realpath(build_exe.c_str(), nullptr);
  const bool in_build = !exe.empty() && real_build && exe == real_build;
  std::free(real_build);
  if (in_build || exe.empty()) {
    if (*PHASELAB_PLUGIN_BUILD_DIR)
      path.push_back({PHASELAB_PLUGIN_BUILD_DIR, "the build's plugin folder"});
  } else if (exe_dir.size() > bindir.size() &&
             exe_dir.compare(exe_dir.size() - bindir.size(), bindir.size(), bindir) == 0) {
    path.push_back({exe_dir.substr(0, exe_dir.size() - bindir.size()) + PHASELAB_INSTALL_PLUGINDIR,
                    "the installed plugin folder"});
  } else if (*PHASELAB_PLUGIN_BUILD_DIR) {
    path.push_back({PHASELAB_PLUGIN_BUILD_DIR, "the build's plugin folder"});
  }
  return path;
}

std::vector<std::string> search_path_problems(const std::vector<SearchDir>& path) {
  std::vector<std::string> out;
  for (const auto& d : path) {
    if (d.origin != "PHASELAB_PLUGIN_PATH") continue;
    if (is_file(d.dir)) {
      const size_t slash = d.dir.rfind('/');
      out.push_back("PHASELAB_PLUGIN_PATH entry " + quoted(d.dir) +
                    " is a file; entries must be folders (holding phaselab_<name>.so or "
                    "<name>/phaselab_<name>.so): use " +
                    quoted(slash == std::string::npos ? std::string(".") : d.dir.substr(0, slash)));
    } else if (!is_dir(d.dir)) {
      out.push_back("PHASELAB_PLUGIN_PATH entry " + quoted(d.dir) + " is not a folder");
    }
  }
  return out;
}

std::string search_path_text(const std::vector<SearchDir>& path) {
  std::string dirs;
  for (const auto& d : path) dirs += (dirs.empty() ? "" : ":") + d.dir;
  return dirs.empty() ? std::string("nothing") : dirs;
}

std::vector<PluginFile> discover_plugins(const std::vector<SearchDir>& path,
                                         std::vector<std::string>* clashes) {
  std::vector<PluginFile> out;
  auto consider = [&](const SearchDir& sd, const std::string& dir, const std::string& file) {
    const std::string name = plugin_name_of(file);
    if (name.empty() || !is_file(dir + "/" + file)) return;
    const std::string path_here = dir + "/" + file;
    for (const auto& f : out)
      if (f.name == name) {
        if (clashes && f.path != path_here)
          clashes->push_back("plugin " + quoted(name) + " found twice: using " + f.path + " (" +
                             f.origin + ", searched " +
                             (f.origin == sd.origin ? "earlier" : "first") + "), not " + path_here +
                             " (" + sd.origin + ")");
        return;
      }
    out.push_back({name, path_here, sd.origin});
  };
  for (const auto& sd : path) {
    if (!is_dir(sd.dir)) continue;
    for (const auto& entry : list_dir(sd.dir)) {
      const std::string sub = sd.dir + "/" + entry;
      if (is_dir(sub))
        consider(sd, sub, "phaselab_" + entry + ".so");  // <dir>/<name>/phaselab_<name>.so
      else
        consider(sd, sd.dir, entry);  // <dir>/phaselab_<name>.so
    }
  }
  std::sort(out.begin(), out.end(),
            [](const PluginFile& a, const PluginFile& b) { return a.name < b.name; });
  return out;
}

bool load_plugin(const PluginFile& file, Plugin* out, std::string* error) {
  // RTLD_LOCAL: plugins do not see each other's symbols. Never closed: rows and names point
  // into the library until the process ends.
  void* h = ::dlopen(file.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    *error = std::string("cannot load ") + file.path + ": " + ::dlerror();
    return false;
  }
  const void* sym = ::dlsym(h, PL_PLUGIN_ENTRY_NAME);
  if (!sym) {
    *error = file.path + " is not a phaselab plugin: it does not export " PL_PLUGIN_ENTRY_NAME;
    return false;
  }
  // The ABI version is the first field; read it alone before trusting any other field.
  uint32_t abi = 0;
  std::memcpy(&abi, sym, sizeof abi);
  if (abi != PL_PLUGIN_ABI_VERSION) {
    *error = file.path + " was built for plugin ABI version " + std::to_string(abi) +
             ", this phaselab speaks version " + std::to_string(PL_PLUGIN_ABI_VERSION) +
             "; rebuild the plugin against this phaselab's SDK (pkg-config phaselab)";
    return false;
  }
  uint32_t size = 0;
  std::memcpy(&size, static_cast<const char*>(sym) + offsetof(pl_plugin, struct_size), sizeof size);
  // Version 1 needs every field up to `finish`; later fields (if any) are zero-extended.
  const size_t needed = offsetof(pl_plugin, reserved);
  if (size < needed) {
    *error = file.path + " declares struct_size " + std::to_string(size) + ", less than the " +
             std::to_string(needed) + " bytes of ABI version 1";
    return false;
  }
  out->entry = pl_plugin{};
  std::memcpy(&out->entry, sym, std::min<size_t>(size, sizeof(pl_plugin)));
  out->path = file.path;
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(file.path, ec);
  out->abs_path = ec ? file.path : abs.lexically_normal().string();
  out->sha256 = sha256_file(file.path);
  const pl_plugin& p = out->entry;
  if (!p.name || !*p.name) {
    *error = file.path + " has no plugin name";
    return false;
  }
  if (!file.name.empty() && file.name != p.name) {
    *error =
        file.path + " calls itself \"" + p.name + "\" but its file name says \"" + file.name + "\"";
    return false;
  }
  const std::string bad = check_declarations(p);
  if (!bad.empty()) {
    *error = std::string("plugin ") + p.name + " (" + file.path + "): " + bad;
    return false;
  }
  out->param_names.clear();
  for (uint32_t i = 0; i < p.num_params; ++i) out->param_names.push_back(p.params[i].name);
  return true;
}

std::vector<std::string> enum_choices(const pl_param_decl& d) {
  std::vector<std::string> out;
  if (!d.choices) return out;
  std::string s = d.choices;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t end = std::min(s.find('|', start), s.size());
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

std::string describe_expected(const pl_param_decl& d) {
  switch (d.type) {
    case PL_PARAM_BOOL:
      return "true or false";
    case PL_PARAM_STRING:
      return "a string";
    case PL_PARAM_ENUM: {
      std::string o = "one of ";
      const auto ch = enum_choices(d);
      for (size_t i = 0; i < ch.size(); ++i) o += (i ? ", " : "") + quoted(ch[i]);
      return o;
    }
    default:
      break;
  }
  std::string o = d.type == PL_PARAM_INT ? "an integer" : "a number";
  const bool has_min = d.range_flags & PL_RANGE_MIN, has_max = d.range_flags & PL_RANGE_MAX;
  const bool xmin = d.range_flags & PL_RANGE_MIN_EXCLUSIVE,
             xmax = d.range_flags & PL_RANGE_MAX_EXCLUSIVE;
  if (has_min && has_max)
    return o + " in " + (xmin ? "(" : "[") + num_text(d, d.min) + ", " + num_text(d, d.max) +
           (xmax ? ")" : "]");
  if (has_min) return o + (xmin ? " > " : " >= ") + num_text(d, d.min);
  if (has_max) return o + (xmax ? " < " : " <= ") + num_text(d, d.max);
  return o;
}

std::string describe_default(const pl_param_decl& d) {
  switch (d.type) {
    case PL_PARAM_INT:
      return std::to_string(d.def_int);
    case PL_PARAM_FLOAT:
      return format_double(d.def_float);
    case PL_PARAM_BOOL:
      return d.def_int ? "true" : "false";
    default:
      return quoted(d.def_string ? d.def_string : "");
  }
}

}  // namespace pl::driver
