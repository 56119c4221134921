#include "runtime/launch_order.h"

#include "ir/fused_kernel.h"
#include "ir/index_step.h"
#include "ir/settings.h"

#include <llvm/ADT/BitVector.h>
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

// Per slot, the memory it stands for: slots whose buffers' bytes overlap are one memory (a
// realized node's slot and the slots of other nodes over its buffer, each a view at its own
// offset; an in-place output and the input it takes over), numbered from 0. A slot without a
// buffer is a memory of its own.
std::vector<int> memory_of_slots(llvm::ArrayRef<Buffer*> buffers) {
  struct Range {
    uintptr_t begin, end;
    int slot;
  };
  std::vector<Range> ranges;
  std::vector<int> memory(buffers.size(), -1);
  for (size_t s = 0; s < buffers.size(); ++s)
    if (const Buffer* b = buffers[s]; b && b->bytes > 0) {
      const auto begin = reinterpret_cast<uintptr_t>(b->data);
      ranges.push_back({begin, begin + b->bytes, static_cast<int>(s)});
    }
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  int next = 0;
  uintptr_t end = 0;
  for (const Range& r : ranges) {
    if (r.begin >= end) ++next; // no overlap with the ranges before: a new memory
    end = std::max(end, r.end);
    memory[r.slot] = next - 1;
  }
  for (int& m : memory)
    if (m < 0) m = next++;
  return memory;
}

Deps data_dependencies(llvm::ArrayRef<BatchItem> items, llvm::ArrayRef<Buffer*> buffers,
                       llvm::ArrayRef<bool> launched) {
  Deps deps(items.size());
  // Per memory: its last writer and the readers since. Two more memories: cuBLAS's workspace,
  // which every GEMM uses, and the index error record, which an index kernel that meets an
  // index out of range fills (its report must be one kernel's).
  const std::vector<int> memory = memory_of_slots(buffers);
  const int workspace = static_cast<int>(buffers.size()), index_error = workspace + 1;
  struct Use {
    int writer = -1;
    llvm::SmallVector<int, 4> readers;
  };
  std::vector<Use> uses(buffers.size() + 2);
  llvm::SmallVector<int, 8> reads, writes;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!launched[i]) continue;
    reads.clear();
    writes.clear();
    item_slots(items[i], reads, writes);
    for (int& s : reads) s = memory[s];
    for (int& s : writes) s = memory[s];
    if (items[i].gemm) writes.push_back(workspace);
    if (items[i].index) writes.push_back(index_error);
    auto after = [&](int j) {
      if (j >= 0 && j != static_cast<int>(i) && !llvm::is_contained(deps[i], j))
        deps[i].push_back(j);
    };
    for (int m : reads) after(uses[m].writer);
    for (int m : writes) {
      after(uses[m].writer);
      for (int r : uses[m].readers) after(r);
    }
    for (int m : reads) uses[m].readers.push_back(static_cast<int>(i));
    for (int m : writes) {
      uses[m].writer = static_cast<int>(i);
      uses[m].readers.clear();
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

std::vector<llvm::SmallVector<bool, 4>> chain_links(llvm::ArrayRef<llvm::SmallVector<int, 4>> deps,
                                                    llvm::ArrayRef<BatchItem> items) {
  std::vector<int> successors(deps.size(), 0);
  for (const auto& d : deps)
    for (int j : d) successors[j]++;
  std::vector<llvm::SmallVector<bool, 4>> links(deps.size());
  for (size_t i = 0; i < deps.size(); ++i) {
    const bool only_in = deps[i].size() == 1 && !items[i].gemm;
    for (int j : deps[i]) links[i].push_back(only_in && successors[j] == 1 && !items[j].gemm);
  }
  return links;
}

bool& graph_dependencies() {
  static bool on = [] { return setting_flag(Setting::graph_dependencies).value_or(true); }();
  return on;
}

} // namespace kiln::detail
