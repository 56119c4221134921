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
    overlap(host, pinned, a.reps)


def timed_ms(reps, once):
    once()
    ms = []
    for _ in range(reps):
        t0 = time.perf_counter_ns()
        once()
        ms.append((time.perf_counter_ns() - t0) / 1e6)
    return ms


def overlap(host, pinned, reps):
    """The same pairs as transfer_gpu's overlap(): an f32 matmul (TF32 off) of about the copy's
    duration, then the copy, then one sync; the copy on the current stream (what a user writes
    first) and on a side stream joined with wait_stream (what overlaps)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    d = 8192
    a = torch.randn(d, d, device="cuda") / 90
    side = torch.cuda.Stream()
    out = {}

    def kernel():
        out["m"] = a @ a
        torch.cuda.synchronize()

    def copy():
        out["t"] = pinned.to("cuda", non_blocking=True)
        torch.cuda.synchronize()

    def pair_same_stream():
        out["m"] = a @ a
        out["t"] = pinned.to("cuda", non_blocking=True)
        torch.cuda.synchronize()

    def pair_side_stream():
        out["m"] = a @ a
        with torch.cuda.stream(side):
            t = pinned.to("cuda", non_blocking=True)
        torch.cuda.current_stream().wait_stream(side)
        t.record_stream(torch.cuda.current_stream())
        out["t"] = t
        torch.cuda.synchronize()

    def pageable_pair_side_stream():
        out["m"] = a @ a
        with torch.cuda.stream(side):
            t = torch.from_numpy(host).to("cuda", non_blocking=True)
        torch.cuda.current_stream().wait_stream(side)
        t.record_stream(torch.cuda.current_stream())
        out["t"] = t
        torch.cuda.synchronize()

    dev = torch.from_numpy(host).cuda()
    down = torch.empty(dev.shape, dtype=dev.dtype).pin_memory()

    def download():
        down.copy_(dev, non_blocking=True)
        torch.cuda.synchronize()

    def download_side_then_matmul():
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            down.copy_(dev, non_blocking=True)
        out["m"] = a @ a
        torch.cuda.synchronize()

    def download_then_matmul_one_stream():
        down.copy_(dev, non_blocking=True)
        out["m"] = a @ a
        torch.cuda.synchronize()

    print(f"\n- overlap: an f32 matmul ({d}^2, TF32 off) and the copy, then one sync; ms, median "
          f"(min-max) of {reps} after a warm-up\n\n| work | ms |\n|---|---:|")
    rows = [("matmul alone", kernel), ("pinned .to(cuda, non_blocking) alone", copy),
            ("matmul, then pinned copy, one stream", pair_same_stream),
            ("matmul, then pinned copy on a side stream", pair_side_stream),
            ("matmul, then pageable copy on a side stream", pageable_pair_side_stream),
            ("GPU -> pinned copy_(non_blocking) alone", download),
            ("download, then matmul, one stream", download_then_matmul_one_stream),
            ("download on a side stream, then matmul", download_side_then_matmul)]
    for what, f in rows:
        ms = timed_ms(reps, f)
        print(f"| {what} | {statistics.median(ms):.2f} ({min(ms):.2f}-{max(ms):.2f}) |")
    assert torch.equal(out["t"].cpu(), torch.from_numpy(host)), "wrong values"
    assert torch.equal(down, torch.from_numpy(host)), "wrong values (download)"


if __name__ == "__main__":
    main()
