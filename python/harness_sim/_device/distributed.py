"""torch.distributed on sim: a c10d backend named ``sim`` for sim tensors (Gloo on zero-copy host
aliases), through which every collective and every wait for one is counted.

With ``init_process_group("cpu:gloo,sim:sim")`` the group's CPU collectives (``barrier()``,
object collectives, collectives on CPU tensors) go to the CPU backend. So that they are counted
too, a group that has a sim backend puts its CPU tensors through the same counting backend (its
Gloo handles CPU tensors as they are): a collective on CPU tensors and ``barrier()`` block the
host and are counted as syncs; a wait for a collective on sim tensors is device-side, as NCCL's.
"""
from __future__ import annotations

import functools

import torch
import torch.distributed as dist

from .. import _C


def _create(store, rank, size, timeout):
    return _C.create_backend(store, rank, size, timeout)


def _count_cpu_collectives_too(pg) -> None:
    """Routes ``pg``'s CPU tensors through its counting sim backend, where it has one."""
    sim = None
    for device in ("sim", "cuda"):  # cuda: sim serves it (run --as-cuda)
        try:
            sim = pg._get_backend(torch.device(device))
            break
        except RuntimeError:
            continue
    if sim is None:
        return  # no sim backend in this group
    if not sim.name().startswith("counting("):
        return
    # The sim backend is registered as CUSTOM: registering CPU with that type makes the group
    # reuse it for CPU tensors (ProcessGroup::setBackend).
    pg._register_backend(torch.device("cpu"), dist.ProcessGroup.BackendType.CUSTOM, sim)


def _wrap_group_creation() -> None:
    c10d = dist.distributed_c10d
    helper = c10d._new_process_group_helper
    if getattr(helper, "_harness_sim", False):
        return

    @functools.wraps(helper)
    def new_process_group_helper(*args, **kwargs):
        pg, store = helper(*args, **kwargs)
        if isinstance(pg, dist.ProcessGroup):
            _count_cpu_collectives_too(pg)
        return pg, store

    new_process_group_helper._harness_sim = True
    c10d._new_process_group_helper = new_process_group_helper


def register_distributed_backend() -> None:
    """Registers the backend (idempotent). Then ``dist.init_process_group("cpu:gloo,sim:sim")``
    (or ``backend="sim"`` for sim tensors only) puts sim collectives through it, and the
    group's CPU collectives too."""
    if not dist.is_available():
        return
    if "sim" not in dist.Backend.backend_list:
        dist.Backend.register_backend("sim", _create, devices=["sim", "cuda"])
    _wrap_group_creation()
