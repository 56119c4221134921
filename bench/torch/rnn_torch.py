"""PyTorch on the loops of bench/cuda/rnn_gpu.cpp, on the same machine: the seed loop
(d = 64 and 256), an LSTM cell step (in = hidden = 256, batch 1 and 32) and a GRU cell step
(batch 1; nn.GRUCell and nn.GRU beside it), f32, inference.

Timed as rnn_gpu times kiln: after warm-up, a loop of `--steps` steps and one
torch.cuda.synchronize() is timed with the wall clock; median of `--reps` loops. A mode whose
loop would take more than ~2 s (the CPU at the larger sizes) times fewer steps; the table says
how many. The LSTM reads its input as a row slice of a [steps * batch, 256] sequence, a new
offset every step, like rnn_gpu. Modes: eager on the CPU, eager on the GPU (the same math in
separate ops; for the LSTM also nn.LSTMCell with the same weights), torch.compile of the
step function (default mode, and mode="reduce-overhead", which replays CUDA graphs; its outputs
are cloned each step because the next replay overwrites them), and the step captured by hand
with torch.cuda.CUDAGraph (state in static tensors updated inside the graph; the LSTM's input
row copied into a static buffer before each replay, one more launch per step). torch.compile
cases stop being started once `--compile-budget` seconds have gone into compiling. For the
LSTM, nn.LSTM (cuDNN) over the whole sequence in one call is listed as a reference: it needs
every input in advance, which a step-by-step loop does not have; its us/step is the call's time
over the sequence length.

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


def gru_step(x, h, wx, wh, bx, bh):
    ir, iz, in_ = (x @ wx + bx).chunk(3, 1)
    hr, hz, hn = (h @ wh + bh).chunk(3, 1)
    r = torch.sigmoid(ir + hr)
    z = torch.sigmoid(iz + hz)
    n = torch.tanh(in_ + r * hn)
    return n + z * (h - n)


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
    """(median, min, max) us per step over `reps` timed loops, and the steps per loop."""
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
    return (statistics.median(per), min(per), max(per)), n


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


def captured(step_into, state):
    """A step captured by hand with torch.cuda.CUDAGraph: step_into(state) computes one step and
    copies it into the static state tensors. Warm-up on a side stream, as the PyTorch docs
    direct; the state is restored after capture, so the first replay is step 1."""
    start = tuple(s.clone() for s in state)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step_into(state)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step_into(state)
    for s, s0 in zip(state, start):
        s.copy_(s0)
    return graph


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
        if mode == "graph":
            state = (x.to(dev),)
            graph = captured(lambda s: s[0].copy_(seed_step(s[0], wd, bd)), state)
            return (lambda s, t: (graph.replay(), s)[1]), state
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
        if mode == "graph":
            x_s = torch.zeros(batch, hidden, device=dev)

            def step_into(s):
                h, c = lstm_step(x_s, s[0], s[1], wxd, whd, bd)
                s[0].copy_(h)
                s[1].copy_(c)

            graph = captured(step_into, state)
            return (lambda s, t: (x_s.copy_(x_at(t)), graph.replay(), s)[2]), state
        f = compiled(lstm_step, mode)
        return (lambda s, t: f(x_at(t), s[0], s[1], wxd, whd, bd)), state

    def cudnn(dev, n):
        """nn.LSTM (cuDNN) with the same weights over the first n steps in one call: (h, c)."""
        m = torch.nn.LSTM(hidden, hidden).to(dev)
        m.weight_ih_l0.copy_(wx.t())
        m.weight_hh_l0.copy_(wh.t())
        m.bias_ih_l0.copy_(bias)
        m.bias_hh_l0.zero_()
        inp = seq[: n * batch].reshape(n, batch, hidden).to(dev)
        h0 = zero.to(dev).unsqueeze(0)
        return lambda: tuple(o.squeeze(0) for o in m(inp, (h0, h0))[1])

    make.cudnn = cudnn
    make.cell = "nn.LSTMCell"
    return f"LSTM batch {batch}", make, 15


def gru_case(batch, steps, seed, hidden=256):
    """As lstm_case, for a GRU cell (nn.GRUCell's math; the state is h alone)."""
    g = torch.Generator().manual_seed(seed)
    scale = 1 / math.sqrt(hidden)  # nn.GRUCell's init range
    seq = torch.randn(steps * batch, hidden, generator=g)
    wx = torch.randn(hidden, 3 * hidden, generator=g) * scale  # [in, 3H], gates r, z, n
    wh = torch.randn(hidden, 3 * hidden, generator=g) * scale
    bx = torch.randn(3 * hidden, generator=g) * scale
    bh = torch.randn(3 * hidden, generator=g) * scale
    zero = torch.zeros(batch, hidden)

    def make(dev, mode, cell):
        sq, wxd, whd, bxd, bhd = seq.to(dev), wx.to(dev), wh.to(dev), bx.to(dev), bh.to(dev)
        state = (zero.to(dev),)

        def x_at(t):
            row = (t % steps) * batch
            return sq[row : row + batch]

        if cell:  # nn.GRUCell holding the same weights
            m = torch.nn.GRUCell(hidden, hidden).to(dev)
            m.weight_ih.copy_(wxd.t())
            m.weight_hh.copy_(whd.t())
            m.bias_ih.copy_(bxd)
            m.bias_hh.copy_(bhd)
            return (lambda s, t: (m(x_at(t), s[0]),)), state
        if mode == "graph":
            x_s = torch.zeros(batch, hidden, device=dev)

            def step_into(s):
                s[0].copy_(gru_step(x_s, s[0], wxd, whd, bxd, bhd))

            graph = captured(step_into, state)
            return (lambda s, t: (x_s.copy_(x_at(t)), graph.replay(), s)[2]), state
        f = compiled(gru_step, mode)
        return (lambda s, t: (f(x_at(t), s[0], wxd, whd, bxd, bhd),)), state

    def cudnn(dev, n):
        """nn.GRU (cuDNN) with the same weights over the first n steps in one call: (h,)."""
        m = torch.nn.GRU(hidden, hidden).to(dev)
        m.weight_ih_l0.copy_(wx.t())
        m.weight_hh_l0.copy_(wh.t())
        m.bias_ih_l0.copy_(bx)
        m.bias_hh_l0.copy_(bh)
        inp = seq[: n * batch].reshape(n, batch, hidden).to(dev)
        h0 = zero.to(dev).unsqueeze(0)
        return lambda: (m(inp, h0)[1].squeeze(0),)

    make.cudnn = cudnn
    make.cell = "nn.GRUCell"
    return f"GRU batch {batch}", make, 16


def time_whole_sequence(run, steps, reps):
    """(median, min, max) us per step of `reps` calls of run() over a sequence of `steps`."""
    run()
    torch.cuda.synchronize()
    per = []
    for _ in range(reps):
        start = time.perf_counter()
        run()
        torch.cuda.synchronize()
        per.append((time.perf_counter() - start) / steps * 1e6)
    return statistics.median(per), min(per), max(per)


def max_abs_diff(a, b):
    return torch.stack([(x.cpu() - y.cpu()).abs().max() for x, y in zip(a, b)]).max().item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--compile-budget", type=float, default=240, help="seconds")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False  # as kiln by default
    torch.backends.cudnn.allow_tf32 = False  # nn.LSTM's GEMMs too (True by default)
    torch.set_float32_matmul_precision("highest")
    torch.set_grad_enabled(False)
    gpu, cpu = torch.device("cuda"), torch.device("cpu")
    print(f"# rnn_torch: PyTorch {torch.__version__} on the loops of rnn_gpu\n")
    print(f"- command: `python3 {' '.join(sys.argv)}`")
    print(f"- GPU: {torch.cuda.get_device_name()}; host CPU: {cpu_model()}, "
          f"torch threads {torch.get_num_threads()}")
    print(f"- date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M:%S} UTC")
    print(f"- f32 (no TF32); {args.steps} steps per timed loop (fewer where a loop would pass "
          f"~{BUDGET_S:.0f} s), median (min-max) of {args.reps} loops, each after {WARMUP} "
          "warm-up steps; wall clock including the final torch.cuda.synchronize(); torch.no_grad\n")
    print("| case | mode | steps timed | us/step | min-max | us/op call | max abs diff vs eager "
          f"GPU ({CHECK_STEPS} steps) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    sys.stdout.flush()
    # (name, device, torch.compile mode, nn.LSTMCell)
    modes = [
        ("eager CPU", cpu, None, False),
        ("eager GPU", gpu, None, False),
        ("torch.compile GPU", gpu, "default", False),
        ("torch.compile reduce-overhead GPU", gpu, "reduce-overhead", False),
        ("CUDAGraph captured by hand GPU", gpu, "graph", False),
    ]
    cases = [seed_case(64, 1), seed_case(256, 2), lstm_case(1, args.steps, 3),
             lstm_case(32, args.steps, 4), gru_case(1, args.steps, 6)]
    compile_s = 0.0
    for name, make, ops in cases:
        step, state = make(gpu, None, False)
        want = run_loop(step, state, 0, CHECK_STEPS)
        cell_name = getattr(make, "cell", None)  # the nn module of the same math, if any
        cell_modes = [(f"{cell_name} CPU", cpu, None, True),
                      (f"{cell_name} GPU", gpu, None, True)] if cell_name else []
        for mname, dev, mode, cell in modes + cell_modes:
            compiles = mode in ("default", "reduce-overhead")
            if compiles and compile_s > args.compile_budget:
                print(f"| {name} | {mname} | - | skipped (compile budget spent) | - | - | - |")
                continue
            try:
                start = time.perf_counter()
                step, state = make(dev, mode, cell)
                diff = max_abs_diff(run_loop(step, state, 0, CHECK_STEPS), want)
                if compiles:
                    compile_s += time.perf_counter() - start
                us, n = time_loop(step, state, dev, args.steps, args.reps)
                per_op = "-" if cell else f"{us[0] / ops:.2f}"  # LSTMCell is one call
                print(f"| {name} | {mname} | {n} | {us[0]:.2f} | {us[1]:.2f}-{us[2]:.2f} "
                      f"| {per_op} | {diff:.3g} |")
            except Exception as e:  # noqa: BLE001 - report (torch.compile may fail) and go on
                why = str(e).splitlines()[0][:80] if str(e) else ""
                print(f"| {name} | {mname} | - | failed ({type(e).__name__}: {why}) | - | - | - |")
            sys.stdout.flush()
        if hasattr(make, "cudnn"):
            mname = ("nn.LSTM" if name.startswith("LSTM") else "nn.GRU") + \
                " (cuDNN), whole sequence in one call GPU"
            try:
                diff = max_abs_diff(make.cudnn(gpu, CHECK_STEPS)(), want)
                us = time_whole_sequence(make.cudnn(gpu, args.steps), args.steps, args.reps)
                print(f"| {name} | {mname} | {args.steps} | {us[0]:.2f} | {us[1]:.2f}-{us[2]:.2f} "
                      f"| - | {diff:.3g} |")
            except Exception as e:  # noqa: BLE001 - report and go on
                print(f"| {name} | {mname} | - | failed ({type(e).__name__}: {e}) | - | - | - |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
