"""What the catalogue's programs share: run a training step written two ways (the pathology and
its fix) for a few steps each on sim, counted, print their per-step cost side by side, and write
one report with both as variants (``--out``), which ``bench compare`` and the program's gate read.

A program calls ``main(__doc__, variants)`` with ``variants`` a dict name -> ``make()``, where
``make()`` builds its model and returns ``step()``, one training step. The first step of each is
a warm-up (the optimizer's state is created): not counted."""
from __future__ import annotations

import argparse
import sys

import torch

import harness_sim

STEPS = 10


def run(make) -> harness_sim.Counts:
    torch.manual_seed(0)
    step = make()
    step()  # warm-up: optimizer state, lazy set-up
    with harness_sim.count() as c:
        for _ in range(STEPS):
            with c.step():
                step()
    return c


def main(doc: str, variants: dict, scenario: str) -> int:
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("--out", help="write a schema-v1 report of both variants here")
    args = parser.parse_args()
    counted = {name: run(make) for name, make in variants.items()}
    print(doc.strip().splitlines()[0])
    print(f"  {'variant':<28} {'launch/step':>11} {'sync/step':>9} {'H2D/step':>8} {'D2H/step':>8}")
    for name, c in counted.items():
        print(f"  {name:<28} {c.per_step('launches'):>11g} {c.per_step('syncs'):>9g} "
              f"{c.per_step('h2d'):>8g} {c.per_step('d2h'):>8g}")
        for site in c.sync_sites:
            print(f"      {site}")
    if args.out:
        harness_sim.write_report(args.out, counted, scenario=scenario,
                                 description=doc.strip().splitlines()[0],
                                 measured_window=f"{STEPS} training steps after one warm-up step")
    return 0


def mlp(device: str = "sim") -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 4)).to(device)


def batch(device: str = "sim"):
    return torch.randn(64, 32, device=device), torch.randn(64, 4, device=device)


if __name__ == "__main__":
    sys.exit("run one of the catalogue's programs, not this module")
