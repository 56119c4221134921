// The readable plan: kiln::last_plan() and KILN_DUMP=plan.
#include "engine/schedule.h"
#include "ir/kernel_key.h"

#include <fmt/format.h>

namespace kiln::detail {

const char* why_text(Why w) {
  static constexpr const char* kText[] = {
#define KILN_WHY(id, text) text,
#include "engine/why.def"
#undef KILN_WHY
  };
  return kText[static_cast<size_t>(w)];
}

namespace {

std::string name(Origin o) {
  return fmt::format("%{} {}", o.id, op_name(o.op));
}

std::string operand(const TapeInst& t) {
  std::string s;
  for (int v : {t.a, t.b, t.c})
    if (v >= 0) s += fmt::format(" v{}", v);
  return s;
}

void dump_kernel(std::string& out, const FusedKernel& k) {
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    const KernelInput& in = k.inputs[i];
    out += fmt::format("    in{} {} {} strides {} offset {} <- {}\n", i, dtype_name(in.dtype),
                       index_class_name(in.cls), in.strides.str(), in.offset, name(in.origin));
  }
  const bool reduce = k.kind == FusedKernel::Kind::reduce;
  ReducePasses rp;
  if (reduce) {
    rp = reduce_passes(k);
    out += fmt::format("    rows: reduced axes mask {:#x}, {} pass(es) over each row\n",
                       k.reduce_axes, rp.passes);
  }
  for (size_t i = 0; i < k.tape.size(); ++i) {
    const TapeInst& t = k.tape[i];
    std::string what;
    if (t.op == OpCode::load)
      what = fmt::format("load in{}", t.a);
    else if (t.op == OpCode::matmul) {
      const KernelDot& d = k.dots[t.a];
      what =
          fmt::format("dot in{} . in{} over K = {} (strides {}, {})", d.a, d.b, d.K, d.a_k, d.b_k);
    } else if (t.op == OpCode::constant)
      what = fmt::format("constant {}", t.imm);
    else if (is_reduction(t.op))
      what = fmt::format("{} of v{} over its row (pass {})", op_name(t.op), t.a, rp.level[t.a]);
    else
      what = std::string(op_name(t.op)) + operand(t);
    out += fmt::format("    v{} = {} : {}\n", i, what, dtype_name(t.dtype));
  }
  for (size_t i = 0; i < k.outputs.size(); ++i) {
    const KernelOutput& o = k.outputs[i];
    out += fmt::format("    out{} = v{} {}{} -> {}", i, o.value, dtype_name(o.dtype),
                       o.reduced ? " (one per row)" : "", name(o.origin));
    if (o.offset != 0 || (!o.reduced && o.strides != contiguous_strides(k.output_space(i))))
      out += fmt::format(" at strides {} offset {}", o.strides.str(), o.offset);
    out += "\n";
  }
}

// A segmented kernel's segments, each numbered as a kernel of its own.
void dump_segments(std::string& out, const FusedKernel& k) {
  if (!k.segmented()) return dump_kernel(out, k);
  out += fmt::format("    {} segments launched together, nothing read between them:\n",
                     k.segments.size());
  for (int s = 0; s < static_cast<int>(k.segments.size()); ++s) {
    const FusedKernel seg = k.segment(s);
    out += fmt::format("  segment {} over {}: {} op(s)\n", s, seg.shape.str(), seg.compute_ops());
    dump_kernel(out, seg);
  }
}

} // namespace

std::string dump_schedule(const Schedule& s) {
  int written = 0;
  for (const Step& st : s.steps) written += static_cast<int>(st.writes.size());
  std::string out =
      fmt::format("plan: {} step(s), {} buffer(s) written\n", s.steps.size(), written);
  for (size_t i = 0; i < s.steps.size(); ++i) {
    const Step& st = s.steps[i];
    if (const TransferStep* t = st.transfer()) {
      out += fmt::format("[{}] copy {} bytes from {} to {}\n", i, t->bytes, t->from.str(),
                         st.device.str());
    } else if (const IndexStep* x = st.index()) {
      out += fmt::format("[{}] {} {} dim {} x {} index {} {}{} -> {} on {}\n", i, x->name(),
                         dtype_name(x->dtype), x->dim, x->x.shape.str(), dtype_name(x->index_dtype),
                         x->index.shape.str(),
                         x->src_slot >= 0 ? " src " + x->src.shape.str() : std::string(),
                         x->out_shape.str(), st.device.str());
    } else if (const GemmStep* g = st.gemm()) {
      out += fmt::format("[{}] gemm {} {} @ {} -> {} on {}\n", i, dtype_name(g->dtype),
                         g->a.shape.str(), g->b.shape.str(), g->out_shape.str(), st.device.str());
    } else {
      const FusedKernel& k = st.kernel()->kernel;
      out += fmt::format("[{}] kernel {} ({}) over {} on {}: {} op(s) fused, {} node(s) kept in "
                         "registers\n",
                         i, kernel_name(k),
                         k.kind == FusedKernel::Kind::reduce ? "reduction" : "elementwise",
                         k.shape.str(), st.device.str(), k.compute_ops(), st.fused.size());
      dump_segments(out, k);
      for (const KernelStep::InPlace& r : st.kernel()->in_place) {
        // Segments are numbered as kernels of their own.
        const int seg = k.segment_of_output(r.output);
        const KernelSegment first = seg == 0 ? KernelSegment{} : k.segments[seg - 1];
        out += fmt::format("    in place: {}out{} ({}) is written into the buffer of in{} ({}), "
                           "whose last reference dies with this evaluation\n",
                           k.segmented() ? fmt::format("segment {} ", seg) : std::string(),
                           r.output - first.outputs_end, name(k.outputs[r.output].origin),
                           r.input - first.inputs_end, name(k.inputs[r.input].origin));
      }
    }
    for (const Note& n : st.notes)
      out += fmt::format("    why: {} {}: {}\n", name(n.value),
                         n.written ? "written" : "read from memory", why_text(n.reason));
  }
  for (uint64_t id : s.alias_ids)
    out += fmt::format("view %{} realized as an alias of its root\n", id);
  for (uint64_t id : s.deferred_ids)
    out += fmt::format("held %{} not written: cheap to recompute from values in memory, it stays "
                       "pending until read\n",
                       id);
  return out;
}

} // namespace kiln::detail
