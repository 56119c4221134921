#include "runtime/cuda/host_copies.h"

#include "runtime/cpu/thread_pool.h"
#include "runtime/cuda/cuda_check.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace kiln::detail {

void parallel_memcpy(void* dst, const void* src, size_t bytes) {
  // Pieces of 256 KiB: a staging chunk (8 MiB) splits into 32, enough for every thread of a
  // 16-core host (one thread copies about 10 GB/s). Pieces of 1 MiB kept half the threads idle
  // and halved the pipeline's speed (bench/results/2026-11-26-h100-session20.md).
  constexpr int64_t kGrain = int64_t(256) << 10;
  cpu::parallel_for(static_cast<int64_t>(bytes), kGrain, [&](int64_t begin, int64_t end) {
    std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin,
                static_cast<size_t>(end - begin));
  });
}

namespace {

// Page-locked (cudaMallocHost, cudaHostRegister) memory needs no staging: the DMA engine reads
// and writes it directly. Asked only for copies of a chunk or more (the query costs about a
// microsecond).
bool page_locked(const void* p, size_t bytes) {
  if (bytes < HostCopies::kChunkBytes) return false;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeHost;
}

void direct(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream,
            const char* op) {
  cuda_check(cudaMemcpyAsync(dst, src, bytes, kind, stream), op, "cudaMemcpyAsync (page-locked)");
  cuda_check(cudaStreamSynchronize(stream), op, "cudaStreamSynchronize");
}

} // namespace

CurrentDevice::CurrentDevice(int device) {
  if (cudaGetDevice(&previous_) != cudaSuccess || previous_ == device) {
    (void)cudaGetLastError();
    previous_ = -1;
    return;
  }
  (void)cudaSetDevice(device);
}

CurrentDevice::~CurrentDevice() {
  if (previous_ >= 0) (void)cudaSetDevice(previous_);
}

HostCopies::HostCopies(int device) : device_(device) {}

HostCopies::~HostCopies() {
  for (Chunk& c : chunks_) {
    if (c.done) cudaEventSynchronize(c.done); // a DMA may still read or write the chunk
    if (c.host) cudaFreeHost(c.host);
    if (c.done) cudaEventDestroy(c.done);
  }
}

HostCopies::Chunk& HostCopies::chunk(int i, const char* op) {
  Chunk& c = chunks_[static_cast<size_t>(i % kChunks)];
  if (!c.done || !c.host) {
    CurrentDevice on(device_);
    if (!c.done)
      cuda_check(cudaEventCreateWithFlags(&c.done, cudaEventDisableTiming), op, "cudaEventCreate");
    if (!c.host)
      cuda_check(cudaMallocHost(reinterpret_cast<void**>(&c.host), kChunkBytes), op,
                 "cudaMallocHost (pinned staging chunk)");
  }
  // The DMA that used the chunk last (of any earlier copy) has finished with it. An event never
  // recorded counts as complete.
  cuda_check(cudaEventSynchronize(c.done), op, "cudaEventSynchronize");
  return c;
}

void HostCopies::to_device(void* dst, const void* src, size_t bytes, cudaStream_t stream,
                           const char* op) {
  if (page_locked(src, bytes)) return direct(dst, src, bytes, cudaMemcpyHostToDevice, stream, op);
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  for (size_t done = 0, i = 0; done < bytes; ++i) {
    const size_t n = std::min(bytes - done, kChunkBytes);
    Chunk& c = chunk(static_cast<int>(i), op);
    parallel_memcpy(c.host, s + done, n); // overlaps the DMA of the chunks before
    cuda_check(cudaMemcpyAsync(d + done, c.host, n, cudaMemcpyHostToDevice, stream), op,
               "cudaMemcpyAsync (host to device)");
    cuda_check(cudaEventRecord(c.done, stream), op, "cudaEventRecord");
    done += n;
  }
}

void HostCopies::to_host(void* dst, const void* src, size_t bytes, cudaStream_t stream,
                         const char* op) {
  if (page_locked(dst, bytes)) return direct(dst, src, bytes, cudaMemcpyDeviceToHost, stream, op);
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  const size_t count = (bytes + kChunkBytes - 1) / kChunkBytes;
  auto part = [&](size_t k) { return std::min(bytes - k * kChunkBytes, kChunkBytes); };
  auto start = [&](size_t k) { // DMA of part k into its chunk
    Chunk& c = chunk(static_cast<int>(k), op);
    cuda_check(
        cudaMemcpyAsync(c.host, s + k * kChunkBytes, part(k), cudaMemcpyDeviceToHost, stream), op,
        "cudaMemcpyAsync (device to host)");
    cuda_check(cudaEventRecord(c.done, stream), op, "cudaEventRecord");
  };
  for (size_t k = 0; k < std::min<size_t>(count, kChunks); ++k) start(k);
  for (size_t k = 0; k < count; ++k) {
    Chunk& c = chunk(static_cast<int>(k), op);             // waits for part k's DMA
    parallel_memcpy(d + k * kChunkBytes, c.host, part(k)); // while later parts are in flight
    if (k + kChunks < count) start(k + kChunks);
  }
}

} // namespace kiln::detail
