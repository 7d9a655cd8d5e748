// SPDX-License-Identifier: Apache-2.0
// Tests of the SDK's safetensors reader and writer (plugins/sdk/safetensors.hpp): bit-exact round
// trips, the exact bytes of a small file built here from the format's definition, and every kind
// of malformed or foreign file refused with a message saying what is wrong.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "sdk/safetensors.hpp"

namespace pl::test {
namespace {

namespace st = pl::sdk::safetensors;
using Bytes = std::vector<unsigned char>;

// A fresh folder under $TMPDIR (or /tmp), removed with its files at the end of the test.
struct TempDir {
  std::string path;
  std::vector<std::string> files;
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/pl_safetensors_XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    REQUIRE(mkdtemp(buf.data()) != nullptr);
    path = buf.data();
  }
  std::string file(const std::string& name) {
    files.push_back(path + "/" + name);
    return files.back();
  }
  ~TempDir() {
    for (const auto& f : files) ::unlink(f.c_str());
    ::rmdir(path.c_str());
  }
};

void put_file(const std::string& path, const Bytes& b) {
  FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  if (!b.empty()) REQUIRE(std::fwrite(b.data(), 1, b.size(), f) == b.size());
  std::fclose(f);
}

Bytes get_file(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  REQUIRE(f != nullptr);
  Bytes b;
  int c;
  while ((c = std::fgetc(f)) != EOF) b.push_back((unsigned char)c);
  std::fclose(f);
  return b;
}

// A file from a header text and a data section, the length field written byte by byte.
Bytes raw_file(const std::string& header, const Bytes& data, uint64_t length_field) {
  Bytes b;
  for (int i = 0; i < 8; ++i) b.push_back((unsigned char)(length_field >> (8 * i)));
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}
Bytes raw_file(const std::string& header, const Bytes& data) {
  return raw_file(header, data, header.size());
}

// The message parse() throws for `b` ("" when it does not throw).
std::string refusal(const Bytes& b) {
  try {
    st::parse(b.data(), b.size(), "test.safetensors");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

float f32_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
double f64_bits(uint64_t u) {
  double d;
  std::memcpy(&d, &u, 8);
  return d;
}

// Float and double values whose bit patterns a careless writer or reader would change: NaNs with
// payloads (quiet and signalling, both signs), -0.0, the smallest and largest denormals, inf.
const uint32_t kF32Bits[] = {0x7fc00001u, 0xffc00abcu, 0x7f800001u, 0xff8fffffu, 0x80000000u,
                             0x00000000u, 0x00000001u, 0x007fffffu, 0x807fffffu, 0x7f800000u,
                             0xff800000u, 0x3f800000u, 0x7f7fffffu, 0x00800000u};
const uint64_t kF64Bits[] = {0x7ff8000000000001ull, 0xfff0000000000001ull, 0x8000000000000000ull,
                             0x0000000000000001ull, 0x000fffffffffffffull, 0x7ff0000000000000ull,
                             0x3ff0000000000000ull, 0x7fefffffffffffffull};

st::File sample_file() {
  st::File f;
  f.metadata["model"] = "two-layer \"transformer\"\n\ttab\x01 \xc3\xa9 \xf0\x9f\x98\x80";
  f.metadata["seed"] = "12345";
  f.metadata[""] = "";
  std::vector<float> f32;
  for (uint32_t u : kF32Bits) f32.push_back(f32_bits(u));
  f.tensors.push_back(st::from_f32("w/f32", {2, 7}, f32.data()));
  std::vector<double> f64;
  for (uint64_t u : kF64Bits) f64.push_back(f64_bits(u));
  f.tensors.push_back(st::from_f64("b.f64", {8}, f64.data()));
  const int32_t i32[] = {INT32_MIN, -1, 0, 1, INT32_MAX};
  f.tensors.push_back(st::from_i32("idx", {5, 1}, i32));
  const int64_t i64[] = {INT64_MIN, -2, INT64_MAX};
  f.tensors.push_back(st::from_i64("steps", {3}, i64));
  const float scalar = -0.0f;
  f.tensors.push_back(st::from_f32("scalar", {}, &scalar));
  f.tensors.push_back(st::from_f32("empty", {0, 4}, nullptr));
  return f;
}

TEST_CASE("safetensors: round trip through a file is bit-exact") {
  TempDir dir;
  const std::string path = dir.file("model.safetensors");
  const st::File f = sample_file();
  st::write(path, f);
  const st::File g = st::read(path);
  CHECK(g.metadata == f.metadata);
  REQUIRE(g.tensors.size() == f.tensors.size());
  for (const st::Tensor& t : f.tensors) {
    const st::Tensor* u = st::find(g, t.name);
    REQUIRE_MESSAGE(u != nullptr, t.name);
    CHECK(u->dtype == t.dtype);
    CHECK(u->shape == t.shape);
    CHECK(u->bytes == t.bytes);
  }
  // Typed values, compared bit by bit (== would fail on NaN and pass -0.0 == 0.0).
  const std::vector<float> f32 = st::as_f32(st::get(g, "w/f32"));
  REQUIRE(f32.size() == std::size(kF32Bits));
  for (size_t i = 0; i < f32.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &f32[i], 4);
    CHECK(u == kF32Bits[i]);
  }
  const std::vector<double> f64 = st::as_f64(st::get(g, "b.f64"));
  REQUIRE(f64.size() == std::size(kF64Bits));
  for (size_t i = 0; i < f64.size(); ++i) {
    uint64_t u;
    std::memcpy(&u, &f64[i], 8);
    CHECK(u == kF64Bits[i]);
  }
  CHECK(st::as_i32(st::get(g, "idx")) == std::vector<int32_t>{INT32_MIN, -1, 0, 1, INT32_MAX});
  CHECK(st::as_i64(st::get(g, "steps")) == std::vector<int64_t>{INT64_MIN, -2, INT64_MAX});
  const std::vector<float> s = st::as_f32(st::get(g, "scalar"));
  REQUIRE(s.size() == 1);
  CHECK(std::signbit(s[0]));
  CHECK(st::get(g, "empty").bytes.empty());
  // The little-endian bytes of 1.0f (0x3f800000) as stored, independent of the host.
  const st::Tensor& w = st::get(g, "w/f32");
  CHECK(Bytes(w.bytes.begin() + 11 * 4, w.bytes.begin() + 12 * 4) == Bytes{0x00, 0x00, 0x80, 0x3f});
  // Writing what was read gives the same file.
  const std::string again = dir.file("again.safetensors");
  st::write(again, g);
  CHECK(get_file(again) == get_file(path));
  // No temporary file is left behind.
  CHECK(::access((path + ".tmp." + std::to_string(long(::getpid()))).c_str(), F_OK) != 0);
}

TEST_CASE("safetensors: the bytes of a tiny file, built from the format's definition") {
  st::File f;
  f.metadata["k"] = "v";
  const float b[] = {1.0f, -2.0f};
  f.tensors.push_back(st::from_f32("b", {2}, b));
  const int64_t a = -1;
  f.tensors.push_back(st::from_i64("a", {}, &a));
  // I64 before F32 (wider dtype first), offsets relative to the data section, header padded with
  // spaces to a multiple of 8 so the data starts 8-byte aligned.
  std::string header =
      R"({"__metadata__":{"k":"v"},"a":{"dtype":"I64","shape":[],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})";
  REQUIRE(header.size() == 132);
  header += "    ";
  const Bytes data = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,   // int64 -1
                      0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0};  // 1.0f, -2.0f
  Bytes expected = {0x88, 0, 0, 0, 0, 0, 0, 0};                         // 136
  expected.insert(expected.end(), header.begin(), header.end());
  expected.insert(expected.end(), data.begin(), data.end());
  CHECK(st::serialize(f) == expected);

  // Ties within a dtype break by name; the reference library's dtype order otherwise.
  st::File g;
  const float one = 1;
  const double d = 1;
  const int32_t i = 1;
  g.tensors.push_back(st::from_i32("a", {}, &i));
  g.tensors.push_back(st::from_f32("z", {}, &one));
  g.tensors.push_back(st::from_f32("m", {}, &one));
  g.tensors.push_back(st::from_f64("q", {}, &d));
  const st::File h = st::parse(st::serialize(g).data(), st::serialize(g).size(), "x");
  REQUIRE(h.tensors.size() == 4);
  CHECK(h.tensors[0].name == "q");
  CHECK(h.tensors[1].name == "m");
  CHECK(h.tensors[2].name == "z");
  CHECK(h.tensors[3].name == "a");
  // No metadata: no "__metadata__" key; an empty file is "{}" padded to 8.
  const Bytes empty = st::serialize(st::File{});
  CHECK(empty == raw_file("{}      ", {}));
}

TEST_CASE("safetensors: the reader accepts what the format allows") {
  // Whitespace anywhere, keys in any order, escapes, tensors listed out of data order.
  const std::string header =
      "{ \"b\" : { \"data_offsets\" : [ 4 , 8 ] , \"shape\" : [ 1 ] , \"dtype\" : \"I32\" } ,\n"
      "  \"__metadata__\": {\"\\u00e9\\ud83d\\ude00\\/\": \"x\\ty\"},\r\n"
      "  \"a\": {\"dtype\": \"F32\", \"shape\": [], \"data_offsets\": [0, 4]} }\t ";
  const st::File f = st::parse(raw_file(header, {0, 0, 0x80, 0x3f, 7, 0, 0, 0}).data(),
                               8 + header.size() + 8, "x");
  REQUIRE(f.tensors.size() == 2);
  CHECK(f.tensors[0].name == "a");
  CHECK(st::as_f32(f.tensors[0]) == std::vector<float>{1.0f});
  CHECK(st::as_i32(f.tensors[1]) == std::vector<int32_t>{7});
  CHECK(f.metadata.at("\xc3\xa9\xf0\x9f\x98\x80/") == "x\ty");
}

TEST_CASE("safetensors: refusals say what is wrong") {
  const Bytes four = {0, 0, 0x80, 0x3f};
  auto one_tensor = [](const std::string& body) { return "{\"t\":{" + body + "}}"; };
  struct Case {
    const char* what;
    Bytes file;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"empty file", {}, "the file is 0 bytes, shorter than the 8-byte header length"},
      {"7 bytes", {1, 2, 3, 4, 5, 6, 7}, "the file is 7 bytes"},
      {"header longer than the cap", raw_file("{}", {}, 100'000'001),
       "header length 100000001 exceeds the limit of 100000000 bytes"},
      {"header longer than the file", raw_file("{}      ", {}, 9),
       "header length 9 but only 8 bytes follow the length field"},
      {"header not JSON", raw_file("hello   ", {}), "the header is not a JSON object"},
      {"header a JSON array", raw_file("[1,2]   ", {}), "the header is not a JSON object"},
      {"header cut inside an object", raw_file("{\"t\":{\"dtype\"", {}),
       "header ends where ':' was expected"},
      {"trailing garbage in the header", raw_file("{}x", {}),
       "unexpected bytes after the header's JSON object at byte 2"},
      {"unknown dtype",
       raw_file(one_tensor(R"("dtype":"F31","shape":[1],"data_offsets":[0,4])"), four),
       "tensor \"t\": unknown dtype \"F31\""},
      {"dtype not a string",
       raw_file(one_tensor(R"("dtype":4,"shape":[1],"data_offsets":[0,4])"), four),
       "tensor \"t\": dtype is not a string"},
      {"shape x size != span",
       raw_file(one_tensor(R"("dtype":"F32","shape":[2],"data_offsets":[0,4])"), four),
       "tensor \"t\": F32 [2] is 8 bytes but data_offsets [0, 4] span 4"},
      {"negative dimension",
       raw_file(one_tensor(R"("dtype":"F32","shape":[-1],"data_offsets":[0,4])"), four),
       "expected a non-negative integer for a shape dimension"},
      {"fractional offset",
       raw_file(one_tensor(R"("dtype":"F32","shape":[1],"data_offsets":[0,4.0])"), four),
       "expected an integer for data_offsets"},
      {"three offsets",
       raw_file(one_tensor(R"("dtype":"F32","shape":[1],"data_offsets":[0,4,8])"), four),
       "data_offsets has 3 numbers, expected 2"},
      {"offsets reversed",
       raw_file(one_tensor(R"("dtype":"F32","shape":[0],"data_offsets":[4,0])"), four),
       "data_offsets [4, 0] end before they begin"},
      {"missing shape", raw_file(one_tensor(R"("dtype":"F32","data_offsets":[0,4])"), four),
       "tensor \"t\" lacks shape"},
      {"unknown key",
       raw_file(one_tensor(R"("dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1)"), four),
       "tensor \"t\": unknown key \"x\""},
      {"duplicate name",
       raw_file(R"({"t":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},)"
                R"("t":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}})",
                {}),
       "duplicate tensor name \"t\""},
      {"metadata value not a string", raw_file(R"({"__metadata__":{"a":1}})", {}),
       "\"__metadata__\" value of \"a\" is not a string"},
      {"overflowing shape",
       raw_file(one_tensor(R"("dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,4])"),
                four),
       "shape [4294967296, 4294967296] is too large"},
      {"offset past the data section",
       raw_file(one_tensor(R"("dtype":"F32","shape":[2],"data_offsets":[0,8])"), four),
       "the data section is truncated: tensor \"t\" needs bytes [0, 8) of the data section, "
       "which holds 4"},
      {"overlap",
       raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                R"("b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})",
                four),
       "tensor \"b\" [2, 4) overlaps tensor \"a\" (which ends at 4)"},
      {"hole",
       raw_file(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                R"("b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})",
                four),
       "a hole in the data section: bytes [1, 2) belong to no tensor"},
      {"hole at the start",
       raw_file(one_tensor(R"("dtype":"U8","shape":[2],"data_offsets":[2,4])"), four),
       "bytes [0, 2) belong to no tensor"},
      {"bytes after the last tensor",
       raw_file(one_tensor(R"("dtype":"U8","shape":[2],"data_offsets":[0,2])"), four),
       "2 bytes after the last tensor"},
      {"invalid UTF-8", raw_file("{\"\xff\":{}}", {}), "invalid UTF-8 at byte 2"},
      {"raw control character", raw_file("{\"a\nb\":{}}", {}),
       "a raw control character inside a string"},
      {"unpaired surrogate", raw_file(R"({"\udc00":{}})", {}), "an unpaired low surrogate"},
      {"PNG image",
       {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'},
       "not a safetensors file: it looks like a PNG image"},
      {"zip archive", {'P', 'K', 3, 4, 20, 0, 0, 0, 8, 0}, "it looks like a zip archive"},
      {"random text",
       [] {
         const std::string s = "Lorem ipsum dolor sit amet, consectetur adipiscing elit.\n";
         return Bytes(s.begin(), s.end());
       }(),
       "not a safetensors file: it looks like text"},
      {"a length field of all ones (-1), then text",
       [] {
         Bytes b(8, 0xff);
         const std::string s = "{\"a\": 1}";
         b.insert(b.end(), s.begin(), s.end());
         return b;
       }(),
       "header length 18446744073709551615 exceeds the limit of 100000000 bytes"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    const std::string msg = refusal(c.file);
    CHECK_MESSAGE(contains(msg, c.message), msg);
    CHECK(contains(msg, "test.safetensors"));
  }
}

TEST_CASE("safetensors: the file functions name the path and errno") {
  TempDir dir;
  const std::string missing = dir.path + "/missing.safetensors";
  try {
    st::read(missing);
    FAIL("read of a missing file did not throw");
  } catch (const std::runtime_error& e) {
    CHECK(contains(e.what(), missing));
    CHECK(contains(e.what(), std::strerror(ENOENT)));
  }
  try {
    st::read(dir.path);
    FAIL("read of a folder did not throw");
  } catch (const std::runtime_error& e) {
    CHECK(contains(e.what(), "is a folder"));
  }
  const std::string in_missing_dir = dir.path + "/no/such/dir/x.safetensors";
  try {
    st::write(in_missing_dir, sample_file());
    FAIL("write into a missing folder did not throw");
  } catch (const std::runtime_error& e) {
    CHECK(contains(e.what(), in_missing_dir));
    CHECK(contains(e.what(), std::strerror(ENOENT)));
  }
  // A failed write leaves an existing file untouched.
  const std::string path = dir.file("keep.safetensors");
  st::write(path, sample_file());
  const Bytes before = get_file(path);
  st::File bad;
  bad.tensors.push_back(st::Tensor{"x", st::DType::F32, {3}, Bytes(8)});
  CHECK_THROWS_WITH_AS(st::write(path, bad), doctest::Contains("holds 8 bytes, F32 [3] needs 12"),
                       std::invalid_argument);
  CHECK(get_file(path) == before);
  // Typed access with the wrong type, and a missing name.
  const st::File f = st::read(path);
  CHECK_THROWS_WITH_AS(st::as_f32(st::get(f, "steps")),
                       doctest::Contains("tensor \"steps\" has dtype I64, read as F32"),
                       std::runtime_error);
  CHECK_THROWS_WITH_AS(st::get(f, "nope"), doctest::Contains("no tensor \"nope\" (the file has: "),
                       std::runtime_error);
}

// Peak resident memory of this process, in MB.
long peak_mb() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024;
}

// The header length and the header are checked before the data is read: a large file whose first
// 8 bytes are not a header length, or whose data section is far larger than its tensors, is
// refused without reading (or allocating) it; a FIFO is refused at once instead of waiting for a
// writer. Before, read() allocated and read the whole file first, and open() of a FIFO hung.
TEST_CASE("safetensors: header and file type checked before the data is read") {
  TempDir dir;
  constexpr off_t kBig = off_t(256) << 20;  // sparse: no disk space used
  const long peak0 = peak_mb();
  // first 8 bytes 0xff: a header length far past the end
  const std::string junk = dir.file("junk.safetensors");
  put_file(junk, Bytes(8, 0xff));
  REQUIRE(::truncate(junk.c_str(), kBig) == 0);
  CHECK_THROWS_WITH_AS(st::read(junk), doctest::Contains("exceeds the limit"), std::runtime_error);
  // a valid header of a 4-byte tensor, then 256 MB of zeros
  const std::string padded = dir.file("padded.safetensors");
  put_file(padded, raw_file(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", Bytes(4)));
  REQUIRE(::truncate(padded.c_str(), kBig) == 0);
  CHECK_THROWS_WITH_AS(st::read(padded), doctest::Contains("bytes after the last tensor"),
                       std::runtime_error);
  CHECK(peak_mb() - peak0 < 64);
  // a FIFO: refused, not waited on
  const std::string fifo = dir.file("fifo.safetensors");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::atomic<int> outcome{0};  // 0: still in read(), 1: refused as not a regular file, 2: other
  std::thread reader([&] {
    try {
      st::read(fifo);
      outcome = 2;
    } catch (const std::runtime_error& e) {
      outcome = contains(e.what(), "not a regular file") ? 1 : 2;
    }
  });
  const auto t0 = std::chrono::steady_clock::now();
  while (outcome == 0 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const int seen = outcome;
  if (seen == 0) {  // still blocked in open(): a writer releases it so that the test can end
    const int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (w >= 0) ::close(w);
  }
  reader.join();
  CHECK(seen == 1);
}

TEST_CASE("safetensors: every truncation of a valid file is refused") {
  TempDir dir;
  const Bytes full = st::serialize(sample_file());
  REQUIRE(full.size() > 200);
  REQUIRE_NOTHROW(st::parse(full.data(), full.size(), "full"));
  const std::string path = dir.file("cut.safetensors");
  size_t refused = 0;
  for (size_t n = 0; n < full.size(); ++n) {
    const Bytes cut(full.begin(), full.begin() + n);
    put_file(path, cut);
    try {
      st::read(path);
      FAIL("a file cut to " << n << " of " << full.size() << " bytes was accepted");
    } catch (const std::runtime_error& e) {
      CHECK(contains(e.what(), path));
      ++refused;
    }
  }
  CHECK(refused == full.size());
}

TEST_CASE("safetensors: corrupted headers never crash the reader") {
  // Every byte of the header replaced by each of a few troublesome values: the reader either
  // parses the result or refuses it with std::runtime_error (any other outcome fails the test;
  // a crash or an out-of-bounds read fails the sanitizer run).
  const Bytes full = st::serialize(sample_file());
  uint64_t n = 0;
  for (int b = 7; b >= 0; --b) n = (n << 8) | full[size_t(b)];
  const unsigned char values[] = {0x00, '"', '\\', '{', '}', '[', ']', ',', ':', '9', 0xff, 0xc3};
  size_t parsed = 0, refused = 0;
  for (size_t i = 0; i < 8 + n; ++i) {
    for (unsigned char v : values) {
      Bytes b = full;
      if (b[i] == v) continue;
      b[i] = v;
      try {
        st::parse(b.data(), b.size(), "fuzz");
        ++parsed;
      } catch (const std::runtime_error&) {
        ++refused;
      }
    }
  }
  CHECK(refused > 0);
  MESSAGE("corrupted headers: ", parsed, " parsed, ", refused, " refused");
}

}  // namespace
}  // namespace pl::test
