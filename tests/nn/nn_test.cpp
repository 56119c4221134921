// kiln::nn layers and losses against scalar C++ references, and their gradients.
#include "tests/ops/reference.h"

#include <kiln/nn.h>
#include <kiln/optim.h>

#include <cmath>
#include <vector>

using namespace kiln;
using namespace kt;

namespace {

class NN : public OpsTest {};

double sigm(double x) {
  return 1 / (1 + std::exp(-x));
}

// Row-major [rows, cols] matrix times vector.
std::vector<double> matvec(const std::vector<double>& m, const std::vector<double>& v,
                           int64_t rows) {
  const int64_t cols = static_cast<int64_t>(v.size());
  std::vector<double> out(rows, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[r] += m[r * cols + c] * v[c];
  return out;
}

std::vector<double> vals(const Tensor& t) {
  return t.to_vector<double>();
}

TEST_F(NN, LinearIsXWTransposedPlusBiasWithTorchInit) {
  manual_seed(1);
  nn::Linear lin(4, 3);
  EXPECT_EQ(lin.weight.shape(), Shape({3, 4}));
  EXPECT_EQ(lin.bias.shape(), Shape({3}));
  EXPECT_TRUE(lin.weight.requires_grad());
  for (double w : vals(lin.weight)) EXPECT_LE(std::abs(w), 0.5); // 1/sqrt(4)
  Tensor x = from_vector<float>({1, 2, 3, 4}, {1, 4});
  std::vector<double> want = matvec(vals(lin.weight), {1, 2, 3, 4}, 3);
  for (int i = 0; i < 3; ++i) want[i] += vals(lin.bias)[i];
  EXPECT_TRUE(matches(lin(x), {1, 3}, DType::f32, want));
  auto p = lin.parameters("head.");
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].name, "head.weight");
  EXPECT_EQ(p[1].tensor, &lin.bias);
  EXPECT_EQ(nn::Linear(4, 3, false).parameters().size(), 1u);
  EXPECT_KILN_ERROR("[Linear] in_features must be positive, got 0", nn::Linear(0, 3));
}

TEST_F(NN, LstmCellFollowsTorchGateOrder) {
  manual_seed(2);
  const int64_t in = 3, hid = 2;
  nn::LSTMCell cell(in, hid, {DType::f64});
  std::vector<double> x = {0.5, -1, 2}, h = {0.1, -0.2}, c = {0.3, 0.4};
  auto s = cell(from_vector(x, {1, in}), {from_vector(h, {1, hid}), from_vector(c, {1, hid})});
  std::vector<double> gates = matvec(vals(cell.weight_ih), x, 4 * hid);
  std::vector<double> gh = matvec(vals(cell.weight_hh), h, 4 * hid);
  std::vector<double> bi = vals(cell.bias_ih), bh = vals(cell.bias_hh);
  std::vector<double> want_h(hid), want_c(hid);
  for (int64_t j = 0; j < hid; ++j) {
    auto gate = [&](int k) {
      return gates[k * hid + j] + gh[k * hid + j] + bi[k * hid + j] + bh[k * hid + j];
    };
    want_c[j] = sigm(gate(1)) * c[j] + sigm(gate(0)) * std::tanh(gate(2));
    want_h[j] = sigm(gate(3)) * std::tanh(want_c[j]);
  }
  EXPECT_TRUE(matches(s.c, {1, hid}, DType::f64, want_c, Tol{1e-12, 1e-12}));
  EXPECT_TRUE(matches(s.h, {1, hid}, DType::f64, want_h, Tol{1e-12, 1e-12}));
  EXPECT_EQ(cell.parameters("lstm.").size(), 4u);
  EXPECT_EQ(cell.zero_state(5).h.shape(), Shape({5, hid}));
}

TEST_F(NN, GruCellFollowsTorchEquations) {
  manual_seed(3);
  const int64_t in = 2, hid = 3;
  nn::GRUCell cell(in, hid, {DType::f64});
  std::vector<double> x = {0.7, -0.3}, h = {0.2, -0.5, 0.9};
  Tensor out = cell(from_vector(x, {1, in}), from_vector(h, {1, hid}));
  std::vector<double> gi = matvec(vals(cell.weight_ih), x, 3 * hid);
  std::vector<double> gh = matvec(vals(cell.weight_hh), h, 3 * hid);
  std::vector<double> bi = vals(cell.bias_ih), bh = vals(cell.bias_hh);
  std::vector<double> want(hid);
  for (int64_t j = 0; j < hid; ++j) {
    double r = sigm(gi[j] + bi[j] + gh[j] + bh[j]);
    double z = sigm(gi[hid + j] + bi[hid + j] + gh[hid + j] + bh[hid + j]);
    double n =
        std::tanh(gi[2 * hid + j] + bi[2 * hid + j] + r * (gh[2 * hid + j] + bh[2 * hid + j]));
    want[j] = (1 - z) * n + z * h[j];
  }
  EXPECT_TRUE(matches(out, {1, hid}, DType::f64, want, Tol{1e-12, 1e-12}));
}

TEST_F(NN, EmbeddingLooksUpRowsWithTorchInit) {
  manual_seed(3);
  nn::Embedding emb(5, 3);
  EXPECT_EQ(emb.weight.shape(), Shape({5, 3}));
  EXPECT_TRUE(emb.weight.requires_grad());
  const std::vector<double> w = vals(emb.weight);
  double mean = 0;
  for (double v : w) mean += v / 15;
  EXPECT_LT(std::abs(mean), 1.0); // N(0, 1): not U(-1/sqrt(n), ...) nor zeros
  EXPECT_GT(*std::max_element(w.begin(), w.end()) - *std::min_element(w.begin(), w.end()), 0.5);
  // An index of any shape: [2, 2] -> [2, 2, 3], row by row.
  Tensor out = emb(from_vector<int64_t>({4, 0, 4, 2}, {2, 2}));
  std::vector<double> want;
  for (int64_t r : {4, 0, 4, 2})
    for (int c = 0; c < 3; ++c) want.push_back(w[r * 3 + c]);
  EXPECT_TRUE(matches(out, {2, 2, 3}, DType::f32, want));
  EXPECT_TRUE(matches(emb(from_vector<int32_t>({1}, {})), {3}, DType::f32,
                      {w[3], w[4], w[5]})); // a 0-d index gives one row
  auto p = emb.parameters("tok.");
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0].name, "tok.weight");
  EXPECT_EQ(p[0].tensor, &emb.weight);
  EXPECT_KILN_ERROR("[Embedding] embedding_dim must be positive, got 0", nn::Embedding(4, 0));
  EXPECT_KILN_ERROR("[index_select] index 5 is out of range [0, 5)",
                    vals(emb(from_vector<int64_t>({5}))));
}

TEST_F(NN, EmbeddingGradientsOfRepeatedIndicesAccumulate) {
  manual_seed(4);
  nn::Embedding emb(4, 2, {DType::f64});
  Tensor y = emb(from_vector<int64_t>({3, 1, 3, 3}, {2, 2}));
  Tensor weights = from_vector<double>({1, 2, 3, 4, 5, 6, 7, 8}, {2, 2, 2});
  Tensor g = grad(sum(y * weights), {emb.weight})[0];
  // Row 3 is used at positions 0, 2, 3: its gradient is the sum of their weights.
  EXPECT_TRUE(matches(g, {4, 2}, DType::f64, {0, 0, 3, 4, 0, 0, 1 + 5 + 7, 2 + 6 + 8}));
}

TEST_F(NN, EmbeddingTrainingStepReducesTheLoss) {
  manual_seed(5);
  nn::Embedding emb(6, 4);
  nn::Linear head(4, 3);
  auto params = nn::join({emb.parameters("emb."), head.parameters("head.")});
  optim::SGD opt(params, 0.5);
  const Tensor tokens = from_vector<int64_t>({0, 5, 2, 5, 1});
  const Tensor target = from_vector<int64_t>({2, 0, 1, 0, 2});
  std::vector<double> losses;
  for (int step = 0; step < 5; ++step) {
    Tensor loss = nn::cross_entropy(head(emb(tokens)), target);
    losses.push_back(loss.item<double>());
    opt.step(grad(loss, optim::tensors(params)));
  }
  EXPECT_LT(losses.back(), losses.front() * 0.8) << losses.front() << " -> " << losses.back();
}

TEST_F(NN, LossesMatchTorchDefinitions) {
  Tensor p = from_vector<double>({1, 2, 3}), t = from_vector<double>({1.5, 2, 1});
  EXPECT_NEAR(nn::mse_loss(p, t).item<double>(), (0.25 + 0 + 4) / 3, 1e-15);
  Tensor logits = from_vector<double>({1, 2, 3, 0, 0, 5}, {2, 3});
  Tensor target = from_vector<int64_t>({2, 0});
  auto lse = [](double a, double b, double c) {
    return std::log(std::exp(a) + std::exp(b) + std::exp(c));
  };
  const double want = ((lse(1, 2, 3) - 3) + (lse(0, 0, 5) - 0)) / 2;
  Tensor l = logits.detach().requires_grad_();
  Tensor loss = nn::cross_entropy(l, target);
  EXPECT_NEAR(loss.item<double>(), want, 1e-12);
  // d/dlogits = (softmax - onehot) / N
  std::vector<double> g = vals(grad(loss, {l})[0]), sm = vals(softmax(logits, 1));
  std::vector<double> onehot = {0, 0, 1, 1, 0, 0};
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(g[i], (sm[i] - onehot[i]) / 2, 1e-12) << i;
  EXPECT_KILN_ERROR("[cross_entropy] target must hold integer class indices, got f64",
                    nn::cross_entropy(logits, from_vector<double>({1, 0})));
  EXPECT_KILN_ERROR("[cross_entropy] needs logits [N, C] and target [N], got (2, 3) and (3,)",
                    nn::cross_entropy(logits, from_vector<int64_t>({1, 0, 1})));
  EXPECT_KILN_ERROR("[mse_loss] prediction has shape (3,), target (2,)",
                    nn::mse_loss(p, from_vector<double>({1, 2})));
}

} // namespace
