// Merged launches in a batch: runs of consecutive launches of one small kernel (the steps of a
// loop flushed together) launched as one, on a grid of one block or one thread-block cluster
// with a barrier between the steps (codegen's CudaRepeat). A step that waited ~1 us for its
// launch, or for its graph node, then waits for a barrier. See docs/architecture.md,
// "Merged launches".
//
// Every member of a group uses the group's variant, merged or not, so that a group computes the
// same bits before its merged kernel is compiled (each member on its own) and after.
#include "runtime/cuda/cuda_batch.h"

#include "ir/kernel_key.h"

#include <llvm/ADT/SmallString.h>

#include <algorithm>

namespace kiln::detail {

namespace {

// What a member shares with its leader: the kernel's structure, its sizes and the variant.
void group_key(const FusedKernel& k, const CudaRepeat& r, llvm::SmallString<256>& out) {
  out.clear();
  kernel_signature(k, out);
  append_variant(k, r.variant, out);
}

bool same_grid(const CudaLaunch& a, const CudaLaunch& b) {
  return a.grid == b.grid && a.grid_y == b.grid_y && a.grid_z == b.grid_z &&
         a.shared_bytes == b.shared_bytes;
}

// The member's Params after those of the members before it: its pointer and constant fields
// moved by its place.
void append_member(ParamTemplate& group, const ParamTemplate& member) {
  const auto at = static_cast<uint32_t>(group.bytes.size());
  group.bytes.insert(group.bytes.end(), member.bytes.begin(), member.bytes.end());
  for (ParamTemplate::Pointer p : member.pointers) {
    p.at += at;
    group.pointers.push_back(p);
  }
  for (ParamTemplate::Value v : member.values) {
    v.at += at;
    group.values.push_back(v);
  }
}

} // namespace

void CudaBatch::form_groups(llvm::ArrayRef<void*> base) {
  groups_waiting_ = 0;
  for (Launch& l : launches_) {
    l.group = 0;
    l.leader = -1;
    l.group_fn = nullptr;
    l.group_settled = false;
    l.group_params = ParamTemplate();
  }
  if (!merge_launches()) return;
  const CudaTarget& t = kernels_.target();
  llvm::SmallString<256> key, next;
  for (size_t i = 0; i < launches_.size();) {
    const FusedKernel* k = launches_[i].item.kernel;
    const std::optional<CudaRepeat> r = k ? choose_repeat(*k, base, t) : std::nullopt;
    if (!r) {
      ++i;
      continue;
    }
    group_key(*k, *r, key);
    size_t j = i + 1;
    for (; j < launches_.size() && static_cast<int>(j - i) < r->max_count; ++j) {
      const FusedKernel* kj = launches_[j].item.kernel;
      if (!kj || kj->shape != k->shape) break;
      const std::optional<CudaRepeat> rj = choose_repeat(*kj, base, t);
      if (!rj || !same_grid(rj->shape, r->shape)) break;
      group_key(*kj, *rj, next);
      if (next != key) break;
    }
    if (j - i >= 2) {
      Launch& lead = launches_[i];
      lead.group = static_cast<int>(j - i);
      lead.repeat = *r;
      for (size_t m = i; m < j; ++m) {
        launches_[m].variant = r->variant;
        if (m > i) launches_[m].leader = static_cast<int>(i);
        append_member(lead.group_params, param_template(*launches_[m].item.kernel, r->variant));
      }
      ++groups_waiting_;
    }
    i = j;
  }
}

bool CudaBatch::load_merged() {
  bool loaded = false;
  merged_kernels_ = 0;
  for (Launch& l : launches_) {
    if (l.group == 0) continue;
    if (!l.group_settled) {
      bool waiting = false;
      l.group_fn = kernels_.repeat(*l.item.kernel, l.repeat, l.group, waiting);
      if (l.group_fn || !waiting) {
        --groups_waiting_;
        l.group_settled = true;
      }
      loaded |= l.group_fn != nullptr;
    }
    if (l.group_fn) merged_kernels_ += l.group;
  }
  return loaded;
}

bool CudaBatch::patch_group_values(std::vector<std::byte>& params, size_t leader) const {
  const Launch& l = launches_[leader];
  const size_t per_member = l.group_params.values.size() / static_cast<size_t>(l.group);
  llvm::ArrayRef<ParamTemplate::Value> values = l.group_params.values;
  bool changed = false;
  for (int m = 0; m < l.group; ++m)
    changed |= ParamTemplate::patch_values(params, values.slice(m * per_member, per_member),
                                           *launches_[leader + m].item.kernel);
  return changed;
}

// Each outside launch once, its edge programmatic only if every member's edge from it is.
GraphPredecessors CudaBatch::group_predecessors(const Instance& in, size_t leader,
                                                llvm::ArrayRef<llvm::SmallVector<int, 4>> deps,
                                                llvm::ArrayRef<llvm::SmallVector<bool, 4>> links,
                                                bool pdl) const {
  GraphPredecessors after;
  const size_t end = leader + static_cast<size_t>(launches_[leader].group);
  for (size_t m = leader; m < end; ++m)
    for (size_t k = 0; k < deps[m].size(); ++k) {
      const auto d = static_cast<size_t>(deps[m][k]);
      if (d >= leader && d < end) continue; // a member: the barrier orders them
      const bool programmatic = pdl && links[m][k];
      auto at = std::find(after.nodes.begin(), after.nodes.end(), in.nodes[d]);
      if (at == after.nodes.end())
        after.add(in.nodes[d], programmatic);
      else
        after.programmatic[at - after.nodes.begin()] =
            after.programmatic[at - after.nodes.begin()] && programmatic;
    }
  return after;
}

} // namespace kiln::detail
