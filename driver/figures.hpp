// SPDX-License-Identifier: Apache-2.0
// Figures: every plot a plugin declares (pl_plot_decl) becomes figures/<name>.png, drawn by
// gnuplot from figures/<name>.gp and figures/<name>.dat, which stay beside the PNG so that
// `cd figures && gnuplot <name>.gp` redraws it. Line plots average the rows that share an x
// within a curve (e.g. over seeds) and draw mean +- standard error; PL_PLOT_POINTS plots every
// row; PL_PLOT_HISTOGRAM draws histograms of x per group. Without gnuplot the scripts are still
// written and the run still succeeds.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "phaselab_plugin.h"

namespace pl::driver {

struct FigureResult {
  std::string name;
  std::string png;   // path when drawn, else empty
  std::string note;  // why it was not drawn (or "")
};

// `constants`: values of the parameters that are not columns (not swept), for filters.
// `tool` receives "gnuplot <version> (<terminal>)" or why there is none; `have_tool` whether
// gnuplot was found.
std::vector<FigureResult> render_figures(const pl_plugin& plugin, const std::string& out_dir,
                                         const std::map<std::string, std::string>& constants,
                                         std::string* tool, bool* have_tool);

}  // namespace pl::driver
