"""`run --as-cuda`, where sim serves the CUDA device type itself (issue 50): a program and its libraries see CUDA tensors and devices everywhere, and what
they do on CUDA is counted -- the libraries that refused or silently changed course when every
tensor said `sim` (Lightning Fabric, Accelerate's fp16, a GradScaler built only for CUDA,
DataParallel on one device, `x[mask] = v`)."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from conftest import REPO

PROGRAMS = REPO / "python" / "tests" / "programs"


def _run_device_cuda(tmp_path, program, *args, out=None):
    """`python -m harness_sim run --as-cuda` in a process of its own: sim serves CUDA (the mode
    is chosen when harness_sim is imported, by the command line)."""
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_SIM_AS_CUDA"}
    cmd = [sys.executable, "-m", "harness_sim", "run", "--as-cuda"]
    if out is not None:
        cmd += ["--out", str(out)]
    r = subprocess.run([*cmd, "--", str(program), *args], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return r


def _result(stdout: str, tag: str = "RESULT") -> dict:
    (line,) = [line for line in stdout.splitlines() if line.startswith(tag + " ")]
    return json.loads(line[len(tag) + 1:])


def _steps(path) -> dict:
    (scenario,) = json.loads(path.read_text())["scenarios"]
    return {v["name"]: v for v in scenario["variants"]}["steps"]


def test_a_cuda_tensor_is_a_cuda_tensor_to_the_program_and_to_torch(tmp_path):
    facts = _result(_run_device_cuda(tmp_path, PROGRAMS / "cuda_identity_probe.py").stdout,
                    "IDENTITY")
    assert facts["type"] == "cuda" and facts["is_cuda"] and facts["equal"]
    assert facts["str"] == facts["module_param"] == facts["cuda_method"] == "cuda:0"
    assert facts["tensor_type"] == "torch.cuda.FloatTensor"
    assert facts["accelerator"] == "cuda" and facts["to_cpu"] == "cpu" and facts["pinned"]
    assert facts["autocast_dtype"] == "torch.bfloat16"  # AutocastCUDA: torch's own
    # python_variable_indexing.cpp makes the value a CPU scalar for a CUDA tensor, and
    # _index_put_impl_ then takes masked_fill_: no nonzero, no sync
    assert facts["masked_assign"] == {"syncs": 0, "launches": {"aten::masked_fill_": 1}}
    # GradScaler.step + update: unscale (one fused launch), found_inf read back once, the update
    assert facts["scaler_enabled"]
    step = facts["scaler_step"]
    assert (step["syncs"], step["d2h"]) == (1, 1)
    assert step["launches"]["aten::_amp_foreach_non_finite_check_and_unscale_"] == 1
    assert step["launches"]["aten::_amp_update_scale_"] == 1


def test_a_scaler_built_only_for_cuda_is_built(tmp_path):
    out = tmp_path / "scaler.json"
    r = _run_device_cuda(tmp_path, PROGRAMS / "cuda_only_scaler.py", out=out)
    assert _result(r.stdout) == {"device": "cuda", "scaler": True}
    steps = _steps(out)
    assert steps["measured_steps"] == 5
    ops = steps["launches_by_op"]
    assert ops["aten::_amp_foreach_non_finite_check_and_unscale_"] == 5
    assert ops["aten::_amp_update_scale_"] == 5
    assert steps["per_step"]["sync.count"] == 1 and steps["per_step"]["d2h.count"] == 1


def test_data_parallel_on_one_device_scatters_its_batch(tmp_path):
    out = tmp_path / "dp.json"
    r = _run_device_cuda(tmp_path, PROGRAMS / "data_parallel_one_device.py", out=out)
    assert _result(r.stdout) == {"device_ids": [0], "output": "cuda:0"}
    steps = _steps(out)
    # the CPU batch copied to the device by comm.scatter (non-blocking, from pageable memory)
    assert steps["per_step"]["h2d.count"] == 1 and steps["per_step"]["sync.count"] == 0


@pytest.mark.parametrize("precision", ["32-true", "16-mixed"])
def test_fabric_accelerator_cuda(tmp_path, precision):
    if importlib.util.find_spec("lightning") is None:
        pytest.skip("needs Lightning (python/requirements.txt)")
    out = tmp_path / "fabric.json"
    r = _run_device_cuda(tmp_path, PROGRAMS / "fabric_cuda.py", precision, out=out)
    mixed = precision == "16-mixed"
    assert _result(r.stdout) == {"device": "cuda:0", "scaler": mixed}
    steps = _steps(out)
    ops = steps["launches_by_op"]
    assert ops.get("aten::_amp_update_scale_", 0) == (steps["measured_steps"] if mixed else 0)
    assert steps["per_step"]["sync.count"] == (1 if mixed else 0)


def test_accelerate_fp16_and_unwrap_model(tmp_path):
    if importlib.util.find_spec("accelerate") is None:
        pytest.skip("needs accelerate (python/requirements-extra.txt)")
    out = tmp_path / "accelerate.json"
    r = _run_device_cuda(tmp_path, PROGRAMS / "accelerate_fp16.py", out=out)
    assert _result(r.stdout) == {"device": "cuda", "unwrapped": "Sequential", "scaler": True}
    steps = _steps(out)
    assert steps["launches_by_op"]["aten::_amp_update_scale_"] == steps["measured_steps"]
    assert steps["per_step"]["sync.count"] == 1


def test_cuda_generators_are_cudas_kind_and_fsdp2_initialises_on_them(tmp_path):
    # CUDA's state (CUDAGeneratorImpl::get_state): seed, then Philox offset, 16 bytes; the offset
    # advanced as calc_execution_policy does on an H100 (DistributionTemplates.h): 4 for 1000
    # floats and for 8 dropped out, 8 for 2M uniform floats; the host's generator untouched.
    facts = _result(_run_device_cuda(tmp_path, PROGRAMS / "cuda_rng_probe.py").stdout)
    assert (facts["state_bytes"], facts["state_dtype"]) == (16, "torch.uint8")
    assert facts["offset_after_randn"] == 4 and facts["offset_after_dropout_and_big"] == 16
    assert facts["replayed"] and facts["host_untouched"] and facts["same_stream"]
    assert facts["generator_device"] == "cuda:0" and facts["default_generators"] == ["cuda:0"]
    assert facts["seed"] == 7 and facts["fork_restored_offset"] == 4
    # p.normal_ on FSDP2's DTensor parameters: DTensor's RNG tracker reads the offset as CUDA's
    assert (facts["param_type"], facts["device"], facts["std_ok"]) == ("DTensor", "cuda:0", True)


def test_the_mode_is_chosen_by_the_command_line_and_a_bad_one_is_refused(tmp_path):
    prog = tmp_path / "p.py"
    prog.write_text("import torch\nprint('DEVICE', torch.ones(1, device='cuda').device)\n")
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_SIM_AS_CUDA"}
    cmd = [sys.executable, "-m", "harness_sim", "run", "--as-cuda", "--", str(prog)]

    def run(**extra):
        return subprocess.run(cmd, cwd=tmp_path, env={**env, **extra}, capture_output=True,
                              text=True, timeout=300, stdin=subprocess.DEVNULL)

    assert "DEVICE cuda:0" in run().stdout
    assert "DEVICE sim:0" in run(HARNESS_SIM_AS_CUDA="map").stdout
    bad = run(HARNESS_SIM_AS_CUDA="gpu")
    assert bad.returncode == 2 and "HARNESS_SIM_AS_CUDA='gpu': expected 'device'" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_deepspeed_zero2_sees_a_cuda_accelerator(tmp_path):
    if importlib.util.find_spec("deepspeed") is None:
        pytest.skip("needs DeepSpeed (python/requirements-extra.txt)")
    out = tmp_path / "ds.json"
    r = _run_device_cuda(tmp_path, PROGRAMS / "deepspeed_zero2_cuda.py", out=out)
    assert _result(r.stdout) == {"accelerator": "cuda", "device": "cuda:0",
                                 "backend": "cpu:gloo,cuda:sim"}
    steps = _steps(out)
    # deepspeed/runtime/utils.py:830-831 (mask_nan_or_inf_with_val_inplace, the bf16 optimizer's
    # gradient-norm check): a host scalar copied to the device and a masked_fill_ whose value
    # is read back; the engine's timers synchronize the device (timer.py:238, :256)
    sites = {(s["op"], s["frame"].split(" in ")[0]) for s in steps["sync_sites"]}
    assert ("aten::masked_fill_", "deepspeed/runtime/utils.py:831") in sites
    assert steps["per_step"]["sync.count"] == 3


def test_ops_and_hidden_syncs_pinned_on_sim_hold_on_cuda_tensors(tmp_path):
    # test_cuda_ops.py (the op CUDA runs, by name, per module; values against CPU) and
    # test_hidden_syncs.py (each of CUDA's host reads a sync, what does not block not one), run
    # again in a process where sim serves CUDA: their pins hold on CUDA tensors.
    env = dict(os.environ, HARNESS_SIM_AS_CUDA="device")
    tests = REPO / "python" / "tests"
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        str(tests / "test_cuda_ops.py"), str(tests / "test_hidden_syncs.py")],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert " failed" not in r.stdout and " passed" in r.stdout


def test_a_custom_op_library_loaded_later_runs_on_sim(tmp_path):
    # torchvision loads its ops' library (CUDA kernels of its own) after sim serves CUDA: they are
    # taken over as libtorch_cuda's were, each its CPU kernel on the host
    if importlib.util.find_spec("torchvision") is None:
        pytest.skip("needs torchvision (python/requirements-extra-torch2.11.txt)")
    out = tmp_path / "tv.json"
    facts = _result(_run_device_cuda(tmp_path, PROGRAMS / "torchvision_ops_cuda.py",
                                     out=out).stdout)
    assert facts == {"device": "cuda:0", "nms_as_cpu": True, "roi_align_as_cpu": True}
