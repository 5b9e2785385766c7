"""A slice of the program sweep (program_sweep.py; docs/program-sweep.md): frameworks from PyPI,
each running its own training entry point unchanged under `run --as-cuda`. The slice holds the
frameworks the sweep found broken and that a fix of the mechanism made run: timm (a half
softmax in float, which CPU's kernel refuses and torch's composite asks of a CUDA tensor; a
module's deepcopy allocating a CUDA storage directly) and Keras (an optimizer of its own: a step
ends with its backward). Each framework's side environment is made once per machine (pip, from
PyPI); where pip cannot reach PyPI, the test is skipped, naming why."""
from __future__ import annotations

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
    assert [(op, frame) for _, op, _, frame in timm.sync_sites] == [
        ("aten::_local_scalar_dense", "timm/utils/cuda.py:71 in __call__")]


def test_keras_fit_runs_unchanged_with_a_step_per_backward(outcomes):
    keras = outcomes["keras"]
    assert keras.unchanged and not keras.failure, keras.failure
    assert keras.measured_steps > 0 and keras.per_step["launch"] > 0
