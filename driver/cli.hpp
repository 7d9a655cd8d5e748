// SPDX-License-Identifier: Apache-2.0
// Command-line parsing and help texts. Each command knows its options (a table in cli.cc, with
// its help text); CLI11 splits the words (--key value, --key=value, -h), the messages are
// phaselab's: an unknown command or option is a usage error (exit 2) with a did-you-mean, an
// option without its value (or with an empty one) and a flag given a value are usage errors.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace pl::driver {

struct Args {
  std::string command;  // list, kernels, check, run ("" for top level)
  std::vector<std::string> positional;
  // run and check: the words after the config that hold '=' (copy_task.L=32), in order.
  std::vector<std::string> overrides;
  std::map<std::string, std::string> options;  // "--out" -> "DIR" (never ""), "--quiet" -> ""
  bool has(const std::string& o) const { return options.count(o) != 0; }
};

// Parses argv. On a usage error prints it to stderr and returns false.
bool parse_args(int argc, char** argv, Args* out);
void print_usage(std::FILE* f);
// Help for one command; false if the command is unknown.
bool print_command_help(const std::string& command);

}  // namespace pl::driver
