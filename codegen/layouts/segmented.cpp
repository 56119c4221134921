// Segmented kernels (FusedKernel::segments): several elementwise kernels in one launch. Each
// segment is the elementwise layout over its own space, emitted as a device function that takes
// its block index and block count; the grid is the segments' blocks one after the other, and
// each block calls the function of the segment its index falls in:
//
//   struct Params { long long end0, end1; Params0 s0; Params1 s1; };
//   kernel(const Params p) {
//     const unsigned b = blockIdx.x;
//     if (b < p.end0) { seg0(p.s0, b, p.end0); return; }
//     if (b < p.end1) { seg1(p.s1, b - p.end0, p.end1 - p.end0); return; }
//   }
//
// The block ends are parameters (sizes), so one compiled kernel serves every size of its
// segments, like any other kernel.
#include "codegen/cuda_codegen_internal.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace kiln::detail::cg {

namespace {

// A segment's blocks: the elementwise layout's, at most kMaxBlocks (its grid-stride loop covers
// the rest). Independent of the target, so that the Params (which hold the ends) need none.
constexpr int64_t kMaxBlocks = 1024;

int64_t segment_blocks(const FusedKernel& seg, const CudaVariant& v) {
  return std::min<int64_t>(elementwise_blocks(seg, v.vec), kMaxBlocks);
}

} // namespace

CudaVariant choose_segmented(const FusedKernel& k, llvm::ArrayRef<void*> slot_base,
                             const CudaTarget& t) {
  CudaVariant v;
  for (int s = 0; s < static_cast<int>(k.segments.size()); ++s) {
    const FusedKernel seg = k.segment(s);
    CudaVariant sv = choose_variant(seg, slot_base, t);
    if (sv.tile_dim >= 0) { // the tiled layout indexes blocks its own way: the plain one here
      sv = CudaVariant{};
      sv.index32 = choose_variant(seg, slot_base, t).index32;
      choose_elementwise(seg, slot_base, t.sm_count, sv);
    }
    // A segment's grid is at most kMaxBlocks, looping: one vector a thread an iteration, as
    // measured for that grid (elementwise.cpp's grouping is for a block per 2 x 256 vectors).
    sv.vec_group = 0;
    v.index32 = v.index32 && sv.index32;
    v.segments.push_back(sv);
  }
  for (CudaVariant& sv : v.segments) sv.index32 = v.index32; // one idx_t in the source
  return v;
}

CudaLaunch launch_segmented(const FusedKernel& k, const CudaVariant& v) {
  CudaLaunch l;
  l.block = kBlock;
  int64_t blocks = 0;
  for (int s = 0; s < static_cast<int>(k.segments.size()); ++s)
    blocks += segment_blocks(k.segment(s), v.segments[s]);
  l.grid = static_cast<uint32_t>(blocks);
  return l; // grid 0 (no element): nothing to launch
}

std::string render_segmented(const FusedKernel& k, const CudaVariant& v, const std::string& name) {
  std::string s = fmt::format("typedef {} idx_t;\n", v.index32 ? "int" : "long long");
  std::string fields, calls;
  const int n = static_cast<int>(k.segments.size());
  for (int i = 0; i < n; ++i) {
    const FusedKernel seg = k.segment(i);
    const CgPlan pl = cuda_make_plan(seg, {});
    s += params_decl(pl, fmt::format("Params{}", i));
    s += Emitter(seg, v.segments[i], pl)
             .run_segment(fmt::format("seg{}", i), fmt::format("Params{}", i));
    const std::string begin = i == 0 ? "0" : fmt::format("p.end{}", i - 1);
    calls += fmt::format(
        "  if (b < p.end{0}) {{ seg{0}(p.s{0}, b - {1}, p.end{0} - {1}); return; }}\n", i, begin);
  }
  s += "struct Params {\n";
  for (int i = 0; i < n; ++i) s += fmt::format("  long long end{};\n", i);
  for (int i = 0; i < n; ++i) s += fmt::format("  Params{0} s{0};\n", i);
  s += "};\n";
  s += fmt::format("static_assert(sizeof(Params) == {}, \"Params layout\");\n",
                   segmented_param_template(k, v).bytes.size());
  s += fmt::format("extern \"C\" __global__ void __launch_bounds__({}) {}(const "
                   "__grid_constant__ Params p) {{\n  k_wait_for_predecessors();\n"
                   "  const unsigned b = blockIdx.x;\n{}}}\n",
                   kBlock, name, calls);
  return s;
}

ParamTemplate segmented_param_template(const FusedKernel& k, const CudaVariant& v) {
  const int n = static_cast<int>(k.segments.size());
  ParamTemplate t;
  t.bytes.resize(8 * n);
  int64_t end = 0;
  for (int i = 0; i < n; ++i) {
    const FusedKernel seg = k.segment(i);
    end += segment_blocks(seg, v.segments[i]);
    std::memcpy(t.bytes.data() + 8 * i, &end, 8);
    ParamTemplate st = param_template(seg, v.segments[i]);
    const uint32_t at = static_cast<uint32_t>(t.bytes.size());
    const int tape0 = i == 0 ? 0 : k.segments[i - 1].tape_end;
    t.bytes.insert(t.bytes.end(), st.bytes.begin(), st.bytes.end());
    for (ParamTemplate::Pointer p : st.pointers) {
      p.at += at;
      t.pointers.push_back(p);
    }
    for (ParamTemplate::Value val : st.values) {
      val.at += at;
      val.inst += tape0;
      t.values.push_back(val);
    }
  }
  return t;
}

} // namespace kiln::detail::cg
