// KILN_DUMP=passes: the planner's state after each pass (which nodes are written and why,
// which group computes each node), printed before the final plan, to see where a fusion
// decision was made.
#include "engine/planner_impl.h"

#include <fmt/format.h>

namespace kiln::detail {

namespace {

const char* group_kind_name(Group::Kind k) {
  switch (k) {
  case Group::Kind::elementwise:
    return "elementwise kernel";
  case Group::Kind::reduce:
    return "reduction kernel";
  case Group::Kind::gemm:
    return "gemm";
  case Group::Kind::concat:
    return "concat";
  case Group::Kind::transfer:
    return "transfer";
  case Group::Kind::index:
    return "gather/scatter";
  }
  return "?";
}

std::string node_name(const Node* n) {
  return fmt::format("%{} {} {} {}", n->id, op_name(n->op), dtype_name(n->dtype), n->shape().str());
}

} // namespace

std::string dump_state(const PlanGraph& pg, const std::vector<Group>& groups, const char* pass) {
  std::string out = fmt::format("after {}: {} pending node(s)", pass, pg.infos.size());
  out += groups.empty() ? "\n" : fmt::format(", {} group(s)\n", groups.size());
  for (const Info& in : pg.infos) {
    out += "  " + node_name(in.n);
    if (in.materialize) out += fmt::format(", written: {}", why_text(in.reason));
    if (in.no_merge) out += ", a kernel of its own";
    if (in.recompute) out += ", recomputed by each kernel that reads it";
    if (in.group >= 0) out += fmt::format(", group {}", in.group);
    out += '\n';
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    const Group& grp = groups[g];
    out += fmt::format("  group {}: {} over {}, writes", g, group_kind_name(grp.kind),
                       grp.shape.str());
    for (const Node* r : grp.roots) out += fmt::format(" %{}", r->id);
    out += '\n';
  }
  return out;
}

} // namespace kiln::detail
