#pragma once
// Ops. Every op validates its arguments when called and throws kiln::Error naming the op and
// the offending shapes or values; a failed call records nothing.
#include <kiln/tensor.h>

#include <concepts>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

namespace kiln {

/// A C++ number used as an operand. Its kind (bool, integer, floating) matters for promotion.
/// `i` holds a floating value truncated toward zero and saturated at the int64 range (NaN: 0).
/// A value an op cannot represent in the dtype it is converted to (2^40 as an i32 operand, 3e9
/// or NaN as an i32 fill value) makes that op throw kiln::Error.
struct Scalar {
  enum class Kind : uint8_t { boolean, integer, floating };
  double f = 0;
  int64_t i = 0;
  Kind kind = Kind::floating;
  Scalar(bool v) : f(v), i(v), kind(Kind::boolean) {}
  template <std::integral T>
  requires(!std::same_as<T, bool>) Scalar(T v)
      : f(static_cast<double>(v)), i(static_cast<int64_t>(v)), kind(Kind::integer) {}
  template <std::floating_point T>
  Scalar(T v) : f(static_cast<double>(v)), i(saturated(f)), kind(Kind::floating) {}

private:
  static constexpr int64_t saturated(double v) {
    if (!(v == v)) return 0;
    if (v >= 0x1p63) return INT64_MAX;
    if (v < -0x1p63) return INT64_MIN;
    return static_cast<int64_t>(v);
  }
};

template <class T>
concept Number = std::is_arithmetic_v<T>;

// ---- factories -------------------------------------------------------------------------
Tensor zeros(const Shape& shape, DType dtype = DType::f32, std::optional<Device> device = {});
Tensor ones(const Shape& shape, DType dtype = DType::f32, std::optional<Device> device = {});
Tensor full(const Shape& shape, Scalar value, DType dtype = DType::f32,
            std::optional<Device> device = {});
/// Zeros / ones of a's shape on a's device, in a's dtype unless another is given.
Tensor zeros_like(const Tensor& a, std::optional<DType> dtype = {});
Tensor ones_like(const Tensor& a, std::optional<DType> dtype = {});
/// [start, stop) in steps of step, like numpy.arange; dtype i64 unless given.
Tensor arange(double start, double stop, double step = 1, DType dtype = DType::i64,
              std::optional<Device> device = {});
Tensor arange(int64_t stop, DType dtype = DType::i64, std::optional<Device> device = {});
/// Copies shape.numel() elements of dtype from host memory at data (which may be null only
/// when the shape has no elements).
Tensor from_data(const void* data, DType dtype, const Shape& shape,
                 std::optional<Device> device = {});
/// Gives memory kiln adopted back to its owner: called once, with the pointer, when no tensor
/// reads it any more. It must not throw (if it does, kiln reports it on stderr and goes on).
using Deleter = std::function<void(void*)>;
/// A tensor over `bytes` bytes of memory at `data` on `device` (a device pointer for a GPU),
/// without copying: elements of `dtype` at `strides` (in elements; empty: contiguous) over
/// `shape`. kiln reads the memory and never writes into it (results go to buffers of its own),
/// and calls `deleter(data)` when the last tensor reading it is gone; without a deleter the
/// caller keeps ownership and must keep the memory alive and unchanged while kiln may read it.
/// Throws kiln::Error (and leaves the memory to the caller) for a null or misaligned pointer,
/// strides that reach past `bytes` or are negative, or memory that is not on `device`.
Tensor from_blob(void* data, size_t bytes, DType dtype, const Shape& shape,
                 const Shape& strides = {}, Device device = Device::cpu(), Deleter deleter = {});
namespace detail {
/// Throws kiln::Error naming op unless `count` elements are exactly what `shape` holds.
void check_host_count(const char* op, size_t count, const Shape& shape);
} // namespace detail
/// Copies the vector; its size must equal shape.numel().
template <class T>
Tensor from_vector(const std::vector<T>& data, const Shape& shape,
                   std::optional<Device> device = {}) {
  detail::check_host_count("from_vector", data.size(), shape);
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(data.begin(), data.end());
    return from_data(bytes.data(), DType::boolean, shape, device);
  } else {
    return from_data(data.data(), dtype_of_v<T>, shape, device);
  }
}
template <class T> Tensor from_vector(const std::vector<T>& data) {
  return from_vector(data, Shape{static_cast<int64_t>(data.size())});
}
/// Uniform in [0, 1) and standard normal. Counter-based (Philox4x32-10): element i of the n-th
/// value drawn after manual_seed(s) is the same on every device and in lazy and eager mode.
Tensor rand(const Shape& shape, DType dtype = DType::f32, std::optional<Device> device = {});
Tensor randn(const Shape& shape, DType dtype = DType::f32, std::optional<Device> device = {});
void manual_seed(uint64_t seed);

// ---- elementwise (NumPy broadcasting) ----------------------------------------------------
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
/// True division: integer operands give f32.
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b); // NaN propagates
Tensor minimum(const Tensor& a, const Tensor& b); // NaN propagates
Tensor add(const Tensor& a, Scalar b);
Tensor sub(const Tensor& a, Scalar b);
Tensor rsub(const Tensor& a, Scalar b); // b - a
Tensor mul(const Tensor& a, Scalar b);
Tensor div(const Tensor& a, Scalar b);
Tensor rdiv(const Tensor& a, Scalar b); // b / a
Tensor pow(const Tensor& a, Scalar exponent);
Tensor maximum(const Tensor& a, Scalar b);
Tensor minimum(const Tensor& a, Scalar b);
Tensor clamp(const Tensor& a, std::optional<Scalar> lo, std::optional<Scalar> hi);
Tensor clamp(const Tensor& a, const Tensor& lo, const Tensor& hi);

Tensor neg(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
/// log(1 + a), accurate where a is small (log(1 + 1e-10f) is 0; log1p(1e-10f) is 1e-10).
Tensor log1p(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor rsqrt(const Tensor& a);
Tensor sin(const Tensor& a);
Tensor cos(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor sigmoid(const Tensor& a);
Tensor relu(const Tensor& a);
/// Exact (erf) GELU, as torch.nn.functional.gelu's default.
Tensor gelu(const Tensor& a);

Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, Scalar b);
Tensor ne(const Tensor& a, Scalar b);
Tensor lt(const Tensor& a, Scalar b);
Tensor le(const Tensor& a, Scalar b);
Tensor gt(const Tensor& a, Scalar b);
Tensor ge(const Tensor& a, Scalar b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);
/// cond ? a : b, broadcasting all three; cond must be boolean.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, Scalar b);
Tensor where(const Tensor& cond, Scalar a, const Tensor& b);
Tensor cast(const Tensor& a, DType to);

// ---- views (O(1), no copy; the result shares memory with the input) ---------------------
/// One extent may be -1. Copies only when the input's strides make a view impossible.
Tensor reshape(const Tensor& a, const Shape& shape);
Tensor transpose(const Tensor& a, int d0, int d1);
Tensor permute(const Tensor& a, const std::vector<int>& dims);
/// Elements start, start+step, ... below stop along dim (negative start/stop count from the end,
/// clamped like Python slicing; step >= 1).
Tensor slice(const Tensor& a, int dim, int64_t start, int64_t stop, int64_t step = 1);
/// Broadcast size-1 dims (and new leading dims) to shape; -1 keeps an extent.
Tensor expand(const Tensor& a, const Shape& shape);
Tensor unsqueeze(const Tensor& a, int dim);
Tensor squeeze(const Tensor& a, int dim);
Tensor squeeze(const Tensor& a); // all size-1 dims
/// Dims start_dim..end_dim (inclusive, negative counting from the end) merged into one, as
/// torch.flatten: `flatten(x)` is 1-d, a 0-d tensor gives one element. A view where reshape
/// gives one.
Tensor flatten(const Tensor& a, int start_dim = 0, int end_dim = -1);
/// `chunks` nearly equal views along dim (the last may be smaller), like torch.chunk.
std::vector<Tensor> chunk(const Tensor& a, int chunks, int dim = 0);
/// Views of `size` elements each along dim (the last may be smaller).
std::vector<Tensor> split(const Tensor& a, int64_t size, int dim = 0);
std::vector<Tensor> split(const Tensor& a, const std::vector<int64_t>& sizes, int dim = 0);
Tensor contiguous(const Tensor& a);
/// Not a view: a new tensor holding the inputs one after another along dim.
Tensor concat(const std::vector<Tensor>& ts, int dim = 0);
/// Not a view: the inputs, all of one shape, side by side along a new dim (torch.stack).
Tensor stack(const std::vector<Tensor>& ts, int dim = 0);

// ---- indexing (PyTorch's semantics; index: i32 or i64; docs/semantics.md, "Indexing") -----
/// The slices of x at `index` (0-d or 1-d) along dim: shape x.shape with [dim] = index.numel()
/// (torch.index_select). Not a view.
Tensor index_select(const Tensor& x, int dim, const Tensor& index);
/// out[i][j][k] = x[index[i][j][k]][j][k] for dim 0 (and so on): shape index.shape, the same
/// rank as x, index.shape[d] <= x.shape[d] for d != dim (torch.gather).
Tensor gather(const Tensor& x, int dim, const Tensor& index);
/// x with src added where index points: out[index[i][j]][j] += src[i][j] for dim 0, duplicate
/// indices accumulating (torch.Tensor.scatter_add, out of place). index, src and x have one
/// rank; index.shape[d] <= src.shape[d], and <= x.shape[d] for d != dim; src has x's dtype.
/// The sums are deterministic: each element adds its contributions in index order.
Tensor scatter_add(const Tensor& x, int dim, const Tensor& index, const Tensor& src);

// ---- reductions --------------------------------------------------------------------------
/// The axes a reduction folds, as PyTorch's `dim`: one (`sum(x, 1)`), several
/// (`sum(x, {0, 2})`, or a std::vector of int or int64_t), or none, meaning every axis (`sum(x)`,
/// `sum(x, {})`). Negative axes count from the end. A bool is refused at compile time, so that
/// `sum(x, true)` is not read as axis 1 (keepdim is the argument after the axes). An integer of
/// any width is kept whole, so that an axis out of range throws naming it rather than wrapping.
class Axes {
public:
  Axes() = default;
  template <class T>
  requires(std::is_integral_v<T> && !std::is_same_v<T, bool>) Axes(T axis)
      : axes_{static_cast<int64_t>(axis)} {}
  Axes(std::initializer_list<int> axes) : axes_(axes.begin(), axes.end()) {}
  Axes(const std::vector<int>& axes) : axes_(axes.begin(), axes.end()) {}
  Axes(std::vector<int64_t> axes) : axes_(std::move(axes)) {}
  const std::vector<int64_t>& list() const { return axes_; }

private:
  std::vector<int64_t> axes_;
};

/// Sum of integers/bool gives i64; mean needs a floating input.
Tensor sum(const Tensor& a, const Axes& axes = {}, bool keepdim = false);
Tensor mean(const Tensor& a, const Axes& axes = {}, bool keepdim = false);
Tensor max(const Tensor& a, const Axes& axes = {}, bool keepdim = false);
Tensor min(const Tensor& a, const Axes& axes = {}, bool keepdim = false);
/// Index (i64) of the first maximum along axis; without an axis, into the flattened tensor.
/// NaN counts as the maximum, as in PyTorch.
Tensor argmax(const Tensor& a, std::optional<int> axis = {}, bool keepdim = false);
/// Index (i64) of the first minimum, as argmax (NaN counts as the minimum).
Tensor argmin(const Tensor& a, std::optional<int> axis = {}, bool keepdim = false);
/// Variance over axes (empty: all), dividing the sum of squared deviations by
/// max(0, N - correction) as torch.var: correction 1 (Bessel's) by default, 0 for the biased
/// (population) variance; too few elements give inf or NaN. Needs a floating input.
Tensor var(const Tensor& a, const Axes& axes = {}, int64_t correction = 1, bool keepdim = false);
/// sqrt(var(...)): torch.std. (Not named `std`, which a reader would take for the namespace.)
Tensor stddev(const Tensor& a, const Axes& axes = {}, int64_t correction = 1, bool keepdim = false);
/// Each runs as one kernel on every backend (the reductions join the elementwise kernel that
/// uses them; see docs/architecture.md, "Reductions with consumers").
Tensor softmax(const Tensor& a, int axis = -1);
Tensor log_softmax(const Tensor& a, int axis = -1);
/// Normalizes over the last axis: (x - mean) / sqrt(var + eps) * weight + bias, with the biased
/// variance (as torch.nn.functional.layer_norm). weight and bias are optional (undefined
/// tensors skip them); when given, their shape is [x.shape(-1)]. x must be floating.
Tensor layer_norm(const Tensor& x, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);

// ---- linear algebra ----------------------------------------------------------------------
/// torch.matmul semantics: 1-D operands are promoted and squeezed, batch dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);

// ---- operators ---------------------------------------------------------------------------
inline Tensor operator+(const Tensor& a, const Tensor& b) {
  return add(a, b);
}
inline Tensor operator-(const Tensor& a, const Tensor& b) {
  return sub(a, b);
}
inline Tensor operator*(const Tensor& a, const Tensor& b) {
  return mul(a, b);
}
inline Tensor operator/(const Tensor& a, const Tensor& b) {
  return div(a, b);
}
inline Tensor operator-(const Tensor& a) {
  return neg(a);
}
template <Number S> Tensor operator+(const Tensor& a, S b) {
  return add(a, Scalar(b));
}
template <Number S> Tensor operator+(S a, const Tensor& b) {
  return add(b, Scalar(a));
}
template <Number S> Tensor operator-(const Tensor& a, S b) {
  return sub(a, Scalar(b));
}
template <Number S> Tensor operator-(S a, const Tensor& b) {
  return rsub(b, Scalar(a));
}
template <Number S> Tensor operator*(const Tensor& a, S b) {
  return mul(a, Scalar(b));
}
template <Number S> Tensor operator*(S a, const Tensor& b) {
  return mul(b, Scalar(a));
}
template <Number S> Tensor operator/(const Tensor& a, S b) {
  return div(a, Scalar(b));
}
template <Number S> Tensor operator/(S a, const Tensor& b) {
  return rdiv(b, Scalar(a));
}

/// Compound assignment rebinds the handle: `w -= lr * g` is `w = w - lr * g`. Other handles
/// to the old value keep it (unlike PyTorch's in-place ops, nothing aliasing w changes); when
/// no handle does, buffer reuse writes the result into w's buffer. As in PyTorch, w keeps its
/// shape and dtype: a result of another shape (b broadcast w to a larger one) throws, and so
/// does a result of a higher category than w (a float result for an integer w); a wider type
/// of the same category (f32 + f64) is cast back to w's.
Tensor& operator+=(Tensor& a, const Tensor& b);
Tensor& operator-=(Tensor& a, const Tensor& b);
Tensor& operator*=(Tensor& a, const Tensor& b);
Tensor& operator/=(Tensor& a, const Tensor& b);
Tensor& operator+=(Tensor& a, Scalar b);
Tensor& operator-=(Tensor& a, Scalar b);
Tensor& operator*=(Tensor& a, Scalar b);
Tensor& operator/=(Tensor& a, Scalar b);
inline Tensor operator==(const Tensor& a, const Tensor& b) {
  return eq(a, b);
}
inline Tensor operator!=(const Tensor& a, const Tensor& b) {
  return ne(a, b);
}
inline Tensor operator<(const Tensor& a, const Tensor& b) {
  return lt(a, b);
}
inline Tensor operator<=(const Tensor& a, const Tensor& b) {
  return le(a, b);
}
inline Tensor operator>(const Tensor& a, const Tensor& b) {
  return gt(a, b);
}
inline Tensor operator>=(const Tensor& a, const Tensor& b) {
  return ge(a, b);
}
template <Number S> Tensor operator==(const Tensor& a, S b) {
  return eq(a, Scalar(b));
}
template <Number S> Tensor operator!=(const Tensor& a, S b) {
  return ne(a, Scalar(b));
}
template <Number S> Tensor operator<(const Tensor& a, S b) {
  return lt(a, Scalar(b));
}
template <Number S> Tensor operator<=(const Tensor& a, S b) {
  return le(a, Scalar(b));
}
template <Number S> Tensor operator>(const Tensor& a, S b) {
  return gt(a, Scalar(b));
}
template <Number S> Tensor operator>=(const Tensor& a, S b) {
  return ge(a, Scalar(b));
}

} // namespace kiln
