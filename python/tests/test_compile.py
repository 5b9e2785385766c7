"""torch.compile on sim (issue 40): inductor's kernels are launches, graph breaks and
recompilations are counted with their lines, and a step's capture blockers are gated by line."""
from __future__ import annotations

import inspect
import os
import json
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import harness_sim
from conftest import REPO
from harness_sim._run import main as run

PROGRAMS = REPO / "examples" / "programs"


@pytest.fixture(autouse=True)
def fresh_dynamo():
    # dynamo's first use turns torch.distributions' argument checks off for the whole process
    # (TorchPatcher.patch in eval_frame.py): the tests after these must find them as they were
    validate = torch.distributions.Distribution._validate_args
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
    torch.distributions.Distribution.set_default_validate_args(validate)


def _line_of(function, text: str) -> int:
    lines, first = inspect.getsourcelines(function)
    (index,) = [i for i, line in enumerate(lines) if text in line]
    return first + index


def _events(counts, kind: str) -> dict:
    return {(s["what"], s["frame"]): s["count"]
            for s in counts._counts()["event_sites"] if s["kind"] == kind}


def _steps(compiled, args, steps=3):
    compiled(*args)  # compiles
    with harness_sim.count() as c:
        for _ in range(steps):
            with c.step():
                compiled(*args)
    return c


class _Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.down = torch.nn.Linear(8, 16), torch.nn.Linear(16, 8)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)) * 2 + 1).relu()


def test_inductor_kernels_are_launches_and_aten_fallbacks_count_as_eager():
    model = _Mlp().to("sim")
    x = torch.randn(4, 8, device="sim")
    eager = _steps(model, (x,))
    compiled = _steps(torch.compile(model), (x,))
    ops = compiled.launches_by_op
    fused = {op: n for op, n in ops.items() if op.startswith("inductor::")}
    # GELU and the bias adds are fused into generated kernels; the matmuls stay ATen's
    assert fused and all(n % 3 == 0 for n in fused.values())
    assert not any("gelu" in op for op in ops if op.startswith("aten::"))
    assert compiled.launches < eager.launches
    assert compiled.syncs == eager.syncs == 0
    assert compiled.total["graph_breaks"] == compiled.total["recompiles"] == 0


def _loss_with_item(model, x):
    loss = model(x).pow(2).mean()
    if loss.item() > 1e6:  # graph break
        loss = loss * 0
    return loss


def test_a_graph_break_is_counted_each_step_with_its_line_and_its_sync():
    model = torch.nn.Linear(8, 8).to("sim")
    x = torch.randn(4, 8, device="sim")
    c = _steps(torch.compile(_loss_with_item), (model, x))
    line = _line_of(_loss_with_item, "loss.item()")
    breaks = _events(c, "graph_break")
    ((reason, frame), count), = breaks.items()
    assert frame == f"python/tests/test_compile.py:{line} in _loss_with_item"
    assert count == 3 and "item" in reason.lower()
    assert c.total["graph_breaks"] == 3
    # the read at the break is eager: one sync a step, at the same line
    (site,) = c.sync_sites
    assert (site.op, site.reason, site.count) == ("aten::_local_scalar_dense", "item", 3)
    assert site.frame.startswith(f"python/tests/test_compile.py:{line} in ")
    assert c.total["capture_blockers"] == 3


def _scaled(x):
    return (x * 2).sum()


def test_a_recompilation_is_counted_with_the_guard_that_failed():
    compiled = torch.compile(_scaled, dynamic=False)
    compiled(torch.randn(4, device="sim"))
    with harness_sim.count() as c:
        compiled(torch.randn(5, device="sim"))
    ((what, frame), count), = _events(c, "recompile").items()
    assert count == 1 and c.total["recompiles"] == 1
    assert "size" in what.lower()
    assert frame == f"python/tests/test_compile.py:{_line_of(_scaled, 'def _scaled')} in _scaled"


def test_a_cpu_scalar_and_a_pageable_copy_block_capture_but_a_pinned_copy_does_not():
    x = torch.ones(4, device="sim")
    with harness_sim.count() as c:
        x.add(torch.tensor(1.0))                                  # a CPU scalar read
        torch.ones(4).to("sim", non_blocking=True)                # pageable: staged by CUDA
        torch.ones(4).pin_memory().to("sim", non_blocking=True)   # pinned: capturable
    blockers = _events(c, "capture_blocker")
    assert [what for what, _ in blockers] == ["CPU tensor read by aten::add"]
    assert c.total["capture_blockers"] == 2 and c.syncs == 0


def _report(path) -> dict:
    (scenario,) = json.loads(open(path).read())["scenarios"]
    return {v["name"]: v for v in scenario["variants"]}


def _per_step(variant) -> dict:
    return variant["per_step"]


def _run_as_cuda(tmp_path, *args) -> subprocess.CompletedProcess:
    """`python -m harness_sim run --as-cuda -q ARGS` as a user runs it: a process whose sim serves
    the CUDA device type (inductor generates sim's C++ kernels for CUDA tensors, no Triton)."""
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_SIM_AS_CUDA"}
    r = subprocess.run([sys.executable, "-m", "harness_sim", "run", "--as-cuda", "-q", *args],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r


def test_run_counts_a_compiled_gpt_written_for_cuda_unchanged(tmp_path):
    eager, compiled = tmp_path / "eager.json", tmp_path / "compiled.json"
    program = str(PROGRAMS / "compiled_gpt.py")
    _run_as_cuda(tmp_path, "--out", str(compiled), "--", program)
    _run_as_cuda(tmp_path, "--out", str(eager), "--", program, "--no-compile")
    e, c = _report(eager)["steps"], _report(compiled)["steps"]
    # the report says which backend made the compiled step's launches
    assert any("inductor generated C++ kernels for sim" in w
               for w in json.loads(compiled.read_text())["warnings"])
    assert any(op.startswith("inductor::") for op in c["launches_by_op"])
    # the program's syncs and copies are the same, compiled or not; launches are fewer
    for name in ("sync.count", "h2d.count", "d2h.count", "capture.blockers"):
        assert _per_step(c)[name] == _per_step(e)[name], name
    assert _per_step(c)["launch.count"] < _per_step(e)["launch.count"]
    assert _per_step(c)["graph_break.count"] == 0


def test_compiled_convolutions_and_autocast_inside_compile_on_cuda_tensors(tmp_path):
    out = tmp_path / "conv.json"
    r = _run_as_cuda(tmp_path, "--out", str(out), "--",
                     str(REPO / "python" / "tests" / "programs" / "compiled_conv_autocast.py"))
    (line,) = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")]
    assert json.loads(line[len("RESULT "):]) == {"device": "cuda:0", "amp_out": "torch.float32"}
    steps = _report(out)["steps"]
    ops = steps["launches_by_op"]
    # inductor's extern kernels (cuDNN's convolution, the bf16 matmul) and its own C++ kernels
    assert any(op.startswith("inductor::") for op in ops)
    n = steps["measured_steps"]
    assert ops["aten::cudnn_convolution"] == ops["aten::convolution_backward"] == 2 * n
    assert steps["per_step"]["sync.count"] == 0 and steps["per_step"]["graph_break.count"] == 0


def _gate(tmp_path) -> str:
    gate = tmp_path / "gate.json"
    gate.write_text(json.dumps({"gate_version": 1, "rules": [
        {"name": "the step is capturable", "scenario": "*", "variant": "steps",
         "metric": "per_step.capture.blockers", "max": 0}]}))
    return str(gate)


def test_a_capture_gate_passes_a_capturable_loop_and_names_the_line_that_breaks_it(
        tmp_path, bench):
    program = str(PROGRAMS / "compiled_graph_break.py")
    ok = subprocess.run([sys.executable, "-m", "harness_sim", "run", "--bench", bench,
                         "--gate", _gate(tmp_path), "--", program, "--capturable"],
                        capture_output=True, text=True, cwd=REPO, stdin=subprocess.DEVNULL)
    assert ok.returncode == 0, ok.stderr[-3000:]
    broken = subprocess.run([sys.executable, "-m", "harness_sim", "run", "--bench", bench,
                             "--gate", _gate(tmp_path), "--out", str(tmp_path / "r.json"), "--",
                             program], capture_output=True, text=True, cwd=REPO,
                            stdin=subprocess.DEVNULL)
    assert broken.returncode == 1, broken.stderr[-3000:]
    source = (PROGRAMS / "compiled_graph_break.py").read_text().splitlines()
    line = 1 + next(i for i, text in enumerate(source) if "loss.detach().item()" in text)
    assert f"examples/programs/compiled_graph_break.py:{line} in forward" in broken.stdout + \
        broken.stderr
    steps = _report(tmp_path / "r.json")["steps"]
    assert _per_step(steps)["graph_break.count"] == 1
    assert _per_step(steps)["capture.blockers"] == 1
    # the code after the break is specialized on the float read back: torch 2.11 recompiles it
    # every step, named by the guard however the value changes (dynamo words the first guard
    # apart); torch 2.15 makes the float dynamic after its first recompilation
    recompiles = [s for s in steps["event_sites"] if s["kind"] == "recompile"]
    if torch.__version__.startswith("2.11"):
        assert _per_step(steps)["recompile.count"] == 1
        assert sum(s["count"] for s in recompiles) == 5 and len(recompiles) <= 2, recompiles
        assert all("== N" in s["what"] for s in recompiles), recompiles
    else:
        assert _per_step(steps)["recompile.count"] > 0 and recompiles


def test_compare_names_a_new_graph_break_by_line(tmp_path, bench):
    program = str(PROGRAMS / "compiled_graph_break.py")
    base, head = tmp_path / "base.json", tmp_path / "head.json"
    assert run(["-q", "--out", str(base), "--scenario", "loop", "--", program,
                "--capturable"]) == 0
    torch._dynamo.reset()
    assert run(["-q", "--out", str(head), "--scenario", "loop", "--", program]) == 0
    out = subprocess.run([bench, "compare", str(base), str(head)], capture_output=True,
                         text=True, stdin=subprocess.DEVNULL)
    assert "+1 graph_break/step at examples/programs/compiled_graph_break.py:" in out.stdout
