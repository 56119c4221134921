"""PyTorch on the training steps of bench/train_rnn.cpp, on the same machine and in the same
device call: forward over a window, backward, Adam (lr 1e-3), f32 with TF32 off.

Models (the same math as train_rnn):
  seed    W [64, 64], b [64]; x <- sigmoid(tanh(x @ W + b) * 0.5 + x) - 0.5 over the window from
          a fixed x0 [64, 64]; loss = mean(x_T^2)
  lstm1   nn.LSTMCell(1, 256) + nn.Linear(256, 1) read-out at every step, MSE against the next
  lstm32  value of a sine series, batch 1 / 32, from a zero state; loss = mean over the steps

Modes (GPU ones use Adam(fused=True), the fastest torch.optim offers, except `cudagraph`,
which needs capturable=True):
  cpu              eager on the CPU (Adam foreach)
  eager            eager on the GPU
  compile          torch.compile(step's forward + loss), default mode; backward by AOTAutograd
  reduce-overhead  the same with mode="reduce-overhead" (CUDA graphs)
  cudagraph        the whole training step (forward, backward, Adam) captured by hand with
                   torch.cuda.CUDAGraph and replayed
  cudnn            (lstm only) nn.LSTM (cuDNN) over the window in one call, same read-out/loss

Timed as train_rnn times kiln: after warm-up, a loop of --steps training steps with no sync,
then loss.item(); median (min-max) over --reps loops, ms per step. Peak memory is
torch.cuda.max_memory_allocated over the mode (the CPU: not measured).
Usage: python3 bench/torch/train_torch.py [--steps 100] [--reps 5] [--window 64]
       [--models seed,lstm1,lstm32] [--modes cpu,eager,compile,reduce-overhead,cudagraph,cudnn]
"""
import argparse
import math
import statistics
import time

import torch
import torch.nn as nn


class Seed(nn.Module):
    def __init__(self, device):
        super().__init__()
        g = torch.Generator().manual_seed(1)
        self.w = nn.Parameter((torch.randn(64, 64, generator=g) / 8).to(device))
        self.b = nn.Parameter((torch.randn(64, generator=g) * 0.1).to(device))
        self.register_buffer("x0", torch.randn(64, 64, generator=g).to(device))

    def forward(self, window):
        x = self.x0
        for _ in range(window):
            y = torch.tanh(x @ self.w + self.b) * 0.5 + x
            x = torch.sigmoid(y) - 0.5
        return (x * x).mean()


class Lstm(nn.Module):
    def __init__(self, batch, window, device, cudnn=False):
        super().__init__()
        torch.manual_seed(2)
        self.cudnn = cudnn
        self.cell = nn.LSTM(1, 256) if cudnn else nn.LSTMCell(1, 256)
        self.head = nn.Linear(256, 1)
        s = torch.sin(0.05 * torch.arange((window + 1) * batch, dtype=torch.float32)) * 0.8
        s = s.reshape(window + 1, batch, 1)
        self.register_buffer("seq", s[:window].contiguous())
        self.register_buffer("target", s[1:].contiguous())
        self.batch = batch
        self.to(device)

    def forward(self, window):
        if self.cudnn:
            out, _ = self.cell(self.seq)
            return ((self.head(out) - self.target) ** 2).mean()
        h = torch.zeros(self.batch, 256, device=self.seq.device)
        c = torch.zeros_like(h)
        loss = 0
        for t in range(window):
            h, c = self.cell(self.seq[t], (h, c))
            loss = loss + ((self.head(h) - self.target[t]) ** 2).mean()
        return loss / window


def make(model, mode, window):
    device = "cpu" if mode == "cpu" else "cuda"
    if model == "seed":
        return Seed(device)
    return Lstm(1 if model == "lstm1" else 32, window, device, cudnn=mode == "cudnn")


def trainer(m, mode, window):
    """Returns step() -> loss tensor (not synced)."""
    gpu = mode != "cpu"
    if mode == "cudagraph":
        opt = torch.optim.Adam(m.parameters(), lr=1e-3, capturable=True)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):  # warm-up on a side stream, as the CUDA graph docs require
                opt.zero_grad(set_to_none=True)
                loss = m(window)
                loss.backward()
                opt.step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        # None before capture: backward inside the graph then writes fresh gradients from the
        # graph's pool at every replay instead of accumulating into the old ones.
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(g):
            static_loss = m(window)
            static_loss.backward()
            opt.step()

        def step():
            g.replay()
            return static_loss

        return step
    opt = torch.optim.Adam(m.parameters(), lr=1e-3, fused=gpu or None)
    fwd = m
    if mode in ("compile", "reduce-overhead"):
        fwd = torch.compile(m, mode=None if mode == "compile" else mode)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = fwd(window)
        loss.backward()
        opt.step()
        return loss.detach()

    return step


def run(model, mode, a):
    m = make(model, mode, a.window)
    t0 = time.perf_counter()
    step = trainer(m, mode, a.window)
    for _ in range(10):
        loss = step()
    first = loss.item()
    setup = time.perf_counter() - t0
    if mode != "cpu":
        torch.cuda.reset_peak_memory_stats()
    per = []
    for _ in range(a.reps):
        t = time.perf_counter()
        for _ in range(a.steps):
            loss = step()
        last = loss.item()
        per.append((time.perf_counter() - t) * 1e3 / a.steps)
    peak = torch.cuda.max_memory_allocated() / 1e6 if mode != "cpu" else float("nan")
    print(f"| {model} | {mode} | {statistics.median(per):.3f} ({min(per):.3f}-{max(per):.3f}) | "
          f"{peak:.1f} | {setup:.1f} | {first:.4g} -> {last:.4g} |", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--window", type=int, default=64)
    p.add_argument("--models", default="seed,lstm1,lstm32")
    p.add_argument("--modes", default="cpu,eager,compile,reduce-overhead,cudagraph,cudnn")
    p.add_argument("--compile-budget", type=float, default=300,
                   help="seconds of torch.compile warm-up after which compile modes are skipped")
    a = p.parse_args()
    compile_spent = 0.0
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    print(f"# train_torch: torch {torch.__version__}, GPU {gpu}, window {a.window}, "
          f"{a.steps} steps per loop, median (min-max) of {a.reps} loops after 10 warm-up steps\n")
    print("| model | mode | ms/step | peak MB | warm-up s | loss first -> last |")
    print("|---|---|---|---|---|---|")
    for model in a.models.split(","):
        for mode in a.modes.split(","):
            if mode == "cudnn" and model == "seed":
                continue
            if mode != "cpu" and not torch.cuda.is_available():
                continue
            steps = a.steps
            if mode == "cpu":  # the CPU is slow at batch 32: fewer steps, same reps
                a.steps = max(5, a.steps // 10)
            if mode in ("compile", "reduce-overhead") and compile_spent > a.compile_budget:
                print(f"| {model} | {mode} | skipped: --compile-budget spent | | | |")
                continue
            t0 = time.perf_counter()
            try:
                run(model, mode, a)
            except Exception as e:  # report and go on: one failing mode must not hide others
                print(f"| {model} | {mode} | failed: {type(e).__name__}: {str(e)[:120]} | | | |")
            a.steps = steps
            if mode in ("compile", "reduce-overhead"):
                compile_spent += time.perf_counter() - t0


if __name__ == "__main__":
    main()
