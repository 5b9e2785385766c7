"""The gallery's cases that need a library the pinned environment has not (docs/gallery.md): run
as the program sweep runs its programs (program_sweep.py: a side environment made once per
machine from PyPI, the library's own code unchanged under `run --as-cuda`), each pinned on the
line its report names -- before and after the fix. Where pip cannot reach PyPI, the test is
skipped, naming why."""
from __future__ import annotations

import subprocess

import pytest

import program_sweep

GALLERY = ("trl-sft-chunked-1.10", "trl-sft-chunked-1.11", "megatron-plain",
           "megatron-count-zeros")


@pytest.fixture(scope="module")
def outcomes():
    try:
        return program_sweep.outcomes_of(GALLERY)
    except RuntimeError as e:
        pytest.skip(f"a side environment could not be made: {e}")


def _sites(outcome, path: str) -> dict:
    """The outcome's sync sites in `path`: frame -> count over its counted steps."""
    assert outcome.unchanged and not outcome.failure, outcome.failure
    return {frame: count for count, _, _, frame in outcome.sync_sites if frame.startswith(path)}


def test_trl_6842_one_read_of_the_chunked_loss_gone_after_the_fix(outcomes):
    loss = "trl/trainer/sft_trainer.py"
    before = _sites(outcomes["trl-sft-chunked-1.10"], loss)
    after = _sites(outcomes["trl-sft-chunked-1.11"], loss)
    steps = outcomes["trl-sft-chunked-1.10"].measured_steps
    chunked = lambda sites: {f: n for f, n in sites.items() if "_chunked_cross_entropy_loss" in f}
    # 1.10.0: `if n_valid_tensor == 0:` and `range(0, n_padded, ...)`, once a forward each
    assert chunked(before) == {f"{loss}:190 in _chunked_cross_entropy_loss": steps,
                               f"{loss}:211 in _chunked_cross_entropy_loss": steps}
    # 1.11.0: the range only
    assert chunked(after) == {f"{loss}:206 in _chunked_cross_entropy_loss": steps}
    assert (outcomes["trl-sft-chunked-1.10"].per_step["sync"]
            - outcomes["trl-sft-chunked-1.11"].per_step["sync"]) == pytest.approx(1)


def test_megatron_7407_count_zeros_reads_back_inside_the_optimizer_step(outcomes):
    plain, zeros = outcomes["megatron-plain"], outcomes["megatron-count-zeros"]
    assert _sites(plain, "megatron/") == {} and plain.per_step["sync"] == 0
    assert _sites(zeros, "megatron/") == {
        "megatron/core/optimizer/clip_grads.py:246 in count_zeros_fp32": zeros.measured_steps}
    assert zeros.per_step["sync"] == 1  # the step's one capture blocker


def _report(name: str, tmp_path) -> str:
    """Sweep program `name` run as the sweep runs it, its report kept: the report's path."""
    program = next(p for p in program_sweep.PROGRAMS if p.name == name)
    python = program_sweep.side_environment(program, log=lambda message: None)
    report = tmp_path / f"{name}.json"
    outcome = program_sweep.run_program(program, python, cpu=False, out=report)
    assert outcome.unchanged and not outcome.failure, outcome.failure
    return str(report)


def _gate(bench, gate: str, baseline: str, report: str) -> subprocess.CompletedProcess:
    path = program_sweep.REPO / "examples" / "gallery" / gate
    return subprocess.run([bench, "compare", baseline, report, "--gate", str(path)],
                          capture_output=True, text=True, timeout=120)


def test_trl_6842_the_site_gate_fails_before_the_fix_and_passes_after(outcomes, bench, tmp_path):
    """examples/gallery/no_new_sync_sites.json, 1.11.0's report the baseline: 1.10.0 has one sync
    site more in the chunked loss. (Sites in one function pair in line order, so 1.10.0's :190
    pairs with 1.11.0's :206 and the one named new is :211.)"""
    fixed = _report("trl-sft-chunked-1.11", tmp_path)
    before = _gate(bench, "no_new_sync_sites.json", fixed,
                   _report("trl-sft-chunked-1.10", tmp_path))
    assert before.returncode == 1, before.stdout + before.stderr
    assert ("sync_sites.new  1 new sync site: +1 sync/step at trl/trainer/sft_trainer.py:211 in "
            "_chunked_cross_entropy_loss") in before.stdout
    after = _gate(bench, "no_new_sync_sites.json", fixed, fixed)
    assert after.returncode == 0, after.stdout


def test_megatron_7407_the_capture_gate_fails_naming_the_line_and_passes_without_it(
        outcomes, bench, tmp_path):
    """examples/gallery/optimizer_step_capturable.json on the program's own reports: a capture
    blocker a step, named at its line, with log_num_zeros_in_grad; none without."""
    zeros = _report("megatron-count-zeros", tmp_path)
    failed = _gate(bench, "optimizer_step_capturable.json", zeros, zeros)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert ("per_step.capture.blockers  actual 1 > allowed 0; at 1/step sync at "
            "megatron/core/optimizer/clip_grads.py:246 in count_zeros_fp32") in failed.stdout
    plain = _report("megatron-plain", tmp_path)
    passed = _gate(bench, "optimizer_step_capturable.json", plain, plain)
    assert passed.returncode == 0, passed.stdout
