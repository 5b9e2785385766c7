"""The catalogue of common hidden syncs (examples/pathologies/): each program runs its pathology
and its fix on sim, prints their per-step cost side by side and writes a report; its gate pins
both (the pathology's syncs per step, and the fix's), read by the real bench."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CATALOGUE = os.path.join(HERE, "..", "..", "examples", "pathologies")
PROGRAMS = sorted(f[:-3] for f in os.listdir(CATALOGUE)
                  if f.endswith(".py") and f != "side_by_side.py")


def test_every_program_has_a_gate():
    assert PROGRAMS
    for name in PROGRAMS:
        assert os.path.exists(os.path.join(CATALOGUE, "gates", name + ".json")), name


@pytest.mark.parametrize("name", PROGRAMS)
def test_program_prints_both_sides_and_passes_its_gate(name, bench, tmp_path):
    out = tmp_path / "report.json"
    r = subprocess.run([sys.executable, os.path.join(CATALOGUE, name + ".py"), "--out", str(out)],
                       capture_output=True, text=True, timeout=300, cwd=CATALOGUE)
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(out.read_text())
    variants = [v["name"] for v in report["scenarios"][0]["variants"]]
    assert len(variants) == 2
    for v in variants:
        assert v in r.stdout  # printed side by side
    gate = os.path.join(CATALOGUE, "gates", name + ".json")
    g = subprocess.run([bench, "compare", str(out), str(out), "--gate", gate],
                       capture_output=True, text=True, timeout=120)
    assert g.returncode == 0, g.stdout + g.stderr
    assert "gate: 2 passed, 0 failed" in g.stdout + g.stderr
