#pragma once
// FusedKernel: the planner's product and the backends' input. Plain data: a code generator can
// render it as source (codegen/), the CPU backend interprets it (runtime/cpu/).
//
// A kernel iterates over `shape` (its iteration space). Each input is read through an index
// map (strides and offset in elements over the iteration space, 0 strides for broadcast dims).
// The tape is in SSA form: instruction i defines value i from earlier values. Elementwise
// kernels store values through output index maps.
//
// Reduce kernels fold over the axes in `reduce_axes`: each kept position (an "output row")
// owns the elements of the reduced axes. A reduction is a tape instruction (op sum, mean, max,
// min or argmax; operand a) whose value is the folded result of its row, broadcast over the
// row. Later instructions may use it: softmax is max, then sum(exp(x - max)), then
// exp(x - max) / sum, one kernel that loops over each row once per reduction level (see
// ReducePasses). Outputs are either per-row (`reduced`: a reduction's result) or over the
// whole iteration space.
#include "ir/layout.h"
#include "ir/ops_table.h"

#include <kiln/dtype.h>

#include <string>
#include <vector>

namespace kiln::detail {

/// Which graph node a kernel operand is, for plan dumps (formatted only when asked for).
struct Origin {
  uint64_t id = 0;
  OpCode op = OpCode::buffer;
};

/// How an input is indexed; part of a kernel's structural key (sizes are not).
enum class IndexClass : uint8_t {
  contiguous, // offset + linear index
  scalar,     // one element, every stride 0
  strided,    // general strides (broadcast, transposed, sliced, ...)
};
const char* index_class_name(IndexClass c);

struct KernelInput {
  int slot = 0; // schedule buffer slot
  DType dtype = DType::f32;
  Shape strides; // over the kernel's iteration space
  int64_t offset = 0;
  IndexClass cls = IndexClass::strided;
  Origin origin;
};

struct TapeInst {
  OpCode op = OpCode::load;
  DType dtype = DType::f32;       // dtype of the value this instruction defines
  int a = -1, b = -1, c = -1;     // operands (value ids); for load: a = input index
  double imm = 0, imm2 = 0;       // constant value; iota start/step
  int64_t iimm = 0;               // constant value for integer dtypes
  uint64_t seed = 0, counter = 0; // rand
};

struct KernelOutput {
  int value = 0; // tape value stored
  int slot = 0;
  DType dtype = DType::f32;
  Shape strides; // over the iteration space; for `reduced` outputs over the kept dims (in order)
  int64_t offset = 0;
  Origin origin;
  bool reduced = false; // one element per output row (the value is a reduction)
};

/// A small matmul's value, computed where an elementwise kernel reads it (tape op `matmul`,
/// operand a = index into FusedKernel::dots): at each element i, the dot product
///   sum over k < K of  A[a(i) + k * a_k] * B[b(i) + k * b_k]
/// where a(i) and b(i) are inputs a and b's index maps: where element i's row of A and column
/// of B start. Inputs a and b are never loaded by the tape (they may be shared with loads that
/// read the same memory at the same map). Accumulates in float (double for f64), as cuBLAS.
struct KernelDot {
  int a = 0, b = 0; // indices into FusedKernel::inputs
  int64_t K = 0, a_k = 0, b_k = 0;
  // The first dot of the kernel with the same K (its own index if none): such dots share one
  // loop over K in generated code, all their loads in flight at once. Structural (in the key).
  int same_k = 0;
};

/// One iteration space of a segmented kernel (FusedKernel::segments): its inputs, tape
/// instructions and outputs are the ranges of the kernel's lists that end where this segment's
/// `*_end` say and begin where the previous segment's end (the first segment's at 0).
struct KernelSegment {
  Shape shape;
  int inputs_end = 0, tape_end = 0, outputs_end = 0;
};

struct FusedKernel {
  enum class Kind : uint8_t { elementwise, reduce } kind = Kind::elementwise;
  Shape shape; // iteration space; a segmented kernel: {total elements of its segments}
  std::vector<KernelInput> inputs;
  std::vector<TapeInst> tape;
  std::vector<KernelOutput> outputs;
  uint32_t reduce_axes = 0;    // reduce: bitmask over `shape`
  std::vector<KernelDot> dots; // elementwise only
  // Horizontal fusion: independent elementwise kernels without dots, each over its own
  // iteration space, launched as one (a parameter group's optimizer updates). Empty: one
  // space, `shape`. Operand, value and input indices are the kernel's (global); segment()
  // gives one segment as a kernel of its own. The segments run in any order, concurrently.
  std::vector<KernelSegment> segments;
  // Computed to the same bits on every device (kiln::set_reproducible): f32 exp, tanh and
  // sigmoid from ir/float_math.h; floating sums and dot products accumulated in double-double,
  // whose rounded total does not depend on the order of the additions (so not on the layout or
  // the device). Structural (in the key).
  bool reproducible = false;

  bool segmented() const { return !segments.empty(); }
  /// Segment s of a segmented kernel as a kernel of its own (indices renumbered from 0).
  FusedKernel segment(int s) const;
  /// Append `part` (an unsegmented elementwise kernel without dots) as the next segment; the
  /// inverse of segment(). Start from a default FusedKernel.
  void append_segment(const FusedKernel& part);
  /// The segment whose outputs include output o, inputs input j (0 for an unsegmented kernel).
  int segment_of_output(int o) const;
  int segment_of_input(int j) const;
  /// The iteration space output o is stored over.
  const Shape& output_space(int o) const;

  /// Whether input j is an operand of a dot (read along K, not at its own index only).
  bool dot_operand(int j) const;

  /// Compute instructions (not loads or constants): the ops this kernel fuses.
  int compute_ops() const;
};

/// How a reduce kernel walks each row: pass p evaluates the values of level <= p, folds the
/// reductions whose operand has level p, and stores the whole-space outputs of level p. A
/// reduction's result has its operand's level + 1 (it is known only after that pass).
struct ReducePasses {
  std::vector<int8_t> level; // per tape value
  int passes = 0;
};
ReducePasses reduce_passes(const FusedKernel& k);
bool is_reduction(OpCode op);

/// C = A @ B over broadcast batch dims; every operand has rank batch + 2.
struct GemmStep {
  DType dtype = DType::f32;
  Shape out_shape;
  int a_slot = 0, b_slot = 0, out_slot = 0;
  Layout a, b; // index maps of the operands (shape batch..., M, K and batch..., K, N)
};

} // namespace kiln::detail
