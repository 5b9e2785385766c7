"""harness_sim.pytest: a passing and a failing use, run by pytest itself (pytester)."""
from __future__ import annotations

TESTS = '''
import torch

def make():
    model = torch.nn.Linear(4, 4).to("sim")
    opt = torch.optim.Adam(model.parameters(), foreach=True)
    model(torch.ones(2, 4, device="sim")).sum().backward()
    return opt

def test_fresh_adam_step_makes_no_syncs(no_syncs):
    opt = make()
    with no_syncs():
        opt.step()

def test_step_on_the_device_syncs(no_syncs):
    opt = make()
    opt.step()
    for state in opt.state.values():
        state["step"] = state["step"].to("sim")   # what Lightning < 2.4 did on resume
    with no_syncs():
        opt.step()

def test_budget(sim_budget):
    opt = make()
    with sim_budget(syncs=0, launches=1):
        opt.step()
'''


def _item_line_of_get_value() -> int:
    """The line of torch.optim.optimizer._get_value's .item() in the installed torch (96 in 2.11,
    102 in 2.15)."""
    import inspect

    import torch.optim.optimizer as optimizer
    lines, first = inspect.getsourcelines(optimizer._get_value)
    return first + next(i for i, line in enumerate(lines) if ".item()" in line)


def test_plugin_passes_and_fails_with_the_sync_sites(pytester):
    pytester.makepyfile(test_training=TESTS)
    result = pytester.runpytest_subprocess("-p", "harness_sim.pytest", "-q")
    result.assert_outcomes(passed=1, failed=2)
    out = result.stdout.str()
    assert "AssertionError: 4 syncs where at most 0 were allowed:" in out
    assert "4 x aten::_local_scalar_dense (item) in phase (none) at" in out
    assert "test_training.py:20 in test_step_on_the_device_syncs" in out
    assert (f"test_step_on_the_device_syncs (torch/optim/optimizer.py:{_item_line_of_get_value()} "
            "in _get_value)") in out
    assert "launches where at most 1 was allowed" in out
    assert "launches by op: aten::zero_ x4, " in out and "aten::_foreach_lerp_ x1" in out
