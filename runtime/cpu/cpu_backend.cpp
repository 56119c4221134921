// The CPU backend: 64-byte aligned host memory, the tape interpreter and BLAS.
//
// Freed buffers up to 64 MiB are kept for reuse (256 MiB in all): a loop step frees and
// allocates the same sizes, and handing them back to malloc made it trim the heap and fault the
// pages back in at the next step.
#include "runtime/cpu/cpu_backend.h"

#include "ir/errors.h"
#include "ir/settings.h"
#include "runtime/cpu/gemm.h"
#include "runtime/cpu/index_ops.h"
#include "runtime/cpu/interpreter.h"
#include "runtime/memory_stats.h"
#include "runtime/recycled_blocks.h"

#include <cstdlib>
#include <cstring>

namespace kiln::detail {

MemoryStats& memory_stats() {
  static MemoryStats s;
  return s;
}

bool poison_allocations() {
  static const bool on = [] { return setting_flag(Setting::poison_allocations).value_or(false); }();
  return on;
}

namespace {

class CpuBackend final : public Backend {
public:
  Device device() const override { return Device::cpu(); }

  BufferRef allocate(size_t bytes, const void* hint) override {
    size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
    void* p = recycled_.take(rounded, hint);
    if (!p) p = std::aligned_alloc(64, rounded);
    if (!p) { // give the kept blocks back, then try once more
      recycled_.release_all([](void* q, size_t) { std::free(q); });
      p = std::aligned_alloc(64, rounded);
    }
    if (!p) fail("alloc", "out of host memory allocating {} bytes", bytes);
    if (poison_allocations()) std::memset(p, 0xff, rounded); // NaN / -1 in every dtype
    return adopt(p, bytes);
  }

  void release(Buffer& b) override {
    size_t rounded = (std::max<size_t>(b.bytes, 1) + 63) / 64 * 64;
    auto give_back = [](void* q, size_t) { std::free(q); };
    if (!recycled_.keep(b.data, rounded, give_back)) give_back(b.data, 0);
    memory_stats().on_free(static_cast<int64_t>(b.bytes));
    b.data = nullptr;
  }

  BufferRef upload(const void* src, size_t bytes, const Buffer* pinned, const void* hint,
                   const char* op) override {
    (void)pinned, (void)op;
    BufferRef b = allocate(bytes, hint);
    if (bytes) std::memcpy(b->data, src, bytes);
    return b;
  }

  void copy_to_host(void* dst, const Buffer& src, size_t offset, size_t bytes) override {
    std::memcpy(dst, static_cast<const char*>(src.data) + offset, bytes);
  }

  void run_kernel(const FusedKernel& k, llvm::ArrayRef<Buffer*> buffers) override {
    if (k.segmented()) // one after the other: each is parallel over its own elements
      for (int s = 0; s < static_cast<int>(k.segments.size()); ++s)
        cpu::run_elementwise(k.segment(s), buffers);
    else if (k.kind == FusedKernel::Kind::reduce)
      cpu::run_reduce(k, buffers);
    else
      cpu::run_elementwise(k, buffers);
  }

  void run_gemm(const GemmStep& g, llvm::ArrayRef<Buffer*> buffers) override {
    cpu::run_gemm(g, static_cast<const char*>(buffers[g.a_slot]->data),
                  static_cast<const char*>(buffers[g.b_slot]->data),
                  static_cast<char*>(buffers[g.out_slot]->data));
  }

  void run_index(const IndexStep& s, llvm::ArrayRef<Buffer*> buffers) override {
    auto base = [&](int slot) {
      return slot < 0 ? nullptr : static_cast<const char*>(buffers[slot]->data);
    };
    cpu::run_index(s, base(s.x_slot), base(s.index_slot), base(s.src_slot),
                   static_cast<char*>(buffers[s.out_slot]->data));
  }

  void synchronize() override {}

private:
  RecycledBlocks recycled_{size_t(64) << 20, size_t(256) << 20};
};

} // namespace

Backend& cpu_backend() {
  static auto* b = new CpuBackend; // never destroyed: static tensors may outlive main
  return *b;
}

} // namespace kiln::detail
