// SPDX-License-Identifier: Apache-2.0
// phaselab plugin SDK: a small C++ layer over phaselab_plugin.h for experiment authors.
// Header-only. Typed parameter declarations, named parameter access (also in validate), result
// rows, buffered random streams from the kernels, and PL_DEFINE_PLUGIN, which turns an Experiment
// class into the exported C entry struct (exceptions are caught at the boundary and turned into
// PL_FAILED with the message). The guide with a complete example: docs/plugins.md.
//
//   struct MyExperiment {
//     explicit MyExperiment(pl::sdk::Context& cx);  // allocate everything here
//     pl_status run(pl::sdk::Context& cx);          // hot loop, emit rows
//   };
//   const pl_param_decl kParams[] = {pl::sdk::int_param("L", 16, "sequence length", 2, 4096)};
//   const char* const kCols[] = {"train_mse", "test_mse"};
//   const pl_table_decl kTables[] = {pl::sdk::table("results", kCols)};
//   const pl_plot_decl kPlots[] = {pl::sdk::plot("mse", "MSE vs L", "results", "L", "test_mse")};
//   std::string check(const pl::sdk::Params& p);  // "" when the point is fine
//   PL_DEFINE_PLUGIN(MyExperiment, "my_exp", "0.1", "one line", kParams, kTables, kPlots,
//                    pl::sdk::validate_with<check> /* or nullptr */, nullptr /* finish */)
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "phaselab_plugin.h"

namespace pl::sdk {

// ---------------------------------------------------------------- declarations
constexpr pl_param_decl int_param(const char* name, int64_t def, const char* help,
                                  int64_t min = INT64_MIN, int64_t max = INT64_MAX) {
  return pl_param_decl{name,
                       PL_PARAM_INT,
                       help,
                       def,
                       double(def),
                       nullptr,
                       (min != INT64_MIN ? uint32_t(PL_RANGE_MIN) : 0u) |
                           (max != INT64_MAX ? uint32_t(PL_RANGE_MAX) : 0u),
                       double(min),
                       double(max),
                       nullptr,
                       {}};
}
// range_flags: PL_RANGE_* (e.g. PL_RANGE_MIN | PL_RANGE_MIN_EXCLUSIVE for "> min").
constexpr pl_param_decl float_param(const char* name, double def, const char* help,
                                    uint32_t range_flags = 0, double min = 0, double max = 0) {
  return pl_param_decl{name, PL_PARAM_FLOAT, help, 0, def, nullptr, range_flags, min,
                       max,  nullptr,        {}};
}
constexpr pl_param_decl bool_param(const char* name, bool def, const char* help) {
  return pl_param_decl{name, PL_PARAM_BOOL, help, def ? 1 : 0, def ? 1.0 : 0.0, nullptr, 0u, 0,
                       0,    nullptr,       {}};
}
constexpr pl_param_decl string_param(const char* name, const char* def, const char* help) {
  return pl_param_decl{name, PL_PARAM_STRING, help, 0, 0, def, 0u, 0, 0, nullptr, {}};
}
// choices: "a|b|c"; def must be one of them.
constexpr pl_param_decl enum_param(const char* name, const char* def, const char* choices,
                                   const char* help) {
  return pl_param_decl{name, PL_PARAM_ENUM, help, 0, 0, def, 0u, 0, 0, choices, {}};
}
// Table flags: kAllParams prepends every parameter, not only the swept keys (PL_TABLE_ALL_PARAMS).
constexpr uintptr_t kAllParams = PL_TABLE_ALL_PARAMS;
template <size_t N>
constexpr pl_table_decl table(const char* name, const char* const (&columns)[N],
                              uintptr_t flags = 0) {
  return pl_table_decl{name, columns, uint32_t(N), flags, {}};
}
// A plot; `style` (optional) points to a PlotStyle with static storage, e.g.
//   constexpr pl::sdk::PlotStyle kPhase = pl::sdk::PlotStyle().facet("K").y_categories("a|b");
//   pl::sdk::plot("name", "title", "results", "step", "y", "", "", 0, &kPhase)
constexpr pl_plot_decl plot(const char* name, const char* title, const char* table, const char* x,
                            const char* y, const char* group_by = "", const char* filter = "",
                            uint32_t flags = 0, const pl_plot_style* style = nullptr) {
  return pl_plot_decl{name, title, table, x, y, group_by, filter, flags, style, {}};
}
// pl_plot_style with a builder: each call returns a copy with one more setting.
struct PlotStyle : pl_plot_style {
  constexpr PlotStyle()
      : pl_plot_style{uint32_t(sizeof(pl_plot_style)),
                      PL_PLOT_KIND_XY,
                      nullptr,
                      0,
                      0,
                      nullptr,
                      nullptr,
                      nullptr,
                      nullptr,
                      nullptr,
                      nullptr,
                      nullptr,
                      nullptr,
                      {}} {}
  // One panel per value of `column`, `columns` panels per row (0: about square).
  constexpr PlotStyle facet(const char* column, uint32_t columns = 0) const {
    PlotStyle s = *this;
    s.facet_by = column;
    s.facet_columns = columns;
    return s;
  }
  constexpr PlotStyle x_categories(const char* names) const {
    PlotStyle s = *this;
    s.pl_plot_style::x_categories = names;
    return s;
  }
  // Label the x ticks by the text of `column` (same table) instead of the x numbers:
  // .xtic_column("edge") on x = edge_index draws E->A1.q, E->A1.k, ... under the cells.
  constexpr PlotStyle xtic_column(const char* column) const {
    PlotStyle s = *this;
    s.pl_plot_style::xtic_column = column;
    return s;
  }
  // Reference y columns drawn as dashed lines without markers in their data's colour:
  // .references("var_theory=var") draws var_theory in the colour of var (of the same group).
  constexpr PlotStyle references(const char* ref_equals_data) const {
    PlotStyle s = *this;
    s.y_references = ref_equals_data;
    return s;
  }
  constexpr PlotStyle y_categories(const char* names) const {
    PlotStyle s = *this;
    s.pl_plot_style::y_categories = names;
    return s;
  }
  // A heat map over (x, y) coloured by column z (categories "a|b|c", or "" for numbers).
  constexpr PlotStyle heatmap(const char* z_column, const char* z_categories = "") const {
    PlotStyle s = *this;
    s.kind = PL_PLOT_KIND_HEATMAP;
    s.z = z_column;
    s.pl_plot_style::z_categories = z_categories;
    return s;
  }
  constexpr PlotStyle labels(const char* x_label, const char* y_label) const {
    PlotStyle s = *this;
    s.xlabel = x_label;
    s.ylabel = y_label;
    return s;
  }
};

// ---------------------------------------------------------------- random streams
// SplitMix64 finaliser: a well-mixed 64-bit hash used to derive independent stream ids.
inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
inline uint64_t derive(uint64_t a, uint64_t b) { return mix64(a ^ mix64(b)); }
// FNV-1a of a text, for naming a purpose: cx.rng("init") is cx.rng(pl::sdk::purpose("init")).
constexpr uint64_t purpose(const char* text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *text; ++text) h = (h ^ uint64_t(uint8_t(*text))) * 0x100000001b3ull;
  return h;
}

// A buffered random stream drawn from the kernel table: Gaussian sample j is sample j of the
// `gaussian` kernel's stream (seed, stream), uniform number j comes from word j of the
// `uniform_bits` kernel's stream (seed, uniform_stream()) with uniform_stream() = derive(stream, 1)
// (a different stream: the two kernels read the same Philox words for one stream id). The
// counters are kept here: drawing one at a time, in blocks, or through the kernels directly at
// gaussian_counter() gives the same numbers, on every kernel target.
class Rng {
 public:
  static constexpr size_t kBuffer = 256;

  // Keeps the two kernels' function pointers, not the table: `k` may be a temporary.
  Rng(const pl_kernel_table& k, uint64_t seed, uint64_t stream)
      : gaussian_(k.gaussian),
        uniform_bits_(k.uniform_bits),
        seed_(seed),
        stream_(stream),
        ustream_(derive(stream, 1)) {}

  // N(0, 1).
  float gaussian() {
    if (g_next_ - g_start_ >= g_fill_) refill_gaussian();
    return g_buf_[g_next_++ - g_start_];
  }
  // Uniform in [0, 1): the top 24 bits of a word, times 2^-24 (every float is exact).
  float uniform() { return float(bits() >> 8) * 0x1.0p-24f; }
  // Uniform in [lo, hi).
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  // A raw 32-bit word.
  uint32_t bits() {
    if (u_next_ - u_start_ >= u_fill_) refill_uniform();
    return u_buf_[u_next_++ - u_start_];
  }
  // An integer in [0, n), n >= 1 (Lemire's multiply-shift; bias below 2^-32 * n).
  uint32_t below(uint32_t n) { return uint32_t((uint64_t(bits()) * n) >> 32); }
  // n Gaussians / uniforms at once, the same numbers as n single draws.
  void gaussian(float* out, size_t n) {
    for (; n && g_next_ - g_start_ < g_fill_; --n) *out++ = g_buf_[g_next_++ - g_start_];
    if (n) gaussian_(out, n, seed_, stream_, g_next_), g_next_ += n;
  }
  void uniform(float* out, size_t n) {
    for (size_t i = 0; i < n; ++i) out[i] = uniform();
  }
  // Skips n Gaussians (e.g. after handing gaussian_counter() to the sgld kernel, which draws
  // its noise from the same stream).
  void skip_gaussian(uint64_t n) { g_next_ += n; }

  uint64_t seed() const { return seed_; }
  uint64_t stream() const { return stream_; }  // the Gaussian stream
  uint64_t uniform_stream() const { return ustream_; }
  uint64_t gaussian_counter() const { return g_next_; }  // number of the next Gaussian
  uint64_t uniform_counter() const { return u_next_; }   // number of the next uniform word

 private:
  void refill_gaussian() {
    gaussian_(g_buf_, kBuffer, seed_, stream_, g_next_);
    g_start_ = g_next_;
    g_fill_ = kBuffer;
  }
  void refill_uniform() {
    uniform_bits_(u_buf_, kBuffer, seed_, ustream_, u_next_);
    u_start_ = u_next_;
    u_fill_ = kBuffer;
  }
  decltype(pl_kernel_table::gaussian) gaussian_;
  decltype(pl_kernel_table::uniform_bits) uniform_bits_;
  uint64_t seed_, stream_, ustream_;
  uint64_t g_next_ = 0, g_start_ = 0, u_next_ = 0, u_start_ = 0;
  size_t g_fill_ = 0, u_fill_ = 0;
  float g_buf_[kBuffer];
  uint32_t u_buf_[kBuffer];
};

// ---------------------------------------------------------------- cells and rows
struct Cell {
  pl_cell c;
  Cell() : c{PL_CELL_EMPTY, 0, 0, nullptr} {}
  Cell(double v) : c{PL_CELL_NUM, v, 0, nullptr} {}                     // NOLINT
  Cell(float v) : c{PL_CELL_NUM, double(v), 0, nullptr} {}              // NOLINT
  Cell(int v) : c{PL_CELL_INT, double(v), v, nullptr} {}                // NOLINT
  Cell(int64_t v) : c{PL_CELL_INT, double(v), v, nullptr} {}            // NOLINT
  Cell(uint64_t v) : c{PL_CELL_INT, double(v), int64_t(v), nullptr} {}  // NOLINT
  Cell(bool v) : c{PL_CELL_INT, v ? 1.0 : 0.0, v ? 1 : 0, nullptr} {}   // NOLINT
  // Other integer types (unsigned, long long, size_t where it differs from uint64_t, ...).
  template <typename T, typename std::enable_if<
                            std::is_integral<T>::value && !std::is_same<T, bool>::value &&
                                !std::is_same<T, int>::value && !std::is_same<T, int64_t>::value &&
                                !std::is_same<T, uint64_t>::value,
                            int>::type = 0>
  Cell(T v) : c{PL_CELL_INT, double(v), int64_t(v), nullptr} {}    // NOLINT
  Cell(const char* s) : c{PL_CELL_STR, 0, 0, s} {}                 // NOLINT
  Cell(const std::string& s) : c{PL_CELL_STR, 0, 0, s.c_str()} {}  // NOLINT (s must outlive emit)
};

// ---------------------------------------------------------------- named parameters
inline const char* type_name(pl_param_type t) {
  switch (t) {
    case PL_PARAM_INT:
      return "int";
    case PL_PARAM_FLOAT:
      return "float";
    case PL_PARAM_BOOL:
      return "bool";
    case PL_PARAM_STRING:
      return "string";
    case PL_PARAM_ENUM:
      return "enum";
  }
  return "unknown";
}

// The resolved values of one point by declared name: what Context reads, and what a validate
// function gets through validate_with. Throws std::invalid_argument on an undeclared name or a
// read with the wrong type (naming both types).
class Params {
 public:
  Params(const pl_param_decl* decls, uint32_t num_decls, const pl_value* values,
         uint32_t num_values)
      : decls_(decls), n_(num_decls < num_values ? num_decls : num_values), values_(values) {}

  int64_t int_value(const char* name) const { return typed(name, PL_PARAM_INT).i; }
  // Floats; an int parameter is given converted.
  double float_value(const char* name) const {
    const pl_value& v = find(name);
    if (v.type != PL_PARAM_FLOAT && v.type != PL_PARAM_INT) bad_type(name, v.type, PL_PARAM_FLOAT);
    return v.f;
  }
  bool bool_value(const char* name) const { return typed(name, PL_PARAM_BOOL).i != 0; }
  // Strings and enums (the choice's text).
  std::string string_value(const char* name) const {
    const pl_value& v = find(name);
    if (v.type != PL_PARAM_STRING && v.type != PL_PARAM_ENUM)
      bad_type(name, v.type, PL_PARAM_STRING);
    return v.s ? v.s : "";
  }
  bool is(const char* name, const char* choice) const { return string_value(name) == choice; }
  bool has(const char* name) const { return index(name) >= 0; }
  // The names of SDK 0.1 (one letter each), kept for plugins written against it.
  [[deprecated("use int_value")]] int64_t i(const char* name) const { return int_value(name); }
  [[deprecated("use float_value")]] double f(const char* name) const { return float_value(name); }
  [[deprecated("use bool_value")]] bool b(const char* name) const { return bool_value(name); }
  [[deprecated("use string_value")]] std::string s(const char* name) const {
    return string_value(name);
  }
  const pl_value& value(const char* name) const { return find(name); }
  uint32_t size() const { return n_; }
  const pl_param_decl& decl(uint32_t j) const { return decls_[j]; }
  const pl_value& at(uint32_t j) const { return values_[j]; }

 private:
  int64_t index(const char* name) const {
    for (uint32_t j = 0; j < n_; ++j)
      if (!std::strcmp(decls_[j].name, name)) return j;
    return -1;
  }
  const pl_value& find(const char* name) const {
    const int64_t j = index(name);
    if (j < 0)
      throw std::invalid_argument(std::string("plugin asked for undeclared parameter '") + name +
                                  "'");
    return values_[j];
  }
  const pl_value& typed(const char* name, pl_param_type t) const {
    const pl_value& v = find(name);
    if (v.type != t) bad_type(name, v.type, t);
    return v;
  }
  [[noreturn]] static void bad_type(const char* name, pl_param_type declared, pl_param_type read) {
    static const char* const reader[] = {"",
                                         "int_value()",
                                         "float_value()",
                                         "bool_value()",
                                         "string_value()",
                                         "string_value() or is()"};
    throw std::invalid_argument(
        std::string("parameter '") + name + "' is declared " + type_name(declared) +
        " but was read as " + type_name(read) + " (read it with " +
        (declared >= PL_PARAM_INT && declared <= PL_PARAM_ENUM ? reader[declared] : "?") + ")");
  }
  const pl_param_decl* decls_;
  uint32_t n_;
  const pl_value* values_;
};

// Why this plugin cannot run on `host` ("" when it can): the host's kernel table must be at least
// as long as the one the plugin was compiled with (kernels are only appended).
inline std::string host_mismatch(const pl_host* host) {
  if (!host || !host->kernels) return "the host gave no kernel table";
  const pl_kernel_table& k = *host->kernels;
  if (k.struct_size < sizeof(pl_kernel_table) || !k.variant)
    return "the host's kernel table has " + std::to_string(k.num_kernels) + " kernels (" +
           std::to_string(k.struct_size) + " bytes), this plugin was compiled with " +
           std::to_string((sizeof(pl_kernel_table) - offsetof(pl_kernel_table, exp)) /
                          sizeof(void (*)())) +
           " (" + std::to_string(sizeof(pl_kernel_table)) +
           " bytes): run it with a phaselab at least as new as the SDK it was built with";
  return "";
}

// ---------------------------------------------------------------- per-point context
class Context {
 public:
  Context(const pl_plugin* plugin, const pl_host* host, const pl_point* point)
      : plugin_(plugin), host_(host), point_(point), k(*host->kernels) {}

  // Parameter access by declared name (throws std::invalid_argument on a wrong name or type).
  Params params() const {
    return Params(plugin_->params, plugin_->num_params, point_->params, point_->num_params);
  }
  int64_t int_value(const char* name) const { return params().int_value(name); }
  double float_value(const char* name) const { return params().float_value(name); }
  bool bool_value(const char* name) const { return params().bool_value(name); }
  std::string string_value(const char* name) const { return params().string_value(name); }
  bool is(const char* name, const char* choice) const { return params().is(name, choice); }
  // The names of SDK 0.1, kept for plugins written against it.
  [[deprecated("use int_value")]] int64_t i(const char* name) const { return int_value(name); }
  [[deprecated("use float_value")]] double f(const char* name) const { return float_value(name); }
  [[deprecated("use bool_value")]] bool b(const char* name) const { return bool_value(name); }
  [[deprecated("use string_value")]] std::string s(const char* name) const {
    return string_value(name);
  }

  uint64_t seed() const { return point_->seed; }
  uint64_t point_index() const { return point_->index; }
  uint64_t point_key() const { return point_->point_key; }
  // An RNG stream id for `purpose` that depends on (seed, purpose) only: the same data for every
  // point of one seed (e.g. training data shared by methods).
  uint64_t seed_stream(uint64_t purpose) const { return derive(point_->seed, purpose); }
  // A stream id that depends on (seed, this point's parameter values that differ from their
  // defaults, purpose): adding a key to a plugin does not move existing points' streams.
  uint64_t point_stream(uint64_t purpose) const {
    return derive(derive(point_->seed, point_->point_key), purpose);
  }
  // Buffered random streams with their counters kept (see Rng): rng(purpose) on point_stream,
  // seed_rng(purpose) on seed_stream. Same config + seed -> the same numbers on every target.
  Rng rng(uint64_t purpose) const { return Rng(k, point_->seed, point_stream(purpose)); }
  Rng rng(const char* purpose) const { return rng(sdk::purpose(purpose)); }
  Rng seed_rng(uint64_t purpose) const { return Rng(k, point_->seed, seed_stream(purpose)); }
  Rng seed_rng(const char* purpose) const { return seed_rng(sdk::purpose(purpose)); }

  void emit(uint32_t table, std::initializer_list<Cell> cells) const {
    std::vector<pl_cell> v;
    v.reserve(cells.size());
    for (const auto& c : cells) v.push_back(c.c);
    emit(table, v.data(), uint32_t(v.size()));
  }
  void emit(uint32_t table, const std::vector<Cell>& cells) const {
    std::vector<pl_cell> v;
    v.reserve(cells.size());
    for (const auto& c : cells) v.push_back(c.c);
    emit(table, v.data(), uint32_t(v.size()));
  }
  void emit(uint32_t table, const pl_cell* cells, uint32_t n) const {
    if (host_->emit(host_->ctx, table, cells, n) != 0)
      throw std::runtime_error("result row rejected by host (table " + std::to_string(table) + ")");
  }

  void progress(double fraction) const { host_->progress(host_->ctx, fraction); }
  bool cancelled() const { return host_->cancelled(host_->ctx) != 0; }
  void log(pl_log_level level, const std::string& msg) const {
    host_->log(host_->ctx, level, msg.c_str());
  }
  void info(const std::string& msg) const { log(PL_LOG_INFO, msg); }
  // Records the reason and returns PL_FAILED: `return cx.fail("NaN in loss at step 12");`
  pl_status fail(const std::string& reason) const {
    host_->fail(host_->ctx, reason.c_str());
    return PL_FAILED;
  }
  const char* out_dir() const { return host_->out_dir; }
  int threads() const { return host_->threads; }

  const pl_plugin* plugin_;
  const pl_host* host_;
  const pl_point* point_;
  const pl_kernel_table& k;  // the kernels: cx.k.gemm(...), cx.k.softmax_rows(...)
};

// ---------------------------------------------------------------- glue
template <typename Experiment>
struct Glue {
  // The Context lives in the state, so an Experiment may keep a reference to the one its
  // constructor received; run() refreshes its host and point pointers.
  struct State {
    Context cx;
    Experiment exp;
    State(const pl_plugin* plugin, const pl_host* host, const pl_point* point)
        : cx(plugin, host, point), exp(cx) {}
  };
  static const pl_plugin* self;

  static pl_status create(const pl_host* host, const pl_point* point, void** state) {
    *state = nullptr;
    const std::string mismatch = host_mismatch(host);
    if (!mismatch.empty()) {
      host->fail(host->ctx, mismatch.c_str());
      return PL_FAILED;
    }
    try {
      *state = new State(self, host, point);
      return PL_OK;
    } catch (const std::exception& e) {
      host->fail(host->ctx, e.what());
    } catch (...) {
      host->fail(host->ctx, "unknown exception in create");
    }
    return PL_FAILED;
  }
  static pl_status run(void* state, const pl_host* host, const pl_point* point) {
    try {
      auto* s = static_cast<State*>(state);
      s->cx.host_ = host;
      s->cx.point_ = point;
      return s->exp.run(s->cx);
    } catch (const std::exception& e) {
      host->fail(host->ctx, e.what());
    } catch (...) {
      host->fail(host->ctx, "unknown exception in run");
    }
    return PL_FAILED;
  }
  static void destroy(void* state) { delete static_cast<State*>(state); }
};
template <typename Experiment>
const pl_plugin* Glue<Experiment>::self = nullptr;

}  // namespace pl::sdk

// SDK 0.1's namespace: plugins written for it (plsdk::int_param, plsdk::Context) still compile.
// New code uses pl::sdk. (ABI version 2 moved the kernel table's variant names behind a pointer:
// cx.k.variant.X is now cx.k.variant->X; docs/plugins.md, "Migrating from SDK 0.1".)
namespace plsdk = pl::sdk;

extern "C" PL_EXPORT const pl_plugin PL_PLUGIN_ENTRY;

namespace pl::sdk {

// A validate hook that reads parameters by name: Fn returns "" when the point is fine, else the
// message (name the keys: "N = 8 must be <= L = 4"). Exceptions become the message.
//   std::string check(const pl::sdk::Params& p) { return p.int_value("N") <= p.int_value("L") ? ""
//   : "..."; } PL_DEFINE_PLUGIN(..., pl::sdk::validate_with<check>, nullptr)
template <std::string (*Fn)(const Params&)>
int validate_with(const pl_value* values, uint32_t num_values, char* err, size_t err_len) {
  std::string msg;
  try {
    msg = Fn(Params(PL_PLUGIN_ENTRY.params, PL_PLUGIN_ENTRY.num_params, values, num_values));
  } catch (const std::exception& e) {
    msg = e.what();
  }
  if (msg.empty()) return 0;
  if (err && err_len) std::snprintf(err, err_len, "%s", msg.c_str());
  return 1;
}

// A finish hook written in C++: Fn reads the run folder's tables (pl::sdk::Table, sdk/table.hpp)
// and writes its files; it returns PL_OK, or PL_FAILED after host->fail. An exception becomes
// host->fail(what()) and PL_FAILED, so none crosses the C boundary.
//   pl_status summarise(const pl_host* host, const std::string& run_dir);
//   PL_DEFINE_PLUGIN(..., validate, pl::sdk::finish_with<summarise>)
template <pl_status (*Fn)(const pl_host*, const std::string&)>
pl_status finish_with(const pl_host* host, const char* run_dir) {
  try {
    return Fn(host, run_dir ? run_dir : "");
  } catch (const std::exception& e) {
    host->fail(host->ctx, e.what());
  } catch (...) {
    host->fail(host->ctx, "finish threw a non-standard exception");
  }
  return PL_FAILED;
}

}  // namespace pl::sdk

#define PL_SDK_COUNT(a) uint32_t(sizeof(a) / sizeof((a)[0]))

// Defines the exported entry. validate_fn: int(const pl_value*, uint32_t, char*, size_t) or
// nullptr. finish_fn: pl_status(const pl_host*, const char*) or nullptr. Use
// PL_DEFINE_PLUGIN_NO_PLOTS when there are no plots.
#define PL_DEFINE_PLUGIN_EX(Experiment, name, version, description, params, tables, plots_ptr, \
                            num_plots, validate_fn, finish_fn)                                 \
  extern "C" PL_EXPORT const pl_plugin PL_PLUGIN_ENTRY;                                        \
  extern "C" PL_EXPORT const pl_plugin PL_PLUGIN_ENTRY = {PL_PLUGIN_ABI_VERSION,               \
                                                          uint32_t(sizeof(pl_plugin)),         \
                                                          name,                                \
                                                          version,                             \
                                                          description,                         \
                                                          params,                              \
                                                          PL_SDK_COUNT(params),                \
                                                          tables,                              \
                                                          PL_SDK_COUNT(tables),                \
                                                          plots_ptr,                           \
                                                          num_plots,                           \
                                                          validate_fn,                         \
                                                          &pl::sdk::Glue<Experiment>::create,  \
                                                          &pl::sdk::Glue<Experiment>::run,     \
                                                          &pl::sdk::Glue<Experiment>::destroy, \
                                                          finish_fn,                           \
                                                          {}};                                 \
  template <>                                                                                  \
  const pl_plugin* pl::sdk::Glue<Experiment>::self = &PL_PLUGIN_ENTRY;

#define PL_DEFINE_PLUGIN_NO_PLOTS(Experiment, name, version, description, params, tables,  \
                                  validate_fn, finish_fn)                                  \
  PL_DEFINE_PLUGIN_EX(Experiment, name, version, description, params, tables, nullptr, 0u, \
                      validate_fn, finish_fn)

#define PL_DEFINE_PLUGIN(Experiment, name, version, description, params, tables, plots, \
                         validate_fn, finish_fn)                                        \
  PL_DEFINE_PLUGIN_EX(Experiment, name, version, description, params, tables, plots,    \
                      PL_SDK_COUNT(plots), validate_fn, finish_fn)
