#pragma once
// Shared helpers for the op tests: a plain double-precision host reference, exact host-side
// encoding of inputs in every dtype (independent of kiln's own conversions), random inputs
// seeded per test, per-dtype tolerances and an error-message checker.
#include "../test_device.h"
#include <kiln/kiln.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace kt {

using kiln::DType;
using kiln::Shape;
using kiln::Tensor;
using Vals = std::vector<double>;

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- dtypes ------------------------------------------------------------------------------
inline const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> v{DType::f32, DType::f64, DType::f16,    DType::bf16,
                                    DType::i32, DType::i64, DType::boolean};
  return v;
}
inline const std::vector<DType>& numeric_dtypes() { // everything but bool
  static const std::vector<DType> v{DType::f32,  DType::f64, DType::f16,
                                    DType::bf16, DType::i32, DType::i64};
  return v;
}
inline const std::vector<DType>& float_dtypes() {
  static const std::vector<DType> v{DType::f32, DType::f64, DType::f16, DType::bf16};
  return v;
}
inline bool is_float(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}
inline bool is_int(DType t) {
  return t == DType::i32 || t == DType::i64;
}
/// Our own names (test names must not depend on the library under test).
inline std::string name(DType t) {
  switch (t) {
  case DType::f32:
    return "f32";
  case DType::f64:
    return "f64";
  case DType::f16:
    return "f16";
  case DType::bf16:
    return "bf16";
  case DType::i32:
    return "i32";
  case DType::i64:
    return "i64";
  case DType::boolean:
    return "bool";
  }
  return "?";
}

// ---- exact host encodings ----------------------------------------------------------------
/// Round v to the nearest value with `bits` significant bits, minimum exponent of the
/// spacing `min_unit_exp` (subnormals), ties to even. v must be finite.
inline double round_sig(double v, int bits, int min_unit_exp) {
  if (v == 0 || !std::isfinite(v)) return v;
  int e;
  std::frexp(std::fabs(v), &e); // |v| = m * 2^e, m in [0.5, 1)
  int unit = std::max(e - bits, min_unit_exp);
  double scale = std::ldexp(1.0, unit);
  double q = std::nearbyint(std::fabs(v) / scale) * scale; // default rounding: to even
  return std::copysign(q, v);
}

/// The value of dtype t nearest to v (what converting v to t gives; ints truncate).
inline double quantize(DType t, double v) {
  switch (t) {
  case DType::f64:
    return v;
  case DType::f32:
    return static_cast<double>(static_cast<float>(v));
  case DType::f16: {
    if (std::isnan(v)) return v;
    if (std::fabs(v) >= 65520.0) return std::copysign(kInf, v);
    return round_sig(v, 11, -24);
  }
  case DType::bf16: {
    if (std::isnan(v)) return v;
    if (std::fabs(v) >= std::ldexp(2.0 - std::ldexp(1.0, -8), 127)) return std::copysign(kInf, v);
    return round_sig(v, 8, -133);
  }
  case DType::i32:
    return static_cast<double>(static_cast<int32_t>(v));
  case DType::i64:
    return static_cast<double>(static_cast<int64_t>(v));
  case DType::boolean:
    return v != 0 ? 1.0 : 0.0;
  }
  return v;
}

/// IEEE half bits of a value exactly representable in f16.
inline uint16_t half_bits(double q) {
  uint16_t sign = std::signbit(q) ? 0x8000 : 0;
  double a = std::fabs(q);
  if (std::isnan(q)) return 0x7e00;
  if (std::isinf(q)) return sign | 0x7c00;
  if (a < std::ldexp(1.0, -14)) return sign | static_cast<uint16_t>(a * std::ldexp(1.0, 24));
  int e;
  double m = std::frexp(a, &e); // a = (2m) * 2^(e-1)
  uint16_t exp_field = static_cast<uint16_t>(e - 1 + 15);
  uint16_t mant = static_cast<uint16_t>((2 * m - 1) * 1024);
  return sign | static_cast<uint16_t>(exp_field << 10) | mant;
}
/// bfloat16 bits of a value exactly representable in bf16.
inline uint16_t bf16_bits(double q) {
  float f = static_cast<float>(q);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(q)) return 0x7fc0;
  return static_cast<uint16_t>(u >> 16);
}

/// Upload vals (quantized to dt first) as a tensor of dtype dt, bypassing kiln's converters.
inline Tensor make(const Vals& vals, const Shape& shape, DType dt) {
  EXPECT_EQ(static_cast<int64_t>(vals.size()), shape.numel()) << "test bug: size mismatch";
  size_t n = vals.size();
  switch (dt) {
  case DType::f64:
    return kiln::from_data(vals.data(), dt, shape);
  case DType::f32: {
    std::vector<float> b(n);
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<float>(vals[i]);
    return kiln::from_data(b.data(), dt, shape);
  }
  case DType::f16:
  case DType::bf16: {
    std::vector<uint16_t> b(n);
    for (size_t i = 0; i < n; ++i) {
      double q = quantize(dt, vals[i]);
      b[i] = dt == DType::f16 ? half_bits(q) : bf16_bits(q);
    }
    return kiln::from_data(b.data(), dt, shape);
  }
  case DType::i32: {
    std::vector<int32_t> b(n);
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<int32_t>(vals[i]);
    return kiln::from_data(b.data(), dt, shape);
  }
  case DType::i64: {
    std::vector<int64_t> b(n);
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<int64_t>(vals[i]);
    return kiln::from_data(b.data(), dt, shape);
  }
  case DType::boolean: {
    std::vector<uint8_t> b(n);
    for (size_t i = 0; i < n; ++i) b[i] = vals[i] != 0 ? 1 : 0;
    return kiln::from_data(b.data(), dt, shape);
  }
  }
  return {};
}

inline Vals quantize_all(DType t, Vals v) {
  for (auto& x : v) x = quantize(t, x);
  return v;
}

inline Vals values(const Tensor& t) {
  return t.to_vector<double>();
}

// ---- random inputs -----------------------------------------------------------------------
/// A generator seeded from the current test's full name: reproducible per test, different
/// between tests.
struct Rng {
  std::mt19937 gen;
  Rng() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string key = info ? std::string(info->test_suite_name()) + "." + info->name() : "none";
    gen.seed(static_cast<uint32_t>(std::hash<std::string>{}(key)));
  }
  explicit Rng(uint32_t seed) : gen(seed) {}

  /// n values of dtype dt: floats uniform in [lo, hi) then rounded to dt; ints uniform in
  /// [ceil(lo), floor(hi)]; bool: 0/1 with probability 1/2. Never all zeros.
  Vals uniform(int64_t n, DType dt, double lo = -1, double hi = 1) {
    Vals v(static_cast<size_t>(n));
    for (int attempt = 0;; ++attempt) {
      bool any_nonzero = false;
      for (auto& x : v) {
        if (dt == DType::boolean) {
          x = std::uniform_int_distribution<int>(0, 1)(gen);
        } else if (is_int(dt)) {
          x = static_cast<double>(std::uniform_int_distribution<int64_t>(
              static_cast<int64_t>(std::ceil(lo)), static_cast<int64_t>(std::floor(hi)))(gen));
        } else {
          x = quantize(dt, std::uniform_real_distribution<double>(lo, hi)(gen));
        }
        any_nonzero |= x != 0;
      }
      if (any_nonzero || n == 0 || attempt > 100) return v;
    }
  }
  /// Values with magnitude in [lo, hi] and a random sign (never zero if lo > 0).
  Vals nonzero(int64_t n, DType dt, double lo, double hi) {
    Vals v = uniform(n, dt, lo, hi);
    for (auto& x : v) {
      if (is_int(dt) && x == 0) x = 1;
      if (std::uniform_int_distribution<int>(0, 1)(gen)) x = -x;
    }
    return v;
  }
  /// Values drawn from a small set, so that ties and equalities are frequent.
  Vals pick(int64_t n, const Vals& choices) {
    Vals v(static_cast<size_t>(n));
    std::uniform_int_distribution<size_t> d(0, choices.size() - 1);
    for (auto& x : v) x = choices[d(gen)];
    return v;
  }
};

// ---- tolerances and comparison -----------------------------------------------------------
struct Tol {
  double rtol, atol;
};
inline Tol tol_for(DType t) {
  switch (t) {
  case DType::f64:
    return {1e-12, 1e-12};
  case DType::f32:
    return {1e-5, 1e-5};
  case DType::f16:
    return {1e-2, 1e-2};
  case DType::bf16:
    return {1e-2, 1e-2};
  default:
    return {0, 0};
  }
}

inline bool close(double a, double e, Tol tol) {
  if (std::isnan(e)) return std::isnan(a);
  if (std::isinf(e)) return a == e;
  if (!std::isfinite(a)) return false;
  return std::fabs(a - e) <= tol.atol + tol.rtol * std::fabs(e);
}

inline ::testing::AssertionResult all_close(const Vals& actual, const Vals& expected, Tol tol) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure()
           << "size " << actual.size() << " != expected size " << expected.size();
  int bad = 0;
  std::ostringstream os;
  for (size_t i = 0; i < actual.size(); ++i) {
    if (!close(actual[i], expected[i], tol)) {
      if (bad < 6) os << "\n  [" << i << "] got " << actual[i] << " expected " << expected[i];
      ++bad;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << actual.size() << " elements differ (rtol " << tol.rtol << ", atol "
         << tol.atol << "):" << os.str();
}

/// Shape, dtype and values of t against the expectation (tolerance from the dtype unless given).
inline ::testing::AssertionResult matches(const Tensor& t, const Shape& shape, DType dtype,
                                          const Vals& expected, std::optional<Tol> tol = {}) {
  if (!t.defined()) return ::testing::AssertionFailure() << "tensor undefined";
  if (t.shape() != shape)
    return ::testing::AssertionFailure()
           << "shape " << t.shape().str() << " != expected " << shape.str();
  if (t.dtype() != dtype)
    return ::testing::AssertionFailure()
           << "dtype " << name(t.dtype()) << " != expected " << name(dtype);
  return all_close(values(t), expected, tol ? *tol : tol_for(dtype));
}

// ---- shapes and strided indexing -----------------------------------------------------------
inline std::vector<int64_t> dims(const Shape& s) {
  return s.vec();
}
inline std::vector<int64_t> row_major_strides(const std::vector<int64_t>& d) {
  std::vector<int64_t> st(d.size(), 1);
  for (int i = static_cast<int>(d.size()) - 2; i >= 0; --i) st[i] = st[i + 1] * d[i + 1];
  return st;
}
inline int64_t numel(const std::vector<int64_t>& d) {
  int64_t n = 1;
  for (auto x : d) n *= x;
  return n;
}
/// Multi-index of flat row-major index i.
inline std::vector<int64_t> unravel(int64_t i, const std::vector<int64_t>& d) {
  std::vector<int64_t> idx(d.size());
  for (int k = static_cast<int>(d.size()) - 1; k >= 0; --k) {
    idx[k] = d[k] ? i % d[k] : 0;
    i = d[k] ? i / d[k] : 0;
  }
  return idx;
}

/// NumPy broadcast of two shapes (test-side; assumes compatibility).
inline std::vector<int64_t> bshape(std::vector<int64_t> a, std::vector<int64_t> b) {
  size_t n = std::max(a.size(), b.size());
  a.insert(a.begin(), n - a.size(), 1);
  b.insert(b.begin(), n - b.size(), 1);
  std::vector<int64_t> o(n);
  for (size_t i = 0; i < n; ++i) o[i] = a[i] == 1 ? b[i] : a[i];
  return o;
}
/// Value of a (shape ad) at the broadcast position idx of an output of rank idx.size().
inline double at_broadcast(const Vals& a, const std::vector<int64_t>& ad,
                           const std::vector<int64_t>& idx) {
  auto st = row_major_strides(ad);
  size_t off = idx.size() - ad.size();
  int64_t flat = 0;
  for (size_t k = 0; k < ad.size(); ++k) flat += (ad[k] == 1 ? 0 : idx[k + off]) * st[k];
  return a[static_cast<size_t>(flat)];
}
/// Reference for a broadcasting binary op.
inline Vals ref_binary(const Vals& a, const Shape& as, const Vals& b, const Shape& bs,
                       const std::function<double(double, double)>& f) {
  auto od = bshape(dims(as), dims(bs));
  Vals out(static_cast<size_t>(numel(od)));
  for (int64_t i = 0; i < numel(od); ++i) {
    auto idx = unravel(i, od);
    out[i] = f(at_broadcast(a, dims(as), idx), at_broadcast(b, dims(bs), idx));
  }
  return out;
}
inline Vals ref_unary(const Vals& a, const std::function<double(double)>& f) {
  Vals out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = f(a[i]);
  return out;
}

/// Reference reduction of a (shape d) over axes (normalized, non-negative). Returns values in
/// row-major order of the kept dims. `init` and `f` fold one group.
struct Reduced {
  Vals vals;
  std::vector<int64_t> shape_keep; // reduced dims set to 1
  std::vector<int64_t> shape_drop; // reduced dims removed
};
inline Reduced ref_reduce(const Vals& a, const std::vector<int64_t>& d, std::vector<int> axes,
                          const std::function<double(const Vals&)>& fold) {
  if (axes.empty())
    for (int k = 0; k < static_cast<int>(d.size()); ++k) axes.push_back(k);
  std::vector<bool> red(d.size(), false);
  for (int ax : axes)
    red[static_cast<size_t>(ax < 0 ? ax + static_cast<int>(d.size()) : ax)] = true;
  Reduced r;
  for (size_t k = 0; k < d.size(); ++k) {
    r.shape_keep.push_back(red[k] ? 1 : d[k]);
    if (!red[k]) r.shape_drop.push_back(d[k]);
  }
  std::vector<Vals> groups(static_cast<size_t>(numel(r.shape_keep)));
  auto ost = row_major_strides(r.shape_keep);
  for (int64_t i = 0; i < numel(d); ++i) {
    auto idx = unravel(i, d);
    int64_t o = 0;
    for (size_t k = 0; k < d.size(); ++k) o += (red[k] ? 0 : idx[k]) * ost[k];
    groups[o].push_back(a[i]);
  }
  for (auto& g : groups) r.vals.push_back(fold(g));
  return r;
}
inline double fold_sum(const Vals& g) {
  double s = 0;
  for (double x : g) s += x;
  return s;
}
inline double fold_mean(const Vals& g) {
  return fold_sum(g) / static_cast<double>(g.size());
}
inline double fold_max(const Vals& g) {
  double m = -kInf;
  for (double x : g) {
    if (std::isnan(x)) return kNaN;
    m = std::max(m, x);
  }
  return m;
}
inline double fold_min(const Vals& g) {
  double m = kInf;
  for (double x : g) {
    if (std::isnan(x)) return kNaN;
    m = std::min(m, x);
  }
  return m;
}
inline double fold_argmax(const Vals& g) {
  size_t best = 0;
  for (size_t i = 1; i < g.size(); ++i)
    if (g[i] > g[best]) best = i;
  return static_cast<double>(best);
}

inline Shape to_shape(const std::vector<int64_t>& d) {
  return Shape(d);
}

// ---- errors ------------------------------------------------------------------------------
/// Runs f; succeeds iff it throws kiln::Error whose what() contains `needle`.
template <class F>::testing::AssertionResult throws_kiln_error(F&& f, const std::string& needle) {
  try {
    f();
  } catch (const kiln::Error& e) {
    std::string w = e.what();
    if (w.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure()
           << "kiln::Error \"" << w << "\" does not contain \"" << needle << "\"";
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-kiln exception: " << e.what();
  } catch (...) {
    return ::testing::AssertionFailure() << "threw something that is not a std::exception";
  }
  return ::testing::AssertionFailure()
         << "did not throw (expected kiln::Error with \"" << needle << "\")";
}
#define EXPECT_KILN_ERROR(needle, ...)                                                             \
  EXPECT_TRUE(::kt::throws_kiln_error([&] { (void)(__VA_ARGS__); }, needle))

// ---- fixture -----------------------------------------------------------------------------
/// Runs each test on the test device (tests/test_device.h) in lazy mode and restores the
/// previous device/mode afterwards.
class OpsTest : public ::testing::Test {
protected:
  void SetUp() override {
    prev_device_ = kiln::default_device();
    prev_eager_ = kiln::eager();
    KILN_USE_TEST_DEVICE(); // the CPU, or CUDA under KILN_TEST_DEVICE=cuda
    kiln::set_eager(false);
  }
  void TearDown() override {
    kiln::set_eager(prev_eager_);
    kiln::set_default_device(prev_device_);
  }
  kiln::Device prev_device_ = kiln::Device::cpu();
  bool prev_eager_ = false;
};

template <class P> class OpsTestP : public OpsTest, public ::testing::WithParamInterface<P> {};

/// Sets eager mode for a scope and restores it even when an assertion fails.
struct EagerGuard {
  bool prev;
  explicit EagerGuard(bool on) : prev(kiln::eager()) { kiln::set_eager(on); }
  ~EagerGuard() { kiln::set_eager(prev); }
};

} // namespace kt
