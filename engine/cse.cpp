// Common subexpression elimination at record time (see cse.h).
//
// Why at record time rather than as a planner pass: a Tensor handle points at its Node, so a
// plan-time pass could not point the second handle at the first node; it would have to turn
// the duplicate into an alias node and rewire its consumers. At record time `publish` simply
// hands out the existing node (one more handle) and frees the new one, so liveness stays the
// plain handles/uses count, the pending graph (and its node limit) only holds distinct work,
// and the planner never sees duplicates. The price is one hash and one table probe per
// recorded op, plus one erase when a node is realized or destroyed (see bench/record_cost).
//
// Only pending nodes are in the table: a realized value is not recomputed anyway, and keeping
// realized nodes would let the table decide what memory stays alive.
#include "engine/cse.h"
#include "ir/hash.h"

#include <llvm/ADT/DenseSet.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace kiln::detail {

namespace {

uint64_t bits(double d) {
  uint64_t u;
  std::memcpy(&u, &d, sizeof u); // bitwise: 0.0 and -0.0 are different constants
  return u;
}

// Pending constants are compared by value (see cse.h), other inputs by identity.
bool same_input(const Node* a, const Node* b) {
  return a == b || (a->op == OpCode::constant && b->op == OpCode::constant &&
                    a->dtype == b->dtype && a->device == b->device && a->shape() == b->shape() &&
                    bits(a->scalar) == bits(b->scalar) && a->iscalar == b->iscalar);
}

bool same_structure(const Node* a, const Node* b) {
  if (a->op != b->op || a->dtype != b->dtype || a->device != b->device ||
      a->inputs.size() != b->inputs.size() || a->shape() != b->shape())
    return false;
  for (size_t i = 0; i < a->inputs.size(); ++i)
    if (!same_input(a->inputs[i], b->inputs[i])) return false;
  // Random sources compare seed and counter: two draws are merged only when they would
  // produce the same numbers.
  llvm::SmallVector<uint64_t, 32> wa, wb; // a view of rank 8 has 27 words: no heap
  a->visit_attrs(a->op, a->layout, [&](uint64_t w) { wa.push_back(w); });
  b->visit_attrs(b->op, b->layout, [&](uint64_t w) { wb.push_back(w); });
  return wa == wb;
}

// The node's kind (op, dtype, device, shape, attributes: op_kind_hash, which the loop detector
// reads too) with its inputs: constants by value, other inputs by identity. One
// multiply-xorshift round per input: llvm::hash_combine over every field cost ~30 ns per op
// (bench/record_cost), a sixth of the recording budget.
unsigned structural_hash(const Node* n, uint64_t kind) {
  uint64_t h = kind;
  for (const Node* in : n->inputs)
    h = hash_mix(h, in->op == OpCode::constant
                        ? bits(in->scalar) ^ static_cast<uint64_t>(in->shape().size()) << 56 ^
                              static_cast<uint64_t>(in->dtype) << 48
                        : reinterpret_cast<uintptr_t>(in));
  return static_cast<unsigned>(h ^ (h >> 32));
}

// Table entries carry the hash next to the pointer, so probing past other entries compares
// integers in the table instead of loading each probed node (a cache miss per probe).
struct Entry {
  Node* n;
  unsigned hash;
};

struct EntryInfo {
  static Entry getEmptyKey() { return {llvm::DenseMapInfo<Node*>::getEmptyKey(), 0}; }
  static Entry getTombstoneKey() { return {llvm::DenseMapInfo<Node*>::getTombstoneKey(), 0}; }
  static unsigned getHashValue(const Entry& e) { return e.hash; }
  static bool isEqual(const Entry& a, const Entry& b) {
    if (a.n == b.n) return true;
    if (a.hash != b.hash) return false;
    auto special = [](const Node* n) { return n == getEmptyKey().n || n == getTombstoneKey().n; };
    return !special(a.n) && !special(b.n) && same_structure(a.n, b.n);
  }
};

struct Table {
  llvm::DenseSet<Entry, EntryInfo> set;
  llvm::DenseSet<uint64_t> merged_kinds;
  size_t peak = 0;   // most entries since the table was last emptied
  size_t erased = 0; // erases (tombstones) since the buckets were last reset
};

// DenseSet<uint64_t> reserves its two largest values as markers.
uint64_t storable(uint64_t kind) {
  return kind >= ~uint64_t(1) ? 0 : kind;
}
constexpr size_t kMaxMergedKinds = 4096;

// Moves whenever the merged kinds change (cse_merged_kinds_version). Starts at 1: 0 is "never
// asked" to those who keep an answer.
uint64_t merged_kinds_version = 1;

Table& table() {
  static auto* t = new Table; // never destroyed: static tensors may release nodes after main
  return *t;
}

} // namespace

Node* cse_find_or_insert(Node* n, uint64_t kind) {
  if (n->op == OpCode::constant) return n; // never merged themselves, see cse.h
  n->cse_hash = structural_hash(n, kind);
  Table& t = table();
  auto [it, inserted] = t.set.insert({n, n->cse_hash});
  if (inserted) {
    n->in_cse = true;
    t.peak = std::max(t.peak, static_cast<size_t>(t.set.size()));
  }
  return it->n;
}

void cse_erase_entry(Node* n) {
  Table& t = table();
  t.set.erase({n, n->cse_hash});
  n->in_cse = false;
  // An erase leaves a tombstone, and a probe for a new node only stops at an empty bucket, so
  // tombstones piling up as nodes are realized or dropped lengthen every record. The pending
  // graph empties at most evaluations: reset the buckets then, sized for the most entries the
  // table held since the last reset, so that a loop's next step records without growing the
  // table. Not for the most it ever held: every reset writes all the buckets it reserves, and
  // one flush of 10,000 pending nodes made every later step of a small loop pay for 32,768
  // buckets (the seed loop at d = 4 on the CPU: 2.9 us per step before, 9.5 after). A loop
  // without eval never empties it (each flush leaves the next body's first op pending): once
  // the tombstones outnumber the entries four to one, the live entries move to fresh buckets
  // (the same loop recorded 1.05 -> 0.87 us per step on the dev box).
  ++t.erased;
  if (t.set.empty()) {
    t.set.clear();
    t.set.reserve(t.peak);
    t.peak = 0;
    t.erased = 0;
  } else if (t.erased > 4 * t.set.size() + 256) {
    llvm::DenseSet<Entry, EntryInfo> fresh;
    fresh.reserve(t.peak);
    for (const Entry& x : t.set) fresh.insert(x);
    t.set.swap(fresh);
    t.peak = t.set.size();
    t.erased = 0;
  }
}

// A loop's ops that merge do so from its first bodies: a value computed twice in a step, or one
// of loop-invariant inputs (`sigmoid(x)` of a fixed x) that merges with the previous body's while
// that is pending. The seed, LSTM and GRU loops never merge; there the table's hash, probe and
// erase were ~8% of a recorded step's host instructions and ~12% of its mispredicted branches
// (cachegrind, the GRU cell at hidden 4 without eval). A kind that first merges after the loop
// was confirmed (a repeat that depends on the data) is computed twice instead: the same values,
// a little more work. So is every kind, until the loop is found again, after the set fills up
// and starts afresh (a program with more than kMaxMergedKinds merging kinds).
void cse_note_merged(uint64_t kind) {
  Table& t = table();
  if (t.merged_kinds.size() >= kMaxMergedKinds) {
    t.merged_kinds.clear();
    ++merged_kinds_version;
  }
  if (t.merged_kinds.insert(storable(kind)).second) ++merged_kinds_version;
}

uint64_t cse_merged_kinds_version() {
  return merged_kinds_version;
}

bool cse_kind_merged(uint64_t kind) {
  const Table& t = table();
  return !t.merged_kinds.empty() && t.merged_kinds.contains(storable(kind));
}

void cse_forget_merged_kinds() {
  table().merged_kinds.clear();
  ++merged_kinds_version;
}

size_t cse_table_buckets() {
  return table().set.getMemorySize() / sizeof(Entry);
}

size_t cse_table_erased() {
  return table().erased;
}

size_t cse_table_entries() {
  return table().set.size();
}

} // namespace kiln::detail
