"""PyTorch's first training steps in a fresh process, beside kiln's samples/rnn (issue 19: "the
first training step of samples/rnn"): an LSTM of hidden 256 over windows of 64 steps, batch 32,
a linear read-out, MSE, Adam (fused), f32 with TF32 off; the model of bench/torch/train_torch.py
`lstm32`. The device is initialised first (a tiny op and a sync, timed apart), then the model and
optimizer are built, then each step (zero_grad, forward, backward, Adam, loss.item()) is timed.
Run it once per process: the first steps are what it measures.
Usage: python3 bench/torch/first_train_step_torch.py [lstmcell|cudnn]
"""
import sys
import time

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from train_torch import Lstm  # noqa: E402


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "lstmcell"
    t0 = time.perf_counter()
    torch.zeros(1, device="cuda").add_(1)
    torch.cuda.synchronize()
    init_ms = (time.perf_counter() - t0) * 1e3
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    t0 = time.perf_counter()
    m = Lstm(32, 64, "cuda", cudnn=mode == "cudnn")
    opt = torch.optim.Adam(m.parameters(), lr=1e-3, fused=True)
    torch.cuda.synchronize()
    setup_ms = (time.perf_counter() - t0) * 1e3
    steps = []
    for _ in range(5):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = m(64)
        loss.backward()
        opt.step()
        loss.item()
        steps.append((time.perf_counter() - t0) * 1e3)
    print("| PyTorch %s | %.1f | %.1f | %.1f | %.1f | %.1f |" % (
        mode, init_ms, setup_ms, steps[0], sum(steps), steps[-1]))


if __name__ == "__main__":
    main()
