// Runs a recurrent step of issue 5's benchmarks on the GPU a few hundred times with CUDA graphs,
// for a profiler to time the step's kernel: `ncu -k regex:kiln_ --launch-skip 250 ...`.
// Usage: steps seed D | lstm BATCH   [steps, default 300]
#include "rnn_cells.h"

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: steps seed D | lstm BATCH [steps]\n");
    return 2;
  }
  const std::string what = argv[1];
  const int64_t size = std::atoll(argv[2]);
  const int steps = argc > 3 ? std::atoi(argv[3]) : 300;
  const kiln::Device gpu = kiln::Device::cuda(0);
  if (what == "seed") {
    bench::Seed s = bench::Seed::random(size, 1).on(gpu);
    for (int i = 0; i < steps; ++i) s.step();
  } else {
    bench::Lstm l = bench::Lstm::random(size, 256, 256, steps, 3).on(gpu);
    for (int i = 0; i < steps; ++i) l.step();
  }
  kiln::sync();
  std::printf("%s %lld: %d steps\n", what.c_str(), (long long)size, steps);
  return 0;
}
