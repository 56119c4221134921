#pragma once
// Noticing that the user's op stream repeats (the body of a loop without eval), so that early
// flushes cut it at the same place in the body every time: every flush of k bodies is then the
// same plan (a plan-cache hit and a CUDA-graph replay) instead of a new cut wherever a node
// count happened to fall. See docs/architecture.md, "Adaptive batching".
//
// An op's signature is what it does, not which values: op, dtype, shape, attributes, and what
// its inputs were (0 for values no op recorded, such as weights). The stream repeats with
// period p when each of the last p signatures equals the one p before it.
#include "engine/node.h"

#include <array>
#include <cstdint>
#include <unordered_map>

namespace kiln::detail {

/// What an op is apart from its inputs: op, dtype, device, shape and attributes (constant values
/// left out, as in the plan key: a replay writes each run's values). The loop detector's kind of
/// a node, and where CSE's hash starts (engine/cse.h), so that a recorded op hashes these once.
uint64_t op_kind_hash(const Node* n);

class LoopDetector {
public:
  /// The longest body looked for, in ops.
  static constexpr int64_t kMaxPeriod = 512;

  /// Notes the user's op call that recorded `n`, or found it pending already (CSE): a value that
  /// CSE shares between steps until a flush, and computes once more after it, is the same op
  /// call in every step.
  void note(Node* n, uint64_t kind); // kind: op_kind_hash(n); sets n->loop_kind
  /// The body's length in ops while the stream repeats, else 0.
  int64_t period() const { return confirmed_ ? period_ : 0; }
  /// Whether the op just noted begins a body. Body boundaries stay where they were put when the
  /// repetition was found (anchor_at may move them once), so that every flush cut before a
  /// body's first op covers whole bodies alike.
  bool at_body_start() const {
    return confirmed_ && pos_ >= anchor_ && (pos_ - anchor_) % period_ == 0;
  }
  /// How many times the repetition was confirmed (found, or found again after it was lost).
  int64_t confirmations() const { return confirmations_; }
  /// Bodies begin at `position` (and every period from it) instead; only while confirmed.
  void anchor_at(int64_t position) { anchor_ = position; }
  /// Whether the stream repeats, or did until less than about four bodies ago: one op call that
  /// differs (a branch taken once) does not hand the loop back to node-count flushes while the
  /// repetition is found again.
  bool in_loop() const {
    return confirmed_ || (lost_period_ > 0 && pos_ - lost_at_ < 4 * lost_period_ + 8);
  }
  /// How many ops were noted before the last one (its position in the stream).
  int64_t position() const { return pos_; }
  void reset();

private:
  std::array<uint64_t, kMaxPeriod> ring_{};    // the last signatures, by position % kMaxPeriod
  std::unordered_map<uint64_t, int64_t> last_; // signature -> its latest position
  int64_t pos_ = -1;                           // position of the op just noted
  int64_t period_ = 0;                         // candidate period
  int64_t run_ = 0;                            // ops in a row that matched the op one period before
  int64_t anchor_ = 0; // position where the bodies start, fixed when the period is confirmed
  bool confirmed_ = false;
  int64_t confirmations_ = 0;
  int64_t lost_at_ = 0, lost_period_ = 0; // where the last confirmed repetition ended, its period
};

} // namespace kiln::detail
