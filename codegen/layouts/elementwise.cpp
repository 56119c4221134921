// The elementwise layout: a grid-stride loop over the flat index, one element per thread per
// step, or one 16-byte vector per operand with `vec` (emitted by Emitter::elementwise_body, below).
#include "codegen/cuda_codegen_internal.h"
#include "ir/settings.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

namespace kiln::detail::cg {

int elems_per_vec(const FusedKernel& k) {
  int narrowest = 8;
  for (const KernelInput& in : k.inputs)
    if (in.cls != IndexClass::scalar) narrowest = std::min(narrowest, itemsize(in.dtype));
  for (const KernelOutput& o : k.outputs) narrowest = std::min(narrowest, itemsize(o.dtype));
  return std::clamp(16 / narrowest, 4, 8);
}

void choose_elementwise(const FusedKernel& k, llvm::ArrayRef<void*> slot_base, int sm_count,
                        CudaVariant& v) {
  const int64_t n = k.shape.numel();
  // Too few elements to give every SM a block of vectors: one element per thread, so that
  // more threads share the work. Such a kernel is bound by each thread's chain of dependent
  // instructions, not by memory: an LSTM's gate nonlinearities over [32, 256] took 2.74 us on
  // 8 blocks of vectors, 2.43 on 32 blocks of elements
  // (bench/results/2026-11-26-h100-session23.md).
  if (n < int64_t(elems_per_vec(k)) * kBlock * std::max(1, sm_count)) return;
  // Vector accesses: elementwise, every output contiguous and 16-byte aligned, every input
  // scalar, contiguous and aligned, or strided such that each vector's elements (consecutive
  // along the last dim, never straddling a row: its extent is a multiple of the vector) are
  // one aligned vector of it (stride 1 along the last dim, the other strides multiples of the
  // vector) or one element (stride 0 along the last dim).
  const int epv = elems_per_vec(k);
  const int last = k.shape.size() - 1;
  bool vec = true;
  for (size_t j = 0; j < k.inputs.size(); ++j) {
    const KernelInput& in = k.inputs[j];
    if (in.cls == IndexClass::scalar) continue;
    if (in.cls == IndexClass::contiguous) {
      vec &= aligned16(slot_base, in.slot, in.offset, in.dtype);
      continue;
    }
    if (j >= 32 || last < 0 || k.shape[last] % epv != 0) {
      vec = false;
      break;
    }
    bool whole = in.strides[last] == 1 && aligned16(slot_base, in.slot, in.offset, in.dtype);
    for (int d = 0; d < last; ++d) whole &= in.strides[d] % epv == 0;
    if (whole)
      v.vec_inputs |= 1u << j;
    else if (in.strides[last] == 0)
      v.splat_inputs |= 1u << j;
    else
      vec = false;
  }
  for (const KernelOutput& o : k.outputs)
    vec &= out_contiguous(k, o) && aligned16(slot_base, o.slot, o.offset, o.dtype);
  v.vec = vec;
  if (!vec) v.vec_inputs = v.splat_inputs = 0;
}

// A block for every 512 vectors, each thread loading its 2 before computing either, where that
// is more than 8 blocks per SM; smaller kernels get a block per 256 vectors, each thread one.
// On the H200 this took the 9-op chain over 64M f32 elements from 86% of copy bandwidth (at
// most 8 blocks per SM, looping) to 104%, and `tanh(m + row) * col` over 8192 x 8192 from 97%
// to 100%; a block per 256 vectors reached 101% and 91%, 4 a thread 104% and 97%
// (bench/results/2026-11-28-h200-session42.md). KILN_ELEMENTWISE_GRID chooses another grid
// for an A/B.
CudaLaunch launch_elementwise(const FusedKernel& k, const CudaVariant& v, const CudaTarget& t) {
  CudaLaunch l;
  const int64_t blocks = elementwise_blocks(k, v.vec);
  l.block = kBlock;
  l.grid = static_cast<uint32_t>(
      v.vec_group > 0 ? std::min<int64_t>((blocks + v.vec_group - 1) / v.vec_group, INT32_MAX)
                      : std::min<int64_t>(blocks, elementwise_grid_cap(t)));
  return l; // grid 0 (n == 0): nothing to launch
}

int64_t elementwise_blocks(const FusedKernel& k, bool vec) {
  const int64_t per_block = int64_t(kBlock) * (vec ? elems_per_vec(k) : 1);
  return (k.shape.numel() + per_block - 1) / per_block;
}

int64_t elementwise_grid_cap(const CudaTarget& t) {
  return int64_t(std::max(1, t.sm_count)) * 8;
}

namespace {
// KILN_ELEMENTWISE_GRID as a number: -1 auto, 0 capped, else N. choose_variant runs at every
// launch outside a CUDA graph, so the text is parsed again only when it changes (tests switch
// it at run time), not split and matched at each launch.
int grid_setting() {
  thread_local std::string seen = "\x01"; // never a value: parsed on the first call
  thread_local int value = -1;
  const char* raw = std::getenv(setting_info(Setting::elementwise_grid).variable);
  if (seen != (raw ? raw : "")) {
    seen = raw ? raw : "";
    const std::optional<std::string> v = setting_text(Setting::elementwise_grid);
    value = !v || *v == "auto" ? -1 : *v == "capped" ? 0 : std::stoi(*v);
  }
  return value;
}
} // namespace

int elementwise_vec_group(const FusedKernel& k, const CudaTarget& t) {
  const int set = grid_setting();
  if (set >= 0) return set;
  return elementwise_blocks(k, /*vec=*/true) > elementwise_grid_cap(t) ? 2 : 0;
}

// ---- the emitter ---------------------------------------------------------------------------

void Emitter::elementwise_body() {
  line(1, "const idx_t n = (idx_t)p.n;");
  line(1, fmt::format("const idx_t tid = (idx_t){} * blockDim.x + threadIdx.x;", block_index_));
  line(1, fmt::format("const idx_t stride = (idx_t){} * blockDim.x;", grid_blocks_));
  scalars(1);
  std::string start = "tid";
  if (v_.vec) {
    const int epv = elems_per_vec(k_);
    line(1, fmt::format("const idx_t nv = n / {};", epv));
    if (v_.vec_group > 0) {
      vec_group_loop(v_.vec_group);
    } else {
      line(1, "for (idx_t c = tid; c < nv; c += stride) {");
      vec_start(2, "c", /*offsets=*/true);
      vec_loads(2, "", /*declare=*/true);
      vec_compute_store(2, "");
      line(1, "}");
    }
    start = fmt::format("nv * {} + tid", epv);
  }
  line(1, fmt::format("for (idx_t i = {}; i < n; i += stride) {{", start));
  declare_offsets(2, "oi", nullptr, "oo");
  unravel(2, "i", 0, pl_.rank, "oi", "oo");
  tape(2, [&](int j) { return element_load(j); });
  for (size_t j = 0; j < pl_.out.size(); ++j)
    line(2, fmt::format("p.out{}[{}] = {};", j,
                        pl_.out[j].mode == M::strided ? fmt::format("oo{}", j) : "i", stored(j)));
  line(1, "}");
}

void Emitter::vec_start(int ind, const std::string& c, bool offsets) {
  line(ind, fmt::format("const idx_t i0 = {} * {};", c, elems_per_vec(k_)));
  if (offsets && (v_.vec_inputs | v_.splat_inputs)) { // strided inputs: their offsets at i0
    declare_offsets(ind, "oi", nullptr, nullptr);
    unravel(ind, "i0", 0, pl_.rank, "oi", "");
  }
}

void Emitter::vec_loads(int ind, const std::string& sfx, bool declare) {
  const int epv = elems_per_vec(k_);
  for (size_t j = 0; j < pl_.in.size(); ++j) {
    const char* st = cg::st_name(k_.inputs[j].dtype);
    const std::string x = fmt::format("x{}{}", j, sfx);
    if (pl_.in[j].mode == M::contiguous || vec_input(j))
      line(ind, fmt::format("{}{} = *reinterpret_cast<const k_vec<{}, {}>*>(p.in{} + {});",
                            declare ? fmt::format("const k_vec<{}, {}> ", st, epv) : "", x, st, epv,
                            j, vec_input(j) ? fmt::format("oi{}", j) : "i0"));
    else if (splat_input(j))
      line(ind, fmt::format("{}{} = p.in{}[oi{}];", declare ? fmt::format("const {} ", st) : "", x,
                            j, j));
  }
}

void Emitter::vec_compute_store(int ind, const std::string& sfx) {
  const int epv = elems_per_vec(k_);
  for (size_t j = 0; j < pl_.out.size(); ++j)
    line(ind, fmt::format("k_vec<{}, {}> y{};", cg::st_name(k_.outputs[j].dtype), epv, j));
  line(ind, "#pragma unroll");
  line(ind, fmt::format("for (int e = 0; e < {}; ++e) {{", epv));
  line(ind + 1, "const idx_t i = i0 + e;");
  tape(ind + 1, [&](int j) {
    return pl_.in[j].mode == M::scalar ? fmt::format("s{}", j)
           : splat_input(j)            ? fmt::format("x{}{}", j, sfx)
                                       : fmt::format("x{}{}.v[e]", j, sfx);
  });
  for (size_t j = 0; j < pl_.out.size(); ++j)
    line(ind + 1, fmt::format("y{}.v[e] = {};", j, stored(j)));
  line(ind, "}");
  for (size_t j = 0; j < pl_.out.size(); ++j)
    line(ind, fmt::format("*reinterpret_cast<k_vec<{}, {}>*>(p.out{} + i0) = y{};",
                          cg::st_name(k_.outputs[j].dtype), epv, j, j));
}

// `group` vectors a thread, stride apart: all their loads first, so that they are in flight
// together, then each one computed and stored.
void Emitter::vec_group_loop(int group) {
  const int epv = elems_per_vec(k_);
  line(1, fmt::format("for (idx_t c = tid; c < nv; c += {} * stride) {{", group));
  for (int u = 0; u < group; ++u)
    for (size_t j = 0; j < pl_.in.size(); ++j) {
      const char* st = cg::st_name(k_.inputs[j].dtype);
      if (pl_.in[j].mode == M::contiguous || vec_input(j))
        line(2, fmt::format("k_vec<{}, {}> x{}_{};", st, epv, j, u));
      else if (splat_input(j))
        line(2, fmt::format("{} x{}_{};", st, j, u));
    }
  auto open = [&](int u, bool offsets) { // vector u of the group: c + u * stride, below nv
    line(2, u == 0 ? std::string("{") : fmt::format("if (c + {} * stride < nv) {{", u));
    vec_start(3, u == 0 ? std::string("c") : fmt::format("(c + {} * stride)", u), offsets);
  };
  for (int u = 0; u < group; ++u) {
    open(u, /*offsets=*/true);
    vec_loads(3, fmt::format("_{}", u), /*declare=*/false);
    line(2, "}");
  }
  for (int u = 0; u < group; ++u) {
    open(u, /*offsets=*/false);
    vec_compute_store(3, fmt::format("_{}", u));
    line(2, "}");
  }
  line(1, "}");
}

} // namespace kiln::detail::cg
