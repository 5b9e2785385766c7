"""pytest plugin: assert what a piece of training code may cost the device, on sim, in CPU-only CI.

Enable it with ``pytest -p harness_sim.pytest`` or ``pytest_plugins = ["harness_sim.pytest"]`` in
a conftest.py. Then::

    def test_adam_step_makes_no_syncs(no_syncs):
        with no_syncs():
            optimizer.step()

fails with the sync sites named (op, reason, phase, and the Python frame that called it)::

    AssertionError: 4 syncs where at most 0 were allowed:
      4 x aten::_local_scalar_dense (item) in phase (none) at test_resume.py:20 in test_resumed_step
      (torch/optim/optimizer.py:96 in _get_value)

``sim_budget(syncs=0, d2h=0, launches=40)`` bounds any of the counts; ``sim_count`` is a plain
``harness_sim.count()`` for assertions of one's own. The same context managers work without
pytest: ``harness_sim.pytest.budget(...)``.
"""
from __future__ import annotations

# pytest finds a plugin's fixtures among its module's names: they are these.
from ._frameworks.pytest_plugin import (budget, no_syncs, no_syncs_block, sim_budget,
                                        sim_count)

__all__ = ["budget", "no_syncs", "no_syncs_block", "sim_budget", "sim_count"]
