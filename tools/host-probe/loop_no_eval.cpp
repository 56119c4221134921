// Probe: a loop of small steps (bench/rnn_cells.h) with an eval every step and without eval,
// timing every step on the host, to find where a loop without eval loses time (a flush that
// plans for long, a stall). On the CPU backend the device's state is faked busy or idle
// (engine/adaptive_flush.h), so the loop-flush path runs as it does on a GPU; with KILN_DEVICE
// =cuda, modes E and N read the GPU's real state. PROBE_STATS=1 prints stats() per mode.
//   g++ -std=c++20 -O2 -g -DLLVM_DISABLE_ABI_BREAKING_CHECKS_ENFORCING=1 -I. -Iinclude -Ibench \
//     -Ibuild/generated/include -I.deps/llvm/include tools/host-probe/loop_no_eval.cpp \
//     -Lbuild -lkiln -Wl,-rpath,$PWD/build -o /tmp/loop_probe
//   /tmp/loop_probe CELL STEPS MODES   CELL: seed<d>, lstm1, lstm32, lstm4, gru1, gru4, or
//     lstm1h<H> / gru1h<H> (batch 1, input and hidden H);
//   MODES: any of e (eval, faked busy), b (no eval, faked busy), i (no eval, faked idle),
//   r (no eval, faked idle or busy at random, as a GPU's timing makes flush sizes vary),
//   E (eval, real state), N (no eval, real state)
#include "engine/adaptive_flush.h"
#include "rnn_cells.h"

#include <kiln/kiln.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

using namespace kiln;
using detail::DeviceState;

namespace {

double now_us() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void report(const char* name, const std::vector<double>& each, double host, double wall) {
  const size_t n = each.size();
  const Stats s = stats();
  std::printf("%-30s %7.3f us/step (host %7.3f)  flushes/step %.4f  plan misses %lld\n", name,
              wall / n, host / n, double(s.flushes) / n, static_cast<long long>(s.plan_misses));
  // Where the host's time went: the slowest steps (a flush, a stall) against the typical one.
  std::vector<double> sorted = each;
  std::sort(sorted.begin(), sorted.end());
  double slow = 0;
  int n_slow = 0;
  for (double x : each)
    if (x > 50) slow += x, ++n_slow;
  std::printf("  step us: median %.2f p99 %.2f max %.1f; %d steps over 50 us took %.0f us\n",
              sorted[n / 2], sorted[n * 99 / 100], sorted.back(), n_slow, slow);
  // Without eval one step in k flushes (k = 1 / flushes a step): the slowest n/k steps are about
  // the flushing ones, so the rest are recording alone.
  const size_t flushing = s.flushes > 0 ? std::min(n, size_t(s.flushes)) : 0;
  if (flushing < n) { // (with an eval every step, every step flushes: no split)
    double record = 0, flush = 0;
    for (size_t i = 0; i < n; ++i) (i < n - flushing ? record : flush) += sorted[i];
    const double per_record = record / double(n - flushing);
    std::printf("  per step: recording %.2f us, flushing steps add %.2f us (%zu flushing steps)\n",
                per_record, (flush - per_record * double(flushing)) / double(n), flushing);
  }
  if (std::getenv("PROBE_STATS")) {
    std::ostringstream os;
    os << s;
    std::printf("  %s\n", os.str().c_str());
  }
}

template <class Cell> void run(Cell cell, int steps, char mode) {
  const bool eval_each = mode == 'e' || mode == 'E';
  if (mode == 'E' || mode == 'N')
    detail::set_device_probe({});
  else
    detail::set_device_probe([mode](Device) {
      static uint64_t bits = 88172645463325252ull; // xorshift: 'r' answers at random
      bits ^= bits << 13, bits ^= bits >> 7, bits ^= bits << 17;
      if (mode == 'r') return bits % 2 ? DeviceState::idle : DeviceState::busy;
      return mode == 'i' ? DeviceState::idle : DeviceState::busy;
    });
  auto step = [&] {
    cell.record();
    if (eval_each) eval(cell.state());
  };
  for (int i = 0; i < 2000; ++i) step();
  kiln::sync();
  std::fprintf(stderr, "=== timed loop (%c)\n", mode); // separates KILN_DUMP=plan output
  reset_stats();
  std::vector<double> each(steps);
  const double t0 = now_us();
  for (int i = 0; i < steps; ++i) {
    const double s0 = now_us();
    step();
    each[i] = now_us() - s0;
  }
  const double host = now_us() - t0;
  kiln::sync();
  const std::string name =
      std::string(eval_each ? "eval every step" : "no eval") + (mode == 'b'   ? ", busy"
                                                                : mode == 'i' ? ", idle"
                                                                : mode == 'r' ? ", random"
                                                                              : "");
  report(name.c_str(), each, host, now_us() - t0);
}

template <class Cell> void run_modes(const Cell& cell, int steps, const std::string& modes) {
  for (char m : modes) run(cell, steps, m);
}

} // namespace

int main(int argc, char** argv) {
  const std::string cell = argc > 1 ? argv[1] : "seed64";
  const int steps = argc > 2 ? std::atoi(argv[2]) : 5000;
  const std::string modes = argc > 3 ? argv[3] : "ebi";
  const Device dev = default_device();
  std::printf("%s on %s, %d steps\n", cell.c_str(), dev.str().c_str(), steps);
  if (cell.rfind("seed", 0) == 0)
    run_modes(bench::Seed::random(std::atoll(cell.c_str() + 4), 1).on(dev), steps, modes);
  else if (cell == "lstm1" || cell == "lstm32")
    run_modes(bench::Lstm::random(cell == "lstm1" ? 1 : 32, 256, 256, 64, 2).on(dev), steps, modes);
  else if (cell == "lstm4") // hidden 4: the host's work of an LSTM step, little arithmetic
    run_modes(bench::Lstm::random(1, 4, 4, 64, 2).on(dev), steps, modes);
  else if (cell == "gru1")
    run_modes(bench::Gru::random(1, 256, 256, 64, 3).on(dev), steps, modes);
  else if (cell == "gru4") // hidden 4: the host's work of a GRU step, little arithmetic
    run_modes(bench::Gru::random(1, 4, 4, 64, 3).on(dev), steps, modes);
  else if (cell.rfind("lstm1h", 0) == 0) { // batch 1 at another size
    const int64_t h = std::atoll(cell.c_str() + 6);
    run_modes(bench::Lstm::random(1, h, h, 64, 2).on(dev), steps, modes);
  } else if (cell.rfind("gru1h", 0) == 0) {
    const int64_t h = std::atoll(cell.c_str() + 5);
    run_modes(bench::Gru::random(1, h, h, 64, 3).on(dev), steps, modes);
  }
  detail::set_device_probe({});
}
