// Embedding: a lookup table of rows, as torch.nn.Embedding (no padding_idx, max_norm or sparse
// gradients). The lookup is an index_select, whose gradient adds each row's gradients in index
// order (deterministic on every device).
#include <kiln/autograd.h>
#include <kiln/error.h>
#include <kiln/nn.h>

#include <string>

namespace kiln::nn {

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, Options o) {
  for (auto [what, v] :
       {std::pair{"num_embeddings", num_embeddings}, std::pair{"embedding_dim", embedding_dim}})
    if (v <= 0)
      throw Error(std::string("[Embedding] ") + what + " must be positive, got " +
                  std::to_string(v));
  NoGradGuard no_grad;
  weight = randn({num_embeddings, embedding_dim}, o.dtype, o.device).requires_grad_(); // N(0, 1)
}

Tensor Embedding::operator()(const Tensor& index) const {
  Shape out = index.shape();
  out.push_back(weight.shape()[1]);
  return reshape(index_select(weight, 0, reshape(index, {-1})), out);
}

ParamList Embedding::parameters(const std::string& prefix) {
  return {{prefix + "weight", &weight}};
}

} // namespace kiln::nn
