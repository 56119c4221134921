"""kiln's gradients against PyTorch autograd, in float64, on three whole models.

Builds the inputs and parameters of bench/grad_models.cpp from the same closed forms (element
i, row-major, of a tensor is scale * sin(0.37 * i + k), with the per-tensor k and scale in
MODELS below, which must match the C++ program's), computes the same losses with torch ops and
their gradients with torch.autograd, runs the kiln program and compares:

- mlp: x [8, 5] -> Linear 5->16 -> tanh -> Linear 16->3 -> log_softmax(dim 1); loss =
  -sum(log_softmax * onehot) / 8 for classes i % 3 (also checked against F.nll_loss).
- lstm16: an LSTM cell (gates i, f, g, o; input 3, hidden 6, batch 2) over 16 steps from zero
  h and c, a Linear 6->1 read-out at every step; loss = MSE against sin(0.3 * t + b).
- gru: a GRU cell (gates r, z, n; input 4, hidden 5, batch 3) over 8 steps from a closed-form
  h0; loss = mean of the final h squared.

The LSTM and GRU are computed twice in torch, from explicit ops and with torch.nn.LSTMCell /
torch.nn.GRUCell holding copies of the same parameters; the two must agree (loss and every
gradient within the tolerance) before kiln is compared with the explicit-op version.

Prints, per model, the loss's and each parameter's max relative error
max|kiln - torch| / max(max|torch|, 1e-300), and exits 1 if any exceeds --tol (default 1e-10),
is not finite, or a model or parameter is missing from kiln's output (or has the wrong number of
values); 2 if the kiln program fails.

The tensors are on CUDA when torch sees a GPU, else on the CPU (--device overrides), and kiln
gets the same --device unless --kiln-device says otherwise. Needs only torch and the standard
library.

Usage: python3 bench/torch/grad_models.py --kiln build/bench/grad_models [--device cpu|cuda]
       [--kiln-device cpu|cuda] [--tol 1e-10]
   or: ... --kiln-json FILE   (compare a saved output of grad_models instead of running it)
"""
import argparse
import json
import math
import subprocess
import sys

import torch
import torch.nn.functional as F

DTYPE = torch.float64

# (name, shape, k, scale) for the inputs and the parameters of each model; bench/grad_models.cpp
# uses the same values.
MODELS = {
    "mlp": {
        "inputs": [("x", (8, 5), 0.0, 1.0)],
        "params": [
            ("fc1.weight", (16, 5), 1.0, 0.5),
            ("fc1.bias", (16,), 2.0, 0.5),
            ("fc2.weight", (3, 16), 3.0, 0.5),
            ("fc2.bias", (3,), 4.0, 0.5),
        ],
    },
    "lstm16": {
        "inputs": [("xs", (16, 2, 3), 0.5, 1.0)],
        "params": [
            ("cell.weight_ih", (24, 3), 1.5, 0.5),
            ("cell.weight_hh", (24, 6), 2.5, 0.5),
            ("cell.bias_ih", (24,), 3.5, 0.5),
            ("cell.bias_hh", (24,), 4.5, 0.5),
            ("readout.weight", (1, 6), 5.5, 0.5),
            ("readout.bias", (1,), 6.5, 0.5),
        ],
    },
    "gru": {
        "inputs": [("xs", (8, 3, 4), 0.25, 1.0), ("h0", (3, 5), 0.75, 0.5)],
        "params": [
            ("cell.weight_ih", (15, 4), 1.25, 0.5),
            ("cell.weight_hh", (15, 5), 2.25, 0.5),
            ("cell.bias_ih", (15,), 3.25, 0.5),
            ("cell.bias_hh", (15,), 4.25, 0.5),
        ],
    },
}


def formula_values(n, k, scale):
    """Element i is scale * sin(0.37 * i + k), as formula() in grad_models.cpp."""
    return [scale * math.sin(0.37 * i + k) for i in range(n)]


def formula(shape, k, scale, device):
    values = formula_values(math.prod(shape), k, scale)
    return torch.tensor(values, dtype=DTYPE, device=device).reshape(shape)


def mlp_onehot(n, classes):
    """Row i has a 1 in column i % classes."""
    return [[1.0 if c == i % classes else 0.0 for c in range(classes)] for i in range(n)]


def lstm_targets(steps, batch):
    """y[t][b] = sin(0.3 * t + b)."""
    return [[math.sin(0.3 * t + b) for b in range(batch)] for t in range(steps)]


def build(name, device):
    """The model's inputs (a dict) and its parameters (name -> leaf requiring grad)."""
    spec = MODELS[name]
    inputs = {n: formula(s, k, sc, device) for n, s, k, sc in spec["inputs"]}
    params = {n: formula(s, k, sc, device).requires_grad_() for n, s, k, sc in spec["params"]}
    return inputs, params


def mlp_loss(inputs, p):
    x = inputs["x"]
    n = x.shape[0]
    h = torch.tanh(F.linear(x, p["fc1.weight"], p["fc1.bias"]))
    logp = F.log_softmax(F.linear(h, p["fc2.weight"], p["fc2.bias"]), dim=1)
    onehot = torch.tensor(mlp_onehot(n, logp.shape[1]), dtype=DTYPE, device=x.device)
    loss = -(logp * onehot).sum() / n
    classes = torch.arange(n, device=x.device) % logp.shape[1]
    check_close("mlp: -sum(log_softmax * onehot) / n vs F.nll_loss", loss.detach(),
                F.nll_loss(logp, classes).detach())
    return loss


def lstm_loss_ops(inputs, p):
    xs = inputs["xs"]
    steps, batch, _ = xs.shape
    hid = p["cell.weight_hh"].shape[1]
    h = torch.zeros(batch, hid, dtype=DTYPE, device=xs.device)
    c = torch.zeros(batch, hid, dtype=DTYPE, device=xs.device)
    preds = []
    for t in range(steps):
        gates = (F.linear(xs[t], p["cell.weight_ih"], p["cell.bias_ih"]) +
                 F.linear(h, p["cell.weight_hh"], p["cell.bias_hh"]))
        i, f, g, o = gates.chunk(4, 1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        preds.append(F.linear(h, p["readout.weight"], p["readout.bias"]).squeeze(1))
    y = torch.tensor(lstm_targets(steps, batch), dtype=DTYPE, device=xs.device)
    return F.mse_loss(torch.stack(preds), y)


def lstm_loss_cell(inputs, p):
    xs = inputs["xs"]
    steps, batch, n_in = xs.shape
    hid = p["cell.weight_hh"].shape[1]
    cell = torch.nn.LSTMCell(n_in, hid, dtype=DTYPE, device=xs.device)
    readout = torch.nn.Linear(hid, 1, dtype=DTYPE, device=xs.device)
    copy_into({"cell": cell, "readout": readout}, p)
    h = torch.zeros(batch, hid, dtype=DTYPE, device=xs.device)
    c = torch.zeros(batch, hid, dtype=DTYPE, device=xs.device)
    preds = []
    for t in range(steps):
        h, c = cell(xs[t], (h, c))
        preds.append(readout(h).squeeze(1))
    y = torch.tensor(lstm_targets(steps, batch), dtype=DTYPE, device=xs.device)
    return F.mse_loss(torch.stack(preds), y), module_params({"cell": cell, "readout": readout})


def gru_loss_ops(inputs, p):
    xs, h = inputs["xs"], inputs["h0"]
    for t in range(xs.shape[0]):
        ir, iz, i_n = F.linear(xs[t], p["cell.weight_ih"], p["cell.bias_ih"]).chunk(3, 1)
        hr, hz, hn = F.linear(h, p["cell.weight_hh"], p["cell.bias_hh"]).chunk(3, 1)
        r = torch.sigmoid(ir + hr)
        z = torch.sigmoid(iz + hz)
        n = torch.tanh(i_n + r * hn)
        h = (1 - z) * n + z * h
    return (h * h).mean()


def gru_loss_cell(inputs, p):
    xs, h = inputs["xs"], inputs["h0"]
    cell = torch.nn.GRUCell(xs.shape[2], h.shape[1], dtype=DTYPE, device=xs.device)
    copy_into({"cell": cell}, p)
    for t in range(xs.shape[0]):
        h = cell(xs[t], h)
    return (h * h).mean(), module_params({"cell": cell})


def copy_into(modules, p):
    """Copies the parameters named "module.param" into the modules; every one must be used."""
    used = set()
    with torch.no_grad():
        for prefix, module in modules.items():
            for pname, param in module.named_parameters():
                key = f"{prefix}.{pname}"
                if key not in p:
                    raise SystemExit(f"{key}: no such parameter in MODELS")
                param.copy_(p[key])
                used.add(key)
    if used != set(p):
        raise SystemExit(f"parameters not copied into the torch.nn modules: {set(p) - used}")


def module_params(modules):
    return {f"{prefix}.{n}": t for prefix, m in modules.items() for n, t in m.named_parameters()}


def rel_err(a, b):
    """max|a - b| / max(max|b|, 1e-300); inf for a shape mismatch, NaN when either has one."""
    if a.shape != b.shape:
        return math.inf
    scale = max(b.abs().max().item(), 1e-300) if b.numel() else 1e-300
    return (a - b).abs().max().item() / scale if b.numel() else 0.0


def bad(err, tol):
    return not (err <= tol)  # NaN counts as bad


def check_close(what, a, b, tol=None):
    tol = ARGS.tol if tol is None else tol
    err = rel_err(a, b)
    if bad(err, tol):
        raise SystemExit(f"torch self-check failed: {what}: relative error {err:.3e} > {tol:g}")


def torch_reference(name, device):
    """(loss, {param: grad}) from explicit torch ops, cross-checked against the torch.nn cell."""
    inputs, p = build(name, device)
    if name == "mlp":
        loss = mlp_loss(inputs, p)
        cell = None
    elif name == "lstm16":
        loss = lstm_loss_ops(inputs, p)
        cell = lstm_loss_cell(inputs, p)
    else:
        loss = gru_loss_ops(inputs, p)
        cell = gru_loss_cell(inputs, p)
    names = list(p)
    grads = dict(zip(names, torch.autograd.grad(loss, [p[n] for n in names])))
    if cell is not None:
        cell_loss, cell_p = cell
        cell_grads = dict(zip(names, torch.autograd.grad(cell_loss, [cell_p[n] for n in names])))
        check_close(f"{name}: loss, explicit ops vs torch.nn cell", cell_loss.detach(),
                    loss.detach())
        for n in names:
            check_close(f"{name}: {n}.grad, explicit ops vs torch.nn cell", cell_grads[n], grads[n])
    return loss.detach(), grads


def run_kiln(path, device):
    cmd = [path, "--device", device]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"could not run {' '.join(cmd)}: {e}", file=sys.stderr)
        sys.exit(2)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        print(f"{' '.join(cmd)} exited with {proc.returncode}", file=sys.stderr)
        sys.exit(2)
    return proc.stdout


def compare(kiln, refs, tol):
    """Prints the table; returns the list of failures."""
    failures = []
    print(f"{'model':<8} {'value':<16} {'numel':>6}  max|kiln-torch|/max|torch|")
    kiln_models = kiln.get("models", {})
    for name, (loss, grads) in refs.items():
        km = kiln_models.get(name)
        if km is None:
            print(f"{name:<8} {'(missing)':<16}")
            failures.append(f"{name}: missing from kiln's output")
            continue
        rows = [("loss", loss, km.get("loss"))]
        kg = km.get("grads", {})
        rows += [(n, g, kg.get(n)) for n, g in grads.items()]
        for extra in sorted(set(kg) - set(grads)):
            failures.append(f"{name}: kiln reports an unknown parameter {extra}")
        for vname, ref, values in rows:
            if values is None:
                print(f"{name:<8} {vname:<16} {ref.numel():>6}  missing")
                failures.append(f"{name}: {vname} missing from kiln's output")
                continue
            got = torch.tensor(values, dtype=DTYPE, device=ref.device)
            if got.numel() != ref.numel():
                print(f"{name:<8} {vname:<16} {ref.numel():>6}  {got.numel()} values from kiln")
                failures.append(f"{name}: {vname} has {got.numel()} values, not {ref.numel()}")
                continue
            err = rel_err(got.reshape(ref.shape), ref)
            flag = "  FAIL" if bad(err, tol) else ""
            print(f"{name:<8} {vname:<16} {ref.numel():>6}  {err:.3e}{flag}")
            if flag:
                failures.append(f"{name}: {vname} relative error {err:.3e} > {tol:g}")
    for extra in sorted(set(kiln_models) - set(refs)):
        failures.append(f"kiln reports an unknown model {extra}")
    return failures


def main():
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kiln", help="path of the grad_models program (build/bench/grad_models)")
    ap.add_argument("--kiln-json", help="compare this saved output of grad_models instead")
    ap.add_argument("--device", choices=["cpu", "cuda"],
                    help="torch's device (default: cuda when available, else cpu)")
    ap.add_argument("--kiln-device", choices=["cpu", "cuda"], help="kiln's (default: --device)")
    ap.add_argument("--tol", type=float, default=1e-10)
    ARGS = ap.parse_args()
    if not ARGS.kiln and not ARGS.kiln_json:
        ap.error("give --kiln PATH (or --kiln-json FILE)")
    device = ARGS.device or ("cuda" if torch.cuda.is_available() else "cpu")
    kiln_device = ARGS.kiln_device or device

    refs = {name: torch_reference(name, device) for name in MODELS}
    if ARGS.kiln_json:
        with open(ARGS.kiln_json) as f:
            text = f.read()
    else:
        text = run_kiln(ARGS.kiln, kiln_device)
    try:
        kiln = json.loads(text)
    except json.JSONDecodeError as e:
        print(f"kiln's output is not JSON ({e}):\n{text[:2000]}", file=sys.stderr)
        sys.exit(2)

    gpu = f" ({torch.cuda.get_device_name()})" if device == "cuda" else ""
    print(f"torch {torch.__version__} on {device}{gpu}, float64; kiln on {kiln.get('device')}; "
          f"tolerance {ARGS.tol:g}; torch explicit ops == torch.nn cells for lstm16 and gru")
    failures = compare(kiln, refs, ARGS.tol)
    if failures:
        print(f"\nFAILED ({len(failures)}):")
        for f in failures:
            print(f"  {f}")
        sys.exit(1)
    print("\nall gradients agree")


ARGS = None

if __name__ == "__main__":
    main()
