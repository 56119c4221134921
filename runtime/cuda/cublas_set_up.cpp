#include "runtime/cuda/cublas_set_up.h"

#include "codegen/jit.h"
#include "ir/errors.h"
#include "runtime/backend.h"
#include "runtime/cuda/cublas_api.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_gemm.h"

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <thread>

#include <unistd.h>

namespace kiln::detail {

namespace {

constexpr int kKinds = 5;
// The set-up's GEMM, 64 x 64 x 64: after one on another thread, a process's first f32 GEMM of
// 1024 x 512 x 256 took 0.46-0.57 ms instead of 108-115
// (bench/results/2026-11-27-h100-session32.md).
constexpr int kSide = 64;

DType kind_dtype(int kind) {
  static constexpr DType types[kKinds] = {DType::f32, DType::f32, DType::f64, DType::f16,
                                          DType::bf16};
  return types[kind];
}

class SetUpThread {
public:
  static SetUpThread& get() {
    static auto* t = new SetUpThread; // never destroyed: the exit handler uses it
    return *t;
  }

  uint32_t ready() const { return ready_.load(std::memory_order_acquire); }

  void start(int device, int kind) {
    std::lock_guard<std::mutex> lock(mu_);
    if (started_ >> kind & 1) return;
    if (stopping_) fail("matmul", "cuBLAS's set-up was asked for after the process's exit");
    if (!thread_.joinable()) {
      std::atexit(at_exit);
      owner_ = ::getpid();
      thread_ = std::thread([this] { run(); });
    }
    started_ |= 1u << kind;
    queue_.push_back({device, kind});
    cv_.notify_all();
  }

  void wait_idle() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return stopping_ || (queue_.empty() && !busy_); });
  }

  // In a fork()'s child the thread does not exist: its handle is let go of, never joined.
  void stop() {
    if (owner_ != 0 && owner_ != ::getpid()) {
      if (thread_.joinable()) new std::thread(std::move(thread_)); // never destroyed
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      queue_.clear();
    }
    cv_.notify_all();
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  }

  static void at_exit() { get().stop(); }

private:
  struct Request {
    int device, kind;
  };

  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      const Request r = queue_.front();
      queue_.pop_front();
      busy_ = true;
      lock.unlock();
      set_up(r);
      std::atexit(at_exit); // before whatever cuBLAS registered during the set-up
      ready_.fetch_or(1u << r.kind, std::memory_order_release);
      lock.lock();
      busy_ = false;
      cv_.notify_all();
    }
  }

  // One GEMM of the kind; a failure is left for the GEMM's own call to report.
  void set_up(const Request& r) {
    try {
      cuda_check(cudaSetDevice(r.device), "matmul", "cudaSetDevice");
      if (!handle_) {
        cublas_check(cublas_api().cublasCreate(&handle_), "matmul", "cublasCreate");
        cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "matmul",
                   "cudaStreamCreateWithFlags");
        cublas_check(cublas_api().cublasSetStream(handle_, stream_), "matmul", "cublasSetStream");
      }
      gemm(kind_dtype(r.kind), r.kind == 1);
    } catch (const std::exception&) {
    }
  }

  void gemm(DType t, bool tf32) {
    const size_t bytes = size_t(kSide) * kSide * itemsize(t);
    void* m = nullptr;
    cuda_check(cudaMallocAsync(&m, 3 * bytes, stream_), "matmul", "cudaMallocAsync");
    cudaMemsetAsync(m, 0, 3 * bytes, stream_);
    const double one_d = 1, zero_d = 0;
    const float one_f = 1, zero_f = 0;
    const void* one = t == DType::f64 ? static_cast<const void*>(&one_d) : &one_f;
    const void* zero = t == DType::f64 ? static_cast<const void*>(&zero_d) : &zero_f;
    const cudaDataType_t dt = cublas_data_type(t);
    char* p = static_cast<char*>(m);
    cublas_api().cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, kSide, kSide, kSide, one, p, dt,
                              kSide, p + bytes, dt, kSide, zero, p + 2 * bytes, dt, kSide,
                              tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : cublas_compute_type(t),
                              CUBLAS_GEMM_DEFAULT);
    cudaFreeAsync(m, stream_);
    cudaStreamSynchronize(stream_);
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Request> queue_;
  uint32_t started_ = 0;
  std::atomic<uint32_t> ready_{0};
  bool busy_ = false, stopping_ = false;
  std::thread thread_;
  pid_t owner_ = 0;
  // The thread's own, kept for the process's life (destroying them would wait for the device).
  cublasHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

// exit() runs its calling thread's thread_local destructors before any exit handler or static
// destructor, so a guard in the main thread joins the set-up while cuBLAS's state is whole.
struct StopAtExit {
  ~StopAtExit() {
    if (::gettid() == ::getpid()) SetUpThread::get().stop();
  }
};

} // namespace

uint32_t cublas_ready_kinds() {
  return SetUpThread::get().ready();
}

bool compute_while_cublas_sets_up(Device d, int kind) {
  if (cublas_waits() || !d.is_cuda() || kind < 0) return false;
  const CompileMode mode = compile_mode();
  if (mode == CompileMode::sync || mode == CompileMode::off) return false;
  try {
    start_cublas_set_up(d.index, kind);
  } catch (const std::exception&) { // no thread (or after exit): the GEMM's call waits instead
    return false;
  }
  return true;
}

void start_cublas_set_up(int device, int kind) {
  if (kind < 0 || kind >= kKinds) return;
  thread_local StopAtExit guard;
  (void)guard;
  SetUpThread::get().start(device, kind);
}

void wait_for_cublas_set_up() {
  SetUpThread::get().wait_idle();
}

} // namespace kiln::detail
