// The fusion planner: pending graph -> Schedule.
//
// 1. collect   the pending nodes the targets depend on, in creation (= topological) order;
// 2. mark      the nodes that must be written to memory, each with the reason why
//              (requested, live handle, used outside this evaluation, reduction/GEMM result,
//              GEMM/concat operand, used by several kernels);
// 3. group     walking consumers before producers: an unmarked elementwise node joins the one
//              kernel all its consumers are in (diamonds included); a marked elementwise node
//              whose consumers all sit in one kernel over the same space joins it as an extra
//              output (multi-output fusion); a reduction whose consumers all sit in one kernel
//              over its input's space joins it (softmax, layer_norm: one kernel that walks each
//              row once per reduction level); anything else starts a kernel;
// 4. build     each group's FusedKernel (kernel_builder.cpp). Views and broadcasts become index
//              maps on the loads. If a view cannot be expressed that way the builder asks for
//              one more node to be marked, and planning starts again from step 3;
// Steps come out in dependency order (see build_all). Then horizontal_fusion.cpp launches the
// elementwise kernels whose outputs no later step reads as one segmented kernel, and
// buffer_reuse.cpp lets outputs take over input buffers whose last reference dies with this
// evaluation.
//
// Each pass is one function over explicit data (planner_impl.h): the PlanGraph (an Info per
// pending node: marks, reasons, groups), the groups, the Schedule. Files: mark.cpp (1, 2),
// split_chains.cpp (cutting chains one kernel cannot hold, before 3),
// grouping.cpp and sibling_fusion.cpp (3), kernel_builder.cpp and concat_slices.cpp (4),
// horizontal_fusion.cpp, buffer_reuse.cpp;
// small_matmul.cpp decides which matmuls kernels compute. KILN_DUMP=passes prints the marks
// and groups after each pass (pass_dump.cpp).
#include "engine/planner_impl.h"

#include "engine/graph.h"
#include "ir/errors.h"

#include <algorithm>
#include <cstdio>

namespace kiln::detail {

Schedule plan(const Walk& w) {
  llvm::SmallVector<Node*, 4> targets;
  for (int t : w.targets) targets.push_back(w.nodes[t]);
  const bool dump = engine().dump_passes;
  auto after = [&](const PlanGraph& pg, const std::vector<Group>& groups, const char* pass) {
    if (dump) std::fprintf(stderr, "%s", dump_state(pg, groups, pass).c_str());
  };
  PlanGraph pg = collect(w);
  mark_all(pg, targets);
  after(pg, {}, "collect and mark");
  split_long_chains(pg);
  after(pg, {}, "split_long_chains");
  // Each round marks at least one more node, so the loop ends within one round per node.
  for (size_t attempt = 0;; ++attempt) {
    const std::vector<Group> groups = group_all(pg);
    after(pg, groups, "group");
    std::variant<Schedule, std::vector<Retry>> built = build_all(pg, groups);
    if (Schedule* s = std::get_if<Schedule>(&built)) {
      if (engine().group_launches) fuse_sink_kernels(*s);
      if (engine().reproducible) // a segmented kernel's segments take its mode (segment())
        for (Step& st : s->steps)
          if (KernelStep* ks = st.kernel()) ks->kernel.reproducible = true;
      for (const Info& in : pg.infos)
        if (in.n->handles > 0 && !in.n->internal && !in.materialize && in.n->op != OpCode::view)
          s->deferred_ids.push_back(in.n->id);
      reuse_buffers(pg, *s);
      return std::move(*s);
    }
    const std::vector<Retry>& retries = std::get<std::vector<Retry>>(built);
    if (attempt > targets.size() + pg.infos.size())
      fail("eval", "internal error: the planner did not converge ({})",
           why_text(retries.front().reason));
    engine().stats.plan_retries++;
    for (const Retry& retry : retries) {
      if (dump)
        std::fprintf(stderr, "build: %%%llu must be written (%s)\n",
                     static_cast<unsigned long long>(retry.node->id), why_text(retry.reason));
      Info* ri = pg.info(retry.node);
      ri->materialize = true;
      ri->no_merge = true;
      ri->reason = retry.reason;
    }
    if (dump) std::fprintf(stderr, "grouping again\n");
  }
}

} // namespace kiln::detail
