// nn::save / nn::load: the safetensors layout byte for byte, round trips of every dtype,
// resuming an optimizer exactly, and damaged or mismatched files.
#include "tests/ops/reference.h"

#include <kiln/optim.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

using namespace kiln;
using namespace kt;

namespace {

class Checkpoint : public OpsTest {
protected:
  std::string path(const std::string& name) {
    auto dir = std::filesystem::temp_directory_path() / ("kiln-ckpt-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    dirs_.push_back(dir);
    return (dir / name).string();
  }
  void TearDown() override {
    for (auto& d : dirs_) std::filesystem::remove_all(d);
    OpsTest::TearDown();
  }
  std::vector<std::filesystem::path> dirs_;
};

std::string bytes_of(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_bytes(const std::string& p, const std::string& b) {
  std::ofstream(p, std::ios::binary) << b;
}

TEST_F(Checkpoint, WritesTheSafetensorsLayout) {
  Tensor x = from_vector<float>({1, 2});
  const std::string p = path("one.safetensors");
  nn::save(p, {{"x", &x}}, {{"step", "7"}});
  const std::string json =
      R"({"__metadata__":{"step":"7"},"x":{"data_offsets":[0,8],"dtype":"F32","shape":[2]}})";
  std::string header = json + std::string((8 - json.size() % 8) % 8, ' ');
  std::string want(8, '\0');
  want[0] = static_cast<char>(header.size());
  want += header;
  const float values[2] = {1, 2};
  want.append(reinterpret_cast<const char*>(values), sizeof values);
  EXPECT_EQ(bytes_of(p), want);
}

TEST_F(Checkpoint, RoundTripsEveryDtypeAndTheMetadata) {
  Tensor a = randn({3, 4}).requires_grad_(), b = randn({5}, DType::f64),
         c = randn({2, 2}, DType::f16), d = randn({3}, DType::bf16), e = arange(6).reshape({2, 3}),
         f = arange(4, DType::i32), g = from_vector<bool>({true, false, true});
  nn::ParamList params{{"a", &a}, {"b", &b}, {"c", &c}, {"d", &d}, {"e", &e}, {"f", &f}, {"g", &g}};
  std::vector<std::vector<double>> before;
  for (auto& p : params) before.push_back(p.tensor->to_vector<double>());
  const std::string p = path("all.safetensors");
  nn::save(p, params, {{"hidden", "256"}, {"note", "x"}});
  for (auto& q : params) *q.tensor = zeros_like(*q.tensor);
  a.requires_grad_();
  auto meta = nn::load(p, params);
  EXPECT_EQ(meta, (std::map<std::string, std::string>{{"hidden", "256"}, {"note", "x"}}));
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_EQ(params[i].tensor->to_vector<double>(), before[i]) << params[i].name;
  EXPECT_TRUE(a.requires_grad());
  EXPECT_EQ(a.device(), kt::test_device());
}

// Adam's moments and step count saved beside the parameters: a resumed run continues exactly.
TEST_F(Checkpoint, ResumedTrainingContinuesBitForBit) {
  auto make = [](nn::Linear& lin) {
    manual_seed(4);
    lin = nn::Linear(3, 2);
  };
  Tensor x = from_vector<float>({0.5f, -1, 2, 1, 0, -0.5f}, {2, 3});
  auto train = [&](nn::Linear& lin, optim::Adam& opt, int steps) {
    for (int s = 0; s < steps; ++s) {
      Tensor loss = sum(tanh(lin(x)) * tanh(lin(x)));
      opt.step(grad(loss, optim::tensors(lin.parameters())));
    }
  };
  nn::Linear one(1, 1), two(1, 1);
  make(one);
  optim::Adam opt1(one.parameters(), 0.1);
  train(one, opt1, 3);
  const std::string p = path("resume.safetensors");
  nn::save(p, nn::join({one.parameters(), opt1.state()}), {{"step", "3"}});
  train(one, opt1, 2);

  make(two);
  optim::Adam opt2(two.parameters(), 0.1);
  auto meta = nn::load(p, nn::join({two.parameters(), opt2.state()}));
  opt2.set_steps(std::stoll(meta.at("step")));
  train(two, opt2, 2);
  EXPECT_EQ(one.weight.to_vector<float>(), two.weight.to_vector<float>());
  EXPECT_EQ(one.bias.to_vector<float>(), two.bias.to_vector<float>());
}

TEST_F(Checkpoint, BadFilesAndMismatchesThrowAndChangeNothing) {
  Tensor w = from_vector<float>({1, 2, 3});
  Tensor v = from_vector<float>({4, 5});
  const std::string p = path("w.safetensors");
  nn::save(p, {{"w", &w}});
  Tensor other = zeros({3});
  nn::ParamList wrong_shape{{"w", &v}}, missing{{"w", &other}, {"u", &v}};
  EXPECT_KILN_ERROR("tensor 'w' is f32 (3,), the parameter f32 (2,)", nn::load(p, wrong_shape));
  EXPECT_KILN_ERROR("has no tensor named 'u'", nn::load(p, missing));
  EXPECT_EQ(other.to_vector<float>(), (std::vector<float>{0, 0, 0})) << "nothing applied";
  std::string b = bytes_of(p);
  write_bytes(p, b.substr(0, b.size() - 4));
  EXPECT_KILN_ERROR("do not hold 12 bytes within the 8-byte data", nn::load(p, {{"w", &w}}));
  write_bytes(p, b.substr(0, 5));
  EXPECT_KILN_ERROR("too short for a safetensors file", nn::load(p, {{"w", &w}}));
  std::string long_header = b;
  long_header[6] = 1;
  write_bytes(p, long_header);
  EXPECT_KILN_ERROR("runs past the end of the file", nn::load(p, {{"w", &w}}));
  std::string garbled = b;
  garbled[9] = '#';
  write_bytes(p, garbled);
  EXPECT_KILN_ERROR("the header is not a JSON object", nn::load(p, {{"w", &w}}));
  EXPECT_KILN_ERROR("No such file or directory", nn::load(path("none.safetensors"), {{"w", &w}}));
  EXPECT_KILN_ERROR("the name 'w' is used twice", nn::save(p, {{"w", &w}, {"w", &v}}));
}

} // namespace
