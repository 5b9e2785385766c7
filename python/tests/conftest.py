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
