"""A slice of the program sweep (program_sweep.py; docs/program-sweep.md): frameworks from PyPI,
each running its own training entry point unchanged under `run --as-cuda`. The slice holds the
frameworks the sweep found broken and that a fix of the mechanism made run: timm (a half
softmax in float, which CPU's kernel refuses and torch's composite asks of a CUDA tensor; a
module's deepcopy allocating a CUDA storage directly) and Keras (an optimizer of its own: a step
ends with its backward). Each framework's side environment is made once per machine (pip, from
PyPI); where pip cannot reach PyPI, the test is skipped, naming why. The last tests need none:
what the sweep makes of a program of several ranks (torchrun; rank 0's figures)."""
from __future__ import annotations

import json

import pytest

import program_sweep

SLICE = ("timm", "keras")


@pytest.fixture(scope="module")
def outcomes():
    try:
        return program_sweep.outcomes_of(SLICE)
    except RuntimeError as e:
        pytest.skip(f"a side environment could not be made: {e}")


def test_timm_training_utilities_run_unchanged_on_cuda(outcomes):
    timm = outcomes["timm"]
    assert timm.unchanged, timm.failure
    # NativeScaler (GradScaler.step): found_inf read back once a step, the one sync; the batch
    # and its labels copied non-blocking from pageable memory (copies, not syncs)
    assert timm.per_step["sync"] == 1 and timm.per_step["h2d"] == 2
    # Seeded as train.py is (NumPy too: Mixup draws mixup or cutmix per batch), the same launches
    # every run
    assert timm.per_step["launch"] == 200
    assert [(op, frame) for _, op, _, frame in timm.sync_sites] == [
        ("aten::_local_scalar_dense", "timm/utils/cuda.py:71 in __call__")]


def test_keras_fit_runs_unchanged_with_a_step_per_backward(outcomes):
    keras = outcomes["keras"]
    assert keras.unchanged and not keras.failure, keras.failure
    assert keras.measured_steps > 0 and keras.per_step["launch"] > 0


# A program of several ranks (torchtitan's): started by torchrun, each rank under run, rank 0's
# report holding every rank's variants. What the sweep reads of it needs no side environment.

def test_a_program_of_several_ranks_is_started_by_torchrun():
    program = next(p for p in program_sweep.PROGRAMS if p.name == "torchtitan-fsdp2")
    assert program_sweep._launcher(program, "py") == [
        "py", "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    timm = next(p for p in program_sweep.PROGRAMS if p.name == "timm")
    assert program_sweep._launcher(timm, "py") == ["py"]


def test_a_report_of_several_ranks_gives_rank_0s_figures_and_collectives(tmp_path):
    def variant(name, launches):
        return {"name": name, "measured_steps": 5, "sync_sites": [], "copy_sites": [],
                "per_step": {"launch.count": launches, "sync.count": 1, "h2d.count": 2,
                             "d2h.count": 3, "collective.count": 2, "collective.bytes": 12,
                             "collective.all_gather.count": 2, "collective.all_gather.bytes": 12,
                             "collective.barrier.count": 0, "collective.barrier.bytes": 0}}
    report = tmp_path / "r.json"
    report.write_text(json.dumps({"scenarios": [{"variants": [
        variant("steps", 20), variant("rank0/steps", 10), variant("rank1/steps", 10)]}]}))
    outcome = program_sweep.Outcome("p", "f", "1", "e")
    program_sweep._read_report(outcome, program_sweep._steps(report))
    assert outcome.per_step["launch"] == 10  # rank 0's, not the sum over the ranks
    assert outcome.collectives == {"all_gather": [2, 12]}  # kinds that occurred, with bytes
    assert program_sweep._collectives(outcome) == "2 all_gather (12 B)"


def test_a_failed_rank_is_named_by_its_exception_not_by_torchrun():
    stderr = ("RuntimeError: Backend counting(gloo) does not support "
              "reduce_scatter_tensor_coalesced\n"
              "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
              "harness_sim FAILED\n")
    assert program_sweep._first_failure(stderr).startswith("RuntimeError: Backend counting")
