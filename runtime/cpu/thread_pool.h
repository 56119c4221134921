#pragma once
// A fixed pool of worker threads for the CPU backend's kernels. parallel_for splits [0, n) into
// contiguous chunks, runs them on the pool and the calling thread, and returns when all are
// done. Work on small ranges stays on the calling thread (threads cost more than they save).
// Threads: KILN_NUM_THREADS, else the CPUs this process may use.
#include <cstdint>
#include <functional>

namespace kiln::detail::cpu {

int num_threads();
/// fn(begin, end) over disjoint chunks covering [0, n); chunks never smaller than `grain`.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

} // namespace kiln::detail::cpu
