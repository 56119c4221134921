// Losses: mse and cross-entropy, as torch.nn.functional's (mean reduction).
#include <kiln/error.h>
#include <kiln/nn.h>

namespace kiln::nn {

namespace {

[[noreturn]] void fail(const char* op, const std::string& what) {
  throw Error(std::string("[") + op + "] " + what);
}

} // namespace

Tensor mse_loss(const Tensor& prediction, const Tensor& target) {
  if (!prediction.defined() || !target.defined()) fail("mse_loss", "an argument is undefined");
  if (prediction.shape() != target.shape())
    fail("mse_loss", "prediction has shape " + prediction.shape().str() + ", target " +
                         target.shape().str() + "; they must match");
  Tensor d = prediction - target;
  return mean(d * d);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target) {
  if (!logits.defined() || !target.defined()) fail("cross_entropy", "an argument is undefined");
  if (logits.ndim() != 2 || target.ndim() != 1 || target.size(0) != logits.size(0))
    fail("cross_entropy", "needs logits [N, C] and target [N], got " + logits.shape().str() +
                              " and " + target.shape().str());
  if (!is_integral(target.dtype()))
    fail("cross_entropy",
         std::string("target must hold integer class indices, got ") + dtype_name(target.dtype()));
  const int64_t classes = logits.size(1);
  // The target's log-probability picked by a comparison with the class index: it fuses into
  // the log_softmax kernel, which reads every logit anyway.
  Tensor hit = eq(unsqueeze(target, 1), arange(classes, target.dtype(), logits.device()));
  Tensor picked = sum(where(hit, log_softmax(logits, 1), 0.0), {1});
  return -mean(picked);
}

} // namespace kiln::nn
