"""torch.distributed on sim: a c10d backend named ``sim`` for sim tensors (Gloo on zero-copy host
aliases), through which every collective and every wait for one is counted."""
from __future__ import annotations

import torch.distributed as dist

from . import _C


def _create(store, rank, size, timeout):
    return _C.create_backend(store, rank, size, timeout)


def register_distributed_backend() -> None:
    """Registers the backend (idempotent). Then ``dist.init_process_group("cpu:gloo,sim:sim")``
    (or ``backend="sim"`` for sim tensors only) puts sim collectives through it."""
    if not dist.is_available() or "sim" in dist.Backend.backend_list:
        return
    dist.Backend.register_backend("sim", _create, devices=["sim"])
