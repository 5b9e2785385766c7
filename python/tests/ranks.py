"""Runs a function on N local ranks of sim, the way torch's own distributed tests do: one
process per rank (spawned), a FileStore rendezvous, rank r on sim:r. Each rank's return value
comes back to the caller in rank order."""
from __future__ import annotations

import multiprocessing
import os
import tempfile
import traceback


def _rank_main(fn, rank, world_size, store_path, backend, args, results):
    try:
        import torch
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
