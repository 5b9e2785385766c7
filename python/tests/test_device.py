"""The sim device from Python: registration, autograd, and each counting rule on a small case."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

import harness_sim
from harness_sim import phase

SIM = torch.device("sim", 0)


def test_registered_as_sim():
    assert torch._C._get_privateuse1_backend_name() == "sim"
    assert torch.sim.device_count() == harness_sim.DEVICE_COUNT == 8
    assert torch.sim.is_available()
    t = torch.ones(3).to("sim")
    assert t.device == SIM and t.is_sim
    assert torch.nn.Linear(2, 2).to("sim").weight.device == SIM
    assert torch.ones(2, device="sim:3").device == torch.device("sim", 3)


def test_autograd_on_sim_matches_cpu():
    torch.manual_seed(0)
    cpu = torch.nn.Linear(4, 3)
    sim = torch.nn.Linear(4, 3)
    sim.load_state_dict(cpu.state_dict())
    sim.to("sim")
    x = torch.randn(5, 4)
    cpu(x).pow(2).sum().backward()
    sim(x.to("sim")).pow(2).sum().backward()
    assert torch.equal(sim.weight.grad.cpu(), cpu.weight.grad)
    assert torch.equal(sim.bias.grad.cpu(), cpu.bias.grad)


def test_each_op_is_one_launch_and_views_are_free():
    x = torch.ones(4, 4, device="sim")
    with harness_sim.count() as c:
        x.t()                   # views: no launch
        y = x.reshape(16)
        z = (y + 1) * 2         # two kernels
        x.t().contiguous()      # a strided copy on the device is a kernel
    assert c.launches == 3
    assert c.launches_by_op == {"aten::add": 1, "aten::mul": 1, "aten::copy_": 1}
    assert c.syncs == 0 and c.copies["d2h"]["count"] == 0
    assert torch.equal(z.cpu(), torch.full((16,), 4.0))


def test_item_is_a_d2h_copy_and_a_sync_named_with_its_python_frame():
    x = torch.ones(3, device="sim")
    with harness_sim.count() as c:
        with phase("train.forward"):
            x.sum().item()
    # CUDA's _local_scalar_dense copies the value into a page-locked buffer (CUDAScalar.cu).
    assert c.copies["d2h"] == {"count": 1, "bytes": 4, "pinned": 1}
    assert c.syncs == 1
    (site,) = c.sync_sites
    assert (site.phase, site.op, site.reason, site.count) == (
        "train.forward", "aten::_local_scalar_dense", "item", 1)
    # The program's line, named from the program's root (the git root here).
    assert site.frame.startswith("python/tests/test_device.py:")
    assert site.frame.endswith(" in test_item_is_a_d2h_copy_and_a_sync_named_with_its_python_frame")
    assert site.library == ""  # the program called .item() itself
    # Timed, and 0: the sim runs each op as it is launched, so nothing is queued before the read.
    assert site.wait_ns == 0
    assert c.phases["train.forward"]["syncs"] == 1


def test_a_sync_in_backward_names_the_backward_call():
    # Backward runs on the calling thread inside count(): the boolean mask's backward
    # (index_put_ with the mask, nonzero's count read by the host) names the line that called
    # backward(); the autograd setting is the program's again after the block.
    w = torch.ones(8, device="sim", requires_grad=True)
    before = torch._C._is_multithreading_enabled()
    with harness_sim.count() as c:
        err = w * 2 - 1
        err[err > 0].sum().backward()
    assert torch._C._is_multithreading_enabled() == before
    site = next(s for s in c.sync_sites if s.op == "aten::_index_put_impl_")
    assert "test_device.py" in site.frame and "test_a_sync_in_backward" in site.frame
    assert site.library.startswith("torch/autograd/graph.py:")
    assert "_engine_run_backward" in site.library


def test_copy_rules_blocking_pageable_and_non_blocking_pinned():
    host = torch.ones(256)
    pinned = torch.ones(256).pin_memory()
    with harness_sim.count() as c:
        with phase("blocking"):
            a = host.to("sim")                          # H2D + sync
        with phase("non_blocking"):
            b = pinned.to("sim", non_blocking=True)     # H2D, no sync
        with phase("d2d"):
            b.to("sim:1")                               # D2D (cross-device)
        with phase("back"):
            a.cpu()                                     # D2H + sync
    assert c.phases["blocking"]["h2d"] == {"count": 1, "bytes": 1024, "pinned": 0}
    assert c.phases["blocking"]["syncs"] == 1
    assert c.phases["non_blocking"]["h2d"] == {"count": 1, "bytes": 1024, "pinned": 1}
    assert c.phases["non_blocking"]["syncs"] == 0
    assert c.phases["d2d"]["d2d"]["count"] == 1
    assert c.phases["back"]["d2h"]["count"] == 1 and c.phases["back"]["syncs"] == 1
    assert c.syncs == 2


def test_synchronize_is_a_sync_and_mixing_devices_is_an_error():
    with harness_sim.count() as c:
        torch.sim.synchronize()
    assert [(s.op, s.reason) for s in c.sync_sites] == [("device.synchronize", "device synchronize")]
    with pytest.raises(RuntimeError):
        torch.ones(2, device="sim:0") + torch.ones(2, device="sim:1")
    with pytest.raises(RuntimeError):
        torch.ones(2, device="sim") + torch.ones(2)  # a CPU tensor that is not a 0-dim scalar


def test_phases_must_nest():
    with pytest.raises(RuntimeError, match="must nest"):
        outer = phase("outer").__enter__()
        phase("inner").__enter__()
        outer.__exit__(None, None, None)
    phase("inner").__exit__(None, None, None)
    phase("outer").__exit__(None, None, None)


def test_counts_are_read_after_the_block_and_blocks_do_not_nest():
    c = harness_sim.count()
    with c:
        with pytest.raises(RuntimeError, match="after the with-block"):
            _ = c.syncs
        with pytest.raises(RuntimeError, match="do not nest"):
            with harness_sim.count():
                pass
    with harness_sim.count():  # the failed inner block left nothing behind
        pass


def test_steps_divide_per_step_figures():
    x = torch.ones(2, device="sim")
    with harness_sim.count() as c:
        for _ in range(4):
            with c.step():
                (x + 1).sum().item()
    assert c.steps == 4
    assert c.per_step("launches") == 2 and c.per_step("syncs") == 1 and c.per_step("d2h") == 1


def test_distributed_collectives_are_counted(tmp_path):
    import torch.distributed as dist
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("cpu:gloo,sim:sim", store=store, rank=0, world_size=1)
    try:
        t = torch.ones(8, device="sim")
        with harness_sim.count() as c:
            with phase("train.grad_sync"):
                dist.all_reduce(t)
        assert c.collectives == {"all_reduce": {"count": 1, "bytes": 32}}
        # Waiting for it is device-side, as with NCCL: counted apart, not a host sync.
        assert c.syncs == 0 and c.sync_sites == []
        assert c.phases["train.grad_sync"]["collective_waits"] == 1
        assert torch.equal(t.cpu(), torch.ones(8))
    finally:
        dist.destroy_process_group()


def test_report_is_schema_v1_and_bench_reads_it(tmp_path, bench):
    x = torch.ones(2, device="sim")
    with harness_sim.count() as c:
        for _ in range(3):
            with c.step(), phase("optimizer.step"):
                x.sum().item()
    path = tmp_path / "python.json"
    c.report(path, scenario="python", variant="item_per_step")
    report = json.loads(path.read_text())
    assert report["schema_version"].startswith("1.")
    (variant,) = report["scenarios"][0]["variants"]
    assert variant["name"] == "item_per_step" and variant["measured_steps"] == 3
    assert variant["per_step"]["sync.count"] == 1 and variant["per_step"]["d2h.count"] == 1
    assert variant["sync_sites"][0]["phase"] == "optimizer.step"
    assert "time.median" in variant["phases"]["optimizer.step"]
    same = subprocess.run([bench, "compare", str(path), str(path)], capture_output=True, text=True)
    assert same.returncode == 0, same.stdout + same.stderr
    gate = tmp_path / "gate.json"
    gate.write_text(json.dumps({"gate_version": 1, "rules": [
        {"name": "no syncs", "scenario": "python", "variant": "*",
         "metric": "per_step.sync.count", "max": 0}]}))
    gated = subprocess.run([bench, "compare", str(path), str(path), "--gate", str(gate)],
                           capture_output=True, text=True)
    assert gated.returncode == 1, gated.stdout + gated.stderr
    assert "no syncs" in gated.stdout + gated.stderr


def test_version_and_check_commands():
    out = subprocess.run([sys.executable, "-m", "harness_sim", "--version", "--check"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert f"running torch {torch.__version__}" in out.stdout
    release = torch.__version__.split("+")[0]
    assert f"built for torch {release}" in out.stdout and "ok" in out.stdout


def test_a_torch_mismatch_is_refused(tmp_path):
    import shutil
    package = tmp_path / "harness_sim"
    shutil.copytree(pathlib_of(harness_sim), package)
    (package / "_build_info.py").write_text('TORCH_VERSION = "2.10.0"\n')
    out = subprocess.run([sys.executable, "-m", "harness_sim", "--version"], capture_output=True,
                         text=True, env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert out.returncode != 0
    assert f"built for torch 2.10.0 but this Python has torch {torch.__version__}" in out.stderr


def pathlib_of(module):
    import pathlib
    return pathlib.Path(module.__file__).parent


def test_conjugate_and_negative_views_copy_to_and_from_sim():
    # an fft's output can be a conjugate view: its .cpu() recursed without end (SIGSEGV) before
    c = torch.randn(4, dtype=torch.complex64)
    s = c.to("sim")
    assert torch.equal(s.conj().cpu(), c.conj())
    assert torch.equal(s.conj().clone().cpu(), c.conj().resolve_conj())
    assert torch.equal(s.conj().imag.cpu(), c.conj().imag)  # a negative view
    assert torch.equal(torch.neg(s.conj().imag).cpu(),
                       torch.neg(c.conj().imag))
    x = torch.randn(5, 6, 7)
    torch.testing.assert_close(torch.fft.ifft(x.to("sim"), n=10, dim=1).cpu(),
                               torch.fft.ifft(x, n=10, dim=1))
    m = torch.randn(4, 4)
    torch.testing.assert_close(torch.linalg.eig(m.to("sim"))[0].cpu(), torch.linalg.eig(m)[0])


def test_a_package_in_a_project_local_venv_is_named_from_the_package_on(tmp_path, monkeypatch):
    """A .venv under the program's root: its packages are named as on any other machine
    (mylib/__init__.py:2), not by the venv's path (issue 53)."""
    import importlib
    import harness_sim
    from harness_sim import _C
    from harness_sim._device import sites as _sites

    packages = tmp_path / ".venv" / "lib" / "python3.11" / "site-packages"
    (packages / "mylib").mkdir(parents=True)
    (packages / "mylib" / "__init__.py").write_text("def read(t):\n    return t.item()\n")
    monkeypatch.syspath_prepend(str(packages))
    mylib = importlib.import_module("mylib")
    try:
        _C.set_site_paths(str(tmp_path), _sites.package_dirs() + [str(packages)])
        with harness_sim.count() as c:
            mylib.read(torch.ones((), device="sim"))
        (site,) = c.sync_sites
        assert "mylib/__init__.py:2 in read" in (site.frame, site.library), site
        assert ".venv" not in site.frame + site.library
    finally:
        _sites.configure()
        sys.modules.pop("mylib", None)
