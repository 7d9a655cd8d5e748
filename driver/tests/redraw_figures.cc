// SPDX-License-Identifier: Apache-2.0
// Redraws the figures of a finished run from its tables, with the plot declarations of a plugin
// as built now (for working on figures without rerunning the experiment):
//   phaselab_redraw_figures PLUGIN.so RUN_DIR [param=value ...]
// The param=value pairs are the run's constant (not swept) parameters that filters refer to.
#include <dlfcn.h>

#include <cstdio>
#include <map>
#include <string>

#include "driver/figures.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s PLUGIN.so RUN_DIR [param=value ...]\n", argv[0]);
    return 2;
  }
  void* lib = ::dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  const auto* plugin =
      lib ? static_cast<const pl_plugin*>(::dlsym(lib, PL_PLUGIN_ENTRY_NAME)) : nullptr;
  if (!plugin) {
    std::fprintf(stderr, "cannot load %s: %s\n", argv[1], ::dlerror());
    return 3;
  }
  std::map<std::string, std::string> constants;
  for (int i = 3; i < argc; ++i) {
    const std::string kv = argv[i];
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) constants[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  std::string tool;
  bool have_tool = false;
  int failed = 0;
  for (const auto& f : pl::driver::render_figures(*plugin, argv[2], constants, &tool, &have_tool)) {
    std::printf("%-24s %s%s%s\n", f.name.c_str(), f.png.empty() ? "NOT DRAWN" : f.png.c_str(),
                f.note.empty() ? "" : ": ", f.note.c_str());
    failed += f.png.empty();
  }
  std::printf("(%s)\n", tool.c_str());
  return failed ? 1 : 0;
}
