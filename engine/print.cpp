// operator<< for Tensor: PyTorch-like repr, abbreviated (first and last 3 per dim) past 1000
// elements.
#include "engine/graph.h"

#include <kiln/tensor.h>

#include <fmt/format.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace kiln {

namespace {

struct Printer {
  const Shape& shape;
  bool summarize;
  std::function<std::string(int64_t)> cell; // formats element i (row-major)
  size_t width = 0;
  bool measuring = true; // first pass: find the widest shown cell; second: write
  std::string out;

  void dim(int d, int64_t base, int indent) {
    if (d == shape.size()) {
      std::string c = cell(base);
      if (measuring)
        width = std::max(width, c.size());
      else
        out += std::string(width - c.size(), ' ') + c;
      return;
    }
    out += '[';
    int64_t n = shape[d];
    int64_t stride = 1;
    for (int k = d + 1; k < shape.size(); ++k) stride *= shape[k];
    for (int64_t i = 0; i < n; ++i) {
      if (summarize && n > 6 && i == 3) {
        out += d + 1 == shape.size() ? "..., " : "...,\n" + std::string(indent + 1, ' ');
        i = n - 3;
      }
      dim(d + 1, base + i * stride, indent + 1);
      if (i + 1 < n) {
        out += ',';
        out += d + 1 == shape.size()
                   ? std::string(" ")
                   : std::string(shape.size() - d - 1, '\n') + std::string(indent + 1, ' ');
      }
    }
    out += ']';
  }
};

std::string format_float(double v, bool all_int, bool sci) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (sci) return fmt::format("{:.4e}", v);
  if (all_int) return fmt::format("{:.0f}.", v);
  return fmt::format("{:.4f}", v);
}

} // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "tensor(undefined)";
  const Shape& shape = t.shape();
  bool summarize = t.numel() > 1000;
  Printer p{shape, summarize, {}, 0, true, {}};
  DType dt = t.dtype();
  std::vector<double> fv;
  std::vector<int64_t> iv;
  bool all_int = true, sci = false;
  if (is_floating(dt)) {
    fv = t.to_vector<double>();
    double amax = 0, amin = INFINITY;
    for (double x : fv)
      if (std::isfinite(x)) {
        all_int = all_int && x == std::floor(x);
        amax = std::max(amax, std::fabs(x));
        if (x != 0) amin = std::min(amin, std::fabs(x));
      }
    sci = amax >= 1e8 || (!all_int && amin < 1e-4);
    p.cell = [&](int64_t i) { return format_float(fv[i], all_int, sci); };
  } else {
    iv = t.to_vector<int64_t>();
    if (dt == DType::boolean)
      p.cell = [&](int64_t i) { return std::string(iv[i] ? "True" : "False"); };
    else
      p.cell = [&](int64_t i) { return std::to_string(iv[i]); };
  }
  p.dim(0, 0, 7);
  p.measuring = false;
  p.out = "tensor(";
  p.dim(0, 0, 7);
  os << p.out << ", shape=" << shape << ", dtype=" << dt << ", device=" << t.device() << ")";
  return os;
}

} // namespace kiln
