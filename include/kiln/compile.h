#pragma once
// kiln::compile: a function of tensors traced once, then replayed without recording its ops
// (docs/compile.md).
//
//   auto step = kiln::compile([&](const std::vector<Tensor>& in) {
//     Tensor y = tanh(matmul(in[0], w) + b) * 0.5f + in[0];
//     return std::vector<Tensor>{sigmoid(y) - 0.5f};
//   });
//   for (int t = 0; t < steps; ++t) x = step({x})[0];
//
// The first call with inputs of a new signature (dtypes, devices, shapes, strides) calls the
// function and evaluates its results as one plan: the trace. Later calls with that signature
// run that plan again on their inputs without calling the function: no op is recorded, nothing
// is walked or planned, and on a GPU the step is one CUDA-graph replay. Every call is an
// evaluation: its results are realized (on a GPU, queued) when it returns.
//
// What may change between calls is what flows through the inputs, the results and `state`.
// Everything else the function reads is fixed by the trace: tensors it reads that are neither
// inputs nor state keep the values they had then, and host values (C++ scalars, a learning
// rate, branches taken) are baked in. A function that draws random numbers, reads a value on
// the host (`item`, `eval` inside it), or returns values with gradient history is not
// replayed: each call then calls it (why_not_replayed() says why). kiln::flush() inside the
// function does nothing while it is traced (the trace evaluates everything at its end).
#include <kiln/tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

class Compiled {
public:
  using Function = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

  /// `state`: tensors the function reads and rebinds (a recurrent state, parameters an update
  /// assigns): each call reads their current values and leaves them holding the new ones, as
  /// calling the function would. They must outlive the Compiled.
  explicit Compiled(Function f, std::vector<Tensor*> state = {});

  /// The function's results for `inputs`: replayed when a trace with their signature can be,
  /// else computed by calling the function. Pending inputs and state are evaluated first.
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);

  struct Counts {
    int64_t traces = 0;  // calls that traced the function (a new signature)
    int64_t replays = 0; // calls that replayed a trace
    int64_t calls = 0;   // other calls, which called the function: its trace cannot be replayed,
                         // the inputs' liveness differs from the trace's, or eager mode
  };
  Counts counts() const;
  /// Why the most recent trace cannot be replayed; empty if it can.
  std::string why_not_replayed() const;

private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

/// Compiled(f, state).
Compiled compile(Compiled::Function f, std::vector<Tensor*> state = {});

/// Whether a compiled function is being traced now (its ops recorded for replays).
bool compiling();
/// Called while a function is traced: its trace is not to be replayed, because the function
/// reads something that changes between calls which the trace would fix (for library code
/// such as an optimizer with host-side step counts). Every call then calls the function, and
/// why_not_replayed() returns `why`. Does nothing when no function is being traced.
void refuse_replay(const std::string& why);

} // namespace kiln
