// Concats in a plan: the pieces their computing kernels write straight into the concat's
// buffer (plan_slices, and the outputs kernel_step adds for them), and one segmented copy
// kernel for the rest (concat_steps).
#include "engine/step_builder.h"

#include <algorithm>

namespace kiln::detail {

namespace {

// Whether view x reads all of its root, in order: a reshape (possibly of a reshape).
bool whole_reshape(const Node* x, const Node* root) {
  return x->layout.offset == 0 && x->layout.strides == contiguous_strides(x->shape()) &&
         x->shape().numel() == root->shape().numel();
}

// Whether the slice of concat c at dim `dim` is one contiguous block of its buffer.
bool contiguous_slice(const Node* c) {
  for (int d = 0; d < c->dim; ++d)
    if (c->shape()[d] != 1) return false;
  return true;
}

} // namespace

// The pieces of a concat are written into their slices of its buffer by the kernels computing
// them, where that can be, rather than copied there by a copy kernel each:
// - a piece computed by an elementwise kernel, read by nothing else and held by no handle, is
//   written there instead of into a buffer of its own; so is a whole reshape of such a value,
//   where the slice is one contiguous block (the value is written there in its own order);
// - a piece its elementwise kernel writes to a buffer of its own anyway (other kernels read it,
//   a handle holds it) is also written into the slice, by one more output of that kernel;
// - on a GPU, a piece that is a concat all of whose pieces are written so, and that is one
//   contiguous block of this concat, has each of its pieces written into this concat as well.
void StepBuilder::plan_slices() {
  for (Info& in : pg.infos) { // creation order: a concat's concat pieces come first
    Node* c = in.n;
    if (c->op != OpCode::concat) continue;
    const Shape strides = contiguous_strides(c->shape());
    int64_t at = 0;
    for (Node* x : c->inputs) {
      const int64_t offset = at * strides[c->dim];
      at += x->shape()[c->dim];
      if (plan_piece(c, x, offset, strides)) written_pieces.insert(x);
    }
  }
}

// Whether piece x of concat c, at `offset` of c's buffer, is written there by the kernels
// computing it (see plan_slices).
bool StepBuilder::plan_piece(Node* c, Node* x, int64_t offset, const Shape& strides) {
  Node* r = x;
  if (x->op == OpCode::view) {
    r = view_root(x);
    if (x->uses != 1 || x->handles != 0 || !whole_reshape(x, r) || !contiguous_slice(c))
      return false;
  }
  Info* ri = info(r);
  if (!ri || r->dtype != c->dtype || r->device != c->device) return false;
  if (r->op == OpCode::concat) { // its pieces' writers write here too
    // On a GPU this saves a copy kernel per piece; the CPU interpreter stores strided slices
    // more slowly than it copies a contiguous block (an LSTM's window at batch 32: 6 ms).
    auto it = piece_writers.find(r);
    if (r != x || !c->device.is_cuda() || !contiguous_slice(c) || it == piece_writers.end())
      return false;
    for (Node* p : r->inputs)
      if (!written_pieces.count(p)) return false;
    for (auto [w, s] : std::vector<std::pair<Node*, Slice>>(it->second)) {
      s.concat = c;
      s.offset += offset;
      copies[w].push_back(s);
      piece_writers[c].push_back({w, s});
    }
    return true;
  }
  // Its kernel must be built before the concat's (a higher group index).
  if (r->op == OpCode::view || op_kind(r->op) == OpKind::Reduce || ri->group <= info(c)->group ||
      groups[ri->group].kind != Group::Kind::elementwise)
    return false;
  const Slice s{c, offset, r == x ? strides : contiguous_strides(r->shape())};
  if (ri->reason == Why::concat_input && r->uses == 1 && r->handles == 0) {
    slices[r] = s;
  } else {
    const std::vector<Node*>& roots = groups[ri->group].roots;
    if (r != x || std::find(roots.begin(), roots.end(), r) == roots.end()) return false;
    copies[r].push_back(s);
  }
  piece_writers[c].push_back({r, s});
  return true;
}

KernelOutput StepBuilder::output_for(Step& st, Node* root, int v, const Shape& shape,
                                     bool reduced) {
  auto it = slices.find(root);
  if (it == slices.end()) {
    int slot = slot_for_leaf(root);
    st.writes.push_back(slot);
    st.realizes.push_back(static_cast<int>(root->walk_index));
    return {v, slot, root->dtype, contiguous_strides(shape), 0, origin(root), reduced};
  }
  st.fused.push_back(static_cast<int>(root->walk_index)); // computed, never a value of its own
  return slice_output(st, root, v, it->second, reduced);
}

KernelOutput StepBuilder::slice_output(Step& st, Node* root, int v, const Slice& s, bool reduced) {
  const int slot = slot_for_leaf(s.concat);
  if (!last_writer.count(s.concat) &&
      std::find(st.writes.begin(), st.writes.end(), slot) == st.writes.end())
    st.writes.push_back(slot); // the first step that writes a piece allocates the concat
  last_writer[s.concat] = static_cast<int>(sched.steps.size()); // st's index once pushed
  st.notes.push_back({origin(root), true, Why::concat_slice});
  return {v, slot, root->dtype, s.strides, s.offset, origin(root), reduced};
}

// concat: the pieces whose kernels did not write their slice (plan_slices) are copied into
// it, all of them by one copy kernel with a segment per piece (several kernels past the
// segment and parameter limits). The step that writes last realizes the concat.
void StepBuilder::concat_steps(Node* c) {
  int out = slot_for_leaf(c);
  Shape ostrides = contiguous_strides(c->shape());
  bool allocated = last_writer.count(c) > 0;
  std::vector<FusedKernel> copies_of_pieces;
  std::vector<Origin> sources;
  int64_t at = 0;
  for (Node* x : c->inputs) {
    const int64_t offset = at * ostrides[c->dim];
    at += x->shape()[c->dim];
    if (written_pieces.count(x)) continue;
    auto [slot, l] = operand(*this, x);
    FusedKernel& k = copies_of_pieces.emplace_back();
    k.shape = x->shape();
    KernelInput in{slot, x->dtype, l.strides, l.offset, classify(k.shape, l.strides), origin(x)};
    k.inputs.push_back(in);
    TapeInst ld;
    ld.dtype = x->dtype;
    ld.a = 0;
    k.tape.push_back(ld);
    k.outputs.push_back({0, out, c->dtype, ostrides, offset, origin(c)});
    sources.push_back(origin(x));
  }
  for (size_t i = 0; i < copies_of_pieces.size();) {
    Step piece;
    piece.device = c->device;
    FusedKernel& k = piece.kernel()->kernel;
    int64_t fields = 0;
    size_t j = i;
    for (; j < copies_of_pieces.size() && j - i < kMaxKernelSegments; ++j) {
      fields += segment_param_fields(copies_of_pieces[j]);
      if (j > i && fields > kMaxParamFields) break;
    }
    for (size_t p = i; p < j; ++p)
      note_input(*this, piece, copies_of_pieces[p].inputs[0].slot, sources[p]);
    if (j == i + 1) {
      k = std::move(copies_of_pieces[i]);
    } else {
      for (size_t p = i; p < j; ++p) k.append_segment(copies_of_pieces[p]);
    }
    if (!allocated) piece.writes.push_back(out);
    allocated = true;
    last_writer[c] = static_cast<int>(sched.steps.size());
    sched.steps.push_back(std::move(piece));
    i = j;
  }
  Step& last = sched.steps[last_writer[c]];
  last.realizes.push_back(static_cast<int>(c->walk_index));
  last.notes.push_back({origin(c), true, info(c)->reason});
}

} // namespace kiln::detail
