#include "data.h"

#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

namespace rnn {

Series make_series(size_t n, double noise) {
  struct Sine {
    double amplitude, period, phase;
  };
  const Sine sines[] = {{1.0, 25.0, 0.0}, {0.6, 61.0, 1.0}, {0.4, 173.0, 2.5}};
  std::mt19937 rng(20240611); // fixed: the data do not depend on --seed
  std::normal_distribution<double> gauss(0.0, noise);
  Series s;
  s.values.resize(n);
  for (size_t t = 0; t < n; ++t) {
    double v = gauss(rng);
    for (const Sine& k : sines)
      v += k.amplitude * std::sin(2 * std::numbers::pi * double(t) / k.period + k.phase);
    s.values[t] = static_cast<float>(v);
  }
  s.train_end = n * 8 / 10;
  return s;
}

std::vector<float> gather_windows(const std::vector<float>& values,
                                  const std::vector<size_t>& starts, int64_t window) {
  const size_t batch = starts.size(), rows = static_cast<size_t>(window) + 1;
  std::vector<float> out(rows * batch);
  for (size_t b = 0; b < batch; ++b)
    for (size_t r = 0; r < rows; ++r) out[r * batch + b] = values.at(starts[b] + r);
  return out;
}

std::vector<size_t> random_starts(size_t begin, size_t end, int64_t window, int64_t batch,
                                  std::mt19937& rng) {
  const size_t span = static_cast<size_t>(window) + 1;
  if (end < begin + span)
    throw std::runtime_error("the series is too short for --window " + std::to_string(window));
  std::uniform_int_distribution<size_t> pick(begin, end - span);
  std::vector<size_t> starts(static_cast<size_t>(batch));
  for (size_t& s : starts) s = pick(rng);
  return starts;
}

std::vector<size_t> even_starts(size_t begin, size_t end, int64_t window, int64_t count) {
  const size_t span = static_cast<size_t>(window) + 1;
  if (end < begin + span)
    throw std::runtime_error("the validation part is too short for --window " +
                             std::to_string(window));
  const size_t room = end - span - begin; // starts lie in [begin, begin + room]
  const size_t n = std::min<size_t>(static_cast<size_t>(count), room + 1);
  std::vector<size_t> starts(n);
  for (size_t i = 0; i < n; ++i) starts[i] = begin + (n == 1 ? 0 : i * room / (n - 1));
  return starts;
}

std::mt19937 step_rng(uint64_t seed, int64_t step) {
  std::seed_seq seq{uint32_t(seed), uint32_t(seed >> 32), uint32_t(step), uint32_t(step >> 32)};
  return std::mt19937(seq);
}

} // namespace rnn
