// CudaBackend: memory, copies and launches on one device.
//
// Memory comes from the device's default stream-ordered pool (cudaMallocAsync) with its
// release threshold raised, so a buffer freed by its last handle is reused by later work in
// stream order without a device sync. Host copies go through a ring of pinned chunks
// (host_copies.h). Large uploads and downloads into pinned blocks run on copy streams beside the
// compute stream (copy_stream.h).
#include "runtime/cuda/cuda_backend.h"
#include "codegen/nvrtc/nvrtc_api.h"
#include "runtime/cuda/cublas_api.h"

#include "runtime/cuda/copy_stream.h"
#include "runtime/cuda/cuda_batch.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_gemm.h"
#include "runtime/cuda/host_copies.h"
#include "runtime/cuda/index_error.h"
#include "runtime/cuda/kernel_cache.h"
#include "runtime/cuda/ordered_stream.h"
#include "runtime/cuda/pinned_pool.h"
#include "runtime/memory_stats.h"
#include "runtime/recycled_blocks.h"

#include <llvm/ADT/SmallVector.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace kiln::detail {

namespace {

// Blocks of at most 16 MiB (256 MiB in all) are recycled: safe for the same reason as the
// pool's own reuse, since every block is released on the compute stream after all the work that
// used it (uploads are joined into it first; a download holds its source until it has read it),
// so work using a reused block is ordered after the work that used it before. A plan's buffers
// then keep their addresses from run to run (the executor asks for the block a slot had last
// time), where the pool's did not: a cuBLAS call in a replayed graph whose operand moved is
// staged by a copy kernel (cuda_batch.cpp), and a moved kernel argument is an update.
constexpr size_t kRecycledBlock = size_t(16) << 20;
constexpr size_t kRecycledBytes = size_t(256) << 20;

class CudaBackend final : public Backend {
public:
  explicit CudaBackend(int index) : index_(index) {
    cuda_check(cudaSetDevice(index), "cuda", "cudaSetDevice");
    stream_ = std::make_unique<OrderedStream>(index);
    cuda_check(cudaDeviceGetDefaultMemPool(&pool_, index), "cuda", "cudaDeviceGetDefaultMemPool");
    uint64_t keep = UINT64_MAX; // keep freed blocks cached; trimmed on out-of-memory
    cuda_check(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep), "cuda",
               "cudaMemPoolSetAttribute");
    kernels_ = std::make_unique<CudaKernelCache>(index);
    gemm_ = std::make_unique<CudaGemm>(*stream_);
  }

  Device device() const override { return Device::cuda(index_); }

  BufferRef allocate(size_t bytes, const void* hint) override {
    const size_t n = std::max<size_t>(bytes, 1);
    if (void* q = recycled_.take(n, hint)) {
      if (poison_allocations()) // after queued replays that still use the block
        cudaMemsetAsync(q, 0xff, n, stream_->after_queued_quietly());
      return adopt(q, bytes);
    }
    // a fresh block: no queued replay uses it
    return adopt(fresh_block(bytes, stream_->for_new_allocation()), bytes);
  }

  void release(Buffer& b) override {
    // Stream-ordered either way: later work on this stream reuses the block after the work
    // that used it, without a sync.
    // Kept blocks are reused by later work, queued after the replays that used them; a block
    // given back to the pool must be freed after those replays.
    auto give_back = [this](void* q, size_t) { cudaFreeAsync(q, stream_->after_queued_quietly()); };
    if (!recycled_.keep(b.data, std::max<size_t>(b.bytes, 1), give_back)) give_back(b.data, 0);
    memory_stats().on_free(static_cast<int64_t>(b.bytes));
    b.data = nullptr;
  }

  // Large uploads while kernels run go to the upload stream, into a block allocated there
  // (copy_stream.h); the others to the compute stream, into a block that queued replays may
  // still read.
  BufferRef upload(const void* src, size_t bytes, const Buffer* pinned, const void* hint,
                   const char* op) override {
    // Straight from the page-locked block, without staging, and without waiting: the block's
    // release is fenced after this copy (PinnedPool), and kiln never writes into it. A block of
    // another GPU's pool is fenced on that GPU's stream, not this one: it is staged.
    const bool direct = pinned && pinned->external_ctx == this;
    // Nothing runs that the copy could overlap when the compute stream is idle: the copy goes
    // there, into a block the pool reuses in that stream's own order.
    if (bytes < CopyStream::kMinUploadBytes || stream_->idle()) {
      BufferRef b = allocate(bytes, hint);
      copy_in(b->data, src, bytes, direct, copies_, stream_->after_queued(), op);
      return b;
    }
    const cudaStream_t copies = uploads_.stream();
    BufferRef b = adopt(fresh_block(bytes, copies), bytes);
    try {
      copy_in(b->data, src, bytes, direct, upload_copies_, copies, op);
    } catch (...) { // the block's release and any later work must still come after the copy
      uploads_.join(stream_->after_queued_quietly());
      throw;
    }
    uploads_.join(stream_->after_queued_quietly()); // a failed queued launch: reported later
    memory_stats().copies_overlapped++;
    return b;
  }

  BufferRef allocate_pinned_host(size_t bytes) override {
    return pinned_block(bytes, "pin_memory");
  }

  // Into a pinned block, on the download stream after the work queued so far (which produced
  // `src`); returns at once. Host readers wait for the block's ticket (wait_written); `src` is
  // held until the copy has read it. Null (the caller copies synchronously) when no more host
  // memory can be pinned.
  BufferRef download(BufferRef src, const void* data, size_t bytes, const char* op) override {
    BufferRef b;
    try {
      b = pinned_block(bytes, op);
    } catch (const Error&) {
      return nullptr;
    }
    downloads_.follow(stream_->after_queued(), op);
    cuda_check(cudaMemcpyAsync(b->data, data, bytes, cudaMemcpyDeviceToHost, downloads_.stream()),
               op, "cudaMemcpyAsync (device to pinned host)");
    b->write_ticket = downloads_.mark(std::move(src), op);
    b->writer = this;
    memory_stats().copies_overlapped++;
    return b;
  }

  // Out-of-range indices of the work before the download are reported at the next sync or
  // read of GPU memory, not here: the flag may already hold those of later work.
  void wait_copy(uint64_t ticket) override { downloads_.wait(ticket, "to"); }

  void copy_to_host(void* dst, const Buffer& src, size_t offset, size_t bytes) override {
    downloads_.release_passed(); // a read is a natural point to let go of finished sources
    copies_.to_host(dst, static_cast<const char*>(src.data) + offset, bytes,
                    stream_->after_queued(), "to_vector");
    index_error_.check(index_);
  }

  void run_kernel(const FusedKernel& k, llvm::ArrayRef<Buffer*> buffers) override {
    llvm::SmallVector<void*, 16> base;
    for (Buffer* b : buffers) base.push_back(b ? b->data : nullptr);
    kernels_->launch(k, base, stream_->after_queued());
  }

  void run_index(const IndexStep& s, llvm::ArrayRef<Buffer*> buffers) override {
    llvm::SmallVector<void*, 16> base;
    for (Buffer* b : buffers) base.push_back(b ? b->data : nullptr);
    kernels_->launch_index(s, base, index_error_.device_ptr(), stream_->after_queued());
  }

  void run_gemm(const GemmStep& g, llvm::ArrayRef<Buffer*> buffers) override {
    gemm_->run(g, buffers[g.a_slot]->data, buffers[g.b_slot]->data, buffers[g.out_slot]->data);
  }

  std::unique_ptr<StepBatch> prepare_batch(llvm::ArrayRef<BatchItem> items) override {
    return std::make_unique<CudaBatch>(*kernels_, *gemm_, *stream_, index_error_, items);
  }

  // Uploads are joined into the compute stream; downloads are not.
  void synchronize() override {
    cuda_check(cudaStreamSynchronize(stream_->after_queued()), "sync", "cudaStreamSynchronize");
    downloads_.synchronize("sync");
    index_error_.check(index_);
  }

  bool asynchronous() const override { return true; }

  // Adopted memory must be this GPU's (or managed): a host pointer given as CUDA memory would
  // fault in the first kernel that reads it.
  std::string check_adopted(const void* data, size_t bytes) override {
    (void)bytes;
    cudaPointerAttributes a{};
    if (cudaPointerGetAttributes(&a, data) != cudaSuccess) {
      (void)cudaGetLastError();
      return "not memory CUDA knows";
    }
    if (a.type == cudaMemoryTypeManaged) return {};
    if (a.type != cudaMemoryTypeDevice)
      return a.type == cudaMemoryTypeHost ? "pinned host memory, not device memory"
                                          : "host memory, not device memory";
    if (a.device != index_) return fmt::format("memory of cuda:{}, not cuda:{}", a.device, index_);
    return {};
  }

  // The compute stream only: an early flush feeds it, whatever the copy streams do. An error of
  // earlier work also ends the wait: it reads as idle, and the next operation that checks errors
  // reports it.
  bool idle() override { return stream_->idle(); }

private:
  // A block from the pool in `stream`'s order, poisoned when asked; throws kiln::Error when the
  // device is out of memory even after the cached blocks were given back.
  void* fresh_block(size_t bytes, cudaStream_t stream) {
    const size_t n = std::max<size_t>(bytes, 1);
    void* p = nullptr;
    cudaError_t e = cudaMallocAsync(&p, n, stream);
    if (e == cudaErrorMemoryAllocation) { // give cached blocks back, then try once more
      (void)cudaGetLastError();
      // First the sources that finished downloads still hold: released, they join the cache.
      (void)cudaStreamSynchronize(downloads_.stream());
      (void)cudaGetLastError();
      downloads_.release_passed();
      const cudaStream_t s = stream_->after_queued_quietly(); // queued replays may use them
      recycled_.release_all([s](void* q, size_t) { cudaFreeAsync(q, s); });
      cudaStreamSynchronize(s);
      cudaMemPoolTrimTo(pool_, 0);
      e = cudaMallocAsync(&p, n, stream);
    }
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      cudaMemGetInfo(&free_b, &total_b);
      fail("alloc", "out of device memory on cuda:{}: requested {} bytes, {} bytes free of {} ({})",
           index_, bytes, free_b, total_b, cudaGetErrorString(e));
    }
    if (poison_allocations()) cudaMemsetAsync(p, 0xff, n, stream); // NaN / -1 in every dtype
    return p;
  }

  // A page-locked block from the pool, as a CPU tensor's storage; its release is fenced on
  // every stream that may copy from or into it.
  BufferRef pinned_block(size_t bytes, const char* op) {
    BufferRef b(new Buffer);
    b->data = pinned_.allocate(bytes, op);
    b->bytes = bytes;
    b->pinned_host = true;
    b->release_external = [](void* data, void* backend) {
      auto* self = static_cast<CudaBackend*>(backend);
      self->pinned_.release(data, {self->stream_->after_queued_quietly(), self->uploads_.stream(),
                                   self->downloads_.stream()});
    };
    b->external_ctx = this;
    return b;
  }

  // `ring`: the staging chunks of `stream` (a chunk's reuse waits for the stream's last copy
  // from it, so a ring shared with the compute stream would wait for its kernels).
  void copy_in(void* dst, const void* src, size_t bytes, bool direct, HostCopies& ring,
               cudaStream_t stream, const char* op) {
    if (!direct) return ring.to_device(dst, src, bytes, stream, op);
    cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream), op,
               "cudaMemcpyAsync (pinned host to device)");
  }

  int index_;
  RecycledBlocks recycled_{kRecycledBlock, kRecycledBytes};
  std::unique_ptr<OrderedStream> stream_;
  cudaMemPool_t pool_ = nullptr;
  HostCopies copies_{index_};        // staging for the compute stream
  HostCopies upload_copies_{index_}; // staging for the upload stream
  CopyStream uploads_{index_};
  CopyStream downloads_{index_};
  PinnedPool pinned_{index_};
  std::unique_ptr<CudaKernelCache> kernels_;
  std::unique_ptr<CudaGemm> gemm_;
  IndexErrorFlag index_error_;
};

// Never destroyed: tensors in static storage may release buffers after main returns.
std::vector<std::unique_ptr<CudaBackend>>& backends() {
  static auto* b = new std::vector<std::unique_ptr<CudaBackend>>;
  return *b;
}

} // namespace

namespace {
struct Probe {
  int count = 0;
  std::string why; // why there is no device, for error messages
};

const Probe& probe() {
  static const Probe p = [] {
    Probe r;
    cudaError_t e = cudaGetDeviceCount(&r.count);
    if (e != cudaSuccess) { // no driver or no device: the CPU is all there is
      (void)cudaGetLastError();
      r.count = 0;
      r.why = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(e);
    } else if (r.count == 0) {
      r.why = "no CUDA device found";
    } else if (std::string why = nvrtc_unavailable_reason(); !why.empty()) {
      r.count = 0, r.why = why;    // a GPU, but kiln cannot compile or multiply for it
    } else if (cublas_enabled()) { // without cuBLAS (KILN_CUBLAS=0) it is not even loaded
      if (std::string why = cublas_unavailable_reason(); !why.empty()) r.count = 0, r.why = why;
    }
    return r;
  }();
  return p;
}
} // namespace

int cuda_device_count() {
  return probe().count;
}
const std::string& cuda_unavailable_reason() {
  return probe().why;
}

Backend& cuda_backend(int index) {
  auto& all = backends();
  if (static_cast<int>(all.size()) <= index) all.resize(index + 1);
  if (!all[index]) all[index] = std::make_unique<CudaBackend>(index);
  return *all[index];
}

void cuda_synchronize_all() {
  for (auto& b : backends())
    if (b) b->synchronize();
}

} // namespace kiln::detail
