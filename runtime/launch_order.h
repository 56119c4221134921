#pragma once
// Which launches of a batch must wait for which: the edges of its CUDA graph, so that work
// that does not depend on the work before it (a loss read out at every time step of an RNN,
// the next step's gates) runs beside it instead of after it.
#include "runtime/backend.h"

#include <llvm/ADT/SmallVector.h>

#include <vector>

namespace kiln::detail {

/// One batch item's earlier items that it must follow (indices, ascending): the last writer of
/// every memory it reads, and the last writer and the readers since of every memory it writes,
/// less those that the others follow already (each edge across branches costs a replay a wait;
/// sound because no launch completes before the launches it follows). Slots whose buffers'
/// bytes overlap are one memory (views of one buffer at different offsets, an in-place output
/// and the input it takes over, memory a user handed kiln over kiln's own). GEMMs also follow
/// each other (they share the stream's cuBLAS workspace), and so do index kernels (the record
/// of an index out of range). Items where `launched` is false run nothing and are skipped.
/// With `chain`, each launched item follows the launched item before it (plan order).
std::vector<llvm::SmallVector<int, 4>> launch_dependencies(llvm::ArrayRef<BatchItem> items,
                                                           llvm::ArrayRef<Buffer*> buffers,
                                                           llvm::ArrayRef<bool> launched,
                                                           bool chain);

/// Per item, per edge of deps[i]: whether it is a link of a chain, the only edge out of its
/// source and the only edge into item i, both items kernels (not GEMMs). Only such edges are
/// programmatic (PDL): with them at forks and joins as well, an LSTM's training step replayed
/// at 0.63 or 0.81-0.91 ms from one run to the next, on links only at 0.66 every time
/// (bench/results/2026-11-26-h100-session21.md, call 6).
std::vector<llvm::SmallVector<bool, 4>> chain_links(llvm::ArrayRef<llvm::SmallVector<int, 4>> deps,
                                                    llvm::ArrayRef<BatchItem> items);

/// Whether graph edges follow data dependencies (KILN_GRAPH_DEPENDENCIES=0: plan order).
bool& graph_dependencies();

} // namespace kiln::detail
