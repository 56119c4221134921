#pragma once
// The data: a synthetic series (three sines of different periods plus Gaussian noise), its
// train/validation split, and windows of it gathered on the host for one upload per step.
#include <cstdint>
#include <random>
#include <vector>

namespace rnn {

struct Series {
  std::vector<float> values;
  size_t train_end = 0; // values[0, train_end) train; values[train_end, size) validation
};

/// n points of sum_k a_k sin(2 pi t / period_k + phase_k) + N(0, noise^2), from a fixed seed
/// (the data are the same in every run), split 80% / 20%.
Series make_series(size_t n = 20000, double noise = 0.1);

/// Window batches laid out [window + 1, batch] (time major, as kiln::from_vector wants
/// {window + 1, batch, 1}): column b holds values[starts[b] ...starts[b] + window]. The first
/// `window` rows are the inputs, the last `window` rows the next-step targets.
std::vector<float> gather_windows(const std::vector<float>& values,
                                  const std::vector<size_t>& starts, int64_t window);

/// `batch` random window starts such that the windows lie in values[begin, end).
std::vector<size_t> random_starts(size_t begin, size_t end, int64_t window, int64_t batch,
                                  std::mt19937& rng);

/// `count` window starts spread evenly over values[begin, end) (fewer if the range is short).
std::vector<size_t> even_starts(size_t begin, size_t end, int64_t window, int64_t count);

/// The random stream of training step `step`: seeded from (seed, step), so a resumed run draws
/// the same batches as one that never stopped.
std::mt19937 step_rng(uint64_t seed, int64_t step);

} // namespace rnn
