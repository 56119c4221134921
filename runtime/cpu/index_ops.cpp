// gather / scatter_add on the CPU. Both walk the index's positions in row-major order, so
// scatter_add adds the contributions to each output element in increasing position along dim:
// the order the CUDA kernel uses too (one thread per fiber along dim), hence the same bits.
#include "runtime/cpu/index_ops.h"

#include "ir/errors.h"

#include <array>
#include <cstring>
#include <type_traits>

namespace kiln::detail::cpu {

namespace {

// Row-major positions of `shape`, with an offset (elements) into each of N layouts.
template <int N> struct Odometer {
  const Shape& shape;
  std::array<const Shape*, N> strides;
  std::array<int64_t, N> off;
  std::array<int64_t, 8> coord{};

  void next() {
    for (int d = shape.size() - 1; d >= 0; --d) {
      for (int k = 0; k < N; ++k) off[k] += (*strides[k])[d];
      if (++coord[d] < shape[d]) return;
      for (int k = 0; k < N; ++k) off[k] -= (*strides[k])[d] * shape[d];
      coord[d] = 0;
    }
  }
};

int64_t load_index(const char* base, DType t, int64_t i) {
  if (t == DType::i32) {
    int32_t v;
    std::memcpy(&v, base + i * 4, 4);
    return v;
  }
  int64_t v;
  std::memcpy(&v, base + i * 8, 8);
  return v;
}

void check_range(const IndexStep& s, int64_t j, int64_t size) {
  if (j < 0 || j >= size)
    fail(s.name(), "index {} is out of range [0, {}) for dim {} of the input of shape {}", j, size,
         s.dim, s.x.shape);
}

// x's strides over the index's positions: its own, but 0 along dim (the index supplies it).
Shape strides_off_dim(const Shape& strides, int dim) {
  Shape s = strides;
  s[dim] = 0;
  return s;
}

void gather(const IndexStep& s, const char* x, const char* index, char* out) {
  const int64_t n = s.out_shape.numel(), size = s.x.shape[s.dim], along = s.x.strides[s.dim];
  const size_t isz = static_cast<size_t>(itemsize(s.dtype));
  const Shape xs = strides_off_dim(s.x.strides, s.dim);
  Odometer<2> it{s.out_shape, {&s.index.strides, &xs}, {s.index.offset, s.x.offset}};
  for (int64_t i = 0; i < n; ++i, it.next()) {
    const int64_t j = load_index(index, s.index_dtype, it.off[0]);
    check_range(s, j, size);
    std::memcpy(out + i * isz, x + (it.off[1] + j * along) * isz, isz);
  }
}

template <class T> T add(T a, T b) {
  if constexpr (std::is_integral_v<T>) // wraps, as kiln's integer arithmetic
    return static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) +
                          static_cast<std::make_unsigned_t<T>>(b));
  else if constexpr (std::is_floating_point_v<T>)
    return a + b;
  else
    return T(float(a) + float(b)); // f16/bf16: add in float, round to nearest even
}

template <class T>
void scatter_add(const IndexStep& s, const T* x, const char* index, const T* src, T* out) {
  const Shape os = contiguous_strides(s.out_shape);
  Odometer<1> copy{s.x.shape, {&s.x.strides}, {s.x.offset}};
  for (int64_t i = 0, n = s.out_shape.numel(); i < n; ++i, copy.next()) out[i] = x[copy.off[0]];
  const int64_t size = s.x.shape[s.dim], along = os[s.dim];
  const Shape ostr = strides_off_dim(os, s.dim);
  Odometer<3> it{
      s.index.shape, {&s.index.strides, &s.src.strides, &ostr}, {s.index.offset, s.src.offset, 0}};
  for (int64_t i = 0, n = s.index.shape.numel(); i < n; ++i, it.next()) {
    const int64_t j = load_index(index, s.index_dtype, it.off[0]);
    check_range(s, j, size);
    T& o = out[it.off[2] + j * along];
    o = add(o, src[it.off[1]]);
  }
}

template <class T>
void scatter_typed(const IndexStep& s, const char* x, const char* index, const char* src,
                   char* out) {
  scatter_add(s, reinterpret_cast<const T*>(x), index, reinterpret_cast<const T*>(src),
              reinterpret_cast<T*>(out));
}

} // namespace

void run_index(const IndexStep& s, const char* x, const char* index, const char* src, char* out) {
  if (s.op == IndexStep::Op::gather) return gather(s, x, index, out);
  switch (s.dtype) {
  case DType::f32:
    return scatter_typed<float>(s, x, index, src, out);
  case DType::f64:
    return scatter_typed<double>(s, x, index, src, out);
  case DType::f16:
    return scatter_typed<half>(s, x, index, src, out);
  case DType::bf16:
    return scatter_typed<bfloat16>(s, x, index, src, out);
  case DType::i32:
    return scatter_typed<int32_t>(s, x, index, src, out);
  case DType::i64:
    return scatter_typed<int64_t>(s, x, index, src, out);
  case DType::boolean:
    break;
  }
  fail(s.name(), "boolean tensors are not supported");
}

} // namespace kiln::detail::cpu
