// Session 36 probe: an RNN cell at batch 1 with its weights evicted from L2 before every step
// (a 256 MB elementwise pass), an eval after each: the cell kernel's own time, cold, from a
// CUPTI trace. Usage: dot_cold lstm|gru H STEPS
#include "rnn_cells.h"

#include <kiln/kiln.h>

#include <cstdlib>
#include <string>

using namespace kiln;

template <class Cell> void run(Cell cell, int steps) {
  Tensor big = zeros({int64_t(64) << 20}, DType::f32, default_device());
  eval(big);
  for (int i = 0; i < steps; ++i) {
    big = big + 1.0f;
    eval(big);
    cell.record();
    eval(cell.state());
  }
  kiln::sync();
}

int main(int argc, char** argv) {
  const std::string c = argv[1];
  const int64_t h = std::atoll(argv[2]);
  const int steps = std::atoi(argv[3]);
  const Device dev = default_device();
  if (c == "lstm")
    run(bench::Lstm::random(1, h, h, steps + 8, 2).on(dev), steps);
  else
    run(bench::Gru::random(1, h, h, steps + 8, 3).on(dev), steps);
}
