#pragma once
// Random loops for the differential fuzzer (kiln_fuzz --mode loops): state carried from step to
// step through a random body of op calls, run for a random number of steps without eval (or with
// an eval every few steps), on odd steps now and then with other operands (a broadcast row, an
// integer scalar, a transposed matrix, another slice), so that a confirmed loop records most of
// its calls from loop templates (engine/loop_template.h) and some of them not. A loop is made
// again from its seed for every run: lazily with templates and without, and eagerly; the runs
// must give the same bits, and the two lazy runs the same kernels and the same stats.
#include "program.h"

#include <kiln/kiln.h>

#include <cstdint>
#include <set>
#include <string>

namespace kfuzz {

struct LoopOptions {
  kiln::Device device = kiln::Device::cpu();
  bool eager = false;
  bool templates = true; // loop templates on (KILN_LOOP_TEMPLATE)
  // For narrowing a mismatch down: run this many steps instead (0: the seed's), and leave out
  // the body's statements whose bits are set (bit i: statement i).
  int64_t steps = 0;
  uint64_t drop = 0;
  // Training loops (--train 0 turns them off): 3 loops in 10 train their weights by SGD every
  // step, with their matmuls in kiln's kernels (SmallMatmul::everywhere) unless train_blas.
  bool train = true;
  bool train_blas = false;
};

struct LoopOutcome {
  Outcome out;                   // the values read after the loop, and the loop as C++
  kiln::Stats stats;             // of the loop (from its first step)
  std::set<std::string> kernels; // the keys of the kernels it ran
  int64_t history_left = 0;      // gradient records alive after all its tensors were dropped
};

/// The loop of `seed` as C++, without running it.
std::string loop_code(uint64_t seed, const LoopOptions& opt = {});

/// Records and runs the loop of `seed`; its outputs are evaluated.
LoopOutcome run_loop(uint64_t seed, const LoopOptions& opt);

} // namespace kfuzz
