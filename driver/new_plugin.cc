// SPDX-License-Identifier: Apache-2.0
#include "driver/new_plugin.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "driver/template_files.h"
#include "driver/text.hpp"

namespace pl::driver {
namespace {

// "my_exp" -> "MyExp".
std::string camel(const std::string& name) {
  std::string out;
  bool up = true;
  for (char c : name) {
    if (c == '_') {
      up = true;
      continue;
    }
    out += up && c >= 'a' && c <= 'z' ? char(c - 'a' + 'A') : c;
    up = false;
  }
  return out;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
  return s;
}

}  // namespace

int cmd_new(const std::string& name, const std::string& dir_opt) {
  bool ok = !name.empty() && name[0] >= 'a' && name[0] <= 'z';
  for (char c : name) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
  if (!ok) {
    std::fprintf(stderr,
                 "phaselab new: error: plugin name %s must be a lower-case letter followed by "
                 "lower-case letters, digits and '_'\n",
                 quoted(name).c_str());
    return 2;
  }
  // Its files are test_<name>.cc and phaselab_<name>.so: a name past 64 characters makes file
  // names no filesystem takes (255 bytes) long before it is useful.
  constexpr size_t kMaxName = 64;
  if (name.size() > kMaxName) {
    std::fprintf(stderr,
                 "phaselab new: error: plugin name is %zu characters long, at most %zu are "
                 "allowed\n",
                 name.size(), kMaxName);
    return 2;
  }
  const std::string dir = dir_opt.empty() ? name : dir_opt;
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::symlink_status(dir, ec))) {
    std::fprintf(stderr, "phaselab new: error: %s already exists; choose another --dir\n",
                 quoted(dir).c_str());
    return 2;
  }
  if (!std::filesystem::create_directory(dir, ec)) {
    std::fprintf(stderr, "phaselab new: error: cannot create folder %s\n", quoted(dir).c_str());
    return 2;
  }
  // All files or none: a folder left half-written (disk full) would block the retry.
  std::string written;
  for (const auto& f : kTemplateFiles) {
    const std::string file = replace_all(f.name, "ou_process", name);
    std::string text =
        replace_all(replace_all(f.text, "ou_process", name), "OuProcess", camel(name));
    std::string why;
    if (!write_file_atomic(dir + "/" + file, text, &why)) {
      std::filesystem::remove_all(dir, ec);  // the folder this command made
      std::fprintf(stderr, "phaselab new: error: cannot write %s/%s: %s; nothing was left\n",
                   dir.c_str(), file.c_str(), why.c_str());
      return 5;
    }
    written += (written.empty() ? "" : ", ") + file;
  }
  std::printf(
      "wrote %s/: %s\n"
      "a working plugin (Ornstein-Uhlenbeck particles) to rename and reshape; the guide is\n"
      "docs/plugins.md. Build, test and run it (needs phaselab installed: pkg-config phaselab):\n"
      "  cd %s && meson setup build && meson test -C build\n"
      "  PHASELAB_PLUGIN_PATH=build phaselab run %s.toml\n",
      dir.c_str(), written.c_str(), dir.c_str(), name.c_str());
  return 0;
}

}  // namespace pl::driver
