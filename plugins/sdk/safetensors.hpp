// SPDX-License-Identifier: Apache-2.0
// safetensors reader and writer (header-only, no dependencies beyond the C++17 library and POSIX).
//
// The format, as written by the Hugging Face `safetensors` library and read by PyTorch, NumPy,
// JAX and TransformerLens loaders:
//
//   bytes 0..7     N, a little-endian unsigned 64-bit integer
//   bytes 8..8+N   a UTF-8 JSON object: an optional "__metadata__": {string: string} and one entry
//                  per tensor, "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]}
//   bytes 8+N..    the data section: every tensor's elements, row-major, little-endian; b and e
//                  are relative to the start of the data section
//
// What this file writes (the reference writer's layout: tests/safetensors_crosscheck.py finds the
// same bytes, except that the reference orders "__metadata__" keys by a hash map, differently
// from run to run, where this file sorts them):
//   - tensors ordered by dtype (widest first, in the reference library's dtype order: U64, I64,
//     F64, F32, U32, I32, BF16, F16, U16, I16, F8_E4M3, F8_E5M2, I8, U8, BOOL), then by name,
//     packed with no gaps, so every tensor starts aligned to its element size;
//   - the header compact (no spaces), "__metadata__" first (omitted when empty) with its keys in
//     sorted order, then the tensors in data order; padded with spaces so the data section starts
//     at a multiple of 8 bytes;
//   - atomically: a temporary file in the same folder, fsync, rename over the target.
//
// What the reader refuses (std::runtime_error naming the file and the problem): a file shorter
// than 8 bytes; a header length over 100 MB or past the end of the file; a header that is not a
// strict JSON object of the shape above (unknown keys, duplicate names, non-string metadata,
// invalid UTF-8, trailing garbage other than spaces); an unknown dtype; a shape whose element
// count times the dtype size differs from the tensor's byte span; offsets that overlap, leave a
// hole, or run past the data section; bytes after the last tensor. Recognisable foreign files
// (PNG, zip archives such as PyTorch .pt files, gzip, ELF, text) are named in the message.
//
// Tensor::bytes always holds the file's little-endian bytes; the typed helpers (from_values,
// as_f32, ...) convert, so the code is correct on big-endian hosts too (byte-swapping there).
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace pl::sdk::safetensors {

// Declared in the reference library's order (its writer sorts by this order, descending).
enum class DType {
  BOOL,
  U8,
  I8,
  F8_E5M2,
  F8_E4M3,
  I16,
  U16,
  F16,
  BF16,
  I32,
  U32,
  F32,
  F64,
  I64,
  U64
};

struct Tensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;        // empty: a scalar (one element)
  std::vector<unsigned char> bytes;  // little-endian elements, row-major
};

struct File {
  std::map<std::string, std::string> metadata;  // the header's "__metadata__"
  std::vector<Tensor> tensors;                  // read(): in data-section order; write(): any order
};

// Largest header the reader accepts (the reference library's limit).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

namespace detail {

struct DTypeInfo {
  DType dtype;
  const char* name;
  size_t size;
};
inline const DTypeInfo kDTypes[] = {
    {DType::BOOL, "BOOL", 1},       {DType::U8, "U8", 1},           {DType::I8, "I8", 1},
    {DType::F8_E5M2, "F8_E5M2", 1}, {DType::F8_E4M3, "F8_E4M3", 1}, {DType::I16, "I16", 2},
    {DType::U16, "U16", 2},         {DType::F16, "F16", 2},         {DType::BF16, "BF16", 2},
    {DType::I32, "I32", 4},         {DType::U32, "U32", 4},         {DType::F32, "F32", 4},
    {DType::F64, "F64", 8},         {DType::I64, "I64", 8},         {DType::U64, "U64", 8},
};

[[noreturn]] inline void fail(const std::string& source, const std::string& what) {
  throw std::runtime_error("safetensors: " + source + ": " + what);
}

inline bool host_is_little_endian() {
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__)
  return __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
#else
  const uint16_t one = 1;
  unsigned char b;
  std::memcpy(&b, &one, 1);
  return b == 1;
#endif
}

// Copies n elements of `size` bytes, reversing each element's bytes on a big-endian host.
inline void copy_le(unsigned char* dst, const unsigned char* src, size_t n, size_t size) {
  if (host_is_little_endian() || size == 1) {
    if (n) std::memcpy(dst, src, n * size);
    return;
  }
  for (size_t i = 0; i < n; ++i)
    for (size_t b = 0; b < size; ++b) dst[i * size + b] = src[i * size + size - 1 - b];
}

// dtype_of<T>::value: the DType of an element type that put() and get() take.
template <class T>
struct dtype_of {
  static constexpr DType value = [] {
    if constexpr (std::is_same_v<T, float>)
      return DType::F32;
    else if constexpr (std::is_same_v<T, double>)
      return DType::F64;
    else if constexpr (std::is_same_v<T, int32_t>)
      return DType::I32;
    else if constexpr (std::is_same_v<T, int64_t>)
      return DType::I64;
    else if constexpr (std::is_same_v<T, uint8_t>)
      return DType::U8;
    else if constexpr (std::is_same_v<T, uint32_t>)
      return DType::U32;
    else if constexpr (std::is_same_v<T, uint64_t>)
      return DType::U64;
    else
      static_assert(sizeof(T) == 0, "safetensors: no dtype for this element type");
  }();
};

inline std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Element count of a shape; false on a negative dimension or overflow past 2^63.
inline bool element_count(const std::vector<int64_t>& shape, uint64_t* n) {
  uint64_t c = 1;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d != 0 && c > uint64_t(INT64_MAX) / uint64_t(d)) return false;
    c *= uint64_t(d);
  }
  *n = c;
  return true;
}

// Length of the valid UTF-8 sequence at s[i] (1-4), or 0 when invalid (overlong forms,
// surrogates and code points above U+10FFFF are invalid).
inline size_t utf8_sequence(const unsigned char* s, size_t n, size_t i) {
  const unsigned char c = s[i];
  if (c < 0x80) return 1;
  size_t len;
  uint32_t cp, min;
  if ((c & 0xE0) == 0xC0) {
    len = 2, cp = c & 0x1F, min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3, cp = c & 0x0F, min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4, cp = c & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + len > n) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((s[i + k] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (s[i + k] & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return len;
}

inline bool valid_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    const size_t len = utf8_sequence(p, s.size(), i);
    if (!len) return false;
    i += len;
  }
  return true;
}

inline void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

// JSON string literal, escaped as serde_json (the reference writer) does.
inline std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
          out += buf;
        } else {
          out += char(c);
        }
    }
  }
  return out + "\"";
}

// A strict parser for exactly the header's grammar (RFC 8259 tokens; nothing else accepted).
class HeaderParser {
 public:
  HeaderParser(const unsigned char* p, size_t n, const std::string& source)
      : p_(p), n_(n), source_(source) {}

  struct Entry {
    std::string name;
    std::string dtype;
    std::vector<int64_t> shape;
    uint64_t begin = 0, end = 0;
  };

  void parse(std::map<std::string, std::string>* metadata, std::vector<Entry>* entries) {
    skip_ws();
    if (i_ >= n_ || p_[i_] != '{') error("the header is not a JSON object");
    ++i_;
    bool have_metadata = false;
    std::vector<std::string> names;
    skip_ws();
    if (peek() == '}') {
      ++i_;
    } else {
      for (;;) {
        skip_ws();
        const size_t key_at = i_;
        std::string key = string();
        expect(':');
        if (key == "__metadata__") {
          if (have_metadata) error_at(key_at, "duplicate key \"__metadata__\"");
          have_metadata = true;
          parse_metadata(metadata);
        } else {
          if (key.empty()) error_at(key_at, "a tensor with an empty name");
          names.push_back(key);
          Entry e = parse_entry(key);
          e.name = std::move(key);
          entries->push_back(std::move(e));
        }
        skip_ws();
        const unsigned char c = next("',' or '}'");
        if (c == '}') break;
        if (c != ',') error_at(i_ - 1, "expected ',' or '}'");
      }
    }
    skip_ws();
    if (i_ != n_) error_at(i_, "unexpected bytes after the header's JSON object");
    std::sort(names.begin(), names.end());
    for (size_t k = 1; k < names.size(); ++k)
      if (names[k] == names[k - 1]) error("duplicate tensor name " + json_string(names[k]));
  }

 private:
  [[noreturn]] void error(const std::string& what) const { fail(source_, "header: " + what); }
  [[noreturn]] void error_at(size_t at, const std::string& what) const {
    fail(source_, "header: " + what + " at byte " + std::to_string(at) + " of the header");
  }
  int peek() const { return i_ < n_ ? p_[i_] : -1; }
  unsigned char next(const char* wanted) {
    if (i_ >= n_) error_at(i_, std::string("header ends where ") + wanted + " was expected");
    return p_[i_++];
  }
  void skip_ws() {
    while (i_ < n_ && (p_[i_] == ' ' || p_[i_] == '\t' || p_[i_] == '\n' || p_[i_] == '\r')) ++i_;
  }
  void expect(char c) {
    skip_ws();
    const std::string want = std::string("'") + c + "'";
    if (next(want.c_str()) != (unsigned char)c) error_at(i_ - 1, "expected " + want);
  }

  std::string string() {
    skip_ws();
    if (peek() != '"') error_at(i_, "expected a string");
    ++i_;
    std::string out;
    for (;;) {
      const unsigned char c = next("the closing '\"' of a string");
      if (c == '"') return out;
      if (c < 0x20) error_at(i_ - 1, "a raw control character inside a string");
      if (c == '\\') {
        const unsigned char e = next("an escape");
        switch (e) {
          case '"':
            out += '"';
            break;
          case '\\':
            out += '\\';
            break;
          case '/':
            out += '/';
            break;
          case 'b':
            out += '\b';
            break;
          case 'f':
            out += '\f';
            break;
          case 'n':
            out += '\n';
            break;
          case 'r':
            out += '\r';
            break;
          case 't':
            out += '\t';
            break;
          case 'u': {
            uint32_t cp = hex4();
            if (cp >= 0xD800 && cp <= 0xDBFF) {
              if (next("a low surrogate") != '\\' || next("a low surrogate") != 'u')
                error_at(i_ - 1, "a high surrogate escape not followed by a low one");
              const uint32_t lo = hex4();
              if (lo < 0xDC00 || lo > 0xDFFF) error_at(i_ - 4, "an invalid low surrogate");
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
              error_at(i_ - 4, "an unpaired low surrogate escape");
            }
            append_utf8(out, cp);
            break;
          }
          default:
            error_at(i_ - 1, "an invalid escape in a string");
        }
      } else if (c < 0x80) {
        out += char(c);
      } else {
        const size_t len = utf8_sequence(p_, n_, i_ - 1);
        if (!len) error_at(i_ - 1, "invalid UTF-8");
        out.append(reinterpret_cast<const char*>(p_ + i_ - 1), len);
        i_ += len - 1;
      }
    }
  }
  uint32_t hex4() {
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const unsigned char c = next("a hex digit");
      int d;
      if (c >= '0' && c <= '9')
        d = c - '0';
      else if (c >= 'a' && c <= 'f')
        d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        d = c - 'A' + 10;
      else
        error_at(i_ - 1, "expected a hex digit in a \\u escape");
      v = v * 16 + uint32_t(d);
    }
    return v;
  }
  // A non-negative JSON integer (no sign, fraction or exponent) up to 2^63 - 1.
  uint64_t integer(const char* what) {
    skip_ws();
    const size_t at = i_;
    if (peek() < '0' || peek() > '9')
      error_at(at, std::string("expected a non-negative integer for ") + what);
    uint64_t v = 0;
    while (peek() >= '0' && peek() <= '9') {
      const uint64_t d = uint64_t(p_[i_++] - '0');
      if (v > (uint64_t(INT64_MAX) - d) / 10) error_at(at, std::string(what) + " is too large");
      v = v * 10 + d;
    }
    if (i_ - at > 1 && p_[at] == '0') error_at(at, std::string(what) + " has a leading zero");
    if (peek() == '.' || peek() == 'e' || peek() == 'E')
      error_at(at, std::string("expected an integer for ") + what);
    return v;
  }
  std::vector<uint64_t> integer_array(const char* what) {
    expect('[');
    std::vector<uint64_t> out;
    skip_ws();
    if (peek() == ']') {
      ++i_;
      return out;
    }
    for (;;) {
      out.push_back(integer(what));
      skip_ws();
      const unsigned char c = next("',' or ']'");
      if (c == ']') return out;
      if (c != ',') error_at(i_ - 1, std::string("expected ',' or ']' in ") + what);
    }
  }
  void parse_metadata(std::map<std::string, std::string>* metadata) {
    expect('{');
    skip_ws();
    if (peek() == '}') {
      ++i_;
      return;
    }
    for (;;) {
      const size_t at = (skip_ws(), i_);
      std::string key = string();
      expect(':');
      skip_ws();
      if (peek() != '"')
        error_at(i_, "\"__metadata__\" value of " + json_string(key) + " is not a string");
      std::string value = string();
      if (!metadata->emplace(key, std::move(value)).second)
        error_at(at, "duplicate \"__metadata__\" key " + json_string(key));
      skip_ws();
      const unsigned char c = next("',' or '}'");
      if (c == '}') return;
      if (c != ',') error_at(i_ - 1, "expected ',' or '}' in \"__metadata__\"");
    }
  }
  Entry parse_entry(const std::string& name) {
    const std::string tn = "tensor " + json_string(name);
    expect('{');
    Entry e;
    bool have_dtype = false, have_shape = false, have_offsets = false;
    skip_ws();
    if (peek() == '}') error_at(i_, tn + " has no dtype, shape or data_offsets");
    for (;;) {
      const size_t at = (skip_ws(), i_);
      const std::string key = string();
      expect(':');
      if (key == "dtype" && !have_dtype) {
        skip_ws();
        if (peek() != '"') error_at(i_, tn + ": dtype is not a string");
        e.dtype = string();
        have_dtype = true;
      } else if (key == "shape" && !have_shape) {
        for (uint64_t d : integer_array("a shape dimension")) e.shape.push_back(int64_t(d));
        have_shape = true;
      } else if (key == "data_offsets" && !have_offsets) {
        const std::vector<uint64_t> o = integer_array("data_offsets");
        if (o.size() != 2)
          error_at(at, tn + ": data_offsets has " + std::to_string(o.size()) +
                           " numbers, expected 2 [begin, end]");
        e.begin = o[0], e.end = o[1];
        have_offsets = true;
      } else if (key == "dtype" || key == "shape" || key == "data_offsets") {
        error_at(at, tn + ": duplicate key \"" + key + "\"");
      } else {
        error_at(at, tn + ": unknown key " + json_string(key) +
                         " (expected dtype, shape, data_offsets)");
      }
      skip_ws();
      const unsigned char c = next("',' or '}'");
      if (c == '}') break;
      if (c != ',') error_at(i_ - 1, "expected ',' or '}' in " + tn);
    }
    if (!have_dtype || !have_shape || !have_offsets)
      error(tn + " lacks " + (!have_dtype ? "dtype" : !have_shape ? "shape" : "data_offsets"));
    return e;
  }

  const unsigned char* p_;
  size_t n_;
  size_t i_ = 0;
  const std::string& source_;
};

// A name for a foreign file's first bytes, or "" when not recognised.
inline std::string foreign_kind(const unsigned char* p, size_t n) {
  auto starts = [&](const char* magic, size_t len) {
    return n >= len && !std::memcmp(p, magic, len);
  };
  if (starts("\x89PNG\r\n\x1a\n", 8)) return "a PNG image";
  if (starts("PK\x03\x04", 4)) return "a zip archive (a PyTorch .pt/.pth file?)";
  if (starts("\x1f\x8b", 2)) return "a gzip file";
  if (starts("\x7f"
             "ELF",
             4))
    return "an ELF binary";
  if (starts("\x93NUMPY", 6)) return "a NumPy .npy file";
  if (starts("\x89HDF", 4)) return "an HDF5 file";
  bool text = n > 0;
  // control bytes, and bytes that never occur in UTF-8 (0xc0, 0xc1, 0xf5-0xff: a length field
  // of all ones is not text)
  for (size_t i = 0; i < std::min<size_t>(n, 64); ++i)
    if (p[i] < 0x09 || (p[i] > 0x0d && p[i] < 0x20) || p[i] == 0x7f || p[i] == 0xc0 ||
        p[i] == 0xc1 || p[i] >= 0xf5)
      text = false;
  return text ? "text" : "";
}

}  // namespace detail

// ---------------------------------------------------------------- dtypes
inline const char* dtype_name(DType t) {
  for (const auto& d : detail::kDTypes)
    if (d.dtype == t) return d.name;
  return "?";
}
inline size_t dtype_size(DType t) {
  for (const auto& d : detail::kDTypes)
    if (d.dtype == t) return d.size;
  return 0;
}
// false when `name` is not a dtype this reader knows.
inline bool parse_dtype(const std::string& name, DType* t) {
  for (const auto& d : detail::kDTypes)
    if (name == d.name) {
      *t = d.dtype;
      return true;
    }
  return false;
}

inline uint64_t element_count(const Tensor& t) {
  uint64_t n = 0;
  if (!detail::element_count(t.shape, &n))
    throw std::invalid_argument("safetensors: tensor \"" + t.name + "\" has an invalid shape " +
                                detail::shape_string(t.shape));
  return n;
}

// ---------------------------------------------------------------- typed helpers
// A tensor holding prod(shape) values of T (float, double, int32_t, int64_t, uint8_t, uint32_t,
// uint64_t) copied from `values`.
template <class T>
Tensor from_values(std::string name, std::vector<int64_t> shape, const T* values) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = detail::dtype_of<T>::value;
  t.shape = std::move(shape);
  const uint64_t n = element_count(t);
  t.bytes.resize(size_t(n) * sizeof(T));
  detail::copy_le(t.bytes.data(), reinterpret_cast<const unsigned char*>(values), size_t(n),
                  sizeof(T));
  return t;
}
inline Tensor from_f32(std::string name, std::vector<int64_t> shape, const float* v) {
  return from_values<float>(std::move(name), std::move(shape), v);
}
inline Tensor from_f64(std::string name, std::vector<int64_t> shape, const double* v) {
  return from_values<double>(std::move(name), std::move(shape), v);
}
inline Tensor from_i32(std::string name, std::vector<int64_t> shape, const int32_t* v) {
  return from_values<int32_t>(std::move(name), std::move(shape), v);
}
inline Tensor from_i64(std::string name, std::vector<int64_t> shape, const int64_t* v) {
  return from_values<int64_t>(std::move(name), std::move(shape), v);
}

// The tensor's values as T; throws std::runtime_error when its dtype is not T's.
template <class T>
std::vector<T> as_values(const Tensor& t) {
  if (t.dtype != detail::dtype_of<T>::value)
    throw std::runtime_error("safetensors: tensor \"" + t.name + "\" has dtype " +
                             dtype_name(t.dtype) + ", read as " +
                             dtype_name(detail::dtype_of<T>::value));
  const uint64_t n = element_count(t);
  if (t.bytes.size() != n * sizeof(T))
    throw std::runtime_error("safetensors: tensor \"" + t.name + "\" holds " +
                             std::to_string(t.bytes.size()) + " bytes, its shape " +
                             detail::shape_string(t.shape) + " needs " +
                             std::to_string(n * sizeof(T)));
  std::vector<T> out(static_cast<size_t>(n));
  detail::copy_le(reinterpret_cast<unsigned char*>(out.data()), t.bytes.data(), size_t(n),
                  sizeof(T));
  return out;
}
inline std::vector<float> as_f32(const Tensor& t) { return as_values<float>(t); }
inline std::vector<double> as_f64(const Tensor& t) { return as_values<double>(t); }
inline std::vector<int32_t> as_i32(const Tensor& t) { return as_values<int32_t>(t); }
inline std::vector<int64_t> as_i64(const Tensor& t) { return as_values<int64_t>(t); }

// The tensor called `name`, or nullptr.
inline const Tensor* find(const File& f, const std::string& name) {
  for (const Tensor& t : f.tensors)
    if (t.name == name) return &t;
  return nullptr;
}
inline Tensor* find(File& f, const std::string& name) {
  for (Tensor& t : f.tensors)
    if (t.name == name) return &t;
  return nullptr;
}
// The tensor called `name`; throws std::runtime_error listing the names present when absent.
inline const Tensor& get(const File& f, const std::string& name) {
  if (const Tensor* t = find(f, name)) return *t;
  std::string names;
  for (const Tensor& t : f.tensors) names += (names.empty() ? "" : ", ") + t.name;
  throw std::runtime_error("safetensors: no tensor \"" + name +
                           "\" (the file has: " + (names.empty() ? "no tensors" : names) + ")");
}

// ---------------------------------------------------------------- bytes
// The file's bytes. Throws std::invalid_argument on an empty, duplicate or "__metadata__" name,
// invalid UTF-8 in a name or metadata, or bytes that do not match dtype x shape.
inline std::vector<unsigned char> serialize(const File& f) {
  std::vector<const Tensor*> order;
  for (const Tensor& t : f.tensors) {
    if (t.name.empty() || t.name == "__metadata__" || !detail::valid_utf8(t.name))
      throw std::invalid_argument("safetensors: invalid tensor name " +
                                  detail::json_string(t.name));
    const size_t size = dtype_size(t.dtype);
    if (size == 0) throw std::invalid_argument("safetensors: tensor \"" + t.name + "\": bad dtype");
    const uint64_t n = element_count(t);
    if (n > uint64_t(INT64_MAX) / size || t.bytes.size() != n * size)
      throw std::invalid_argument("safetensors: tensor \"" + t.name + "\" holds " +
                                  std::to_string(t.bytes.size()) + " bytes, " +
                                  dtype_name(t.dtype) + " " + detail::shape_string(t.shape) +
                                  " needs " + std::to_string(n * size));
    order.push_back(&t);
  }
  for (const auto& [k, v] : f.metadata)
    if (!detail::valid_utf8(k) || !detail::valid_utf8(v))
      throw std::invalid_argument("safetensors: metadata " + detail::json_string(k) +
                                  " is not valid UTF-8");
  std::sort(order.begin(), order.end(), [](const Tensor* a, const Tensor* b) {
    if (a->dtype != b->dtype) return int(a->dtype) > int(b->dtype);
    return a->name < b->name;
  });
  for (size_t i = 1; i < order.size(); ++i)
    if (order[i]->name == order[i - 1]->name)
      throw std::invalid_argument("safetensors: duplicate tensor name \"" + order[i]->name + "\"");

  std::string h = "{";
  if (!f.metadata.empty()) {
    h += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : f.metadata) {
      h += (first ? "" : ",") + detail::json_string(k) + ":" + detail::json_string(v);
      first = false;
    }
    h += "}";
  }
  uint64_t offset = 0;
  for (const Tensor* t : order) {
    if (h.size() > 1) h += ",";
    h += detail::json_string(t->name) + ":{\"dtype\":\"" + dtype_name(t->dtype) + "\",\"shape\":[";
    for (size_t i = 0; i < t->shape.size(); ++i) h += (i ? "," : "") + std::to_string(t->shape[i]);
    h += "],\"data_offsets\":[" + std::to_string(offset) + ",";
    offset += t->bytes.size();
    h += std::to_string(offset) + "]}";
  }
  h += "}";
  h.append((8 - h.size() % 8) % 8, ' ');

  std::vector<unsigned char> out;
  out.reserve(8 + h.size() + size_t(offset));
  const uint64_t n = h.size();
  for (int b = 0; b < 8; ++b) out.push_back((unsigned char)(n >> (8 * b)));
  out.insert(out.end(), h.begin(), h.end());
  for (const Tensor* t : order) out.insert(out.end(), t->bytes.begin(), t->bytes.end());
  return out;
}

namespace detail {
// The 8-byte header length and the header of a `size`-byte file whose first `avail` bytes are at
// `p` (at least 8 + the header length of them, or all when the checks fail first): the length
// against the file's size and the limit, the header as JSON into `metadata` and `entries`.
// Returns the header length. read() calls it before reading the data section.
inline uint64_t parse_header(const unsigned char* p, size_t avail, uint64_t size,
                             const std::string& source,
                             std::map<std::string, std::string>* metadata,
                             std::vector<HeaderParser::Entry>* entries) {
  if (size < 8) {
    const std::string kind = foreign_kind(p, avail);
    fail(source, "the file is " + std::to_string(size) +
                     " bytes, shorter than the 8-byte header length: not a safetensors file" +
                     (kind.empty() ? "" : " (" + kind + ")"));
  }
  uint64_t n = 0;
  for (int b = 7; b >= 0; --b) n = (n << 8) | p[b];
  if (n > kMaxHeaderBytes || n > size - 8) {
    const std::string kind = foreign_kind(p, avail);
    if (!kind.empty())
      fail(source, "not a safetensors file: it looks like " + kind +
                       " (its first 8 bytes, read as "
                       "the header length, give " +
                       std::to_string(n) + ")");
    if (n > kMaxHeaderBytes)
      fail(source, "header length " + std::to_string(n) + " exceeds the limit of " +
                       std::to_string(kMaxHeaderBytes) +
                       " bytes: not a safetensors file or corrupt");
    fail(source, "header length " + std::to_string(n) + " but only " + std::to_string(size - 8) +
                     " bytes follow the length field: truncated or not a safetensors file");
  }
  if (avail < 8 + n) fail(source, "the file shrank while it was read");
  {
    size_t i = 8;
    while (i < 8 + n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r')) ++i;
    if (i == 8 + n || p[i] != '{') {
      const std::string kind = foreign_kind(p, avail);
      fail(source, "the header is not a JSON object: not a safetensors file" +
                       (kind.empty() ? "" : " (it looks like " + kind + ")"));
    }
  }
  HeaderParser(p + 8, size_t(n), source).parse(metadata, entries);
  return n;
}
}  // namespace detail

// Parses a whole file's bytes; `source` names it in error messages.
inline File parse(const unsigned char* p, size_t size, const std::string& source) {
  using detail::fail;
  File f;
  std::vector<detail::HeaderParser::Entry> entries;
  const uint64_t n = detail::parse_header(p, size, size, source, &f.metadata, &entries);

  const uint64_t data_size = size - 8 - n;
  for (const auto& e : entries) {
    const std::string tn = "tensor " + detail::json_string(e.name);
    DType t;
    if (!parse_dtype(e.dtype, &t))
      fail(source, tn + ": unknown dtype " + detail::json_string(e.dtype));
    uint64_t count = 0;
    if (!detail::element_count(e.shape, &count) || count > uint64_t(INT64_MAX) / dtype_size(t))
      fail(source, tn + ": shape " + detail::shape_string(e.shape) + " is too large");
    if (e.end < e.begin)
      fail(source, tn + ": data_offsets [" + std::to_string(e.begin) + ", " +
                       std::to_string(e.end) + "] end before they begin");
    if (count * dtype_size(t) != e.end - e.begin)
      fail(source, tn + ": " + e.dtype + " " + detail::shape_string(e.shape) + " is " +
                       std::to_string(count * dtype_size(t)) + " bytes but data_offsets [" +
                       std::to_string(e.begin) + ", " + std::to_string(e.end) + "] span " +
                       std::to_string(e.end - e.begin));
  }
  std::vector<size_t> order(entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (entries[a].begin != entries[b].begin) return entries[a].begin < entries[b].begin;
    return entries[a].end < entries[b].end;
  });
  uint64_t at = 0;
  std::string prev;
  for (size_t k : order) {
    const auto& e = entries[k];
    const std::string tn = "tensor " + detail::json_string(e.name);
    if (e.begin > at)
      fail(source, "a hole in the data section: bytes [" + std::to_string(at) + ", " +
                       std::to_string(e.begin) + ") belong to no tensor (" + tn + " begins at " +
                       std::to_string(e.begin) + ")");
    if (e.begin < at)
      fail(source, tn + " [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                       ") overlaps " + prev + " (which ends at " + std::to_string(at) + ")");
    if (e.end > data_size)
      fail(source, "the data section is truncated: " + tn + " needs bytes [" +
                       std::to_string(e.begin) + ", " + std::to_string(e.end) +
                       ") of the data section, which holds " + std::to_string(data_size));
    at = e.end;
    prev = tn;
  }
  if (at != data_size)
    fail(source, std::to_string(data_size - at) +
                     " bytes after the last tensor (the tensors end at " + std::to_string(at) +
                     " of a " + std::to_string(data_size) + "-byte data section)");
  const unsigned char* data = p + 8 + n;
  for (size_t k : order) {
    auto& e = entries[k];
    Tensor t;
    t.name = std::move(e.name);
    parse_dtype(e.dtype, &t.dtype);
    t.shape = std::move(e.shape);
    t.bytes.assign(data + e.begin, data + e.end);
    f.tensors.push_back(std::move(t));
  }
  return f;
}

// ---------------------------------------------------------------- files
// Writes `f` to `path` atomically: a temporary file next to it, fsync, rename over `path`, fsync
// of the folder. Throws std::runtime_error naming the path and errno's message.
inline void write(const std::string& path, const File& f) {
  const std::vector<unsigned char> bytes = serialize(f);
  const std::string tmp = path + ".tmp." + std::to_string(long(::getpid()));
  auto os_fail = [&](const char* what, const std::string& p) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw std::runtime_error("safetensors: " + p + ": " + what + ": " + std::strerror(err));
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    throw std::runtime_error("safetensors: " + tmp + ": cannot create: " + std::strerror(err));
  }
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      if (w == 0) errno = EIO;
      const int err = errno;
      ::close(fd);
      errno = err;
      os_fail("write failed", tmp);
    }
    done += size_t(w);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    os_fail("fsync failed", tmp);
  }
  if (::close(fd) != 0) os_fail("close failed", tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0) os_fail("cannot rename the temporary file", path);
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_CLOEXEC);
  if (dfd >= 0) {  // best effort: the file is complete either way
    ::fsync(dfd);
    ::close(dfd);
  }
}

// Reads and checks a whole file. Throws std::runtime_error naming `path` and the problem.
inline File read(const std::string& path) {
  // O_NONBLOCK: opening a FIFO (or a device) must not wait for a writer; it is refused below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    throw std::runtime_error("safetensors: " + path + ": cannot open: " + std::strerror(err));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw std::runtime_error("safetensors: " + path + ": cannot stat: " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw std::runtime_error("safetensors: " + path + ": " +
                             (S_ISDIR(st.st_mode)
                                  ? "is a folder, not a file"
                                  : "not a regular file (a FIFO, socket or device)"));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  // Reads the file up to `want` bytes (fewer when it shrank while being read).
  std::vector<unsigned char> bytes;
  size_t done = 0;
  auto read_to = [&](uint64_t want) {
    bytes.resize(size_t(want));
    while (done < bytes.size()) {
      const ssize_t r = ::read(fd, bytes.data() + done, bytes.size() - done);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) {
        const int err = errno;
        ::close(fd);
        throw std::runtime_error("safetensors: " + path + ": read failed: " + std::strerror(err));
      }
      if (r == 0) break;  // shrank while reading: parse what is there
      done += size_t(r);
    }
    bytes.resize(done);
  };
  // The header length and the header first: a foreign or corrupt file (a header length past the
  // end, a data section other than the tensors') is refused before its data is read.
  const uint64_t size = uint64_t(st.st_size);
  read_to(std::min<uint64_t>(size, 64));
  if (done == size && size < 64) {
    ::close(fd);
    return parse(bytes.data(), bytes.size(), path);
  }
  try {
    uint64_t n = 0;
    for (int b = 7; b >= 0 && done >= 8; --b) n = (n << 8) | bytes[size_t(b)];
    if (done >= 8 && n <= kMaxHeaderBytes && n <= size - 8) read_to(8 + n);
    std::map<std::string, std::string> metadata;
    std::vector<detail::HeaderParser::Entry> entries;
    n = detail::parse_header(bytes.data(), done, size, path, &metadata, &entries);
    uint64_t end = 0;
    for (const auto& e : entries) end = std::max(end, e.end);
    if (end < size - 8 - n)
      detail::fail(path, std::to_string(size - 8 - n - end) +
                             " bytes after the last tensor (the tensors end at " +
                             std::to_string(end) + " of a " + std::to_string(size - 8 - n) +
                             "-byte data section)");
  } catch (...) {
    ::close(fd);
    throw;
  }
  read_to(size);
  ::close(fd);
  return parse(bytes.data(), bytes.size(), path);
}

}  // namespace pl::sdk::safetensors
