// Finding and loading experiment plugins. Search path: the build's plugin folder, then the
// folders of PHASELAB_PLUGIN_PATH (colon-separated). In each folder a plugin is
// <dir>/<name>/phaselab_<name>.so or <dir>/phaselab_<name>.so; the first folder that has a
// name wins. Loading checks the ABI version before touching anything else in the entry.
#pragma once

#include <string>
#include <vector>

#include "phaselab_plugin.h"

namespace pl::driver {

struct PluginFile {
  std::string name;  // from the file name phaselab_<name>.so
  std::string path;
};

struct Plugin {
  std::string path;
  pl_plugin entry{};  // a copy, zero-extended when the plugin's struct is older (shorter)
  std::vector<std::string> param_names;
};

std::vector<std::string> plugin_search_path();
// Every plugin file on the path, first occurrence of each name, sorted by name.
std::vector<PluginFile> discover_plugins(const std::vector<std::string>& path);
// Opens `file`, checks ABI version, struct size, name (must equal `expected_name` when not
// empty) and the declarations. On failure returns false with a one-line reason.
bool load_plugin(const PluginFile& file, Plugin* out, std::string* error);

// Human text for a declaration: "an integer in [2, 4096]", "a number > 0", "true or false", ...
std::string describe_expected(const pl_param_decl& d);
// The declared default as text ("16", "0.5", "softmax", "true").
std::string describe_default(const pl_param_decl& d);
std::vector<std::string> enum_choices(const pl_param_decl& d);

}  // namespace pl::driver
