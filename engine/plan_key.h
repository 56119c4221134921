#pragma once
// The structural key of an evaluation: everything the planner's decisions depend on, so that
// two evaluations with equal keys can run the same Schedule (engine/plan_cache.h).
#include "engine/node.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/SmallVector.h>

#include <cstdint>
#include <vector>

namespace kiln::detail {

struct Walk {
  /// The pending nodes the targets depend on and the realized nodes they read, in creation
  /// order. A Schedule names nodes by their index here (Node::walk_index).
  std::vector<Node*> nodes;
  llvm::SmallVector<int, 4> targets; // indices of the targets
  /// Per node: op, dtype, device, shape, layout (realized nodes and views), attributes,
  /// liveness (handles, uses, buffer sharing and counts) and inputs by index.
  std::vector<uint64_t> key;
  std::vector<uint32_t> uses; // per node: its readers among the walk's nodes
  uint64_t hash = 0;
  /// The key equals the expected one walk_pending was given: `key` is left empty (it is the
  /// expected one) and `hash` is its hash.
  bool matched = false;
  /// Some node is keyed by its token (Node::key_token) rather than its words spelled out.
  bool tokens = false;
};

/// A key a walk is likely to produce (the last plan's, in a loop), with its hash.
struct ExpectedKey {
  const std::vector<uint64_t>* key = nullptr;
  uint64_t hash = 0;
};

/// In-place reuse (buffer_reuse.cpp) takes only buffers with at most this many references;
/// the key records the count and offsets of those only.
constexpr long kMaxDonorRefs = 4;

/// A fresh value for Node::walk_stamp: a walk marks the nodes it has seen with it (the plan
/// key's walk, kiln::grad's walk of the history), so no set of seen nodes is needed.
uint64_t next_walk_stamp();

/// The settings that change how the same graph is planned, as one word of the key; also takes
/// the copy of cuBLAS's readiness that the planning of this key reads (EngineState::cublas_ready).
uint64_t planning_flags();

/// The number that stands for pending node `n`'s static words (op, dtype, device, shape,
/// attributes: what the plan key would otherwise spell out) in the key, interned: equal words
/// get the same token whatever recorded the node (its front-end or a loop template), so keys
/// of equal graphs stay equal. `kind`: op_kind_hash(n). 0 once the tokens are used up (the key
/// then spells the words out). Given to nodes recorded in a confirmed loop (Node::key_token):
/// a loop's flush keys hundreds of nodes, and comparing their words with the last plan's key
/// was most of its walk's cache misses.
uint32_t static_words_token(const Node* n, uint64_t kind);

/// The words walk_pending keys for a walk's realized nodes (its leaves), in their order: for
/// checking that other realized nodes can stand in for them in the same plan (a replay of a
/// traced evaluation, engine/trace.h). `others`: per leaf, whether pending nodes outside the
/// walk read it.
void leaf_key(llvm::ArrayRef<Node*> leaves, llvm::ArrayRef<bool> others, std::vector<uint64_t>& k);

/// Walk the pending graph of `targets` (pending nodes) and compute its key into `w` (its
/// vectors are reused: a loop step then allocates nothing here). Given the key it is likely to
/// be, the walk compares with it as it goes and writes and hashes a key only where they differ
/// (Walk::matched): a loop's flush keys hundreds of nodes, and writing, hashing and comparing
/// that key were a fifth of its host's cache misses.
/// `spell_out`: key every node by its words, tokens ignored: the plan cache's key. A walk that
/// uses tokens only finds the plan it was given to expect (Walk::matched).
void walk_pending(llvm::ArrayRef<Node*> targets, Walk& w, ExpectedKey expect = {},
                  bool spell_out = false);

} // namespace kiln::detail
