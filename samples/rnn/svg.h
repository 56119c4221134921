#pragma once
// A small self-contained SVG line-chart writer (no libraries): panels stacked vertically, each
// with axes, ticks, grid, axis labels, a legend, and linear or log-scale y.
#include <string>
#include <vector>

namespace rnn::svg {

struct Series {
  std::string label;
  std::string color; // any SVG colour: "#1f77b4"
  std::vector<double> x, y;
  bool markers = false; // draw a dot at each point (always for a one-point series)
  bool dashed = false;
};

struct Panel {
  std::string title, x_label, y_label;
  bool log_y = false; // non-positive values are left out on a log scale
  std::vector<Series> series;
};

/// The SVG document: `title` on top, then the panels.
std::string render(const std::string& title, const std::vector<Panel>& panels);

/// Writes render(...) to path (through a temporary file, so a reader never sees half a file).
void write(const std::string& path, const std::string& title, const std::vector<Panel>& panels);

} // namespace rnn::svg
