// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for checkpoint headers: every input is a would-be safetensors file, read the
// way phaselab reads a checkpoint. The in-memory parser (parse) and the header-first check
// (parse_header, given only the first 64 bytes as read() does) must agree on refusing a bad
// length field; a file written to disk goes through read() and the Markov checkpoint reader
// (metadata converted with range checks, tensors checked before the buffer is allocated). Any
// crash, sanitizer report, leak, allocation over the fuzzer's limit or timeout is a bug.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "markov_common/checkpoint.hpp"
#include "sdk/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace st = pl::sdk::safetensors;
  bool parsed = true;
  try {
    (void)st::parse(data, size, "fuzz");
  } catch (const std::runtime_error&) {
    parsed = false;
  }
  // read()'s first step: the length field against the size, from the first 64 bytes only.
  if (size >= 8) {
    std::map<std::string, std::string> metadata;
    std::vector<st::detail::HeaderParser::Entry> entries;
    uint64_t n = 0;
    for (int b = 7; b >= 0; --b) n = (n << 8) | data[b];
    const size_t avail = n <= st::kMaxHeaderBytes && n <= size - 8 ? size_t(8 + n) : size;
    try {
      (void)st::detail::parse_header(data, std::min<size_t>(avail, size), size, "fuzz", &metadata,
                                     &entries);
    } catch (const std::runtime_error&) {
      if (parsed) __builtin_trap();  // parse() accepted what its own header check refuses
    }
  }
  static const std::string path = "/tmp/phaselab_checkpoint_fuzz_" + std::to_string(::getpid());
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    std::fwrite(data, 1, size, f);
    std::fclose(f);
    try {
      (void)pl::markov::load_checkpoint(path);
    } catch (const std::exception&) {
    }
    std::remove(path.c_str());
  }
  return 0;
}
