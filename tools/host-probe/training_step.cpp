// Probe (CPU backend): an LSTM training step (window 64, batch 1) with a tiny hidden size, so
// that the time is the engine's own work (recording, grad, planning, running steps) and the
// plan's structure; KILN_SMALL_MATMUL=all plans as on a GPU. Prints ms per phase and stats().
// Results: bench/results/2026-11-25-cpu-session15.md.
//   g++ -std=c++20 -O2 -Iinclude -Ibuild/generated/include tools/host-probe/training_step.cpp \
//     -Lbuild -lkiln -Wl,-rpath,$PWD/build -o /tmp/probe && KILN_SMALL_MATMUL=all /tmp/probe 4 300
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <kiln/kiln.h>
#include <kiln/nn.h>
#include <kiln/optim.h>
#include <sstream>
using namespace kiln;
static double now() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
int main(int argc, char** argv) {
  const int H = argc > 1 ? std::atoi(argv[1]) : 4, T = 64,
            steps = argc > 2 ? std::atoi(argv[2]) : 200;
  manual_seed(2);
  nn::LSTMCell cell(1, H);
  nn::Linear head(H, 1);
  Tensor seq = randn({T, 1, 1}), target = randn({T, 1, 1});
  eval(seq, target);
  nn::ParamList params = nn::join({cell.parameters(), head.parameters()});
  optim::Adam opt(params, 1e-3);
  double tf = 0, tg = 0, to = 0;
  for (int s = 0; s < steps; ++s) {
    double t0 = now();
    auto state = cell.zero_state(1);
    Tensor loss;
    for (int t = 0; t < T; ++t) {
      state = cell(reshape(slice(seq, 0, t, t + 1), {1, 1}), state);
      Tensor l = nn::mse_loss(head(state.h), reshape(slice(target, 0, t, t + 1), {1, 1}));
      loss = loss.defined() ? loss + l : l;
    }
    loss = loss / float(T);
    double t1 = now();
    auto g = grad(loss, optim::tensors(params));
    double t2 = now();
    opt.step(g);
    double t3 = now();
    if (s >= 20) tf += t1 - t0, tg += t2 - t1, to += t3 - t2;
  }
  kiln::sync();
  const int n = steps - 20;
  std::printf("H=%d: forward %.3f ms, grad %.3f ms, step+flush %.3f ms, total %.3f ms/step\n", H,
              tf / n, tg / n, to / n, (tf + tg + to) / n);
  std::printf("%s\n",
              [] {
                std::ostringstream o;
                o << stats();
                return o.str();
              }()
                  .c_str());
}
