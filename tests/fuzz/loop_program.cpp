// The loop generator (loop_program.h). A body is a list of statements, each a C++ line for the
// reproducer and the op calls it makes; every statement has a form for odd steps that calls the
// same ops with other operands, so that those steps miss the template the even ones use.
#include "loop_program.h"

#include "engine/adaptive_flush.h"
#include "engine/autograd.h"
#include "engine/cse.h"
#include "engine/graph.h"
#include "engine/kernel_observer.h"
#include "engine/loop_template.h"
#include "ir/kernel_key.h"

#include <kiln/optim.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <vector>

namespace kfuzz {
namespace {

using kiln::DType;
using kiln::Scalar;
using kiln::Shape;
using kiln::Tensor;

// What a loop's statements read and write.
struct State {
  std::vector<Tensor> s;    // the loop's state [rows, cols], of the loop's dtype
  Tensor acc;               // an f64 accumulator [rows, cols]
  std::vector<Tensor> held; // values a statement keeps across steps: read after the loop
  // Loop invariants, realized before the loop: w [cols, cols] and its transpose (a view),
  // w2 [cols, 2 cols] and b2 [2 cols] (gates to chunk), a row [1, cols], a sequence of
  // [len * rows, cols] read a step at a time, an f64 [rows, cols].
  Tensor w, wt, w2, b2, row, seq, wide;
  int64_t rows = 0, cols = 0, len = 0;
  // A training loop's: its optimizer (over w, w2, b2 and row: the state must not move once it
  // is made), the losses it read, a running total of them with history, losses kept with theirs.
  std::unique_ptr<kiln::optim::Optimizer> optimizer;
  std::vector<double> losses;
  Tensor total;
  std::vector<Tensor> kept;
};

struct Statement {
  std::string code; // the C++ of the statement, reading `odd` and `t`
  std::function<void(State&, bool odd, int64_t t)> run;
};

class Rng {
public:
  explicit Rng(uint64_t seed) : g_(seed * 0x9E3779B97F4A7C15ull + 7) {}
  int below(int n) { return static_cast<int>(g_() % static_cast<uint64_t>(n)); }
  bool chance(int percent) { return below(100) < percent; }

private:
  std::mt19937_64 g_;
};

std::string sv(int i) {
  return "s[" + std::to_string(i) + "]";
}

// A float literal as the reproducer writes it (the values are multiples of 1/16: exact).
std::string lit(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%gf", x);
  return b;
}

// The states one statement reads and writes: i (written), j and k (read), and their names in the
// reproducer.
struct Operands {
  int i, j, k;
  std::string si, sj, sk;
};

// binary, a broadcast row on odd steps
Statement binary_or_row(Rng& rng, const Operands& o) {
  static const char* names[] = {"add", "sub", "mul", "maximum", "minimum"};
  using Fn = Tensor (*)(const Tensor&, const Tensor&);
  static const Fn fns[] = {kiln::add, kiln::sub, kiln::mul, kiln::maximum, kiln::minimum};
  const int op = rng.below(5);
  return {o.si + " = tanh(" + names[op] + "(" + o.sj + ", odd ? row : " + o.sk + "));",
          [i = o.i, j = o.j, k = o.k, op](State& S, bool odd, int64_t) {
            S.s[size_t(i)] = kiln::tanh(fns[op](S.s[size_t(j)], odd ? S.row : S.s[size_t(k)]));
          }};
}

// a scalar after the tensor: a float, an integer or another float on odd steps
Statement scalar_after(Rng& rng, const Operands& o) {
  const double c = (rng.below(15) - 7) / 8.0;
  const int64_t n = rng.below(5) - 2;
  const bool integral = rng.chance(50);
  const std::string odd_lit = integral ? std::to_string(n) : lit(c / 2);
  return {o.si + " = tanh(" + o.sj + " * (odd ? " + odd_lit + " : " + lit(c) + "));",
          [i = o.i, j = o.j, c, n, integral](State& S, bool odd, int64_t) {
            const Scalar x = odd ? (integral ? Scalar(n) : Scalar(float(c / 2))) : Scalar(float(c));
            S.s[size_t(i)] = kiln::tanh(kiln::mul(S.s[size_t(j)], x));
          }};
}

// a scalar before the tensor (rsub)
Statement scalar_before(Rng& rng, const Operands& o) {
  const double c = (rng.below(9) - 4) / 4.0;
  return {o.si + " = rsub(sigmoid(" + o.sj + "), odd ? 1 : " + lit(c) + ");",
          [i = o.i, j = o.j, c](State& S, bool odd, int64_t) {
            S.s[size_t(i)] = kiln::rsub(kiln::sigmoid(S.s[size_t(j)]),
                                        odd ? Scalar(int64_t(1)) : Scalar(float(c)));
          }};
}

// unary ops, another one on odd steps
Statement unary_pair(Rng&, const Operands& o) {
  return {o.si + " = odd ? tanh(" + o.sj + ") : sigmoid(" + o.sj + ") - 0.5f;",
          [i = o.i, j = o.j](State& S, bool odd, int64_t) {
            S.s[size_t(i)] = odd ? kiln::tanh(S.s[size_t(j)])
                                 : kiln::sub(kiln::sigmoid(S.s[size_t(j)]), Scalar(0.5f));
          }};
}

// a matmul, of the transposed weight (other strides) on odd steps
Statement matmul_weight(Rng&, const Operands& o) {
  return {o.si + " = tanh(matmul(" + o.sj + ", odd ? wt : w));",
          [i = o.i, j = o.j](State& S, bool odd, int64_t) {
            S.s[size_t(i)] = kiln::tanh(kiln::matmul(S.s[size_t(j)], odd ? S.wt : S.w));
          }};
}

// gates chunked into column views of a pending value; other columns on odd steps
Statement chunked_gates(Rng&, const Operands& o) {
  return {"{ Tensor gates = matmul(" + o.sj + ", w2) + b2; auto g = chunk(gates, 2, 1); " + o.si +
              " = sigmoid(g[0]) * tanh(odd ? slice(gates, 1, 1, cols + 1) : g[1]); }",
          [i = o.i, j = o.j](State& S, bool odd, int64_t) {
            const Tensor gates = kiln::matmul(S.s[size_t(j)], S.w2) + S.b2;
            std::vector<Tensor> g = kiln::chunk(gates, 2, 1);
            const Tensor second = odd ? kiln::slice(gates, 1, 1, S.cols + 1) : g[1];
            S.s[size_t(i)] = kiln::sigmoid(g[0]) * kiln::tanh(second);
          }};
}

// the sequence's row of the step: a view at a new offset every step
Statement sequence_row(Rng&, const Operands& o) {
  return {o.si + " = tanh(" + o.sj + " + slice(seq, 0, (t % len) * rows, (t % len + 1) * rows) * " +
              "(odd ? 1 : 0.5f));",
          [i = o.i, j = o.j](State& S, bool odd, int64_t t) {
            const int64_t at = (t % S.len) * S.rows;
            const Tensor x = kiln::slice(S.seq, 0, at, at + S.rows);
            S.s[size_t(i)] =
                kiln::tanh(S.s[size_t(j)] + (odd ? kiln::mul(x, Scalar(int64_t(1))) : x * 0.5f));
          }};
}

// reshape, transpose and expand of pending values; a realized row on odd steps
Statement reshape_transpose_expand(Rng&, const Operands& o) {
  return {
      o.si + " = tanh(transpose(reshape(" + o.sj + " * 0.5f, {cols, rows}), 0, 1) + " +
          "expand(odd ? row : sum(" + o.sk + ", {0}, true), {rows, cols}));",
      [i = o.i, j = o.j, k = o.k](State& S, bool odd, int64_t) {
        const Tensor v = kiln::reshape(S.s[size_t(j)] * 0.5f, {S.cols, S.rows});
        const Tensor r = odd ? S.row : kiln::sum(S.s[size_t(k)], {0}, true);
        S.s[size_t(i)] = kiln::tanh(kiln::transpose(v, 0, 1) + kiln::expand(r, {S.rows, S.cols}));
      }};
}

// where, a form templates do not cover
Statement where_select(Rng&, const Operands& o) {
  return {o.si + " = where(odd ? " + o.sj + " >= " + o.sk + " : " + o.sj + " > 0.0f, " + o.sj +
              ", " + o.sj + " * 0.1f);",
          [i = o.i, j = o.j, k = o.k](State& S, bool odd, int64_t) {
            const Tensor& a = S.s[size_t(j)];
            const Tensor c = odd ? a >= S.s[size_t(k)] : a > 0.0f;
            S.s[size_t(i)] = kiln::where(c, a, a * 0.1f);
          }};
}

// f64 and the states' dtype: casts the front-end inserts; an f64 operand on odd steps
Statement f64_accumulate(Rng&, const Operands& o) {
  return {"acc = acc * 0.5 + (odd ? wide : cast(" + o.sj + ", DType::f64)) * " + o.sk + ";",
          [j = o.j, k = o.k](State& S, bool odd, int64_t) {
            const Tensor a = odd ? S.wide : kiln::cast(S.s[size_t(j)], DType::f64);
            S.acc = S.acc * 0.5 + a * S.s[size_t(k)];
          }};
}

// a value held across steps (never asked for until the loop ends)
Statement held_across_steps(Rng&, const Operands& o) {
  return {"held[t % 3] = " + o.sj + " * 0.25f + (odd ? 2 : 1.0f);",
          [j = o.j](State& S, bool odd, int64_t t) {
            S.held[size_t(t % 3)] =
                kiln::add(S.s[size_t(j)] * 0.25f, odd ? Scalar(int64_t(2)) : Scalar(1.0f));
          }};
}

// a reduction inside the body's kernels: softmax over the rows (the columns on odd steps)
Statement softmax_rows(Rng&, const Operands& o) {
  return {o.si + " = softmax(" + o.sj + ", odd ? 0 : 1) - 0.25f;",
          [i = o.i, j = o.j](State& S, bool odd, int64_t) {
            S.s[size_t(i)] = kiln::softmax(S.s[size_t(j)], odd ? 0 : 1) - 0.25f;
          }};
}

// a slice of a pending concat, at another column on odd steps
Statement slice_of_concat(Rng& rng, const Operands& o) {
  const int64_t at = rng.below(3), odd_at = rng.below(3);
  return {o.si + " = tanh(slice(concat({" + o.sj + ", " + o.sk + "}, 1), 1, odd ? " +
              std::to_string(odd_at) + " : " + std::to_string(at) + ", (odd ? " +
              std::to_string(odd_at) + " : " + std::to_string(at) + ") + cols));",
          [i = o.i, j = o.j, k = o.k, at, odd_at](State& S, bool odd, int64_t) {
            const int64_t a = odd ? odd_at : at;
            const Tensor both = kiln::concat({S.s[size_t(j)], S.s[size_t(k)]}, 1);
            S.s[size_t(i)] = kiln::tanh(kiln::slice(both, 1, a, a + S.cols));
          }};
}

// layer_norm of the rows, plus another state on odd steps
Statement layer_norm_plus(Rng&, const Operands& o) {
  return {o.si + " = layer_norm(" + o.sj + ") * 0.5f" + " + (odd ? " + o.sk + " : 0.0f * " + o.sk +
              ");",
          [i = o.i, j = o.j, k = o.k](State& S, bool odd, int64_t) {
            const Tensor& b = S.s[size_t(k)];
            S.s[size_t(i)] = kiln::layer_norm(S.s[size_t(j)]) * 0.5f + (odd ? b : b * 0.0f);
          }};
}

// a matmul of two pending values, one transposed (a GEMM operand written first)
Statement matmul_of_pending(Rng&, const Operands& o) {
  return {o.si + " = tanh(matmul(" + o.sj + ", matmul(transpose(" + o.sk + ", 0, 1), odd ? " +
              o.sj + " : " + o.sk + ")) * 0.1f);",
          [i = o.i, j = o.j, k = o.k](State& S, bool odd, int64_t) {
            const Tensor& b = S.s[size_t(k)];
            const Tensor gram = kiln::matmul(kiln::transpose(b, 0, 1), odd ? S.s[size_t(j)] : b);
            S.s[size_t(i)] = kiln::tanh(kiln::matmul(S.s[size_t(j)], gram) * 0.1f);
          }};
}

// read mid-loop on odd steps: a flush wherever the body stands
Statement eval_mid_loop(Rng&, const Operands& o) {
  return {"if (odd) eval(" + o.sj + ");", [j = o.j](State& S, bool odd, int64_t) {
            if (odd) kiln::eval(S.s[size_t(j)]);
          }};
}

// One statement of the body, over states i (written), j and k (read): a form drawn from the
// table, which draws its own parameters after.
Statement statement(Rng& rng, int states) {
  using Form = Statement (*)(Rng&, const Operands&);
  // The order is the seeds': a form's index is what rng.below(16) draws for it.
  static const Form forms[16] = {
      binary_or_row,   scalar_after,    scalar_before,     unary_pair,
      matmul_weight,   chunked_gates,   sequence_row,      reshape_transpose_expand,
      where_select,    f64_accumulate,  held_across_steps, softmax_rows,
      slice_of_concat, layer_norm_plus, matmul_of_pending, eval_mid_loop,
  };
  const int i = rng.below(states), j = rng.below(states), k = rng.below(states);
  const Operands o{i, j, k, sv(i), sv(j), sv(k)};
  return forms[rng.below(16)](rng, o);
}

// The loop's parameters, drawn from its seed: the same in every run.
struct Loop {
  int64_t rows = 0, cols = 0, len = 0, steps = 0;
  int states = 0, odd_every = 0, eval_every = 0;
  DType dtype = DType::f32; // of the states and the weights
  int64_t idle_flush = 0;   // 0: no early flushes; else the check interval, with a faked probe
  // A training loop: the weights require grad, and every step ends with the gradient of the
  // states' mean square and an update (the states carried detached). How it updates, whether it
  // reads the loss (before grad(): the forward evaluated, the backward recorded after it; or
  // after the update), and whether a history outlives the step (a running total of the losses
  // with history, PyTorch's `total += loss`; or each loss kept with its graph retained).
  bool train = false;
  enum class Update { by_hand, sgd_momentum, adam } update = Update::by_hand;
  enum class ReadLoss { never, before_grad, after_update } read_loss = ReadLoss::never;
  enum class KeepHistory { none, running_total, retained } keep = KeepHistory::none;
  std::vector<Statement> body;

  Loop(uint64_t seed, const LoopOptions& opt) {
    Rng rng(seed);
    rows = 1 + rng.below(5);
    cols = 2 * (1 + rng.below(5)); // even: chunks of two halves
    static const DType dtypes[] = {DType::f32, DType::f32, DType::f32, DType::f32,  DType::f32,
                                   DType::f32, DType::f32, DType::f16, DType::bf16, DType::f64};
    dtype = dtypes[rng.below(10)];
    len = 1 + rng.below(5);
    steps = 20 + rng.below(200);
    states = 1 + rng.below(3);
    odd_every = rng.chance(20) ? 0 : 2 + rng.below(30); // 0: never
    eval_every = rng.chance(60) ? 0 : 1 + rng.below(8); // 0: only after the loop
    static const int64_t intervals[] = {0, 2, 16};
    idle_flush = intervals[rng.below(3)];
    train = rng.chance(30) && opt.train; // drawn either way: a seed's body does not change
    for (int n = 1 + rng.below(8); n > 0; --n) body.push_back(statement(rng, states));
    update = static_cast<Update>(rng.below(3)); // after the body: earlier seeds' bodies stay
    read_loss = static_cast<ReadLoss>(rng.below(3));
    keep = static_cast<KeepHistory>(rng.below(3));
    if (opt.steps > 0) steps = opt.steps;
    for (size_t i = body.size(); i-- > 0;)
      if (i < 64 && (opt.drop >> i & 1)) body.erase(body.begin() + static_cast<std::ptrdiff_t>(i));
  }

  std::string train_code() const;
  std::string code(uint64_t seed) const {
    std::ostringstream c;
    c << "// rows " << rows << ", cols " << cols << ", len " << len << ", " << states << " "
      << kiln::dtype_name(dtype) << " states, set_idle_flush(" << idle_flush << ")"
      << (idle_flush ? " with the device idle or busy at random" : "") << "; kiln::manual_seed("
      << seed << ") before the inputs (loop_program.cpp, make_state)"
      << (train ? "; w, w2, b2 and row require grad" : "") << "\n"
      << "for (int64_t t = 0; t < " << steps << "; ++t) {\n  const bool odd = "
      << (odd_every ? "t % " + std::to_string(odd_every) + " == " + std::to_string(odd_every - 1)
                    : std::string("false"))
      << ";\n";
    for (const Statement& st : body) c << "  " << st.code << "\n";
    if (train) c << train_code();
    if (eval_every) c << "  if (t % " << eval_every << " == " << eval_every - 1 << ") eval(s);\n";
    c << "}\n";
    return c.str();
  }
};

std::string Loop::train_code() const {
  static const char* updates[] = {"w -= 0.05f * g[0] and so on",
                                  "optim::SGD(params, 0.05, {.momentum = 0.9}).step(g)",
                                  "optim::Adam(params, 0.01).step(g)"};
  std::string c = "  loss = sum of mean(s[i] * s[i]);";
  if (read_loss == ReadLoss::before_grad) c += " losses.push_back(loss.item<double>());";
  c += keep == KeepHistory::retained ? " g = grad(loss, {w, w2, b2, row}, {.retain_graph = true});"
                                     : " g = grad(loss, {w, w2, b2, row});";
  c += std::string(" ") + updates[static_cast<int>(update)] + ";";
  if (read_loss == ReadLoss::after_update) c += " losses.push_back(loss.item<double>());";
  if (keep == KeepHistory::running_total) c += " total = total + loss;";
  if (keep == KeepHistory::retained) c += " kept.push_back(loss);";
  return c + " s, acc and held detached\n";
}

State make_state(const Loop& l, uint64_t seed, kiln::Device dev) {
  kiln::manual_seed(seed);
  const DType dt = l.dtype;
  const float scale = 1.0f / float(l.cols);
  State S;
  S.rows = l.rows, S.cols = l.cols, S.len = l.len;
  S.w = kiln::randn({l.cols, l.cols}, dt, dev) * scale;
  S.wt = kiln::transpose(S.w, 0, 1);
  S.w2 = kiln::randn({l.cols, 2 * l.cols}, dt, dev) * scale;
  S.b2 = kiln::randn({2 * l.cols}, dt, dev) * 0.1f;
  S.row = kiln::randn({1, l.cols}, dt, dev) * 0.5f;
  S.seq = kiln::randn({l.len * l.rows, l.cols}, dt, dev);
  S.wide = kiln::randn({l.rows, l.cols}, DType::f64, dev);
  for (int i = 0; i < l.states; ++i) S.s.push_back(kiln::randn({l.rows, l.cols}, dt, dev));
  S.acc = kiln::zeros({l.rows, l.cols}, DType::f64, dev);
  S.held.assign(3, kiln::zeros({l.rows, l.cols}, dt, dev));
  kiln::eval(S.w, S.wt, S.w2, S.b2, S.row, S.seq, S.wide, S.acc, S.held[0]);
  kiln::eval(S.s);
  if (l.train)
    for (Tensor* p : {&S.w, &S.w2, &S.b2, &S.row}) p->requires_grad_();
  return S;
}

// A training loop's optimizer, where it uses one.
void make_optimizer(const Loop& l, State& S) {
  kiln::nn::ParamList params = {{"w", &S.w}, {"w2", &S.w2}, {"b2", &S.b2}, {"row", &S.row}};
  if (l.update == Loop::Update::sgd_momentum) {
    kiln::optim::SGDOptions momentum;
    momentum.momentum = 0.9;
    S.optimizer = std::make_unique<kiln::optim::SGD>(params, 0.05, momentum);
  } else if (l.update == Loop::Update::adam)
    S.optimizer = std::make_unique<kiln::optim::Adam>(params, 0.01);
}

// The end of a training loop's step: the states' mean square differentiated with respect to the
// weights, an update, and the values carried to the next step detached from this one's history
// (which grad frees unless it is retained).
void train_step(const Loop& l, State& S) {
  Tensor loss = kiln::mean(S.s[0] * S.s[0]);
  for (size_t i = 1; i < S.s.size(); ++i) loss = loss + kiln::mean(S.s[i] * S.s[i]);
  if (!loss.requires_grad()) return; // no statement read a weight this step
  if (l.read_loss == Loop::ReadLoss::before_grad) S.losses.push_back(loss.item<double>());
  kiln::GradOptions keep_graph;
  keep_graph.retain_graph = l.keep == Loop::KeepHistory::retained;
  const std::vector<Tensor> g = kiln::grad(loss, {S.w, S.w2, S.b2, S.row}, keep_graph);
  if (S.optimizer) {
    S.optimizer->step(g);
  } else {
    S.w -= 0.05f * g[0];
    S.w2 -= 0.05f * g[1];
    S.b2 -= 0.05f * g[2];
    S.row -= 0.05f * g[3];
  }
  if (l.read_loss == Loop::ReadLoss::after_update) S.losses.push_back(loss.item<double>());
  if (l.keep == Loop::KeepHistory::running_total)
    S.total = S.total.defined() ? S.total + loss : loss;
  if (l.keep == Loop::KeepHistory::retained) S.kept.push_back(loss);
  for (Tensor& x : S.s) x = x.detach();
  S.acc = S.acc.detach();
  for (Tensor& h : S.held) h = h.detach();
}

// The process's small-matmul mode (KILN_SMALL_MATMUL), which loops other than training ones run.
kiln::SmallMatmul usual_small_matmul() {
  static const kiln::SmallMatmul usual = kiln::small_matmul();
  return usual;
}

// The engine as a fresh process would start the loop: no loop seen, no templates, no plans, no
// kinds that CSE merged, so that runs with and without templates are alike but for them. The run
// without templates also compares its plans without tokens (Node::key_token): neither may
// change a bit, a kernel or a plan.
void start_afresh(const LoopOptions& opt, const Loop& l, uint64_t seed) {
  using namespace kiln::detail;
  kiln::set_eager(opt.eager);
  kiln::set_small_matmul(l.train && !opt.train_blas ? kiln::SmallMatmul::everywhere
                                                    : usual_small_matmul());
  kiln::set_loop_flush(true);
  cse_forget_merged_kinds();
  clear_loop_template();
  engine().loop_template = opt.templates;
  engine().key_tokens = opt.templates;
  const int64_t plans = engine().max_plans;
  kiln::set_plan_cache_limit(0);
  kiln::set_plan_cache_limit(plans);
  kiln::set_idle_flush(l.idle_flush);
  set_device_probe({});
  if (l.idle_flush > 0) { // idle or busy at random, the same in every run of the seed
    auto bits = std::make_shared<uint64_t>(seed);
    set_device_probe([bits](kiln::Device) {
      *bits = *bits * 6364136223846793005ull + 1442695040888963407ull;
      return *bits >> 63 ? DeviceState::idle : DeviceState::busy;
    });
  }
}

} // namespace

std::string loop_code(uint64_t seed, const LoopOptions& opt) {
  return Loop(seed, opt).code(seed);
}

namespace {

// `t`'s values in a tensor of its own (exact: double holds every floating dtype's values), so
// that nothing of the loop's graph, and no gradient history, outlives the run.
Tensor copy_of(const Tensor& t) {
  Tensor c = kiln::cast(kiln::from_vector<double>(t.to_vector<double>(), t.shape(), t.device()),
                        t.dtype());
  kiln::eval(c); // now: not in the next run's kernels
  return c;
}

// The loop's steps; its outputs come back as copies, its state dies with this call.
LoopOutcome run_steps(uint64_t seed, const LoopOptions& opt, const Loop& l) {
  State S = make_state(l, seed, opt.device);
  if (l.train) make_optimizer(l, S);
  LoopOutcome r;
  kiln::reset_stats();
  kiln::detail::set_kernel_observer(
      [&r](const kiln::detail::FusedKernel& k) { r.kernels.insert(kiln::detail::kernel_key(k)); });
  for (int64_t t = 0; t < l.steps; ++t) {
    const bool odd = l.odd_every > 0 && t % l.odd_every == l.odd_every - 1;
    for (const Statement& st : l.body) st.run(S, odd, t);
    if (l.train) train_step(l, S);
    if (l.eval_every > 0 && t % l.eval_every == l.eval_every - 1) kiln::eval(S.s);
  }
  std::vector<Tensor> outputs = S.s;
  outputs.push_back(S.acc);
  for (const Tensor& h : S.held) outputs.push_back(h);
  std::vector<std::string> names;
  if (l.train) { // the weights trained, the losses read, their total, the last loss kept
    for (const Tensor& p : {S.w, S.w2, S.b2, S.row}) outputs.push_back(p.detach());
    names = {"w", "w2", "b2", "row"};
    if (!S.losses.empty()) {
      outputs.push_back(kiln::from_vector<double>(S.losses, {int64_t(S.losses.size())}));
      names.push_back("losses read");
    }
    if (S.total.defined()) outputs.push_back(S.total.detach()), names.push_back("total");
    if (!S.kept.empty()) outputs.push_back(S.kept.back().detach()), names.push_back("kept");
  }
  kiln::eval(outputs);
  r.stats = kiln::stats();
  kiln::detail::set_kernel_observer({});
  for (size_t i = 0; i < outputs.size(); ++i) {
    Value v;
    v.t = copy_of(outputs[i]);
    const size_t n = S.s.size();
    v.name = i < n        ? sv(int(i))
             : i == n     ? "acc"
             : i <= n + 3 ? "held[" + std::to_string(i - n - 1) + "]"
                          : names[i - n - 4];
    r.out.outputs.push_back(std::move(v));
  }
  return r;
}

} // namespace

LoopOutcome run_loop(uint64_t seed, const LoopOptions& opt) {
  const Loop l(seed, opt);
  start_afresh(opt, l, seed);
  LoopOutcome r = run_steps(seed, opt, l);
  kiln::detail::set_device_probe({});
  kiln::set_idle_flush(0);
  kiln::set_eager(false);
  kiln::set_small_matmul(usual_small_matmul());
  kiln::detail::engine().loop_template = true;
  kiln::detail::engine().key_tokens = true;
  // Every tensor of the loop is gone: so must be every gradient history it recorded (a live one
  // would turn loop detection off for every later loop of the process).
  r.history_left = kiln::detail::live_grad_records();
  r.out.code = l.code(seed);
  return r;
}

} // namespace kfuzz
