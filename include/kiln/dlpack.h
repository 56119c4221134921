#pragma once
// DLPack (https://github.com/dmlc/dlpack): kiln tensors to and from PyTorch, CuPy, JAX and
// other libraries without copying. Include <dlpack/dlpack.h> (Debian: libdlpack-dev) to use
// the DLManagedTensor these functions pass; kiln's headers do not need it.
#include <kiln/tensor.h>

struct DLManagedTensor;

namespace kiln {

/// Evaluates `t`, waits for it on its device, and returns a DLManagedTensor over its memory
/// (shape, strides, dtype and device as kiln has them; bool as DLPack's bool code 6). It holds
/// a handle to the value, so the memory stays valid and unchanged until the consumer calls its
/// deleter, which must happen on the thread that uses kiln.
DLManagedTensor* to_dlpack(const Tensor& t);
/// A tensor over a DLPack producer's memory, without copying (kiln never writes into it);
/// `m->deleter(m)` is called when no tensor reads it any more. CPU and CUDA memory of kiln's
/// dtypes. Throws kiln::Error for anything else, leaving `m` to the caller.
Tensor from_dlpack(DLManagedTensor* m);

} // namespace kiln
