// Training steps (issue 18): forward over a window, kiln::grad, Adam, on the CPU or a GPU.
// bench/torch/train_torch.py runs the same math in PyTorch in the same device call.
//
//   train_rnn [--device cpu|cuda] [--steps N] [--window T] [--only seed|lstm1|lstm32] [--eager]
//             [--phases] [--record-only N] [--compiled-only]
//
// Each timed loop is written as a user writes it: no eval in the loop; the loss is read (a
// sync) once at the end of the loop. The `eval/step` rows evaluate the parameters every step
// (the tuned form of earlier benchmarks) beside it, and the `compiled` rows run the step traced
// by kiln::compile (Adam with `capturable`).
#include "bench_util.h"

#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/optim.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>

using namespace kiln;

namespace {

struct Args {
  Device device = default_device();
  int steps = 100, reps = 5, window = 64;
  std::string only;
  bool eager = false;
  bool phases = false;        // print the host's time per phase of a step instead of the step times
  bool compiled_only = false; // only the `compiled` rows (a profiler's view of a replay)
  int record_only = 0; // record this many forwards and grads, drop them, print nothing (perf)
};

// A model whose step() records one training step: forward over the window, grad, Adam.
struct Model {
  std::unique_ptr<optim::Adam> opt;
  virtual ~Model() = default;
  virtual Tensor forward() = 0; // the loss (pending)
  virtual nn::ParamList params() = 0;
  Tensor step() {
    Tensor loss = forward();
    opt->step(grad(loss, optim::tensors(params())));
    return loss;
  }
};

// The seeds' cell trained: x <- sigmoid(tanh(x @ W + b) * 0.5 + x) - 0.5 over the window from
// a fixed start x0 [d, d]; loss = mean(x_T^2) (push the state toward 0).
struct SeedModel : Model {
  Tensor w, b, x0;
  int window;
  SeedModel(int64_t d, int window_, Device dev, optim::AdamOptions o) : window(window_) {
    manual_seed(1);
    w = (randn({d, d}, DType::f32, dev) * float(1 / std::sqrt(double(d)))).requires_grad_();
    b = (randn({d}, DType::f32, dev) * 0.1f).requires_grad_();
    x0 = randn({d, d}, DType::f32, dev);
    eval(w, b, x0);
    opt = std::make_unique<optim::Adam>(params(), 1e-3, o);
  }
  nn::ParamList params() override { return {{"w", &w}, {"b", &b}}; }
  Tensor forward() override {
    Tensor x = x0;
    for (int t = 0; t < window; ++t) {
      Tensor y = tanh(matmul(x, w) + b) * 0.5f + x;
      x = sigmoid(y) - 0.5f;
    }
    return mean(x * x);
  }
};

// nn::LSTMCell (input 1, hidden H) + nn::Linear(H, 1) read-out at every step, MSE against the
// next value of a sine series, BPTT over the window from a zero state, Adam.
struct LstmModel : Model {
  nn::LSTMCell cell;
  nn::Linear head;
  Tensor seq, target; // [window, batch, 1]
  int window;
  int64_t batch;
  LstmModel(int64_t batch_, int64_t hidden, int window_, Device dev, optim::AdamOptions o)
      : cell((manual_seed(2), 1), hidden, {DType::f32, dev}),
        head(hidden, 1, true, {DType::f32, dev}), window(window_), batch(batch_) {
    std::vector<float> s(static_cast<size_t>((window + 1) * batch));
    for (size_t i = 0; i < s.size(); ++i) s[i] = std::sin(0.05f * float(i)) * 0.8f;
    Tensor all = from_vector(s, {window + 1, batch, 1}, dev);
    seq = slice(all, 0, 0, window).contiguous();
    target = slice(all, 0, 1, window + 1).contiguous();
    eval(seq, target);
    opt = std::make_unique<optim::Adam>(params(), 1e-3, o);
  }
  nn::ParamList params() override {
    return nn::join({cell.parameters("lstm."), head.parameters("head.")});
  }
  Tensor forward() override {
    auto state = cell.zero_state(batch);
    Tensor loss;
    for (int t = 0; t < window; ++t) {
      state = cell(reshape(slice(seq, 0, t, t + 1), {batch, 1}), state);
      Tensor err = nn::mse_loss(head(state.h), reshape(slice(target, 0, t, t + 1), {batch, 1}));
      loss = loss.defined() ? loss + err : err;
    }
    return loss / float(window);
  }
};

std::unique_ptr<Model> make(const std::string& name, const Args& a, bool capturable = false) {
  optim::AdamOptions o;
  o.capturable = capturable;
  if (name == "seed") return std::make_unique<SeedModel>(64, a.window, a.device, o);
  if (name == "lstm1") return std::make_unique<LstmModel>(1, 256, a.window, a.device, o);
  return std::make_unique<LstmModel>(32, 256, a.window, a.device, o);
}

// How a step is written: as a user writes it (`natural`), with an eval of the parameters each
// step (the tuned form of earlier benchmarks), or traced once by kiln::compile and replayed
// (Adam with `capturable`, so that its bias correction is part of the replay).
enum class Form { natural, eval_each_step, compiled };
const char* form_name(Form f) {
  return f == Form::natural ? "natural" : f == Form::eval_each_step ? "eval/step" : "compiled";
}

// The model's training step as a compiled function: parameters and Adam's state are its state.
Compiled compiled_step(Model& m) {
  std::vector<Tensor*> state;
  for (const nn::NamedParam& p : m.params()) state.push_back(p.tensor);
  for (const nn::NamedParam& p : m.opt->state()) state.push_back(p.tensor);
  return compile(
      [&m](const std::vector<Tensor>&) { return std::vector<Tensor>{m.step().detach()}; }, state);
}

void run(const std::string& name, const Args& a, Form form) {
  auto m = make(name, a, form == Form::compiled);
  std::optional<Compiled> compiled;
  if (form == Form::compiled) compiled.emplace(compiled_step(*m));
  Tensor loss;
  auto body = [&] {
    if (compiled) {
      loss = (*compiled)({})[0];
      return;
    }
    loss = m->step();
    if (form == Form::eval_each_step) eval(optim::tensors(m->params()));
  };
  auto sync_loss = [&] { (void)loss.item<float>(); };
  for (int i = 0; i < 10; ++i) body(); // warm-up: compiles, plans, graphs
  sync_loss();
  reset_stats();
  const float first = loss.item<float>();
  bench::Spread s = bench::time_spread(body, sync_loss, a.steps, a.reps);
  const Stats st = stats();
  // The host's share: one more loop timed without its final wait (recording, grad, planning,
  // queueing; on the CPU backend also the computing, which is synchronous).
  const double t0 = bench::now_ns();
  for (int i = 0; i < a.steps; ++i) body();
  const double host_ms = (bench::now_ns() - t0) / 1e6 / a.steps;
  sync_loss();
  const double steps = 1 + double(a.steps) * a.reps; // time_spread: one warm-up call, then reps
  std::printf("| %s | %s | %.3f (%.3f-%.3f) | %.3f | %.1f | %.2f | %.2f | %.2f | %.2f | %.1f | "
              "%.4g -> %.4g |\n",
              name.c_str(), form_name(form), s.median / 1e3, s.min / 1e3, s.max / 1e3, host_ms,
              double(st.peak_bytes_in_use) / 1e6, double(st.plan_hits) / steps,
              double(st.plan_misses) / steps, double(st.graph_replays) / steps,
              double(st.graph_updates) / steps, double(st.kernels_run + st.gemms_run) / steps,
              first, loss.item<float>());
  if (compiled && compiled->counts().replays == 0) { // it would time the function's calls
    std::fprintf(stderr, "train_rnn: the compiled %s step was not replayed: %s\n", name.c_str(),
                 compiled->why_not_replayed().c_str());
    std::exit(1);
  }
}

// Where the host's time goes in a step: recording the forward, kiln::grad, and Adam's step, which
// records the update and flushes (on a GPU: the plan lookup and queueing the replay; on the CPU
// also the computing). Medians over `steps` steps, us.
void phases(const std::string& name, const Args& a) {
  auto m = make(name, a);
  std::vector<double> fwd, bwd, upd, ev;
  for (int i = 0; i < 10 + a.steps; ++i) {
    const double t0 = bench::now_ns();
    Tensor loss = m->forward();
    const double t1 = bench::now_ns();
    std::vector<Tensor> g = grad(loss, optim::tensors(m->params()));
    const double t2 = bench::now_ns();
    m->opt->step(g);
    g.clear();
    loss = Tensor();
    const double t3 = bench::now_ns();
    eval(optim::tensors(m->params()));
    const double t4 = bench::now_ns();
    if (i < 10) continue; // warm-up: compiles, plans, graphs
    fwd.push_back((t1 - t0) / 1e3);
    bwd.push_back((t2 - t1) / 1e3);
    upd.push_back((t3 - t2) / 1e3);
    ev.push_back((t4 - t3) / 1e3);
  }
  kiln::sync();
  std::printf("| %s | %.0f | %.0f | %.0f | %.0f |\n", name.c_str(), bench::median(fwd),
              bench::median(bwd), bench::median(upd), bench::median(ev));
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (f == "--device")
      a.device = next() == "cpu" ? Device::cpu() : Device::cuda(0);
    else if (f == "--steps")
      a.steps = std::max(1, std::atoi(next().c_str()));
    else if (f == "--reps")
      a.reps = std::max(1, std::atoi(next().c_str()));
    else if (f == "--window")
      a.window = std::max(1, std::atoi(next().c_str()));
    else if (f == "--only")
      a.only = next();
    else if (f == "--record-only")
      a.record_only = std::atoi(next().c_str());
    else if (f == "--phases")
      a.phases = true;
    else if (f == "--compiled-only")
      a.compiled_only = true;
    else if (f == "--eager")
      a.eager = true;
  }
  return a;
}

} // namespace

int main(int argc, char** argv) try {
  bench::time_compiled_kernels(); // the first form timed would otherwise run on the stand-in
  Args a = parse(argc, argv);
  set_default_device(a.device);
  set_eager(a.eager);
  bench::print_header("train_rnn: training steps (forward over a window, grad, Adam)", argc, argv);
  if (a.record_only) { // a profiler's view of recording: nothing is computed
    auto m = make(a.only.empty() ? "lstm1" : a.only, a);
    reset_stats();
    for (int i = 0; i < a.record_only; ++i) (void)grad(m->forward(), optim::tensors(m->params()));
    std::fprintf(stderr, "ops recorded per forward and grad: %.0f (merged %.0f)\n",
                 double(stats().ops_recorded) / a.record_only,
                 double(stats().ops_merged) / a.record_only);
    return 0;
  }
  if (a.phases) {
    std::printf(
        "- host time per phase of a step, eval every step, median of %d steps after 10 "
        "warm-up steps, us; device %s; `Adam + flush`: Adam's step records the update and flushes; "
        "`eval`: what is left for eval(params) after it\n\n| model | forward | grad | "
        "Adam + flush | eval |\n|---|---:|---:|---:|---:|\n",
        a.steps, a.device.str().c_str());
    for (const char* name : {"seed", "lstm1", "lstm32"})
      if (a.only.empty() || a.only == name) phases(name, a);
    return 0;
  }
  std::printf("- device %s%s; window %d; %d steps per timed loop, median (min-max) of %d loops "
              "after 10 warm-up steps; ms per training step, wall clock including the loss read "
              "that ends each loop\n",
              a.device.str().c_str(), a.eager ? " (eager)" : "", a.window, a.steps, a.reps);
  std::printf(
      "- seed: the seeds' cell (d = 64: one matmul, five pointwise) trained on mean(x_T^2); "
      "lstm1/lstm32: nn::LSTMCell(1, 256) + nn::Linear(256, 1) at batch 1/32, MSE per "
      "step; Adam lr 1e-3\n");
  std::printf("- per step after warm-up: plan hits, plan misses, CUDA-graph replays, replays "
              "that first patched moved pointers or run-time scalars (`updates`), kernels (fused "
              "kernels + GEMMs) "
              "launched; `host ms/step`: one more loop timed without its final wait (recording, "
              "grad, planning, queueing)\n\n");
  std::printf("| model | form | ms/step | host ms/step | peak MB | plan hits | misses | graph "
              "replays | updates | kernels | loss first -> last |\n"
              "|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const char* name : {"seed", "lstm1", "lstm32"}) {
    if (!a.only.empty() && a.only != name) continue;
    if (!a.compiled_only) {
      run(name, a, Form::natural);
      run(name, a, Form::eval_each_step);
    }
    if (!a.eager) run(name, a, Form::compiled);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "train_rnn: %s\n", e.what());
  return 1;
}
