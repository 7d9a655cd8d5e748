// SPDX-License-Identifier: Apache-2.0
#include "driver/figures.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>

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

// Single-quoted gnuplot string (no escapes inside; a quote is doubled).
std::string gp(const std::string& s) {
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("''") : std::string(1, c);
  return o + "'";
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

// Runs `gnuplot args...` in `dir`, stdout+stderr to `log`; returns the exit status (-1: no run).
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

struct Tool {
  std::string exe, terminal, version, why;
};

Tool find_gnuplot(const std::string& scratch_dir) {
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
  for (const char* term : {"pngcairo", "png"}) {
    if (run_tool(t.exe, {"-e", std::string("set terminal ") + term + "; print GPVAL_VERSION"}, "",
                 log) == 0) {
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
    t.why = t.exe + " has neither the pngcairo nor the png terminal";
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

FigureResult render_one(const pl_plot_decl& pd, const std::string& out_dir,
                        const std::string& fig_dir,
                        const std::map<std::string, std::string>& constants, const Tool& tool) {
  FigureResult res;
  res.name = pd.name;
  // The optional style, as much of it as the plugin's struct has (later fields stay zero).
  pl_plot_style style{};
  if (pd.style && pd.style->struct_size >= sizeof(uint32_t))
    std::memcpy(&style, pd.style, std::min<size_t>(pd.style->struct_size, sizeof style));
  const bool heatmap = style.kind == PL_PLOT_KIND_HEATMAP;
  const Categories xcat = parse_categories(style.x_categories);
  const Categories ycat = parse_categories(style.y_categories);
  const Categories zcat = parse_categories(style.z_categories);

  const std::string table_path = out_dir + "/" + pd.table + ".csv";
  std::string text;
  std::vector<std::vector<std::string>> recs;
  if (!read_file(table_path, &text, nullptr) || !parse_csv(text, &recs) || recs.empty()) {
    res.note = "cannot read " + table_path;
    return res;
  }
  const auto& header = recs[0];
  auto col = [&](const std::string& c) -> int {
    auto it = std::find(header.begin(), header.end(), c);
    return it == header.end() ? -1 : int(it - header.begin());
  };
  const bool hist = !heatmap && (pd.flags & PL_PLOT_HISTOGRAM);
  const bool logx = !xcat.on() && !heatmap && (pd.flags & PL_PLOT_LOGX);
  const bool logy = !ycat.on() && !heatmap && !hist && (pd.flags & PL_PLOT_LOGY);
  // A categorical y is drawn as points: a mean of category positions means nothing.
  const bool points = !hist && ((pd.flags & PL_PLOT_POINTS) || ycat.on());
  const int xc = col(pd.x);
  if (xc < 0) {
    res.note = std::string("column ") + pd.x + " is not in " + pd.table +
               ".csv (sweep it to get this figure)";
    return res;
  }
  std::vector<std::pair<std::string, int>> ys;  // (name, column)
  if (!hist) {
    for (const auto& y : split_list(pd.y ? pd.y : "", ','))
      if (col(y) >= 0) ys.push_back({y, col(y)});
    if (ys.empty()) {
      res.note = std::string("none of the y columns (") + (pd.y ? pd.y : "") + ") is in " +
                 pd.table + ".csv (sweep it to get this figure)";
      return res;
    }
  } else {
    ys.push_back({pd.x, xc});
  }
  int zc = -1;
  if (heatmap) {
    zc = style.z ? col(style.z) : -1;
    if (zc < 0) {
      res.note = std::string("heat map column ") + (style.z ? style.z : "(none)") + " is not in " +
                 pd.table + ".csv";
      return res;
    }
    ys.resize(1);
  }
  std::string fixed;  // group_by and facet parameters that are constant in this run
  int fc = -1;
  if (style.facet_by && *style.facet_by) {
    fc = col(style.facet_by);
    if (fc < 0 && constants.count(style.facet_by))
      fixed += std::string(style.facet_by) + "=" + constants.at(style.facet_by);
  }
  // Filters on columns, or on constant parameters (not swept, so not columns).
  std::vector<std::pair<int, std::string>> filters;
  for (const auto& f : split_list(pd.filter ? pd.filter : "", ',')) {
    const size_t eq = f.find('=');
    const std::string c = f.substr(0, eq), v = eq == std::string::npos ? "" : f.substr(eq + 1);
    if (col(c) >= 0) {
      filters.push_back({col(c), v});
    } else if (constants.count(c)) {
      if (!same_cell(constants.at(c), v)) {
        res.note = "filter " + f + " excludes this run (" + c + " is " + constants.at(c) + ")";
        return res;
      }
    } else {
      res.note = "filter column " + c + " is neither a column nor a parameter";
      return res;
    }
  }
  // Group and facet columns that hold one value in the rows drawn (a sweep over one value) say
  // so in the title instead of in every legend entry or a single panel.
  auto single_value = [&](int c, std::string* value) {
    bool first = true;
    for (size_t r = 1; r < recs.size(); ++r) {
      const auto& rec = recs[r];
      if (rec.size() != header.size()) continue;
      bool keep = true;
      for (const auto& [fcol, v] : filters) keep = keep && same_cell(rec[size_t(fcol)], v);
      if (!keep) continue;
      if (first) *value = rec[size_t(c)], first = false;
      if (rec[size_t(c)] != *value) return false;
    }
    return true;
  };
  std::vector<int> groups;
  for (const auto& g : split_list(pd.group_by ? pd.group_by : "", ',')) {
    std::string v;
    if (col(g) >= 0 && single_value(col(g), &v))
      fixed += (fixed.empty() ? "" : ", ") + g + "=" + v;
    else if (col(g) >= 0)
      groups.push_back(col(g));
    else if (constants.count(g))
      fixed += (fixed.empty() ? "" : ", ") + g + "=" + constants.at(g);
  }
  std::string facet_name = style.facet_by ? style.facet_by : "";
  if (fc >= 0) {
    std::string v;
    if (single_value(fc, &v)) {
      fixed += (fixed.empty() ? "" : ", ") + facet_name + "=" + v;
      fc = -1;
    }
  }
  // The facet column names the panels: it is not also a series label.
  if (fc >= 0) groups.erase(std::remove(groups.begin(), groups.end(), fc), groups.end());
  // A heat map has no curves: a group column that varies becomes the facet.
  if (heatmap && fc < 0 && !groups.empty()) {
    fc = groups[0];
    facet_name = header[size_t(fc)];
  }
  if (heatmap) groups.clear();

  // Panels (facet values) x series (group value, y column); a series keeps its colour in every
  // panel. Heat maps: one series; its points carry the z cell.
  std::vector<std::string> panel_values;
  std::vector<std::string> series_keys, series_titles;
  struct Row {
    double x, y;
    std::string z;
  };
  std::map<std::pair<std::string, size_t>, std::vector<Row>> data;  // (panel value, series)
  size_t dropped = 0;
  for (size_t r = 1; r < recs.size(); ++r) {
    const auto& rec = recs[r];
    if (rec.size() != header.size()) continue;
    bool keep = true;
    for (const auto& [c, v] : filters) keep = keep && same_cell(rec[size_t(c)], v);
    if (!keep) continue;
    const std::string panel = fc >= 0 ? rec[size_t(fc)] : "";
    std::string glabel;
    for (int g : groups)
      glabel += (glabel.empty() ? "" : ", ") + header[size_t(g)] + "=" + rec[size_t(g)];
    double x;
    if (xcat.on()) {
      const int p = xcat.find(rec[size_t(xc)]);
      if (p < 0) {
        ++dropped;
        continue;
      }
      x = p;
    } else if (!number(rec[size_t(xc)], &x) || !std::isfinite(x) || (logx && x <= 0)) {
      continue;
    }
    for (const auto& [yname, yc] : ys) {
      double y = 0;
      if (hist) {
      } else if (ycat.on()) {
        const int p = ycat.find(rec[size_t(yc)]);
        if (p < 0) {
          ++dropped;
          continue;
        }
        y = p;
      } else if (!number(rec[size_t(yc)], &y) || !std::isfinite(y) || (logy && y <= 0)) {
        continue;
      }
      std::string z;
      if (heatmap) {
        z = rec[size_t(zc)];
        double zv;
        if (zcat.on() ? zcat.find(z) < 0 : !number(z, &zv) || !std::isfinite(zv)) {
          dropped += zcat.on();
          continue;
        }
      }
      const std::string key = heatmap ? "" : glabel + "\x1f" + yname;
      auto it = std::find(series_keys.begin(), series_keys.end(), key);
      if (it == series_keys.end()) {
        series_keys.push_back(key);
        std::string title = glabel;
        if (ys.size() > 1 || title.empty()) title += (title.empty() ? "" : " ") + yname;
        series_titles.push_back(title);
        it = series_keys.end() - 1;
      }
      if (std::find(panel_values.begin(), panel_values.end(), panel) == panel_values.end())
        panel_values.push_back(panel);
      data[{panel, size_t(it - series_keys.begin())}].push_back({x, y, z});
    }
  }
  if (data.empty()) {
    res.note = "no rows to plot (after filters and, for log axes, dropping values <= 0)";
    return res;
  }
  order_values(&panel_values);
  const bool faceted = fc >= 0;

  // Axis positions of a heat map: the distinct x and y values in increasing order, evenly
  // spaced (K = 1, 2, 4, ... 16384 gets equal cells), labelled by value.
  std::vector<double> hx, hy;
  if (heatmap) {
    for (const auto& [k, rows] : data)
      for (const auto& p : rows) hx.push_back(p.x), hy.push_back(p.y);
    for (auto* v : {&hx, &hy}) {
      std::sort(v->begin(), v->end());
      v->erase(std::unique(v->begin(), v->end()), v->end());
    }
  }
  auto pos = [](const std::vector<double>& v, double x) {
    return double(std::lower_bound(v.begin(), v.end(), x) - v.begin());
  };

  // Data file: one block per (panel, series), separated by two blank lines (gnuplot `index`).
  std::string dat =
      "# " + std::string(pd.name) + ": from " + pd.table + ".csv, written by phaselab\n";
  size_t block = 0;
  bool any_errorbars = false;
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  for (const auto& [k, rows] : data)
    for (const auto& p : rows) xlo = std::min(xlo, p.x), xhi = std::max(xhi, p.x);
  static const int kMarkers[] = {7, 5, 9, 13, 11, 15};
  // gnuplot cycles 8 colours; beyond 8 series the dash and marker change too.
  auto line_style = [&](size_t i) {  // colour and dash only (a band takes no point type)
    return " lc " + std::to_string(1 + i % 8) + " dt " + std::to_string(1 + (i / 8) % 5);
  };
  auto series_style = [&](size_t i) {
    std::string s = line_style(i);
    if (!hist) s += " pt " + std::to_string(kMarkers[i % 6]);
    return s;
  };
  const int nb = 30;  // histogram bins, shared by every series and panel
  auto tx = [&](double v) { return logx ? std::log(v) : v; };
  const double ba = tx(xlo), bb = tx(xhi), bw = bb > ba ? (bb - ba) / nb : 1.0;
  std::vector<std::vector<std::string>> panel_plots(panel_values.size());
  std::vector<std::string> cell_labels;  // heat map: "set label" lines
  std::string zrange_cmd;
  for (size_t pi = 0; pi < panel_values.size(); ++pi) {
    std::map<std::pair<double, double>, size_t> seen, total;
    for (size_t si = 0; si < series_keys.size(); ++si) {
      auto it = data.find({panel_values[pi], si});
      if (it != data.end())
        for (const auto& p : it->second) total[{p.x, p.y}]++;
    }
    for (size_t si = 0; si < series_keys.size(); ++si) {
      auto it = data.find({panel_values[pi], si});
      if (it == data.end()) continue;
      const auto& rows = it->second;
      dat += "# " + (faceted ? facet_name + "=" + panel_values[pi] + ": " : "") +
             series_titles[si] + "\n";
      std::string spec = gp(std::string(pd.name) + ".dat") + " index " + std::to_string(block);
      std::string plot;
      if (heatmap) {
        // Cells: mean z, or the most frequent category (ties: the first in category order).
        std::map<std::pair<double, double>, std::vector<std::string>> cells;
        for (const auto& p : rows) cells[{p.x, p.y}].push_back(p.z);
        dat += "# x_pos y_pos z count agree x y\n";
        for (const auto& [xy, zs] : cells) {
          double z = 0;
          size_t agree = zs.size();
          if (zcat.on()) {
            std::vector<size_t> count(zcat.values.size(), 0);
            for (const auto& s : zs) count[size_t(zcat.find(s))]++;
            const size_t best =
                size_t(std::max_element(count.begin(), count.end()) - count.begin());
            z = double(best);
            agree = count[best];
          } else {
            for (const auto& s : zs) {
              double v = 0;
              number(s, &v);
              z += v / double(zs.size());
            }
            ylo = std::min(ylo, z), yhi = std::max(yhi, z);
          }
          const double px = pos(hx, xy.first), py = pos(hy, xy.second);
          dat += format_double(px) + " " + format_double(py) + " " + format_double(z) + " " +
                 std::to_string(zs.size()) + " " + std::to_string(agree) + " " +
                 format_double(xy.first) + " " + format_double(xy.second) + "\n";
          if (agree < zs.size())
            cell_labels.push_back(std::to_string(agree) + "/" + std::to_string(zs.size()) + "\x1f" +
                                  format_double(px) + "\x1f" + format_double(py) + "\x1f" +
                                  std::to_string(pi));
        }
        plot = spec +
               " using 1:2:(0.5):(0.5):3 with boxxyerror fs solid 1.0 noborder lc palette "
               "notitle";
      } else if (hist) {
        std::vector<size_t> count(nb, 0);
        for (const auto& p : rows) count[size_t(std::clamp(int((tx(p.x) - ba) / bw), 0, nb - 1))]++;
        for (int k = 0; k < nb; ++k) {
          const double mid = ba + (k + 0.5) * bw;
          dat += format_double(logx ? std::exp(mid) : mid) + " " +
                 std::to_string(count[size_t(k)]) + "\n";
          yhi = std::max(yhi, double(count[size_t(k)]));
        }
        ylo = 0;
        plot = spec + " using 1:2 with histeps lw 2" + series_style(si) + " notitle";
      } else if (points) {
        // Rows at the same (x, category), of every series in the panel, spread evenly across
        // the category's band.
        for (const auto& p : rows) {
          double y = p.y;
          if (ycat.on()) {
            const size_t m = total[{p.x, p.y}], k = seen[{p.x, p.y}]++;
            if (m > 1) y += 0.5 * (double(k) / double(m - 1) - 0.5);
          }
          dat += format_double(p.x) + " " + format_double(y) + "\n";
          ylo = std::min(ylo, y), yhi = std::max(yhi, y);
        }
        plot = spec + " using 1:2 with points ps 0.9" + series_style(si) + " notitle";
      } else {
        std::vector<std::pair<double, double>> xy;
        for (const auto& p : rows) xy.push_back({p.x, p.y});
        const auto agg = aggregate(xy);
        bool errs = false;
        dat += "# x mean se n\n";
        for (const auto& a : agg) {
          dat += format_double(a.x) + " " + format_double(a.mean) + " " + format_double(a.se) +
                 " " + std::to_string(a.n) + "\n";
          errs = errs || a.n > 1;
          const double lo = a.mean - a.se;
          ylo = std::min(ylo, logy && lo <= 0 ? a.mean : lo);
          yhi = std::max(yhi, a.mean + a.se);
        }
        any_errorbars = any_errorbars || errs;
        if (errs && agg.size() > 12) {
          // Many x: the s.e. as a shaded band under the mean line (clipped at the axis floor).
          plot = spec + " using 1:(YFLOOR($2-$3)):($2+$3) with filledcurves fs transparent solid " +
                 "0.2 noborder" + line_style(si) + " notitle, \\\n     " + spec +
                 " using 1:2 with linespoints ps 0.5" + series_style(si) + " notitle";
        } else {
          plot = spec +
                 (errs ? " using 1:2:3 with yerrorlines ps 0.7"
                       : " using 1:2 with linespoints ps 0.7") +
                 series_style(si) + " notitle";
        }
      }
      dat += "\n\n";
      ++block;
      panel_plots[pi].push_back(plot);
    }
  }

  // Axes, shared by every panel.
  std::string axes;
  std::string xlabel = style.xlabel && *style.xlabel ? style.xlabel : pd.x;
  std::string ylabel = hist ? "count" : "";
  if (!hist)
    for (size_t i = 0; i < ys.size(); ++i) ylabel += (i ? ", " : "") + ys[i].first;
  if (heatmap) ylabel = pd.y;
  if (ys.size() > 1 && !heatmap) ylabel = "value";  // the legend names the columns
  if (style.ylabel && *style.ylabel) ylabel = style.ylabel;
  if (any_errorbars)
    ylabel +=
        col("seed") >= 0 && std::find(groups.begin(), groups.end(), col("seed")) == groups.end()
            ? " (mean +- s.e. over seeds)"
            : " (mean +- s.e.)";
  if (heatmap) {
    std::string xt = "(", yt = "(";
    auto tick = [](const Categories& c, double v) {
      return c.on() && v >= 0 && v < double(c.labels.size()) ? c.labels[size_t(v)]
                                                             : format_double(v);
    };
    for (size_t i = 0; i < hx.size(); ++i)
      xt += (i ? ", " : "") + gp(tick(xcat, hx[i])) + " " + std::to_string(i);
    for (size_t i = 0; i < hy.size(); ++i)
      yt += (i ? ", " : "") + gp(tick(ycat, hy[i])) + " " + std::to_string(i);
    axes += "set xtics " + xt + ")\nset ytics " + yt + ")\n";
    axes += "set xrange [-0.5:" + format_double(double(hx.size()) - 0.5) + "]\n";
    axes += "set yrange [-0.5:" + format_double(double(hy.size()) - 0.5) + "]\n";
    axes += "unset grid\nset tics out nomirror\n";
    if (zcat.on()) {
      // One colour per category, evenly spread over a perceptually ordered palette.
      const size_t n = zcat.values.size();
      static const char* kColours[] = {"#440154", "#3b528b", "#21918c", "#5ec962",
                                       "#fde725", "#e66101", "#b2abd2", "#5e3c99"};
      axes += "set palette maxcolors " + std::to_string(n) + "\nset palette defined (";
      for (size_t i = 0; i < n; ++i)
        axes += (i ? ", " : "") + std::to_string(i) + " " + gp(kColours[i % 8]);
      if (n == 1) axes += ", 1 " + gp(kColours[0]);
      axes += ")\nset cbrange [-0.5:" + format_double(double(n) - 0.5) + "]\n";
      axes += "set cbtics " + zcat.tics() + "\nset cblabel " + gp(style.z) + "\n";
    } else {
      // Viridis by its five anchor colours: gnuplot 5.4 (Debian 12) has no `set palette viridis`.
      axes +=
          "set palette defined (0 '#440154', 1 '#3b528b', 2 '#21918c', 3 '#5ec962', 4 "
          "'#fde725')\nset cblabel " +
          gp(std::string(style.z) + " (mean)") + "\n";
      if (ylo <= yhi) axes += "set cbrange " + range(padded(ylo, yhi, false)) + "\n";
    }
  } else {
    const auto xr =
        xcat.on() ? std::make_pair(-0.5, double(xcat.values.size()) - 0.5) : padded(xlo, xhi, logx);
    const auto yr =
        ycat.on() ? std::make_pair(-0.5, double(ycat.values.size()) - 0.5) : padded(ylo, yhi, logy);
    axes += "set xrange " + range(xr) + "\nset yrange " + range(yr) + "\n";
    if (hist) axes += "set yrange [0:" + format_double(yhi * 1.08 + 0.5) + "]\n";
    if (xcat.on()) axes += "set xtics " + xcat.tics() + "\n";
    if (ycat.on()) axes += "set ytics " + ycat.tics() + "\n";
    if (logx) {
      axes += "set logscale x\n";
      // Under two decades a log axis has one or two labelled ticks: label the data's x instead.
      std::vector<double> xs;
      for (const auto& [k, rows] : data)
        for (const auto& p : rows) xs.push_back(p.x);
      std::sort(xs.begin(), xs.end());
      xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
      if (!hist && xhi < 100 * xlo && xs.size() <= 12) {
        axes += "set xtics (";
        for (size_t i = 0; i < xs.size(); ++i) axes += (i ? ", " : "") + format_double(xs[i]);
        axes += ")\n";
      }
    }
    if (logy) {
      axes += "set logscale y\n";
      // Under two decades a log axis labels one or two powers of ten: add 2 and 5 times them.
      if (yr.second < 100 * yr.first) {
        std::string t;
        for (int e = int(std::floor(std::log10(yr.first)));
             e <= int(std::ceil(std::log10(yr.second))); ++e)
          for (double m : {1.0, 2.0, 5.0}) {
            const double v = m * std::pow(10.0, e);
            if (v >= yr.first && v <= yr.second) t += (t.empty() ? "" : ", ") + format_double(v);
          }
        if (!t.empty()) axes += "set ytics (" + t + ")\n";
      }
    }
    // The band's lower edge, clipped to the bottom of the plot (log axes cannot show <= 0).
    axes +=
        "YFLOOR(v) = v > " + format_double(yr.first) + " ? v : " + format_double(yr.first) + "\n";
    axes += "set grid\n";
  }
  if (hist) axes += "set style fill transparent solid 0.3\n";

  std::string title = pd.title && *pd.title ? pd.title : pd.name;
  if (!fixed.empty()) title += " (" + fixed + ")";
  const std::string term = tool.terminal.empty() ? std::string("pngcairo") : tool.terminal;
  std::string g = "# " + std::string(pd.name) + ".png from " + pd.name +
                  ".dat; redraw with: gnuplot " + pd.name + ".gp\n";
  if (dropped) g += "# " + std::to_string(dropped) + " rows outside the declared categories\n";
  // The legend: one entry per series, never over the data (outside the plot, or a panel).
  const bool legend = !heatmap && (series_titles.size() > 1 || faceted);
  std::string keyentries;
  for (size_t si = 0; si < series_titles.size(); ++si) {
    std::string with = hist ? "histeps lw 2" : points ? "points ps 0.9" : "linespoints ps 0.7";
    keyentries += ", keyentry with " + with + series_style(si) + " title " + gp(series_titles[si]);
  }
  auto panel_labels = [&](size_t pi) {
    std::string s;
    for (const auto& l : cell_labels) {
      const auto f = split_list(l, '\x1f');
      if (f.size() == 4 && f[3] == std::to_string(pi))
        s += "set label " + gp(f[0]) + " at " + f[1] + "," + f[2] +
             " center front textcolor 'white' font ',9'\n";
    }
    return s;
  };
  if (!faceted) {
    g += "set terminal " + term + " size 960,640\n";
    g += "set termoption noenhanced\n";
    g += "set output " + gp(std::string(pd.name) + ".png") + "\n";
    g += "set title " + gp(title) + "\n";
    g += "set xlabel " + gp(xlabel) + "\nset ylabel " + gp(ylabel) + "\n" + axes;
    g += legend ? "set key outside right top vertical Left reverse samplen 2\n" : "unset key\n";
    g += panel_labels(0);
    g += "plot ";
    for (size_t i = 0; i < panel_plots[0].size(); ++i)
      g += (i ? ", \\\n     " : "") + panel_plots[0][i];
    if (legend) g += keyentries;
    g += "\n";
  } else {
    // Panels on a grid; the legend in a strip of its own on the right, never over data.
    const size_t panels = panel_values.size();
    size_t cols = style.facet_columns;
    if (cols == 0) cols = size_t(std::ceil(std::sqrt(double(panels))));
    cols = std::max<size_t>(1, std::min(cols, panels));
    const size_t rows = (panels + cols - 1) / cols;
    const size_t width = 380 * cols + (legend ? 240 : 0), height = 50 + 300 * rows;
    const double strip = legend ? 240.0 / double(width) : 0.0, top = 40.0 / double(height);
    const double pw = (1 - strip) / double(cols), ph = (1 - top) / double(rows);
    g += "# facets: " + std::to_string(panels) + " panels by " + facet_name + ", " +
         std::to_string(rows) + " rows x " + std::to_string(cols) + " columns\n";
    g += "set terminal " + term + " size " + std::to_string(width) + "," + std::to_string(height) +
         " font ',9'\n";
    g += "set termoption noenhanced\n";
    g += "set output " + gp(std::string(pd.name) + ".png") + "\n" + axes + "unset key\n";
    g += "set multiplot title " + gp(title) + " font ',11'\n";
    for (size_t pi = 0; pi < panels; ++pi) {
      const size_t r = pi / cols, c = pi % cols;
      g += "set origin " + format_double(double(c) * pw) + "," +
           format_double(1 - top - double(r + 1) * ph) + "\nset size " + format_double(pw) + "," +
           format_double(ph) + "\n";
      g += "set title " + gp(facet_name + " = " + panel_values[pi]) + "\n";
      // Axis titles on the bottom panel of each column and on the first column only.
      const bool bottom = pi + cols >= panels, left = c == 0;
      g += "set xlabel " + gp(bottom ? xlabel : "") + "\nset ylabel " + gp(left ? ylabel : "") +
           "\n";
      g += "unset label\n" + panel_labels(pi);
      g += "plot ";
      for (size_t i = 0; i < panel_plots[pi].size(); ++i)
        g += (i ? ", \\\n     " : "") + panel_plots[pi][i];
      g += "\n";
    }
    if (legend) {
      g += "# legend\nset origin " + format_double(1 - strip) + ",0\nset size " +
           format_double(strip) + "," + format_double(1 - top) + "\n";
      g += "unset label\nunset title\nunset xlabel\nunset ylabel\nunset grid\nunset border\n"
           "unset tics\nunset logscale\nunset colorbox\nset xrange [0:1]\nset yrange [0:1]\n"
           "set key center center vertical Left reverse samplen 2\n";
      g += "plot 2 notitle" + keyentries + "\n";
    }
    g += "unset multiplot\n";
  }

  const std::string base = fig_dir + "/" + pd.name;
  std::string why;
  if (!write_file_atomic(base + ".dat", dat, &why) || !write_file_atomic(base + ".gp", g, &why)) {
    res.note = "cannot write " + base + ".gp/.dat: " + why;
    return res;
  }
  if (tool.exe.empty()) {
    res.note = tool.why;
    return res;
  }
  const std::string log = base + ".log";
  const int rc = run_tool(tool.exe, {std::string(pd.name) + ".gp"}, fig_dir, log);
  std::string log_text;
  read_file(log, &log_text, nullptr);
  struct stat st;
  if (rc != 0 || ::stat((base + ".png").c_str(), &st) != 0 || st.st_size == 0) {
    const size_t nl = log_text.find('\n');
    res.note = "gnuplot failed (exit " + std::to_string(rc) + ")" +
               (log_text.empty() ? "" : ": " + log_text.substr(0, nl)) + ", see " + log;
    return res;
  }
  if (!png_complete(base + ".png")) {  // e.g. gnuplot ran out of disk space mid-file
    res.note = "cannot write " + base + ".png: the file gnuplot wrote is truncated (" +
               std::to_string(st.st_size) + " bytes, no PNG end chunk; disk full?)";
    std::remove((base + ".png").c_str());
    return res;
  }
  if (log_text.empty()) std::remove(log.c_str());  // keep only logs that say something
  res.png = base + ".png";
  if (dropped)
    res.note = std::to_string(dropped) + " rows outside the declared categories not drawn";
  return res;
}

}  // namespace

std::vector<FigureResult> render_figures(const pl_plugin& plugin, const std::string& out_dir,
                                         const std::map<std::string, std::string>& constants,
                                         std::string* tool_text, bool* have_tool) {
  std::vector<FigureResult> out;
  *have_tool = false;
  if (plugin.num_plots == 0) return out;
  const std::string fig_dir = out_dir + "/figures";
  ::mkdir(fig_dir.c_str(), 0755);
  const Tool tool = find_gnuplot(fig_dir);
  *have_tool = !tool.exe.empty();
  *tool_text = tool.exe.empty() ? tool.why : "gnuplot " + tool.version + " (" + tool.terminal + ")";
  for (uint32_t i = 0; i < plugin.num_plots; ++i)
    out.push_back(render_one(plugin.plots[i], out_dir, fig_dir, constants, tool));
  return out;
}

}  // namespace pl::driver
