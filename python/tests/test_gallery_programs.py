"""The gallery's cases that need a library the pinned environment has not (docs/gallery.md): run
as the program sweep runs its programs (program_sweep.py: a side environment made once per
machine from PyPI, the library's own code unchanged under `run --as-cuda`), each pinned on the
line its report names -- before and after the fix. Where pip cannot reach PyPI, the test is
skipped, naming why."""
from __future__ import annotations

import os
import subprocess

import pytest

import program_sweep

GALLERY = ("trl-sft-chunked-1.10", "trl-sft-chunked-1.11", "megatron-plain",
           "megatron-count-zeros")


@pytest.fixture(scope="module")
def outcomes():
    results = {}
    for program in program_sweep.PROGRAMS:
        if program.name not in GALLERY:
            continue
        try:
            python = program_sweep.side_environment(program, log=lambda message: None)
        except RuntimeError as e:
            pytest.skip(f"{program.name}'s side environment could not be made: {e}")
        results[program.name] = program_sweep.run_program(program, python, cpu=False)
    return results


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


def test_megatron_7407_the_capture_gate_fails_naming_the_line_and_passes_without_it(
        outcomes, bench, tmp_path):
    """examples/gallery/optimizer_step_capturable.json on the program's own reports: a capture
    blocker a step, named at its line, with log_num_zeros_in_grad; none without."""
    program = next(p for p in program_sweep.PROGRAMS if p.name == "megatron-count-zeros")
    python = program_sweep.side_environment(program, log=lambda message: None)
    gate = program_sweep.REPO / "examples" / "gallery" / "optimizer_step_capturable.json"
    env = {**os.environ, **program_sweep.QUIET_ENV, "PYTHONPATH": str(program_sweep.DRIVERS)}
    env.pop("HARNESS_SIM_AS_CUDA", None)
    verdicts = {}
    for mode in ("count-zeros", "plain"):
        report = tmp_path / f"{mode}.json"
        run = subprocess.run([python, "-m", "harness_sim", "run", "--as-cuda", "--quiet", "--out",
                              str(report), "--", str(program_sweep.DRIVERS / program.driver),
                              mode], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=300, stdin=subprocess.DEVNULL)
        assert run.returncode == 0, run.stderr[-3000:]
        verdicts[mode] = subprocess.run([bench, "compare", str(report), str(report), "--gate",
                                         str(gate)], capture_output=True, text=True, timeout=120)
    failed = verdicts["count-zeros"]
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert ("per_step.capture.blockers  actual 1 > allowed 0; at 1/step sync at "
            "megatron/core/optimizer/clip_grads.py:246 in count_zeros_fp32") in failed.stdout
    assert verdicts["plain"].returncode == 0, verdicts["plain"].stdout
