#pragma once
// The stand-in interpreter's program: how codegen/standin.cpp describes a FusedKernel to the
// interpreter kernel (codegen/device/standin.cu, compiled ahead of time by nvcc), which runs
// it while NVRTC compiles the kernel's own binary. Compiled by the host compiler and by nvcc,
// so plain structs of fixed-width fields only.
//
// A launch's argument block (StandinArgs, kArgsBytes) holds, in 8-byte words: word 0 the byte
// position of the Program; words 1.. the kernel's own Params fields, exactly as its compiled
// binary would take them (pointers, sizes, strides, constants: codegen/cuda_params.cpp), so
// that repeated launches patch them the same way; then the Program, its operands, tape and dot
// products (a segmented kernel: a table of Segments, then each distinct segment's Program). The
// interpreter reads it all from the kernel's parameter space (the constant cache: every thread
// reads the same instruction at the same time).
#include <stdint.h>

namespace kiln::detail::standin {

inline constexpr int kArgsBytes = 4096;
inline constexpr int kMaxRank = 8;
inline constexpr int kBlock = 256;  // threads per block, as the generated layouts
inline constexpr int kMaxDots = 24; // shared memory: 256 partial sums of 8 bytes each
inline constexpr uint16_t kNoField = 0xffff;

/// The interpreter's value slots per thread, in local memory: the smallest kernel that holds a
/// program's live values is launched (their local memory is reserved for every resident thread).
inline constexpr int kSmallSlots = 16;
inline constexpr int kLargeSlots = 64;

// Instruction codes: the tape's ops the interpreter runs (its own numbering, so that reordering
// ir/op_table.def cannot change what a compiled interpreter does).
enum Op : uint8_t {
  op_load,
  op_constant,
  op_iota,
  op_rand_uniform,
  op_rand_normal,
  op_copy,
  op_neg,
  op_abs,
  op_relu,
  op_exp,
  op_log,
  op_log1p,
  op_sqrt,
  op_rsqrt,
  op_sin,
  op_cos,
  op_tanh,
  op_sigmoid,
  op_gelu,
  op_logical_not,
  op_cast,
  op_add,
  op_sub,
  op_mul,
  op_div,
  op_pow,
  op_maximum,
  op_minimum,
  op_sigmoid_grad,
  op_tanh_grad,
  op_eq,
  op_ne,
  op_lt,
  op_le,
  op_gt,
  op_ge,
  op_logical_and,
  op_logical_or,
  op_where,
  op_matmul,
  op_sum, // the reductions (the row and column layouts)
  op_mean,
  op_max,
  op_min,
  op_argmax
};
// Element types, in kiln::DType's order (a static_assert in codegen/standin.cpp checks it).
enum Type : uint8_t { t_f32, t_f64, t_f16, t_bf16, t_i32, t_i64, t_bool };
enum Mode : uint8_t { m_contiguous, m_scalar, m_strided };
enum Layout : uint8_t {
  l_elementwise,
  l_dot,
  l_gemm_tile,
  l_row_reduce,    // one output row per block: Emitter::reduce_body
  l_column_reduce, // bx threads along the kept innermost dim: Emitter::column_body
  l_segmented      // several elementwise kernels in one launch: render_segmented
};
// A reduction's accumulator (Emitter::reductions): double for floating sums, float for the
// max/min/argmax of f32/f16/bf16, long long for integers, double-double for f64 sums.
enum Acc : uint8_t { a_double, a_float, a_long, a_dsum };
inline constexpr int kMaxReductions = 8;
// Shared memory the reduce layouts combine through: a block's accumulators and argmax indices.
inline constexpr int kCombineBytes = kBlock * (16 + 8);

struct Operand { // a kernel input or output
  uint8_t type, mode;
  uint8_t from;              // outputs: the type of the value stored
  uint8_t value;             // outputs: the slot of the value stored
  uint16_t ptr;              // the Params field holding its pointer (advanced by its offset)
  uint8_t level;             // reduce kernels, outputs: the pass that stores it
  uint8_t reduced;           // reduce kernels, outputs: one value per output row, stored at the row
  uint16_t stride[kMaxRank]; // strided: the field of dim d's stride, kNoField for 0
};

struct Inst {
  uint8_t op, type; // type: of the value defined
  uint8_t from;     // cast, compare, logical, reductions: the type of operand a
  uint8_t dst;      // the slot the value goes to
  uint8_t a, b, c;  // the operands' slots; reductions: b its Acc, c 1 for a half sum (below)
  uint8_t level;    // reduce kernels: computed in passes >= level (a reduction: folded in
                    // pass level - 1, a row value from pass level on)
  uint16_t field;   // load: the input; constant, iota, rand: its first Params field;
                    // matmul: the dot product; reductions: the accumulator
};
// A half sum (f16/bf16 into f16/bf16) in the row layout's vector walk adds each vector's
// elements in a float first, then that float into its double accumulator.

struct Dot {
  uint16_t a, b;      // the inputs read along K
  uint16_t K, ak, bk; // fields: its length and the operands' strides along K
  uint8_t acc_double;
  uint8_t is_short; // GEMM tile: summed by its element alone (CudaVariant::gemm_short_dots)
};

struct Program {
  uint8_t layout, rank;
  uint16_t n_in, n_out, n_inst, n_dots;
  uint16_t n_field;              // the element count ("n")
  uint16_t shape[kMaxRank];      // fields of the extents (kNoField: no strided operand)
  uint16_t dot_bx, dot_by;       // the dot layout: elements per block, threads per element
  uint16_t cluster;              // the dot layouts: blocks per cluster splitting K
  uint16_t gemm_bk, gemm_groups; // the GEMM tile: its K chunk, and the groups splitting each
  uint16_t r_field;              // reduce: the field of R (n_field is O's)
  uint8_t passes, n_reds;        // reduce: walks over each row, reductions
  uint8_t red_bx, red_v;         // column layout: threads along the columns, columns per thread
  uint8_t row_epv;               // row layout: elements per vector of its vector walk (0: none)
  uint8_t pad[3];
  // Followed by Operand in[n_in], Operand out[n_out], Inst tape[n_inst], Dot dots[n_dots].
  // l_segmented: followed by Segment seg[n_in] instead.
};

// A segment of a segmented kernel: an elementwise Program whose fields count from `base`.
struct Segment {
  uint16_t end;     // the field of the end of its blocks (Params start with the ends)
  uint16_t base;    // its Params' first field
  uint16_t program; // the byte position of its Program in the argument block
};

struct StandinArgs {
  unsigned long long w[kArgsBytes / 8];
};

} // namespace kiln::detail::standin
