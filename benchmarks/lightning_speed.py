"""What counting a Lightning program on sim costs against the same program on the plain CPU, per
training step (issues 24 and 26).

One interleaved run: each round trains Lightning's own demo (examples/programs/lightning_demos.py,
unchanged) once on the CPU (`python PROGRAM --accelerator cpu`) and once counted on sim
(`python -m harness_sim run -- PROGRAM --accelerator sim`), the order alternating from round to
round. In both, a global optimizer step hook times each step as `run` windows it: from the end of
the previous optimizer step to the end of this one. Prints the median step on each side and the
Hodges-Lehmann estimate of sim / cpu with its 95% distribution-free interval.

    python benchmarks/lightning_speed.py [--model transformer|boring] [--rounds 6] [--steps 40]

Run it with the Python environment of scripts/python_env.sh (torch, Lightning, harness_sim).
Not a test: timings on a shared machine are noisy.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAM = os.path.join(REPO, "examples", "programs", "lightning_demos.py")
WARMUP_STEPS = 3  # the first steps hold the set-up (Lightning's, the optimizer's lazy state)


def child(out: str, argv: list[str]) -> int:
    """In the timed process: time every optimizer step, then run `argv` (a program, or
    `-m harness_sim run ...`) as python would."""
    import runpy

    import torch.optim.optimizer as optimizer

    ends: list[float] = []
    optimizer.register_optimizer_step_post_hook(lambda *_: ends.append(time.perf_counter()))
    status = 0
    try:
        if argv[:1] == ["-m"]:
            sys.argv = [argv[1]] + argv[2:]
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = argv
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    steps = [b - a for a, b in zip(ends, ends[1:])][WARMUP_STEPS:]
    with open(out, "w") as f:
        json.dump(steps, f)
    return status


def hodges_lehmann(head: list[float], base: list[float], z: float = 1.959964):
    """Median of the ratios h / b and its 95% distribution-free interval (normal approximation
    of the Mann-Whitney U distribution, as for large samples)."""
    ratios = sorted(h / b for h in head for b in base)
    m, n = len(head), len(base)
    k = int(math.floor(m * n / 2 - z * math.sqrt(m * n * (m + n + 1) / 12)))
    k = max(k, 0)
    return statistics.median(ratios), ratios[k], ratios[m * n - 1 - k]


def main() -> int:
    if sys.argv[1:2] == ["--child"]:  # the timed process (see child())
        return child(sys.argv[2], sys.argv[3:])
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=("transformer", "boring"), default="transformer")
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--steps", type=int, default=40)
    args = p.parse_args()
    if args.rounds < 2 or args.steps <= WARMUP_STEPS + 2:
        p.error(f"--rounds must be at least 2 and --steps more than {WARMUP_STEPS + 2}")

    program = [PROGRAM, "--model", args.model, "--max-steps", str(args.steps)]
    sides = {
        "cpu": program + ["--accelerator", "cpu"],
        "sim": ["-m", "harness_sim", "run", "-q", "--steps-from", "lightning", "--"] + program
        + ["--accelerator", "sim"],
    }
    times: dict[str, list[float]] = {"cpu": [], "sim": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = ("cpu", "sim") if r % 2 == 0 else ("sim", "cpu")
            for side in order:
                out = os.path.join(tmp, f"{side}{r}.json")
                print(f"\rround {r + 1}/{args.rounds}: {side}   ", end="", file=sys.stderr,
                      flush=True)
                run = subprocess.run([sys.executable, __file__, "--child", out] + sides[side],
                                     cwd=tmp, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     text=True)
                if run.returncode != 0:
                    print(f"\n{side} run failed ({run.returncode}):\n{run.stderr}", file=sys.stderr)
                    return 1
                with open(out) as f:
                    times[side] += json.load(f)
    print(file=sys.stderr)
    ratio, low, high = hodges_lehmann(times["sim"], times["cpu"])
    print(f"Lightning demo '{args.model}', {len(times['cpu'])} steps a side in {args.rounds} "
          f"interleaved rounds")
    print(f"  median step: cpu {statistics.median(times['cpu']) * 1e3:.2f} ms, "
          f"sim (python -m harness_sim run) {statistics.median(times['sim']) * 1e3:.2f} ms")
    print(f"  sim / cpu (Hodges-Lehmann, 95% interval): {ratio:.3f} [{low:.3f}, {high:.3f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
