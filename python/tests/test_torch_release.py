"""Counts that differ between the torch releases harness_sim builds against (2.11 to 2.15), keyed
on the running torch (torch_release.h; docs/python.md, "Torch releases")."""
from __future__ import annotations

import torch

import harness_sim
from harness_sim._version import TORCH_RELEASE as RELEASE


def test_normal_with_a_tensor_std_syncs_before_2_14():
    # DistributionTemplates.h CHECK_NORMAL_TENSOR_STD: std.min().ge(0).item() in normal_impl and
    # again in normal_out_impl until 2.13; an _assert_async from 2.14 (#186508)
    mean, std = torch.zeros(4, device="sim"), torch.ones(4, device="sim")
    out = torch.empty(4, device="sim")
    with harness_sim.count() as c:
        torch.normal(mean, std)
        torch.normal(0.0, std, out=out)
        torch.normal(mean, 1.0)  # a number std: never read back
    reads = 0 if RELEASE >= (2, 14) else 3  # 2 for the functional call, 1 for out=
    assert c.syncs == reads
    assert c.launches_by_op == {"aten::normal": 3}
    assert sum(s.count for s in c.sync_sites if s.op == "aten::normal") == reads
