#pragma once
// The training loop: truncated BPTT over random windows of the training part, Adam, periodic
// validation and checkpoints, and --resume.
#include "data.h"
#include "flags.h"
#include "model.h"
#include "outputs.h"
#include "progress.h"

#include <kiln/optim.h>

#include <kiln/compile.h>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>

namespace rnn {

/// A run that cannot go on (a checkpoint that does not fit the flags, say); the message says
/// why and what to do.
struct RunError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Summary {
  int64_t first_step = 0, last_step = 0; // this run trained steps first_step + 1 ... last_step
  double train_loss = 0, val_loss = 0;
  double seconds = 0; // this run's wall time, validation and checkpoints included
};

class Trainer {
public:
  /// Builds the model on kiln's default device (set it and kiln::manual_seed first).
  explicit Trainer(const Config& c);
  /// Trains up to c.steps (from the checkpoint with c.resume) and writes the outputs.
  Summary run();

private:
  using Clock = std::chrono::steady_clock;
  void start(); // --resume, or a fresh loss.csv
  void resume();
  void train_step(int64_t step);
  /// One step's work on a batch of windows: loss, gradients, clipping, Adam, the loss sum.
  void step_on(const kiln::Tensor& windows);
  /// step_on as a compiled function (--no-compile: none): its state is the parameters, Adam's
  /// state and the loss sum.
  std::optional<kiln::Compiled> compiled_step();
  /// Logging, validation, checkpoint and outputs where they are due after `step`.
  void after_step(int64_t step, Progress& progress);
  double validate();
  void log(int64_t step, bool with_val);
  void save_checkpoint(int64_t step);
  Prediction predict_stretch();
  void write_outputs();
  double elapsed() const;
  std::string path(const char* file) const;

  Config c_;
  Series data_;
  Model model_;
  kiln::nn::ParamList params_;
  kiln::optim::Adam opt_;
  kiln::nn::ParamList state_; // the parameters and Adam's moments: what a checkpoint holds
  kiln::Tensor val_windows_;  // the fixed validation windows, uploaded once
  LossLog log_;
  kiln::Tensor loss_sum_; // sum of the train losses since the last log row (not read yet)
  std::optional<kiln::Compiled> step_fn_; // the compiled training step
  int64_t loss_count_ = 0;
  int64_t step_ = 0;          // steps done
  double elapsed_before_ = 0; // training time of the runs before a --resume
  Clock::time_point start_;
};

} // namespace rnn
