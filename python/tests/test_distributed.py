"""Real torch.distributed code on 2 sim ranks, counted, against the C++ runtime's scenarios:
torch's DistributedDataParallel (and its communication hooks), torch's ZeroRedundancyOptimizer,
torchmetrics' Metric.sync(), and how waits for collectives count (NCCL's semantics)."""
from __future__ import annotations

import pytest
import torch
import torch.distributed as dist

import harness_sim
import ranks
from ranks import WIDTHS, mlp


def figures(c: harness_sim.Counts, steps: int = 1) -> dict:
    """Per step (or event): what the parity tests compare."""
    t = c.total
    return {"collectives": {k: (v["count"] / steps, v["bytes"] / steps)
                            for k, v in c.collectives.items()},
            "syncs": t["syncs"] / steps, "h2d": t["h2d"]["count"] / steps,
            "d2h": t["d2h"]["count"] / steps, "d2d": t["d2d"]["count"] / steps,
            "launches": t["launches"] / steps,
            "launches_by_op": {k: v / steps for k, v in t["launches_by_op"].items()},
            "collective_waits": t["collective_waits"] / steps,
            "stream_waits": t["stream_waits"] / steps}


# --- ReduceOp.AVG of integers, as NCCL computes it -----------------------------------------------
def _average(rank, world):
    ints = torch.tensor([3 + 2 * rank, -5 - rank, 7], device=f"sim:{rank}")  # int64
    with harness_sim.count() as c:
        dist.all_reduce(ints, op=dist.ReduceOp.AVG)
    floats = torch.tensor([1.0 + rank], device=f"sim:{rank}")
    dist.all_reduce(floats, op=dist.ReduceOp.AVG)
    work = dist.all_reduce(torch.full((2,), 5 + rank, device=f"sim:{rank}"),
                           op=dist.ReduceOp.AVG, async_op=True)
    return (ints.cpu().tolist(), str(ints.dtype), floats.cpu().tolist(),
            work.get_future().wait()[0].cpu().tolist(),
            {k: v["count"] for k, v in c.collectives.items()})


def test_integer_average_is_the_truncated_mean_as_on_nccl():
    # Gloo's AVG fails on integer tensors; NCCL's ncclAvg sums and divides (integer division).
    # Lightning's sync_dist=True reduces its int64 batch sizes this way on any backend but "gloo".
    for ints, dtype, floats, future, collectives in ranks.run(_average):
        assert ints == [int((3 + 5) / 2), int((-5 - 6) / 2), 7]  # [4, -5, 7]: toward zero
        assert dtype == "torch.int64"
        assert floats == [1.5]
        assert future == [5, 5]  # (5 + 6) / 2 truncated, through the work's future
        assert collectives == {"all_reduce": 1}


# --- waits for collectives, as NCCL has them ----------------------------------------------------
def _waits(rank, world):
    x = torch.ones(4, device=f"sim:{rank}")
    out = {}
    with harness_sim.count() as c:
        dist.all_reduce(x)
    out["device"] = figures(c)
    with harness_sim.count() as c:
        dist.all_reduce(torch.ones(4))  # a CPU tensor: the group's CPU backend (Gloo)
    out["host"] = figures(c)
    with harness_sim.count() as c:
        dist.barrier()
    out["barrier"] = figures(c)
    out["barrier_sites"] = [(s.op, s.reason) for s in c.sync_sites]
    work = dist.all_reduce(torch.ones(4, device=f"sim:{rank}"), async_op=True)
    result = work.get_future().wait()
    out["future"] = (str(result[0].device), result[0].cpu().tolist())
    return out


def test_collective_waits_are_device_side_and_cpu_collectives_and_barriers_sync():
    for rank, out in enumerate(ranks.run(_waits)):
        # On sim tensors: the stream waits (NCCL's work.wait()), the host does not.
        assert out["device"]["syncs"] == 0 and out["device"]["collective_waits"] == 1
        # The CPU backend's collectives of a "cpu:gloo,sim:sim" group are counted, and block.
        assert out["host"]["collectives"] == {"all_reduce": (1, 16)} and out["host"]["syncs"] == 1
        assert out["barrier"]["collectives"] == {"barrier": (1, 0)} and out["barrier"]["syncs"] == 1
        assert out["barrier_sites"] == [("barrier", "barrier")]
        # The future holds the sim tensor itself, reduced.
        assert out["future"] == (f"sim:{rank}", [2.0] * 4)


# --- DDP ---------------------------------------------------------------------------------------
def _ddp(rank, world, hook):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP
    device = torch.device("sim", rank)
    model = mlp(device)
    ddp = DDP(model, device_ids=[rank])
    if hook == "allreduce":
        ddp.register_comm_hook(None, default_hooks.allreduce_hook)
    elif hook == "fp16_compress":
        ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
    opt = torch.optim.Adam(ddp.parameters(), foreach=True)
    g = torch.Generator().manual_seed(1)
    batches = [ranks.batch(g, rank) for _ in range(6)]

    def step(x, y):
        # pinned, non-blocking: as the C++ runtime's batches come (no sync)
        x, y = (t.pin_memory().to(device, non_blocking=True) for t in (x, y))
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
        opt.zero_grad()

    for x, y in batches[:2]:  # DDP rebuilds its buckets after the first step: not measured
        step(x, y)
    with harness_sim.count() as c:
        for x, y in batches[2:]:
            with c.step():
                step(x, y)
    return figures(c, c.steps), [p.detach().cpu().tolist() for p in model.parameters()]


@pytest.mark.parametrize("hook", [None, "allreduce", "fp16_compress"])
def test_torch_ddp_trains_on_two_sim_ranks(hook):
    (f0, p0), (f1, p1) = ranks.run(_ddp, hook)
    assert p0 == p1  # replicas stay identical, bitwise
    grads = sum(p.numel() for p in mlp("cpu").parameters()) * 4
    expected_bytes = grads // 2 if hook == "fp16_compress" else grads
    for f in (f0, f1):
        assert f["collectives"] == {"all_reduce": (1, expected_bytes)}  # one bucket
        assert f["syncs"] == 0  # its wait is device-side
        assert f["stream_waits"] >= 1  # the reducer waits on the future: the stream waits


def test_torch_ddp_against_the_cpp_data_parallel_runtime(bench):
    """torch DDP (foreach Adam, the MLP, batch 64 over 2 ranks) against metric_sync's world2
    training steps, per rank and step: all-reduce count and bytes, bucket copies, launches."""
    (torch_rank0, _), _ = ranks.run(_ddp, None)
    cpp = ranks.bench_variants(bench, "--scenario", "metric_sync",
                               "--variant", "world2/strategy_owned")
    step = cpp["rank0/world2/strategy_owned"]["per_step"]
    print("torch DDP rank 0 per step:", torch_rank0)
    print("C++ runtime rank 0 per step (whole step):",
          {k: v for k, v in step.items() if k.startswith(("collective.", "d2d.", "launch."))})
    assert torch_rank0["collectives"]["all_reduce"] == (step["collective.all_reduce.count"],
                                                        step["collective.all_reduce.bytes"])
    assert torch_rank0["d2d"] == step["d2d.count"]  # the bucket copied back into the gradients
    # Launches by op differ by design of the C++ runtime (docs/python.md, "Parity with the real
    # libraries"): torch's reducer fills each bucket slot with mul_out(grad, 1/world) (one
    # aten::mul per gradient); the runtime concatenates (aten::cat) and scales once.
    assert torch_rank0["launches_by_op"]["aten::mul"] == len(WIDTHS[1:]) * 2


# --- FSDP2 --------------------------------------------------------------------------------------
def _fsdp2(rank, world):
    from torch.distributed.fsdp import fully_shard
    device = torch.device("sim", rank)
    model = mlp(device)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)  # a unit per Linear, as the C++ sharded runtime's
    fully_shard(model)
    opt = torch.optim.Adam(model.parameters(), foreach=True)
    g = torch.Generator().manual_seed(1)

    def step():
        x, y = (t.pin_memory().to(device, non_blocking=True) for t in ranks.batch(g, rank))
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        opt.zero_grad()

    step()  # the first step sets FSDP's state up lazily: not measured
    with harness_sim.count() as c:
        for _ in range(3):
            with c.step():
                step()
    return figures(c, c.steps)


def test_torch_fsdp2_against_the_cpp_sharded_runtime(bench):
    """torch's FSDP2 (fully_shard per Linear, reshard after forward) on 2 sim ranks against the
    C++ sharded runtime's training steps (sharded_setup), per rank and step: every unit gathered
    for forward and again for backward, its gradient reduce-scattered."""
    torch_rank0, torch_rank1 = ranks.run(_fsdp2)
    cpp = ranks.bench_variants(bench, "--scenario", "sharded_setup", "--variant", "meta_init")
    step = cpp["rank0/meta_init"]["per_step"]
    units = len(WIDTHS) - 1
    for f in (torch_rank0, torch_rank1):
        assert f["collectives"]["all_gather"][0] == 2 * units == step["collective.all_gather.count"]
        assert f["collectives"]["reduce_scatter"][0] == units == step[
            "collective.reduce_scatter.count"]
        assert f["syncs"] == 0 == step["sync.count"]  # every collective wait is device-side


# --- gradient accumulation ----------------------------------------------------------------------
MICRO_BATCHES = 4


def _accumulate(rank, world, wrapper, sync_every):
    """MICRO_BATCHES micro-batches a step under torch's DDP or FSDP2 (fully_shard per Linear), the
    gradient sync left on for every one (`sync_every`) or turned off on all but the last (DDP's
    no_sync(), FSDP2's set_requires_gradient_sync(False)), as grad_accumulation's variants."""
    import contextlib
    device = torch.device("sim", rank)
    model = mlp(device)
    if wrapper == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        trained = DDP(model, device_ids=[rank])

        def sync(on):
            return contextlib.nullcontext() if on else trained.no_sync()
    else:
        from torch.distributed.fsdp import fully_shard
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer)
        trained = fully_shard(model)

        def sync(on):
            trained.set_requires_gradient_sync(on)
            return contextlib.nullcontext()
    opt = torch.optim.Adam(trained.parameters(), foreach=True)
    g = torch.Generator().manual_seed(1)

    def step():
        for m in range(MICRO_BATCHES):
            x, y = (t.pin_memory().to(device, non_blocking=True) for t in ranks.batch(g, rank))
            with sync(sync_every or m == MICRO_BATCHES - 1):
                (torch.nn.functional.mse_loss(trained(x), y) / MICRO_BATCHES).backward()
        opt.step()
        opt.zero_grad()

    for _ in range(2):  # DDP rebuilds its buckets after the first step, FSDP2 sets up lazily
        step()
    with harness_sim.count() as c:
        for _ in range(3):
            with c.step():
                step()
    return figures(c, c.steps)


@pytest.mark.parametrize("wrapper,runtime,reduction", [("ddp", "ddp", "all_reduce"),
                                                       ("fsdp2", "sharded", "reduce_scatter")])
def test_torch_gradient_accumulation_against_grad_accumulation(bench, wrapper, runtime,
                                                               reduction):
    """torch's DDP and FSDP2 accumulating 4 micro-batches a step on 2 sim ranks against the C++
    grad_accumulation scenario, per rank and optimizer step: the gradient reductions (count and
    bytes) with the sync on for every micro-batch and only for the last, and the gathers."""
    cpp = ranks.bench_variants(bench, "--scenario", "grad_accumulation", "--variant",
                 f"{runtime}/micro{MICRO_BATCHES}/*")
    for sync_every in (True, False):
        name = f"rank0/{runtime}/micro{MICRO_BATCHES}/sync_{'every' if sync_every else 'last'}"
        step = cpp[name]["per_step"]
        for f in ranks.run(_accumulate, wrapper, sync_every):
            assert f["collectives"][reduction] == (step[f"collective.{reduction}.count"],
                                                   step[f"collective.{reduction}.bytes"]), name
            assert f["collectives"].get("all_gather", (0, 0))[0] == step.get(
                "collective.all_gather.count", 0), name
            assert f["syncs"] == 0 == step["sync.count"], name
    reductions = {s: cpp[f"rank0/{runtime}/micro{MICRO_BATCHES}/sync_{s}"]["per_step"][
        f"collective.{reduction}.count"] for s in ("every", "last")}
    assert reductions["every"] == MICRO_BATCHES * reductions["last"]


# --- ZeRO ---------------------------------------------------------------------------------------
def _zero(rank, world):
    from torch.distributed.optim import ZeroRedundancyOptimizer
    device = torch.device("sim", rank)
    model = mlp(device)
    opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam,
                                  foreach=True)
    g = torch.Generator().manual_seed(1)
    for _ in range(5):
        x, y = torch.randn(32, WIDTHS[0], generator=g), torch.randn(32, WIDTHS[-1], generator=g)
        torch.nn.functional.mse_loss(model(x.to(device)), y.to(device)).backward()
        for p in model.parameters():  # a data parallel step averages gradients first
            dist.all_reduce(p.grad)
        opt.step()
        opt.zero_grad()
    with harness_sim.count() as c:
        for _ in range(5):
            with c.step():
                opt.consolidate_state_dict(to=0)
    return figures(c, c.steps)


def test_torch_zero_consolidate_state_dict_against_zero_broadcast(bench):
    """torch 2.11's ZeroRedundancyOptimizer.consolidate_state_dict against zero_broadcast's
    consolidate/object, per rank and consolidation."""
    torch_side = ranks.run(_zero)
    cpp = ranks.bench_variants(bench, "--scenario", "zero_broadcast",
                               "--variant", "consolidate/object")
    for rank, f in enumerate(torch_side):
        s = cpp[f"rank{rank}/consolidate/object"]["per_step"]
        mine = {"broadcasts": f["collectives"]["broadcast"][0], "syncs": f["syncs"],
                "h2d": f["h2d"], "d2h": f["d2h"], "launches": f["launches"]}
        theirs = {"broadcasts": s["collective.broadcast.count"], "syncs": s["sync.count"],
                  "h2d": s["h2d.count"], "d2h": s["d2h.count"], "launches": s["launch.count"]}
        print(f"rank {rank}: torch {mine} | bench {theirs}")
        assert mine == theirs, (rank, mine, theirs)


# --- torchmetrics ------------------------------------------------------------------------------
def _metrics(rank, world):
    import torchmetrics
    device = torch.device("sim", rank)
    mean, cat = torchmetrics.MeanMetric().to(device), torchmetrics.CatMetric().to(device)
    g = torch.Generator().manual_seed(rank)
    per_save = []
    for _ in range(2):  # two saves, every K = 5 batches, as metric_sync's window has
        for _ in range(5):
            value = torch.rand(1, generator=g).to(device)
            mean.update(value.squeeze(), weight=64)
            cat.update(value)
        with harness_sim.count() as c:
            mean.sync()
            cat.sync()
        mean.unsync()
        cat.unsync()
        per_save.append(figures(c))
    return per_save


def test_torchmetrics_sync_against_metric_sync(bench):
    """torchmetrics' real Metric.sync() of a MeanMetric and a CatMetric on 2 sim ranks against
    what metric_sync's pre-fix trainer counts per save (phase checkpoint.metric_sync)."""
    torch_side = ranks.run(_metrics)
    cpp = ranks.bench_variants(bench, "--scenario", "metric_sync",
                               "--variant", "world2/trainer_fault_tolerant")
    for rank, saves in enumerate(torch_side):
        n = len(saves)
        mine = {"barriers": sum(s["collectives"].get("barrier", (0, 0))[0] for s in saves) / n,
                "all_gathers": sum(s["collectives"]["all_gather"][0] for s in saves) / n,
                "syncs": sum(s["syncs"] for s in saves) / n,
                "h2d": sum(s["h2d"] for s in saves) / n, "d2h": sum(s["d2h"] for s in saves) / n,
                "launches": sum(s["launches"] for s in saves) / n}
        phase = cpp[f"rank{rank}/world2/trainer_fault_tolerant"]["phases"]["checkpoint.metric_sync"]
        theirs = {"barriers": phase["collective.barrier.count"] / 2,
                  "all_gathers": phase["collective.all_gather.count"] / 2,
                  "syncs": phase["sync.count"] / 2, "h2d": phase["h2d.count"] / 2,
                  "d2h": phase["d2h.count"] / 2, "launches": phase["launch.count"] / 2}
        print(f"rank {rank}: torchmetrics {mine} | bench {theirs}")
        assert mine == theirs, (rank, mine, theirs)
