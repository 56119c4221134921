// kiln::grad on three whole models in f64, for bench/torch/grad_models.py to check against
// PyTorch autograd (not a timing benchmark).
//
// Every input and parameter is built from a closed form, no RNG, so that Python rebuilds the
// same values: element i (row-major) of a tensor is scale * sin(0.37 * i + k), with its own
// offset k and scale (the table in each model below; grad_models.py holds the same table).
// Targets: the MLP's class of row i is i % 3; the LSTM's target at step t for batch row b is
// sin(0.3 * t + b).
//
// Models, with PyTorch's parameter layouts and names:
// - mlp: x [8, 5] -> Linear 5->16 -> tanh -> Linear 16->3 -> log_softmax(dim 1); loss =
//   -sum(log_softmax * onehot) / 8 (the mean negative log likelihood).
// - lstm16: an LSTM cell (gates i, f, g, o; input 3, hidden 6, batch 2) over 16 steps from zero
//   h and c, a Linear 6->1 read-out at every step; loss = mean over steps and batch of
//   (read-out - target)^2.
// - gru: a GRU cell (gates r, z, n; n = tanh(W_in x + b_in + r * (W_hn h + b_hn)); input 4,
//   hidden 5, batch 3) over 8 steps from a closed-form h0; loss = mean of the final h squared.
//
// Prints one JSON object: {"device": "cpu", "models": {"mlp": {"loss": x, "grads": {"fc1.weight":
// [...], ...}}, ...}}, values with 17 significant digits (non-finite ones as NaN / Infinity,
// which Python's json module reads).
//
// Usage: grad_models [--device cpu|cuda] (default: kiln::default_device())
#include <kiln/kiln.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace kiln;

struct Result {
  double loss = 0;
  std::vector<std::pair<std::string, std::vector<double>>> grads; // in parameter order
};

/// Element i of the result is scale * sin(0.37 * i + k) (row-major), in f64 on dev.
Tensor formula(const Shape& shape, double k, double scale, Device dev) {
  std::vector<double> v(static_cast<size_t>(shape.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * std::sin(0.37 * static_cast<double>(i) + k);
  return from_vector(v, shape, dev);
}

struct Param {
  std::string name;
  Tensor value;
};

Param param(std::string name, const Shape& shape, double k, double scale, Device dev) {
  return {std::move(name), formula(shape, k, scale, dev).requires_grad_()};
}

Result differentiate(const Tensor& loss, const std::vector<Param>& params) {
  std::vector<Tensor> inputs;
  for (const Param& p : params) inputs.push_back(p.value);
  std::vector<Tensor> g = grad(loss, inputs);
  eval(g); // one evaluation for all of them
  Result r;
  r.loss = loss.item<double>();
  for (size_t i = 0; i < params.size(); ++i) {
    if (g[i].shape() != params[i].value.shape() || g[i].dtype() != DType::f64)
      throw Error("gradient of " + params[i].name + " has shape " + g[i].shape().str() +
                  ", the parameter " + params[i].value.shape().str());
    r.grads.emplace_back(params[i].name, g[i].to_vector<double>());
  }
  return r;
}

/// x W^T + b, as torch.nn.Linear with weight [out, in] and bias [out].
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  return matmul(x, transpose(w, 0, 1)) + b;
}

/// Row t of a [T, B, F] sequence as [B, F].
Tensor step(const Tensor& xs, int64_t t) {
  return reshape(slice(xs, 0, t, t + 1), {xs.size(1), xs.size(2)});
}

Result mlp(Device dev) {
  const int64_t n = 8, in = 5, hid = 16, classes = 3;
  Tensor x = formula({n, in}, 0.0, 1.0, dev);
  std::vector<Param> p = {
      param("fc1.weight", {hid, in}, 1.0, 0.5, dev),
      param("fc1.bias", {hid}, 2.0, 0.5, dev),
      param("fc2.weight", {classes, hid}, 3.0, 0.5, dev),
      param("fc2.bias", {classes}, 4.0, 0.5, dev),
  };
  std::vector<double> onehot(static_cast<size_t>(n * classes), 0.0);
  for (int64_t i = 0; i < n; ++i) onehot[static_cast<size_t>(i * classes + i % classes)] = 1.0;
  Tensor target = from_vector(onehot, {n, classes}, dev);
  Tensor h = tanh(linear(x, p[0].value, p[1].value));
  Tensor logp = log_softmax(linear(h, p[2].value, p[3].value), 1);
  Tensor loss = -sum(logp * target) / static_cast<double>(n);
  return differentiate(loss, p);
}

Result lstm16(Device dev) {
  const int64_t steps = 16, in = 3, hid = 6, batch = 2;
  Tensor xs = formula({steps, batch, in}, 0.5, 1.0, dev);
  std::vector<Param> p = {
      param("cell.weight_ih", {4 * hid, in}, 1.5, 0.5, dev),
      param("cell.weight_hh", {4 * hid, hid}, 2.5, 0.5, dev),
      param("cell.bias_ih", {4 * hid}, 3.5, 0.5, dev),
      param("cell.bias_hh", {4 * hid}, 4.5, 0.5, dev),
      param("readout.weight", {1, hid}, 5.5, 0.5, dev),
      param("readout.bias", {1}, 6.5, 0.5, dev),
  };
  std::vector<double> y(static_cast<size_t>(steps * batch));
  for (int64_t t = 0; t < steps; ++t)
    for (int64_t b = 0; b < batch; ++b)
      y[static_cast<size_t>(t * batch + b)] =
          std::sin(0.3 * static_cast<double>(t) + static_cast<double>(b));
  Tensor ys = from_vector(y, {steps, batch, 1}, dev);
  Tensor h = zeros({batch, hid}, DType::f64, dev), c = zeros({batch, hid}, DType::f64, dev);
  Tensor sq = zeros({}, DType::f64, dev);
  for (int64_t t = 0; t < steps; ++t) {
    Tensor gates = linear(step(xs, t), p[0].value, p[2].value) + linear(h, p[1].value, p[3].value);
    std::vector<Tensor> g = chunk(gates, 4, 1); // i, f, g, o
    c = sigmoid(g[1]) * c + sigmoid(g[0]) * tanh(g[2]);
    h = sigmoid(g[3]) * tanh(c);
    Tensor err = linear(h, p[4].value, p[5].value) - step(ys, t); // [batch, 1]
    sq = sq + sum(err * err);
  }
  Tensor loss = sq / static_cast<double>(steps * batch);
  return differentiate(loss, p);
}

Result gru(Device dev) {
  const int64_t steps = 8, in = 4, hid = 5, batch = 3;
  Tensor xs = formula({steps, batch, in}, 0.25, 1.0, dev);
  Tensor h = formula({batch, hid}, 0.75, 0.5, dev);
  std::vector<Param> p = {
      param("cell.weight_ih", {3 * hid, in}, 1.25, 0.5, dev),
      param("cell.weight_hh", {3 * hid, hid}, 2.25, 0.5, dev),
      param("cell.bias_ih", {3 * hid}, 3.25, 0.5, dev),
      param("cell.bias_hh", {3 * hid}, 4.25, 0.5, dev),
  };
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<Tensor> gi = chunk(linear(step(xs, t), p[0].value, p[2].value), 3, 1); // r, z, n
    std::vector<Tensor> gh = chunk(linear(h, p[1].value, p[3].value), 3, 1);
    Tensor r = sigmoid(gi[0] + gh[0]);
    Tensor z = sigmoid(gi[1] + gh[1]);
    Tensor n = tanh(gi[2] + r * gh[2]);
    h = (1.0 - z) * n + z * h;
  }
  Tensor loss = mean(h * h);
  return differentiate(loss, p);
}

void print_number(double v) {
  if (std::isnan(v))
    std::fputs("NaN", stdout);
  else if (std::isinf(v))
    std::fputs(v > 0 ? "Infinity" : "-Infinity", stdout);
  else
    std::printf("%.17g", v);
}

int usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [--device cpu|cuda]\n", argv0);
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  Device dev = default_device();
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string value;
    if (a == "--device" && i + 1 < argc)
      value = argv[++i];
    else if (a.rfind("--device=", 0) == 0)
      value = a.substr(std::strlen("--device="));
    else
      return usage(argv[0]);
    if (value == "cpu")
      dev = Device::cpu();
    else if (value == "cuda")
      dev = Device::cuda();
    else
      return usage(argv[0]);
  }
  try {
    if (!is_available(dev)) {
      std::fprintf(stderr, "grad_models: device %s is not available\n", dev.str().c_str());
      return 1;
    }
    const std::pair<const char*, Result (*)(Device)> models[] = {
        {"mlp", mlp}, {"lstm16", lstm16}, {"gru", gru}};
    std::vector<std::pair<const char*, Result>> results;
    for (const auto& [name, run] : models) results.emplace_back(name, run(dev));

    std::printf("{\"device\": \"%s\", \"models\": {", dev.str().c_str());
    for (size_t m = 0; m < results.size(); ++m) {
      const Result& r = results[m].second;
      std::printf("%s\n  \"%s\": {\"loss\": ", m ? "," : "", results[m].first);
      print_number(r.loss);
      std::printf(", \"grads\": {");
      for (size_t g = 0; g < r.grads.size(); ++g) {
        std::printf("%s\n    \"%s\": [", g ? "," : "", r.grads[g].first.c_str());
        const std::vector<double>& v = r.grads[g].second;
        for (size_t i = 0; i < v.size(); ++i) {
          if (i) std::fputs(", ", stdout);
          print_number(v[i]);
        }
        std::printf("]");
      }
      std::printf("}}");
    }
    std::printf("\n}}\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "grad_models: %s\n", e.what());
    return 1;
  }
  return 0;
}
