#!/usr/bin/env python3
"""Real torch.optim.Adam / AdamW on the sim device, as bench's resume_adam and fused_adam
scenarios run the C++ runtime's Adam: the same MLP, batches, phases and measured window.

    python examples/torch_adam_on_sim.py [--bench build/bench/bench] [--out python.json]

Prints launches, D2H copies and syncs per step for every variant; with --bench it also runs
bench on sim and prints both sides, variant by variant, and exits 1 where they differ (the
fidelity check of python/tests/test_fidelity.py).
"""
from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

import harness_sim
from harness_sim import phase

# bench's `small` preset (scenarios/presets.cpp): MLP 32-64-64-32-16-4, batch 64, 5 steps before
# the checkpoint and 5 measured after it.
WIDTHS = [32, 64, 64, 32, 16, 4]
BATCH = 64
STEPS_BEFORE = 5
DEVICE = torch.device("sim", 0)

# Implementation name -> the torch.optim constructor arguments it stands for.
IMPLEMENTATIONS = {
    "forloop": dict(foreach=False),
    "foreach": dict(foreach=True),
    "fused": dict(fused=True),
    "capturable": dict(foreach=True, capturable=True),
    "adamw_forloop": dict(foreach=False, weight_decay=0.01, adamw=True),
    "adamw_foreach": dict(foreach=True, weight_decay=0.01, adamw=True),
    "adamw_fused": dict(fused=True, weight_decay=0.01, adamw=True),
}
# What a resume does with the optimizer state after optimizer.load_state_dict (bench's
# RestorePolicy): move_all = every state tensor to the device, `step` included (Lightning < 2.4's
# _optimizer_to_device); keep_step = all but `step` (Lightning >= 2.4); rebuild = nothing.
POLICIES = ("move_all", "keep_step", "rebuild")


def make_model(seed: int = 42) -> torch.nn.Module:
    torch.manual_seed(seed)
    layers: list[torch.nn.Module] = []
    for i in range(len(WIDTHS) - 1):
        layers.append(torch.nn.Linear(WIDTHS[i], WIDTHS[i + 1]))
        if i + 2 < len(WIDTHS):
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers).to(DEVICE)


def make_optimizer(impl: str, params) -> torch.optim.Optimizer:
    kwargs = dict(IMPLEMENTATIONS[impl])
    cls = torch.optim.AdamW if kwargs.pop("adamw", False) else torch.optim.Adam
    return cls(params, lr=1e-3, **kwargs)


def batch(index: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Pinned host batches, as a DataLoader(pin_memory=True) gives an accelerator."""
    gen = torch.Generator().manual_seed(7 * 1000003 + index)
    x = torch.randn(BATCH, WIDTHS[0], generator=gen)
    y = torch.randn(BATCH, WIDTHS[-1], generator=gen)
    return x.pin_memory(), y.pin_memory()


def train_step(model, optimizer, index: int) -> None:
    """One step with bench's phases (harness/runtime/trainer.cpp)."""
    with phase("train.step"):
        with phase("train.data"):
            x, y = batch(index)
            x, y = x.to(DEVICE, non_blocking=True), y.to(DEVICE, non_blocking=True)
        with phase("train.zero_grad"):
            optimizer.zero_grad(set_to_none=True)
        with phase("train.forward"):
            loss = F.mse_loss(model(x), y)
        with phase("train.backward"):
            loss.backward()
        with phase("train.grad_sync"):
            pass
        with phase("optimizer.step"):
            optimizer.step()


def measured_steps(model, optimizer, first: int, counts: harness_sim.Counts) -> None:
    with counts:
        for i in range(first, first + STEPS_BEFORE):
            with counts.step():
                train_step(model, optimizer, i)


def fresh_and_checkpoint(impl: str):
    """2N steps without interruption (the last N measured); the checkpoint of step N."""
    model = make_model()
    optimizer = make_optimizer(impl, model.parameters())
    for i in range(STEPS_BEFORE):
        train_step(model, optimizer, i)
    buffer = io.BytesIO()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, buffer)
    counts = harness_sim.count()
    measured_steps(model, optimizer, STEPS_BEFORE, counts)
    return counts, buffer.getvalue(), [p.detach().cpu() for p in model.parameters()]


def resumed(impl: str, checkpoint: bytes, policy: str):
    """A new model and optimizer restored from the checkpoint, then steps N+1..2N measured."""
    model = make_model(seed=1234)  # other initial values: the checkpoint must overwrite them
    optimizer = make_optimizer(impl, model.parameters())
    saved = torch.load(io.BytesIO(checkpoint), map_location="cpu")
    model.load_state_dict(saved["model"])
    optimizer.load_state_dict(saved["optimizer"])  # PyTorch places the state itself
    if policy != "rebuild":
        for state in optimizer.state.values():
            for key, value in state.items():
                if isinstance(value, torch.Tensor) and not (policy == "keep_step" and key == "step"):
                    state[key] = value.to(DEVICE)
    counts = harness_sim.count()
    measured_steps(model, optimizer, STEPS_BEFORE, counts)
    return counts, [p.detach().cpu() for p in model.parameters()]


def run_variants(scenario: str, impls=None) -> dict[str, tuple[harness_sim.Counts, bool | None]]:
    """The variants of bench's `scenario` ("resume_adam" or "fused_adam") with real torch.optim,
    by bench's variant names: counts, and whether a resumed run matched its fresh run bitwise."""
    out: dict[str, tuple[harness_sim.Counts, bool | None]] = {}
    if scenario == "resume_adam":
        impls, policies, resume_prefix = impls or ["foreach", "forloop"], POLICIES, "resume_"
    elif scenario == "fused_adam":
        impls = impls or ["forloop", "foreach", "fused", "capturable", "adamw_forloop",
                          "adamw_foreach", "adamw_fused"]
        policies, resume_prefix = ("move_all",), "resumed_"
    else:
        raise ValueError(f"unknown scenario {scenario!r}")
    for impl in impls:
        fresh, checkpoint, reference = fresh_and_checkpoint(impl)
        out[f"fresh/{impl}"] = (fresh, None)
        for policy in policies:
            counts, params = resumed(impl, checkpoint, policy)
            same = all(torch.equal(a, b) for a, b in zip(params, reference))
            out[f"{resume_prefix}{policy}/{impl}"] = (counts, same)
    return out


def bench_report(bench: str, scenario: str, variants: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = f"{tmp}/{scenario}.json"
        cmd = [bench, "--scenario", scenario, "--device", "sim", "--steps", str(STEPS_BEFORE),
               "--quiet", "--out", out]
        for v in variants:
            cmd += ["--variant", v]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(out) as f:
            return json.load(f)


def figures_of_counts(c: harness_sim.Counts) -> dict:
    return {"launches_by_op": c.launches_by_op, "steps": c.steps,
            "launch/step": c.per_step("launches"), "d2h/step": c.per_step("d2h"),
            "h2d/step": c.per_step("h2d"), "sync/step": c.per_step("syncs")}


def figures_of_report(report: dict, scenario: str, variant: str) -> dict | None:
    for s in report["scenarios"]:
        if s["name"] != scenario:
            continue
        for v in s["variants"]:
            if v["name"] == variant and v.get("status") == "ok":
                per = v["per_step"]
                return {"launches_by_op": v["launches_by_op"], "steps": v["measured_steps"],
                        "launch/step": per["launch.count"], "d2h/step": per["d2h.count"],
                        "h2d/step": per["h2d.count"], "sync/step": per["sync.count"]}
    return None


def compare(scenario: str, python: dict, report: dict) -> list[str]:
    """Rows of a table (python vs C++ for every variant) and the differences found."""
    print(f"\n{scenario}: torch.optim on sim (Python) vs the harness's runtime (C++, bench)")
    print(f"  {'variant':28} {'launch/step':>17} {'h2d/step':>11} {'d2h/step':>11} "
          f"{'sync/step':>11}  ops  resumed == fresh")
    problems = []
    for name, (counts, same) in python.items():
        py = figures_of_counts(counts)
        cpp = figures_of_report(report, scenario, name)
        if cpp is None:
            problems.append(f"{scenario} {name}: bench has no such variant that ran")
            continue
        cells = []
        for key in ("launch/step", "h2d/step", "d2h/step", "sync/step"):
            cells.append(f"{py[key]:g} | {cpp[key]:g}")
            if py[key] != cpp[key] or py["steps"] != cpp["steps"]:
                problems.append(f"{scenario} {name}: {key} python {py[key]:g} vs C++ {cpp[key]:g}")
        ops_equal = py["launches_by_op"] == cpp["launches_by_op"]
        if not ops_equal:
            diff = {op: (py["launches_by_op"].get(op, 0), cpp["launches_by_op"].get(op, 0))
                    for op in sorted(set(py["launches_by_op"]) | set(cpp["launches_by_op"]))
                    if py["launches_by_op"].get(op, 0) != cpp["launches_by_op"].get(op, 0)}
            problems.append(f"{scenario} {name}: launches by op (python, C++) differ: {diff}")
        if same is False:
            problems.append(f"{scenario} {name}: the resumed run does not match its fresh run")
        print(f"  {name:28} {cells[0]:>17} {cells[1]:>11} {cells[2]:>11} {cells[3]:>11}  "
              f"{'same' if ops_equal else 'DIFFER'}  {'-' if same is None else same}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", help="bench binary: also run the C++ side and compare")
    parser.add_argument("--out", help="write the Python side as a schema-v1 report")
    parser.add_argument("--scenario", action="append", choices=["resume_adam", "fused_adam"])
    args = parser.parse_args()
    problems = []
    for scenario in args.scenario or ["resume_adam", "fused_adam"]:
        python = run_variants(scenario)
        if args.out:
            out = args.out if len(args.scenario or []) == 1 else args.out.replace(
                ".json", f".{scenario}.json")
            harness_sim.write_report(out, {n: c for n, (c, _) in python.items()}, scenario=scenario,
                                     description=f"torch.optim on sim, as bench's {scenario}")
        if args.bench:
            problems += compare(scenario, python, bench_report(args.bench, scenario,
                                                               list(python)))
        else:
            for name, (counts, same) in python.items():
                print(f"  {scenario} {name:28} {figures_of_counts(counts)}")
    for p in problems:
        print("DIFFERENCE:", p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
