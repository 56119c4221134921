#include "runtime/cuda/launch_thread.h"
#include "runtime/cuda/ordered_stream.h"

#include "runtime/backend.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/kernel_cache.h"

#include <cstdlib>
#include <mutex>

namespace kiln::detail {

namespace {

// Queued launches of every backend are issued before the process exits (a loop that never
// syncs leaves some queued), while the CUDA runtime is still up: its teardown is registered
// before ours, at its first call, so our handler runs first.
std::vector<LaunchThread*>& all_threads() {
  static auto* v = new std::vector<LaunchThread*>; // never destroyed, as the backends
  return *v;
}

void drain_all_at_exit() {
  for (LaunchThread* t : all_threads()) try {
      t->drain();
    } catch (...) { // nobody is left to report it to
    }
}

// Ring slots: how far the worker may trail the recording thread. A slot is a few hundred bytes;
// a loop outrunning the worker waits for a free slot (the GPU's own queue bounds it anyway).
constexpr size_t kQueueSlots = 256;
// How long an idle worker polls before it sleeps: longer than a loop of small steps takes to
// record a step, so that such a loop finds it awake; a loop slower than this issues its
// launches itself (IssueQueue::push).
constexpr std::chrono::microseconds kSpin(200);

} // namespace

cudaKernelNodeParams kernel_node_params(const CudaLaunch& shape, cudaKernel_t fn, void** args) {
  cudaKernelNodeParams p{};
  p.func = reinterpret_cast<void*>(fn);
  p.gridDim = grid_dims(shape);
  p.blockDim = dim3(shape.block);
  p.sharedMemBytes = shape.shared_bytes;
  p.kernelParams = args;
  return p;
}

void set_kernel_node(cudaGraphExec_t exec, cudaGraphNode_t node, cudaKernel_t fn,
                     const CudaLaunch& shape, const void* args, const char* op) {
  void* params[] = {const_cast<void*>(args)};
  cudaKernelNodeParams p = kernel_node_params(shape, fn, params);
  cuda_check(cudaGraphExecKernelNodeSetParams(exec, node, &p), op,
             "cudaGraphExecKernelNodeSetParams");
}

LaunchThread::~LaunchThread() {
  auto& v = all_threads();
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] == this) v.erase(v.begin() + static_cast<std::ptrdiff_t>(i));
}

bool LaunchThread::enabled() {
  return launch_thread();
}

GraphLaunch& LaunchThread::begin() {
  if (!queue_) {
    // The worker's runtime calls act on its current device, which starts as device 0.
    const int device = device_;
    queue_ = std::make_unique<IssueQueue<GraphLaunch>>(
        kQueueSlots, [s = stream_](GraphLaunch& item) { issue(item, s); }, kSpin,
        [device] { cuda_check(cudaSetDevice(device), "eval (launch thread)", "cudaSetDevice"); });
    static std::once_flag registered;
    std::call_once(registered, [] { std::atexit(drain_all_at_exit); });
    all_threads().push_back(this);
  }
  GraphLaunch& item = queue_->next();
  item.n_updates = 0;
  return item;
}

void LaunchThread::add_update(GraphLaunch& item, cudaGraphNode_t node, cudaKernel_t fn,
                              const CudaLaunch& shape, const std::vector<std::byte>& args) {
  if (item.updates.size() <= item.n_updates) item.updates.emplace_back();
  GraphLaunch::NodeUpdate& u = item.updates[item.n_updates++];
  u.node = node;
  u.fn = fn;
  u.shape = shape;
  u.args.assign(args.begin(), args.end()); // keeps its capacity from the slot's last use
}

bool LaunchThread::push(GraphLaunch& item, cudaGraphExec_t exec) {
  item.exec = exec;
  return queue_->push();
}

std::atomic<int>& queued_launch_failure_countdown() {
  static std::atomic<int> n{0};
  return n;
}

void fail_queued_launch_for_tests(int nth) {
  queued_launch_failure_countdown().store(nth);
}

void LaunchThread::issue(GraphLaunch& item, cudaStream_t stream) {
  std::atomic<int>& countdown = queued_launch_failure_countdown();
  if (countdown.load(std::memory_order_relaxed) > 0 && countdown.fetch_sub(1) == 1)
    fail("eval (launch thread)", "cudaGraphLaunch failed: injected by a test");
  for (size_t i = 0; i < item.n_updates; ++i) {
    const GraphLaunch::NodeUpdate& u = item.updates[i];
    set_kernel_node(item.exec, u.node, u.fn, u.shape, u.args.data(), "eval (launch thread)");
  }
  cuda_check(cudaGraphLaunch(item.exec, stream), "eval (launch thread)", "cudaGraphLaunch");
}

cudaStream_t OrderedStream::create() {
  cudaStream_t s = nullptr;
  cuda_check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cuda", "cudaStreamCreate");
  return s;
}

} // namespace kiln::detail
