#!/usr/bin/env python3
"""Cold start in PyTorch eager, timed like bench/cuda/first_steps.cpp: in a fresh process, the
device's initialisation (one tiny op and a sync), then the seeds' loop (d = 64) with a sync
after every step for 1 s of wall time; the first step, the first 5, and when the loop reached
full speed (the first 10-step window within 1.5x of the last 100 steps' median).

    python3 bench/torch/first_steps_torch.py [--d 64]
"""
import argparse
import statistics
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", type=int, default=64)
    a = ap.parse_args()
    start = time.perf_counter_ns()
    torch.ones(1, device="cuda")
    torch.cuda.synchronize()
    init_ms = (time.perf_counter_ns() - start) / 1e6
    torch.backends.cuda.matmul.allow_tf32 = False
    g = torch.Generator().manual_seed(1)
    x = torch.randn(a.d, a.d, generator=g).cuda()
    w = (torch.randn(a.d, a.d, generator=g) / a.d ** 0.5).cuda()
    b = (torch.randn(a.d, generator=g) * 0.1).cuda()
    torch.cuda.synchronize()
    t0 = t = time.perf_counter_ns()
    steps = []
    while t - t0 < 1e9:
        y = x @ w
        y = torch.tanh(y + b) * 0.5 + x
        x = torch.sigmoid(y) - 0.5
        torch.cuda.synchronize()
        now = time.perf_counter_ns()
        steps.append((now - t) / 1e3)
        t = now
    steady = statistics.median(steps[-100:])
    full = next((i for i in range(len(steps) - 9)
                 if statistics.median(steps[i:i + 10]) <= 1.5 * steady), len(steps))
    print(f"# first steps in a fresh process (PyTorch {torch.__version__} eager, "
          f"{torch.cuda.get_device_name()})\n")
    print("| d | device init ms | first step ms | first 5 steps ms | full speed after ms (steps) "
          "| steady us/step |\n|---:|---:|---:|---:|---:|---:|")
    print(f"| {a.d} | {init_ms:.1f} | {steps[0] / 1e3:.2f} | {sum(steps[:5]) / 1e3:.2f} | "
          f"{sum(steps[:full]) / 1e3:.1f} ({full}) | {steady:.1f} |")


if __name__ == "__main__":
    main()
