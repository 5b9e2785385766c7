"""What the tests on several sim ranks share (test_distributed.py, test_deepspeed.py): ``run``
runs a function on N local ranks of sim, the way torch's own distributed tests do (one process
per rank, spawned; a FileStore rendezvous; rank r on sim:r), each rank's return value coming back
in rank order; each rank trains the scenarios' MLP (``mlp``) on its rows of a global batch
(``batch``); and ``bench_variants`` runs the C++ side to compare with, by variant name
(``rank0/...``, ``rank1/...``)."""
from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import tempfile
import traceback

import torch

WIDTHS = [32, 64, 64, 32, 16, 4]  # the scenarios' small MLP (bench's `small` preset)
GLOBAL_BATCH = 64  # a step's batch over the 2 ranks: 32 rows each


def mlp(device="cpu") -> torch.nn.Module:
    """The scenarios' MLP, seeded alike on every rank, on `device`."""
    torch.manual_seed(0)
    layers = []
    for i in range(len(WIDTHS) - 1):
        layers.append(torch.nn.Linear(WIDTHS[i], WIDTHS[i + 1]))
        if i < len(WIDTHS) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers).to(device)


def batch(generator: torch.Generator, rank: int, world_size: int = 2):
    """(inputs, targets) of `rank`'s rows of the next global batch `generator` draws (on the CPU;
    every rank draws the whole batch, so the ranks' generators stay alike)."""
    rows = GLOBAL_BATCH // world_size
    mine = slice(rank * rows, (rank + 1) * rows)
    return (torch.randn(GLOBAL_BATCH, WIDTHS[0], generator=generator)[mine],
            torch.randn(GLOBAL_BATCH, WIDTHS[-1], generator=generator)[mine])


def bench_variants(bench: str, *args: str) -> dict:
    """``bench --device sim ARGS``'s report: its first scenario's variants by name."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        subprocess.run([bench, "--device", "sim", "--out", out, "--quiet", *args], check=True,
                       capture_output=True, text=True, timeout=300)
        with open(out) as f:
            report = json.load(f)
    return {v["name"]: v for v in report["scenarios"][0]["variants"]}


def _rank_main(fn, rank, world_size, store_path, backend, args, results):
    try:
        import torch.distributed as dist

        import harness_sim

        torch.sim.set_device(rank)
        harness_sim._C.set_home_device(rank)  # copies to other ranks' devices count as such
        store = dist.FileStore(store_path, world_size)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size)
        try:
            results.put((rank, fn(rank, world_size, *args), None))
        finally:
            dist.destroy_process_group()
    except BaseException:  # noqa: BLE001  (reported to the parent, which fails the test)
        results.put((rank, None, traceback.format_exc()))


def run(fn, *args, world_size: int = 2, backend: str = "cpu:gloo,sim:sim", timeout: float = 120):
    """``fn(rank, world_size, *args)`` on every rank; returns their results, rank 0 first.
    ``fn`` must be importable by module and name (spawned processes import it)."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        procs = [context.Process(target=_rank_main,
                                 args=(fn, r, world_size, store, backend, args, results))
                 for r in range(world_size)]
        for p in procs:
            p.start()
        out, errors = {}, []
        try:
            for _ in procs:
                rank, value, error = results.get(timeout=timeout)
                if error:
                    errors.append(f"rank {rank}:\n{error}")
                out[rank] = value
        finally:
            for p in procs:
                p.join(timeout=10)
                if p.is_alive():
                    p.kill()
        if errors:
            raise AssertionError("\n".join(errors))
        return [out[r] for r in range(world_size)]
