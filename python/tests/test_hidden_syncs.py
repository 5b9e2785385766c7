"""The host syncs hidden inside CUDA's ops, as user code writes them, each a sync on sim (and
what does not block a GPU, none). On sim's own device, and on CUDA tensors where sim serves CUDA
(test_cuda_is_cuda runs this module again with HARNESS_SIM_AS_CUDA=device)."""
from __future__ import annotations

import pytest
import torch

import harness_sim
from harness_sim._device.mode import DEVICE_TYPE as DEVICE

# The hidden syncs people hunt with torch.cuda.set_sync_debug_mode, as user code writes them: each
# blocks the host on CUDA (PyTorch 2.11's sources; docs/counting.md, "Host syncs inside ops"), so each syncs
# on sim as often as there (once; repeat_interleave twice: the check of the repeats and the output
# size), attributed to the op whose CUDA kernel reads the device value back.
HIDDEN_SYNCS = {
    "nonzero": (lambda x, m: x.nonzero(), "aten::nonzero"),
    "masked_select": (lambda x, m: x.masked_select(m), "aten::masked_select"),
    "boolean_index": (lambda x, m: x[m], "aten::index"),
    "unique": (lambda x, m: torch.unique(x), "aten::_unique2"),
    "repeat_interleave": (lambda x, m: torch.repeat_interleave(m.long()), "aten::repeat_interleave"),
    "where_cond": (lambda x, m: torch.where(m), "aten::nonzero"),
    "argwhere": (lambda x, m: torch.argwhere(x), "aten::nonzero"),
    "pageable_non_blocking_d2h": (lambda x, m: torch.empty(5).copy_(x, non_blocking=True),
                                  "aten::copy_"),
}


@pytest.mark.parametrize("name", sorted(HIDDEN_SYNCS))
def test_a_hidden_sync_of_cuda_is_a_sync_on_sim(name):
    body, op = HIDDEN_SYNCS[name]
    x = torch.tensor([0.0, 2.0, 0.0, 3.0, 1.0], device=DEVICE)
    m = torch.tensor([1, 0, 1, 0, 1], device=DEVICE).bool()
    with harness_sim.count() as c:
        body(x, m)
    assert c.syncs == (2 if name == "repeat_interleave" else 1), c.sync_sites
    assert {s.op for s in c.sync_sites} == {op}


def test_what_does_not_block_a_gpu_is_not_a_sync():
    x = torch.tensor([0.0, 2.0, 0.0, 3.0, 1.0], device=DEVICE)
    m = torch.tensor([1, 0, 1, 0, 1], device=DEVICE).bool()
    pinned = torch.ones(5).pin_memory()
    with harness_sim.count() as c:
        x.is_set_to(x)                      # metadata
        torch.nonzero_static(x, size=5)     # fixed size: the count stays on the device
        x.index_select(0, m.nonzero_static(size=3).flatten())
        x.to("cpu", non_blocking=True)      # the output is pinned
        pinned.to(DEVICE, non_blocking=True)
        pinned.copy_(x, non_blocking=True)
        x.masked_fill(m, 0.0)               # a Python number: no read-back
        (x * 2).view(5, 1).t()
    assert c.syncs == 0, c.sync_sites
