// Linear, LSTMCell and GRUCell: PyTorch's equations, parameter shapes and initialisation.
#include <kiln/autograd.h>
#include <kiln/error.h>
#include <kiln/nn.h>

#include <cmath>
#include <string>

namespace kiln::nn {

namespace {

// U(-bound, bound), as torch.nn.init.uniform_, marked as a parameter.
Tensor uniform_param(const Shape& shape, double bound, const Options& o) {
  NoGradGuard no_grad;
  Tensor t = rand(shape, o.dtype, o.device) * (2 * bound) - bound;
  return t.requires_grad_();
}

void require_positive(const char* layer, const char* what, int64_t v) {
  if (v <= 0)
    throw Error(std::string("[") + layer + "] " + what + " must be positive, got " +
                std::to_string(v));
}

Tensor affine(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  Tensor y = matmul(x, transpose(weight, 0, 1));
  return bias.defined() ? y + bias : y;
}

// A recurrent cell's weights and biases for `gates` gates: all U(-1/sqrt(H), 1/sqrt(H)), as
// torch.nn.RNNCellBase.
void init_cell(const char* layer, int64_t gates, int64_t input_size, int64_t hidden,
               const Options& o, Tensor& w_ih, Tensor& w_hh, Tensor& b_ih, Tensor& b_hh) {
  require_positive(layer, "input_size", input_size);
  require_positive(layer, "hidden_size", hidden);
  const double bound = 1 / std::sqrt(static_cast<double>(hidden));
  w_ih = uniform_param({gates * hidden, input_size}, bound, o);
  w_hh = uniform_param({gates * hidden, hidden}, bound, o);
  b_ih = uniform_param({gates * hidden}, bound, o);
  b_hh = uniform_param({gates * hidden}, bound, o);
}

ParamList cell_parameters(const std::string& prefix, Tensor& w_ih, Tensor& w_hh, Tensor& b_ih,
                          Tensor& b_hh) {
  return {{prefix + "weight_ih", &w_ih},
          {prefix + "weight_hh", &w_hh},
          {prefix + "bias_ih", &b_ih},
          {prefix + "bias_hh", &b_hh}};
}

} // namespace

ParamList join(const std::vector<ParamList>& lists) {
  ParamList all;
  for (const ParamList& l : lists) all.insert(all.end(), l.begin(), l.end());
  return all;
}

Linear::Linear(int64_t in_features, int64_t out_features, bool with_bias, Options o) {
  require_positive("Linear", "in_features", in_features);
  require_positive("Linear", "out_features", out_features);
  const double bound = 1 / std::sqrt(static_cast<double>(in_features));
  weight = uniform_param({out_features, in_features}, bound, o);
  if (with_bias) bias = uniform_param({out_features}, bound, o);
}

Tensor Linear::operator()(const Tensor& x) const {
  return affine(x, weight, bias);
}

ParamList Linear::parameters(const std::string& prefix) {
  ParamList l{{prefix + "weight", &weight}};
  if (bias.defined()) l.push_back({prefix + "bias", &bias});
  return l;
}

LSTMCell::LSTMCell(int64_t input_size, int64_t hidden, Options o) : hidden_size(hidden) {
  init_cell("LSTMCell", 4, input_size, hidden, o, weight_ih, weight_hh, bias_ih, bias_hh);
}

LSTMCell::State LSTMCell::zero_state(int64_t batch) const {
  Tensor z = zeros({batch, hidden_size}, weight_ih.dtype(), weight_ih.device());
  return {z, z};
}

LSTMCell::State LSTMCell::operator()(const Tensor& x, const State& s) const {
  auto g = chunk(affine(x, weight_ih, bias_ih) + affine(s.h, weight_hh, bias_hh), 4, 1);
  Tensor c = sigmoid(g[1]) * s.c + sigmoid(g[0]) * tanh(g[2]);
  return {sigmoid(g[3]) * tanh(c), c};
}

ParamList LSTMCell::parameters(const std::string& prefix) {
  return cell_parameters(prefix, weight_ih, weight_hh, bias_ih, bias_hh);
}

GRUCell::GRUCell(int64_t input_size, int64_t hidden, Options o) : hidden_size(hidden) {
  init_cell("GRUCell", 3, input_size, hidden, o, weight_ih, weight_hh, bias_ih, bias_hh);
}

Tensor GRUCell::zero_state(int64_t batch) const {
  return zeros({batch, hidden_size}, weight_ih.dtype(), weight_ih.device());
}

Tensor GRUCell::operator()(const Tensor& x, const Tensor& h) const {
  auto gi = chunk(affine(x, weight_ih, bias_ih), 3, 1);
  auto gh = chunk(affine(h, weight_hh, bias_hh), 3, 1);
  Tensor r = sigmoid(gi[0] + gh[0]);
  Tensor z = sigmoid(gi[1] + gh[1]);
  Tensor n = tanh(gi[2] + r * gh[2]);
  return n + z * (h - n); // (1 - z) * n + z * h
}

ParamList GRUCell::parameters(const std::string& prefix) {
  return cell_parameters(prefix, weight_ih, weight_hh, bias_ih, bias_hh);
}

} // namespace kiln::nn
