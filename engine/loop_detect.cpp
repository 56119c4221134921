#include "engine/loop_detect.h"

#include "ir/hash.h"

#include <algorithm>
#include <bit>

namespace kiln::detail {

namespace {

// Distinct signatures remembered before the table starts over (code that does not repeat).
constexpr size_t kMaxRemembered = 4096;

// The op's kind and its inputs' kinds (one level: the inputs' own inputs would make every
// step's signature depend on all the steps before it). The previous step's state reads the same
// whether still pending or realized by a flush, and a loop-invariant value that CSE keeps
// pending does not look new in every step.
uint64_t signature(const Node* n, uint64_t own_kind) {
  uint64_t h = own_kind;
  for (const Node* in : n->inputs) h = hash_mix(h, in->loop_kind);
  return h;
}

} // namespace

uint64_t op_kind_hash(const Node* n) {
  uint64_t h = static_cast<uint64_t>(n->op) | static_cast<uint64_t>(n->dtype) << 8 |
               static_cast<uint64_t>(n->device.kind) << 16 |
               static_cast<uint64_t>(static_cast<uint32_t>(n->device.index)) << 24 |
               static_cast<uint64_t>(n->inputs.size()) << 40;
  for (int64_t d : n->shape()) h = hash_mix(h, static_cast<uint64_t>(d));
  if (!has_attrs(n->op)) return hash_mix(h, 0);
  // The attributes, mostly zero, folded into one word before one round: a collision only
  // costs the loop detector a period proposed wrongly, or CSE a comparison.
  uint64_t attrs = 0;
  int r = 0;
  n->visit_attrs(
      n->op, n->layout, [&](uint64_t w) { attrs ^= std::rotl(w, r), r = (r + 13) & 63; }, false);
  return hash_mix(h, attrs);
}

void LoopDetector::note(Node* n, uint64_t kind) {
  n->loop_kind = kind;
  const uint64_t sig = signature(n, n->loop_kind);
  ++pos_;
  if (period_ > 0 && ring_[static_cast<size_t>((pos_ - period_) % kMaxPeriod)] == sig) {
    if (++run_ == period_ && !confirmed_) { // one whole body matched the one before it
      confirmed_ = true;
      ++confirmations_;
      anchor_ = pos_ + 1;
    }
    ring_[static_cast<size_t>(pos_ % kMaxPeriod)] = sig;
    // In a steady loop the table of latest positions is left alone (the common case costs a
    // hash and a compare); on a mismatch a stale entry only proposes a longer period first.
    if (confirmed_) return;
  } else {
    auto it = last_.find(sig);
    const int64_t p = it == last_.end() ? 0 : pos_ - it->second;
    if (confirmed_) lost_at_ = pos_, lost_period_ = period_;
    period_ = p > 0 && p <= kMaxPeriod ? p : 0;
    run_ = period_ > 0 ? 1 : 0;
    confirmed_ = false;
  }
  if (last_.size() >= kMaxRemembered) last_.clear();
  last_[sig] = pos_;
  ring_[static_cast<size_t>(pos_ % kMaxPeriod)] = sig;
}

void LoopDetector::reset() {
  *this = LoopDetector();
}

} // namespace kiln::detail
