// phaselab plugin SDK: a small C++ layer over phaselab_plugin.h for experiment authors.
// Header-only. Typed parameter declarations and access, result rows, per-point RNG streams,
// and PL_DEFINE_PLUGIN, which turns an Experiment class into the exported C entry struct
// (exceptions are caught at the boundary and turned into PL_FAILED with the message).
//
//   struct MyExperiment {
//     explicit MyExperiment(pl::sdk::Context& cx);  // allocate everything here
//     pl_status run(pl::sdk::Context& cx);          // hot loop, emit rows
//   };
//   static const pl_param_decl kParams[] = { pl::sdk::int_param("L", 16, "sequence length", 2,
//   4096),
//   ... }; static const char* const kCols[] = {"train_mse", "test_mse"}; static const pl_table_decl
//   kTables[] = { pl::sdk::table("results", kCols) }; static const pl_plot_decl kPlots[] = { ... };
//   PL_DEFINE_PLUGIN(MyExperiment, "my_exp", "0.1", "one line", kParams, kTables, kPlots,
//                    nullptr /* validate */, nullptr /* finish */)
#pragma once

#include <cmath>
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
template <size_t N>
constexpr pl_table_decl table(const char* name, const char* const (&columns)[N]) {
  return pl_table_decl{name, columns, uint32_t(N), {}};
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

// ---------------------------------------------------------------- per-point context
class Context {
 public:
  Context(const pl_plugin* plugin, const pl_host* host, const pl_point* point)
      : plugin_(plugin), host_(host), point_(point), k(*host->kernels) {}

  // Parameter access by declared name (throws std::invalid_argument on a wrong name or type).
  int64_t i(const char* name) const { return value(name, PL_PARAM_INT).i; }
  double f(const char* name) const {
    const pl_value& v = find(name);
    if (v.type != PL_PARAM_FLOAT && v.type != PL_PARAM_INT) bad_type(name);
    return v.f;
  }
  bool b(const char* name) const { return value(name, PL_PARAM_BOOL).i != 0; }
  std::string s(const char* name) const {
    const pl_value& v = find(name);
    if (v.type != PL_PARAM_STRING && v.type != PL_PARAM_ENUM) bad_type(name);
    return v.s ? v.s : "";
  }
  bool is(const char* name, const char* choice) const { return s(name) == choice; }

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

 private:
  const pl_value& find(const char* name) const {
    for (uint32_t j = 0; j < plugin_->num_params && j < point_->num_params; ++j)
      if (!std::strcmp(plugin_->params[j].name, name)) return point_->params[j];
    throw std::invalid_argument(std::string("plugin asked for undeclared parameter '") + name +
                                "'");
  }
  const pl_value& value(const char* name, pl_param_type t) const {
    const pl_value& v = find(name);
    if (v.type != t) bad_type(name);
    return v;
  }
  [[noreturn]] static void bad_type(const char* name) {
    throw std::invalid_argument(std::string("parameter '") + name + "' read with the wrong type");
  }
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
