"""Torch's own estimate of the same FSDP2 step's device memory, for docs/full-size.md: the model of
examples/programs/fsdp2_llama.py, sharded the same way (fully_shard per block and at the root,
bf16 parameters, fp32 reduction), traced by torch's FSDPMemTracker under FakeTensorMode with a
fake process group of N ranks. Prints rank 0's peak by category, to set beside the peak
`python -m harness_sim run --compute shapes` reports (benchmarks/full_size.py).

FSDP2 asks CUDA for its current device and makes CUDA streams even under FakeTensorMode, so the
tracker needs CUDA: a GPU, or sim serving CUDA on a CPU machine (no tensor of the tracker's
reaches a device; the run counts nothing):

    python -m harness_sim run --as-cuda -- benchmarks/fsdp_mem_tracker.py --preset 8b --nproc 8

Not a test: a benchmark of another tool's estimate.
"""
from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.testing._internal.distributed.fake_pg import FakeStore

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "examples", "programs"))
from fsdp2_llama import PRESETS, Llama, train_step  # noqa: E402

GiB = 2 ** 30


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="8b")
    parser.add_argument("--nproc", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=1)
    args = parser.parse_args()
    cfg = PRESETS[args.preset]
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=args.nproc)
    device = torch.device("cuda", 0)
    if not torch.cuda.is_available():
        # FSDP2 asks CUDA for its current device and, in its first forward, makes CUDA streams
        # for its all-gathers -- even under FakeTensorMode (cudaErrorInsufficientDriver without
        # a GPU, torch 2.11).
        sys.exit("fsdp_mem_tracker: torch's FSDPMemTracker needs CUDA even under FakeTensorMode "
                 "(FSDP2 makes CUDA streams): run it on a GPU, or on a CPU machine under "
                 "`python -m harness_sim run --as-cuda -- benchmarks/fsdp_mem_tracker.py ...`")
    # The mesh outside the fake mode: it reads its ranks back from a tensor.
    mesh = DeviceMesh("cuda", list(range(args.nproc)))
    with FakeTensorMode():
        with torch.device("meta"):
            model = Llama(cfg)
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for layer in model.layers:
            fully_shard(layer, mesh=mesh, mp_policy=policy)
        fully_shard(model, mesh=mesh, mp_policy=policy)
        model.to_empty(device=device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
        tokens = torch.randint(0, cfg["vocab"], (args.batch_size, cfg["seq_len"] + 1),
                               device=device)
        tracker = FSDPMemTracker(model, optimizer)
        tracker.track_inputs((tokens,))
        with tracker:
            loss = None  # held across the next step, as fsdp2_llama.py holds it
            for step in range(2):
                loss = train_step(model, optimizer, tokens)
                if step == 0:
                    tracker.reset_mod_stats()
            del loss
        peak = tracker.get_tracker_snapshot("peak")
    stats = next(v for k, v in peak.items() if str(k).startswith("cuda"))
    print(f"{args.preset} on {args.nproc} ranks, FSDPMemTracker under FakeTensorMode, rank 0 peak:")
    for category, nbytes in sorted(stats.items(), key=lambda kv: -kv[1]):
        print(f"  {str(category):<32} {nbytes / GiB:8.2f} GiB  {nbytes:>15,} bytes")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
