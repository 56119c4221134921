#include "ir/host_convert.h"

#include <cstring>

namespace kiln::detail {

double load_as_double(const void* p, DType t, size_t i) {
  switch (t) {
  case DType::f32:
    return static_cast<const float*>(p)[i];
  case DType::f64:
    return static_cast<const double*>(p)[i];
  case DType::f16:
    return static_cast<float>(static_cast<const half*>(p)[i]);
  case DType::bf16:
    return static_cast<float>(static_cast<const bfloat16*>(p)[i]);
  case DType::i32:
    return static_cast<const int32_t*>(p)[i];
  case DType::i64:
    return static_cast<double>(static_cast<const int64_t*>(p)[i]);
  case DType::boolean:
    return static_cast<const uint8_t*>(p)[i] ? 1.0 : 0.0;
  }
  return 0;
}

namespace {

template <class T> void store_from_double(void* dst, size_t i, double v) {
  if constexpr (std::is_same_v<T, bool>)
    static_cast<uint8_t*>(dst)[i] = v != 0;
  else if constexpr (std::is_integral_v<T>)
    static_cast<T*>(dst)[i] = saturate_cast<T>(v);
  else if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>)
    static_cast<T*>(dst)[i] = T(static_cast<float>(v));
  else
    static_cast<T*>(dst)[i] = static_cast<T>(v);
}

template <class T> void store_all(const void* src, DType from, void* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) store_from_double<T>(dst, i, load_as_double(src, from, i));
}

} // namespace

void convert_elements(const void* src, DType from, void* dst, DType to, size_t n) {
  if (from == to) {
    std::memcpy(dst, src, n * itemsize(from));
    return;
  }
  if (from == DType::i64 && to == DType::i32) { // exact path, no double round trip
    for (size_t i = 0; i < n; ++i)
      static_cast<int32_t*>(dst)[i] = static_cast<int32_t>(static_cast<const int64_t*>(src)[i]);
    return;
  }
  switch (to) {
  case DType::f32:
    return store_all<float>(src, from, dst, n);
  case DType::f64:
    return store_all<double>(src, from, dst, n);
  case DType::f16:
    return store_all<half>(src, from, dst, n);
  case DType::bf16:
    return store_all<bfloat16>(src, from, dst, n);
  case DType::i32:
    return store_all<int32_t>(src, from, dst, n);
  case DType::i64:
    if (from == DType::i32) {
      for (size_t i = 0; i < n; ++i)
        static_cast<int64_t*>(dst)[i] = static_cast<const int32_t*>(src)[i];
      return;
    }
    return store_all<int64_t>(src, from, dst, n);
  case DType::boolean:
    return store_all<bool>(src, from, dst, n);
  }
}

} // namespace kiln::detail
