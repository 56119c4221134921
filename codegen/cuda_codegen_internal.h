#pragma once
// Internal to codegen/: the declarations that the files of the CUDA renderer share (never
// included outside codegen/; the public API is cuda_codegen.h). Everything lives in namespace
// cg. Who defines what:
//   cuda_codegen_ops.cpp    the CUDA spelling of the tape (types, conversions, instructions)
//   cuda_variant.cpp        variant choice and launches across the layouts (layout_of), keys
//   layouts/<layout>.cpp    one per CudaLayout: its choice rule, launch shape, the numbers it
//                           shares with its emitter (elems_per_vec, gemm_bk, ...) and its
//                           emitter (Emitter::<layout>_body and its steps)
//   cuda_params.cpp         the plan shared by renderer and packer (the Params fields)
//   cuda_emit.cpp           class Emitter: what every layout shares (offsets, loads, the tape,
//                           stores, the cluster helpers) and the dispatch over layouts
//   cuda_emit_reduce.cpp    Emitter: what both reduction layouts share (accumulators, folds,
//                           the block combine, the loop over output rows)
//   cuda_codegen.cpp        the public entry points: source and key, packed parameters
#include "codegen/cuda_codegen.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln::detail::cg {

// ---- the tape in CUDA (cuda_codegen_ops.cpp) ------------------------------------------------

const char* preamble();
const char* half_preamble();
/// f16 or bf16: computed in float, rounded after every op, with half_preamble()'s helpers.
inline bool is_half(DType t) {
  return t == DType::f16 || t == DType::bf16;
}
const char* ct_name(DType t);
const char* st_name(DType t);
std::string load_cvt(DType t, const std::string& e);
std::string store_cvt(DType to, DType from, const std::string& e);
std::string from_double(DType to, const std::string& e);
std::string from_i64(DType to, const std::string& e);
std::string inst_expr(const FusedKernel& k, int id);

// ---- the layouts (layouts/<layout>.cpp), shared by the emitter, keys and launches ----------

inline constexpr int kBlock = 256;         // elementwise block size (and the reduce maximum)
inline constexpr int kMaxCachedVecs = 8;   // registers per thread for a cached row: 8 x 16 bytes
inline constexpr int kMaxDotPrefetch = 16; // a dot kernel's tape inputs loaded before its sums
// The most ks a dot kernel's thread sums on its own before the dot layout splits K over a
// cluster (choose_dot): 512-long dots on 32 lanes.
inline constexpr int kDotKsWithoutCluster = 16;
inline constexpr int kMaxCachedRowOps = 8; // longest tape that always keeps its rows in registers

// Choice rules, in the order choose_variant tries them: each fills its fields of v; a bool
// one returns false (v untouched) when the kernel does not suit its layout. `blocks`: about
// two per SM of the target.
bool choose_gemm_tile(const FusedKernel& k, CudaVariant& v, int64_t blocks);
void choose_dot(const FusedKernel& k, CudaVariant& v, int64_t blocks);
bool choose_column_reduce(const FusedKernel& k, llvm::ArrayRef<void*> slot_base, CudaVariant& v);
void choose_row_reduce(const FusedKernel& k, llvm::ArrayRef<void*> slot_base, CudaVariant& v);
bool choose_tiled(const FusedKernel& k, CudaVariant& v);
void choose_elementwise(const FusedKernel& k, llvm::ArrayRef<void*> slot_base, int sm_count,
                        CudaVariant& v);
// CudaVariant::vec_group for a vectorised elementwise kernel: 2 where a block per 256 vectors
// would be more than elementwise_grid_cap blocks, else 0; KILN_ELEMENTWISE_GRID may choose
// 0 (capped) or N for every one.
int elementwise_vec_group(const FusedKernel& k, const CudaTarget& t);
// Blocks of kBlock threads for one element, or one vector with `vec`, a thread.
int64_t elementwise_blocks(const FusedKernel& k, bool vec);
// The most blocks a looping (capped) elementwise or tiled grid launches: 8 per SM.
int64_t elementwise_grid_cap(const CudaTarget& t);
// Launch shapes.
CudaLaunch launch_elementwise(const FusedKernel& k, const CudaVariant& v, const CudaTarget& t);
CudaLaunch launch_tiled(const FusedKernel& k, const CudaVariant& v, const CudaTarget& t);
CudaLaunch launch_dot(const FusedKernel& k, const CudaVariant& v, const CudaTarget& t);
CudaLaunch launch_gemm_tile(const FusedKernel& k, const CudaVariant& v, const CudaTarget& t);
CudaLaunch launch_row_reduce(const FusedKernel& k, const CudaVariant& v, const CudaTarget& t);
CudaLaunch launch_column_reduce(const FusedKernel& k, const CudaVariant& v, const CudaTarget& t);
// Both reduction layouts: bx = rows_per_block threads side by side along bx * V outputs, the
// rest of the block down the reduced axis while each thread gets `per_thread` elements a step.
CudaLaunch reduce_launch(const FusedKernel& k, const CudaVariant& v, const CudaTarget& t,
                         int64_t per_thread, int V);
/// Whether slot's base plus offset elements of dt is 16-byte aligned (false: no such slot).
bool aligned16(llvm::ArrayRef<void*> slot_base, int slot, int64_t offset, DType dt);

// Elements per thread per step in the vec variant: enough that the narrowest operand moves 16
// bytes per access (4 for 4-byte types, 8 for 16-bit and 1-byte ones), never fewer than 4.
int elems_per_vec(const FusedKernel& k);

// Column layout (rows_per_block > 1, see Emitter::column_body): the columns each thread owns
// (V consecutive ones, one vector per operand, in the vec variant) and the rows it loads per
// step before it computes on any of them: 64 bytes in flight per thread with vectors (4 x 16),
// 8 elements without; half for long tapes (every row of a step is a copy of the tape).
int column_vec(const FusedKernel& k, const CudaVariant& v);
int column_rows_per_step(const FusedKernel& k, const CudaVariant& v);

// Row layout with smem_row: bytes of shared memory one row of the contiguous inputs takes (R
// elements each), at most the 48 KB a launch may use without opting in; 32 KB rows (8192 f32)
// still leave room for 7 blocks of 256 threads per H100 SM.
inline constexpr int64_t kMaxSharedRowBytes = int64_t(48) << 10;
// Rows up to this many bytes in shared memory still leave room for the 8 blocks of 256 threads
// an H100 SM holds (228 KB, 1 KB of each block reserved); longer tapes keep larger rows in
// registers instead (choose_row_reduce).
inline constexpr int64_t kFullOccupancySharedRowBytes = int64_t(24) << 10;
int64_t shared_row_bytes(const FusedKernel& k);

// GEMM-tile layout (CudaVariant::gemm_tile, see Emitter::gemm_body): whether its sums are
// double (f64 dots; all of a kernel's dots take one accumulator type there), the K chunk a
// block stages per step (T x BK elements of A and of B, 4 or 8 per thread), the groups of
// threads that split each chunk's K (a group's threads hold kGemmRegTile x kGemmRegTile sums
// each, so a tile of 16 has 16 groups of 16 threads, 32 has 4 of 64, 64 one), and the shared
// array's length in accumulators (two chunk buffers, or every dot's parked sums and the
// groups' partial sums).
inline constexpr int kGemmRegTile = 4;
bool gemm_f64(const FusedKernel& k);
int gemm_bk(const FusedKernel& k, const CudaVariant& v);
int gemm_groups(const CudaVariant& v);
int64_t gemm_smem_elems(const FusedKernel& k, const CudaVariant& v);

// ---- the plan shared by renderer and packer (cuda_params.cpp) -------------------------------

struct CgField {
  enum class Type : uint8_t { ptr, i64, u64, f64 } type;
  std::string name;
  std::string ptr_type; // for ptr: "const float*", ...
  uint64_t bits = 0;    // value for a launch
  int slot = -1;        // ptr: the slot whose base it is, plus byte_offset
  int64_t byte_offset = 0;
  int inst = -1; // a constant's value: the tape instruction it comes from
};

/// A constant tape instruction's value as its Params field holds it.
uint64_t constant_bits(const TapeInst& in);

struct CgOperand {
  enum class Mode : uint8_t { contiguous, scalar, strided } mode = Mode::contiguous;
  std::vector<int> dims; // strided: (permuted) dims with a stride field
};

struct CgPlan {
  bool reduce = false;
  int rank = 0;
  std::vector<int> perm; // reduce: kept dims then reduced dims; elementwise: identity
  int nkept = 0;         // reduce
  bool shape_fields = false;
  std::vector<CgOperand> in, out;
  std::vector<CgField> fields;
};

// Reduced axes are all trailing: the reduce kernel's (kept, reduced) order is row-major.
bool trailing_reduce(const FusedKernel& k);

// Whether output o is stored at the flat index of the kernel's iteration order (else through
// strides): a per-row output always is.
bool out_contiguous(const FusedKernel& k, const KernelOutput& o);

/// The Params fields of k, in order; pointer fields take their values from slot_base (none
/// given: 0, all a renderer needs).
CgPlan cuda_make_plan(const FusedKernel& k, llvm::ArrayRef<void*> slot_base);
/// `struct Params` declared from the plan's fields, and a static_assert of its size.
std::string params_decl(const CgPlan& pl, const std::string& type = "Params");

// ---- source emission -------------------------------------------------------------------------

// Renders a kernel's body (the Params struct is declared before it) as `name`. Member functions
// are defined in the cuda_emit*.cpp file named at their group.
class Emitter {
public:
  Emitter(const FusedKernel& k, const CudaVariant& v, const CgPlan& pl) : k_(k), v_(v), pl_(pl) {}

  std::string run(const std::string& name);
  /// The same body as `static __device__ void fn(const Params& p)`: one step of a merged
  /// launch (render_cuda_repeat), whose kernel calls it once per member.
  std::string run_step(const std::string& fn);
  /// The elementwise layout as `static __device__ void fn(const params_type& p, unsigned blk,
  /// unsigned nblk)`: block blk of nblk (one segment of a segmented kernel). No idx_t typedef.
  std::string run_segment(const std::string& fn, const std::string& params_type);

private:
  using M = CgOperand::Mode;
  using Load = std::function<std::string(int)>; // input j -> stored element expression

  void line(int indent, const std::string& text) {
    s_.append(indent * 2, ' ');
    s_ += text;
    s_ += '\n';
  }

  static std::string cast_idx(const std::string& field) { return "(idx_t)p." + field; }

  // Shared by every layout (cuda_emit.cpp).
  void scalars(int ind);
  void unravel(int ind, const std::string& idx, int lo, int hi, const std::string& in_var,
               const std::string& out_var);
  void declare_offsets(int ind, const char* var, const char* init, const char* out_var = nullptr,
                       const char* out_init = nullptr);
  std::string element_load(int j) const;
  void tape(int ind, const Load& load, const int8_t* level = nullptr, int max_level = 0);
  std::vector<bool> row_constants() const;
  void row_constants_of(int ind, const std::vector<bool>& c, const ReducePasses& rp, int pass);
  std::string stored(size_t j) const;

  // The elementwise and tiled layouts (layouts/elementwise.cpp, layouts/tiled.cpp).
  void tiled_body();
  void elementwise_body();
  // The vector loop's pieces (elementwise.cpp): vector c's first element i0 (and the strided
  // inputs' offsets there), its operands' loads into x<j><sfx> (declared with them or not), its
  // outputs computed and stored; and the loop of CudaVariant::vec_group vectors per thread.
  void vec_start(int ind, const std::string& c, bool offsets);
  void vec_loads(int ind, const std::string& sfx, bool declare);
  void vec_compute_store(int ind, const std::string& sfx);
  void vec_group_loop(int group);
  // The dot layout: elementwise kernels with dot products (layouts/dot.cpp).
  void dot_body();
  struct DotShape; // the layout's sizes, defined in layouts/dot.cpp
  const char* dot_acc(size_t j) const;
  void dot_element_loop(const DotShape& ds);
  void dot_group_sums(const DotShape& ds, size_t g);
  void dot_k_loops(const DotShape& ds, const std::vector<size_t>& group);
  std::string dot_term(size_t j, const std::string& a, const std::string& b) const;
  void dot_tree_sum(const DotShape& ds);
  std::vector<int> dot_prefetch(const DotShape& ds);
  void dot_finish(const DotShape& ds, const std::vector<int>& early);
  std::string dot_base(int j) const;
  void store_outputs(int ind);          // cuda_emit.cpp
  static const char* cluster_helpers(); // cuda_emit.cpp
  // The GEMM-tile layout: elementwise kernels over a matrix of dot products
  // (layouts/gemm_tile.cpp).
  void gemm_body();
  struct GemmShape; // the layout's sizes, defined in layouts/gemm_tile.cpp
  void gemm_tile_loop(const GemmShape& g);
  std::string gemm_in_stride(int j, int dim) const;
  std::string gemm_in_base(int j) const;
  void gemm_element(const GemmShape& g, int ind, const std::string& q);
  void gemm_tile_operands(const GemmShape& g);
  void gemm_prefetch_epilogue(const GemmShape& g);
  void gemm_load_chunk(const GemmShape& g, int ind, int d, const std::string& k0);
  void gemm_k_loops(const GemmShape& g);
  void gemm_dot_k_loop(const GemmShape& g, int d);
  void gemm_along_k(int ind, int d);
  void gemm_chunk_coords(const GemmShape& g, int ind);
  void gemm_chunk_loop(const GemmShape& g, int ind, const std::string& body);
  void gemm_stage_chunk(const GemmShape& g, int d);
  std::string gemm_vec_load(const GemmShape& g, const std::string& dst,
                            const std::string& at) const;
  void gemm_multiply(const GemmShape& g, int ind, int d, const std::string& end, bool whole);
  void gemm_park_sums(const GemmShape& g);
  void gemm_park(const GemmShape& g, const std::string& off, int d, bool swizzle);
  void gemm_combine_groups(const GemmShape& g, int d);
  void gemm_epilogue(const GemmShape& g);
  void gemm_finish(const GemmShape& g, int ind, const std::string& q, const Load& load);
  void gemm_short_dot(const GemmShape& g, int ind, int d, const std::string& dst);
  void gemm_cluster_sum(const GemmShape& g, int ind, int d, const std::string& q);

  // Reductions (cuda_emit_reduce.cpp) and the row layout (layouts/row_reduce.cpp).
  // A reduction of the tape as the reduce emitters fold it: accumulators are double (floats) or
  // long long (integers, argmax's index), as on the CPU reference.
  struct Red {
    int t;
    OpCode op;
    bool fl, arg;
    const char* A; // the accumulator's type
    std::string init;
    const char* X = nullptr; // the type an element is converted to before it is folded
    // A sum of f64: a double-double accumulator (dsum_helpers()), so that the order of the
    // additions, which depends on the layout, does not show in the rounded result.
    bool dsum = false;
    // A sum of f16/bf16 values: each 16-byte vector's elements add up in float first, then
    // once into the double accumulator (float is exact far beyond their 8-11 bits, and the
    // f32 -> f64 conversion per element runs at 16 per clock per SM).
    bool half_sum = false;
  };

  std::vector<Red> reductions() const;
  bool has_dsum() const;
  bool dsum_of(const TapeInst& in) const;
  static std::string dsum_helpers();
  bool vec_input(size_t j) const { return j < 32 && (v_.vec_inputs >> j) & 1u; }
  bool splat_input(size_t j) const { return j < 32 && (v_.splat_inputs >> j) & 1u; }
  void fold(int ind, const Red& r, const std::string& acc, const std::string& arg,
            const std::string& x, const std::string& ix);
  std::string row_value(const Red& r, const std::string& acc, const std::string& ia) const;
  void reduce_body();
  void combine(int ind, const Red& r);
  // What the steps of reduce_body() and column_body() share: the kernel's passes over each row
  // (see ReducePasses), its reductions and row constants, and the pass being emitted.
  struct ReduceState {
    ReducePasses rp;
    std::vector<Red> reds;
    std::vector<bool> consts; // row_constants()
    int pass = 0;
  };
  bool folded_in_pass(const ReduceState& st, const Red& r) const;
  bool stored_in_pass(const ReduceState& st, size_t j) const;
  void open_output_loop(int step, const std::string& first_o);
  void reduce_declare_shared(const std::vector<Red>& reds);
  void reduce_shared_row_pointers();
  void reduce_cache_row();
  void reduce_pass(const ReduceState& st);
  void reduce_vector_loop(const ReduceState& st);
  void reduce_vector_loads(const ReduceState& st, int epv);
  void reduce_element(int ind, const ReduceState& st, const Load& load, bool vec_out);

  // The column layout of reductions (layouts/column_reduce.cpp).
  void column_body();
  void column_combine(int ind, const std::vector<const Red*>& rs, int V, int bx);
  // The column layout's shape, and what it knows of the reductions as its passes are emitted.
  struct ColumnState : ReduceState {
    int bx = 0, V = 0, U = 0; // threads along the columns, columns per thread, rows per step
    std::vector<bool> vec_in; // input j is read as one vector of V columns
    bool flat_index = false;  // the tape uses the flat index (iota, random numbers)
    std::vector<const Red*> now, known; // folded in this pass, combined in earlier ones
    bool stores = false;                // this pass stores elementwise outputs
  };
  void column_declare_shared(const ColumnState& st);
  void column_pass(ColumnState& st);
  void column_declare_accumulators(const ColumnState& st);
  void column_rows(int ind, int u_count, const ColumnState& st);
  void column_row(int ind, int u, const ColumnState& st);
  void column_known_values(int ind, const ColumnState& st);
  void column_store_row_results(const ColumnState& st);

  const FusedKernel& k_;
  const CudaVariant& v_;
  const CgPlan& pl_;
  std::string s_;
  bool hoisted_ = false;
  // The block's index and the grid's size in blocks as the elementwise layout reads them.
  const char* block_index_ = "blockIdx.x";
  const char* grid_blocks_ = "gridDim.x";
  bool as_step_ = false;                     // run_step: a device function rather than the kernel
  const std::vector<bool>* hoist_ = nullptr; // reduce: row constants, emitted once per row
};

// ---- segmented kernels (layouts/segmented.cpp): FusedKernel::segments -----------------------

/// Each segment's variant of the elementwise layout (index widths made equal: one idx_t).
CudaVariant choose_segmented(const FusedKernel& k, llvm::ArrayRef<void*> slot_base,
                             const CudaTarget& t);
CudaLaunch launch_segmented(const FusedKernel& k, const CudaVariant& v);
/// Every segment's Params and device function, the Params of the kernel and the kernel.
std::string render_segmented(const FusedKernel& k, const CudaVariant& v, const std::string& name);
ParamTemplate segmented_param_template(const FusedKernel& k, const CudaVariant& v);

/// What a kernel's source holds before its Params: the comment naming it and its key, and the
/// preambles its tape needs.
std::string source_prelude(const FusedKernel& k, const std::string& name, const std::string& key);
/// A kernel's whole key: its structural key (kernel_key), variant, target and versions
/// (everything that changes the binary).
std::string full_key(const std::string& structural, const FusedKernel& k, const CudaVariant& v,
                     const CudaTarget& t);
/// A kernel's entry point: its ops' words, variant marks, `suffix`, the arch and a hash of `key`.
std::string readable_name(const FusedKernel& k, const CudaVariant& v, const CudaTarget& t,
                          const std::string& structural, const std::string& key,
                          const std::string& suffix);

/// The kernel function `name`, to follow the preambles and params_decl(pl) in the source.
std::string render_kernel(const FusedKernel& k, const CudaVariant& v, const CgPlan& pl,
                          const std::string& name);

} // namespace kiln::detail::cg
