"""A full-size FSDP2 training step counted without computing it (issue 52, docs/full-size.md).

Runs examples/programs/fsdp2_llama.py (torch's FSDP2, unchanged from a CUDA program) under
`torchrun --nproc-per-node N -m harness_sim run --as-cuda --compute shapes`, then prints:
the wall time and the largest resident set of any rank; from the report, per rank and step, the
all-gathers and reduce-scatters with their bytes, launches, syncs, and the device memory peak;
and beside them what FSDP2's design makes of the model (the analytic check): parameters,
gradients and AdamW's two states per rank, one all-gather per FSDP unit in the forward and one
more per unit but the root in the backward, one reduce-scatter per unit.

    python benchmarks/full_size.py --preset 8b --nproc 8 [--steps 3] [--json out.json]

Run it with the Python environment of scripts/python_env.sh. Not a test: a benchmark (time and
memory on a shared machine vary).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "examples", "programs"))
from fsdp2_llama import PRESETS  # noqa: E402  (the model's shapes, not torch)

GiB = 2 ** 30


def parameter_counts(cfg: dict) -> tuple[int, int]:
    """(all parameters, those of the root FSDP unit: embeddings, final norm, output)."""
    d, h, kv, f = cfg["dim"], cfg["n_heads"], cfg["n_kv_heads"], cfg["ffn_dim"]
    head = d // h
    block = d * h * head + 2 * d * kv * head + h * head * d + 3 * d * f + 2 * d
    root = 2 * cfg["vocab"] * d + d
    return cfg["n_layers"] * block + root, root


def analytic(cfg: dict, ranks: int) -> dict:
    """What FSDP2 (bf16 compute, fp32 parameters and reduction) moves and holds per rank."""
    total, root = parameter_counts(cfg)
    units = cfg["n_layers"] + 1
    return {
        "parameters": total,
        "sharded_state_bytes": 16 * total // ranks,  # fp32 parameter, gradient, exp_avg, exp_avg_sq
        "all_gather_count": units + (units - 1),
        "all_gather_bytes": (2 * total + 2 * (total - root)) // ranks,
        "reduce_scatter_count": units,
        "reduce_scatter_bytes": 4 * total,  # each rank's input: the whole fp32 gradient
    }


def measured(report: dict) -> dict:
    variants = report["scenarios"][0]["variants"]
    rank0 = next(v for v in variants if v["name"] == "rank0/steps")
    peaks = [v["total"]["memory.peak_bytes"] for v in variants
             if v["name"].startswith("rank") and v["name"].endswith("/steps")]
    step = rank0["per_step"]
    return {
        "ranks": len(peaks),
        "peak_bytes_per_rank": peaks,
        "launches": step["launch.count"],
        "syncs": step["sync.count"],
        "all_gather_count": step.get("collective.all_gather.count", 0),
        "all_gather_bytes": step.get("collective.all_gather.bytes", 0),
        "reduce_scatter_count": step.get("collective.reduce_scatter.count", 0),
        "reduce_scatter_bytes": step.get("collective.reduce_scatter.bytes", 0),
        "step_wall_s": rank0["timing"]["step_time.median"] / 1e9,
        "step_cpu_s": rank0["timing"]["step_cpu_time.median"] / 1e9,
    }


def run(preset: str, nproc: int, steps: int, workdir: str) -> tuple[dict, float, int]:
    out = os.path.join(workdir, "report.json")
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(nproc),
               "-m", "harness_sim", "run", "--as-cuda", "--compute", "shapes", "-q", "--out", out,
               "--", os.path.join(REPO, "examples", "programs", "fsdp2_llama.py"),
               "--preset", preset, "--steps", str(steps)]
    print("$", " ".join(command), file=sys.stderr)
    begin = time.monotonic()
    proc = subprocess.run(command, cwd=workdir, capture_output=True, text=True)
    wall = time.monotonic() - begin
    if proc.returncode != 0:
        sys.exit(f"full_size: the run exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    largest_rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    with open(out) as f:
        return json.load(f), wall, largest_rss


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="8b")
    parser.add_argument("--nproc", type=int, default=8)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        report, wall, rss = run(args.preset, args.nproc, args.steps, workdir)
    got, expected = measured(report), analytic(PRESETS[args.preset], args.nproc)
    print(f"{args.preset} ({expected['parameters'] / 1e9:.2f}B parameters), FSDP2 on "
          f"{got['ranks']} sim ranks, --compute shapes, {args.steps} steps")
    print(f"  wall {wall:.1f} s for the whole run (start-up, set-up, {args.steps} steps); "
          f"largest rank RSS {rss / GiB:.2f} GiB")
    print(f"  per rank and step: {got['launches']:.0f} launches, {got['syncs']:.0f} syncs; a step "
          f"took {got['step_wall_s']:.2f} s ({got['step_cpu_s']:.2f} s of CPU) on rank 0")
    for kind in ("all_gather", "reduce_scatter"):
        print(f"  {kind}: {got[kind + '_count']:.0f} ({expected[kind + '_count']} expected), "
              f"{got[kind + '_bytes'] / GiB:.3f} GiB ({expected[kind + '_bytes'] / GiB:.3f} "
              "expected)")
    peak = max(got["peak_bytes_per_rank"])
    print(f"  device memory peak per rank {peak / GiB:.2f} GiB (every rank: "
          f"{', '.join(f'{p / GiB:.2f}' for p in got['peak_bytes_per_rank'])}); of it "
          f"parameters, gradients and AdamW states {expected['sharded_state_bytes'] / GiB:.2f} GiB")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"wall_s": wall, "largest_rank_rss_bytes": rss, "measured": got,
                       "expected": expected}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
