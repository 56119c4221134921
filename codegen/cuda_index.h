#pragma once
// gather / scatter_add (ir/index_step.h) as CUDA: one hand-shaped kernel per (op, element
// type, index type), sizes and strides as parameters (up to 8 dims), like the fused kernels'
// ABI: one `const __grid_constant__ Params` of 8-byte fields. Pure computation, no driver.
//
// Out-of-range indices cannot throw in a kernel: gather writes 0 there, scatter_add skips the
// element, and the first kernel that meets one records one of its bad indices in an IndexError
// the host reads at the next synchronization (runtime/cuda), which throws it as a kiln::Error.
#include "codegen/cuda_codegen.h"
#include "ir/index_step.h"

#include <cstddef>
#include <string>
#include <vector>

namespace kiln::detail {

/// Written by a kernel that meets an out-of-range index while flag is 0 (the fields, then flag
/// = 1); lives in host memory mapped into the device. Layout shared with the kernels' source.
struct IndexError {
  int32_t flag = 0;
  int32_t op = 0; // 0 gather, 1 index_select, 2 scatter_add
  int64_t value = 0, size = 0, dim = 0;
};

/// A short id of the kernel s needs (op, element type, index type): the in-memory cache key.
std::string index_kernel_id(const IndexStep& s);
CudaKernelSource render_index_cuda(const IndexStep& s, const CudaTarget& t);
/// Launch shape for s (grid 0: nothing to do).
CudaLaunch index_launch(const IndexStep& s, const CudaTarget& t);
/// The Params with the operands' pointers located by slot (x, index, src and out: the slot's
/// base plus the layout's offset), so that a CUDA-graph replay rewrites only them; `err` is
/// written in.
ParamTemplate index_param_template(const IndexStep& s, IndexError* err);
/// The Params bytes of one launch; slot_base[i] is slot i's device pointer.
std::vector<std::byte> pack_index_params(const IndexStep& s, llvm::ArrayRef<void*> slot_base,
                                         IndexError* err);

} // namespace kiln::detail
