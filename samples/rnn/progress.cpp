#include "progress.h"

#include <cmath>
#include <cstdio>
#include <iostream>
#include <unistd.h>

namespace rnn {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long s = std::lround(seconds);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  else
    std::snprintf(buf, sizeof buf, "%ld:%02ld", s / 60, s % 60);
  return buf;
}

Progress::Progress(int64_t first_step, int64_t total)
    : tty_(isatty(STDOUT_FILENO) != 0), total_(total), last_step_(first_step),
      last_time_(Clock::now()), last_draw_(last_time_) {}

std::string Progress::line(int64_t step) const {
  char buf[192];
  int n = std::snprintf(buf, sizeof buf, "step %lld/%lld", static_cast<long long>(step),
                        static_cast<long long>(total_));
  if (loss_) n += std::snprintf(buf + n, sizeof buf - n, "  loss %.5f", *loss_);
  if (val_ && (tty_ || val_step_ == step))
    n += std::snprintf(buf + n, sizeof buf - n, "  val %.5f", *val_);
  if (rate_ > 0) {
    double eta = double(total_ - step) / rate_;
    std::snprintf(buf + n, sizeof buf - n, "  %.1f steps/s  ETA %s", rate_,
                  format_duration(eta).c_str());
  }
  return buf;
}

void Progress::draw(int64_t step) {
  std::cout << "\r\033[K" << line(step) << std::flush;
  drawn_ = true;
  last_draw_ = Clock::now();
}

void Progress::tick(int64_t step) {
  if (tty_ && Clock::now() - last_draw_ > std::chrono::milliseconds(100)) draw(step);
}

void Progress::report(int64_t step, double train_loss, std::optional<double> val_loss) {
  const Clock::time_point now = Clock::now();
  const double dt = std::chrono::duration<double>(now - last_time_).count();
  if (step > last_step_ && dt > 0) rate_ = double(step - last_step_) / dt;
  last_step_ = step;
  last_time_ = now;
  loss_ = train_loss;
  if (val_loss) val_ = val_loss, val_step_ = step;
  if (!tty_) {
    std::cout << line(step) << "\n" << std::flush;
    return;
  }
  draw(step);
  if (val_loss) std::cout << "\n" << std::flush, drawn_ = false;
}

void Progress::finish() {
  if (tty_ && drawn_) std::cout << "\n" << std::flush;
  drawn_ = false;
}

} // namespace rnn
