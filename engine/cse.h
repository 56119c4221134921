#pragma once
// Common subexpression elimination at record time: the table of pending nodes by structure.
//
// Two pending nodes are identical when they have the same op, dtype, device, shape (and, for
// views, layout and view primitive), the same attributes (constant values compared bit for
// bit, random seed and counter, reduction axes, concat dim) and the same inputs by identity.
// Nodes are immutable values, so an op recorded twice can hand out the first node again.
//
// Constants are the exception: a pending constant is never merged with another, and nodes
// reading constants compare them by value instead. Every `x * 2` records its own scalar 2, so
// `x * 2` recorded twice is still one node; but one constant shared by kernels that have
// nothing else in common would be "used by several kernels" and written to memory, where each
// kernel's own copy is just an immediate in its tape.
#include "engine/node.h"

namespace kiln::detail {

/// The pending node structurally identical to `n`, or `n` itself after adding it to the table.
/// `kind`: op_kind_hash(n) (engine/loop_detect.h), which the hash starts from. Sets n->cse_hash.
Node* cse_find_or_insert(Node* n, uint64_t kind);
/// Remove `n`, which is in the table, from it.
void cse_erase_entry(Node* n);
/// Remove `n` from the table (it is being realized or destroyed). No-op if it is not there:
/// inline, as most nodes a loop destroys never were (a confirmed loop's ops skip the table).
inline void cse_erase(Node* n) {
  if (n->in_cse) cse_erase_entry(n);
}
/// The table's bucket count (tests: it shrinks back after a large evaluation).
size_t cse_table_buckets();
/// Entries erased since the buckets were last reset, each a tombstone until an insert reuses
/// its bucket (tests: bounded in a loop whose pending graph never empties).
size_t cse_table_erased();
/// Entries in the table now.
size_t cse_table_entries();

/// Kinds (op_kind_hash) of the ops CSE has merged. In a loop whose repetition the detector has
/// confirmed, an op of a kind never merged skips the table (engine/graph.cpp, publish): the
/// first bodies, recorded before the confirmation, went through it and merged whatever they
/// could, and both sides of a merge have the same kind.
void cse_note_merged(uint64_t kind);
bool cse_kind_merged(uint64_t kind);
/// Changes whenever the merged kinds do (never 0): a loop template's entry keeps
/// cse_kind_merged's answer for its kind until then.
uint64_t cse_merged_kinds_version();
/// Forgets the merged kinds (tests: kinds merged by earlier tests keep their ops in the table).
void cse_forget_merged_kinds();

} // namespace kiln::detail
