"""Programs not written for the harness, counted by `python -m harness_sim run`: Lightning's own
demos by accelerator name, and a loop written for CUDA (--as-cuda)."""
from __future__ import annotations

import json
import os

import pytest

from conftest import REPO, site_counts
from harness_sim._run import main as run

PROGRAMS = REPO / "examples" / "programs"


def _steps(path) -> dict:
    (scenario,) = json.loads(open(path).read())["scenarios"]
    return {v["name"]: v for v in scenario["variants"]}


def _run_process(tmp_path, *args, cwd=None, env=None):
    """`python -m harness_sim run ARGS` in a process of its own (Lightning's DDP starts ranks by
    running the program again, which a run inside pytest's process would not survive; and
    `--as-cuda` chooses the device sim serves when the process starts), with `env`'s variables
    added to this process's."""
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "harness_sim", "run", *args], cwd=cwd or tmp_path,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
                          env=dict(os.environ, **(env or {})))


def _as_cuda(tmp_path, *args, mode="device", env=None, status=0):
    """`python -m harness_sim run --as-cuda ARGS` as a user runs it: sim serves the CUDA device
    type itself (issue 50), or with mode "map" (HARNESS_SIM_AS_CUDA=map) CUDA's names are mapped
    to sim. Asserts the exit status; returns the finished process."""
    r = _run_process(tmp_path, "--as-cuda", *args,
                     env={**(env or {}), **({"HARNESS_SIM_AS_CUDA": "map"} if mode == "map" else {})})
    assert r.returncode == status, r.stdout[-3000:] + r.stderr[-3000:]
    return r


def test_trainer_accelerator_sim_by_name():
    import harness_sim  # noqa: F401  (registers "sim" once Lightning is imported)
    from lightning.pytorch import Trainer
    from lightning.pytorch.accelerators import AcceleratorRegistry
    from lightning.pytorch.demos.boring_classes import BoringModel
    assert "sim" in AcceleratorRegistry
    model = BoringModel()
    trainer = Trainer(accelerator="sim", devices=1, max_steps=2, logger=False,
                      enable_checkpointing=False, enable_progress_bar=False,
                      enable_model_summary=False, limit_val_batches=0)
    trainer.fit(model)
    assert trainer.global_step == 2 and trainer.strategy.root_device.type == "sim"


def test_boring_model_per_step(tmp_path):
    out = tmp_path / "boring.json"
    assert run(["--out", str(out), "--skip-steps", "2", "--",
                str(PROGRAMS / "lightning_demos.py"), "--model", "boring"]) == 0
    steps = _steps(out)["steps"]
    assert steps["measured_steps"] == 6
    # Pinned: SGD on one Linear(32, 2), batch H2D each step, no sync in a training step; two
    # validation runs (2 batches each, every 4 steps) add their batches' H2D copies.
    assert steps["per_step"]["sync.count"] == 0
    assert steps["total"]["h2d.count"] == 8            # 6 training + 2 validation batches
    assert steps["total"]["launch.count"] == 66
    # Lightning's hooks are phases.
    assert {"training_step", "backward", "optimizer_step", "zero_grad",
            "validation", "validation_step"} <= set(steps["phases"])
    assert steps["phases"]["backward"]["launch.count"] > 0


def test_transformer_demo_on_random_tokens_steps_from_lightning(tmp_path):
    out = tmp_path / "transformer.json"
    assert run(["--out", str(out), "--steps-from", "lightning", "--", 
                str(PROGRAMS / "lightning_demos.py"), "--model", "transformer",
                "--max-steps", "3"]) == 0
    steps = _steps(out)["steps"]
    assert steps["measured_steps"] == 2
    # Pinned, and found by this test: the demo builds its causal mask on the host and copies it
    # in every forward (a blocking H2D), and nn.Transformer's _detect_is_causal_mask reads it
    # back (.item()): two syncs per step, both in training_step.
    assert steps["per_step"]["sync.count"] == 2
    assert steps["per_step"]["h2d.count"] == 3          # input and target tokens, the mask
    # The ops CUDA runs (issue 36): per step 12 native_layer_norm where its composite ran 12
    # native_batch_norm + 12 addcmul, and 6 memory-efficient attention kernels (dropout inside)
    # where the math path ran 36 bmm, 6 _softmax, 8 where, 6 native_dropout, ...: 420 before.
    assert steps["per_step"]["launch.count"] == 282
    assert steps["launches_by_op"]["aten::_scaled_dot_product_efficient_attention"] == 12
    assert steps["launches_by_op"]["aten::native_layer_norm"] == 24
    sites = site_counts(steps, "phase", "op", "reason")
    assert sites == {("training_step", "aten::_local_scalar_dense", "item"): 2,
                     ("training_step", "aten::copy_", "blocking copy H2D"): 2}


def test_lightning_cli_program_by_accelerator_name(tmp_path):
    # A LightningCLI program as a user writes one, run unchanged: `--trainer.accelerator sim`
    # resolves through Lightning's AcceleratorRegistry, where importing harness_sim put "sim".
    from lightning.pytorch.cli import _JSONARGPARSE_SIGNATURES_AVAILABLE as cli_available
    if not cli_available:
        pytest.skip(f"LightningCLI needs jsonargparse[signatures] (python/requirements-extra.txt): "
                    f"{cli_available}")
    out, trace = tmp_path / "cli.json", tmp_path / "cli_trace.json"
    assert run(["--steps-from", "lightning", "--out", str(out), "--trace", str(trace), "--",
                str(PROGRAMS / "lightning_cli.py"), "fit", "--trainer.accelerator", "sim",
                "--trainer.devices", "1", "--trainer.max_steps", "8",
                "--trainer.default_root_dir", str(tmp_path)]) == 0
    assert list(tmp_path.glob("lightning_logs/version_0/checkpoints/*.ckpt"))  # fit ran to its end
    variants = _steps(out)
    steps = variants["steps"]
    assert steps["measured_steps"] == 7  # 8 training batches, the first one --skip-steps'
    # Pinned: DemoModel (Linear(32, 10), relu, sum) with foreach Adam, batch size 1: per step one
    # H2D (the batch), no sync, and one D2D: Lightning's closure keeps the loss as
    # `closure_loss.detach().clone()` (loops/optimization/automatic.py), inside Adam.step's
    # record_function since Lightning calls optimizer.step(closure).
    per_step = {k: steps["per_step"][k] for k in
                ("launch.count", "sync.count", "h2d.count", "d2h.count", "d2d.count")}
    assert per_step == {"launch.count": 16, "sync.count": 0, "h2d.count": 1, "d2h.count": 0,
                        "d2d.count": 1}
    launches = {name: p["launch.count"] for name, p in steps["phases"].items()
                if p["launch.count"]}
    assert launches == {"training_step": 21, "backward": 35, "Optimizer.step#Adam.step": 56}
    assert steps["phases"]["Optimizer.step#Adam.step"]["d2d.bytes"] == 7 * 4
    # Lightning's set-up before the first step syncs (4 item(), 4 blocking H2D); no step does.
    assert variants["before_steps"]["total"]["sync.count"] == 8
    # The trace shows the same steps, and Lightning's hooks as phases.
    events = json.loads(trace.read_text())["traceEvents"]
    assert sum(e.get("cat") == "step" for e in events) == 7
    assert {"training_step", "backward", "optimizer_step"} <= \
        {e["name"] for e in events if e.get("cat") == "phase"}


@pytest.mark.release
@pytest.mark.parametrize("mode, device", [("device", "cuda:0"), ("map", "sim:0")])
def test_cuda_loop_as_cuda(tmp_path, mode, device):
    # the same counts whether sim serves CUDA itself or CUDA's names are mapped to sim
    out = tmp_path / "cuda.json"
    printed = _as_cuda(tmp_path, "--out", str(out), "--", str(PROGRAMS / "cuda_loop.py"),
                       mode=mode).stdout
    assert f"True {device}" in printed  # memory_allocated() > 0 and the model's device
    steps = _steps(out)["steps"]
    assert steps["measured_steps"] == 5
    sites = site_counts(steps, "op", "reason")
    assert sites == {("aten::_local_scalar_dense", "item"): 5,
                     ("aten::copy_", "blocking copy H2D"): 10,
                     ("aten::index", "boolean mask index: count read by the host (nonzero)"): 5,
                     # the mask index's backward (index_put_ with the mask) reads it again
                     ("aten::_index_put_impl_",
                      "boolean mask index: count read by the host (nonzero)"): 5}
    assert steps["per_step"]["sync.count"] == 5


@pytest.mark.release
def test_amp_cnn_as_cuda_counts_the_ops_cuda_runs(tmp_path):
    # Conv2d + BatchNorm2d blocks, fp16 autocast, GradScaler("cuda"), SGD with momentum
    out = tmp_path / "cnn.json"
    _as_cuda(tmp_path, "--out", str(out), "--", str(PROGRAMS / "cuda_amp_cnn.py"))
    steps = _steps(out)["steps"]
    # 6 iterations, 5 optimizer steps: the scaler's first scale (65536) overflows fp16 and
    # GradScaler skips that step, as on CUDA; run skips the first step it counts
    assert steps["measured_steps"] == 4
    ops = steps["launches_by_op"]
    assert ops["aten::cudnn_convolution"] == ops["aten::convolution_backward"] == 10
    # fp16 input, fp32 weight: cuDNN's batch norm (Normalization.cpp's use_cudnn)
    assert ops["aten::cudnn_batch_norm"] == ops["aten::cudnn_batch_norm_backward"] == 10
    assert ops["aten::_amp_foreach_non_finite_check_and_unscale_"] == 5
    assert ops["aten::_amp_update_scale_"] == 5
    assert "aten::native_batch_norm" not in ops and "aten::convolution_overrideable" not in ops
    sites = site_counts(steps, "op", "reason")
    # per iteration: the scaler's found_inf .item() and the print's loss.item(); x and y copied
    assert sites == {("aten::_local_scalar_dense", "item"): 10,
                     ("aten::copy_", "blocking copy H2D"): 10}


@pytest.mark.release
def test_lstm_language_model_as_cuda_is_one_cudnn_rnn_per_step(tmp_path):
    # Embedding, a 2-layer LSTM with dropout, bf16 autocast, clip_grad_norm_, the loss kept on
    # the device and read every 3 steps
    out = tmp_path / "lm.json"
    _as_cuda(tmp_path, "--out", str(out), "--", str(PROGRAMS / "cuda_lstm_lm.py"))
    steps = _steps(out)["steps"]
    assert steps["measured_steps"] == 5
    ops = steps["launches_by_op"]
    assert ops["aten::_cudnn_rnn"] == ops["aten::_cudnn_rnn_backward"] == 5
    assert ops["aten::index_select"] == ops["aten::embedding_dense_backward"] == 5
    assert ops["aten::_foreach_norm"] == 5  # clip_grad_norm_: no sync of its own
    # the flat fp16 weight buffer AutocastRNN.cpp makes every call, and h0, c0
    assert ops["aten::zero_"] == 3 * 5 + 1  # + total_loss.zero_() at the read
    sites = site_counts(steps, "op", "reason")
    assert sites == {("aten::_local_scalar_dense", "item"): 1}  # math.exp(mean) at step 6
    # corpus[step].to(device, non_blocking=True) from pageable memory: a copy, not a sync
    assert steps["total"]["h2d.count"] == 5 and steps["total"]["sync.count"] == 1


@pytest.mark.release
def test_cuda_idioms_run_unchanged_as_on_one_h100(tmp_path, monkeypatch):
    # is_bf16_supported at import, torch.accelerator, device properties, a CUDAGraph annotation,
    # Adam (its step asks is_current_stream_capturing), clip_grad_norm_'s check
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    out = tmp_path / "idioms.json"
    captured = _as_cuda(tmp_path, "--out", str(out), "--", str(PROGRAMS / "cuda_idioms.py"))
    assert "1 x NVIDIA H100 80GB HBM3, sm 9.0, 79 GiB, 132 SMs, torch.bfloat16" in captured.stdout
    assert "done cuda:0" in captured.stdout
    steps = _steps(out)["steps"]
    (site,) = steps["sync_sites"]
    assert (site["op"], site["reason"], site["count"]) == ("aten::_local_scalar_dense", "item", 4)
    assert steps["launches_by_op"]["aten::_foreach_norm"] == 4
    # the site names torch's line that syncs (clip_grad_norm_'s nonfinite check), never the
    # TorchFunctionMode of --as-cuda under it
    assert "cuda_idioms.py:31 in <module> (torch/nn/utils/clip_grad.py:" in captured.stderr
    assert "_cuda/as_cuda.py" not in captured.stderr


@pytest.mark.release
def test_gaussian_policy_samples_with_a_sync_before_torch_2_14_only(tmp_path):
    # torch.normal(mean, std) with a tensor std: std.min().ge(0).item() twice per call on CUDA
    # before 2.14, an _assert_async from 2.14 (the upgrade check's example, docs/python.md); the
    # three per step torch.distributions.Normal's argument checks make are there in both
    from harness_sim._version import TORCH_RELEASE
    out = tmp_path / "policy.json"
    _as_cuda(tmp_path, "--out", str(out), "--", str(PROGRAMS / "cuda_gaussian_policy.py"))
    steps = _steps(out)["steps"]
    assert steps["measured_steps"] == 5
    normal_reads = 0 if TORCH_RELEASE >= (2, 14) else 2 * 5
    sites = site_counts(steps, "op")
    assert sites.get(("aten::normal",), 0) == normal_reads
    assert sites[("aten::_local_scalar_dense",)] == 3 * 5
    assert steps["total"]["sync.count"] == normal_reads + 3 * 5


def test_as_cuda_device_count_is_one_gpu_unless_cuda_visible_devices_names_more(
        tmp_path, monkeypatch):
    prog = tmp_path / "p.py"
    prog.write_text("import torch\n"
                    "print('count', torch.cuda.device_count(), torch.accelerator.device_count())\n"
                    "print('capturing', torch.cuda.is_current_stream_capturing())\n"
                    "class MyGraph(torch.cuda.CUDAGraph):\n    pass\n"
                    "print('isinstance', isinstance(object(), torch.cuda.CUDAGraph))\n"
                    "free, total = torch.cuda.mem_get_info()\n"
                    "print('mem', total // 2**30, free <= total)\n")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    printed = _as_cuda(tmp_path, "--", str(prog)).stdout
    assert "count 1 1" in printed and "capturing False" in printed
    assert "isinstance False" in printed and "mem 79 True" in printed
    printed = _as_cuda(tmp_path, "--", str(prog), env={"CUDA_VISIBLE_DEVICES": "0,1,2"}).stdout
    assert "count 3 3" in printed


def test_torchvision_resnet_as_cuda(tmp_path):
    # torchvision's own ResNet-18 and transforms, channels-last, bf16 autocast, cosine schedule
    pytest.importorskip("torchvision", reason="torchvision (python/requirements-extra-torch2.11.txt) "
                        "is not installed; torch 2.15 has no torchvision release on PyPI yet")
    out = tmp_path / "resnet.json"
    _as_cuda(tmp_path, "--out", str(out), "--", str(PROGRAMS / "torchvision_resnet.py"))
    steps = _steps(out)["steps"]
    assert steps["measured_steps"] == 4
    per_step = {op: n // 4 for op, n in steps["launches_by_op"].items()}
    # 20 convolutions (17 in the blocks, 3 downsamples) by cuDNN; their bf16 outputs make batch
    # norm's input bf16, which cuDNN's batch norm refuses: native_batch_norm, as on CUDA
    assert per_step["aten::cudnn_convolution"] == per_step["aten::convolution_backward"] == 20
    assert per_step["aten::native_batch_norm"] == 20 and "aten::cudnn_batch_norm" not in per_step
    sites = site_counts(steps, "op", "reason")
    # two prints in the window, each formatting two device tensors (Tensor.__format__ -> item)
    assert sites == {("aten::_local_scalar_dense", "item"): 4}
    assert steps["total"]["h2d.count"] == 8  # images and labels, non-blocking: copies, no syncs


@pytest.mark.parametrize("accelerator", ["gpu", "cuda", "auto"])
def test_lightning_accelerator_gpu_as_cuda_trains_on_sim_as_accelerator_sim(tmp_path, accelerator):
    # Lightning's own CUDAAccelerator on CUDA devices (sim's), counted as accelerator="sim" is
    gpu, sim = tmp_path / "gpu.json", tmp_path / "sim.json"
    _as_cuda(tmp_path, "--out", str(gpu), "--skip-steps", "2", "--",
             str(PROGRAMS / "lightning_demos.py"), "--model", "boring", "--accelerator", accelerator)
    assert run(["--out", str(sim), "--skip-steps", "2", "--",
                str(PROGRAMS / "lightning_demos.py"), "--model", "boring"]) == 0
    as_gpu, as_sim = _steps(gpu)["steps"], _steps(sim)["steps"]
    assert as_gpu["measured_steps"] == as_sim["measured_steps"] == 6
    assert as_gpu["per_step"] == as_sim["per_step"]
    assert as_gpu["launches_by_op"] == as_sim["launches_by_op"]


@pytest.mark.parametrize("call, named", [
    ("torch.cuda.CUDAGraph()", "torch.cuda.CUDAGraph"),
    ("import os; os.environ['CUDA_VISIBLE_DEVICES'] = '0,1'\n"
     "torch.nn.DataParallel(torch.nn.Linear(2, 2).cuda())(torch.ones(4, 2).cuda())",
     "nn.DataParallel over several devices"),
])
def test_as_cuda_refuses_what_sim_cannot_run(tmp_path, call, named):
    prog = tmp_path / "p.py"
    prog.write_text(f"import torch\n{call}\n")
    err = _as_cuda(tmp_path, "--", str(prog), env={"CUDA_VISIBLE_DEVICES": "0"}, status=3).stderr
    assert f"{named} is not supported on sim" in err


TRITON_KERNEL = """\
import torch, triton, triton.language as tl
import torch.utils._triton as probes


@triton.jit  # defined when the module is imported, as torchtitan's MoE kernels are
def add_one(x_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) + 1, mask=i < n)


x = torch.ones(8, device="cuda")
print("has_triton", probes.has_triton(), "sum", (x * 2).sum().item())
if "launch" in __import__("sys").argv:
    add_one[(1,)](x, 8, BLOCK=8)
"""


def test_as_cuda_triton_is_absent_and_an_import_of_it_is_named_with_the_way_out(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text("import torch\nimport triton\n")
    err = _as_cuda(tmp_path, "--", str(prog), status=3).stderr
    assert "Triton is absent under --as-cuda" in err and "--with-triton" in err


def test_with_triton_a_program_that_defines_kernels_runs_and_a_launch_is_refused(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text(TRITON_KERNEL)
    ran = _as_cuda(tmp_path, "--with-triton", "--", str(prog))
    # torch's own probe still says no Triton: torch.compile generates sim's kernels
    assert "has_triton False sum 16.0" in ran.stdout
    err = _as_cuda(tmp_path, "--with-triton", "--", str(prog), "launch", status=3).stderr
    assert "launching the Triton kernel add_one is not supported on sim" in err
    usage = _run_process(tmp_path, "--with-triton", "--", str(prog))
    assert usage.returncode == 2 and "--with-triton goes with --as-cuda" in usage.stderr


@pytest.mark.parametrize("mode", ["device", "map"])
def test_as_cuda_triton_is_absent_to_an_optional_probe(tmp_path, mode):
    """An optional ``import triton`` (torch's, DeepSpeed's, accelerate's own probes) sees no
    Triton, as on a machine without it, and the program goes on."""
    prog = tmp_path / "p.py"
    prog.write_text("try:\n    import triton\nexcept ImportError as e:\n"
                    "    print('no triton:', type(e).__name__)\n"
                    "import torch\nx = torch.ones(2, device='cuda')\nprint(x.sum().item())\n")
    assert "no triton: ModuleNotFoundError" in _as_cuda(tmp_path, "--", str(prog), mode=mode).stdout


def test_lightning_ddp_counts_every_rank_the_program_starts(tmp_path, bench):
    """Lightning's DDP starts rank 1 by running the script again: under run, rank 1 runs under run
    too, and the report holds both ranks, merged as bench merges its ranks (counts summed) and
    each rank's own (rank<r>/...)."""
    out = tmp_path / "ddp.json"
    r = _run_process(tmp_path, "--out", str(out), "--", "lightning_ddp.py", cwd=PROGRAMS)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "2 ranks (the program started 1, each counted too)" in r.stderr
    results = [json.loads(line[len("RESULT "):]) for line in r.stdout.splitlines()
               if line.startswith("RESULT ")]
    assert sorted(x["rank"] for x in results) == [0, 1]  # the program ran as it does alone
    report = json.loads(out.read_text())
    assert report["provenance"]["world_size"] == 2
    (scenario,) = report["scenarios"]
    assert scenario["world_size"] == 2
    v = {x["name"]: x for x in scenario["variants"]}
    assert set(v) == {f"{rank}{name}" for rank in ("", "rank0/", "rank1/")
                      for name in ("steps", "before_steps")}
    for name in ("steps", "before_steps"):
        for key, value in v[name]["total"].items():
            if key.endswith(".count") and value is not None:
                assert value == v[f"rank0/{name}"]["total"][key] + \
                    v[f"rank1/{name}"]["total"][key], (name, key)
    rank0, rank1 = v["rank0/steps"], v["rank1/steps"]
    assert rank0["measured_steps"] == rank1["measured_steps"] == 3  # 4 steps, --skip-steps 1
    # One gradient all-reduce per step on each rank (DDP's bucket), and Lightning's own
    # broadcasts: the ranks issue the same collectives.
    assert rank0["total"]["collective.all_reduce.count"] == 3
    for key in ("collective.count", "collective.all_reduce.count", "collective.broadcast.count"):
        assert rank0["total"][key] == rank1["total"][key], key
    # bench reads it as a report of 2 ranks: the counts of every variant compare unchanged.
    import subprocess
    compared = subprocess.run([bench, "compare", str(out), str(out), "--format", "json"],
                              capture_output=True, text=True, timeout=120)
    assert compared.returncode == 0, compared.stderr
    rows = json.loads(compared.stdout)["rows"]
    assert {row["variant"] for row in rows} == set(v)
    assert all(row["change"] == "unchanged" for row in rows if row["unit"] == "count")


def _results_by_rank(stdout: str) -> dict:
    """The RESULT lines the example programs print, one per rank, by rank. Each is one write(2)
    of under PIPE_BUF bytes, so no other write splits it; a line is read from its RESULT on,
    wherever it starts (after another process's output that had no newline yet)."""
    results = {}
    for line in stdout.splitlines():
        start = line.find("RESULT {")
        if start >= 0:
            result = json.loads(line[start + len("RESULT "):])
            results[result["rank"]] = result
    return results


def test_lightning_ddp_under_hydra_counts_every_rank(tmp_path):
    """A Hydra app (as the lightning-hydra-template): Lightning starts rank 1 with its Hydra
    command (the script, the same overrides, rank 0's run directory), which run wraps too."""
    pytest.importorskip("hydra", reason="needs hydra-core (python/requirements-extra.txt)")
    out, run_dir = tmp_path / "hydra.json", tmp_path / "hydra_run"
    r = _run_process(tmp_path, "--out", str(out), "--", str(PROGRAMS / "lightning_hydra.py"),
                     "max_steps=5", f"hydra.run.dir={run_dir}")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "2 ranks (the program started 1, each counted too)" in r.stderr
    results = _results_by_rank(r.stdout)
    assert sorted(results) == [0, 1], r.stdout[-3000:] + r.stderr[-3000:]
    # Rank 1 is Lightning's Hydra child: its own job name, rank 0's run directory, the override.
    assert results[1]["job"] == "train_ddp_process_1"
    assert results[0]["run_dir"] == results[1]["run_dir"] == str(run_dir)
    assert results[0]["steps"] == results[1]["steps"] == 5
    assert results[0]["weights"] == results[1]["weights"]  # DDP kept the replicas equal
    report = json.loads(out.read_text())
    assert report["provenance"]["world_size"] == 2
    v = {x["name"]: x for x in report["scenarios"][0]["variants"]}
    rank0, rank1 = v["rank0/steps"], v["rank1/steps"]
    assert rank0["measured_steps"] == rank1["measured_steps"] == 4  # 5 steps, --skip-steps 1
    assert rank0["total"]["collective.all_reduce.count"] == \
        rank1["total"]["collective.all_reduce.count"] == 4
    assert v["steps"]["total"]["collective.all_reduce.count"] == 8


def _torchrun(tmp_path, *args):
    """torchrun (torch.distributed.run) of 2 local ranks, each running ARGS, its scratch in
    tmp_path (TMPDIR: where the ranks leave their reports for rank 0)."""
    import subprocess
    import sys
    env = dict(os.environ, TMPDIR=str(tmp_path))
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc-per-node", "2", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


def _check_two_ddp_ranks(out, steps: int) -> None:
    """The report `out` of a DDP program on two ranks merged by run: both ranks' variants and the
    merged ones, `steps` counted steps on each, the ranks counting alike and the merged variant
    their sum, one gradient bucket all-reduced a step."""
    report = json.loads(out.read_text())
    assert report["provenance"]["world_size"] == 2
    v = {x["name"]: x for x in report["scenarios"][0]["variants"]}
    assert set(v) == {f"{rank}{name}" for rank in ("", "rank0/", "rank1/")
                      for name in ("steps", "before_steps")}
    rank0, rank1 = v["rank0/steps"], v["rank1/steps"]
    assert rank0["measured_steps"] == rank1["measured_steps"] == steps
    for key in ("collective.all_reduce.count", "launch.count", "h2d.count"):
        assert rank0["total"][key] == rank1["total"][key], key
        assert v["steps"]["total"][key] == rank0["total"][key] + rank1["total"][key], key
    assert rank0["total"]["collective.all_reduce.count"] == steps


def test_torchrun_ranks_each_under_run_make_one_report(tmp_path, bench):
    """torchrun starts every rank as `python -m harness_sim run ...`: rank 0's report holds both,
    merged as bench merges its ranks, and the ranks' scratch directory is gone afterwards."""
    out = tmp_path / "ddp.json"
    r = _torchrun(tmp_path, "-m", "harness_sim", "run", "--out", str(out), "--",
                  str(PROGRAMS / "torch_ddp.py"), "--steps", "6")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "2 ranks (torchrun's, each under run)" in r.stderr
    results = _results_by_rank(r.stdout)
    assert sorted(results) == [0, 1], r.stdout[-3000:] + r.stderr[-3000:]
    assert results[0]["weights"] == results[1]["weights"]  # DDP kept the replicas equal
    _check_two_ddp_ranks(out, steps=5)  # 6 steps, --skip-steps 1
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("harness_sim")] == []
    import subprocess
    compared = subprocess.run([bench, "compare", str(out), str(out), "--format", "json"],
                              capture_output=True, text=True, timeout=120)
    assert compared.returncode == 0, compared.stderr


@pytest.mark.release
def test_cuda_ddp_program_under_torchrun_as_cuda(tmp_path):
    """A DDP script written for CUDA (init_process_group("nccl"), torch.cuda.set_device,
    device_ids=[LOCAL_RANK]) runs unchanged on two sim ranks: NCCL's group is sim's."""
    out = tmp_path / "cuda_ddp.json"
    r = _torchrun(tmp_path, "-m", "harness_sim", "run", "--as-cuda", "--out", str(out), "--",
                  str(PROGRAMS / "cuda_ddp.py"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    results = _results_by_rank(r.stdout)
    assert sorted(results) == [0, 1], r.stdout[-3000:] + r.stderr[-3000:]
    assert results[0]["weights"] == results[1]["weights"]
    assert results[0]["steps"] == 6 and results[0]["backend"] == "cpu:gloo,cuda:sim"
    v = {x["name"]: x for x in json.loads(out.read_text())["scenarios"][0]["variants"]}
    rank0, rank1 = v["rank0/steps"]["total"], v["rank1/steps"]["total"]
    # each counted step: DDP's gradient bucket, all-reduced on the device; every 2nd step the
    # logged loss too (and on rank 0 read back with .item() after the step: steps 2, 4)
    assert rank0["collective.all_reduce.count"] == rank1["collective.all_reduce.count"] == 5 + 2
    sites = {(s["op"], s["reason"]): s["count"] for s in v["rank0/steps"]["sync_sites"]}
    assert sites[("aten::_local_scalar_dense", "item")] == 2
    assert f"2 x aten::_local_scalar_dense (item) in (none) at {PROGRAMS / 'cuda_ddp.py'}:55 " \
        "in main" in r.stderr
    # the Reducer rebuilds its buckets once, in the second iteration's forward, reading the
    # bucket indices back to the host (DDP's _pre_forward -> reducer._rebuild_buckets())
    assert sites[("aten::copy_", "blocking copy D2H")] == 2
    assert rank0["sync.count"] == 2 + 2 and rank1["sync.count"] == 2


def test_spawned_ddp_workers_are_each_counted_and_merged(tmp_path):
    """torch.multiprocessing.spawn (examples/imagenet's --multiprocessing-distributed): each
    spawned worker serves CUDA (NCCL's group on cuda:<rank>) and is counted; their reports are
    merged as torchrun's ranks' (the main process, which only spawned them, is no rank)."""
    out = tmp_path / "spawn.json"
    r = _run_process(tmp_path, "--as-cuda", "--out", str(out), "--",
                     str(PROGRAMS / "cuda_ddp_spawn.py"), env={"CUDA_VISIBLE_DEVICES": "0,1"})
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    results = _results_by_rank(r.stdout)
    assert sorted(results) == [0, 1], r.stdout[-3000:] + r.stderr[-3000:]
    assert results[0]["weights"] == results[1]["weights"]  # DDP kept the replicas equal
    assert [results[0]["device"], results[1]["device"]] == ["cuda:0", "cuda:1"]
    assert "2 ranks the program spawned (multiprocessing's spawn), each counted" in r.stderr
    _check_two_ddp_ranks(out, steps=3)  # 4 steps, --skip-steps 1


def test_a_spawned_worker_that_fails_fails_the_run_and_one_that_joins_no_group_is_no_rank(
        tmp_path):
    """A spawned worker's failure is the program's (exit 3, nothing written); a spawned child
    that never joins a process group (a helper, a DataLoader worker) writes no report: the
    program's own steps are the report's."""
    program = tmp_path / "spawner.py"
    program.write_text("""
import sys
import torch
import torch.multiprocessing as mp

def helper(i):
    if sys.argv[1] == "fail":
        raise RuntimeError("worker failed on purpose")
    torch.ones(3).sum()

if __name__ == "__main__":
    mp.spawn(helper, nprocs=1)
    model = torch.nn.Linear(4, 1).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        model(torch.randn(2, 4, device="cuda")).sum().backward()
        opt.step()
""")
    out = tmp_path / "helper.json"
    r = _run_process(tmp_path, "--as-cuda", "--out", str(out), "--", str(program), "ok")
    assert r.returncode == 0, r.stderr[-3000:]
    v = {x["name"]: x for x in json.loads(out.read_text())["scenarios"][0]["variants"]}
    assert set(v) == {"steps", "before_steps"} and v["steps"]["measured_steps"] == 2
    failed = tmp_path / "failed.json"
    r = _run_process(tmp_path, "--as-cuda", "--out", str(failed), "--", str(program), "fail")
    assert r.returncode == 3, r.stderr[-3000:]
    assert "worker failed on purpose" in r.stderr
    assert not failed.exists()


def test_torchrun_over_several_nodes_is_bad_input(tmp_path, monkeypatch, capsys):
    for name, value in (("TORCHELASTIC_RUN_ID", "job"), ("WORLD_SIZE", "4"),
                        ("LOCAL_WORLD_SIZE", "2"), ("LOCAL_RANK", "0"), ("MASTER_PORT", "1")):
        monkeypatch.setenv(name, value)
    assert run(["--out", str(tmp_path / "r.json"), "--",
                str(PROGRAMS / "torch_ddp.py")]) == 2
    assert "merges the ranks of one node: this job has 4 ranks on nodes of 2" in \
        capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


TORCHRUN_RANK1_FAILS = """\
import os
import torch, torch.distributed as dist
import harness_sim
torch.sim.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("cpu:gloo,sim:sim")
if dist.get_rank() == 1:
    raise SystemExit(5)
dist.all_reduce(torch.ones(4, device="sim"))  # rank 1 is gone: Gloo fails this
"""


def test_torchrun_rank_that_fails_fails_the_job_and_nothing_is_written(tmp_path):
    script = tmp_path / "rank1_fails.py"
    script.write_text(TORCHRUN_RANK1_FAILS)
    out = tmp_path / "failed.json"
    r = _torchrun(tmp_path, "-m", "harness_sim", "run", "--out", str(out), "--", str(script))
    assert r.returncode != 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "the program exited with status 5" in r.stderr
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("harness_sim")] == []


def test_a_killed_run_leaves_no_scratch_directory(tmp_path):
    """SIGKILL (torchrun's agent sends it 30 s after SIGTERM to a rank stuck in C++) runs no
    cleanup of run's own: its remover process removes the scratch directory once run is gone."""
    import signal
    import subprocess
    import sys
    import time
    script = tmp_path / "sleeps.py"
    script.write_text("import time\nprint('started', flush=True)\ntime.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-m", "harness_sim", "run", "--out",
                             str(tmp_path / "never.json"), "--", str(script)], cwd=tmp_path,
                            env=dict(os.environ, TMPDIR=str(tmp_path)), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout.readline() == "started\n"
        scratch = [p for p in tmp_path.iterdir() if p.name.startswith("harness_sim_run.")]
        assert len(scratch) == 1  # while it runs
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        proc.kill()
    deadline = time.monotonic() + 30
    while scratch[0].exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not scratch[0].exists()
    assert not (tmp_path / "never.json").exists()


@pytest.mark.parametrize("flags,message", [
    (["--trace", "t.json"], "--trace under torchrun is not supported"),
    (["--gate", "no_such_gate.json"], "--gate no_such_gate.json: no such file"),
])
def test_torchrun_bad_input_is_refused_on_every_rank(tmp_path, bench, flags, message):
    """Every rank checks the flags as rank 0 does: none runs the program, none leaves a directory.
    Each rank is started here with the environment torchrun gives it, one after the other: under
    torchrun itself the first rank to exit has the agent SIGTERM the other, which may not have
    printed yet."""
    import subprocess
    import sys
    for rank in (0, 1):
        env = dict(os.environ, TMPDIR=str(tmp_path), TORCHELASTIC_RUN_ID="refused",
                   TORCHELASTIC_RESTART_COUNT="0", WORLD_SIZE="2", LOCAL_WORLD_SIZE="2",
                   RANK=str(rank), LOCAL_RANK=str(rank), GROUP_RANK="0",
                   MASTER_ADDR="127.0.0.1", MASTER_PORT="29599")
        r = subprocess.run([sys.executable, "-m", "harness_sim", "run", "--bench",
                            os.path.abspath(bench), *flags, "--", str(PROGRAMS / "torch_ddp.py")],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
                           stdin=subprocess.DEVNULL)
        assert r.returncode == 2, (rank, r.stderr[-3000:])
        assert message in r.stderr, (rank, r.stderr[-3000:])
        assert "RESULT" not in r.stdout
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("harness_sim")] == []
    assert not (tmp_path / "t.json").exists()


def test_torchrun_bad_input_fails_the_job(tmp_path, bench):
    r = _torchrun(tmp_path, "-m", "harness_sim", "run", "--bench", os.path.abspath(bench),
                  "--trace", "t.json", "--", str(PROGRAMS / "torch_ddp.py"))
    assert r.returncode != 0
    assert "--trace under torchrun is not supported" in r.stderr, r.stderr[-3000:]
    assert "RESULT" not in r.stdout
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("harness_sim")] == []
    assert not (tmp_path / "t.json").exists()


RANK1_FAILS = """\
import sys
import harness_sim
from lightning.pytorch import Trainer
from lightning.pytorch.demos.boring_classes import BoringModel
trainer = Trainer(accelerator="sim", devices=2, strategy="ddp", max_steps=2, limit_val_batches=0,
                  logger=False, enable_checkpointing=False, enable_progress_bar=False,
                  enable_model_summary=False)
trainer.fit(BoringModel())
if trainer.global_rank == 1:
    sys.exit(5)
"""


def test_a_started_rank_that_fails_fails_the_run_and_nothing_is_written(tmp_path):
    (tmp_path / "rank1_fails.py").write_text(RANK1_FAILS)
    out = tmp_path / "r.json"
    r = _run_process(tmp_path, "--out", str(out), "--", "rank1_fails.py")
    assert r.returncode == 3, r.stdout[-3000:] + r.stderr[-3000:]
    # Rank 1's own run says why (the program's status), and rank 0's that rank 1 failed (3:
    # run's code for a failed program).
    assert "the program exited with status 5" in r.stderr
    assert "rank 1 (started by the program) exited with status 3" in r.stderr
    assert not out.exists()


def test_sync_debug_mode_warns_at_each_syncing_line_of_the_program(tmp_path):
    """As CUDA's warn_or_error_on_sync: a warning at each line that syncs, with the program's
    frame (under the mapping of CUDA's names it was one warning, at harness_sim's own line:
    issue 53)."""
    script = tmp_path / "warn.py"
    script.write_text("import torch\n"
                      "torch.cuda.set_sync_debug_mode('warn')\n"
                      "x = torch.ones(3, device='cuda')\n"
                      "for i in range(2):\n"
                      "    a = x.sum().item()\n"
                      "    b = x.max().item()\n")
    r = _as_cuda(tmp_path, "-q", "--", str(script))
    warned = [line for line in r.stderr.splitlines() if "called a synchronizing CUDA" in line]
    assert [line.split(": UserWarning")[0] for line in warned] == \
        [f"{script}:5", f"{script}:6"], r.stderr[-2000:]


def test_a_factory_op_with_a_device_argument_makes_cuda_tensors(tmp_path):
    """An op with a CUDA kernel and no tensor argument (triu_indices, randperm) puts its result on
    the device its `device` argument names (the OpInfo sweep on CUDA tensors found
    triu_indices(..., device="cuda") on the unnamed PrivateUse1 device)."""
    script = tmp_path / "factories.py"
    script.write_text("import torch\n"
                      "for t in (torch.triu_indices(3, 3, device='cuda'),\n"
                      "          torch.tril_indices(3, 3, device='cuda:0'),\n"
                      "          torch.randperm(5, device='cuda')):\n"
                      "    assert t.device == torch.device('cuda', 0) and t.is_cuda, t.device\n"
                      "print('ok')\n")
    r = _as_cuda(tmp_path, "-q", "--", str(script))
    assert "ok" in r.stdout


def test_grid_sample_on_cuda_tensors_is_cudnns_sampler_with_cpus_values(tmp_path):
    """`grid_sampler` takes cuDNN's sampler for a CUDA tensor (bilinear, zeros, align_corners):
    one launch each way, values and gradients as CPU's (it was refused: a CUDA-only kernel)."""
    script = tmp_path / "gs.py"
    script.write_text(
        "import json, torch\n"
        "torch.manual_seed(0)\n"
        "x = torch.randn(2, 3, 8, 8, requires_grad=True)\n"
        "g = (torch.rand(2, 5, 5, 2) * 2 - 1).requires_grad_()\n"
        "ref = torch.nn.functional.grid_sample(x, g, align_corners=True)\n"
        "ref.sum().backward()\n"
        "xc, gc = x.detach().cuda().requires_grad_(), g.detach().cuda().requires_grad_()\n"
        "out = torch.nn.functional.grid_sample(xc, gc, align_corners=True)\n"
        "out.sum().backward()\n"
        "assert out.is_cuda and torch.allclose(out.cpu(), ref, atol=1e-5)\n"
        "assert torch.allclose(xc.grad.cpu(), x.grad, atol=1e-5)\n"
        "assert torch.allclose(gc.grad.cpu(), g.grad, atol=1e-4)\n")
    out = tmp_path / "r.json"
    _as_cuda(tmp_path, "-q", "--out", str(out), "--", str(script))
    launches = _steps(out)["before_steps"]["launches_by_op"]
    assert launches["aten::cudnn_grid_sampler"] == 1
    assert launches["aten::cudnn_grid_sampler_backward"] == 1


def test_torch_config_show_names_the_cuda_runtime_as_the_wheel_has_it(tmp_path):
    """torch.__config__.show() asks CUDA's hooks for their lines (linalg.ldl_factor's sample
    inputs do, in the OpInfo sweep): sim's answer from the wheel's facts, not a refusal."""
    script = tmp_path / "show.py"
    script.write_text("import torch\n"
                      "text = torch.__config__.show()\n"
                      "assert '  - CUDA Runtime ' in text, text\n"
                      "print('ok')\n")
    assert "ok" in _as_cuda(tmp_path, "-q", "--", str(script)).stdout
