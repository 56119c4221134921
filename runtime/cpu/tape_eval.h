#pragma once
// Evaluating a tape over one block of consecutive iteration indices.
#include "ir/fused_kernel.h"

#include <llvm/ADT/ArrayRef.h>

#include <vector>

namespace kiln::detail::cpu {

inline constexpr int kBlock = 256;

/// Compute type of a dtype inside the interpreter: f16/bf16 compute in float and are rounded
/// after every op (so fused and unfused results are bit-identical); bool is int32 0/1.
enum class CT : uint8_t { f32, f64, i32, i64 };
CT compute_type(DType t);

/// Storage for the values of one block (kBlock elements of up to 8 bytes each).
struct Slab {
  alignas(64) unsigned char bytes[kBlock * 8];
  template <class T> T* as() { return reinterpret_cast<T*>(bytes); }
  template <class T> const T* as() const { return reinterpret_cast<const T*>(bytes); }
};

/// One input as the evaluator sees it: base pointer already offset, strides over `shape`.
struct BoundInput {
  const char* data;
  DType dtype;
  IndexClass cls;
  const int64_t* strides;
};

/// Evaluate tape values for flat indices [start, start+len) of `shape` into slabs. With a
/// `level` table (reduce kernels), only values of level <= max_level are computed, and
/// reductions are skipped: the caller fills their slabs with each row's folded result.
void eval_block(const FusedKernel& k, const Shape& shape, llvm::ArrayRef<BoundInput> inputs,
                int64_t start, int len, std::vector<Slab>& slabs, const int8_t* level = nullptr,
                int max_level = 0);

/// Store `len` values of `slab` (compute type of dt) as dt at the strided positions of flat
/// indices [start, start+len) of `shape`.
void store_block(const Slab& slab, DType dt, char* data, const Shape& shape, const int64_t* strides,
                 bool contiguous, int64_t start, int len);

} // namespace kiln::detail::cpu
