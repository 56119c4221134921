#!/usr/bin/env python3
"""Compare two training-loss curves written by kiln-rnn (loss.csv: step,train_loss,...).

    compare_curves.py A/loss.csv B/loss.csv [--steps 1000] [--tol 1e-4]

Prints the largest absolute difference of the train loss over the steps both files have (up to
--steps) and where it is; exits 1 if it is above --tol or the files share no steps."""
import argparse
import csv
import sys


def read(path):
    with open(path, newline="") as f:
        return {int(r["step"]): float(r["train_loss"]) for r in csv.DictReader(f)}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--tol", type=float, default=1e-4)
    args = p.parse_args()
    a, b = read(args.a), read(args.b)
    steps = sorted(s for s in a if s in b and s <= args.steps)
    if not steps:
        print(f"no common steps <= {args.steps} in {args.a} and {args.b}")
        return 1
    worst = max(steps, key=lambda s: abs(a[s] - b[s]))
    diff = abs(a[worst] - b[worst])
    ok = diff <= args.tol
    first_off = next((s for s in steps if abs(a[s] - b[s]) > args.tol), None)
    where = "" if ok else f", first above it at step {first_off}"
    same = sum(a[s] == b[s] for s in steps)
    print(f"{len(steps)} steps compared (up to step {steps[-1]}), {same} identical as printed; "
          f"largest |loss difference| "
          f"{diff:.3g} at step {worst} ({a[worst]:.6g} vs {b[worst]:.6g}), tolerance {args.tol:g}"
          f"{where}: {'agree' if ok else 'DIFFER'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
