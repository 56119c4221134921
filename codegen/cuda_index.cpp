// gather / scatter_add kernels. scatter_add gives each thread whole fibers of the output along
// dim (all positions that differ only in dim): it copies x's fiber, then adds src's elements in
// index order. No two threads write one element, so there are no atomics and the sums are the
// same on every run, in the CPU backend's order (runtime/cpu/index_ops.cpp): the same bits.
// The price: parallelism is x.numel / x.shape[dim] threads (an embedding's width).
#include "codegen/cuda_index.h"

#include "codegen/cuda_codegen_internal.h"
#include "ir/hash.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace kiln::detail {

namespace {

constexpr int kIndexKernelVersion = 2; // bumped when these kernels change meaning (2: no
                                       // atomics on the host-mapped error record)
constexpr int kMaxRank = 8;

// Storage type; scatter_add's sum of two of them, rounded to the storage type.
struct TypeSpec {
  const char* type;
  const char* add; // an expression of a and b
};

TypeSpec scatter_type(DType t) {
  switch (t) {
  case DType::f32:
    return {"float", "a + b"};
  case DType::f64:
    return {"double", "a + b"};
  case DType::f16:
    return {"__half", "k_to_f16(__half2float(a) + __half2float(b))"};
  case DType::bf16:
    return {"__nv_bfloat16", "k_to_bf16(__bfloat162float(a) + __bfloat162float(b))"};
  case DType::i32:
    return {"int", "k_add(a, b)"};
  case DType::i64:
    return {"long long", "k_add(a, b)"};
  case DType::boolean:
    break;
  }
  return {"unsigned char", "a"}; // unreachable: the front-end refuses boolean scatter_add
}

// gather only moves elements: an unsigned integer of the element's size serves every dtype.
const char* copy_type(DType t) {
  switch (itemsize(t)) {
  case 1:
    return "unsigned char";
  case 2:
    return "unsigned short";
  case 4:
    return "unsigned int";
  default:
    return "unsigned long long";
  }
}

bool is_scatter(const IndexStep& s) {
  return s.op == IndexStep::Op::scatter_add;
}

const char* kParams = R"(struct KilnIndexError {
  int flag, op;
  long long value, size, dim;
};
struct Params {
  char* out;
  const char* x;
  const char* index;
  const char* src;
  KilnIndexError* err;
  long long rank, dim, n, size, op;
  long long shape[8];  // gather: the index's shape; scatter_add: x's
  long long xs[8];     // x's strides
  long long is[8];     // the index's strides
  long long ss[8];     // src's strides
  long long os[8];     // the output's strides (scatter_add)
  long long ishape[8]; // the index's shape (scatter_add)
};
static_assert(sizeof(Params) == 464, "Params must match pack_index_params");
// Records an out-of-range index for the host, which throws it at the next synchronization.
// Plain stores, no atomics (atomics on host memory need PCIe atomics): threads of one kernel
// may race, but op, size and dim are the kernel's own and value is one of its bad indices;
// a later kernel finds the flag set and leaves the record alone.
__device__ __noinline__ void k_index_error(const Params& p, long long j) {
  volatile KilnIndexError* e = p.err;
  if (!e || e->flag) return;
  e->op = (int)p.op;
  e->value = j;
  e->size = p.size;
  e->dim = p.dim;
  __threadfence_system();
  e->flag = 1;
}
)";

const char* kGather =
    R"(extern "C" __global__ void __launch_bounds__(256) {name}(const __grid_constant__ Params p) {{
  k_wait_for_predecessors();
  typedef {T} T;
  typedef {I} I;
  const int r = (int)p.rank, dim = (int)p.dim;
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += stride) {{
    long long rem = i, io = 0, xo = 0;
    for (int d = r - 1; d >= 0; --d) {{
      const long long c = rem % p.shape[d];
      rem /= p.shape[d];
      io += c * p.is[d];
      if (d != dim) xo += c * p.xs[d];
    }}
    const long long j = (long long)((const I*)p.index)[io];
    T v = 0;
    if (j >= 0 && j < p.size)
      v = ((const T*)p.x)[xo + j * p.xs[dim]];
    else
      k_index_error(p, j);
    ((T*)p.out)[i] = v;
  }}
}}
)";

const char* kScatter =
    R"(__device__ __forceinline__ {T} k_scatter_add({T} a, {T} b) {{ return {add}; }}
extern "C" __global__ void __launch_bounds__(256) {name}(const __grid_constant__ Params p) {{
  k_wait_for_predecessors();
  typedef {T} T;
  typedef {I} I;
  const int r = (int)p.rank, dim = (int)p.dim;
  const long long stride = (long long)gridDim.x * blockDim.x;
  const T* x = (const T*)p.x;
  const T* src = (const T*)p.src;
  const I* index = (const I*)p.index;
  T* out = (T*)p.out;
  for (long long f = (long long)blockIdx.x * blockDim.x + threadIdx.x; f < p.n; f += stride) {{
    long long rem = f, xo = 0, oo = 0, io = 0, so = 0;
    bool inside = true; // the fiber's position is inside the index's shape
    for (int d = r - 1; d >= 0; --d) {{
      if (d == dim) continue;
      const long long c = rem % p.shape[d];
      rem /= p.shape[d];
      xo += c * p.xs[d];
      oo += c * p.os[d];
      io += c * p.is[d];
      so += c * p.ss[d];
      inside = inside && c < p.ishape[d];
    }}
    for (long long j = 0; j < p.size; ++j) out[oo + j * p.os[dim]] = x[xo + j * p.xs[dim]];
    if (!inside) continue;
    for (long long i = 0; i < p.ishape[dim]; ++i) {{
      const long long j = (long long)index[io + i * p.is[dim]];
      if (j < 0 || j >= p.size) {{
        k_index_error(p, j);
        continue;
      }}
      T& o = out[oo + j * p.os[dim]];
      o = k_scatter_add(o, src[so + i * p.ss[dim]]);
    }}
  }}
}}
)";

const char* index_type(DType t) {
  return t == DType::i32 ? "int" : "long long";
}

// What the source depends on: op, element type and index type.
std::string structural_key(const IndexStep& s) {
  return is_scatter(s)
             ? fmt::format("index scatter_add {} idx {}", dtype_name(s.dtype),
                           dtype_name(s.index_dtype))
             : fmt::format("index gather b{} idx {}", itemsize(s.dtype), dtype_name(s.index_dtype));
}

// Threads: gather, one per output element; scatter_add, one per fiber along dim.
int64_t work_items(const IndexStep& s) {
  if (!is_scatter(s)) return s.out_shape.numel();
  int64_t n = 1;
  for (int d = 0; d < s.out_shape.size(); ++d)
    if (d != s.dim) n *= s.out_shape[d];
  return n;
}

} // namespace

std::string index_kernel_id(const IndexStep& s) {
  return structural_key(s);
}

CudaKernelSource render_index_cuda(const IndexStep& s, const CudaTarget& t) {
  CudaKernelSource src;
  src.key = fmt::format("{} sm_{} nvrtc{} cg{} ix{} {}", structural_key(s), t.arch, t.nvrtc_version,
                        kCodegenVersion, kIndexKernelVersion, pasted_sources_tag());
  const std::string words = is_scatter(s) ? fmt::format("scatter_add_{}", dtype_name(s.dtype))
                                          : fmt::format("gather_b{}", itemsize(s.dtype));
  src.name = fmt::format("kiln_{}_{}_sm{}_{:06x}", words, dtype_name(s.index_dtype), t.arch,
                         fnv1a64(src.key) & 0xffffff);
  std::string code = fmt::format("// {}: generated by kiln (index kernels v{})\n// key: {}\n",
                                 src.name, kIndexKernelVersion, src.key);
  const bool half = is_scatter(s) && (s.dtype == DType::f16 || s.dtype == DType::bf16);
  if (half) code += cg::half_preamble();
  code += cg::preamble();
  code += kParams;
  const char* I = index_type(s.index_dtype);
  if (is_scatter(s)) {
    const TypeSpec ts = scatter_type(s.dtype);
    code += fmt::format(fmt::runtime(kScatter), fmt::arg("name", src.name), fmt::arg("T", ts.type),
                        fmt::arg("I", I), fmt::arg("add", ts.add));
  } else {
    code += fmt::format(fmt::runtime(kGather), fmt::arg("name", src.name),
                        fmt::arg("T", copy_type(s.dtype)), fmt::arg("I", I));
  }
  src.source = std::move(code);
  return src;
}

CudaLaunch index_launch(const IndexStep& s, const CudaTarget& t) {
  CudaLaunch l;
  const int64_t n = work_items(s);
  const int64_t blocks = (n + l.block - 1) / l.block;
  l.grid = static_cast<uint32_t>(std::min<int64_t>(blocks, int64_t{t.sm_count} * 8));
  return l;
}

ParamTemplate index_param_template(const IndexStep& s, IndexError* err) {
  ParamTemplate t;
  std::vector<int64_t> f;
  const int64_t isz = itemsize(s.dtype), iisz = itemsize(s.index_dtype);
  auto ptr = [&](int slot, int64_t byte_offset) { // patched per launch
    if (slot >= 0) t.pointers.push_back({static_cast<uint32_t>(8 * f.size()), slot, byte_offset});
    f.push_back(0);
  };
  ptr(s.out_slot, 0);
  ptr(s.x_slot, s.x.offset * isz);
  ptr(s.index_slot, s.index.offset * iisz);
  ptr(is_scatter(s) ? s.src_slot : -1, is_scatter(s) ? s.src.offset * isz : 0);
  f.push_back(static_cast<int64_t>(reinterpret_cast<uintptr_t>(err)));
  const int op = is_scatter(s) ? 2 : s.select ? 1 : 0;
  for (int64_t v :
       {int64_t{s.out_shape.size()}, int64_t{s.dim}, work_items(s), s.x.shape[s.dim], int64_t{op}})
    f.push_back(v);
  auto array = [&](const Shape* v) {
    for (int d = 0; d < kMaxRank; ++d) f.push_back(v && d < v->size() ? (*v)[d] : 0);
  };
  const Shape os = contiguous_strides(s.out_shape);
  array(&s.out_shape); // gather: the index's shape; scatter_add: x's
  array(&s.x.strides);
  array(&s.index.strides);
  array(is_scatter(s) ? &s.src.strides : nullptr);
  array(is_scatter(s) ? &os : nullptr);
  array(is_scatter(s) ? &s.index.shape : nullptr);
  t.bytes.resize(f.size() * 8);
  std::memcpy(t.bytes.data(), f.data(), t.bytes.size());
  return t;
}

std::vector<std::byte> pack_index_params(const IndexStep& s, llvm::ArrayRef<void*> slot_base,
                                         IndexError* err) {
  ParamTemplate t = index_param_template(s, err);
  t.patch(slot_base);
  return std::move(t.bytes);
}

} // namespace kiln::detail
