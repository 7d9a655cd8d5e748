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

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = std::min(s.find(sep, start), s.size());
    std::string part = s.substr(start, end - start);
    const size_t a = part.find_first_not_of(' '), b = part.find_last_not_of(' ');
    if (a != std::string::npos) out.push_back(part.substr(a, b - a + 1));
    start = end + 1;
  }
  return out;
}

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
  for (const auto& dir : split(path, ':')) {
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

struct Curve {
  std::string title;
  std::vector<std::pair<double, double>> xy;  // raw rows
};

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

FigureResult render_one(const pl_plot_decl& pd, const std::string& out_dir,
                        const std::string& fig_dir,
                        const std::map<std::string, std::string>& constants, const Tool& tool) {
  FigureResult res;
  res.name = pd.name;
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
  const bool hist = pd.flags & PL_PLOT_HISTOGRAM;
  const bool logx = pd.flags & PL_PLOT_LOGX, logy = pd.flags & PL_PLOT_LOGY;
  const int xc = col(pd.x);
  if (xc < 0) {
    res.note = std::string("column ") + pd.x + " is not in " + pd.table +
               ".csv (sweep it to get this figure)";
    return res;
  }
  std::vector<std::pair<std::string, int>> ys;  // (name, column)
  if (!hist) {
    for (const auto& y : split(pd.y ? pd.y : "", ','))
      if (col(y) >= 0) ys.push_back({y, col(y)});
    if (ys.empty()) {
      res.note = std::string("none of the y columns (") + (pd.y ? pd.y : "") + ") is in " +
                 pd.table + ".csv";
      return res;
    }
  } else {
    ys.push_back({pd.x, xc});
  }
  // Filters on columns, or on constant parameters (not swept, so not columns).
  std::vector<std::pair<int, std::string>> filters;
  for (const auto& f : split(pd.filter ? pd.filter : "", ',')) {
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
  std::vector<int> groups;
  std::string fixed;  // group_by parameters that are constant in this run
  for (const auto& g : split(pd.group_by ? pd.group_by : "", ',')) {
    if (col(g) >= 0)
      groups.push_back(col(g));
    else if (constants.count(g))
      fixed += (fixed.empty() ? "" : ", ") + g + "=" + constants.at(g);
  }
  // One curve per (group value, y column), in order of first appearance.
  std::vector<Curve> curves;
  std::vector<std::string> curve_keys;
  for (size_t r = 1; r < recs.size(); ++r) {
    const auto& rec = recs[r];
    if (rec.size() != header.size()) continue;
    bool keep = true;
    for (const auto& [c, v] : filters) keep = keep && same_cell(rec[size_t(c)], v);
    if (!keep) continue;
    std::string glabel;
    for (int g : groups)
      glabel += (glabel.empty() ? "" : ", ") + header[size_t(g)] + "=" + rec[size_t(g)];
    double x;
    if (!number(rec[size_t(xc)], &x) || !std::isfinite(x) || (logx && x <= 0)) continue;
    for (const auto& [yname, yc] : ys) {
      double y = 0;
      if (!hist && (!number(rec[size_t(yc)], &y) || !std::isfinite(y) || (logy && y <= 0)))
        continue;
      const std::string key = glabel + "\x1f" + yname;
      auto it = std::find(curve_keys.begin(), curve_keys.end(), key);
      if (it == curve_keys.end()) {
        curve_keys.push_back(key);
        std::string title = glabel;
        if (ys.size() > 1 || title.empty()) title += (title.empty() ? "" : " ") + yname;
        curves.push_back({title, {}});
        it = curve_keys.end() - 1;
      }
      curves[size_t(it - curve_keys.begin())].xy.push_back({x, y});
    }
  }
  if (curves.empty()) {
    res.note = "no rows to plot (after filters and, for log axes, dropping values <= 0)";
    return res;
  }

  // Data file: one block per curve, separated by two blank lines (gnuplot `index`).
  std::string dat =
      "# " + std::string(pd.name) + ": from " + pd.table + ".csv, written by phaselab\n";
  std::vector<std::string> plots;
  bool any_errorbars = false;
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& c : curves)
    for (const auto& p : c.xy) lo = std::min(lo, p.first), hi = std::max(hi, p.first);
  for (size_t i = 0; i < curves.size(); ++i) {
    const Curve& c = curves[i];
    dat += "# " + c.title + "\n";
    std::string style;
    if (hist) {
      // Shared bins over all groups (log-spaced on a log x axis).
      const int nb = 30;
      std::vector<size_t> count(nb, 0);
      auto t = [&](double v) { return logx ? std::log(v) : v; };
      const double a = t(lo), b = t(hi), w = b > a ? (b - a) / nb : 1.0;
      for (const auto& p : c.xy) count[size_t(std::clamp(int((t(p.first) - a) / w), 0, nb - 1))]++;
      for (int k = 0; k < nb; ++k) {
        const double mid = a + (k + 0.5) * w;
        dat += format_double(logx ? std::exp(mid) : mid) + " " + std::to_string(count[size_t(k)]) +
               "\n";
      }
      style = "using 1:2 with histeps lw 2";
    } else if (pd.flags & PL_PLOT_POINTS) {
      for (const auto& p : c.xy)
        dat += format_double(p.first) + " " + format_double(p.second) + "\n";
      style = "using 1:2 with points ps 0.8";
    } else {
      const auto agg = aggregate(c.xy);
      bool errs = false;
      for (const auto& a : agg) {
        dat += format_double(a.x) + " " + format_double(a.mean) + " " + format_double(a.se) + " " +
               std::to_string(a.n) + "\n";
        errs = errs || a.n > 1;
      }
      any_errorbars = any_errorbars || errs;
      style = errs ? "using 1:2:3 with yerrorlines ps 0.7" : "using 1:2 with linespoints ps 0.7";
    }
    dat += "\n\n";
    // gnuplot cycles 8 colours; beyond 8 curves the dash and marker change too.
    static const int kMarkers[] = {7, 5, 9, 13, 11, 15};
    const size_t cycle = i / 8;
    style += " lc " + std::to_string(1 + i % 8) + " dt " + std::to_string(1 + cycle % 5);
    if (!hist) style += " pt " + std::to_string(kMarkers[cycle % 6]);
    plots.push_back(gp(std::string(pd.name) + ".dat") + " index " + std::to_string(i) + " " +
                    style + " title " + gp(c.title));
  }

  std::string title = pd.title && *pd.title ? pd.title : pd.name;
  if (!fixed.empty()) title += " (" + fixed + ")";
  std::string ylabel = hist ? "count" : "";
  if (!hist)
    for (size_t i = 0; i < ys.size(); ++i) ylabel += (i ? ", " : "") + ys[i].first;
  if (any_errorbars) ylabel += " (mean +- s.e.)";
  std::string g = "# " + std::string(pd.name) + ".png from " + pd.name +
                  ".dat; redraw with: gnuplot " + pd.name + ".gp\n";
  g += "set terminal " + (tool.terminal.empty() ? std::string("pngcairo") : tool.terminal) +
       " size 960,640\n";
  g += "set termoption noenhanced\n";
  g += "set output " + gp(std::string(pd.name) + ".png") + "\n";
  g += "set title " + gp(title) + "\n";
  g += "set xlabel " + gp(pd.x) + "\nset ylabel " + gp(ylabel) + "\n";
  g += "set grid\nset key " + std::string(curves.size() > 8 ? "outside right top" : "top right") +
       " box opaque\n";
  if (logx) g += "set logscale x\n";
  if (logy) g += "set logscale y\n";
  if (hist) g += "set style fill transparent solid 0.3\n";
  g += "plot ";
  for (size_t i = 0; i < plots.size(); ++i) g += (i ? ", \\\n     " : "") + plots[i];
  g += "\n";

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
  if (log_text.empty()) std::remove(log.c_str());  // keep only logs that say something
  res.png = base + ".png";
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
