// SPDX-License-Identifier: Apache-2.0
// A small command-line tool over the SDK's safetensors code, used by
// tests/safetensors_crosscheck.py to compare phaselab with the reference Python library:
//
//   safetensors_tool dump FILE      one line per metadata entry and per tensor (in file order):
//                                     meta <key as JSON> <value as JSON>
//                                     tensor <name as JSON> <dtype> <shape> <bytes> <fnv1a64 hex>
//                                   the checksum is FNV-1a (64-bit) of the tensor's little-endian
//                                   bytes; exit status 1 with the reader's message on a bad file
//   safetensors_tool example FILE   writes the deterministic example file described below
//
// The example's values come from integer formulas that the Python script repeats independently:
//   "f32"   F32 [3, 5, 7]: the bit patterns kSpecialF32 (NaN payloads, -0, denormals, inf), then
//           bits(i) = (2654435761 i + 12345) mod 2^32 for the remaining i
//   "f64"   F64 [4, 6]: bits(i) = (0x9E3779B97F4A7C15 i + 1) mod 2^64
//   "i32"   I32 [10]: the f32 formula's bits as a two's complement int32
//   "i64"   I64 [2, 2]: the f64 formula's bits as a two's complement int64
//   "scalar" F32 []: -0.0;  "empty" F32 [0, 3];  "layers.0.qkv" F32 [2, 3]: 0.5 i - 1
//   metadata {"config": "{\"K\": 16, \"d\": 32}", "seed": "7", "unicode": "\u00e9\U0001F600"}
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "sdk/safetensors.hpp"

namespace {

namespace st = pl::sdk::safetensors;

const uint32_t kSpecialF32[] = {0x7fc00001u, 0xffc00abcu, 0x7f800001u, 0xff8fffffu, 0x80000000u,
                                0x00000001u, 0x007fffffu, 0x807fffffu, 0x7f800000u, 0xff800000u};

uint64_t fnv1a64(const std::vector<unsigned char>& b) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : b) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

st::File example() {
  st::File f;
  f.metadata["config"] = "{\"K\": 16, \"d\": 32}";
  f.metadata["seed"] = "7";
  f.metadata["unicode"] = "\xc3\xa9\xf0\x9f\x98\x80";
  std::vector<uint32_t> u32(3 * 5 * 7);
  for (size_t i = 0; i < u32.size(); ++i)
    u32[i] = i < std::size(kSpecialF32) ? kSpecialF32[i] : uint32_t(2654435761u * i + 12345u);
  std::vector<float> f32(u32.size());
  std::memcpy(f32.data(), u32.data(), 4 * u32.size());
  f.tensors.push_back(st::from_f32("f32", {3, 5, 7}, f32.data()));
  std::vector<uint64_t> u64(24);
  for (size_t i = 0; i < u64.size(); ++i) u64[i] = 0x9E3779B97F4A7C15ull * i + 1;
  std::vector<double> f64(u64.size());
  std::memcpy(f64.data(), u64.data(), 8 * u64.size());
  f.tensors.push_back(st::from_f64("f64", {4, 6}, f64.data()));
  std::vector<int32_t> i32(10);
  for (size_t i = 0; i < i32.size(); ++i) i32[i] = int32_t(uint32_t(2654435761u * i + 12345u));
  f.tensors.push_back(st::from_i32("i32", {10}, i32.data()));
  std::vector<int64_t> i64(4);
  for (size_t i = 0; i < i64.size(); ++i) i64[i] = int64_t(0x9E3779B97F4A7C15ull * i + 1);
  f.tensors.push_back(st::from_i64("i64", {2, 2}, i64.data()));
  const float minus_zero = -0.0f;
  f.tensors.push_back(st::from_f32("scalar", {}, &minus_zero));
  f.tensors.push_back(st::from_f32("empty", {0, 3}, nullptr));
  float qkv[6];
  for (int i = 0; i < 6; ++i) qkv[i] = 0.5f * float(i) - 1.0f;
  f.tensors.push_back(st::from_f32("layers.0.qkv", {2, 3}, qkv));
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[1], "dump") != 0 && std::strcmp(argv[1], "example") != 0)) {
    std::fprintf(stderr, "usage: safetensors_tool dump FILE | safetensors_tool example FILE\n");
    return 2;
  }
  try {
    if (std::strcmp(argv[1], "example") == 0) {
      st::write(argv[2], example());
      return 0;
    }
    const st::File f = st::read(argv[2]);
    for (const auto& [k, v] : f.metadata)
      std::printf("meta %s %s\n", st::detail::json_string(k).c_str(),
                  st::detail::json_string(v).c_str());
    for (const st::Tensor& t : f.tensors) {
      std::string shape = "[";
      for (size_t i = 0; i < t.shape.size(); ++i)
        shape += (i ? "," : "") + std::to_string(t.shape[i]);
      std::printf("tensor %s %s %s] %zu %016" PRIx64 "\n", st::detail::json_string(t.name).c_str(),
                  st::dtype_name(t.dtype), shape.c_str(), t.bytes.size(), fnv1a64(t.bytes));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
