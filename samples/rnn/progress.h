#pragma once
// The progress display: on a terminal one line redrawn in place (step, loss, steps/s, ETA);
// otherwise one plain line per logged interval, for logs and pipes.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace rnn {

/// "1:02:03" or "4:05".
std::string format_duration(double seconds);

class Progress {
public:
  /// Steps first_step + 1 ... total are to run.
  Progress(int64_t first_step, int64_t total);
  /// After each step: redraws the terminal line at most 10 times a second.
  void tick(int64_t step);
  /// At a step whose loss was read (a sync point, so the rate is the device's): records the
  /// rate since the previous report, and prints the line (terminal) or a plain line (otherwise).
  /// On a terminal, a line with a validation loss stays on the screen, one per validation.
  void report(int64_t step, double train_loss, std::optional<double> val_loss);
  /// Ends the progress line (terminal).
  void finish();

private:
  using Clock = std::chrono::steady_clock;
  std::string line(int64_t step) const;
  void draw(int64_t step);

  bool tty_;
  int64_t total_;
  int64_t last_step_;           // step of the last report
  Clock::time_point last_time_; // time of the last report
  Clock::time_point last_draw_;
  double rate_ = 0;                  // steps/s over the last reported interval
  std::optional<double> loss_, val_; // the last read (a terminal keeps showing val_)
  int64_t val_step_ = 0;
  bool drawn_ = false; // a terminal line is showing
};

} // namespace rnn
