// SPDX-License-Identifier: Apache-2.0
// `phaselab new NAME [--dir DIR]`: writes a plugin folder from the template in plugins/template/
// (embedded at build time): NAME.cc, test_NAME.cc, NAME.toml and a meson.build that finds the
// installed SDK with pkg-config.
#pragma once

#include <string>

namespace pl::driver {

// Returns the exit status (0, or 2 with a message on a bad name or an existing folder).
int cmd_new(const std::string& name, const std::string& dir);

}  // namespace pl::driver
