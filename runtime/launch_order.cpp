#include "runtime/launch_order.h"

#include "ir/fused_kernel.h"
#include "ir/index_step.h"
#include "ir/settings.h"

#include <llvm/ADT/BitVector.h>
#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/STLExtras.h>

#include <algorithm>
#include <functional>

namespace kiln::detail {

namespace {

// The slots an item reads and writes.
void item_slots(const BatchItem& it, llvm::SmallVectorImpl<int>& reads,
                llvm::SmallVectorImpl<int>& writes) {
  if (const GemmStep* g = it.gemm) {
    reads.append({g->a_slot, g->b_slot});
    writes.push_back(g->out_slot);
  } else if (const IndexStep* x = it.index) {
    reads.append({x->x_slot, x->index_slot});
    if (x->src_slot >= 0) reads.push_back(x->src_slot);
    writes.push_back(x->out_slot);
  } else {
    for (const KernelInput& in : it.kernel->inputs) reads.push_back(in.slot);
    for (const KernelOutput& out : it.kernel->outputs) writes.push_back(out.slot);
  }
}

} // namespace

namespace {

using Deps = std::vector<llvm::SmallVector<int, 4>>;

Deps plan_order(llvm::ArrayRef<bool> launched) {
  Deps deps(launched.size());
  int last = -1;
  for (size_t i = 0; i < launched.size(); ++i) {
    if (!launched[i]) continue;
    if (last >= 0) deps[i].push_back(last);
    last = static_cast<int>(i);
  }
  return deps;
}

Deps data_dependencies(llvm::ArrayRef<BatchItem> items, llvm::ArrayRef<Buffer*> buffers,
                       llvm::ArrayRef<bool> launched) {
  Deps deps(items.size());
  // Per buffer: its last writer and the readers since. Keyed by the Buffer; a slot without one
  // by an odd number (no Buffer's address), and cuBLAS's workspace by `workspace`.
  struct Use {
    int writer = -1;
    llvm::SmallVector<int, 4> readers;
  };
  llvm::DenseMap<const void*, Use> uses;
  const void* const workspace = reinterpret_cast<const void*>(uintptr_t(1));
  auto memory = [&](int slot) -> const void* {
    if (const Buffer* b = buffers[slot]) return b;
    return reinterpret_cast<const void*>(uintptr_t(slot) * 2 + 3);
  };
  llvm::SmallVector<int, 8> reads, writes;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!launched[i]) continue;
    reads.clear();
    writes.clear();
    item_slots(items[i], reads, writes);
    llvm::SmallVector<const void*, 8> read_mem, write_mem;
    for (int s : reads) read_mem.push_back(memory(s));
    for (int s : writes) write_mem.push_back(memory(s));
    if (items[i].gemm) write_mem.push_back(workspace);
    auto after = [&](int j) {
      if (j >= 0 && j != static_cast<int>(i) && !llvm::is_contained(deps[i], j))
        deps[i].push_back(j);
    };
    for (const void* m : read_mem) after(uses[m].writer);
    for (const void* m : write_mem) {
      const Use& u = uses[m];
      after(u.writer);
      for (int r : u.readers) after(r);
    }
    for (const void* m : read_mem) uses[m].readers.push_back(static_cast<int>(i));
    for (const void* m : write_mem) {
      Use& u = uses[m];
      u.writer = static_cast<int>(i);
      u.readers.clear();
    }
  }
  return deps;
}

// Drops each edge that other edges imply (j -> i where i also follows some k that follows j):
// every edge that crosses between the graph's branches costs the replay a wait, and an
// optimizer's in-place update would otherwise wait for every earlier reader of its parameter.
void drop_implied(Deps& deps) {
  std::vector<llvm::BitVector> reach(deps.size()); // launches each launch follows, transitively
  for (size_t i = 0; i < deps.size(); ++i) {
    reach[i].resize(deps.size());
    llvm::SmallVector<int, 4>& d = deps[i];
    std::sort(d.begin(), d.end(), std::greater<>());
    llvm::SmallVector<int, 4> kept;
    for (int j : d) { // latest first: a later dependency may imply an earlier one, never back
      if (reach[i].test(j)) continue;
      kept.push_back(j);
      reach[i].set(j);
      reach[i] |= reach[j];
    }
    std::sort(kept.begin(), kept.end());
    d = std::move(kept);
  }
}

} // namespace

std::vector<llvm::SmallVector<int, 4>> launch_dependencies(llvm::ArrayRef<BatchItem> items,
                                                           llvm::ArrayRef<Buffer*> buffers,
                                                           llvm::ArrayRef<bool> launched,
                                                           bool chain) {
  if (chain) return plan_order(launched);
  Deps deps = data_dependencies(items, buffers, launched);
  drop_implied(deps);
  return deps;
}

bool& graph_dependencies() {
  static bool on = [] { return setting_flag(Setting::graph_dependencies).value_or(true); }();
  return on;
}

} // namespace kiln::detail
