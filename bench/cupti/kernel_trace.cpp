// A CUDA injection library that writes every kernel's GPU start, end and name to a CSV file,
// kernels inside CUDA graphs included: a timeline where Nsight Systems is not installed.
//   g++ -O2 -shared -fPIC bench/cupti/kernel_trace.cpp -I/usr/local/cuda/include \
//       -L/usr/local/cuda/lib64 -lcupti -o /tmp/libkernel_trace.so
//   CUDA_INJECTION64_PATH=/tmp/libkernel_trace.so KERNEL_TRACE_OUT=trace.csv <program>
//   bench/gpu_timeline.py trace.csv --steps N --per-step K
#include <cupti.h>

#include <cstdio>
#include <cstdlib>

namespace {

FILE* out = nullptr;
constexpr size_t kBufferBytes = 8 << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) continue;
    auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(record);
    std::fprintf(out, "%llu,%llu,%s\n", static_cast<unsigned long long>(k->start),
                 static_cast<unsigned long long>(k->end), k->name);
  }
  std::free(buffer);
}

void flush_at_exit() {
  cuptiActivityFlushAll(1);
  std::fclose(out);
}

} // namespace

extern "C" int InitializeInjection() {
  const char* path = std::getenv("KERNEL_TRACE_OUT");
  out = std::fopen(path ? path : "kernel_trace.csv", "w");
  if (!out) return 0;
  std::fprintf(out, "start_ns,end_ns,name\n");
  cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  std::atexit(flush_at_exit);
  return 1;
}
