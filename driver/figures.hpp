// SPDX-License-Identifier: Apache-2.0
// Figures: every plot a plugin declares (pl_plot_decl) becomes figures/<name>.png, drawn by
// gnuplot from figures/<name>.gp and figures/<name>.dat, which stay beside the PNG so that
// `cd figures && gnuplot <name>.gp` redraws it. `[run] figure_formats` adds <name>.pdf and
// <name>.svg, the same figure, each drawn from its own script <name>.pdf.gp, <name>.svg.gp. Line
// plots average the rows that share an x within a curve (e.g. over seeds) and draw mean +- standard
// error; PL_PLOT_POINTS plots every row; PL_PLOT_HISTOGRAM draws histograms of x per group. Without
// gnuplot the scripts are still written and the run still succeeds.
//
// `phaselab plot` draws series selected from the CSV tables of one or several run folders on one
// figure with the same code (docs/figures.md): FIG.png (or FIG.pdf, FIG.svg) with FIG.gp, FIG.dat
// and FIG.csv beside.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "phaselab_plugin.h"

namespace pl::driver {

struct FigureResult {
  std::string name;
  std::string png;   // path when drawn (a PNG; `phaselab plot` FIG.pdf or .svg), else empty
  std::string note;  // why it was not drawn (or "")
  // The other formats asked for (`[run] figure_formats`): the paths drawn (FIG.pdf, FIG.svg),
  // and why one was not ("pdf: gnuplot has no pdfcairo terminal"; "" when all were).
  std::vector<std::string> also;
  std::string also_note;
};

// The formats a figure can be drawn in, and whether `format` is one.
bool figure_format_known(const std::string& format);

// `constants`: values of the parameters that are not columns (not swept), for filters.
// `tool` receives "gnuplot <version> (<terminal>)" or why there is none; `have_tool` whether
// gnuplot was found.
// `title_note` ("partial: 12 of 20 points") is added to every figure's title.
// `formats`: the config's figure_formats ("png" first or not: the PNG is drawn first, then the
// others in the order given, each only if the PNG was drawn).
std::vector<FigureResult> render_figures(const pl_plugin& plugin, const std::string& out_dir,
                                         const std::map<std::string, std::string>& constants,
                                         std::string* tool, bool* have_tool,
                                         const std::string& title_note = "",
                                         const std::vector<std::string>& formats = {"png"});

// One SERIES of `phaselab plot`:
//   TABLE:x=COL:y=COL[,COL]:where=COL=V[,COL=V]:group=COL[,COL]:title=TEXT:style=KIND [OPTIONS]
// TABLE is a CSV file or a run folder (its results.csv). A colon starts a field only before one
// of the keys x=, y=, where=, group=, title=, style=, so titles and paths may hold colons.
struct SeriesSpec {
  std::string text;   // as given, for messages
  std::string table;  // CSV file or run folder
  std::string x;
  std::vector<std::string> ys;
  std::vector<std::pair<std::string, std::string>> where;  // every condition must hold
  std::vector<std::string> group;                          // one curve per distinct combination
  std::string title;            // {COL}: a group column's value; {param:NAME}: the run's parameter
  std::string style = "lines";  // lines, points, linespoints, mean
  std::string options;          // gnuplot options after the style's kind (lw 2 dt 3 lc rgb 'gray')
};
bool parse_series(const std::string& text, SeriesSpec* s, std::string* error);

struct PlotSpec {
  std::string
      out;  // FIG.png, FIG.pdf or FIG.svg; FIG.gp, FIG.dat and FIG.csv are written beside it
  std::string title, xlabel, ylabel;  // title: {param:NAME} from the first series' run
  bool logx = false, logy = false;
  std::vector<SeriesSpec> series;
  // Formats drawn beside `out`'s once it is drawn (a search figure under figure_formats): FIG.pdf
  // from FIG.pdf.gp, FIG.svg from FIG.svg.gp; the one of `out` itself is skipped.
  std::vector<std::string> also;
};

struct PlotOutcome {
  // 0: drawn, or gnuplot absent (figure.note says so; the data and script are written);
  // 2: a selection error (unreadable table, a column not in it, no rows at all);
  // 5: a file could not be written, or gnuplot failed.
  int status = 0;
  std::string error;                  // when status != 0
  std::vector<std::string> warnings;  // series that select no rows
  FigureResult figure;
  std::string tool;  // "gnuplot <version> (<terminal>)" or why there is none
};
PlotOutcome draw_plot(const PlotSpec& spec);

}  // namespace pl::driver
