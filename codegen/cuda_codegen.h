#pragma once
// FusedKernel -> CUDA C++ source, launch shape and packed parameters. Pure computation: no
// driver calls (runtime/cuda launches what this produces).
//
// Parameter ABI: every kernel takes one struct by value (`const __grid_constant__ Params p`),
// whose fields are all 8 bytes wide (pointers, int64_t, double) in the order pack_params
// writes them. Sizes, strides, offsets and constant values are parameters, never part of the
// source, so one compiled kernel serves every size and every constant value.
#include "codegen/codegen_version.h"
#include "ir/fused_kernel.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/SmallVector.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::detail {

/// A hash of the device code kiln pastes into kernels (codegen/device/*.cuh, ir/philox.h),
/// "dev" + 8 hex digits: part of every kernel key, so that a changed helper never loads a
/// binary compiled with the old one, whether or not kCodegenVersion was bumped.
const std::string& pasted_sources_tag();

struct CudaTarget {
  int arch = 90;         // compute capability * 10 (sm_90 -> 90)
  int sm_count = 132;    // multiprocessors, for sizing grids
  int nvrtc_version = 0; // major * 1000 + minor * 10, as CUDA_VERSION; part of the key
};

/// Size/alignment-dependent choices, decided per launch and part of the key.
struct CudaVariant {
  bool index32 = true; // every index fits in int32
  bool vec = false;    // 16-byte vector loads/stores (all operands contiguous and aligned;
                       // column layout: along the kept innermost dim, V columns per thread)
  // Reduce: 1 = the row layout (one output row per block); > 1 = the column layout (the
  // innermost dim is kept): this many threads side by side along the output rows ("columns"),
  // each owning one of them, or elems_per_vec consecutive ones with vec.
  int rows_per_block = 1;
  // Elementwise over a transposed read: inputs in `tile_inputs` (a mask) have stride 1 along
  // dim `tile_dim` rather than the last dim; 32x32 tiles of them go through shared memory so
  // that both their reads and the output's writes are coalesced. -1: no tiling.
  int tile_dim = -1;
  uint32_t tile_inputs = 0;
  // Reduce with vec and several passes: each thread keeps its vectors of the row's contiguous
  // inputs in registers (this many at most), so later passes don't read memory again. 0: off.
  int cached_vecs = 0;
  // Reduce with vec and several passes, rows not cached in registers (a long tape): pass 0
  // copies each thread's vectors of the row's contiguous inputs into shared memory (dynamic,
  // R elements per input, at most kMaxSharedRowBytes) and later passes read them from there.
  // A thread reads back only the vectors it wrote, so no barrier is needed.
  bool smem_row = false;
  // With vec, strided inputs (masks) read per vector rather than element by element. Row
  // layout: inputs that run contiguously along the row, every row's start 16-byte aligned
  // (layer_norm's weight and bias, broadcast over the rows), read as vectors. Elementwise:
  // inputs with stride 1 along the last dim, read as vectors (a row broadcast over a matrix),
  // and `splat_inputs`, constant along the last dim, read once per vector (a column).
  uint32_t vec_inputs = 0;
  uint32_t splat_inputs = 0;
  // Elementwise with dot products (small matmuls, FusedKernel::dots): elements per block;
  // the other kBlock / dot_bx threads of each element split its dot products' K (see
  // Emitter::dot_body). 0: no dots.
  int dot_bx = 0;
  // Dot layout on sm_90+: blocks per thread-block cluster, splitting K between them as well;
  // block 0 of each cluster adds the others' partial sums through distributed shared memory
  // and runs the tape. 1: no cluster (and on older GPUs, whatever this says).
  int dot_cluster = 1;
  // Elementwise with dot products over a matrix of outputs (more than a few rows, see
  // Emitter::gemm_body): the edge of the square output tile a block computes (16, 32 or 64),
  // its K taken in shared-memory chunks and split between the block's groups of threads
  // (16, 4 or 1 of them); dot_cluster blocks split K as in the dot layout.
  // 0: not this layout.
  int gemm_tile = 0;
  // GEMM tile: the dots (a mask) with K at most 4 and at most a K group's share of a chunk
  // (an RNN's input of one feature). Each element of the epilogue sums them itself, in the
  // order the tile would have: no chunk, barrier or partial sums for them.
  uint32_t gemm_short_dots = 0;
  // GEMM tile: the dots (masks) whose A, or B, has stride 1 along k (A row-major, B a weight
  // read transposed): their chunks load along k, the others along their rows.
  uint32_t gemm_a_along_k = 0, gemm_b_along_k = 0;
  // Elementwise with vec, the grid: 0, at most 8 blocks per SM, whose threads loop over the
  // vectors one at a time (a block per 256 vectors where that is fewer); N >= 1, a block for
  // every 256 x N vectors, each thread loading its N vectors before computing any (2 where the
  // kernel is larger; elementwise_vec_group).
  int vec_group = 0;
  // A segmented kernel (FusedKernel::segments): each segment's variant of the elementwise
  // layout, in order; the fields above are unused but index32 (the same in every segment).
  std::vector<CudaVariant> segments;
};

/// The CUDA layouts: how a kernel's elements map to blocks and threads. A kernel and variant
/// are in exactly one (layout_of); each layout's choice rule, launch shape and emitter live in
/// codegen/layouts/<name>.cpp.
enum class CudaLayout : uint8_t {
  elementwise,  // a grid-stride loop over the flat index, optionally by 16-byte vectors
  tiled,        // elementwise over a transposed read, through 32 x 32 shared-memory tiles
  dot,          // elementwise with small dot products, a block (or cluster) splitting each K
  gemm_tile,    // elementwise over a matrix of dot products, T x T output tiles per block
  row_reduce,   // one output row per block
  column_reduce // the innermost dim kept: neighbouring outputs on neighbouring threads
};
CudaLayout layout_of(const FusedKernel& k, const CudaVariant& v);

struct CudaKernelSource {
  std::string name;   // readable name + short hash of `key`; also the extern "C" entry point
  std::string key;    // structural key: kernel_key(k) + variant + target + versions
  std::string source; // complete translation unit for NVRTC
  // Whether the stand-in interpreter runs the kernel until it is compiled: "covered", or why
  // not (codegen/standin.h); empty where nobody asked (sync compiles, kiln-cache warm). Only
  // for the miss log (KILN_CACHE_MISS_LOG): it is not part of the kernel's identity.
  std::string standin;
};

struct CudaLaunch {
  uint32_t grid = 1, block = 256, shared_bytes = 0;
  uint32_t grid_y = 1, grid_z = 1; // the GEMM-tile layout: row tiles, matrices of a batch
  // Blocks per thread-block cluster given at launch (the stand-in interpreter, codegen/standin.h;
  // generated kernels declare theirs in their source and leave this 1).
  uint32_t cluster = 1;
};

/// The variant's part of a kernel's identity, from one visit of its fields (cuda_variant.cpp):
/// as bytes, appended to kernel_signature's for the in-memory kernel cache; as text, the part
/// of CudaKernelSource::key between the structural key and the target.
void append_variant(const FusedKernel& k, const CudaVariant& v, llvm::SmallVectorImpl<char>& out);
std::string variant_key(const FusedKernel& k, const CudaVariant& v);
/// The variant a launch with these slot base pointers needs.
CudaVariant choose_variant(const FusedKernel& k, llvm::ArrayRef<void*> slot_base,
                           const CudaTarget& t);
CudaKernelSource render_cuda(const FusedKernel& k, const CudaVariant& v, const CudaTarget& t);
CudaLaunch launch_for(const FusedKernel& k, const CudaVariant& v, const CudaTarget& t);
/// Launches of one kernel in a row (a loop's steps, flushed together) merged into one launch:
/// its body once per member over the members' Params, a barrier over the whole grid between
/// them. Only a kernel whose own grid is one block, or at most kMaxRepeatBlocks on sm_90+ (one
/// thread-block cluster), merges, in its own variant: consecutive steps then cost a barrier
/// rather than a launch each, and compute the same bits. See docs/architecture.md, "Merged
/// launches".
struct CudaRepeat {
  CudaVariant variant; // the members' variant (choose_variant's)
  CudaLaunch shape;    // the members' grid: one block or one cluster
  int max_count = 0;   // members per merged launch at most (its Params must fit)
};
// A cluster of 16 (the most the H100 allows, above the portable 8: the kernel cache sets
// cudaFuncAttributeNonPortableClusterSizeAllowed and checks that it can be resident).
constexpr int kMaxRepeatBlocks = 16;
constexpr int kMaxRepeatCount = 64;
/// How launches of k can be merged, or nullopt when its grid is not one cluster (a kernel over
/// many elements, clusters of its own, a segmented one, or dynamic shared memory above the
/// default limit).
std::optional<CudaRepeat> choose_repeat(const FusedKernel& k, llvm::ArrayRef<void*> slot_base,
                                        const CudaTarget& t);
/// The merged kernel of `count` launches of (k, r.variant): `count` Params in one struct.
CudaKernelSource render_cuda_repeat(const FusedKernel& k, const CudaRepeat& r, const CudaTarget& t,
                                    int count);

/// The bytes of a kernel's Params with its pointer fields located, so that a launch repeated
/// with other buffers (a replayed CUDA graph) rewrites only the pointers.
struct ParamTemplate {
  std::vector<std::byte> bytes;
  struct Pointer {
    uint32_t at = 0;         // byte position in `bytes`
    int slot = 0;            // the field is slot_base[slot] + byte_offset
    int64_t byte_offset = 0; // the operand's offset into its buffer
  };
  std::vector<Pointer> pointers;
  /// The constants' fields: a plan run with other constant values rewrites only them.
  struct Value {
    uint32_t at = 0; // byte position in `bytes`
    int inst = 0;    // the kernel's tape instruction (a constant) the field holds
  };
  std::vector<Value> values;
  /// Write the pointers of this launch (slot_base[i]: slot i's device pointer; null -> 0).
  void patch(llvm::ArrayRef<void*> slot_base) { patch_pointers(bytes, pointers, slot_base); }
  /// The same into `params` (a copy of `bytes`); true if any pointer changed.
  static bool patch_pointers(std::vector<std::byte>& params, llvm::ArrayRef<Pointer> pointers,
                             llvm::ArrayRef<void*> slot_base);
  /// The constants k's tape holds now into `params`; true if any changed.
  static bool patch_values(std::vector<std::byte>& params, llvm::ArrayRef<Value> values,
                           const FusedKernel& k);
};
ParamTemplate param_template(const FusedKernel& k, const CudaVariant& v);
/// The bytes of the Params struct for a launch; slot_base[i] is slot i's device pointer.
std::vector<std::byte> pack_params(const FusedKernel& k, const CudaVariant& v,
                                   llvm::ArrayRef<void*> slot_base);

} // namespace kiln::detail
