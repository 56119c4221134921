#pragma once
// Backend interface: memory, and running the steps the planner produces. The engine talks to
// devices only through this interface; runtime/ never builds source.
#include <kiln/device.h>
#include <kiln/dtype.h>

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/IntrusiveRefCntPtr.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace kiln {
struct Stats;
}

namespace kiln::detail {

struct FusedKernel;
struct GemmStep;
struct IndexStep;
class Backend;

/// A block of device memory. Freed (returned to its backend) when the last reference goes.
/// The count is our own rather than llvm::RefCountedBase's because the planner reads it: an
/// input buffer referenced only by values that die with an evaluation may take that
/// evaluation's output in place (engine/buffer_reuse.cpp). Not atomic: kiln is used from one
/// thread at a time, and backends' worker threads only see raw Buffer pointers.
struct Buffer {
  void* data = nullptr;
  size_t bytes = 0;
  Backend* owner = nullptr;
  /// Memory a user handed kiln (from_blob, from_dlpack): no owner, never written by kiln (no
  /// in-place output takes it), and given back with release_external(data, external_ctx) when
  /// the last reference goes (null: the user keeps ownership). Plain pointers, so that the
  /// executor's unowned views of buffers stay trivially copyable.
  void (*release_external)(void* data, void* ctx) = nullptr;
  void* external_ctx = nullptr;
  /// Adopted memory of a device that runs work asynchronously (a GPU): waited for before the
  /// memory is given back, since queued kernels may still read it.
  Backend* external_device = nullptr;
  /// Page-locked host memory from a GPU backend's pool (Tensor::pin_memory): a CPU tensor's
  /// storage that the GPU's copies read directly and asynchronously. External: no kernel
  /// writes it (a download fills it once, see `writer`); its release is ordered after the copies
  /// queued before it.
  bool pinned_host = false;
  /// Set while a copy that writes this host memory may still be in flight (a GPU's download into
  /// a pinned block, which returns before the data is there): readers on the host call
  /// wait_written first.
  Backend* writer = nullptr;
  uint64_t write_ticket = 0; // the writer's ticket for that copy
  ~Buffer();
  // From a free list (device.cpp): a step allocates a Buffer per value it writes.
  static void* operator new(std::size_t bytes);
  static void operator delete(void* p, std::size_t bytes) noexcept;
  bool external() const { return owner == nullptr; }
  void Retain() const { ++refs_; }
  void Release() const {
    if (--refs_ == 0) delete this;
  }
  unsigned use_count() const { return refs_; }

private:
  mutable unsigned refs_ = 0;
};
using BufferRef = llvm::IntrusiveRefCntPtr<Buffer>;

/// One step of a batch: a fused kernel, a GEMM or a gather/scatter (exactly one is set).
struct BatchItem {
  const FusedKernel* kernel = nullptr;
  const GemmStep* gemm = nullptr;
  const IndexStep* index = nullptr;
};

/// Consecutive steps of a cached plan, prepared once and run at every repetition of the plan
/// (CUDA: launch records, then a CUDA graph replayed with the pointers of each run).
class StepBatch {
public:
  virtual ~StepBatch() = default;
  /// Run the steps; buffers[i] is the storage of slot i, every output already allocated.
  /// `graphs`: whether a CUDA graph may be used (kiln::set_graphs). Counts graph
  /// instantiations, replays, updates and direct runs in `stats`.
  virtual void run(llvm::ArrayRef<Buffer*> buffers, bool graphs, Stats& stats) = 0;
};

class Backend {
public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  /// Throws kiln::Error when memory cannot be had. `hint`: an address this allocation would
  /// preferably get (where the same output was last time: a replayed CUDA graph whose pointers
  /// do not move needs no update); ignored where it does not help.
  virtual BufferRef allocate(size_t bytes, const void* hint = nullptr) = 0;
  virtual void release(Buffer& b) = 0;
  /// A new buffer of this device holding `bytes` copied from host memory at `src`. Returns once
  /// `src` has been read, except when `pinned` (the page-locked Buffer that holds `src`, see
  /// Buffer::pinned_host) is given: a GPU may read it later, in the order of its work. A GPU's
  /// copy overlaps the kernels queued before it (CudaBackend). `hint` as for allocate; `op`
  /// names the user's operation in errors.
  virtual BufferRef upload(const void* src, size_t bytes, const Buffer* pinned, const void* hint,
                           const char* op) = 0;
  /// `bytes` of `src` from `offset` into host memory at `dst`; returns when `dst` holds them.
  virtual void copy_to_host(void* dst, const Buffer& src, size_t offset, size_t bytes) = 0;
  /// A new host buffer receiving `bytes` at `data` (inside the buffer `src`), in the order of
  /// this device's work, without waiting for them: the buffer's `writer` is set until
  /// wait_written, and `src` is held until the copy has read it. Null where the device has no
  /// such copy (the CPU) or cannot make one now: the caller copies with copy_to_host.
  virtual BufferRef download(BufferRef src, const void* data, size_t bytes, const char* op) {
    (void)src, (void)data, (void)bytes, (void)op;
    return nullptr;
  }
  /// Waits for the copy with `ticket` from download(); throws kiln::Error if it failed.
  virtual void wait_copy(uint64_t ticket) { (void)ticket; }
  /// Page-locked host memory of `bytes` from this device's pool (an external, pinned_host
  /// Buffer), or null where the device has none (the CPU).
  virtual BufferRef allocate_pinned_host(size_t bytes) {
    (void)bytes;
    return nullptr;
  }
  /// Run a fused kernel; buffers[i] is the storage of kernel slot i.
  virtual void run_kernel(const FusedKernel& k, llvm::ArrayRef<Buffer*> buffers) = 0;
  virtual void run_gemm(const GemmStep& g, llvm::ArrayRef<Buffer*> buffers) = 0;
  /// gather / scatter_add (ir/index_step.h). Out-of-range indices: the CPU throws kiln::Error
  /// (the output is left unfinished, never realized); CUDA skips them and reports one at
  /// the next synchronization (docs/semantics.md, "Indexing").
  virtual void run_index(const IndexStep& s, llvm::ArrayRef<Buffer*> buffers) = 0;
  /// Prepare `items` to run as one batch, or null where running them one by one is as fast
  /// (the CPU). The items outlive the batch.
  virtual std::unique_ptr<StepBatch> prepare_batch(llvm::ArrayRef<BatchItem> items) {
    (void)items;
    return nullptr;
  }
  /// "" if `bytes` bytes at `data` are memory of this device that kernels may read, else why
  /// not (from_blob, from_dlpack).
  virtual std::string check_adopted(const void* data, size_t bytes) { return {}; }
  /// Wait until all work issued so far is done.
  virtual void synchronize() = 0;
  /// Whether work issued to this backend runs while the host goes on (a GPU stream), rather
  /// than before the call that issued it returns (the CPU). Only such devices gain from
  /// flushing the pending graph early (engine/adaptive_flush.cpp).
  virtual bool asynchronous() const { return false; }
  /// Whether everything issued so far has finished. Never waits.
  virtual bool idle() { return true; }

protected:
  /// Wrap memory this backend allocated in a Buffer (released through release()) and count it
  /// in kiln::stats().
  BufferRef adopt(void* data, size_t bytes);
};

/// Waits until the copy writing `b` (Buffer::writer), if any, is done.
void wait_written(Buffer& b);
/// The backend for a device; throws kiln::Error naming `op` if the device is unavailable.
Backend& backend_for(Device d, const char* op);
/// The device KILN_DEVICE names (cpu, cuda, cuda:N), or without it CUDA when available, else
/// the CPU; throws kiln::Error for a value that is not a device or not available.
Device device_from_env();
/// KILN_POISON_ALLOCATIONS=1: fill every new buffer with 0xff bytes (NaN, -1, true) so tests
/// catch kernels that leave outputs unwritten.
bool poison_allocations();
/// Whether CUDA graph replays are issued from a launch thread (kiln::set_launch_thread,
/// KILN_LAUNCH_THREAD=0 turns it off; runtime/cuda/launch_thread.h).
bool& launch_thread();
/// Tests: make the n-th CUDA graph launch issued from now on by a launch thread (or by the
/// caller, when the thread sleeps) fail with kiln::Error, once; 0 cancels.
void fail_queued_launch_for_tests(int nth);
/// Whether f32 GEMMs may use TF32 tensor cores (kiln::set_allow_tf32, KILN_ALLOW_TF32=1).
bool& allow_tf32();
/// Whether matmuls on CUDA may go to cuBLAS (kiln::set_cublas, KILN_CUBLAS=0 turns it off: every
/// floating matmul is then a generated kernel's, and no cuBLAS handle is made).
bool& cublas_enabled();
/// KILN_CUBLAS=wait (kiln::set_cublas_waits): a matmul for cuBLAS waits for cuBLAS's per-process
/// set-up instead of running in kiln's kernels meanwhile (compute_while_cublas_sets_up).
bool& cublas_waits();
/// The GEMMs whose cuBLAS set-up is separate (runtime/cuda/cublas_set_up.h): 0 f32, 1 f32 on
/// TF32 tensor cores (set_allow_tf32), 2 f64, 3 f16, 4 bf16; -1 for any other type.
int cublas_kind(DType t);
/// Bit k set: cuBLAS's set-up for kind k has finished in this process (never cleared; 0 in a
/// build without CUDA).
uint32_t cublas_ready_kinds();
/// Whether a matmul of kind k on CUDA device d that would go to cuBLAS runs in kiln's kernels
/// while cuBLAS sets itself up for it, whose set-up this then starts on a thread (once per
/// kind). False under KILN_CUBLAS=wait and KILN_COMPILE=sync or 0: there nothing runs in place of
/// what is not ready.
bool compute_while_cublas_sets_up(Device d, int kind);
/// Whether a CUDA graph lets each generated kernel launch while the kernel before it finishes
/// (programmatic dependent launch on sm_90+; KILN_PDL=0 turns it off).
bool& programmatic_launch();
/// Whether consecutive launches of one small kernel run as one merged launch (codegen's
/// CudaRepeat; off unless KILN_MERGE_LAUNCHES=1 or kiln::set_merge_launches).
bool& merge_launches();
/// Wait for every backend in use.
void synchronize_all();

} // namespace kiln::detail
