#pragma once
// The model: an LSTM cell (input 1) with a linear read-out of the next value at every time step.
#include <kiln/kiln.h>
#include <kiln/nn.h>

#include <cstdint>
#include <vector>

namespace rnn {

struct Model {
  Model(int64_t hidden, kiln::DType dtype);
  /// "lstm.*" then "head.*": what the optimizer updates and the checkpoint holds.
  kiln::nn::ParamList parameters();
  /// inputs [T, B, 1] -> the prediction of the next value after each step, [T, B, 1]; the cell
  /// starts from a zero state.
  kiln::Tensor predict(const kiln::Tensor& inputs) const;
  /// The cell's hidden state after each step of inputs [T, B, 1]: T tensors [B, H].
  std::vector<kiln::Tensor> hidden_states(const kiln::Tensor& inputs) const;

  kiln::nn::LSTMCell cell;
  kiln::nn::Linear head;
};

/// MSE of the model's predictions over a window batch [window + 1, B, 1] (the layout of
/// gather_windows): inputs are rows [0, window), targets rows [1, window + 1).
kiln::Tensor window_loss(const Model& m, const kiln::Tensor& windows);

/// The prediction after the last step of each window of inputs [T, B, 1]: [B].
kiln::Tensor last_prediction(const Model& m, const kiln::Tensor& inputs);

} // namespace rnn
