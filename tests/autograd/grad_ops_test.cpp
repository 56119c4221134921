// Every differentiable op's gradient against central finite differences in f64, on random
// inputs (broadcast shapes, non-contiguous views, every reduction and matmul form), on the test
// device.
#include "tests/autograd/gradcheck.h"

using namespace kiln;
using namespace kt;
using namespace kt_grad;

namespace {

struct GradCase {
  std::string name;
  Fn f;
  std::vector<Shape> shapes;
  double lo = -2, hi = 2, away = 0; // input domain (see kt_grad::input)
};

std::ostream& operator<<(std::ostream& os, const GradCase& c) {
  return os << c.name;
}

GradCase unary(std::string name, Tensor (*op)(const Tensor&), double lo = -2, double hi = 2,
               double away = 0) {
  return {std::move(name), [op](const auto& x) { return op(x[0]); }, {{3, 4}}, lo, hi, away};
}

GradCase binary(std::string name, Tensor (*op)(const Tensor&, const Tensor&), double lo = -2,
                double hi = 2, double away = 0) {
  return {std::move(name),
          [op](const auto& x) { return op(x[0], x[1]); },
          {{3, 1, 4}, {2, 4}},
          lo,
          hi,
          away};
}

std::vector<GradCase> elementwise_cases() {
  return {
      unary("neg", neg),
      unary("abs", abs, -2, 2, 0.1),
      unary("relu", relu, -2, 2, 0.1),
      unary("exp", exp),
      unary("log", log, 0.1, 3),
      unary("log1p", log1p, -0.5, 3),
      unary("sqrt", sqrt, 0.1, 3),
      unary("rsqrt", rsqrt, 0.1, 3),
      unary("sin", sin),
      unary("cos", cos),
      unary("tanh", tanh),
      unary("sigmoid", sigmoid),
      unary("gelu", gelu),
      binary("add", add),
      binary("sub", sub),
      binary("mul", mul),
      binary("div", div, -2, 2, 0.3),
      binary("pow", pow, 0.2, 2),
      binary("maximum", maximum),
      binary("minimum", minimum),
      {"square_by_mul", [](const auto& x) { return x[0] * x[0]; }, {{5}}},
      {"scalar_ops",
       [](const auto& x) { return (2.5 - x[0]) * 1.5 + 3.0 / x[0] - x[0] / 4.0; },
       {{2, 3}},
       -2,
       2,
       0.3},
      {"pow_scalar", [](const auto& x) { return pow(x[0], 3.0) + pow(x[0], 2); }, {{4}}, 0.2, 2},
      {"maximum_scalar",
       [](const auto& x) { return maximum(x[0], 0.3) + minimum(x[0], -0.2); },
       {{6}}},
      {"clamp_scalars", [](const auto& x) { return clamp(x[0], -0.5, 0.5); }, {{8}}},
      {"clamp_tensors", [](const auto& x) { return clamp(x[0], x[1], x[1] + 1.0); }, {{2, 4}, {4}}},
      {"where_broadcast",
       [](const auto& x) { return where(x[2] > 0, x[0], x[1]); },
       {{3, 1}, {1, 4}, {3, 4}}},
      {"where_scalar",
       [](const auto& x) { return where(x[0] > 0, x[0] * 2.0, 0.5); },
       {{6}},
       -2,
       2,
       0.1},
      {"cast_roundtrip_f64", [](const auto& x) { return cast(x[0], DType::f64) * 2.0; }, {{3}}},
  };
}

std::vector<GradCase> structure_cases() {
  return {
      {"reshape",
       [](const auto& x) {
         return reshape(x[0], {4, 3}) * x[1];
       },
       {{3, 4}, {4, 3}}},
      {"transpose_noncontiguous",
       [](const auto& x) { return transpose(x[0], 0, 1) * x[1]; },
       {{3, 4}, {4, 3}}},
      {"permute",
       [](const auto& x) {
         return exp(permute(x[0], {2, 0, 1}));
       },
       {{2, 3, 4}}},
      {"slice", [](const auto& x) { return slice(x[0], 1, 1, 3) * 2.0; }, {{3, 5}}},
      {"slice_step2", [](const auto& x) { return tanh(slice(x[0], 1, 1, 6, 2)); }, {{2, 7}}},
      {"slice_step3_to_end", [](const auto& x) { return slice(x[0], 0, 2, 100, 3); }, {{10, 2}}},
      {"expand",
       [](const auto& x) {
         return expand(x[0], {2, 3, 4}) * x[1];
       },
       {{3, 1}, {2, 3, 4}}},
      {"unsqueeze_squeeze",
       [](const auto& x) { return squeeze(unsqueeze(x[0], 1) * x[0]); },
       {{4}}},
      {"chunk",
       [](const auto& x) { return chunk(x[0], 3, 1)[1] * chunk(x[0], 3, 1)[2]; },
       {{2, 6}}},
      {"split_sizes",
       [](const auto& x) {
         return split(x[0], {1, 3}, 0)[1];
       },
       {{4, 2}}},
      {"contiguous_of_view",
       [](const auto& x) { return contiguous(transpose(x[0], 0, 1)); },
       {{2, 3}}},
      {"concat",
       [](const auto& x) {
         return concat({x[0], x[1] * 2.0, x[2]}, 1);
       },
       {{2, 1}, {2, 3}, {2, 2}}},
      {"stack",
       [](const auto& x) {
         return stack({x[0], sin(x[1])}, 1);
       },
       {{3, 2}, {3, 2}}},
      {"view_of_leaf_view",
       [](const auto& x) { return slice(transpose(x[0], 0, 1), 0, 1, 3); },
       {{3, 4}}},
  };
}

std::vector<GradCase> reduction_cases() {
  return {
      {"sum_all", [](const auto& x) { return sum(x[0]); }, {{3, 4}}},
      {"sum_axes",
       [](const auto& x) {
         return sum(x[0], {0, 2});
       },
       {{2, 3, 4}}},
      {"sum_keepdim", [](const auto& x) { return sum(x[0], {1}, true) * x[0]; }, {{2, 3}}},
      {"mean_axes", [](const auto& x) { return mean(x[0], {1}); }, {{2, 5, 2}}},
      {"max_axis", [](const auto& x) { return max(x[0], {1}); }, {{3, 4}}},
      {"min_all_keepdim", [](const auto& x) { return min(x[0], {}, true); }, {{3, 4}}},
      {"var", [](const auto& x) { return var(x[0], {1}); }, {{3, 5}}},
      {"stddev_biased", [](const auto& x) { return stddev(x[0], {0}, 0); }, {{4, 3}}},
      {"softmax", [](const auto& x) { return softmax(x[0], -1); }, {{3, 5}}},
      {"log_softmax_axis0", [](const auto& x) { return log_softmax(x[0], 0); }, {{4, 3}}},
      {"layer_norm",
       [](const auto& x) { return layer_norm(x[0], x[1], x[2]); },
       {{3, 6}, {6}, {6}}},
      {"layer_norm_plain", [](const auto& x) { return layer_norm(x[0]); }, {{2, 5}}},
  };
}

std::vector<GradCase> matmul_cases() {
  auto mm = [](const auto& x) { return matmul(x[0], x[1]); };
  return {
      {"mm", mm, {{3, 4}, {4, 5}}},
      {"vector_matrix", mm, {{4}, {4, 5}}},
      {"matrix_vector", mm, {{3, 4}, {4}}},
      {"dot", mm, {{4}, {4}}},
      {"batched_broadcast", mm, {{2, 1, 3, 4}, {5, 4, 2}}},
      {"transposed_operand",
       [](const auto& x) { return matmul(transpose(x[0], 0, 1), x[1]); },
       {{4, 3}, {4, 2}}},
      {"chain",
       [](const auto& x) { return tanh(matmul(tanh(matmul(x[0], x[1])), x[2])); },
       {{2, 3}, {3, 4}, {4, 2}}},
  };
}

// Index tensors (no gradient) with repeated entries: their gradients must accumulate.
Tensor idx(std::vector<int64_t> v, const Shape& s, DType t = DType::i64) {
  return from_vector(v, s).astype(t);
}

std::vector<GradCase> index_cases() {
  return {
      {"index_select_duplicates",
       [](const auto& x) {
         return index_select(x[0], 0, idx({2, 0, 2, 3}, {4})) * 1.5;
       },
       {{4, 3}}},
      {"index_select_negative_dim_i32",
       [](const auto& x) {
         return tanh(index_select(x[0], -1, idx({1, 1, 0}, {3}, DType::i32)));
       },
       {{2, 3}}},
      {"gather_duplicates",
       [](const auto& x) {
         return gather(x[0], 1, idx({0, 3, 3, 1, 2, 2, 2, 0, 1, 1}, {2, 5}));
       },
       {{3, 4}}},
      {"gather_transposed_input",
       [](const auto& x) {
         return gather(transpose(x[0], 0, 1), 0, idx({2, 0, 0, 1}, {2, 2}));
       },
       {{2, 3}}},
      {"scatter_add_duplicates_larger_src",
       [](const auto& x) {
         return scatter_add(x[0], 0, idx({1, 1, 0, 2, 1, 1, 1, 0}, {2, 4}), x[1]) * x[0];
       },
       {{3, 4}, {3, 5}}},
      {"scatter_add_last_dim_i32",
       [](const auto& x) {
         return sin(scatter_add(x[0], -1, idx({0, 0, 2, 1, 1, 1}, {2, 3}, DType::i32), x[1]));
       },
       {{2, 3}, {2, 3}}},
  };
}

class GradOps : public OpsTestP<GradCase> {};

TEST_P(GradOps, MatchesFiniteDifferences) {
  const GradCase& c = GetParam();
  manual_seed(42);
  std::vector<Tensor> xs;
  for (const Shape& s : c.shapes) xs.push_back(input(s, c.lo, c.hi, c.away));
  EXPECT_TRUE(matches_finite_differences(c.f, xs));
}

std::string case_name(const ::testing::TestParamInfo<GradCase>& info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(Elementwise, GradOps, ::testing::ValuesIn(elementwise_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Structure, GradOps, ::testing::ValuesIn(structure_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Reduction, GradOps, ::testing::ValuesIn(reduction_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Matmul, GradOps, ::testing::ValuesIn(matmul_cases()), case_name);
INSTANTIATE_TEST_SUITE_P(Index, GradOps, ::testing::ValuesIn(index_cases()), case_name);

} // namespace
