// The walk of an evaluation's pending graph and its structural key. The key must cover every
// input of the planner's decisions (engine/planner.cpp, kernel_builder.cpp, buffer_reuse.cpp):
// if two evaluations have equal keys, one's Schedule is correct for the other with nodes bound
// by walk index. It therefore records values, not just shapes: constants (their values are
// kernel parameters baked into the plan), random seeds and counters, the strides of realized
// inputs (not their offsets: each has a slot of its own), and the counts that liveness and
// in-place reuse read (uses as readers in the walk, and whether there are others).
#include "engine/plan_key.h"

#include "engine/graph.h"
#include "ir/hash.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/SmallVector.h>

#include <algorithm>
#include <bit>
#include <limits>
#include <unordered_map>

namespace kiln::detail {

namespace {

// One node's words, gathered before they join the key in one insert: a push_back per word,
// its capacity check each time, was a third of the walk's instructions (callgrind). At most
// kMaxWords: put_node's 2 + rank, visit_attrs' 6 (a view's 5 + 2 ranks more), put_storage's
// 5 + rank; the inputs are appended apart (a concat may have any number).
struct NodeWords {
  static constexpr int kMaxWords = 2 + kMaxRank + 6 + 5 + 2 * kMaxRank + 5 + kMaxRank;
  uint64_t w[kMaxWords];
  int n = 0;
  void put(uint64_t x) { w[n++] = x; }
  void put_shape(const Shape& s) {
    for (int i = 0; i < s.size(); ++i) w[n++] = static_cast<uint64_t>(s[i]);
  }
};

// Where the key's words go: compared with the expected key while they agree, written from the
// first word that differs (after the agreeing prefix, copied from the expected key).
class KeyWriter {
public:
  KeyWriter(std::vector<uint64_t>& k, ExpectedKey expect)
      : k_(k), expect_(expect.key), matching_(expect.key != nullptr) {}
  void put(const uint64_t* w, size_t n) {
    if (matching_) {
      if (pos_ + n <= expect_->size() && std::equal(w, w + n, expect_->data() + pos_)) {
        pos_ += n;
        return;
      }
      diverge();
    }
    k_.insert(k_.end(), w, w + n);
  }
  void put(const NodeWords& words) { put(words.w, static_cast<size_t>(words.n)); }
  void put(uint64_t x) { put(&x, 1); }
  /// Whether every word agreed and the expected key has no more; else the key is written.
  bool finish() {
    if (matching_ && pos_ == expect_->size()) return true;
    if (matching_) diverge();
    return false;
  }

private:
  void diverge() {
    matching_ = false;
    k_.assign(expect_->begin(), expect_->begin() + static_cast<std::ptrdiff_t>(pos_));
  }
  std::vector<uint64_t>& k_;
  const std::vector<uint64_t>* expect_;
  bool matching_;
  size_t pos_ = 0;
};

// A hash of the key for the cache's map (a hit compares the whole key anyway). Four independent
// multiply-xorshift lanes: the key has a few hundred words per small step, and
// llvm::hash_combine_range took ~0.3 us of an LSTM step's ~2 us of evaluation host work (perf);
// this saves ~0.2 us of it (bench/plan_cost).
uint64_t hash_words(const std::vector<uint64_t>& k) {
  uint64_t lane[4] = {k.size(), 0x243f6a8885a308d3ull, 0x13198a2e03707344ull,
                      0xa4093822299f31d0ull};
  constexpr auto mix = hash_mix;
  size_t i = 0;
  for (; i + 4 <= k.size(); i += 4)
    for (int j = 0; j < 4; ++j) lane[j] = mix(lane[j], k[i + j]);
  for (; i < k.size(); ++i) lane[0] = mix(lane[0], k[i]);
  uint64_t h = lane[0];
  for (int j = 1; j < 4; ++j) h = mix(h, lane[j]);
  return mix(h, h >> 32);
}

// The first node holding each buffer. A step reads a handful of buffers, where
// a linear search beats a hash map (whose first insert allocates its buckets every walk); past
// kLinear buffers (a long loop recorded without evaluation reads thousands) a map takes over.
class FirstHolders {
public:
  struct Seen {
    const Buffer* buffer;
    uint32_t first;
  };
  const Seen& find_or_add(const Buffer* b, uint32_t walk_index) {
    if (list_.size() <= kLinear) {
      for (const Seen& x : list_)
        if (x.buffer == b) return x;
    } else if (auto it = index_.find(b); it != index_.end()) {
      return list_[it->second];
    }
    list_.push_back(Seen{b, walk_index});
    if (list_.size() > kLinear) {
      if (index_.empty())
        for (size_t i = 0; i + 1 < list_.size(); ++i) index_[list_[i].buffer] = uint32_t(i);
      index_[b] = uint32_t(list_.size() - 1);
    }
    return list_.back();
  }

private:
  static constexpr size_t kLinear = 32;
  llvm::SmallVector<Seen, 16> list_;
  llvm::DenseMap<const Buffer*, uint32_t> index_;
};

// A pending node's static words: op, dtype, device, rank and inputs, its shape, and the
// attributes of ops that have them (constants' values left out: a replay writes each run's).
void put_static_words(NodeWords& k, const Node* n) {
  k.put(static_cast<uint64_t>(n->op) | static_cast<uint64_t>(n->dtype) << 8 |
        static_cast<uint64_t>(n->device.kind) << 16 |
        static_cast<uint64_t>(static_cast<uint8_t>(n->device.index)) << 24 |
        static_cast<uint64_t>(n->shape().size()) << 40 |
        static_cast<uint64_t>(n->inputs.size()) << 48);
  k.put_shape(n->shape());
  // An op without attributes has them all zero: its kind, in the first word, says so.
  if (has_attrs(n->op))
    n->visit_attrs(
        n->op, n->layout, [&](uint64_t x) { k.put(x); }, /*constant_values=*/false);
}

// The first word of a node keyed by its token: its op byte is one no op has, so that it never
// reads as a node whose words are spelled out.
constexpr uint64_t kTokenTag = 0xff;
static_assert(std::size(kOpTable) < kTokenTag);

// Interned static words (static_words_token). Keyed by the node's kind (a hash of the same
// words), chained where kinds collide, so that a token always stands for one sequence of words.
class TokenTable {
public:
  uint32_t token(const Node* n, uint64_t kind) {
    NodeWords w;
    put_static_words(w, n);
    auto [it, fresh] = first_.try_emplace(kind, -1);
    for (int i = it->second; i >= 0; i = entries_[static_cast<size_t>(i)].next) {
      const Entry& e = entries_[static_cast<size_t>(i)];
      if (std::equal(e.words.begin(), e.words.end(), w.w, w.w + w.n)) return e.token;
    }
    if (last_ == std::numeric_limits<uint32_t>::max()) return 0;
    if (entries_.size() >= kMaxEntries) { // tokens are never reused: old ones stay exact
      entries_.clear();
      first_.clear();
      it = first_.try_emplace(kind, -1).first;
    }
    entries_.push_back(Entry{{w.w, w.w + w.n}, ++last_, it->second});
    it->second = static_cast<int>(entries_.size() - 1);
    return last_;
  }

private:
  static constexpr size_t kMaxEntries = size_t(1) << 16;
  struct Entry {
    llvm::SmallVector<uint64_t, 8> words;
    uint32_t token;
    int next; // the entry before it of the same kind, or -1
  };
  std::unordered_map<uint64_t, int> first_; // kind -> its latest entry
  std::vector<Entry> entries_;
  uint32_t last_ = 0;
};

// A node's kind, its readers in the walk (`here`) and whether it has others, and its shape.
void put_node(NodeWords& k, const Node* n, uint32_t here, bool others) {
  k.put(static_cast<uint64_t>(n->op) | static_cast<uint64_t>(n->dtype) << 8 |
        static_cast<uint64_t>(n->device.kind) << 16 |
        static_cast<uint64_t>(static_cast<uint8_t>(n->device.index)) << 24 |
        static_cast<uint64_t>(n->realized()) << 32 | static_cast<uint64_t>(n->internal) << 33 |
        static_cast<uint64_t>(n->handles > 0) << 34 |
        static_cast<uint64_t>(n->shape().size()) << 40 |
        static_cast<uint64_t>(n->inputs.size()) << 48);
  k.put(here | static_cast<uint64_t>(others) << 32);
  k.put_shape(n->shape());
}

// A realized node's storage. Its offset is not part of the key, so that a slice at a new
// offset each step (x[t] of a sequence) reuses the plan: each realized node has a slot of its
// own, whose base the executor moves by the change (Slot::leaf_offset). Keyed instead: which
// nodes share a buffer (`first`: the first holder's position; in-place reuse must see them
// all), and what in-place reuse reads of a buffer with at most kMaxDonorRefs references
// (buffer_reuse.cpp): the count, and whether the offset is 0 (it needs a whole buffer read from
// its start). A sequence read by many row views has more, and keys alike wherever its rows are.
void put_storage(NodeWords& k, const Node* n, uint32_t first) {
  const Buffer* b = n->buffer.get();
  k.put(first);
  const bool donor = b->use_count() <= kMaxDonorRefs;
  k.put(donor ? b->use_count() : kMaxDonorRefs + 1);
  k.put(donor && n->layout.offset == 0);
  k.put(b->bytes);
  k.put(b->external()); // adopted memory is never written in place (buffer_reuse.cpp)
  k.put_shape(n->layout.strides);
}

// Sorts a walk's nodes by id. When the walk holds most pending nodes (a loop's flush holds all
// but the next body's first op), the pending list, newest first, already has them in order:
// they are taken from it and merged with the realized nodes (a few weights and states), sorted
// apart. Sorting by id through node pointers was about a sixth of the walk's instructions.
void in_creation_order(std::vector<Node*>& nodes, int64_t pending, uint64_t stamp) {
  auto by_id = [](const Node* a, const Node* b) { return a->id < b->id; };
  const EngineState& e = engine();
  if (pending == 0 || pending * 2 < e.pending_nodes) {
    std::sort(nodes.begin(), nodes.end(), by_id);
    return;
  }
  llvm::SmallVector<Node*, 16> realized;
  for (Node* n : nodes)
    if (n->realized()) realized.push_back(n);
  std::sort(realized.begin(), realized.end(), by_id);
  std::vector<Node*> listed; // the walk's pending nodes, newest first
  listed.reserve(static_cast<size_t>(pending));
  for (Node* n = e.pending_head; n; n = n->next_pending)
    if (n->walk_stamp == stamp) listed.push_back(n);
  if (realized.size() + listed.size() != nodes.size()) { // every pending node is listed
    std::sort(nodes.begin(), nodes.end(), by_id);
    return;
  }
  std::merge(realized.begin(), realized.end(), listed.rbegin(), listed.rend(), nodes.begin(),
             by_id);
}

} // namespace

void leaf_key(llvm::ArrayRef<Node*> leaves, llvm::ArrayRef<bool> others, std::vector<uint64_t>& k) {
  FirstHolders buffers;
  for (size_t i = 0; i < leaves.size(); ++i) {
    const Node* n = leaves[i];
    NodeWords words;
    put_node(words, n, 0, others[i]);
    put_storage(words, n, buffers.find_or_add(n->buffer.get(), static_cast<uint32_t>(i)).first);
    k.insert(k.end(), words.w, words.w + words.n);
  }
}

uint32_t static_words_token(const Node* n, uint64_t kind) {
  static TokenTable table;
  return table.token(n, kind);
}

uint64_t planning_flags() {
  EngineState& e = engine();
  e.cublas_ready = cublas_ready_kinds(); // what the planning that follows sees (small_matmul.cpp)
  return static_cast<uint64_t>(e.small_matmul) | uint64_t(e.group_launches) << 8 |
         uint64_t(e.defer_held) << 9 | uint64_t(e.reproducible) << 10 |
         uint64_t(cublas_enabled()) << 11 | uint64_t(cublas_waits()) << 12 |
         uint64_t(e.cublas_ready) << 16;
}

uint64_t next_walk_stamp() {
  static uint64_t stamp = 0; // 0 is "never walked"
  return ++stamp;
}

void walk_pending(llvm::ArrayRef<Node*> targets, Walk& w, ExpectedKey expect, bool spell_out) {
  w.nodes.clear();
  w.tokens = false;
  w.targets.clear();
  w.key.clear();
  const uint64_t stamp = next_walk_stamp();
  // A long loop's flush walks hundreds of nodes that later recording pushed out of the host's
  // caches, so each pass over them is mostly misses: the readers are counted as the walk finds
  // them, and the index and the key come from one pass in creation order.
  llvm::SmallVector<Node*, 32> stack;
  int64_t pending = 0;
  auto discover = [&](Node* n) {
    if (n->walk_stamp == stamp) return;
    n->walk_stamp = stamp;
    n->walk_uses = 0;
    w.nodes.push_back(n);
    pending += !n->realized();
    stack.push_back(n);
  };
  for (Node* t : targets) discover(t);
  while (!stack.empty()) {
    Node* n = stack.pop_back_val();
    for (Node* in : n->inputs) { // realized nodes have no inputs
      discover(in);
      in->walk_uses++;
    }
  }
  // Creation order: inputs come before their consumers, and a loop step that records the same
  // ops in the same order walks to the same sequence.
  in_creation_order(w.nodes, pending, stamp);
  // The planner reads a node's uses as its readers in this walk and whether others exist
  // (mark.cpp, buffer_reuse.cpp, concat_slices.cpp): keyed so, a value that every body of a
  // long pending loop reads (a CSE-shared view of a weight) keys alike whatever the number of
  // bodies outside the walk.
  w.uses.resize(w.nodes.size());
  KeyWriter k(w.key, expect);
  k.put(planning_flags());
  FirstHolders buffers;
  for (size_t i = 0; i < w.nodes.size(); ++i) {
    Node* n = w.nodes[i];
    n->walk_index = static_cast<uint32_t>(i); // its inputs, created before it, have theirs
    const uint32_t here = w.uses[i] = n->walk_uses;
    NodeWords words;
    if (n->realized()) {
      put_node(words, n, here, n->uses != here);
      put_storage(words, n, buffers.find_or_add(n->buffer.get(), n->walk_index).first);
      k.put(words);
      continue;
    }
    if (n->key_token != 0 && !spell_out) { // it stands for put_node's words and the attributes
      w.tokens = true;
      words.put(kTokenTag | static_cast<uint64_t>(n->internal) << 8 |
                static_cast<uint64_t>(n->handles > 0) << 9 |
                static_cast<uint64_t>(n->inputs.size()) << 16 |
                static_cast<uint64_t>(n->key_token) << 32);
      words.put(here | static_cast<uint64_t>(n->uses != here) << 32);
    } else {
      put_node(words, n, here, n->uses != here);
      // An op without attributes has them all zero: its kind, in the first word, says so.
      if (has_attrs(n->op))
        n->visit_attrs(
            n->op, n->layout, [&](uint64_t x) { words.put(x); }, /*constant_values=*/false);
    }
    // The inputs' positions join the node's words in one put where they fit (a concat may have
    // more inputs than words left).
    if (n->inputs.size() <= static_cast<size_t>(NodeWords::kMaxWords - words.n)) {
      for (Node* in : n->inputs) words.put(in->walk_index);
      k.put(words);
    } else {
      k.put(words);
      for (Node* in : n->inputs) k.put(in->walk_index);
    }
  }
  for (Node* t : targets) {
    w.targets.push_back(static_cast<int>(t->walk_index));
    k.put(t->walk_index);
  }
  w.matched = k.finish();
  w.hash = w.matched ? expect.hash : hash_words(w.key);
}

} // namespace kiln::detail
