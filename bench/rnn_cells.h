#pragma once
// The recurrent steps of issue 5's benchmarks, shared by bench/plan_cost.cpp (CPU host
// overhead) and bench/cuda/rnn_gpu.cpp (the device modes). bench/torch/rnn_torch.py writes the
// same math in PyTorch.
#include <kiln/kiln.h>

#include <cmath>
#include <cstdint>
#include <vector>

namespace bench {

/// The seed loop of ../shared/DESIGN.md, one step: a d x d matmul and six pointwise op calls.
struct Seed {
  static constexpr int kOpCalls = 7; // matmul, + b, tanh, * 0.5, + x, sigmoid, - 0.5
  kiln::Tensor x, w, b;              // x, w: [d, d]; b: [d], broadcast over the rows

  /// Random data, scaled so that tanh and sigmoid stay off their flat tails: W / sqrt(d) keeps
  /// the rows of x @ W near unit size. Made on the CPU (the default device is CUDA where there
  /// is a GPU); `on` copies it, so every device starts from the same values.
  static Seed random(int64_t d, uint64_t seed) {
    const kiln::Device cpu = kiln::Device::cpu();
    kiln::manual_seed(seed);
    Seed s{kiln::randn({d, d}, kiln::DType::f32, cpu),
           kiln::randn({d, d}, kiln::DType::f32, cpu) * float(1 / std::sqrt(double(d))),
           kiln::randn({d}, kiln::DType::f32, cpu) * 0.1f};
    kiln::eval(s.x, s.w, s.b);
    return s;
  }
  Seed on(kiln::Device dev) const {
    Seed s{x.to(dev), w.to(dev), b.to(dev)};
    kiln::eval(s.x, s.w, s.b);
    return s;
  }
  /// The op calls of one step (nothing computed yet).
  void record() {
    kiln::Tensor y = kiln::matmul(x, w);
    y = kiln::tanh(y + b) * 0.5f + x;
    x = kiln::sigmoid(y) - 0.5f;
  }
  /// The step as a function kiln::compile traces (x is its state), and one call of it.
  kiln::Compiled compiled() {
    return kiln::compile(
        [this](const std::vector<kiln::Tensor>&) {
          record();
          return std::vector<kiln::Tensor>{};
        },
        {&x});
  }
  void call(kiln::Compiled& f) { f({}); }
  /// The values a step produces; `step` evaluates them: the step boundary (on a GPU, eval
  /// queues the work and returns).
  std::vector<kiln::Tensor> state() const { return {x}; }
  void step() {
    record();
    kiln::eval(state());
  }
};

/// An LSTM cell (PyTorch's LSTMCell math) over a sequence of inputs. The weights of each input
/// are concatenated over the four gates, as LSTMCell stores them but transposed so the step is
/// `x @ wx`: wx [in, 4H], wh [H, 4H], bias [4H] (LSTMCell's b_ih + b_hh), gate order i, f, g, o.
/// Step t reads rows [t*batch, (t+1)*batch) of `seq` [len*batch, in], a view at a new offset
/// each step (inputs at new addresses), wrapping around after `len` steps; with len 1 the
/// slice is all of `seq`, so every step reads the same tensor.
struct Lstm {
  static constexpr int kOpCalls = 15; // slice, 2 matmul, 3 add, chunk, 3 sigmoid, 2 tanh, 3 mul
  kiln::Tensor seq, wx, wh, bias, h, c;
  int64_t batch = 0, len = 0, t = 0;

  /// Random data on the CPU, as Seed::random.
  static Lstm random(int64_t batch, int64_t in, int64_t hidden, int64_t len, uint64_t seed) {
    const kiln::Device cpu = kiln::Device::cpu();
    const kiln::DType f32 = kiln::DType::f32;
    const float scale = float(1 / std::sqrt(double(hidden))); // LSTMCell's init range
    kiln::manual_seed(seed);
    Lstm l{kiln::randn({len * batch, in}, f32, cpu),
           kiln::randn({in, 4 * hidden}, f32, cpu) * scale,
           kiln::randn({hidden, 4 * hidden}, f32, cpu) * scale,
           kiln::randn({4 * hidden}, f32, cpu) * scale,
           kiln::zeros({batch, hidden}, f32, cpu),
           kiln::zeros({batch, hidden}, f32, cpu),
           batch,
           len};
    kiln::eval(l.seq, l.wx, l.wh, l.bias, l.h, l.c);
    return l;
  }
  Lstm on(kiln::Device dev) const {
    Lstm l{seq.to(dev), wx.to(dev), wh.to(dev), bias.to(dev), h.to(dev), c.to(dev), batch, len};
    kiln::eval(l.seq, l.wx, l.wh, l.bias, l.h, l.c);
    return l;
  }
  kiln::Tensor next_x() {
    const int64_t row = (t++ % len) * batch;
    return kiln::slice(seq, 0, row, row + batch);
  }
  void cell(const kiln::Tensor& x) {
    kiln::Tensor gates = kiln::matmul(x, wx) + kiln::matmul(h, wh) + bias;
    std::vector<kiln::Tensor> g = kiln::chunk(gates, 4, 1); // i, f, g, o: column views
    c = kiln::sigmoid(g[1]) * c + kiln::sigmoid(g[0]) * kiln::tanh(g[2]);
    h = kiln::sigmoid(g[3]) * kiln::tanh(c);
  }
  void record() { cell(next_x()); }
  /// The cell as a function kiln::compile traces: x its input, h and c its state.
  kiln::Compiled compiled() {
    return kiln::compile(
        [this](const std::vector<kiln::Tensor>& in) {
          cell(in[0]);
          return std::vector<kiln::Tensor>{};
        },
        {&h, &c});
  }
  void call(kiln::Compiled& f) { f({next_x()}); }
  std::vector<kiln::Tensor> state() const { return {h, c}; }
  void step() {
    record();
    kiln::eval(state());
  }
};

/// A GRU cell (PyTorch's GRUCell math) over a sequence of inputs, laid out as Lstm: wx [in, 3H],
/// wh [H, 3H], bx and bh [3H] (GRUCell's b_ih and b_hh, kept apart: the candidate's hidden
/// bias is inside the reset gate's product), gate order r, z, n.
struct Gru {
  static constexpr int kOpCalls = 16; // slice, 2 matmul, 2 add, 2 chunk, 9 pointwise
  kiln::Tensor seq, wx, wh, bx, bh, h;
  int64_t batch = 0, len = 0, t = 0;

  static Gru random(int64_t batch, int64_t in, int64_t hidden, int64_t len, uint64_t seed) {
    const kiln::Device cpu = kiln::Device::cpu();
    const kiln::DType f32 = kiln::DType::f32;
    const float scale = float(1 / std::sqrt(double(hidden))); // GRUCell's init range
    kiln::manual_seed(seed);
    Gru g{kiln::randn({len * batch, in}, f32, cpu),
          kiln::randn({in, 3 * hidden}, f32, cpu) * scale,
          kiln::randn({hidden, 3 * hidden}, f32, cpu) * scale,
          kiln::randn({3 * hidden}, f32, cpu) * scale,
          kiln::randn({3 * hidden}, f32, cpu) * scale,
          kiln::zeros({batch, hidden}, f32, cpu),
          batch,
          len};
    kiln::eval(g.seq, g.wx, g.wh, g.bx, g.bh, g.h);
    return g;
  }
  Gru on(kiln::Device dev) const {
    Gru g{seq.to(dev), wx.to(dev), wh.to(dev), bx.to(dev), bh.to(dev), h.to(dev), batch, len};
    kiln::eval(g.seq, g.wx, g.wh, g.bx, g.bh, g.h);
    return g;
  }
  kiln::Tensor next_x() {
    const int64_t row = (t++ % len) * batch;
    return kiln::slice(seq, 0, row, row + batch);
  }
  void record() { cell(next_x()); }
  kiln::Compiled compiled() {
    return kiln::compile(
        [this](const std::vector<kiln::Tensor>& in) {
          cell(in[0]);
          return std::vector<kiln::Tensor>{};
        },
        {&h});
  }
  void call(kiln::Compiled& f) { f({next_x()}); }
  void cell(const kiln::Tensor& x) {
    std::vector<kiln::Tensor> gi = kiln::chunk(kiln::matmul(x, wx) + bx, 3, 1);
    std::vector<kiln::Tensor> gh = kiln::chunk(kiln::matmul(h, wh) + bh, 3, 1);
    kiln::Tensor r = kiln::sigmoid(gi[0] + gh[0]);
    kiln::Tensor z = kiln::sigmoid(gi[1] + gh[1]);
    kiln::Tensor n = kiln::tanh(gi[2] + r * gh[2]);
    h = n + z * (h - n); // (1 - z) * n + z * h
  }
  std::vector<kiln::Tensor> state() const { return {h}; }
  void step() {
    record();
    kiln::eval(state());
  }
};

} // namespace bench
