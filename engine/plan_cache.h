#pragma once
// The plan cache: schedules keyed by the structure of the pending graph they were planned for
// (engine/plan_key.h), so that an evaluation repeating an earlier one (every step of a loop) is
// not planned again. Entries also keep what backends prepared for running the schedule's GPU
// steps as one batch (launch records, CUDA graphs: runtime/backend.h), so those live and die
// with the plan. Least recently used entries are evicted beyond engine().max_plans.
#include "engine/schedule.h"
#include "runtime/backend.h"

#include <memory>
#include <vector>

namespace kiln::detail {

struct CachedPlan {
  std::vector<uint64_t> key; // every node's words spelled out (walk_pending's spell_out)
  uint64_t hash = 0;
  /// The key of its last evaluation keyed with tokens (a confirmed loop's nodes carry them,
  /// Node::key_token), empty if none: what the next walk of a steady loop compares with, so
  /// that it need not spell out its nodes' words.
  std::vector<uint64_t> token_key;
  uint64_t token_hash = 0;
  std::shared_ptr<Schedule> schedule; // its constants are rewritten by each run
  /// A run of consecutive steps [begin, end) that one backend runs as a batch.
  struct Batch {
    int begin = 0, end = 0;
    std::unique_ptr<StepBatch> run;
  };
  std::vector<Batch> batches;
  bool batches_known = false; // batches were looked for (at the first run)
  int64_t runs = 0;           // evaluations that ran this plan
  /// Per slot, where its output went last time: the next run asks for the same address, so
  /// that a replayed graph's pointers stay put (and need no update) in a steady loop.
  std::vector<const void*> last_data;
};

/// The plan used last, or null: the next evaluation of a loop is likely the same, so its walk
/// compares its key with this one's as it goes (walk_pending's ExpectedKey).
std::shared_ptr<CachedPlan> last_plan();
/// The key of `p` as the key walk_pending should expect (none for null): its token key if it has
/// one, unless `spelled`.
ExpectedKey expected_key(const std::shared_ptr<CachedPlan>& p, bool spelled = false);
/// The plan for the evaluation walked in `w`: the cached one with an equal key, else planned
/// now and cached (counted in stats().plan_hits / plan_misses). `guess`: the plan whose key the
/// walk was given to expect (when w.matched, that plan).
std::shared_ptr<CachedPlan> plan_for(const Walk& w,
                                     const std::shared_ptr<CachedPlan>& guess = nullptr);
/// Whether plan_for(w) would find a cached plan (counts nothing, moves nothing).
bool plan_cached(const Walk& w);
/// The cached plan whose token key is `w`'s (a walk with tokens that did not match the plan it
/// expected: a loop whose evaluations alternate between plans), counted as a hit; else null,
/// nothing counted.
std::shared_ptr<CachedPlan> plan_by_tokens(const Walk& w);
/// `p` keeps `key` (swapped in) and `hash` as its token key, and is found by them.
void set_token_key(const std::shared_ptr<CachedPlan>& p, std::vector<uint64_t>& key, uint64_t hash);
/// Drop least recently used plans until the cache is within engine().max_plans.
void trim_plan_cache();

} // namespace kiln::detail
