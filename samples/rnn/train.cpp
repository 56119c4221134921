#include "train.h"

#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>

namespace rnn {

namespace {

constexpr int64_t kValWindows = 128;    // fixed validation windows
constexpr int64_t kPredictPoints = 300; // length of the stretch in prediction.csv
constexpr double kNoise = 0.1;          // the series' noise: MSE cannot go below kNoise^2

kiln::DType dtype_of(const Config& c) {
  return c.f64 ? kiln::DType::f64 : kiln::DType::f32;
}

kiln::Tensor upload(const std::vector<float>& windows, const Config& c) {
  const int64_t batch = static_cast<int64_t>(windows.size()) / (c.window + 1);
  kiln::Tensor t = kiln::from_vector(windows, {c.window + 1, batch, 1});
  return c.f64 ? t.astype(kiln::DType::f64) : t;
}

// The checkpoint's value of `key` must equal the flag's; otherwise say how to fix it.
void check_matches(const std::map<std::string, std::string>& meta, const std::string& key,
                   int64_t flag, const std::string& file) {
  auto it = meta.find(key);
  if (it == meta.end())
    throw RunError(file + " has no '" + key + "' entry: not a kiln-rnn checkpoint");
  if (it->second != std::to_string(flag))
    throw RunError("--resume: " + file + " was trained with --" + key + " " + it->second +
                   ", this run has --" + key + " " + std::to_string(flag) + ". Pass --" + key +
                   " " + it->second + " to continue it, or another --out to start afresh.");
}

// Adam's options: its step counts live on the device (capturable), which a compiled step needs;
// with --no-compile too, so that the A/B changes nothing but the compiling.
kiln::optim::AdamOptions adam_options() {
  kiln::optim::AdamOptions o;
  o.capturable = true;
  return o;
}

// What a checkpoint holds: the parameters and Adam's moments. A capturable Adam's step counts
// and rates are not saved: the step number in the metadata (resume(): set_steps) and --lr give
// them back.
kiln::nn::ParamList checkpointed(const kiln::nn::ParamList& all) {
  kiln::nn::ParamList l;
  for (const kiln::nn::NamedParam& p : all)
    if (p.name.rfind("step.", 0) != 0 && p.name.rfind("lr.", 0) != 0) l.push_back(p);
  return l;
}

} // namespace

Trainer::Trainer(const Config& c)
    : c_(c), data_(make_series(20000, kNoise)), model_(c.hidden, dtype_of(c)),
      params_(model_.parameters()), opt_(params_, c.lr, adam_options()),
      state_(checkpointed(kiln::nn::join({params_, opt_.state()}))), log_(path("loss.csv")) {
  auto starts = even_starts(data_.train_end, data_.values.size(), c_.window, kValWindows);
  val_windows_ = upload(gather_windows(data_.values, starts, c_.window), c_);
  loss_sum_ = kiln::zeros({}, dtype_of(c_));
  step_fn_ = compiled_step();
}

std::optional<kiln::Compiled> Trainer::compiled_step() {
  if (!c_.compile) return std::nullopt;
  std::vector<kiln::Tensor*> state;
  for (const kiln::nn::NamedParam& p : kiln::nn::join({params_, opt_.state()}))
    state.push_back(p.tensor);
  state.push_back(&loss_sum_);
  return kiln::compile(
      [this](const std::vector<kiln::Tensor>& in) {
        step_on(in[0]);
        return std::vector<kiln::Tensor>{};
      },
      state);
}

std::string Trainer::path(const char* file) const {
  return (std::filesystem::path(c_.out) / file).string();
}

double Trainer::elapsed() const {
  return elapsed_before_ + std::chrono::duration<double>(Clock::now() - start_).count();
}

void Trainer::resume() {
  const std::string file = path("checkpoint.safetensors");
  if (!std::filesystem::exists(file))
    throw RunError("--resume: there is no checkpoint at " + file +
                   " (run without --resume first, or pass the --out of that run)");
  std::map<std::string, std::string> meta = kiln::nn::load(file, {}); // the metadata only
  check_matches(meta, "hidden", c_.hidden, file);
  if (meta.count("f64") && (meta.at("f64") == "1") != c_.f64)
    throw RunError("--resume: " + file + " was trained " + (c_.f64 ? "without" : "with") +
                   " --f64; pass the same to continue it, or another --out to start afresh.");
  check_matches(meta, "window", c_.window, file);
  kiln::nn::load(file, state_);
  step_ = std::stoll(meta.at("step"));
  opt_.set_steps(step_); // a capturable Adam's step counts too
  elapsed_before_ = meta.count("elapsed_s") ? std::stod(meta.at("elapsed_s")) : 0.0;
  log_.resume_at(step_);
  std::cout << "resumed from " << file << " at step " << step_ << "\n";
}

void Trainer::train_step(int64_t step) {
  std::mt19937 rng = step_rng(c_.seed, step);
  auto starts = random_starts(0, data_.train_end, c_.window, c_.batch, rng);
  kiln::Tensor windows = upload(gather_windows(data_.values, starts, c_.window), c_);
  if (step_fn_)
    (*step_fn_)({windows}); // the traced step replayed: nothing recorded
  else
    step_on(windows);
  ++loss_count_;
}

void Trainer::step_on(const kiln::Tensor& windows) {
  kiln::Tensor loss = window_loss(model_, windows);
  std::vector<kiln::Tensor> grads = kiln::grad(loss, kiln::optim::tensors(params_));
  if (c_.clip > 0) kiln::optim::clip_grad_norm(grads, c_.clip);
  loss_sum_ = loss_sum_ + loss.detach(); // read every --log-every steps
  // The end of the step: the update and everything held (the loss sum too) are evaluated
  // together, queued on a GPU without waiting, so every step replays one cached plan.
  opt_.step(grads);
}

double Trainer::validate() {
  kiln::NoGradGuard no_grad;
  return window_loss(model_, val_windows_).item<float>();
}

void Trainer::log(int64_t step, bool with_val) {
  LogRow row{step, loss_sum_.item<double>() / double(loss_count_), std::nullopt, 0};
  loss_sum_ = kiln::zeros({}, dtype_of(c_));
  loss_count_ = 0;
  if (with_val) row.val_loss = validate();
  row.elapsed_s = elapsed();
  log_.append(row);
}

void Trainer::save_checkpoint(int64_t step) {
  const LogRow* last = log_.rows().empty() ? nullptr : &log_.rows().back();
  std::map<std::string, std::string> meta = {{"step", std::to_string(step)},
                                             {"hidden", std::to_string(c_.hidden)},
                                             {"f64", std::to_string(int(c_.f64))},
                                             {"window", std::to_string(c_.window)},
                                             {"batch", std::to_string(c_.batch)},
                                             {"lr", std::to_string(c_.lr)},
                                             {"seed", std::to_string(c_.seed)},
                                             {"elapsed_s", std::to_string(elapsed())},
                                             {"sample", "kiln-rnn"}};
  if (last) meta["train_loss"] = std::to_string(last->train_loss);
  kiln::nn::save(path("checkpoint.safetensors"), state_, meta);
}

Prediction Trainer::predict_stretch() {
  Prediction p;
  const size_t first = data_.train_end + static_cast<size_t>(c_.window);
  const size_t end = std::min(data_.values.size(), first + kPredictPoints);
  std::vector<size_t> starts; // the window before each predicted point
  for (size_t i = first; i < end; ++i) {
    starts.push_back(i - static_cast<size_t>(c_.window));
    p.t.push_back(static_cast<int64_t>(i));
    p.truth.push_back(data_.values[i]);
  }
  kiln::NoGradGuard no_grad;
  kiln::Tensor windows = upload(gather_windows(data_.values, starts, c_.window), c_);
  p.predicted = last_prediction(model_, kiln::slice(windows, 0, 0, c_.window)).to_vector<float>();
  return p;
}

void Trainer::write_outputs() {
  Prediction p = predict_stretch();
  write_prediction_csv(path("prediction.csv"), p);
  const std::string title = "kiln-rnn: LSTM (hidden " + std::to_string(c_.hidden) + ", window " +
                            std::to_string(c_.window) + ") on a noisy multi-sine series";
  write_training_svg(path("training.svg"), log_.rows(), p, kNoise * kNoise, title);
}

void Trainer::start() {
  start_ = Clock::now();
  if (c_.resume) {
    resume();
  } else {
    std::filesystem::create_directories(c_.out);
    log_.start_fresh();
  }
  if (step_ >= c_.steps)
    std::cout << "the checkpoint is at step " << step_ << ", --steps is " << c_.steps
              << ": nothing to train (pass a larger --steps to go on)\n";
}

void Trainer::after_step(int64_t step, Progress& progress) {
  const bool val = step % c_.val_every == 0 || step == c_.steps;
  if (val || step % c_.log_every == 0) {
    log(step, val);
    progress.report(step, log_.rows().back().train_loss, log_.rows().back().val_loss);
  } else {
    progress.tick(step);
  }
  if (step % c_.checkpoint_every == 0 || step == c_.steps) {
    save_checkpoint(step);
    write_outputs();
  }
}

Summary Trainer::run() {
  start();
  Summary s{step_, step_};
  Progress progress(step_, c_.steps);
  for (int64_t step = step_ + 1; step <= c_.steps; ++step) {
    train_step(step);
    step_ = step;
    after_step(step, progress);
  }
  progress.finish();
  // Said once, for whoever changes the step: why it is not replayed (it runs right, slower).
  if (step_fn_ && step_fn_->counts().replays == 0 && step_fn_->counts().calls > 0)
    std::cerr << "note: the compiled training step was not replayed: "
              << step_fn_->why_not_replayed() << "\n";
  s.last_step = step_;
  if (s.first_step == s.last_step) write_outputs(); // nothing trained: the outputs still
  s.train_loss = log_.rows().empty() ? NAN : log_.rows().back().train_loss;
  const bool fresh_val =
      !log_.rows().empty() && log_.rows().back().step == step_ && log_.rows().back().val_loss;
  s.val_loss = fresh_val ? *log_.rows().back().val_loss : validate();
  s.seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  return s;
}

} // namespace rnn
