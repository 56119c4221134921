#include "model.h"

#include <vector>

namespace rnn {

using kiln::Tensor;

Model::Model(int64_t hidden, kiln::DType dtype)
    : cell(1, hidden, {dtype}), head(hidden, 1, true, {dtype}) {}

kiln::nn::ParamList Model::parameters() {
  return kiln::nn::join({cell.parameters("lstm."), head.parameters("head.")});
}

std::vector<Tensor> Model::hidden_states(const Tensor& inputs) const {
  const int64_t steps = inputs.size(0), batch = inputs.size(1);
  kiln::nn::LSTMCell::State s = cell.zero_state(batch);
  std::vector<Tensor> hs;
  hs.reserve(static_cast<size_t>(steps));
  for (int64_t t = 0; t < steps; ++t) {
    Tensor x = kiln::reshape(kiln::slice(inputs, 0, t, t + 1), {batch, 1});
    s = cell(x, s);
    hs.push_back(s.h);
  }
  return hs;
}

Tensor Model::predict(const Tensor& inputs) const {
  const int64_t steps = inputs.size(0), batch = inputs.size(1);
  std::vector<Tensor> hs = hidden_states(inputs);
  // One read-out over every step's hidden state: [T * B, H] @ [H, 1].
  Tensor h = kiln::reshape(kiln::stack(hs, 0), {steps * batch, cell.hidden_size});
  return kiln::reshape(head(h), {steps, batch, 1});
}

Tensor window_loss(const Model& m, const Tensor& windows) {
  const int64_t window = windows.size(0) - 1;
  Tensor inputs = kiln::slice(windows, 0, 0, window);
  Tensor targets = kiln::slice(windows, 0, 1, window + 1);
  return kiln::nn::mse_loss(m.predict(inputs), targets);
}

Tensor last_prediction(const Model& m, const Tensor& inputs) {
  return kiln::reshape(m.head(m.hidden_states(inputs).back()), {inputs.size(1)});
}

} // namespace rnn
