"""PyTorch eager and torch.compile on the cases of bench/cuda/fusion_gpu.cpp, on the same GPU.

Timed with CUDA events after warm-up; median (min-max) of 20 runs. Prints a markdown table.
Usage: python3 bench/torch/fusion_torch.py
"""
import statistics
import sys

import torch
import torch.nn.functional as F


def time_us(fn, reps=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return statistics.median(times), min(times), max(times)


def cell(t):
    """A (median, min, max) timing as two table cells."""
    return f"{t[0]:.1f} | {t[1]:.1f}-{t[2]:.1f}"


def main():
    dev = torch.device("cuda")
    torch.manual_seed(0)
    src = torch.empty(1 << 28, dtype=torch.float32, device=dev).fill_(1)
    dst = torch.empty_like(src)
    copy_us = time_us(lambda: dst.copy_(src))[0]
    copy = 2 * src.numel() * 4 / (copy_us * 1e3)
    print(f"# PyTorch {torch.__version__} on {torch.cuda.get_device_name()}")
    print(f"\ndevice-to-device copy of 1 GiB: {copy:.0f} GB/s (read + write)\n")
    print("| case | eager us | min-max | eager % of copy | torch.compile us | min-max "
          "| compile % of copy |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    cases = []
    for dt in (torch.float32, torch.bfloat16):
        x = torch.randn(8192, 8192, device=dev, dtype=dt)
        w = torch.randn(8192, device=dev, dtype=dt)
        b = torch.randn(8192, device=dev, dtype=dt)
        nb = 2 * x.numel() * x.element_size()
        name = str(dt).replace("torch.", "")
        cases.append((f"softmax rows 8192x8192 {name}", nb, lambda x=x: torch.softmax(x, 1)))
        cases.append((f"log_softmax rows 8192x8192 {name}", nb, lambda x=x: torch.log_softmax(x, 1)))
        cases.append((f"layer_norm rows 8192x8192 {name} (weight, bias)", nb,
                      lambda x=x, w=w, b=b: F.layer_norm(x, (8192,), w, b)))
    m = torch.randn(16384, 16384, device=dev)
    nb = m.numel() * 4
    cases.append(("transpose materialized 16384x16384 f32", 2 * nb, lambda: m.t().contiguous()))
    cases.append(("sum over the last axis 16384x16384 f32", nb, lambda: m.sum(1)))
    cases.append(("sum over the first axis 16384x16384 f32", nb, lambda: m.sum(0)))
    cases.append(("x - mean(x, 0) 16384x16384 f32", 2 * nb, lambda: m - m.mean(0, keepdim=True)))
    for name, nbytes, fn in cases:
        eager = time_us(fn)
        try:
            compiled = torch.compile(fn)
            comp = time_us(compiled)
            comp_s = f"{cell(comp)} | {100 * nbytes / (comp[0] * 1e3) / copy:.0f}%"
        except Exception as e:  # noqa: BLE001 - report and go on
            comp_s = f"failed ({type(e).__name__}) | - | -"
        eager_pct = 100 * nbytes / (eager[0] * 1e3) / copy
        print(f"| {name} | {cell(eager)} | {eager_pct:.0f}% | {comp_s} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
