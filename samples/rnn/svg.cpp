#include "svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace rnn::svg {

namespace {

constexpr double kWidth = 960, kPanelHeight = 360, kTitleHeight = 40;
constexpr double kLeft = 85, kRight = 25, kTop = 36, kBottom = 56;

struct Box {
  double x, y, w, h;
};

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double v) { lo = std::min(lo, v), hi = std::max(hi, v); }
  bool empty() const { return !(lo <= hi); }
  double span() const { return hi - lo; }
};

/// A panel's axes: the plotted values (log10 of y on a log scale) and where they land.
struct Axes {
  Box box;
  Range x, y;
  bool log_y;
  double px(double v) const { return box.x + (v - x.lo) / x.span() * box.w; }
  double py(double v) const { return box.y + box.h - (v - y.lo) / y.span() * box.h; }
};

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

std::string label(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", std::abs(v) < 1e-12 ? 0.0 : v);
  return buf;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '&')
      out += "&amp;";
    else if (c == '<')
      out += "&lt;";
    else if (c == '>')
      out += "&gt;";
    else if (c == '"')
      out += "&quot;";
    else
      out += c;
  }
  return out;
}

std::string text(double x, double y, const std::string& s, const char* anchor = "middle",
                 int size = 12, const std::string& extra = "") {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" text-anchor=\"" + anchor +
         "\" font-size=\"" + std::to_string(size) + "\"" + extra + ">" + escape(s) + "</text>\n";
}

std::string line(double x1, double y1, double x2, double y2, const std::string& style) {
  return "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" +
         num(y2) + "\" " + style + "/>\n";
}

// The value plotted for y, or NaN when a log scale cannot show it.
double plotted_y(double y, bool log_y) {
  if (!std::isfinite(y)) return NAN;
  if (!log_y) return y;
  return y > 0 ? std::log10(y) : NAN;
}

// Ranges over every plotted point, padded by 4% (and widened when flat).
void fit_ranges(const Panel& p, Axes& a) {
  for (const Series& s : p.series)
    for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
      const double y = plotted_y(s.y[i], p.log_y);
      if (std::isnan(y) || !std::isfinite(s.x[i])) continue;
      a.x.add(s.x[i]);
      a.y.add(y);
    }
  if (a.x.empty()) a.x = {0, 1};
  if (a.y.empty()) a.y = {0, 1};
  if (a.x.span() == 0) a.x = {a.x.lo - 1, a.x.hi + 1};
  if (a.y.span() == 0) a.y = {a.y.lo - 0.5, a.y.hi + 0.5};
  const double pad = a.y.span() * 0.04;
  a.y = {a.y.lo - pad, a.y.hi + pad};
}

// Ticks at 1, 2 or 5 times a power of ten, about five across the range.
std::vector<double> linear_ticks(const Range& r) {
  const double raw = r.span() / 5, mag = std::pow(10, std::floor(std::log10(raw)));
  const double norm = raw / mag, step = (norm < 1.5   ? 1
                                         : norm < 3.5 ? 2
                                         : norm < 7.5 ? 5
                                                      : 10) *
                                        mag;
  std::vector<double> ticks;
  for (double t = std::ceil(r.lo / step) * step; t <= r.hi + step * 1e-9; t += step)
    ticks.push_back(t);
  return ticks;
}

// Ticks (in log10 units) at powers of ten; at 1-2-5 or every digit when that gives too few.
std::vector<double> log_ticks(const Range& r) {
  const std::vector<std::vector<double>> mantissas = {{1}, {1, 2, 5}, {1, 2, 3, 4, 5, 6, 7, 8, 9}};
  std::vector<double> ticks;
  for (const std::vector<double>& ms : mantissas) {
    ticks.clear();
    for (double d = std::floor(r.lo); d <= std::ceil(r.hi); ++d)
      for (double m : ms) {
        const double t = d + std::log10(m);
        if (t >= r.lo && t <= r.hi) ticks.push_back(t);
      }
    if (ticks.size() >= 3) break;
  }
  return ticks;
}

std::string grid_and_ticks(const Axes& a) {
  const char* grid = "stroke=\"#e4e4e4\" stroke-width=\"1\"";
  std::string out;
  for (double t : linear_ticks(a.x)) {
    out += line(a.px(t), a.box.y, a.px(t), a.box.y + a.box.h, grid);
    out += text(a.px(t), a.box.y + a.box.h + 16, label(t));
  }
  for (double t : a.log_y ? log_ticks(a.y) : linear_ticks(a.y)) {
    out += line(a.box.x, a.py(t), a.box.x + a.box.w, a.py(t), grid);
    out += text(a.box.x - 6, a.py(t) + 4, label(a.log_y ? std::pow(10, t) : t), "end");
  }
  return out;
}

std::string frame(const Panel& p, const Axes& a) {
  const Box& b = a.box;
  std::string out = "<rect x=\"" + num(b.x) + "\" y=\"" + num(b.y) + "\" width=\"" + num(b.w) +
                    "\" height=\"" + num(b.h) + "\" fill=\"none\" stroke=\"#444\"/>\n";
  out += text(b.x + b.w / 2, b.y - 12, p.title, "middle", 14, " font-weight=\"bold\"");
  out += text(b.x + b.w / 2, b.y + b.h + 38, p.x_label, "middle", 13);
  const std::string cx = num(b.x - 62), cy = num(b.y + b.h / 2);
  out += text(b.x - 62, b.y + b.h / 2, p.y_label + (p.log_y ? " (log scale)" : ""), "middle", 13,
              " transform=\"rotate(-90 " + cx + " " + cy + ")\"");
  return out;
}

std::string series_path(const Series& s, const Axes& a) {
  std::string points, dots;
  size_t n = 0;
  for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i) {
    const double y = plotted_y(s.y[i], a.log_y);
    if (std::isnan(y) || !std::isfinite(s.x[i])) continue;
    const std::string px = num(a.px(s.x[i])), py = num(a.py(y));
    points += px + "," + py + " ";
    dots += "<circle cx=\"" + px + "\" cy=\"" + py + "\" r=\"3\" fill=\"" + s.color + "\"/>\n";
    ++n;
  }
  std::string out;
  const std::string dash = s.dashed ? " stroke-dasharray=\"6 4\"" : "";
  if (n > 1)
    out += "<polyline fill=\"none\" stroke=\"" + s.color + "\" stroke-width=\"1.6\"" + dash +
           " stroke-linejoin=\"round\" points=\"" + points + "\"/>\n";
  if (s.markers || n == 1) out += dots;
  return out;
}

std::string legend(const std::vector<Series>& series, const Box& b) {
  size_t longest = 0;
  for (const Series& s : series) longest = std::max(longest, s.label.size());
  const double w = 50 + 6.6 * double(longest), row = 18, h = row * double(series.size()) + 8;
  const double x = b.x + b.w - w - 8, y = b.y + 8;
  std::string out = "<rect x=\"" + num(x) + "\" y=\"" + num(y) + "\" width=\"" + num(w) +
                    "\" height=\"" + num(h) + "\" fill=\"white\" fill-opacity=\"0.85\" " +
                    "stroke=\"#bbb\"/>\n";
  for (size_t i = 0; i < series.size(); ++i) {
    const double ly = y + 4 + row * (double(i) + 0.5);
    const std::string dash = series[i].dashed ? " stroke-dasharray=\"6 4\"" : "";
    out += line(x + 8, ly, x + 32, ly,
                "stroke=\"" + series[i].color + "\" stroke-width=\"2.5\"" + dash);
    out += text(x + 40, ly + 4, series[i].label, "start");
  }
  return out;
}

std::string render_panel(const Panel& p, double top) {
  Axes a{
      {kLeft, top + kTop, kWidth - kLeft - kRight, kPanelHeight - kTop - kBottom}, {}, {}, p.log_y};
  fit_ranges(p, a);
  std::string out = grid_and_ticks(a) + frame(p, a);
  for (const Series& s : p.series) out += series_path(s, a);
  if (!p.series.empty()) out += legend(p.series, a.box);
  return out;
}

} // namespace

std::string render(const std::string& title, const std::vector<Panel>& panels) {
  const double height = kTitleHeight + kPanelHeight * double(panels.size());
  std::ostringstream out;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << num(kWidth) << "\" height=\""
      << num(height) << "\" viewBox=\"0 0 " << num(kWidth) << " " << num(height)
      << "\" font-family=\"sans-serif\">\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << text(kWidth / 2, 26, title, "middle", 16, " font-weight=\"bold\"");
  for (size_t i = 0; i < panels.size(); ++i)
    out << render_panel(panels[i], kTitleHeight + kPanelHeight * double(i));
  out << "</svg>\n";
  return out.str();
}

void write(const std::string& path, const std::string& title, const std::vector<Panel>& panels) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp);
    f << render(title, panels);
    if (!f) throw std::runtime_error("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path);
}

} // namespace rnn::svg
