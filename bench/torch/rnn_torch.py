"""PyTorch on the loops of bench/cuda/rnn_gpu.cpp, on the same machine: the seed loop
(d = 64 and 256) and an LSTM cell step (in = hidden = 256, batch 1 and 32), f32, inference.

Timed as rnn_gpu times kiln: after warm-up, a loop of `--steps` steps and one
torch.cuda.synchronize() is timed with the wall clock; median of `--reps` loops. A mode whose
loop would take more than ~2 s (the CPU at the larger sizes) times fewer steps; the table says
how many. The LSTM reads its input as a row slice of a [steps * batch, 256] sequence, a new
offset every step, like rnn_gpu. Modes: eager on the CPU, eager on the GPU (the same math in
separate ops; for the LSTM also nn.LSTMCell with the same weights), and torch.compile of the
step function (default mode, and mode="reduce-overhead", which replays CUDA graphs; its outputs
are cloned each step because the next replay overwrites them). torch.compile cases stop being
started once `--compile-budget` seconds have gone into compiling.

Every mode also runs 50 steps from the same data; the last column is the max abs difference
from eager GPU (separate ops). Prints markdown tables.
Usage: python3 bench/torch/rnn_torch.py [--steps 10000] [--reps 3] [--compile-budget 240]
"""
import argparse
import datetime
import math
import platform
import statistics
import sys
import time

import torch

WARMUP = 200  # steps before timing (compile, cudagraph recording, allocator)
PROBE = 50  # steps timed to size the loop within BUDGET_S
BUDGET_S = 2.0  # at most ~2 s per timed loop
MIN_STEPS = 500  # but never fewer steps than this
CHECK_STEPS = 50


def seed_step(x, w, b):
    y = x @ w
    y = torch.tanh(y + b) * 0.5 + x
    return torch.sigmoid(y) - 0.5


def lstm_step(x, h, c, wx, wh, bias):
    gates = x @ wx + h @ wh + bias
    i, f, g, o = gates.chunk(4, 1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    h = torch.sigmoid(o) * torch.tanh(c)
    return h, c


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def sync_of(dev):
    return torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)


def run_loop(step, state, t0, n):
    """state = step(state, t) for t in [t0, t0 + n)."""
    for t in range(t0, t0 + n):
        state = step(state, t)
    return state


def time_loop(step, state, dev, steps, reps):
    """Median us per step over `reps` timed loops, and the steps per loop."""
    sync = sync_of(dev)
    state = run_loop(step, state, 0, WARMUP)
    sync()
    start = time.perf_counter()
    state = run_loop(step, state, WARMUP, PROBE)
    sync()
    probe = (time.perf_counter() - start) / PROBE
    n = max(min(steps, MIN_STEPS), min(steps, int(BUDGET_S / probe)))
    t, per = WARMUP + PROBE, []
    for _ in range(reps):
        start = time.perf_counter()
        state = run_loop(step, state, t, n)
        sync()
        per.append((time.perf_counter() - start) / n * 1e6)
        t += n
    return statistics.median(per), n


def compiled(fn, mode):
    """torch.compile(fn) for a mode; None is eager. reduce-overhead clones its outputs: the
    next CUDA-graph replay overwrites them, and the loop feeds them back."""
    if mode is None:
        return fn
    torch._dynamo.reset()  # a fresh cache: no entry compiled for another mode or shape
    f = torch.compile(fn, mode=mode, dynamic=False)
    if mode != "reduce-overhead":
        return f

    def cloned(*args):
        out = f(*args)
        return tuple(o.clone() for o in out) if isinstance(out, tuple) else out.clone()

    return cloned


def seed_case(d, seed):
    """(name, make, op calls per step): make(device, compile mode, nn.LSTMCell) gives a step
    function and the initial state on that device, from data made here on the CPU."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(d, d, generator=g)
    w = torch.randn(d, d, generator=g) / math.sqrt(d)
    b = torch.randn(d, generator=g) * 0.1

    def make(dev, mode, cell):
        del cell  # the seed loop has no module form
        wd, bd = w.to(dev), b.to(dev)
        f = compiled(seed_step, mode)
        return (lambda s, t: (f(s[0], wd, bd),)), (x.to(dev),)

    return f"seed d={d}", make, 7


def lstm_case(batch, steps, seed, hidden=256):
    """As seed_case; the op calls count the input slice and chunk as one each, as rnn_gpu."""
    g = torch.Generator().manual_seed(seed)
    scale = 1 / math.sqrt(hidden)  # nn.LSTMCell's init range
    seq = torch.randn(steps * batch, hidden, generator=g)
    wx = torch.randn(hidden, 4 * hidden, generator=g) * scale  # [in, 4H], gates i, f, g, o
    wh = torch.randn(hidden, 4 * hidden, generator=g) * scale
    bias = torch.randn(4 * hidden, generator=g) * scale
    zero = torch.zeros(batch, hidden)

    def make(dev, mode, cell):
        sq, wxd, whd, bd = seq.to(dev), wx.to(dev), wh.to(dev), bias.to(dev)
        state = (zero.to(dev), zero.to(dev))

        def x_at(t):
            row = (t % steps) * batch
            return sq[row : row + batch]

        if cell:  # nn.LSTMCell holding the same weights: weight_ih = wx^T, bias_ih + bias_hh
            m = torch.nn.LSTMCell(hidden, hidden).to(dev)
            m.weight_ih.copy_(wxd.t())
            m.weight_hh.copy_(whd.t())
            m.bias_ih.copy_(bd)
            m.bias_hh.zero_()
            return (lambda s, t: m(x_at(t), s)), state
        f = compiled(lstm_step, mode)
        return (lambda s, t: f(x_at(t), s[0], s[1], wxd, whd, bd)), state

    return f"LSTM batch {batch}", make, 15


def max_abs_diff(a, b):
    return torch.stack([(x.cpu() - y.cpu()).abs().max() for x, y in zip(a, b)]).max().item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--compile-budget", type=float, default=240, help="seconds")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # as kiln by default
    torch.set_float32_matmul_precision("highest")
    torch.set_grad_enabled(False)
    gpu, cpu = torch.device("cuda"), torch.device("cpu")
    print(f"# rnn_torch: PyTorch {torch.__version__} on the loops of rnn_gpu\n")
    print(f"- command: `python3 {' '.join(sys.argv)}`")
    print(f"- GPU: {torch.cuda.get_device_name()}; host CPU: {cpu_model()}, "
          f"torch threads {torch.get_num_threads()}")
    print(f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M:%S} UTC")
    print(f"- f32 (no TF32); {args.steps} steps per timed loop (fewer where a loop would pass "
          f"~{BUDGET_S:.0f} s), median of {args.reps} loops, each after {WARMUP} warm-up steps; "
          "wall clock including the final torch.cuda.synchronize(); torch.no_grad\n")
    print("| case | mode | steps timed | us/step | us/op call | max abs diff vs eager GPU "
          f"({CHECK_STEPS} steps) |")
    print("|---|---|---:|---:|---:|---:|")
    sys.stdout.flush()
    # (name, device, torch.compile mode, nn.LSTMCell)
    modes = [
        ("eager CPU", cpu, None, False),
        ("eager GPU", gpu, None, False),
        ("torch.compile GPU", gpu, "default", False),
        ("torch.compile reduce-overhead GPU", gpu, "reduce-overhead", False),
    ]
    cell_modes = [("nn.LSTMCell CPU", cpu, None, True), ("nn.LSTMCell GPU", gpu, None, True)]
    cases = [seed_case(64, 1), seed_case(256, 2), lstm_case(1, args.steps, 3),
             lstm_case(32, args.steps, 4)]
    compile_s = 0.0
    for name, make, ops in cases:
        step, state = make(gpu, None, False)
        want = run_loop(step, state, 0, CHECK_STEPS)
        for mname, dev, mode, cell in modes + (cell_modes if name.startswith("LSTM") else []):
            if mode and compile_s > args.compile_budget:
                print(f"| {name} | {mname} | - | skipped (compile budget spent) | - | - |")
                continue
            try:
                start = time.perf_counter()
                step, state = make(dev, mode, cell)
                diff = max_abs_diff(run_loop(step, state, 0, CHECK_STEPS), want)
                if mode:
                    compile_s += time.perf_counter() - start
                us, n = time_loop(step, state, dev, args.steps, args.reps)
                per_op = "-" if cell else f"{us / ops:.2f}"  # LSTMCell is one call
                print(f"| {name} | {mname} | {n} | {us:.2f} | {per_op} | {diff:.3g} |")
            except Exception as e:  # noqa: BLE001 - report (torch.compile may fail) and go on
                why = str(e).splitlines()[0][:80] if str(e) else ""
                print(f"| {name} | {mname} | - | failed ({type(e).__name__}: {why}) | - | - |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
