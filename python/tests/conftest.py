"""Shared by the Python tests: where the repository and the bench binary are."""
from __future__ import annotations

import os
import pathlib
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "examples"))  # the examples are the tests' workloads

pytest_plugins = ["pytester"]


@pytest.fixture(scope="session")
def bench() -> str:
    """The C++ bench binary (HARNESS_BENCH, else build/bench/bench): scripts/test_python.sh
    builds it first."""
    path = os.environ.get("HARNESS_BENCH", str(REPO / "build" / "bench" / "bench"))
    if not os.access(path, os.X_OK):
        pytest.fail(f"no bench binary at {path}: run ./scripts/setup.sh (or set HARNESS_BENCH)")
    return path


def site_counts(steps: dict, *keys: str) -> dict:
    """The counted steps' syncs summed by the given fields of their sites (sites are by line)."""
    out: dict = {}
    for site in steps["sync_sites"]:
        key = tuple(site[k] for k in keys)
        out[key] = out.get(key, 0) + site["count"]
    return out


# The slice that CI also runs on the newest torch (.ci/run: `scripts/test_python.sh -m release`
# with HARNESS_TORCH=2.15), the whole suite running on 2.11: what differs between torch releases.
# That is the C++ compiled against each torch (the sim device, its kernels and sync rules, the
# CUDA op lists, autocast, SDPA, the counting c10d backend, the counting session), the names of
# torch.cuda that --as-cuda classifies, inductor, torch's OpInfo database and torch.optim (the
# fidelity and pathology tests); besides these modules, single tests elsewhere carry
# @pytest.mark.release (a program whose counts are keyed by release). What is left out runs the
# `run` command's own mechanics (options, ends, traces, ranks' scratch) and pinned libraries
# (transformers, DeepSpeed, HTA), which the torch release does not change.
RELEASE_MODULES = frozenset({
    "test_torch_release", "test_sdpa_release", "test_cuda_op_lists", "test_cuda_ops",
    "test_device", "test_hidden_syncs", "test_device_module", "test_autocast", "test_compile",
    "test_as_cuda_surface", "test_opinfo_sweep", "test_distributed", "test_fidelity",
    "test_pathologies", "test_pytest_plugin", "test_lightning", "test_cuda_is_cuda",
})


def pytest_configure(config):
    if os.environ.get("HARNESS_SIM_AS_CUDA") == "device":
        # A module run again on CUDA tensors (test_cuda_is_cuda): sim serves CUDA, and torch.cuda
        # answers, as under `run --as-cuda`, for the whole session.
        from harness_sim._cuda.as_cuda import AsCuda
        AsCuda().install()
    config.addinivalue_line(
        "markers", "release: exercises what differs between torch releases (run on every "
        "release CI tests; conftest.RELEASE_MODULES adds whole modules)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.module.__name__.rsplit(".", 1)[-1] in RELEASE_MODULES:
            item.add_marker(pytest.mark.release)
