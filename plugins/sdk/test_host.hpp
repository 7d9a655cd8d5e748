// SPDX-License-Identifier: Apache-2.0
// Test support for plugin suites: a kernel table from the registry and an in-process host that
// drives a plugin's C entry (validate, create, run, destroy) the way the driver does, keeping the
// emitted rows as text. Header-only; used by plugin test executables, in the tree and out of it
// (link the kernel library: `pkg-config --cflags --libs phaselab`), never by the plugins
// themselves. docs/plugins.md shows a complete test.
//
//   pl::test_host::FakeHost h(PL_PLUGIN_ENTRY);      // kernels: the best this CPU runs
//   CHECK(h.run({{"L", "16"}}, /*seed=*/1) == PL_OK); // defaults with L = 16
//   h.rows[0]   // results.csv rows, cells as text;   h.column(0, "mse") as numbers
//   h.write_tables({"L"});  // the tables as the driver writes them (L swept), for finish()
#pragma once

#include <stdlib.h>  // mkdtemp

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "phaselab/kernels.hpp"
#include "phaselab_plugin.h"

namespace pl::test_host {

// Every kernel's selected registry variant for `target` ("" = the best this CPU runs). Filled per
// kernel, so a build where an unrelated family has no variant still gives a table.
inline pl_kernel_table kernel_table(const std::string& target = "") {
  pl_kernel_table t;
  std::memset(&t, 0, sizeof t);
  t.struct_size = sizeof t;
  t.num_kernels = pl::kNumKernels;
  t.target = "test";
  t.variant = pl::selected_names(target);
#define PL_KERNEL(kname, Camel, ret, params)                                           \
  if (const pl::Variant* v = pl::selected_variant(int(pl::KernelId::kname), target)) { \
    t.kname = reinterpret_cast<ret(*) params>(v->fn);                                  \
  }
#include "phaselab/kernels.def"
#undef PL_KERNEL
  return t;
}

// A host for one plugin entry. Rows are kept as text ("%.17g" for numbers), per table; like the
// driver it refuses non-finite numbers and rows of the wrong width. Output files go to a fresh
// temporary folder (`dir`), removed with the host.
struct FakeHost {
  const pl_plugin& plugin;
  pl_kernel_table k;
  pl_host host;
  std::vector<std::vector<std::vector<std::string>>> rows;  // table -> row -> cells as text
  std::string failure, dir;
  bool keep_rows = false;  // false: run() starts every point with empty tables
  // The points run since the tables were last emptied, and the point of every row kept.
  struct PointRun {
    uint64_t index = 0, seed = 0;
    std::vector<std::string> values;  // every parameter, declaration order, as text
  };
  std::vector<PointRun> points;
  std::vector<std::vector<size_t>> row_point;  // table -> row -> position in `points`

  explicit FakeHost(const pl_plugin& p, const std::string& target = "")
      : plugin(p), k(kernel_table(target)) {
    char tmpl[] = "/tmp/phaselab_test_host_XXXXXX";
    if (!mkdtemp(tmpl)) throw std::runtime_error("FakeHost: mkdtemp failed");
    dir = tmpl;
    std::memset(&host, 0, sizeof host);
    host.struct_size = sizeof host;
    host.abi_version = PL_PLUGIN_ABI_VERSION;
    host.kernels = &k;
    host.ctx = this;
    host.emit = [](void* ctx, uint32_t t, const pl_cell* c, uint32_t n) {
      auto* self = static_cast<FakeHost*>(ctx);
      const pl_plugin& pp = self->plugin;
      if (t >= pp.num_tables || n != pp.tables[t].num_columns) return 1;
      std::vector<std::string> row;
      char buf[64];
      for (uint32_t i = 0; i < n; ++i) {
        switch (c[i].kind) {
          case PL_CELL_NUM:
            if (!std::isfinite(c[i].num)) return 1;
            std::snprintf(buf, sizeof buf, "%.17g", c[i].num);
            row.push_back(buf);
            break;
          case PL_CELL_INT:
            row.push_back(std::to_string(c[i].i));
            break;
          case PL_CELL_STR:
            row.push_back(c[i].str);
            break;
          default:
            row.push_back("");
        }
      }
      self->rows.resize(pp.num_tables);
      self->rows[t].push_back(row);
      self->row_point.resize(pp.num_tables);
      self->row_point[t].push_back(self->points.empty() ? 0 : self->points.size() - 1);
      return 0;
    };
    host.progress = [](void*, double) {};
    host.cancelled = [](void*) { return 0; };
    host.log = [](void*, pl_log_level, const char*) {};
    host.fail = [](void* ctx, const char* r) { static_cast<FakeHost*>(ctx)->failure = r; };
    host.out_dir = dir.c_str();
    host.threads = 1;
  }
  ~FakeHost() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  FakeHost(const FakeHost&) = delete;
  FakeHost& operator=(const FakeHost&) = delete;

  // The values run() passes for `over` (the declared defaults with `over` applied), e.g. to call a
  // plugin's point-cost or point-bytes export in a test; the strings they point to live in *keep.
  std::vector<pl_value> values(const std::map<std::string, std::string>& over,
                               std::vector<std::string>* keep) const {
    const pl_plugin& p = plugin;
    std::vector<pl_value> vals(p.num_params);
    keep->assign(p.num_params, std::string());
    for (uint32_t j = 0; j < p.num_params; ++j) {
      const pl_param_decl& d = p.params[j];
      pl_value& v = vals[j];
      v.type = d.type;
      const auto it = over.find(d.name);
      const bool has = it != over.end();
      if (d.type == PL_PARAM_INT || d.type == PL_PARAM_BOOL) {
        v.i = has ? std::stoll(it->second) : d.def_int;
        v.f = double(v.i);
      } else if (d.type == PL_PARAM_FLOAT) {
        v.f = has ? std::stod(it->second) : d.def_float;
      } else {
        (*keep)[j] = has ? it->second : d.def_string;
        v.s = (*keep)[j].c_str();
        if (d.type == PL_PARAM_ENUM) v.i = choice_index(d.choices, (*keep)[j]);
      }
    }
    return vals;
  }

  // A plugin export that takes a point's values (phaselab_plugin_point_cost, _point_bytes),
  // called with the values run() would pass for `over`.
  template <class Fn>
  auto call_with_values(Fn fn, const std::map<std::string, std::string>& over) const {
    std::vector<std::string> keep;
    const std::vector<pl_value> v = values(over, &keep);
    return fn(v.data(), uint32_t(v.size()));
  }

  // One point: the declared defaults with `over` (name -> value as text) applied; enum values
  // also carry their choice index. validate() failures land in `failure` and give PL_FAILED.
  pl_status run(const std::map<std::string, std::string>& over, uint64_t seed, uint64_t index = 0,
                uint64_t point_key = 12345) {
    const pl_plugin& p = plugin;
    std::vector<std::string> keep;
    std::vector<pl_value> vals = values(over, &keep);
    char err[256] = {0};
    if (p.validate && p.validate(vals.data(), p.num_params, err, sizeof err) != 0) {
      failure = err;
      return PL_FAILED;
    }
    pl_point pt;
    std::memset(&pt, 0, sizeof pt);
    pt.index = index;
    pt.seed = seed;
    pt.point_key = point_key;
    pt.params = vals.data();
    pt.num_params = p.num_params;
    if (!keep_rows)
      rows.assign(p.num_tables, {}), row_point.assign(p.num_tables, {}), points.clear();
    PointRun run_of{index, seed, {}};
    for (uint32_t j = 0; j < p.num_params; ++j) run_of.values.push_back(value_text(vals[j]));
    points.push_back(std::move(run_of));
    void* state = nullptr;
    pl_status st = p.create(&host, &pt, &state);
    if (st == PL_OK) st = p.run(state, &host, &pt);
    if (state) p.destroy(state);
    return st;
  }

  // The numbers of one column of `table` over the rows kept (NaN for text cells).
  std::vector<double> column(uint32_t table, const std::string& name) const {
    uint32_t c = 0;
    while (c < plugin.tables[table].num_columns && name != plugin.tables[table].columns[c]) ++c;
    if (c == plugin.tables[table].num_columns)
      throw std::invalid_argument("table " + std::string(plugin.tables[table].name) +
                                  " has no column " + name);
    std::vector<double> out;
    if (table < rows.size())
      for (const auto& r : rows[table]) {
        char* end = nullptr;
        const double x = std::strtod(r[c].c_str(), &end);
        out.push_back(end && *end == 0 && !r[c].empty() ? x : NAN);
      }
    return out;
  }

  // Writes every table kept to <dir>/<name>.csv the way the driver lays it out, so a test can call
  // the plugin's finish(): the `swept` parameters and seed first, then (PL_TABLE_ALL_PARAMS) every
  // other parameter in declaration order, then the table's columns; rows in point index order.
  // Numbers as "%.17g" (the driver writes the shortest exact form: the same values).
  void write_tables(const std::vector<std::string>& swept = {}) const {
    const pl_plugin& p = plugin;
    std::vector<uint32_t> key, rest;  // parameter positions
    for (const auto& name : swept) {
      uint32_t j = 0;
      while (j < p.num_params && name != p.params[j].name) ++j;
      if (j == p.num_params) throw std::invalid_argument("write_tables: no parameter " + name);
      key.push_back(j);
    }
    for (uint32_t j = 0; j < p.num_params; ++j)
      if (std::find(key.begin(), key.end(), j) == key.end()) rest.push_back(j);
    for (uint32_t t = 0; t < p.num_tables; ++t) {
      const pl_table_decl& td = p.tables[t];
      const bool all = (td.flags & PL_TABLE_ALL_PARAMS) != 0;
      const size_t n = t < rows.size() ? rows[t].size() : 0;
      if (n != (t < row_point.size() ? row_point[t].size() : 0))
        throw std::logic_error("write_tables: rows were changed outside run()");
      for (size_t r = 0; r < n; ++r)
        if (row_point[t][r] >= points.size())
          throw std::logic_error("write_tables: a row was emitted outside run()");
      std::vector<std::string> head;
      for (uint32_t j : key) head.push_back(p.params[j].name);
      head.push_back("seed");
      if (all)
        for (uint32_t j : rest) head.push_back(p.params[j].name);
      for (uint32_t c = 0; c < td.num_columns; ++c) head.push_back(td.columns[c]);
      std::vector<size_t> order(n);
      for (size_t r = 0; r < n; ++r) order[r] = r;
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        return points[row_point[t][a]].index < points[row_point[t][b]].index;
      });
      std::ofstream out(dir + "/" + td.name + ".csv", std::ios::binary | std::ios::trunc);
      write_csv_line(out, head);
      for (size_t r : order) {
        const PointRun& pr = points[row_point[t][r]];
        std::vector<std::string> line;
        for (uint32_t j : key) line.push_back(pr.values[j]);
        line.push_back(std::to_string(pr.seed));
        if (all)
          for (uint32_t j : rest) line.push_back(pr.values[j]);
        line.insert(line.end(), rows[t][r].begin(), rows[t][r].end());
        write_csv_line(out, line);
      }
      if (!out) throw std::runtime_error("write_tables: cannot write " + dir + "/" + td.name);
    }
  }

  // A parameter value as text: integers, true/false, "%.17g" for floats, strings as they are.
  static std::string value_text(const pl_value& v) {
    char buf[64];
    switch (v.type) {
      case PL_PARAM_INT:
        return std::to_string(v.i);
      case PL_PARAM_BOOL:
        return v.i ? "true" : "false";
      case PL_PARAM_FLOAT:
        std::snprintf(buf, sizeof buf, "%.17g", v.f);
        return buf;
      default:
        return v.s ? v.s : "";
    }
  }

  // One CSV record (RFC 4180 quoting where a field needs it).
  static void write_csv_line(std::ostream& out, const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) {
      const std::string& c = cells[i];
      if (i) out << ',';
      if (c.find_first_of(",\"\r\n") == std::string::npos) {
        out << c;
        continue;
      }
      out << '"';
      for (char ch : c) out << (ch == '"' ? "\"\"" : std::string(1, ch));
      out << '"';
    }
    out << '\n';
  }

  // Index of `value` in a '|'-separated choice list, -1 if absent.
  static int64_t choice_index(const std::string& choices, const std::string& value) {
    int64_t idx = 0;
    size_t pos = 0;
    while (true) {
      const size_t bar = choices.find('|', pos);
      if (choices.substr(pos, bar - pos) == value) return idx;
      if (bar == std::string::npos) return -1;
      pos = bar + 1;
      ++idx;
    }
  }
};

}  // namespace pl::test_host
