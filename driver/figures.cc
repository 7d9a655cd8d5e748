// SPDX-License-Identifier: Apache-2.0
#include "driver/figures.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "driver/text.hpp"

namespace pl::driver {
namespace {

bool number(const std::string& s, double* v) {
  if (s.empty()) return false;
  char* end = nullptr;
  *v = std::strtod(s.c_str(), &end);
  return end && *end == 0;
}

bool same_cell(const std::string& a, const std::string& b) {
  double x, y;
  if (a == b) return true;
  return number(a, &x) && number(b, &y) && x == y;
}

// Text for one line of a gnuplot script or data file: control characters become spaces. A
// newline inside a string would end it and run the next line as a command (a title or a CSV
// cell must never run anything); in a comment of the .dat file it would add data lines.
std::string one_line(const std::string& s) {
  std::string o = s;
  for (char& c : o)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  return o;
}

// Single-quoted gnuplot string on one line (no escapes inside; a quote is doubled; gnuplot does
// not expand backquotes or macros inside single quotes).
std::string gp(const std::string& s) {
  std::string o = "'";
  for (char c : one_line(s)) o += c == '\'' ? std::string("''") : std::string(1, c);
  return o + "'";
}

// Whether `options` (a series' gnuplot options after its style) is only words and numbers
// (lw 2 dt 3 pt 7 ps 1.5) and quoted colours (lc rgb 'gray', lc rgb "#ff8800"): nothing that
// could end the plot element and start another (a comma), a command (a semicolon) or call a
// function (parentheses, system("...")).
bool safe_options(const std::string& options) {
  auto plain = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '+' ||
           c == '#' || c == '_';
  };
  for (size_t i = 0; i < options.size(); ++i) {
    const char c = options[i];
    if (c == '\'' || c == '"') {
      const size_t end = options.find(c, i + 1);
      if (end == std::string::npos) return false;
      for (size_t j = i + 1; j < end; ++j)
        if (!plain(options[j]) && options[j] != ' ') return false;
      i = end;
    } else if (!plain(c) && c != ' ') {
      return false;
    }
  }
  return true;
}

std::string find_in_path(const std::string& exe) {
  const char* path = std::getenv("PATH");
  if (!path) return "";
  for (const auto& dir : split_list(path, ':')) {
    const std::string p = dir + "/" + exe;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

// Runs `gnuplot args...` in `dir`, stdout+stderr to `log`; returns the exit status (128 + the
// signal when a signal ended it, e.g. Ctrl-C; -1: no run).
int run_tool(const std::string& exe, const std::vector<std::string>& args, const std::string& dir,
             const std::string& log) {
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (!dir.empty() && ::chdir(dir.c_str()) != 0) ::_exit(127);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
    }
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(exe.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(exe.c_str(), argv.data());
    ::_exit(127);
  }
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

// A whole PNG: the signature first and the IEND chunk (with its CRC) last.
bool png_complete(const std::string& path) {
  std::string data;
  if (!read_file(path, &data, nullptr) || data.size() < 8 + 12) return false;
  static const char sig[] = "\x89PNG\r\n\x1a\n";
  static const char iend[] = "\0\0\0\0IEND\xae\x42\x60\x82";
  return data.compare(0, 8, sig, 8) == 0 && data.compare(data.size() - 12, 12, iend, 12) == 0;
}

// A whole figure file of its format: a PNG as above, a PDF from %PDF to its last %%EOF, an SVG
// from its <svg element to the closing </svg>.
bool figure_complete(const std::string& path, const std::string& format) {
  if (format == "png") return png_complete(path);
  std::string data;
  if (!read_file(path, &data, nullptr)) return false;
  while (!data.empty() && std::isspace(static_cast<unsigned char>(data.back()))) data.pop_back();
  auto ends = [&](const std::string& tail) {
    return data.size() >= tail.size() &&
           data.compare(data.size() - tail.size(), tail.size(), tail) == 0;
  };
  if (format == "pdf") return data.compare(0, 5, "%PDF-") == 0 && ends("%%EOF");
  return data.find("<svg") != std::string::npos && ends("</svg>");
}

struct Tool {
  std::string exe, terminal, version, why;
};

// `format`: png (pngcairo, else the libgd png terminal), pdf (pdfcairo) or svg.
Tool find_gnuplot(const std::string& scratch_dir, const std::string& format = "png") {
  Tool t;
  const char* env = std::getenv("PHASELAB_GNUPLOT");  // path to gnuplot; empty: no figures
  if (env)
    t.exe = env;
  else
    t.exe = find_in_path("gnuplot");
  if (t.exe.empty() || ::access(t.exe.c_str(), X_OK) != 0) {
    t.why = "gnuplot not found (install gnuplot-nox, e.g. with scripts/setup.sh)";
    t.exe.clear();
    return t;
  }
  const std::string log = scratch_dir + "/.gnuplot-probe.log";
  // pngcairo draws antialiased text; the libgd png terminal is the fallback.
  const std::vector<std::string> terms = format == "pdf" ? std::vector<std::string>{"pdfcairo"}
                                         : format == "svg"
                                             ? std::vector<std::string>{"svg"}
                                             : std::vector<std::string>{"pngcairo", "png"};
  for (const std::string& term : terms) {
    if (run_tool(t.exe, {"-e", "set terminal " + term + "; print GPVAL_VERSION"}, "", log) == 0) {
      t.terminal = term;
      std::string v;
      read_file(log, &v, nullptr);
      while (!v.empty() && (v.back() == '\n' || v.back() == '\r')) v.pop_back();
      t.version = v;
      break;
    }
  }
  std::remove(log.c_str());
  if (t.terminal.empty()) {
    t.why = t.exe + (format == "png" ? " has neither the pngcairo nor the png terminal"
                                     : " has no " + terms[0] + " terminal");
    t.exe.clear();
  }
  return t;
}

// Mean and standard error of y per distinct x, sorted by x.
struct Agg {
  double x, mean, se;
  size_t n;
};
std::vector<Agg> aggregate(std::vector<std::pair<double, double>> xy) {
  std::sort(xy.begin(), xy.end());
  std::vector<Agg> out;
  for (size_t i = 0; i < xy.size();) {
    size_t j = i;
    double s = 0;
    while (j < xy.size() && xy[j].first == xy[i].first) s += xy[j++].second;
    const size_t n = j - i;
    const double m = s / double(n);
    double ss = 0;
    for (size_t k = i; k < j; ++k) ss += (xy[k].second - m) * (xy[k].second - m);
    const double se = n > 1 ? std::sqrt(ss / double(n - 1) / double(n)) : 0.0;
    out.push_back({xy[i].first, m, se, n});
    i = j;
  }
  return out;
}

// A categorical axis from "value=label|value|...": a cell sits at the position of the value it
// equals, or at position v when it is the integer v (a code column).
struct Categories {
  std::vector<std::string> values, labels;
  bool on() const { return !values.empty(); }
  int find(const std::string& cell) const {
    for (size_t i = 0; i < values.size(); ++i)
      if (cell == values[i]) return int(i);
    double v;
    if (number(cell, &v) && v >= 0 && v < double(values.size()) && v == std::floor(v))
      return int(v);
    return -1;
  }
  // gnuplot tics: ("a" 0, "b" 1)
  std::string tics() const {
    std::string t = "(";
    for (size_t i = 0; i < labels.size(); ++i)
      t += (i ? ", " : "") + gp(labels[i]) + " " + std::to_string(i);
    return t + ")";
  }
};
Categories parse_categories(const char* spec) {
  Categories c;
  for (const auto& part : split_list(spec ? spec : "", '|')) {
    const size_t eq = part.find('=');
    c.values.push_back(part.substr(0, eq));
    c.labels.push_back(eq == std::string::npos ? part : part.substr(eq + 1));
  }
  return c;
}

// [lo, hi] widened by 5% of the span on each side (a factor on a log axis), so no point sits on
// the frame; a single value gets a range around it.
std::pair<double, double> padded(double lo, double hi, bool log) {
  if (!(lo <= hi)) return {0, 1};
  if (log) {
    if (hi == lo) return {lo / 2, hi * 2};
    const double f = std::pow(hi / lo, 0.05);
    return {lo / f, hi * f};
  }
  if (hi == lo) {
    const double p = lo == 0 ? 1.0 : std::fabs(lo) * 0.1;
    return {lo - p, hi + p};
  }
  const double p = 0.05 * (hi - lo);
  return {lo - p, hi + p};
}

std::string range(const std::pair<double, double>& r) {
  return "[" + format_double(r.first) + ":" + format_double(r.second) + "]";
}

// Distinct values of a column in panel order: numbers increasing when all are numbers, else in
// order of first appearance.
void order_values(std::vector<std::string>* v) {
  double x;
  for (const auto& s : *v)
    if (!number(s, &x)) return;
  std::stable_sort(v->begin(), v->end(), [](const std::string& a, const std::string& b) {
    double p = 0, q = 0;
    number(a, &p);
    number(b, &q);
    return p < q;
  });
}

// How a series is drawn: the mean +- standard error per x (run figures' line plots), every row
// as a point, or the rows joined in order of x by a line (with or without their points).
enum class Kind { Mean, Points, Lines, LinesPoints };

// One table's rows on a figure: a run figure has one, `phaselab plot` one per SERIES.
struct Source {
  std::string file;                                  // the CSV file read
  std::vector<std::vector<std::string>> recs;        // the table, header first
  int xc = -1;                                       // x column
  std::vector<std::pair<std::string, int>> ys;       // (name, column)
  std::vector<std::pair<int, std::string>> filters;  // (column, value): all must hold
  std::vector<int> groups;                           // one series per distinct combination
  std::string title;                                 // template ({column}); "" = group labels
  Kind kind = Kind::Mean;
  std::string options;              // extra gnuplot options of its series
  std::vector<std::string> pooled;  // `phaselab plot` style=mean: swept keys it averages over
  int col(const std::string& c) const {
    const auto& h = recs[0];
    auto it = std::find(h.begin(), h.end(), c);
    return it == h.end() ? -1 : int(it - h.begin());
  }
  bool kept(const std::vector<std::string>& rec) const {
    if (rec.size() != recs[0].size()) return false;
    for (const auto& [c, v] : filters)
      if (!same_cell(rec[size_t(c)], v)) return false;
    return true;
  }
};

bool read_source(const std::string& file, Source* s, std::string* why) {
  std::string text;
  s->file = file;
  if (!read_file(file, &text, nullptr) || !parse_csv(text, &s->recs) || s->recs.empty()) {
    *why = "cannot read " + file;
    return false;
  }
  return true;
}

// A figure: gathers the rows of its sources into panels (facet values) and series (source, group
// value, y column), writes <name>.dat and <name>.gp and runs gnuplot. A series keeps its colour
// in every panel. A run figure (one declared plot) reads one table of the run folder; `phaselab
// plot` gives its sources ready, one per SERIES. Each step that finds the figure cannot be drawn
// sets res_.note and returns false.
class Figure {
 public:
  Figure(const pl_plot_decl& pd, const std::map<std::string, std::string>& constants,
         const std::vector<std::string>& params, const Tool& tool,
         const std::string& title_note = "")
      : pd_(&pd), constants_(&constants), params_(params), tool_(&tool), title_note_(title_note) {
    name_ = pd.name;
    res_.name = pd.name;
    // The optional style, as much of it as the plugin's struct has (later fields stay zero).
    if (pd.style && pd.style->struct_size >= sizeof(uint32_t))
      std::memcpy(&style_, pd.style, std::min<size_t>(pd.style->struct_size, sizeof style_));
    heatmap_ = style_.kind == PL_PLOT_KIND_HEATMAP;
    xcat_ = parse_categories(style_.x_categories);
    ycat_ = parse_categories(style_.y_categories);
    zcat_ = parse_categories(style_.z_categories);
    for (const auto& pair : split_list(style_.y_references ? style_.y_references : "", ',')) {
      const size_t eq = pair.find('=');
      if (eq != std::string::npos) refs_[pair.substr(0, eq)] = pair.substr(eq + 1);
    }
    hist_ = !heatmap_ && (pd.flags & PL_PLOT_HISTOGRAM);
    logx_ = !xcat_.on() && !heatmap_ && (pd.flags & PL_PLOT_LOGX);
    logy_ = !ycat_.on() && !heatmap_ && !hist_ && (pd.flags & PL_PLOT_LOGY);
    // A categorical y is drawn as points: a mean of category positions means nothing.
    points_ = !hist_ && ((pd.flags & PL_PLOT_POINTS) || ycat_.on());
  }

  // `phaselab plot`: the sources selected (columns found) by the caller.
  Figure(const PlotSpec& ps, std::vector<Source> sources, const Tool& tool)
      : ps_(&ps), tool_(&tool), src_(std::move(sources)) {
    name_ = std::filesystem::path(ps.out).stem().string();
    format_ = std::filesystem::path(ps.out).extension().string().substr(1);
    res_.name = name_;
    logx_ = ps.logx;
    logy_ = ps.logy;
  }

  FigureResult draw(const std::string& out_dir, const std::string& fig_dir) {
    src_.resize(1);
    std::string why;
    if (!read_source(out_dir + "/" + pd_->table + ".csv", &src_[0], &why)) {
      fail(why);
      return res_;
    }
    src_[0].kind = points_ ? Kind::Points : Kind::Mean;
    if (choose_columns() && choose_groups() && collect()) {
      write_data();
      if (write_files(fig_dir)) {
        run_gnuplot(fig_dir);
        draw_also(fig_dir);
      }
    }
    return res_;
  }

  // Formats drawn after the figure's own (figure_formats), each with its gnuplot: the same
  // script but for the terminal and the output, as <name>.<format>.gp beside <name>.gp.
  void set_also(std::vector<std::pair<std::string, const Tool*>> also) { also_ = std::move(also); }

  // `phaselab plot`: PlotOutcome's status; res_.note says why when not 0 (or not drawn).
  int draw_plot(const std::string& fig_dir, std::vector<size_t>* rows_per_source) {
    const bool any = collect();
    *rows_per_source = rows_per_source_;
    if (!any) return 2;
    // gnuplot takes minutes over 20,000 curves or millions of points and leaves an empty PNG:
    // a figure that large is refused before anything is written.
    size_t values = 0;  // style=mean draws one value per distinct x
    for (const auto& [key, cells] : data_) {
      if (series_kinds_[key.second] != Kind::Mean) {
        values += cells.size();
        continue;
      }
      std::set<double> xs;
      for (const auto& c : cells) xs.insert(c.x);
      values += xs.size();
    }
    if (series_keys_.size() > kMaxPlotCurves) {
      fail(std::to_string(series_keys_.size()) + " curves (one per series, group value and y " +
           "column), more than the " + std::to_string(kMaxPlotCurves) +
           " phaselab plot draws: select fewer with where=, or group= by fewer columns");
      return 2;
    }
    if (values > kMaxPlotValues) {
      fail(std::to_string(values) + " values to draw, more than the " +
           std::to_string(kMaxPlotValues) +
           " phaselab plot draws: select fewer rows with where=, or style=mean to draw one "
           "mean per x");
      return 2;
    }
    write_data();
    if (!write_csv(fig_dir)) return 5;
    if (!write_files(fig_dir)) return tool_->exe.empty() ? 0 : 5;
    run_gnuplot(fig_dir);
    draw_also(fig_dir);
    return res_.png.empty() ? 5 : 0;
  }
  const FigureResult& result() const { return res_; }
  static constexpr size_t kMaxPlotCurves = 256, kMaxPlotValues = 1'000'000;

 private:
  struct Cell {
    double x, y;
    std::string z;
  };

  bool fail(const std::string& note) {
    res_.note = note;
    return false;
  }
  // The run figure's table (source 0).
  int col(const std::string& c) const { return src_[0].col(c); }
  const std::vector<std::string>& header() const { return src_[0].recs[0]; }
  void add_fixed(const std::string& text) { fixed_ += (fixed_.empty() ? "" : ", ") + text; }

  // x, the y columns (x itself for a histogram), the heat map's z and the filters.
  bool choose_columns() {
    Source& s = src_[0];
    const pl_plot_decl& pd = *pd_;
    s.xc = col(pd.x);
    if (s.xc < 0)
      return fail(std::string("column ") + pd.x + " is not in " + pd.table +
                  ".csv (sweep it to get this figure)");
    if (!hist_) {
      for (const auto& y : split_list(pd.y ? pd.y : "", ','))
        if (col(y) >= 0) s.ys.push_back({y, col(y)});
      if (s.ys.empty())
        return fail(std::string("none of the y columns (") + (pd.y ? pd.y : "") + ") is in " +
                    pd.table + ".csv (sweep it to get this figure)");
    } else {
      s.ys.push_back({pd.x, s.xc});
    }
    // A tick-label column not in the table leaves the numbers.
    if (style_.xtic_column && *style_.xtic_column && !xcat_.on()) xtc_ = col(style_.xtic_column);
    if (heatmap_) {
      zc_ = style_.z ? col(style_.z) : -1;
      if (zc_ < 0)
        return fail(std::string("heat map column ") + (style_.z ? style_.z : "(none)") +
                    " is not in " + pd.table + ".csv");
      s.ys.resize(1);
    }
    const auto& constants = *constants_;
    if (style_.facet_by && *style_.facet_by) {
      fc_ = col(style_.facet_by);
      if (fc_ < 0 && constants.count(style_.facet_by))
        fixed_ += std::string(style_.facet_by) + "=" + constants.at(style_.facet_by);
    }
    // Filters on columns, or on constant parameters (not swept, so not columns).
    for (const auto& f : split_list(pd.filter ? pd.filter : "", ',')) {
      const size_t eq = f.find('=');
      const std::string c = f.substr(0, eq), v = eq == std::string::npos ? "" : f.substr(eq + 1);
      if (col(c) >= 0) {
        s.filters.push_back({col(c), v});
      } else if (constants.count(c)) {
        if (!same_cell(constants.at(c), v))
          return fail("filter " + f + " excludes this run (" + c + " is " + constants.at(c) + ")");
      } else {
        return fail("filter column " + c + " is neither a column nor a parameter");
      }
    }
    return true;
  }

  // Whether column c holds one value in the rows drawn (then *value).
  bool single_value(int c, std::string* value) const {
    const Source& s = src_[0];
    bool first = true;
    for (size_t r = 1; r < s.recs.size(); ++r) {
      if (!s.kept(s.recs[r])) continue;
      if (first) *value = s.recs[r][size_t(c)], first = false;
      if (s.recs[r][size_t(c)] != *value) return false;
    }
    return true;
  }

  // Group and facet columns that hold one value in the rows drawn (a sweep over one value) say
  // so in the title instead of in every legend entry or a single panel.
  bool choose_groups() {
    auto& groups = src_[0].groups;
    const auto& constants = *constants_;
    for (const auto& g : split_list(pd_->group_by ? pd_->group_by : "", ',')) {
      std::string v;
      if (col(g) >= 0 && single_value(col(g), &v))
        add_fixed(g + "=" + v);
      else if (col(g) >= 0)
        groups.push_back(col(g));
      else if (constants.count(g))
        add_fixed(g + "=" + constants.at(g));
    }
    facet_name_ = style_.facet_by ? style_.facet_by : "";
    if (fc_ >= 0) {
      std::string v;
      if (single_value(fc_, &v)) {
        add_fixed(facet_name_ + "=" + v);
        fc_ = -1;
      }
    }
    // The facet column names the panels: it is not also a series label.
    if (fc_ >= 0) groups.erase(std::remove(groups.begin(), groups.end(), fc_), groups.end());
    // A heat map has no curves: a group column that varies becomes the facet.
    if (heatmap_ && fc_ < 0 && !groups.empty()) {
      fc_ = groups[0];
      facet_name_ = header()[size_t(fc_)];
    }
    if (heatmap_) groups.clear();
    find_pooled();
    return true;
  }

  // Swept parameters (columns that are parameters, not constants) the figure neither draws on an
  // axis nor groups, facets or filters by, and that vary in the rows drawn: its means (and
  // histograms) pool over them. The title and the y label say so; a curve labelled "mean +- s.e.
  // over seeds" must not silently average several settings.
  void find_pooled() {
    const Source& s = src_[0];
    for (const auto& name : params_) {
      const int c = col(name);
      if (c < 0 || constants_->count(name) || c == s.xc || c == fc_ || c == zc_) continue;
      bool used = std::find(s.groups.begin(), s.groups.end(), c) != s.groups.end();
      for (const auto& y : s.ys) used = used || y.second == c;
      for (const auto& f : s.filters) used = used || f.first == c;
      std::string v;
      if (!used && !single_value(c, &v) && varies_within_curve(c)) pooled_.push_back(name);
    }
  }
  // Whether column c takes more than one value among the rows of one curve (the same group and
  // facet cells). A swept key that a drawn column determines (circuits' `chains`, "inf" or K, set
  // by the swept `infinite`) splits no curve's rows, so nothing is averaged over it.
  bool varies_within_curve(int c) const {
    const Source& s = src_[0];
    std::map<std::string, std::string> seen;
    for (size_t r = 1; r < s.recs.size(); ++r) {
      const auto& rec = s.recs[r];
      if (!s.kept(rec)) continue;
      std::string key;
      for (int g : s.groups) key += rec[size_t(g)] + '\x1f';
      if (fc_ >= 0) key += rec[size_t(fc_)];
      const auto it = seen.emplace(key, rec[size_t(c)]).first;
      if (it->second != rec[size_t(c)]) return true;
    }
    return false;
  }
  std::string pooled_text() const {
    std::string t;
    for (const auto& p : pooled_) t += (t.empty() ? "" : ", ") + p;
    return t;
  }

  // Position of a cell on a categorical axis, or its number; false to skip the row.
  bool axis_value(const Categories& cat, const std::string& cell, bool log, double* v) {
    if (cat.on()) {
      const int p = cat.find(cell);
      if (p < 0) {
        ++dropped_;
        return false;
      }
      *v = p;
      return true;
    }
    return number(cell, v) && std::isfinite(*v) && !(log && *v <= 0);
  }

  // A series' legend entry: the source's title with its {column} placeholders filled from the
  // row (group columns: one value per series), else its group values (and the y column's name
  // when there are several, or no groups).
  std::string series_title(const Source& s, const std::vector<std::string>& rec,
                           const std::string& glabel, const std::string& yname) const {
    if (!s.title.empty()) {
      std::string t = s.title;
      for (int g : s.groups) {
        const std::string ph = "{" + s.recs[0][size_t(g)] + "}";
        for (size_t at = t.find(ph); at != std::string::npos; at = t.find(ph, at))
          t.replace(at, ph.size(), rec[size_t(g)]), at += rec[size_t(g)].size();
      }
      return t + pooled_note(s);
    }
    std::string title = glabel;
    if (s.ys.size() > 1 || title.empty()) title += (title.empty() ? "" : " ") + yname;
    return title + pooled_note(s);
  }

  static std::string pooled_note(const Source& s) {
    std::string t;
    for (const auto& p : s.pooled) t += (t.empty() ? "" : ", ") + p;
    return t.empty() ? "" : " (pooled over " + t + ")";
  }

  // The rows into data_[(panel value, series)]. Heat maps: one series; its points carry z.
  bool collect() {
    rows_per_source_.assign(src_.size(), 0);
    for (size_t si = 0; si < src_.size(); ++si) {
      const Source& s = src_[si];
      for (size_t r = 1; r < s.recs.size(); ++r) {
        const auto& rec = s.recs[r];
        if (!s.kept(rec)) continue;
        const std::string panel = fc_ >= 0 ? rec[size_t(fc_)] : "";
        std::string glabel;
        for (int g : s.groups)
          glabel += (glabel.empty() ? "" : ", ") + s.recs[0][size_t(g)] + "=" + rec[size_t(g)];
        double x;
        if (!axis_value(xcat_, rec[size_t(s.xc)], logx_, &x)) continue;
        if (xtc_ >= 0 && si == 0) xtics_.emplace(x, rec[size_t(xtc_)]);  // the first row's
        for (const auto& [yname, yc] : s.ys) {
          double y = 0;
          if (!hist_ && !axis_value(ycat_, rec[size_t(yc)], logy_, &y)) continue;
          std::string z;
          if (heatmap_) {
            z = rec[size_t(zc_)];
            double zv;
            if (zcat_.on() ? zcat_.find(z) < 0 : !number(z, &zv) || !std::isfinite(zv)) {
              dropped_ += zcat_.on();
              continue;
            }
          }
          const std::string key =
              heatmap_ ? "" : std::to_string(si) + "\x1e" + glabel + "\x1f" + yname;
          auto it = std::find(series_keys_.begin(), series_keys_.end(), key);
          if (it == series_keys_.end()) {
            series_keys_.push_back(key);
            series_titles_.push_back(series_title(s, rec, glabel, yname));
            series_kinds_.push_back(s.kind);
            series_options_.push_back(s.options);
            std::map<std::string, std::string> values;  // its group columns' values
            for (int g : s.groups) values[s.recs[0][size_t(g)]] = rec[size_t(g)];
            series_groups_.push_back(values);
            const auto ref = hist_ || heatmap_ ? refs_.end() : refs_.find(yname);
            series_refs_.push_back(ref == refs_.end() ? ""
                                                      : std::to_string(si) + "\x1e" + glabel +
                                                            "\x1f" + ref->second);
            it = series_keys_.end() - 1;
          }
          if (std::find(panel_values_.begin(), panel_values_.end(), panel) == panel_values_.end())
            panel_values_.push_back(panel);
          data_[{panel, size_t(it - series_keys_.begin())}].push_back({x, y, z});
          ++rows_per_source_[si];
        }
      }
    }
    if (data_.empty())
      return fail("no rows to plot (after filters and, for log axes, dropping values <= 0)");
    assign_colours();
    note_identical();
    order_values(&panel_values_);
    faceted_ = fc_ >= 0;
    // Axis positions of a heat map: the distinct x and y values in increasing order, evenly
    // spaced (K = 1, 2, 4, ... 16384 gets equal cells), labelled by value.
    if (heatmap_) {
      for (const auto& [k, rows] : data_)
        for (const auto& p : rows) hx_.push_back(p.x), hy_.push_back(p.y);
      for (auto* v : {&hx_, &hy_}) {
        std::sort(v->begin(), v->end());
        v->erase(std::unique(v->begin(), v->end()), v->end());
      }
    }
    for (const auto& [k, rows] : data_)
      for (const auto& p : rows) xlo_ = std::min(xlo_, p.x), xhi_ = std::max(xhi_, p.x);
    return true;
  }

  // Colours in order of the series, except that a reference curve takes its data's colour (and
  // one whose data is not drawn a colour of its own).
  void assign_colours() {
    colours_.assign(series_keys_.size(), 0);
    size_t next = 0;
    for (size_t i = 0; i < series_keys_.size(); ++i)
      if (!is_ref(i)) colours_[i] = next++;
    for (size_t i = 0; i < series_keys_.size(); ++i) {
      if (!is_ref(i)) continue;
      const auto it = std::find(series_keys_.begin(), series_keys_.end(), series_refs_[i]);
      colours_[i] = it != series_keys_.end() ? colours_[size_t(it - series_keys_.begin())] : next++;
    }
  }
  bool is_ref(size_t i) const { return !series_refs_[i].empty(); }

  // A curve drawn under a later one with the same values (in every panel, at every x both have,
  // and at 90% of its x or more) cannot be told from it: its legend entry says so (a Bayes
  // floor that does not depend on the seed, drawn once per seed up to slightly different steps).
  void note_identical() {
    series_notes_.assign(series_keys_.size(), "");
    using Points = std::map<double, std::vector<double>>;  // x -> the y there, sorted
    std::vector<std::map<std::string, Points>> pts(series_keys_.size());
    for (const auto& [key, cells] : data_) {
      Points& p = pts[key.second][key.first];
      for (const auto& c : cells) p[c.x].push_back(c.y);
      for (auto& [x, ys] : p) std::sort(ys.begin(), ys.end());
    }
    auto same = [&](size_t a, size_t b) {
      for (const auto& [pv, pa] : pts[a]) {
        const auto ib = pts[b].find(pv);
        if (ib == pts[b].end()) return false;
        size_t shared = 0;
        for (const auto& [x, ys] : pa) {
          const auto at = ib->second.find(x);
          if (at == ib->second.end()) continue;
          if (at->second != ys) return false;
          ++shared;
        }
        if (shared < 1 || 10 * shared < 9 * pa.size()) return false;
      }
      return true;
    };
    // Candidates by index, not all pairs (a sweep of 10^4 points draws 10^4 curves): j can be the
    // same as i only if it has equal values at 90% or more of the x of i's first panel, so at
    // one at least of any floor(|x| / 10) + 1 of them; the index maps (panel, x, values there) to
    // the series that have them.
    auto cell_key = [](const std::string& panel, double x, const std::vector<double>& ys) {
      std::string k = panel;
      k += '\x1f';
      k.append(reinterpret_cast<const char*>(&x), sizeof x);
      for (double y : ys) k.append(reinterpret_cast<const char*>(&y), sizeof y);
      return k;
    };
    std::unordered_map<std::string, std::vector<size_t>> index;
    for (size_t j = 0; j < series_keys_.size(); ++j)
      for (const auto& [pv, p] : pts[j])
        for (const auto& [x, ys] : p) index[cell_key(pv, x, ys)].push_back(j);
    for (size_t i = 0; i < series_keys_.size(); ++i) {
      if (pts[i].empty()) continue;
      const auto& [pv, pa] = *pts[i].begin();
      std::vector<size_t> cand;
      size_t m = pa.size() / 10 + 1;
      for (auto it = pa.begin(); it != pa.end() && m-- > 0; ++it)
        for (size_t j : index[cell_key(pv, it->first, it->second)])
          if (j > i) cand.push_back(j);
      std::sort(cand.begin(), cand.end());
      cand.erase(std::unique(cand.begin(), cand.end()), cand.end());
      for (size_t c = cand.size(); c-- > 0;)  // the last series drawn over it names it
        if (same(i, cand[c])) {
          series_notes_[i] = " (under " + series_titles_[cand[c]] + ": same values)";
          break;
        }
    }
  }

  // gnuplot cycles 8 colours; beyond 8 series the dash and marker change too. A series' own
  // gnuplot options (`phaselab plot`'s style=KIND OPTIONS) come last and replace the colour, dash
  // or marker they set.
  std::string line_style(size_t i) const {  // colour and dash only (a band takes no point type)
    const std::string& o = series_options_[i];
    std::string s;
    const size_t c = colours_[i];
    if (!has_word(o, {"lc", "linecolor"})) s += " lc " + std::to_string(1 + c % 8);
    if (!has_word(o, {"dt", "dashtype"}))
      s += " dt " + std::to_string(is_ref(i) ? 2 : 1 + (c / 8) % 5);
    return s;
  }
  std::string series_style(size_t i) const {
    static const int kMarkers[] = {7, 5, 9, 13, 11, 15};
    std::string s = line_style(i);
    const std::string& o = series_options_[i];
    if (!hist_ && series_kinds_[i] != Kind::Lines && !is_ref(i) &&
        !has_word(o, {"pt", "pointtype"}))
      s += " pt " + std::to_string(kMarkers[colours_[i] % 6]);
    return o.empty() ? s : s + " " + o;
  }
  // The default point size, unless the series' options set one.
  std::string ps(size_t i, const char* size) const {
    return has_word(series_options_[i], {"ps", "pointsize"}) ? "" : std::string(" ps ") + size;
  }
  static bool has_word(const std::string& text, std::initializer_list<const char*> words) {
    for (const auto& w : split_list(text, ' '))
      for (const char* v : words)
        if (w == v) return true;
    return false;
  }

  // Data file: one block per (panel, series), separated by two blank lines (gnuplot `index`).
  void write_data() {
    if (pd_) {
      dat_ =
          "# " + one_line(name_) + ": from " + one_line(pd_->table) + ".csv, written by phaselab\n";
    } else {
      std::vector<std::string> files;
      for (const auto& s : src_) files.push_back(s.file);
      dat_ = "# " + one_line(name_) + ": written by phaselab plot from " + one_line(joined(files)) +
             "\n";
      // One more column per group= column (of any series, in order of first appearance):
      // the series' value, empty for a series not grouped by it.
      std::vector<std::string> header = {"series", "x", "y", "se", "n"};
      for (const auto& s : src_)
        for (int g : s.groups) {
          std::string name = s.recs[0][size_t(g)];
          if (std::find(kCsvColumns.begin(), kCsvColumns.end(), name) != kCsvColumns.end())
            name = "group_" + name;  // a group column named x, say
          if (std::find(csv_groups_.begin(), csv_groups_.end(), s.recs[0][size_t(g)]) ==
              csv_groups_.end()) {
            csv_groups_.push_back(s.recs[0][size_t(g)]);
            header.push_back(name);
          }
        }
      csv_ = csv_line(header) + "\n";
    }
    size_t block = 0;
    panel_plots_.resize(panel_values_.size());
    for (size_t pi = 0; pi < panel_values_.size(); ++pi) {
      std::map<std::pair<double, double>, size_t> seen, total;
      for (size_t si = 0; si < series_keys_.size(); ++si) {
        auto it = data_.find({panel_values_[pi], si});
        if (it != data_.end())
          for (const auto& p : it->second) total[{p.x, p.y}]++;
      }
      for (size_t si = 0; si < series_keys_.size(); ++si) {
        auto it = data_.find({panel_values_[pi], si});
        if (it == data_.end()) continue;
        dat_ += "# " +
                one_line((faceted_ ? facet_name_ + "=" + panel_values_[pi] + ": " : "") +
                         series_titles_[si]) +
                "\n";
        const std::string spec = gp(name_ + ".dat") + " index " + std::to_string(block);
        const auto& rows = it->second;
        const Kind kind = series_kinds_[si];
        panel_plots_[pi].push_back(heatmap_     ? heatmap_block(pi, rows, spec)
                                   : hist_      ? histogram_block(si, rows, spec)
                                   : is_ref(si) ? reference_block(si, rows, spec)
                                   : kind == Kind::Points
                                       ? points_block(si, rows, spec, &seen, total)
                                   : kind == Kind::Mean ? mean_block(si, rows, spec)
                                                        : lines_block(si, rows, spec));
        dat_ += "\n\n";
        ++block;
      }
    }
  }

  // Cells: mean z, or the most frequent category (ties: the first in category order).
  std::string heatmap_block(size_t pi, const std::vector<Cell>& rows, const std::string& spec) {
    std::map<std::pair<double, double>, std::vector<std::string>> cells;
    for (const auto& p : rows) cells[{p.x, p.y}].push_back(p.z);
    dat_ += "# x_pos y_pos z count agree x y\n";
    auto pos = [](const std::vector<double>& v, double x) {
      return double(std::lower_bound(v.begin(), v.end(), x) - v.begin());
    };
    for (const auto& [xy, zs] : cells) {
      double z = 0;
      size_t agree = zs.size();
      if (zcat_.on()) {
        std::vector<size_t> count(zcat_.values.size(), 0);
        for (const auto& s : zs) count[size_t(zcat_.find(s))]++;
        const size_t best = size_t(std::max_element(count.begin(), count.end()) - count.begin());
        z = double(best);
        agree = count[best];
      } else {
        for (const auto& s : zs) {
          double v = 0;
          number(s, &v);
          z += v / double(zs.size());
        }
        ylo_ = std::min(ylo_, z), yhi_ = std::max(yhi_, z);
      }
      const double px = pos(hx_, xy.first), py = pos(hy_, xy.second);
      dat_ += format_double(px) + " " + format_double(py) + " " + format_double(z) + " " +
              std::to_string(zs.size()) + " " + std::to_string(agree) + " " +
              format_double(xy.first) + " " + format_double(xy.second) + "\n";
      if (agree < zs.size())
        cell_labels_.push_back(std::to_string(agree) + "/" + std::to_string(zs.size()) + "\x1f" +
                               format_double(px) + "\x1f" + format_double(py) + "\x1f" +
                               std::to_string(pi));
    }
    return spec +
           " using 1:2:(0.5):(0.5):3 with boxxyerror fs solid 1.0 noborder lc palette notitle";
  }

  // Histogram bins, shared by every series and panel.
  static constexpr int kBins = 30;
  double tx(double v) const { return logx_ ? std::log(v) : v; }
  std::string histogram_block(size_t si, const std::vector<Cell>& rows, const std::string& spec) {
    const double ba = tx(xlo_), bb = tx(xhi_), bw = bb > ba ? (bb - ba) / kBins : 1.0;
    std::vector<size_t> count(kBins, 0);
    for (const auto& p : rows) count[size_t(std::clamp(int((tx(p.x) - ba) / bw), 0, kBins - 1))]++;
    for (int k = 0; k < kBins; ++k) {
      const double mid = ba + (k + 0.5) * bw;
      dat_ += format_double(logx_ ? std::exp(mid) : mid) + " " + std::to_string(count[size_t(k)]) +
              "\n";
      yhi_ = std::max(yhi_, double(count[size_t(k)]));
    }
    ylo_ = 0;
    return spec + " using 1:2 with histeps lw 2" + series_style(si) + " notitle";
  }

  // Rows at the same (x, category), of every series in the panel, spread evenly across the
  // category's band.
  std::string points_block(size_t si, const std::vector<Cell>& rows, const std::string& spec,
                           std::map<std::pair<double, double>, size_t>* seen,
                           const std::map<std::pair<double, double>, size_t>& total) {
    if (ps_) dat_ += "# x y\n";
    for (const auto& p : rows) {
      double y = p.y;
      if (ycat_.on()) {
        const size_t m = total.at({p.x, p.y}), k = (*seen)[{p.x, p.y}]++;
        if (m > 1) y += 0.5 * (double(k) / double(m - 1) - 0.5);
      }
      dat_ += format_double(p.x) + " " + format_double(y) + "\n";
      csv_row(si, p.x, y, "", "");
      ylo_ = std::min(ylo_, y), yhi_ = std::max(yhi_, y);
    }
    return spec + " using 1:2 with points" + ps(si, "0.9") + series_style(si) + " notitle";
  }

  // The rows in order of x (rows at the same x in table order), joined by a line.
  std::string lines_block(size_t si, std::vector<Cell> rows, const std::string& spec) {
    std::stable_sort(rows.begin(), rows.end(),
                     [](const Cell& a, const Cell& b) { return a.x < b.x; });
    dat_ += "# x y\n";
    for (const auto& p : rows) {
      dat_ += format_double(p.x) + " " + format_double(p.y) + "\n";
      csv_row(si, p.x, p.y, "", "");
      ylo_ = std::min(ylo_, p.y), yhi_ = std::max(yhi_, p.y);
    }
    const bool pts = series_kinds_[si] == Kind::LinesPoints;
    return spec + " using 1:2 with " + (pts ? "linespoints" + ps(si, "0.7") : "lines") +
           series_style(si) + " notitle";
  }

  // `phaselab plot`'s FIG.csv: one line per value drawn.
  void csv_row(size_t si, double x, double y, const std::string& se, const std::string& n) {
    if (!ps_) return;
    std::vector<std::string> cells = {series_titles_[si], format_double(x), format_double(y), se,
                                      n};
    for (const auto& g : csv_groups_) {
      const auto it = series_groups_[si].find(g);
      cells.push_back(it == series_groups_[si].end() ? "" : it->second);
    }
    csv_ += csv_line(cells) + "\n";
  }

  // Mean +- standard error per x: error bars, or a band under the line when there are many x.
  std::string mean_block(size_t si, const std::vector<Cell>& rows, const std::string& spec) {
    std::vector<std::pair<double, double>> xy;
    for (const auto& p : rows) xy.push_back({p.x, p.y});
    const auto agg = aggregate(xy);
    bool errs = false;
    dat_ += "# x mean se n\n";
    for (const auto& a : agg) {
      dat_ += format_double(a.x) + " " + format_double(a.mean) + " " + format_double(a.se) + " " +
              std::to_string(a.n) + "\n";
      csv_row(si, a.x, a.mean, format_double(a.se), std::to_string(a.n));
      errs = errs || a.n > 1;
      const double lo = a.mean - a.se;
      ylo_ = std::min(ylo_, logy_ && lo <= 0 ? a.mean : lo);
      yhi_ = std::max(yhi_, a.mean + a.se);
    }
    any_errorbars_ = any_errorbars_ || errs;
    if (errs && agg.size() > 12)  // the s.e. as a shaded band (clipped at the axis floor)
      return spec + " using 1:(YFLOOR($2-$3)):($2+$3) with filledcurves fs transparent solid " +
             "0.2 noborder" + line_style(si) + " notitle, \\\n     " + spec +
             " using 1:2 with linespoints" + ps(si, "0.5") + series_style(si) + " notitle";
    return spec + (errs ? " using 1:2:3 with yerrorlines" : " using 1:2 with linespoints") +
           ps(si, "0.7") + series_style(si) + " notitle";
  }

  // A reference curve (a theory, a Bayes floor): its mean per x as a dashed line in its data's
  // colour, no markers, no error bars.
  std::string reference_block(size_t si, const std::vector<Cell>& rows, const std::string& spec) {
    std::vector<std::pair<double, double>> xy;
    for (const auto& p : rows) xy.push_back({p.x, p.y});
    dat_ += "# x mean se n\n";
    for (const auto& a : aggregate(xy)) {
      dat_ += format_double(a.x) + " " + format_double(a.mean) + " " + format_double(a.se) + " " +
              std::to_string(a.n) + "\n";
      csv_row(si, a.x, a.mean, format_double(a.se), std::to_string(a.n));
      ylo_ = std::min(ylo_, a.mean), yhi_ = std::max(yhi_, a.mean);
    }
    return spec + " using 1:2 with lines lw 1.5" + series_style(si) + " notitle";
  }

  // Distinct names in order of first appearance, comma-separated.
  static std::string joined(const std::vector<std::string>& names) {
    std::vector<std::string> seen;
    std::string t;
    for (const auto& n : names)
      if (std::find(seen.begin(), seen.end(), n) == seen.end())
        t += (seen.empty() ? "" : ", ") + n, seen.push_back(n);
    return t;
  }
  std::string xlabel() const {
    if (ps_) {
      std::vector<std::string> xs;
      for (const auto& s : src_) xs.push_back(s.recs[0][size_t(s.xc)]);
      return ps_->xlabel.empty() ? joined(xs) : ps_->xlabel;
    }
    return style_.xlabel && *style_.xlabel ? style_.xlabel : pd_->x;
  }
  std::string ylabel() const {
    const auto& ys = src_[0].ys;
    std::string l = hist_ ? "count" : "";
    if (ps_) {
      std::vector<std::string> names;
      for (const auto& s : src_)
        for (const auto& y : s.ys) names.push_back(y.first);
      l = ps_->ylabel.empty() ? joined(names) : ps_->ylabel;
    } else {
      if (!hist_)
        for (size_t i = 0; i < ys.size(); ++i) l += (i ? ", " : "") + ys[i].first;
      if (heatmap_) l = pd_->y;
      if (ys.size() > 1 && !heatmap_) l = "value";  // the legend names the columns
      if (style_.ylabel && *style_.ylabel) l = style_.ylabel;
    }
    const auto& groups = src_[0].groups;
    const bool seeds =
        col("seed") >= 0 && std::find(groups.begin(), groups.end(), col("seed")) == groups.end();
    if (any_errorbars_ && !pooled_.empty())
      l += " (mean +- s.e. over " + std::string(seeds ? "seeds and " : "") + pooled_text() + ")";
    else if (any_errorbars_)
      l += seeds ? " (mean +- s.e. over seeds)" : " (mean +- s.e.)";
    return l;
  }

  // Axes of a heat map: one cell per distinct value, labelled by value (or category).
  std::string heatmap_axes() const {
    std::string axes, xt = "(", yt = "(";
    auto tick = [](const Categories& c, double v) {
      return c.on() && v >= 0 && v < double(c.labels.size()) ? c.labels[size_t(v)]
                                                             : format_double(v);
    };
    for (size_t i = 0; i < hx_.size(); ++i) {
      const auto named = xtics_.find(hx_[i]);
      xt += (i ? ", " : "") + gp(named != xtics_.end() ? named->second : tick(xcat_, hx_[i])) +
            " " + std::to_string(i);
    }
    for (size_t i = 0; i < hy_.size(); ++i)
      yt += (i ? ", " : "") + gp(tick(ycat_, hy_[i])) + " " + std::to_string(i);
    axes += "set xtics " + xt + ")" + xtics_rotation() + "\nset ytics " + yt + ")\n";
    axes += "set xrange [-0.5:" + format_double(double(hx_.size()) - 0.5) + "]\n";
    axes += "set yrange [-0.5:" + format_double(double(hy_.size()) - 0.5) + "]\n";
    axes += "unset grid\nset tics out nomirror\n";
    if (zcat_.on()) {
      // One colour per category, evenly spread over a perceptually ordered palette.
      const size_t n = zcat_.values.size();
      static const char* kColours[] = {"#440154", "#3b528b", "#21918c", "#5ec962",
                                       "#fde725", "#e66101", "#b2abd2", "#5e3c99"};
      axes += "set palette maxcolors " + std::to_string(n) + "\nset palette defined (";
      for (size_t i = 0; i < n; ++i)
        axes += (i ? ", " : "") + std::to_string(i) + " " + gp(kColours[i % 8]);
      if (n == 1) axes += ", 1 " + gp(kColours[0]);
      axes += ")\nset cbrange [-0.5:" + format_double(double(n) - 0.5) + "]\n";
      axes += "set cbtics " + zcat_.tics() + "\nset cblabel " + gp(style_.z) + "\n";
    } else {
      // Viridis by its five anchor colours: gnuplot 5.4 (Debian 12) has no `set palette viridis`.
      axes +=
          "set palette defined (0 '#440154', 1 '#3b528b', 2 '#21918c', 3 '#5ec962', 4 "
          "'#fde725')\nset cblabel " +
          gp(std::string(style_.z) + " (mean)") + "\n";
      if (ylo_ <= yhi_) axes += "set cbrange " + range(padded(ylo_, yhi_, false)) + "\n";
    }
    return axes;
  }

  // Named x ticks longer than fit side by side (about 40 characters across a panel, 80 across
  // a single plot) are turned upright, each ending under its tick (a panel is made wide enough
  // to give each tick kTicPixels).
  bool xtics_turned() const {
    size_t chars = 0;
    for (const auto& [x, label] : xtics_) chars += label.size() + 2;
    return chars > (faceted_ ? 40u : 80u);
  }
  std::string xtics_rotation() const { return xtics_turned() ? " rotate by 90 right" : ""; }
  static constexpr size_t kTicPixels = 14;
  size_t longest_xtic() const {
    size_t n = 0;
    for (const auto& [x, label] : xtics_) n = std::max(n, label.size());
    return n;
  }

  // Under two decades a log x axis has one or two labelled ticks (none when no power of ten lies
  // in the range): label the data's x instead, every one up to 12 of them, else every k-th.
  std::string log_x_tics() const {
    std::vector<double> xs;
    for (const auto& [k, rows] : data_)
      for (const auto& p : rows) xs.push_back(p.x);
    std::sort(xs.begin(), xs.end());
    xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
    if (hist_ || xhi_ >= 100 * xlo_ || xs.empty()) return "";
    const size_t step = (xs.size() + 11) / 12;
    std::string t = "set xtics (";
    for (size_t i = 0; i < xs.size(); i += step) t += (i ? ", " : "") + format_double(xs[i]);
    return t + ")\n";
  }

  // Under two decades a log y axis labels one or two powers of ten: add 2 and 5 times them.
  static std::string log_y_tics(const std::pair<double, double>& yr) {
    if (yr.second >= 100 * yr.first) return "";
    std::string t;
    for (int e = int(std::floor(std::log10(yr.first))); e <= int(std::ceil(std::log10(yr.second)));
         ++e)
      for (double m : {1.0, 2.0, 5.0}) {
        const double v = m * std::pow(10.0, e);
        if (v >= yr.first && v <= yr.second) t += (t.empty() ? "" : ", ") + format_double(v);
      }
    return t.empty() ? "" : "set ytics (" + t + ")\n";
  }

  // Axes of a line, point or histogram plot.
  std::string xy_axes() const {
    const auto xr = xcat_.on() ? std::make_pair(-0.5, double(xcat_.values.size()) - 0.5)
                               : padded(xlo_, xhi_, logx_);
    const auto yr = ycat_.on() ? std::make_pair(-0.5, double(ycat_.values.size()) - 0.5)
                               : padded(ylo_, yhi_, logy_);
    std::string axes = "set xrange " + range(xr) + "\nset yrange " + range(yr) + "\n";
    if (hist_) axes += "set yrange [0:" + format_double(yhi_ * 1.08 + 0.5) + "]\n";
    if (xcat_.on()) axes += "set xtics " + xcat_.tics() + "\n";
    if (ycat_.on()) axes += "set ytics " + ycat_.tics() + "\n";
    if (logx_) axes += "set logscale x\n" + log_x_tics();
    if (!xtics_.empty()) {  // named ticks at the x drawn
      std::string t;
      for (const auto& [x, label] : xtics_)
        t += (t.empty() ? "" : ", ") + gp(label) + " " + format_double(x);
      axes += "set xtics (" + t + ")" + xtics_rotation() + "\n";
    }
    // %g: 1, 0.1, 0.001, 1e-05 (gnuplot's default labels a log axis 1.00000, 0.00010).
    if (logy_) axes += "set logscale y\nset format y '%g'\n" + log_y_tics(yr);
    // The band's lower edge, clipped to the bottom of the plot (log axes cannot show <= 0).
    axes +=
        "YFLOOR(v) = v > " + format_double(yr.first) + " ? v : " + format_double(yr.first) + "\n";
    return axes + "set grid\n";
  }

  // The legend: one entry per series, never over the data (outside the plot, or a panel).
  bool legend() const { return !heatmap_ && (series_titles_.size() > 1 || faceted_); }
  std::string key_entries() const {
    std::string k;
    for (size_t si = 0; si < series_titles_.size(); ++si) {
      const Kind kind = series_kinds_[si];
      const std::string with = hist_                  ? "histeps lw 2"
                               : is_ref(si)           ? "lines lw 1.5"
                               : kind == Kind::Points ? "points" + ps(si, "0.9")
                               : kind == Kind::Lines  ? "lines"
                                                      : "linespoints" + ps(si, "0.7");
      k += ", keyentry with " + with + series_style(si) + " title " +
           gp(series_titles_[si] + series_notes_[si]);
    }
    return k;
  }
  std::string panel_labels(size_t pi) const {
    std::string s;
    for (const auto& l : cell_labels_) {
      const auto f = split_list(l, '\x1f');
      if (f.size() == 4 && f[3] == std::to_string(pi))
        s += "set label " + gp(f[0]) + " at " + f[1] + "," + f[2] +
             " center front textcolor 'white' font ',9'\n";
    }
    return s;
  }
  std::string plot_command(size_t pi) const {
    std::string g = "plot ";
    for (size_t i = 0; i < panel_plots_[pi].size(); ++i)
      g += (i ? ", \\\n     " : "") + panel_plots_[pi][i];
    return g;
  }
  std::string terminal() const {
    if (!tool_->terminal.empty()) return tool_->terminal;  // the one found for format_
    return format_ == "pdf" ? "pdfcairo" : format_ == "svg" ? "svg" : "pngcairo";
  }
  // `set terminal` with the figure's size in pixels of the PNG. Text in points is larger in a
  // pngcairo PNG than in a PDF or SVG of the same size: a PDF takes 128 pixels per inch (960
  // pixels: 7.5 in), an SVG 3/4 of the pixels, so that text and page keep the PNG's proportions.
  std::string terminal_line(size_t width, size_t height, const std::string& font = "") const {
    std::string size = std::to_string(width) + "," + std::to_string(height);
    if (terminal() == "pdfcairo") {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.2fin,%.2fin", double(width) / 128.0,
                    double(height) / 128.0);
      size = buf;
    } else if (terminal() == "svg") {
      size = std::to_string(width * 3 / 4) + "," + std::to_string(height * 3 / 4);
    }
    return "set terminal " + terminal() + " size " + size + font + "\n";
  }
  std::string file_name() const { return name_ + "." + format_; }
  // The script (and .log) of the figure's own format: <name>.gp; of another one drawn beside it
  // (figure_formats): <name>.<format>.gp.
  std::string script_stem() const { return also_format_ ? name_ + "." + format_ : name_; }
  std::string title() const {
    if (ps_) {  // one curve has no legend entry: the title says what it pools
      const std::string t = ps_->title.empty() ? name_ : ps_->title;
      return legend() || src_.size() != 1 ? t : t + pooled_note(src_[0]);
    }
    std::string t = pd_->title && *pd_->title ? pd_->title : pd_->name;
    std::string notes = fixed_;
    if (!pooled_.empty())
      notes += std::string(notes.empty() ? "" : "; ") + "pooled over " + pooled_text();
    if (!title_note_.empty()) notes += std::string(notes.empty() ? "" : "; ") + title_note_;
    return notes.empty() ? t : t + " (" + notes + ")";
  }

  std::string script() const {
    std::string axes = heatmap_ ? heatmap_axes() : xy_axes();
    if (hist_) axes += "set style fill transparent solid 0.3\n";
    std::string g = "# " + one_line(file_name()) + " from " + one_line(name_) +
                    ".dat; redraw with: gnuplot " + one_line(script_stem()) + ".gp\n";
    if (dropped_) g += "# " + std::to_string(dropped_) + " rows outside the declared categories\n";
    return g + (faceted_ ? faceted_script(axes) : single_script(axes));
  }

  std::string single_script(const std::string& axes) const {
    // `phaselab plot`'s legend entries name runs and selections (long): a column of them under
    // the plot, the figure taller by a line per entry, the plot as wide as without a legend.
    // A run figure's legend goes there too when an entry is long (a note on a hidden curve).
    size_t longest = 0;
    for (size_t i = 0; i < series_titles_.size(); ++i)
      longest = std::max(longest, series_titles_[i].size() + series_notes_[i].size());
    const bool below = (ps_ || longest > 45) && legend();
    // Turned x tick names take their length (7 pixels a character) from the plot: add it.
    const size_t height = (below ? 640 + 18 * series_titles_.size() : 640) +
                          (xtics_turned() ? 7 * longest_xtic() : 0);
    std::string g = terminal_line(960, height);
    g += "set termoption noenhanced\n";
    g += "set output " + gp(file_name()) + "\n";
    g += "set title " + gp(title()) + "\n";
    g += "set xlabel " + gp(xlabel()) + "\nset ylabel " + gp(ylabel()) + "\n" + axes;
    g += !legend() ? "unset key\n"
         : below   ? "set key outside below center vertical Left reverse samplen 3 maxcols 1\n"
                   : "set key outside right top vertical Left reverse samplen 2\n";
    g += panel_labels(0) + plot_command(0);
    if (legend()) g += key_entries();
    return g + "\n";
  }

  // Panels on a grid; the legend in a strip of its own on the right, never over data.
  std::string faceted_script(const std::string& axes) const {
    const size_t panels = panel_values_.size();
    size_t cols = style_.facet_columns;
    if (cols == 0) cols = size_t(std::ceil(std::sqrt(double(panels))));
    cols = std::max<size_t>(1, std::min(cols, panels));
    const size_t rows = (panels + cols - 1) / cols;
    // Panels of 380 x 300 pixels, wider where named x ticks need kTicPixels each (the plot
    // takes about 190 pixels less than its panel), taller by the length of turned ticks.
    const size_t panel_w = std::max<size_t>(380, 190 + kTicPixels * xtics_.size());
    const size_t panel_h = 300 + (xtics_turned() ? 7 * longest_xtic() : 0);
    const size_t width = panel_w * cols + (legend() ? 240 : 0), height = 50 + panel_h * rows;
    const double strip = legend() ? 240.0 / double(width) : 0.0, top = 40.0 / double(height);
    const double pw = (1 - strip) / double(cols), ph = (1 - top) / double(rows);
    std::string g = "# facets: " + std::to_string(panels) + " panels by " + one_line(facet_name_) +
                    ", " + std::to_string(rows) + " rows x " + std::to_string(cols) + " columns\n";
    g += terminal_line(width, height, " font ',9'");
    g += "set termoption noenhanced\n";
    g += "set output " + gp(file_name()) + "\n" + axes + "unset key\n";
    g += "set multiplot title " + gp(title()) + " font ',11'\n";
    for (size_t pi = 0; pi < panels; ++pi) {
      const size_t r = pi / cols, c = pi % cols;
      g += "set origin " + format_double(double(c) * pw) + "," +
           format_double(1 - top - double(r + 1) * ph) + "\nset size " + format_double(pw) + "," +
           format_double(ph) + "\n";
      g += "set title " + gp(facet_name_ + " = " + panel_values_[pi]) + "\n";
      // Axis titles on the bottom panel of each column and on the first column only.
      const bool bottom = pi + cols >= panels, left = c == 0;
      g += "set xlabel " + gp(bottom ? xlabel() : "") + "\nset ylabel " + gp(left ? ylabel() : "") +
           "\n";
      g += "unset label\n" + panel_labels(pi) + plot_command(pi) + "\n";
    }
    if (legend()) {
      g += "# legend\nset origin " + format_double(1 - strip) + ",0\nset size " +
           format_double(strip) + "," + format_double(1 - top) + "\n";
      g += "unset label\nunset title\nunset xlabel\nunset ylabel\nunset grid\nunset border\n"
           "unset tics\nunset logscale\nunset colorbox\nset xrange [0:1]\nset yrange [0:1]\n"
           "set key center center vertical Left reverse samplen 2\n";
      g += "plot 2 notitle" + key_entries() + "\n";
    }
    return g + "unset multiplot\n";
  }

  bool write_files(const std::string& fig_dir) {
    const std::string base = fig_dir + "/" + name_;
    std::string why;
    if (!write_file_atomic(base + ".dat", dat_, &why) ||
        !write_file_atomic(base + ".gp", script(), &why))
      return fail("cannot write " + base + ".gp/.dat: " + why);
    if (tool_->exe.empty()) return fail(tool_->why);
    return true;
  }

  // Every format of also_ after the figure's own has been drawn: the script <name>.<format>.gp
  // and the file, or also_note saying which could not be and why. The data file is shared.
  void draw_also(const std::string& fig_dir) {
    if (res_.png.empty() || also_.empty()) return;
    const FigureResult own = res_;
    const std::string own_format = format_;
    const Tool* own_tool = tool_;
    std::vector<std::string> drawn, notes;
    for (const auto& [format, tool] : also_) {
      if (format == own_format) continue;
      format_ = format;
      tool_ = tool;
      also_format_ = true;
      res_ = FigureResult{};
      const std::string gp_file = fig_dir + "/" + script_stem() + ".gp";
      std::string why;
      if (tool_->exe.empty()) {
        why = tool_->why;
      } else if (!write_file_atomic(gp_file, script(), &why)) {
        why = "cannot write " + gp_file + ": " + why;
      } else {
        run_gnuplot(fig_dir);
        why = res_.note;
      }
      if (!res_.png.empty())
        drawn.push_back(res_.png);
      else
        notes.push_back(format + ": " + why);
    }
    format_ = own_format;
    tool_ = own_tool;
    also_format_ = false;
    res_ = own;
    res_.also = drawn;
    for (const auto& n : notes) res_.also_note += (res_.also_note.empty() ? "" : "; ") + n;
  }

  void run_gnuplot(const std::string& fig_dir) {
    const std::string base = fig_dir + "/" + script_stem(), log = base + ".log";
    const std::string file = fig_dir + "/" + file_name();
    const int rc = run_tool(tool_->exe, {script_stem() + ".gp"}, fig_dir, log);
    std::string log_text;
    read_file(log, &log_text, nullptr);
    std::error_code ec;
    const auto size = std::filesystem::file_size(file, ec);
    if (rc > 128) {  // Ctrl-C reaches gnuplot too: not a gnuplot error
      fail("gnuplot was stopped by signal " + std::to_string(rc - 128) + " (" +
           strsignal(rc - 128) + "); redraw with: cd " + fig_dir + " && gnuplot " + script_stem() +
           ".gp");
      std::remove(file.c_str());  // a partial file
      return;
    }
    if (rc != 0 || ec || size == 0) {
      // gnuplot's message: the last line that says something (its first lines echo the command)
      std::string msg;
      for (const auto& line : split_list(log_text, '\n'))
        if (line.find_first_not_of(" \t^") != std::string::npos) msg = line;
      fail("gnuplot failed (exit " + std::to_string(rc) + ")" + (msg.empty() ? "" : ": " + msg) +
           ", see " + log);
      return;
    }
    if (!figure_complete(file, format_)) {  // e.g. gnuplot ran out of disk space mid-file
      fail("cannot write " + file + ": the file gnuplot wrote is truncated (" +
           std::to_string(size) + " bytes, no " +
           (format_ == "png"   ? std::string("PNG end chunk")
            : format_ == "pdf" ? std::string("%%EOF")
                               : std::string("</svg>")) +
           "; disk full?)");
      std::remove(file.c_str());
      return;
    }
    if (log_text.empty()) std::remove(log.c_str());  // keep only logs that say something
    res_.png = file;
    if (dropped_)
      res_.note = std::to_string(dropped_) + " rows outside the declared categories not drawn";
  }

  bool write_csv(const std::string& fig_dir) {
    const std::string path = fig_dir + "/" + name_ + ".csv";
    std::string why;
    if (!write_file_atomic(path, csv_, &why)) return fail("cannot write " + path + ": " + why);
    return true;
  }

  const pl_plot_decl* pd_ = nullptr;                               // a run figure's declaration
  const std::map<std::string, std::string>* constants_ = nullptr;  // and the run's constants
  std::vector<std::string> params_;  // the plugin's parameter names (run figures)
  std::vector<std::string> pooled_;  // swept parameters the run figure averages over
  const PlotSpec* ps_ = nullptr;     // or `phaselab plot`'s figure
  const Tool* tool_;                 // gnuplot for format_
  std::vector<std::pair<std::string, const Tool*>> also_;  // formats drawn after format_
  bool also_format_ = false;    // drawing one of also_ (script <name>.<format>.gp)
  std::string title_note_;      // added to a run figure's title (a partial merge)
  std::string name_;            // file names: <name>.png, .gp, .dat (and .csv for `phaselab plot`)
  std::string format_ = "png";  // the figure's: png, or `phaselab plot --out` FIG.pdf / FIG.svg
  FigureResult res_;
  pl_plot_style style_{};
  bool heatmap_ = false, hist_ = false, logx_ = false, logy_ = false, points_ = false;
  Categories xcat_, ycat_, zcat_;
  std::vector<Source> src_;
  // columns of source 0 (run figures)
  int zc_ = -1, fc_ = -1, xtc_ = -1;     // xtc_: the column naming the x ticks
  std::map<double, std::string> xtics_;  // x drawn -> its name (from xtc_)
  std::string fixed_;  // group_by and facet parameters that are constant in this run
  std::string facet_name_;
  // rows
  std::vector<std::string> panel_values_, series_keys_, series_titles_, series_options_;
  std::vector<Kind> series_kinds_;
  std::map<std::string, std::string> refs_;  // run figures: reference y column -> its data column
  std::vector<std::string> series_refs_;     // per series: its data series' key ("" for data)
  std::vector<size_t> colours_;              // per series: its colour (and dash, marker) index
  std::vector<std::string> series_notes_;    // per series: " (hidden under ...)", "drawn over", ""
  std::vector<size_t> rows_per_source_;
  std::map<std::pair<std::string, size_t>, std::vector<Cell>> data_;  // (panel value, series)
  size_t dropped_ = 0;
  bool faceted_ = false;
  std::vector<double> hx_, hy_;  // heat map: distinct x and y
  // data file
  std::string dat_, csv_;
  static constexpr std::array<const char*, 5> kCsvColumns = {"series", "x", "y", "se", "n"};
  std::vector<std::string> csv_groups_;  // FIG.csv's group columns after series,x,y,se,n
  std::vector<std::map<std::string, std::string>> series_groups_;  // per series: column -> value
  bool any_errorbars_ = false;
  double xlo_ = INFINITY, xhi_ = -INFINITY, ylo_ = INFINITY, yhi_ = -INFINITY;
  std::vector<std::vector<std::string>> panel_plots_;
  std::vector<std::string> cell_labels_;  // heat map: "count/total\x1fx\x1fy\x1fpanel"
};

}  // namespace

bool figure_format_known(const std::string& format) {
  return format == "png" || format == "pdf" || format == "svg";
}

std::vector<FigureResult> render_figures(const pl_plugin& plugin, const std::string& out_dir,
                                         const std::map<std::string, std::string>& constants,
                                         std::string* tool_text, bool* have_tool,
                                         const std::string& title_note,
                                         const std::vector<std::string>& formats) {
  std::vector<FigureResult> out;
  *have_tool = false;
  if (plugin.num_plots == 0) return out;
  const std::string fig_dir = out_dir + "/figures";
  std::error_code ec;
  std::filesystem::create_directory(fig_dir, ec);  // a failure shows as each figure's write error
  const Tool tool = find_gnuplot(fig_dir);
  *have_tool = !tool.exe.empty();
  *tool_text = tool.exe.empty() ? tool.why : "gnuplot " + tool.version + " (" + tool.terminal + ")";
  std::vector<std::string> params;
  for (uint32_t i = 0; i < plugin.num_params; ++i)
    if (plugin.params && plugin.params[i].name) params.push_back(plugin.params[i].name);
  // The other formats' gnuplot (its terminal), found once for all figures.
  std::vector<std::string> also_formats;
  for (const auto& f : formats)
    if (f != "png") also_formats.push_back(f);
  std::vector<Tool> also_tools;
  for (const auto& f : also_formats)
    also_tools.push_back(tool.exe.empty() ? tool : find_gnuplot(fig_dir, f));
  std::vector<std::pair<std::string, const Tool*>> also;
  for (size_t i = 0; i < also_formats.size(); ++i)
    also.push_back({also_formats[i], &also_tools[i]});
  for (uint32_t i = 0; i < plugin.num_plots; ++i) {
    Figure fig(plugin.plots[i], constants, params, tool, title_note);
    fig.set_also(also);
    out.push_back(fig.draw(out_dir, fig_dir));
  }
  return out;
}

bool parse_series(const std::string& text, SeriesSpec* s, std::string* error) {
  static const char* kKeys[] = {"x=", "y=", "where=", "group=", "title=", "style="};
  auto key_at = [&](size_t i) -> std::string {  // the key starting at i, or ""
    for (const char* k : kKeys)
      if (text.compare(i, std::strlen(k), k) == 0) return std::string(k, std::strlen(k) - 1);
    return "";
  };
  *s = SeriesSpec{};
  s->text = text;
  std::vector<std::pair<std::string, std::string>> fields;  // (key, value); the table first
  size_t start = 0;
  std::string key;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i < text.size() && !(text[i] == ':' && !key_at(i + 1).empty())) continue;
    fields.push_back({key, text.substr(start, i - start)});
    if (i < text.size()) {
      key = key_at(i + 1);
      start = i + 2 + key.size();
      i = start - 1;
    }
  }
  s->table = fields[0].second;
  if (s->table.empty()) {
    *error =
        "series " + driver::quoted(text) + ": no table before the first field (TABLE:x=COL:y=COL)";
    return false;
  }
  std::set<std::string> seen;
  for (size_t f = 1; f < fields.size(); ++f) {
    const auto& [k, v] = fields[f];
    if (!seen.insert(k).second) {
      *error = "series " + driver::quoted(text) + ": " + k + "= given twice";
      return false;
    }
    if (k == "x") {
      s->x = v;
    } else if (k == "y") {
      s->ys = split_list(v, ',');
    } else if (k == "where") {
      for (const auto& c : split_list(v, ',')) {
        const size_t eq = c.find('=');
        if (eq == std::string::npos || eq == 0) {
          *error = "series " + driver::quoted(text) + ": where needs COLUMN=VALUE, got " +
                   driver::quoted(c);
          return false;
        }
        s->where.push_back({c.substr(0, eq), c.substr(eq + 1)});
      }
    } else if (k == "group") {
      s->group = split_list(v, ',');
    } else if (k == "title") {
      s->title = v;
    } else {  // style
      const size_t sp = v.find(' ');
      s->style = v.substr(0, sp);
      s->options = sp == std::string::npos ? "" : v.substr(sp + 1);
      if (!safe_options(s->options)) {
        *error = "series " + driver::quoted(text) + ": style options " +
                 driver::quoted(s->options) +
                 " may hold only words, numbers and quoted colours (e.g. lw 2 dt 3 lc rgb "
                 "'gray')";
        return false;
      }
      if (s->style != "lines" && s->style != "points" && s->style != "linespoints" &&
          s->style != "mean") {
        *error = "series " + driver::quoted(text) + ": style " + driver::quoted(s->style) +
                 " is not one of lines, points, linespoints, mean";
        return false;
      }
    }
  }
  if (s->x.empty() || s->ys.empty()) {
    *error = "series " + driver::quoted(text) + ": needs x=COLUMN and y=COLUMN";
    return false;
  }
  return true;
}

namespace {

// {param:NAME} in `text`, from the config of the run whose table is `table` (run.json beside
// it): a constant parameter's value.
bool fill_params(std::string* text, const std::string& table, std::string* why) {
  const std::string tag = "{param:";
  nlohmann::json run;
  bool loaded = false;
  const std::string json_path =
      (std::filesystem::path(table).parent_path() / "run.json").lexically_normal().string();
  for (size_t at = text->find(tag); at != std::string::npos; at = text->find(tag, at)) {
    const size_t end = text->find('}', at);
    if (end == std::string::npos) break;
    const std::string name = text->substr(at + tag.size(), end - at - tag.size());
    if (!loaded) {
      std::string data;
      if (!read_file(json_path, &data, nullptr)) {
        *why = "{param:" + name + "}: cannot read " + json_path;
        return false;
      }
      run = nlohmann::json::parse(data, nullptr, false);
      loaded = true;
    }
    const nlohmann::json* v = nullptr;
    if (run.is_object() && run.contains("config") && run["config"].contains("params") &&
        run["config"]["params"].contains(name))
      v = &run["config"]["params"][name];
    if (!v || v->is_structured() || v->is_null()) {
      const bool swept = run.is_object() && run.contains("config") &&
                         run["config"].contains("sweep") && run["config"]["sweep"].contains(name);
      *why = "{param:" + name + "}: " + json_path +
             (swept ? " sweeps " + name + " (use {" + name + "} with group=" + name + ")"
                    : " has no parameter " + name);
      return false;
    }
    const std::string value = v->is_string()         ? v->get<std::string>()
                              : v->is_number_float() ? format_double(v->get<double>())
                                                     : v->dump();
    text->replace(at, end + 1 - at, value);
    at += value.size();
  }
  return true;
}

void find_pooled(Source* s);

// A series' table read and its columns looked up; every column it names must be in the table.
bool select_source(const SeriesSpec& sp, Source* s, std::string* why) {
  std::string file = sp.table;
  if (std::filesystem::is_directory(file))
    file = (std::filesystem::path(file) / "results.csv").string();
  if (!read_source(file, s, why)) return false;
  auto need = [&](const std::string& c, const std::string& field, int* at) {
    *at = s->col(c);
    if (*at >= 0) return true;
    *why = file + ": no column " + driver::quoted(c) + " (" + field + "; columns: ";
    for (size_t i = 0; i < s->recs[0].size(); ++i) *why += (i ? ", " : "") + s->recs[0][i];
    *why += ")";
    return false;
  };
  int c;
  if (!need(sp.x, "x=" + sp.x, &s->xc)) return false;
  for (const auto& y : sp.ys) {
    if (!need(y, "y=" + y, &c)) return false;
    s->ys.push_back({y, c});
  }
  for (const auto& [k, v] : sp.where) {
    if (!need(k, "where " + k + "=" + v, &c)) return false;
    s->filters.push_back({c, v});
  }
  for (const auto& g : sp.group) {
    if (!need(g, "group=" + g, &c)) return false;
    s->groups.push_back(c);
  }
  s->title = sp.title;
  if (!fill_params(&s->title, file, why)) return false;
  // The other placeholders name group columns (one value per curve).
  for (size_t at = s->title.find('{'); at != std::string::npos; at = s->title.find('{', at + 1)) {
    const size_t end = s->title.find('}', at);
    if (end == std::string::npos) break;
    const std::string name = s->title.substr(at + 1, end - at - 1);
    if (std::find(sp.group.begin(), sp.group.end(), name) == sp.group.end()) {
      std::string groups;
      for (const auto& g : sp.group) groups += (groups.empty() ? "" : ",") + g;
      *why = "series " + driver::quoted(sp.text) + ": title placeholder {" + name +
             "} is neither a group column (group=" + groups + ") nor {param:NAME}";
      return false;
    }
  }
  s->kind = sp.style == "points"        ? Kind::Points
            : sp.style == "mean"        ? Kind::Mean
            : sp.style == "linespoints" ? Kind::LinesPoints
                                        : Kind::Lines;
  s->options = sp.options;
  if (s->kind == Kind::Mean) find_pooled(s);
  return true;
}

// style=mean averages the rows that share an x within a curve: the keys the run (run.json beside
// the table) sweeps that the series neither draws, groups by nor fixes with where=, and that vary
// in its rows, are pooled; the legend entry and a warning say so.
void find_pooled(Source* s) {
  std::string text;
  const std::string json_path =
      (std::filesystem::path(s->file).parent_path() / "run.json").lexically_normal().string();
  if (!read_file(json_path, &text, nullptr)) return;
  const nlohmann::json run = nlohmann::json::parse(text, nullptr, false);
  if (!run.is_object() || !run.contains("config") || !run["config"].is_object() ||
      !run["config"].contains("sweep") || !run["config"]["sweep"].is_object())
    return;
  for (auto it = run["config"]["sweep"].begin(); it != run["config"]["sweep"].end(); ++it) {
    const std::string& k = it.key();
    const int c = s->col(k);
    if (c < 0 || c == s->xc || std::find(s->groups.begin(), s->groups.end(), c) != s->groups.end())
      continue;
    bool fixed = false;
    for (const auto& f : s->filters) fixed = fixed || f.first == c;
    if (fixed) continue;
    std::string first;
    bool seen = false, varies = false;
    for (size_t r = 1; r < s->recs.size() && !varies; ++r) {
      if (!s->kept(s->recs[r])) continue;
      const std::string& v = s->recs[r][size_t(c)];
      if (!seen) first = v, seen = true;
      varies = !same_cell(v, first);
    }
    if (varies) s->pooled.push_back(k);
  }
}

// `phaselab plot --out FIG.png` writes FIG.png, FIG.gp, FIG.dat, FIG.csv and FIG.log. None may be
// one of the plot's input tables, nor an existing file that an earlier `phaselab plot` to FIG.png
// did not write (a run's results.csv or journal.csv, a run figure's .gp and .dat, a user's
// file): *why says which, and nothing is written.
bool check_outputs(const std::filesystem::path& out, const std::vector<Source>& sources,
                   const std::vector<std::string>& also, std::string* why) {
  namespace fs = std::filesystem;
  const std::string stem = out.stem().string();
  const fs::path base = out.parent_path() / stem;
  auto starts = [](const fs::path& p, const std::string& head) {
    std::string text;
    return read_file(p.string(), &text, nullptr) && text.compare(0, head.size(), head) == 0;
  };
  const bool ours = starts(fs::path(base.string() + ".dat"),
                           "# " + one_line(stem) + ": written by phaselab plot from ");
  std::vector<std::string> exts = {out.extension().string(), ".gp", ".dat", ".csv", ".log"};
  for (const std::string& f : also)  // the other formats' files: FIG.pdf, FIG.pdf.gp, FIG.pdf.log
    if ("." + f != out.extension().string())
      for (const char* tail : {"", ".gp", ".log"}) exts.push_back("." + f + tail);
  for (const std::string& ext : exts) {
    const fs::path p = base.string() + ext;
    std::error_code ec;
    const fs::file_status st = fs::symlink_status(p, ec);
    if (ec || !fs::exists(st)) continue;
    for (const Source& s : sources)
      if (fs::equivalent(p, s.file, ec)) {
        *why = "--out " + out.string() + " would overwrite " + p.string() +
               ", a table this plot reads; choose another --out";
        return false;
      }
    const bool mine =
        fs::is_regular_file(st) && ours &&
        (ext != ".csv" || starts(p, "series,x,y,se,n\n") || starts(p, "series,x,y,se,n,"));
    if (!mine) {
      *why = "--out " + out.string() + " would overwrite " + p.string() +
             ", which no earlier phaselab plot to " + out.filename().string() +
             " wrote (phaselab plot writes FIG.png (or .pdf, .svg), .gp, .dat, .csv and .log); "
             "choose another "
             "--out or remove it";
      return false;
    }
  }
  // In a run folder, the names of the files a run or a merge writes there later (failures.csv
  // appears with the first failure, run.json at the start) are not the plot's to take.
  std::error_code ec0;
  if (fs::exists(out.parent_path() / "run.json", ec0))
    for (const char* name : {"results", "journal", "failures", "run"})
      if (stem == name) {
        *why = "--out " + out.string() + " would write " + stem + ".csv in a run folder (" +
               (out.parent_path() / "run.json").string() +
               "), a name the run's own files use; "
               "choose another --out";
        return false;
      }
  return true;
}

}  // namespace

PlotOutcome draw_plot(const PlotSpec& spec) {
  PlotOutcome o;
  namespace fs = std::filesystem;
  const fs::path out(spec.out);
  const std::string ext = out.extension().string();
  if ((ext != ".png" && ext != ".pdf" && ext != ".svg") || out.stem().empty()) {
    o.status = 2;
    o.error = "--out must name a .png, .pdf or .svg file, got " + driver::quoted(spec.out);
    return o;
  }
  if (one_line(spec.out) != spec.out) {
    o.status = 2;
    o.error = "--out " + driver::quoted(spec.out) + " holds a control character (a newline?)";
    return o;
  }
  if (spec.series.empty()) {
    o.status = 2;
    o.error = "no series to plot";
    return o;
  }
  std::vector<Source> sources(spec.series.size());
  for (size_t i = 0; i < spec.series.size(); ++i)
    if (!select_source(spec.series[i], &sources[i], &o.error)) {
      o.status = 2;
      return o;
    }
  PlotSpec filled = spec;
  if (!fill_params(&filled.title, sources[0].file, &o.error)) {
    o.status = 2;
    o.error = "--title: " + o.error;
    return o;
  }
  for (const std::string& f : spec.also)
    if (!figure_format_known(f)) {
      o.status = 2;
      o.error = "unknown figure format " + driver::quoted(f) + " (png, pdf or svg)";
      return o;
    }
  if (!check_outputs(out, sources, spec.also, &o.error)) {
    o.status = 2;
    return o;
  }
  const std::string fig_dir = out.parent_path().empty() ? "." : out.parent_path().string();
  std::error_code ec;
  fs::create_directories(fig_dir, ec);  // a failure shows as the write error
  const Tool tool = find_gnuplot(fig_dir, ext.substr(1));
  o.tool = tool.exe.empty() ? tool.why : "gnuplot " + tool.version + " (" + tool.terminal + ")";
  std::vector<std::string> pooled;
  for (const auto& src : sources) {
    std::string t;
    for (const auto& p : src.pooled) t += (t.empty() ? "" : ", ") + p;
    pooled.push_back(t);
  }
  Figure fig(filled, std::move(sources), tool);
  std::vector<std::string> also_formats;
  for (const std::string& f : spec.also)
    if (f != ext.substr(1)) also_formats.push_back(f);
  std::vector<Tool> also_tools;
  for (const std::string& f : also_formats)
    also_tools.push_back(tool.exe.empty() ? tool : find_gnuplot(fig_dir, f));
  std::vector<std::pair<std::string, const Tool*>> also;
  for (size_t i = 0; i < also_formats.size(); ++i)
    also.push_back({also_formats[i], &also_tools[i]});
  fig.set_also(also);
  std::vector<size_t> rows;
  o.status = fig.draw_plot(fig_dir, &rows);
  o.figure = fig.result();
  if (o.status) o.error = o.figure.note;
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i] == 0)
      o.warnings.push_back("series " + std::to_string(i + 1) + " (" + spec.series[i].text +
                           ") selects no rows");
  for (size_t i = 0; i < pooled.size(); ++i)
    if (!pooled[i].empty())
      o.warnings.push_back("series " + std::to_string(i + 1) + " (" + spec.series[i].text +
                           ") averages over the swept keys " + pooled[i] +
                           " (style=mean; add them to group= or where= to keep them apart)");
  return o;
}

}  // namespace pl::driver
