// SPDX-License-Identifier: Apache-2.0
// Finding and loading experiment plugins. Search path: the folders of PHASELAB_PLUGIN_PATH
// (colon-separated, in order), then the plugin folder that comes with this phaselab (the build's
// plugins/ when run from a build tree, <libdir>/phaselab/plugins when installed). In each folder a
// plugin is <dir>/<name>/phaselab_<name>.so or <dir>/phaselab_<name>.so; the first folder that
// has a name wins, and every later file of that name is reported as a clash. Loading checks the
// ABI version before touching anything else in the entry.
#pragma once

#include <string>
#include <vector>

#include "phaselab_plugin.h"

namespace pl::driver {

struct SearchDir {
  std::string dir;
  std::string origin;  // "PHASELAB_PLUGIN_PATH", "the build's plugin folder", ...
};

struct PluginFile {
  std::string name;  // from the file name phaselab_<name>.so
  std::string path;
  std::string origin;  // the SearchDir's origin
};

struct Plugin {
  std::string path;
  std::string abs_path;  // the file loaded, absolute (run.json)
  std::string sha256;    // of the file loaded (run.json): a result traced to the exact binary
  pl_plugin entry{};     // a copy, zero-extended when the plugin's struct is older (shorter)
  std::vector<std::string> param_names;
};

std::vector<SearchDir> plugin_search_path();
// Problems with the search path worth a warning: a PHASELAB_PLUGIN_PATH entry that is a file (it
// must be a folder) or does not exist.
std::vector<std::string> search_path_problems(const std::vector<SearchDir>& path);
// "dir1:dir2" for messages.
std::string search_path_text(const std::vector<SearchDir>& path);
// Every plugin file on the path, first occurrence of each name, sorted by name. `clashes` (if
// given) gets one line per later file with a name already found: which file wins and why.
std::vector<PluginFile> discover_plugins(const std::vector<SearchDir>& path,
                                         std::vector<std::string>* clashes = nullptr);
// Opens `file`, checks ABI version, struct size, name (must equal `expected_name` when not
// empty) and the declarations. On failure returns false with a one-line reason.
bool load_plugin(const PluginFile& file, Plugin* out, std::string* error);

// Human text for a declaration: "an integer in [2, 4096]", "a number > 0", "true or false", ...
std::string describe_expected(const pl_param_decl& d);
// The declared default as text ("16", "0.5", "softmax", "true").
std::string describe_default(const pl_param_decl& d);
std::vector<std::string> enum_choices(const pl_param_decl& d);

}  // namespace pl::driver
