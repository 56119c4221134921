// The program generator (program.h). Ops are drawn from the whole public catalogue; an op
// call that kiln rejects (kiln::Error) is skipped, and counted, in every run alike.
#include "program.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>

namespace kfuzz {
namespace {

using kiln::DType;
using kiln::Shape;
using kiln::Tensor;

class Rng {
public:
  explicit Rng(uint64_t seed) : g_(seed * 0x9E3779B97F4A7C15ull + 1) {}
  int below(int n) { return static_cast<int>(g_() % static_cast<uint64_t>(n)); }
  bool chance(int percent) { return below(100) < percent; }
  template <class T> const T& pick(const std::vector<T>& v) { return v[below(int(v.size()))]; }

private:
  std::mt19937_64 g_;
};

double eps(DType t) {
  switch (t) {
  case DType::f64:
    return 0x1p-53;
  case DType::f32:
    return 0x1p-24;
  case DType::f16:
    return 0x1p-11;
  case DType::bf16:
    return 0x1p-8;
  default:
    return 0; // integers and bools round nothing (their values stay small)
  }
}

std::string str(const Shape& s) {
  std::string r = "Shape{";
  for (int i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "}";
}

std::string str(DType t) {
  return std::string("DType::") + (t == DType::boolean ? "boolean" : kiln::dtype_name(t));
}

std::string str(const std::vector<int>& v) {
  std::string r = "{";
  for (size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + std::to_string(v[i]);
  return r + "}";
}

// How a result's bounds follow from its operands'.
struct Bounds {
  bool checked = true;
  double mag = 0, err = 0;
};

Bounds unchecked() {
  return {false, 0, 0};
}

class Builder {
public:
  Builder(uint64_t seed, const RunOptions& opt) : rng_(seed), opt_(opt) {}

  Outcome run() {
    const int inputs = 1 + rng_.below(3), ops = 1 + rng_.below(10);
    base_ = random_shape();
    for (int i = 0; i < inputs; ++i) add_input(operand_shape(), logical_dtype());
    for (int i = 0; i < ops; ++i) step();
    Outcome out;
    for (Value& v : vals_) kiln::eval(v.t);
    out.outputs = std::move(vals_);
    out.code = code_.str();
    out.errors = errors_;
    return out;
  }

private:
  Rng rng_;
  RunOptions opt_;
  Shape base_;
  std::vector<Value> vals_;
  std::ostringstream code_;
  int next_ = 0, errors_ = 0;

  // ---- shapes, dtypes, inputs ----------------------------------------------------------------
  Shape random_shape() {
    static const std::vector<int64_t> extents = {1, 2, 3, 4, 5, 7, 8};
    Shape s;
    for (int r = rng_.below(4); r > 0; --r) s.push_back(rng_.chance(3) ? 0 : rng_.pick(extents));
    return s;
  }
  // The base shape with some dims 1 and some leading dims dropped: broadcasts with the base.
  Shape operand_shape() {
    Shape s;
    for (int i = rng_.below(base_.size() + 1); i < base_.size(); ++i)
      s.push_back(rng_.chance(30) ? 1 : base_[i]);
    return s;
  }
  DType logical_dtype() {
    static const std::vector<DType> all = {DType::f32,  DType::f32, DType::f64, DType::f16,
                                           DType::bf16, DType::i32, DType::i64, DType::boolean};
    return rng_.pick(all);
  }
  DType real(DType logical) const {
    return opt_.reference && kiln::is_floating(logical) ? DType::f64 : logical;
  }

  // Inputs are k/64 in [-2, 2] (exact in every floating dtype) or small integers.
  void add_input(const Shape& s, DType logical) {
    std::vector<double> data(static_cast<size_t>(s.numel()));
    double mag = 0;
    for (double& x : data) {
      x = logical == DType::boolean    ? rng_.below(2)
          : kiln::is_floating(logical) ? (rng_.below(257) - 128) / 64.0
                                       : rng_.below(13) - 6;
      mag = std::max(mag, std::abs(x));
    }
    Tensor t = kiln::cast(kiln::from_vector<double>(data, s, opt_.device), real(logical));
    std::ostringstream c;
    c.precision(17); // exact: the reproducer must rebuild the same inputs
    c << "kiln::cast(kiln::from_vector<double>({";
    for (size_t i = 0; i < data.size(); ++i) c << (i ? ", " : "") << data[i];
    c << "}, " << str(s) << "), " << str(logical) << ")";
    push(t, c.str(), {true, mag, 0});
  }

  void push(Tensor t, const std::string& expr, Bounds b) {
    Value v;
    v.name = "v" + std::to_string(next_++);
    v.t = std::move(t);
    v.checked = b.checked && std::isfinite(b.mag) && std::isfinite(b.err) && b.mag < 1e30;
    v.mag = b.mag;
    v.err = b.err;
    code_ << "Tensor " << v.name << " = " << expr << ";\n";
    vals_.push_back(std::move(v));
  }

  // Records one op; a kiln::Error skips it (the same in every run of the seed).
  void apply(const std::string& expr, const std::function<Tensor()>& op,
             const std::function<Bounds(DType)>& bounds) {
    try {
      Tensor t = op();
      push(t, expr, bounds(t.dtype()));
    } catch (const kiln::Error& e) {
      ++errors_;
      code_ << "// throws: " << expr << "\n";
    }
  }

  Value& any() { return vals_[rng_.below(int(vals_.size()))]; }
  // A value whose shape broadcasts with a's, else a itself.
  Value& partner(const Value& a) {
    std::vector<Value*> ok;
    for (Value& v : vals_)
      if (broadcasts(a.t.shape(), v.t.shape())) ok.push_back(&v);
    return ok.empty() ? const_cast<Value&>(a) : *ok[rng_.below(int(ok.size()))];
  }
  static bool broadcasts(const Shape& a, const Shape& b) {
    for (int i = 1; i <= std::min(a.size(), b.size()); ++i) {
      int64_t x = a[a.size() - i], y = b[b.size() - i];
      if (x != y && x != 1 && y != 1) return false;
    }
    return true;
  }

  // ---- the op mix ---------------------------------------------------------------------------
  void step() {
    const int r = rng_.below(100);
    if (r < 18) return unary();
    if (r < 36) return binary();
    if (r < 44) return binary_scalar();
    if (r < 50) return compare_where();
    if (r < 55) return cast();
    if (r < 70) return view();
    if (r < 80) return reduce();
    if (r < 88) return matmul();
    if (r < 92) return normalize();
    if (r < 95) return eval_some();
    if (r < 97) return index();
    return drop();
  }

  void unary();
  void binary();
  void binary_scalar();
  void compare_where();
  void cast();
  void view();
  void reduce();
  void matmul();
  void normalize();
  void index();
  void eval_some() {
    Value& a = any();
    kiln::eval(a.t);
    code_ << "kiln::eval(" << a.name << ");\n";
  }
  void drop() {
    if (vals_.size() < 2) return;
    size_t i = size_t(rng_.below(int(vals_.size())));
    code_ << "// " << vals_[i].name << " dropped\n";
    vals_.erase(vals_.begin() + long(i));
  }
};

void Builder::unary() {
  using Fn = Tensor (*)(const Tensor&);
  struct U {
    const char* name;
    Fn fn;
    int kind; // 0 exact (mag, err kept), 1 bounded by 1 (Lipschitz <= 1), 2 gelu, 3 unchecked
  };
  static const std::vector<U> ops = {
      {"neg", kiln::neg, 0},         {"abs", kiln::abs, 0},
      {"relu", kiln::relu, 0},       {"tanh", kiln::tanh, 1},
      {"sigmoid", kiln::sigmoid, 1}, {"sin", kiln::sin, 1},
      {"cos", kiln::cos, 1},         {"gelu", kiln::gelu, 2},
      {"exp", kiln::exp, 3},         {"log", kiln::log, 3},
      {"log1p", kiln::log1p, 3},     {"sqrt", kiln::sqrt, 3},
      {"rsqrt", kiln::rsqrt, 3},     {"logical_not", kiln::logical_not, 0}};
  const U& u = rng_.pick(ops);
  const Value a = any();
  apply(
      std::string("kiln::") + u.name + "(" + a.name + ")", [&] { return u.fn(a.t); },
      [&](DType out) -> Bounds {
        if (!a.checked || u.kind == 3) return unchecked();
        if (std::string(u.name) == "logical_not") // flips where a rounding error crosses 0
          return {a.err == 0, 1, 0};
        if (u.kind == 0) return {true, a.mag, a.err};
        if (u.kind == 1) return {true, 1, a.err + 4 * eps(out)};
        return {true, a.mag, 1.2 * a.err + 4 * eps(out) * a.mag};
      });
}

void Builder::binary() {
  using Fn = Tensor (*)(const Tensor&, const Tensor&);
  struct B {
    const char* name;
    Fn fn;
    int kind; // 0 add/sub, 1 mul, 2 max/min, 3 unchecked, 4 logical (bools)
  };
  static const std::vector<B> ops = {{"add", kiln::add, 0},
                                     {"sub", kiln::sub, 0},
                                     {"mul", kiln::mul, 1},
                                     {"maximum", kiln::maximum, 2},
                                     {"minimum", kiln::minimum, 2},
                                     {"div", kiln::div, 3},
                                     {"pow", kiln::pow, 3},
                                     {"logical_and", kiln::logical_and, 4},
                                     {"logical_or", kiln::logical_or, 4}};
  const B& o = rng_.pick(ops);
  const Value a = any(), b = partner(a);
  apply(
      std::string("kiln::") + o.name + "(" + a.name + ", " + b.name + ")",
      [&] { return o.fn(a.t, b.t); },
      [&](DType out) -> Bounds {
        if (!a.checked || !b.checked || o.kind == 3) return unchecked();
        // Each operand may first round to the result's dtype (a wider 0-d operand), then the
        // result rounds: e per step.
        const double e = eps(out);
        switch (o.kind) {
        case 0: {
          double mag = a.mag + b.mag;
          return {true, mag, a.err + b.err + 2 * e * mag};
        }
        case 1: {
          double mag = a.mag * b.mag;
          return {true, mag, a.err * b.mag + b.err * a.mag + a.err * b.err + 3 * e * mag};
        }
        case 2: {
          double mag = std::max(a.mag, b.mag);
          return {true, mag, std::max(a.err, b.err) + e * mag};
        }
        default:
          return {a.err == 0 && b.err == 0, 1, 0};
        }
      });
}

void Builder::binary_scalar() {
  const Value a = any();
  // k/8 is exact in every floating dtype; small integers fit every integer dtype.
  const bool integral = rng_.chance(50);
  const double s = integral ? rng_.below(7) - 3 : (rng_.below(33) - 16) / 8.0;
  kiln::Scalar sc = integral ? kiln::Scalar(int64_t(s)) : kiln::Scalar(s);
  const std::string lit = integral ? std::to_string(int64_t(s)) : std::to_string(s);
  const int op = rng_.below(4);
  static const char* names[] = {"add", "mul", "rsub", "maximum"};
  apply(
      std::string("kiln::") + names[op] + "(" + a.name + ", " + lit + ")",
      [&] {
        switch (op) {
        case 0:
          return kiln::add(a.t, sc);
        case 1:
          return kiln::mul(a.t, sc);
        case 2:
          return kiln::rsub(a.t, sc);
        default:
          return kiln::maximum(a.t, sc);
        }
      },
      [&](DType out) -> Bounds {
        if (!a.checked) return unchecked();
        const double as = std::abs(s), e = eps(out);
        if (op == 1) return {true, a.mag * as, a.err * as + 2 * e * a.mag * as};
        if (op == 3) return {true, std::max(a.mag, as), a.err + e * a.mag};
        return {true, a.mag + as, a.err + 2 * e * (a.mag + as)};
      });
}

void Builder::compare_where() {
  const Value a = any(), b = partner(a);
  static const char* names[] = {"lt", "le", "eq", "ne"};
  const int op = rng_.below(4);
  const std::string cmp = std::string("kiln::") + names[op] + "(" + a.name + ", " + b.name + ")";
  auto compare = [&] {
    switch (op) {
    case 0:
      return kiln::lt(a.t, b.t);
    case 1:
      return kiln::le(a.t, b.t);
    case 2:
      return kiln::eq(a.t, b.t);
    default:
      return kiln::ne(a.t, b.t);
    }
  };
  // A comparison is exact only when both operands are: a rounding error may flip it.
  const bool exact = a.checked && b.checked && a.err == 0 && b.err == 0;
  if (rng_.chance(50)) return apply(cmp, compare, [&](DType) { return Bounds{exact, 1, 0}; });
  const Value c = partner(a);
  apply(
      "kiln::where(" + cmp + ", " + a.name + ", " + c.name + ")",
      [&] { return kiln::where(compare(), a.t, c.t); },
      [&](DType out) -> Bounds {
        if (!exact || !c.checked) return unchecked();
        const double mag = std::max(a.mag, c.mag);
        return {true, mag, std::max(a.err, c.err) + eps(out) * mag};
      });
}

void Builder::cast() {
  const Value a = any();
  const DType to = logical_dtype();
  apply(
      "kiln::cast(" + a.name + ", " + str(to) + ")", [&] { return kiln::cast(a.t, real(to)); },
      [&](DType out) -> Bounds {
        if (!a.checked) return unchecked();
        if (kiln::is_floating(out)) return {true, a.mag, a.err + eps(out) * a.mag};
        // To an integer or bool: truncation is exact only for exact inputs.
        return {a.err == 0, out == DType::boolean ? 1 : a.mag, 0};
      });
}

void Builder::view() {
  const Value a = any();
  const Shape& s = a.t.shape();
  const int rank = s.size();
  auto same = [&](DType) { return Bounds{a.checked, a.mag, a.err}; };
  const int kind = rng_.below(10);
  const int d = rank ? rng_.below(rank) : 0;
  if (kind == 0 || rank == 0) {
    Shape to{-1};
    if (rank >= 2 && rng_.chance(50)) to = {s[0], -1};
    return apply(
        "kiln::reshape(" + a.name + ", " + str(to) + ")", [&] { return kiln::reshape(a.t, to); },
        same);
  }
  if (kind == 1) {
    const int e = rng_.below(rank);
    return apply(
        "kiln::transpose(" + a.name + ", " + std::to_string(d) + ", " + std::to_string(e) + ")",
        [&] { return kiln::transpose(a.t, d, e); }, same);
  }
  if (kind == 2) {
    std::vector<int> perm(rank);
    for (int i = 0; i < rank; ++i) perm[i] = i;
    for (int i = rank - 1; i > 0; --i) std::swap(perm[i], perm[rng_.below(i + 1)]);
    return apply(
        "kiln::permute(" + a.name + ", " + str(perm) + ")",
        [&] { return kiln::permute(a.t, perm); }, same);
  }
  if (kind == 3) {
    const int64_t start = rng_.below(3) - 1, stop = rng_.below(9) - 2, step = 1 + rng_.below(3);
    return apply(
        "kiln::slice(" + a.name + ", " + std::to_string(d) + ", " + std::to_string(start) + ", " +
            std::to_string(stop) + ", " + std::to_string(step) + ")",
        [&] { return kiln::slice(a.t, d, start, stop, step); }, same);
  }
  if (kind == 4) {
    Shape to = s;
    for (int i = 0; i < rank; ++i)
      if (to[i] == 1) to[i] = 1 + rng_.below(3);
    if (rng_.chance(30)) to.insert(0, 2);
    return apply(
        "kiln::expand(" + a.name + ", " + str(to) + ")", [&] { return kiln::expand(a.t, to); },
        same);
  }
  if (kind == 5)
    return apply(
        "kiln::unsqueeze(" + a.name + ", " + std::to_string(d) + ")",
        [&] { return kiln::unsqueeze(a.t, d); }, same);
  if (kind == 6)
    return apply(
        "kiln::squeeze(" + a.name + ")", [&] { return kiln::squeeze(a.t); }, same);
  if (kind == 7) {
    const int chunks = 1 + rng_.below(3), which = rng_.below(chunks);
    return apply(
        "kiln::chunk(" + a.name + ", " + std::to_string(chunks) + ", " + std::to_string(d) +
            ").back() (or chunk " + std::to_string(which) + ")",
        [&] {
          std::vector<Tensor> parts = kiln::chunk(a.t, chunks, d); // may be fewer
          return parts[std::min(size_t(which), parts.size() - 1)];
        },
        same);
  }
  if (kind == 8)
    return apply(
        "kiln::contiguous(" + a.name + ")", [&] { return kiln::contiguous(a.t); }, same);
  const Value b = any();
  apply(
      "kiln::concat({" + a.name + ", " + b.name + "}, " + std::to_string(d) + ")",
      [&] {
        return kiln::concat({a.t, b.t}, d);
      },
      [&](DType out) -> Bounds {
        const double mag = std::max(a.mag, b.mag);
        return {a.checked && b.checked, mag, std::max(a.err, b.err) + eps(out) * mag};
      });
}

void Builder::reduce() {
  const Value a = any();
  const Shape& s = a.t.shape();
  std::vector<int> axes;
  int64_t k = 1;
  for (int i = 0; i < s.size(); ++i)
    if (rng_.chance(50)) axes.push_back(i), k *= s[i];
  if (axes.empty()) k = std::max<int64_t>(s.numel(), 1);
  k = std::max<int64_t>(k, 1);
  const bool keep = rng_.chance(30);
  const int op = rng_.below(5);
  static const char* names[] = {"sum", "mean", "max", "min", "argmax"};
  const std::string args = a.name + ", " + str(axes) + ", " + (keep ? "true" : "false");
  if (op == 4) {
    const int axis = s.size() ? rng_.below(s.size()) : 0;
    return apply(
        "kiln::argmax(" + a.name + ", " + std::to_string(axis) + ")",
        [&] { return kiln::argmax(a.t, axis); },
        [&](DType) {
          return Bounds{a.checked && a.err == 0, 1e9, 0};
        });
  }
  apply(
      std::string("kiln::") + names[op] + "(" + args + ")",
      [&] {
        switch (op) {
        case 0:
          return kiln::sum(a.t, axes, keep);
        case 1:
          return kiln::mean(a.t, axes, keep);
        case 2:
          return kiln::max(a.t, axes, keep);
        default:
          return kiln::min(a.t, axes, keep);
        }
      },
      [&](DType out) -> Bounds {
        if (!a.checked) return unchecked();
        const double K = double(k), e = eps(out);
        if (op == 0) return {true, K * a.mag, K * a.err + 2 * e * K * a.mag};
        if (op == 1) return {true, a.mag, a.err + 2 * e * a.mag};
        return {true, a.mag, a.err};
      });
}

void Builder::matmul() {
  // A fresh right operand fitting a value's last dim; sometimes a fresh left operand of 1-8
  // rows too (small and tiled in-kernel matmuls), sometimes the right one transposed.
  Value a = any();
  if (rng_.chance(40) || a.t.ndim() == 0 || !kiln::is_floating(a.t.dtype())) {
    static const std::vector<int64_t> rows = {1, 2, 3, 4, 5, 8, 17};
    static const std::vector<int64_t> ks = {1, 3, 4, 8, 16, 33};
    add_input(Shape{rng_.pick(rows), rng_.pick(ks)},
              rng_.pick(std::vector<DType>{DType::f32, DType::f64, DType::bf16}));
    a = vals_.back();
  }
  const int64_t K = a.t.shape()[a.t.ndim() - 1];
  const int64_t N = 1 + rng_.below(9);
  const bool vec = rng_.chance(20), transposed = rng_.chance(30);
  const DType logical = rng_.pick(std::vector<DType>{DType::f32, DType::f64, DType::f16});
  add_input(vec ? Shape{K} : transposed ? Shape{N, K} : Shape{K, N}, logical);
  const Value b = vals_.back();
  const std::string bx = transposed ? "kiln::transpose(" + b.name + ", 0, 1)" : b.name;
  apply(
      "kiln::matmul(" + a.name + ", " + bx + ")",
      [&] { return kiln::matmul(a.t, transposed ? kiln::transpose(b.t, 0, 1) : b.t); },
      [&](DType out) -> Bounds {
        if (!a.checked) return unchecked();
        const double k = double(K), mag = k * a.mag * b.mag;
        return {true, mag, k * (a.err * b.mag) + (k + 1) * std::max(eps(out), 0x1p-24) * mag};
      });
}

void Builder::normalize() {
  const Value a = any();
  const int axis = a.t.ndim() ? rng_.below(a.t.ndim()) : 0;
  const int op = rng_.below(3);
  static const char* names[] = {"softmax", "log_softmax", "layer_norm"};
  const std::string arg = op == 2 ? "" : ", " + std::to_string(axis);
  apply(
      std::string("kiln::") + names[op] + "(" + a.name + arg + ")",
      [&] {
        if (op == 0) return kiln::softmax(a.t, axis);
        if (op == 1) return kiln::log_softmax(a.t, axis);
        return kiln::layer_norm(a.t);
      },
      [&](DType) { return unchecked(); });
}

// index_select, gather or scatter_add (of a into itself) along a random dim, with indices drawn
// now (in range: what a run records depends only on the seed and shapes, never on values).
void Builder::index() {
  const Value a = any();
  const Shape& s = a.t.shape();
  if (s.size() == 0 || s.numel() == 0) return;
  const int dim = rng_.below(s.size());
  const int op = rng_.below(3);
  Shape is = s; // gather and scatter_add: a's shape, another extent along dim (at most a's)
  is[dim] = op == 0 ? 1 + rng_.below(5) : 1 + rng_.below(int(s[dim]));
  if (op == 0) is = Shape{is[dim]};
  std::vector<int64_t> idx(static_cast<size_t>(is.numel()));
  for (int64_t& v : idx) v = rng_.below(int(s[dim]));
  const DType it = rng_.chance(50) ? DType::i32 : DType::i64;
  const Tensor index = kiln::from_vector(idx, is, opt_.device).astype(it);
  std::string ix = "kiln::from_vector<int64_t>({";
  for (size_t i = 0; i < idx.size(); ++i) ix += (i ? ", " : "") + std::to_string(idx[i]);
  ix += "}, " + str(is) + ").astype(" + str(it) + ")";
  static const char* names[] = {"index_select", "gather", "scatter_add"};
  const std::string d = std::to_string(dim);
  const double adds = double(is[dim]); // the most contributions one scatter_add element gets
  apply(
      std::string("kiln::") + names[op] + "(" + a.name + ", " + d + ", " + ix +
          (op == 2 ? ", " + a.name : std::string()) + ")",
      [&] {
        if (op == 0) return kiln::index_select(a.t, dim, index);
        if (op == 1) return kiln::gather(a.t, dim, index);
        return kiln::scatter_add(a.t, dim, index, a.t);
      },
      [&](DType out) -> Bounds {
        if (op < 2) return {a.checked, a.mag, a.err};
        if (!a.checked) return unchecked();
        const double mag = (1 + adds) * a.mag;
        return {true, mag, (1 + adds) * a.err + adds * eps(out) * mag};
      });
}

} // namespace

Outcome run_program(uint64_t seed, const RunOptions& opt) {
  return Builder(seed, opt).run();
}

std::vector<uint8_t> read_bytes(const Tensor& t) {
  std::vector<uint8_t> out(static_cast<size_t>(t.numel()) * size_t(kiln::itemsize(t.dtype())));
  auto copy = [&](auto tag) {
    auto v = t.to_vector<decltype(tag)>();
    if (!out.empty()) std::memcpy(out.data(), v.data(), out.size()); // (no pointer when empty)
  };
  switch (t.dtype()) {
  case DType::f32:
    copy(float{});
    break;
  case DType::f64:
    copy(double{});
    break;
  case DType::f16:
    copy(kiln::half{});
    break;
  case DType::bf16:
    copy(kiln::bfloat16{});
    break;
  case DType::i32:
    copy(int32_t{});
    break;
  case DType::i64:
    copy(int64_t{});
    break;
  case DType::boolean:
    copy(uint8_t{});
    break;
  }
  return out;
}

} // namespace kfuzz
