// Planning of the first training step (LSTM over a window of 64, Adam): time and retries.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/optim.h>
using namespace kiln;
int main(int argc, char** argv) {
  const int H = argc > 1 ? std::atoi(argv[1]) : 256, B = argc > 2 ? std::atoi(argv[2]) : 1, T = 64;
  manual_seed(2);
  nn::LSTMCell cell(1, H);
  nn::Linear head(H, 1);
  Tensor seq = randn({T, B, 1}), target = randn({T, B, 1});
  eval(seq, target);
  nn::ParamList params = nn::join({cell.parameters(), head.parameters()});
  optim::Adam opt(params, 1e-3);
  for (int s = 0; s < 2; ++s) {
    reset_stats();
    auto t0 = std::chrono::steady_clock::now();
    auto state = cell.zero_state(B);
    Tensor loss;
    for (int t = 0; t < T; ++t) {
      state = cell(reshape(slice(seq, 0, t, t + 1), {B, 1}), state);
      Tensor l = nn::mse_loss(head(state.h), reshape(slice(target, 0, t, t + 1), {B, 1}));
      loss = loss.defined() ? loss + l : l;
    }
    loss = loss / float(T);
    opt.step(grad(loss, optim::tensors(params)));
    kiln::sync();
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    Stats st = stats();
    std::printf("step %d: %.1f ms, plan misses %lld, retries %lld, kernels %lld\n", s, ms,
                (long long)st.plan_misses, (long long)st.plan_retries, (long long)st.kernels_run);
  }
}
