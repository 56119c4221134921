#include "ir/errors.h"
#include "ir/shape_math.h"

#include <kiln/shape.h>

#include <algorithm>
#include <sstream>

namespace kiln {

Shape::Shape(std::initializer_list<int64_t> dims) {
  for (int64_t d : dims) push_back(d);
}
Shape::Shape(const std::vector<int64_t>& dims) {
  for (int64_t d : dims) push_back(d);
}

void Shape::push_back(int64_t v) {
  if (n_ >= kMaxRank)
    throw Error(fmt::format("[shape] rank above the maximum of {} dimensions", kMaxRank));
  d_[n_++] = v;
}

void Shape::resize(int n, int64_t fill) {
  if (n > kMaxRank)
    throw Error(fmt::format("[shape] rank {} above the maximum of {}", n, kMaxRank));
  for (int i = n_; i < n; ++i) d_[i] = fill;
  n_ = n;
}

void Shape::insert(int pos, int64_t v) {
  push_back(0);
  for (int i = n_ - 1; i > pos; --i) d_[i] = d_[i - 1];
  d_[pos] = v;
}

void Shape::erase(int pos) {
  for (int i = pos; i + 1 < n_; ++i) d_[i] = d_[i + 1];
  --n_;
}

std::string Shape::str() const {
  std::string s = "(";
  for (int i = 0; i < n_; ++i) {
    if (i) s += ", ";
    s += std::to_string(d_[i]);
  }
  if (n_ == 1) s += ",";
  return s + ")";
}

std::ostream& operator<<(std::ostream& os, const Shape& s) {
  return os << s.str();
}

namespace detail {

void fail_extents(const char* op, const Shape& s, DType dt) {
  check_dtype(op, dt);
  for (int64_t e : s)
    if (e < 0) fail(op, "negative extent {} in shape {}", e, s);
  fail(op, "shape {} of {} is too large: its size in bytes does not fit in 64 bits", s,
       dtype_name(dt));
}

void check_dtype(const char* op, DType dt) {
  if (static_cast<unsigned>(dt) >= static_cast<unsigned>(kNumDTypes))
    fail(op, "invalid dtype (value {})", static_cast<unsigned>(dt));
}

} // namespace detail

} // namespace kiln
