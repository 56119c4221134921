#pragma once
// Building blocks for models (not a framework): layers that own their parameters and apply
// them, the losses, and named parameter lists for optimizers and checkpoints (kiln/optim.h).
// Layers initialise as PyTorch's do, from kiln's random stream (kiln::manual_seed).
#include <kiln/ops.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace kiln::nn {

/// A parameter by name ("lstm.weight_ih") and the handle a layer keeps it in. Optimizers rebind
/// the handle, so the layer sees each update.
struct NamedParam {
  std::string name;
  Tensor* tensor;
};
using ParamList = std::vector<NamedParam>;
/// The lists one after another (one model made of several layers).
ParamList join(const std::vector<ParamList>& lists);

struct Options {
  DType dtype = DType::f32;
  std::optional<Device> device; // kiln::default_device() when not given
};

/// y = x W^T + b, with W [out, in] and b [out]; W and b ~ U(-1/sqrt(in), 1/sqrt(in)).
struct Linear {
  Linear(int64_t in_features, int64_t out_features, bool bias = true, Options o = {});
  Tensor operator()(const Tensor& x) const;
  ParamList parameters(const std::string& prefix = "");
  Tensor weight, bias;
};

/// torch.nn.LSTMCell: gates i, f, g, o in that order along the 4H rows of the weights; every
/// weight and bias ~ U(-1/sqrt(H), 1/sqrt(H)).
struct LSTMCell {
  struct State {
    Tensor h, c;
  };
  LSTMCell(int64_t input_size, int64_t hidden_size, Options o = {});
  /// Zero state for a batch.
  State zero_state(int64_t batch) const;
  State operator()(const Tensor& x, const State& s) const;
  ParamList parameters(const std::string& prefix = "");
  int64_t hidden_size;
  Tensor weight_ih, weight_hh, bias_ih, bias_hh;
};

/// torch.nn.GRUCell: gates r, z, n; n = tanh(W_in x + b_in + r * (W_hn h + b_hn)).
struct GRUCell {
  GRUCell(int64_t input_size, int64_t hidden_size, Options o = {});
  Tensor zero_state(int64_t batch) const;
  Tensor operator()(const Tensor& x, const Tensor& h) const;
  ParamList parameters(const std::string& prefix = "");
  int64_t hidden_size;
  Tensor weight_ih, weight_hh, bias_ih, bias_hh;
};

/// torch.nn.Embedding: row i of `weight` [num_embeddings, dim] for each index i, which must lie
/// in [0, num_embeddings) (an index out of range is an error when the lookup runs). The weight
/// ~ N(0, 1). Repeated indices accumulate their gradients in the same row.
struct Embedding {
  Embedding(int64_t num_embeddings, int64_t embedding_dim, Options o = {});
  /// An i32/i64 index tensor of any shape -> [index.shape..., embedding_dim].
  Tensor operator()(const Tensor& index) const;
  ParamList parameters(const std::string& prefix = "");
  Tensor weight;
};

/// Mean squared error over all elements (torch.nn.functional.mse_loss).
Tensor mse_loss(const Tensor& prediction, const Tensor& target);
/// Mean over the batch of -log softmax(logits)[target]: logits [N, C], target [N] of integer
/// class indices (torch.nn.functional.cross_entropy). A target outside [0, C) contributes 0.
Tensor cross_entropy(const Tensor& logits, const Tensor& target);

/// Writes the parameters by name to `path` in the safetensors format (readable by the
/// safetensors library, PyTorch, NumPy...), with string metadata. Evaluates them. The file is
/// written to a temporary name and renamed, so a crash never leaves a half-written checkpoint.
void save(const std::string& path, const ParamList& params,
          const std::map<std::string, std::string>& metadata = {});
/// Loads each parameter from the tensor of its name in a safetensors file, onto the parameter's
/// device (shape and dtype must match; names missing from the file are an error) and returns
/// the file's metadata. Loaded parameters keep their requires_grad flag.
std::map<std::string, std::string> load(const std::string& path, const ParamList& params);

} // namespace kiln::nn
