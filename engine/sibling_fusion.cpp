// Sibling kernels: when an unmarked elementwise value feeds several elementwise kernels, those
// kernels become one that computes it once, instead of writing it to memory for all of them.
// This is what makes common subexpression elimination pay off: `a = exp(x) * 2` and
// `b = exp(x) * 3` share one exp node (engine/cse.cpp), and evaluating both is then one kernel
// with two outputs whose tape has one exp.
//
// Merging is safe when the kernels are elementwise over the same iteration space on the same
// device and none of them reads another's outputs (the merged kernel writes them all at
// once). Groups are built from the last created to the first, and a group reads only groups
// created after it; the merged group keeps the position of the first created, so every reader
// of the other groups' outputs must have been created before that one.
#include "engine/planner_impl.h"

#include <algorithm>

namespace kiln::detail {

int merge_siblings(PlanGraph& pg, std::vector<Group>& groups, llvm::ArrayRef<int> gs) {
  const int first = *std::min_element(gs.begin(), gs.end());
  const Group& g0 = groups[first];
  if (g0.kind != Group::Kind::elementwise) return -1;
  for (int g : gs) {
    const Group& grp = groups[g];
    if (grp.kind != Group::Kind::elementwise || grp.shape != g0.shape ||
        grp.roots[0]->device != g0.roots[0]->device)
      return -1;
    if (g == first) continue;
    for (Node* r : grp.roots) {
      llvm::SmallVector<int, 4> readers;
      bool through_view = false;
      consumer_groups(pg, r, readers, through_view);
      for (int c : readers)
        if (c != g && c >= first) return -1;
    }
  }
  // Merge the later groups into `first`, highest index first so indices still to be merged
  // stay valid; erasing a group shifts the ones after it down, which keeps their order.
  llvm::SmallVector<int, 4> later;
  for (int g : gs)
    if (g != first) later.push_back(g);
  std::sort(later.begin(), later.end(), std::greater<int>());
  for (int g : later) {
    std::vector<Node*>& roots = groups[first].roots;
    roots.insert(roots.end(), groups[g].roots.begin(), groups[g].roots.end());
    groups.erase(groups.begin() + g);
    for (Info& in : pg.infos)
      if (in.group == g)
        in.group = first;
      else if (in.group > g)
        in.group--;
  }
  return first;
}

} // namespace kiln::detail
