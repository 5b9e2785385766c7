"""`python -m harness_sim run --compute shapes` (issue 52): programs counted without computing a
value -- each op runs its meta function, tensors have no memory -- and counted the same as when
every op is computed (launches by op, copies with bytes, syncs, collectives with bytes, sites).

Each program runs in a process of its own in both modes (the mode is chosen when the package is
imported). Device memory is left out of the equality: with values, what the host kernels
allocate as scratch is charged to the device too (a meta function allocates none), so the
computed run's peak is the same or higher (docs/full-size.md)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO

PROGRAMS = REPO / "examples" / "programs"
_NOT_COUNTS = ("time", "host_memory", "cpu", "wait", "memory.")


def _run(tmp_path, mode, *args, torchrun=False, status=0):
    out = tmp_path / f"{mode}.json"
    command = [sys.executable, "-m", "harness_sim", "run", "--as-cuda", "--compute", mode, "-q",
               "--out", str(out), "--", *args]
    if torchrun:
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   "--nproc-per-node", "2", *command[1:]]
    r = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       stdin=subprocess.DEVNULL, env=dict(os.environ, TMPDIR=str(tmp_path)))
    assert r.returncode == status, r.stdout[-3000:] + r.stderr[-3000:]
    return (json.loads(out.read_text()) if status == 0 else None), r


def _counted(report: dict) -> dict:
    def figures(measurements):
        return {k: v for k, v in measurements.items() if not any(w in k for w in _NOT_COUNTS)}

    def sites(rows, drop_kind=None):
        return sorted(json.dumps({k: v for k, v in r.items() if "wait" not in k}, sort_keys=True)
                      for r in rows if r.get("kind") != drop_kind)
    (scenario,) = report["scenarios"]
    return {v["name"]: {"per_step": figures(v["per_step"]), "total": figures(v["total"]),
                        "launches_by_op": v["launches_by_op"],
                        "sync_sites": sites(v["sync_sites"]), "copy_sites": sites(v["copy_sites"]),
                        "event_sites": sites(v["event_sites"], drop_kind="value_not_computed")}
            for v in scenario["variants"]}


def _peaks(report: dict) -> dict:
    (scenario,) = report["scenarios"]
    return {v["name"]: v["total"]["memory.peak_bytes"] for v in scenario["variants"]}


@pytest.mark.parametrize("program", [
    "cuda_loop.py",             # x[mask] (nonzero: torch's bound), loss.item() each step
    "cuda_gaussian_policy.py",  # torch.distributions' validation: `.all()` reads true
    "hf_trainer.py",            # the Hugging Face Trainer: attention masks checked with .all()
    "torchvision_resnet.py",    # channels-last convolutions under autocast: cuDNN's layout
])
def test_a_program_counts_the_same_without_computing(tmp_path, program):
    if program == "hf_trainer.py":
        pytest.importorskip("transformers")
    if program == "torchvision_resnet.py":
        pytest.importorskip("torchvision")
    values, _ = _run(tmp_path, "values", str(PROGRAMS / program))
    shapes, r = _run(tmp_path, "shapes", str(PROGRAMS / program))
    assert _counted(shapes) == _counted(values)
    for name, peak in _peaks(shapes).items():
        assert peak <= _peaks(values)[name]
    assert shapes["provenance"]["compute"] == "shapes"
    assert any("--compute shapes" in w for w in shapes["warnings"])


def test_fsdp2_on_two_ranks_counts_the_same_without_computing(tmp_path):
    """torch's own FSDP2 (fully_shard per block, bf16 compute, fp32 reduction) on a Llama-shaped
    model: all-gathers and reduce-scatters with their bytes, per rank, the same in both modes."""
    program = [str(PROGRAMS / "fsdp2_llama.py"), "--preset", "tiny"]
    values, _ = _run(tmp_path, "values", *program, torchrun=True)
    shapes, _ = _run(tmp_path, "shapes", *program, torchrun=True)
    counted_values, counted_shapes = _counted(values), _counted(shapes)
    for name in ("steps", "rank0/steps", "rank1/steps"):
        assert counted_shapes[name] == counted_values[name], name
    step = counted_shapes["rank0/steps"]["per_step"]
    assert step["collective.all_gather.count"] == 2 * 3 - 1  # 3 units; the root's kept for backward
    assert step["collective.reduce_scatter.count"] == 3
    # Torch's own estimate of the same step's device memory: FSDPMemTracker under FakeTensorMode
    # (it needs CUDA, which sim serves), the peak to the byte.
    tracker = subprocess.run(
        [sys.executable, "-m", "harness_sim", "run", "--as-cuda", "-q", "--out",
         str(tmp_path / "tracker.json"), "--", str(REPO / "benchmarks" / "fsdp_mem_tracker.py"),
         "--preset", "tiny", "--nproc", "2"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert tracker.returncode == 0, tracker.stdout[-3000:] + tracker.stderr[-3000:]
    (total,) = [line for line in tracker.stdout.splitlines() if line.split()[:1] == ["Total"]]
    tracker_peak = int(total.split()[-2].replace(",", ""))
    peaks = _peaks(shapes)
    assert peaks["rank0/steps"] == peaks["rank1/steps"] == tracker_peak


def test_values_the_host_reads_are_placeholders_named_by_line(tmp_path):
    script = tmp_path / "reads.py"
    script.write_text(
        "import torch\n"
        "w = torch.nn.Parameter(torch.randn(8, 8, device='cuda'))\n"
        "opt = torch.optim.SGD([w], lr=0.1)\n"
        "for step in range(3):\n"
        "    loss = (w @ w).square().mean()\n"
        "    loss.backward(); opt.step(); opt.zero_grad()\n"
        "    print('loss', loss.item(), bool(torch.isfinite(w).all()), w.sum())\n"
        "print('peak', torch.cuda.max_memory_allocated() > 0)\n")
    shapes, r = _run(tmp_path, "shapes", str(script))
    assert "loss 0.0 True tensor(<values not computed: --compute shapes>, size=()" in r.stdout
    assert "peak True" in r.stdout
    (scenario,) = shapes["scenarios"]
    steps = next(v for v in scenario["variants"] if v["name"] == "steps")
    reads = {(e["what"], e["frame"]) for e in steps["event_sites"]
             if e["kind"] == "value_not_computed"}
    assert reads == {("item", "reads.py:7 in <module>"), ("print", "reads.py:7 in <module>")}


def test_an_op_whose_size_depends_on_values_fails_naming_it(tmp_path):
    script = tmp_path / "unique.py"
    script.write_text("import torch\nx = torch.zeros(4, device='cuda')\nprint(x.unique())\n")
    _, r = _run(tmp_path, "shapes", str(script), status=3)
    assert "unique" in r.stderr and f"{script}\", line 3" in r.stderr, r.stderr[-2000:]


def test_the_program_peak_is_not_reset_by_the_instruments_phases(tmp_path):
    """torch.cuda.max_memory_allocated is the program's peak since its own reset, whatever phases
    and steps the instrument measured since (it resets its own peak at each)."""
    script = tmp_path / "peak.py"
    script.write_text(
        "import torch\n"
        "big = torch.empty(1 << 20, device='cuda'); del big\n"
        "w = torch.nn.Parameter(torch.randn(4, device='cuda'))\n"
        "opt = torch.optim.SGD([w], lr=0.1)\n"
        "for _ in range(3):\n"
        "    w.sum().backward(); opt.step(); opt.zero_grad()\n"
        "print('peak', torch.cuda.max_memory_allocated())\n")
    for mode in ("values", "shapes"):
        _, r = _run(tmp_path, mode, str(script))
        assert int(r.stdout.split("peak ")[1].split()[0]) >= 4 << 20, (mode, r.stdout)


@pytest.mark.parametrize("args, env, message", [
    (["--compute", "sizes"], {}, "compute mode 'sizes'"),
    ([], {"HARNESS_SIM_COMPUTE": "sizes"}, "compute mode 'sizes'"),
])
def test_a_bad_compute_mode_is_bad_usage(tmp_path, args, env, message):
    r = subprocess.run([sys.executable, "-m", "harness_sim", "run", *args, "--", "x.py"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, **env))
    assert r.returncode == 2 and message in r.stderr, r.stderr[-2000:]
    assert "Traceback" not in r.stderr


def test_a_mode_other_than_the_processes_is_bad_usage(tmp_path, capsys):
    """In-process (pytest's), the package chose "values" when it was imported."""
    from harness_sim._run import main as run
    (tmp_path / "p.py").write_text("pass\n")
    assert run(["--compute", "shapes", "--", str(tmp_path / "p.py")]) == 2
    assert "start it as `python -m harness_sim run --compute shapes" in capsys.readouterr().err
