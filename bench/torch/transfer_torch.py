#!/usr/bin/env python3
"""Host <-> GPU transfers in PyTorch, timed like bench/cuda/transfer_gpu.cpp: GB/s = bytes /
wall time of one transfer (complete when timed), median (min-max) of `reps` after a warm-up.

    python3 bench/torch/transfer_torch.py [--mib 1024] [--reps 5]
"""
import argparse
import statistics
import time

import numpy as np
import torch


def timed(what, nbytes, reps, once):
    once()
    g = []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        once()
        g.append(nbytes / (time.perf_counter_ns() - t0))
    print(f"| {what} | {statistics.median(g):.1f} ({min(g):.1f}-{max(g):.1f}) |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    n = (a.mib << 20) // 4
    nbytes = n * 4
    print(f"# PyTorch host <-> GPU transfers: torch {torch.__version__}, "
          f"{torch.cuda.get_device_name()}, {a.mib} MiB of f32\n")
    print("| transfer | GB/s |\n|---|---:|")
    host = (np.arange(n, dtype=np.float32) % 4099) * 0.25
    dev = torch.empty(n, dtype=torch.float32, device="cuda")
    pinned = torch.from_numpy(host).pin_memory()
    out_pinned = torch.empty(n, dtype=torch.float32).pin_memory()
    out_pageable = torch.empty(n, dtype=torch.float32)
    out_pageable.fill_(-1)  # pages present, as for kiln's copy_to

    def sync_after(f):
        def g():
            f()
            torch.cuda.synchronize()
        return g

    timed("torch.from_numpy(a).cuda() (pageable)", nbytes, a.reps,
          sync_after(lambda: torch.from_numpy(host).cuda()))
    timed("pinned tensor .cuda(non_blocking=True)", nbytes, a.reps,
          sync_after(lambda: pinned.cuda(non_blocking=True)))
    timed("t.cpu() (a new pageable tensor)", nbytes, a.reps, lambda: dev.cpu())
    timed("out.copy_(t) into a pageable tensor", nbytes, a.reps,
          sync_after(lambda: out_pageable.copy_(dev)))
    timed("out.copy_(t, non_blocking=True) into a pinned tensor", nbytes, a.reps,
          sync_after(lambda: out_pinned.copy_(dev, non_blocking=True)))
    dev.copy_(pinned)
    out_pageable.copy_(dev)
    assert torch.equal(out_pageable, torch.from_numpy(host)), "wrong values"


if __name__ == "__main__":
    main()
