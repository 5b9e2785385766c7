"""Fidelity: real torch.optim.Adam / AdamW on sim (examples/torch_adam_on_sim.py) against the
harness's C++ Adam (bench's resume_adam and fused_adam on sim): launches by op, H2D, D2H and
syncs per step must be equal for every variant, and every Python resume must reproduce its
uninterrupted run bitwise."""
from __future__ import annotations

import pytest

import torch_adam_on_sim as mirror


@pytest.mark.parametrize("scenario", ["resume_adam", "fused_adam"])
def test_torch_optim_counts_equal_the_cpp_runtime(scenario, bench, capsys):
    python = mirror.run_variants(scenario)
    report = mirror.bench_report(bench, scenario, list(python))
    problems = mirror.compare(scenario, python, report)
    print(capsys.readouterr().out)  # the table, shown with -s or on failure
    assert not problems, "\n".join(problems)
    # The pathology itself, from real PyTorch: moving `step` to the device costs foreach Adam
    # 2 syncs per parameter tensor per step, the for-loop 1; fused and capturable none.
    tensors = 2 * (len(mirror.WIDTHS) - 1)
    per_step = {name: counts.per_step("syncs") for name, (counts, _) in python.items()}
    if scenario == "resume_adam":
        assert per_step["resume_move_all/foreach"] == 2 * tensors
        assert per_step["resume_move_all/forloop"] == tensors
        assert per_step["resume_keep_step/foreach"] == per_step["fresh/foreach"] == 0
    else:
        assert per_step["resumed_move_all/fused"] == per_step["resumed_move_all/capturable"] == 0
        assert per_step["resumed_move_all/adamw_foreach"] == 2 * tensors
