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

import contextlib

import pytest

import harness_sim

# Figure name -> how to read it from a harness_sim.Counts.
_FIGURES = {
    "syncs": lambda c: c.syncs,
    "launches": lambda c: c.launches,
    "h2d": lambda c: c.total["h2d"]["count"],
    "d2h": lambda c: c.total["d2h"]["count"],
    "d2d": lambda c: c.total["d2d"]["count"],
    "collectives": lambda c: sum(t["count"] for t in c.collectives.values()),
}


def _describe(counts: harness_sim.Counts, over: dict[str, tuple[int, int]]) -> str:
    lines = [f"{got} {name} where at most {limit} {'was' if limit == 1 else 'were'} allowed"
             for name, (got, limit) in over.items()]
    message = "; ".join(lines) + ":"
    if "syncs" in over or "d2h" in over:
        for site in counts.sync_sites:
            message += f"\n  {site}"
    if "launches" in over:
        top = sorted(counts.launches_by_op.items(), key=lambda kv: -kv[1])[:10]
        message += "\n  launches by op: " + ", ".join(f"{op} x{n}" for op, n in top)
    return message


@contextlib.contextmanager
def budget(**limits: int):
    """Counts the with-block on sim and raises AssertionError naming what went over a limit
    (keywords: syncs, launches, h2d, d2h, d2d, collectives)."""
    unknown = set(limits) - set(_FIGURES)
    if unknown:
        raise TypeError(f"unknown figure(s) {sorted(unknown)}: known are {sorted(_FIGURES)}")
    with harness_sim.count() as counts:
        yield counts
    over = {name: (_FIGURES[name](counts), limit) for name, limit in limits.items()
            if _FIGURES[name](counts) > limit}
    if over:
        raise AssertionError(_describe(counts, over))


def no_syncs_block():
    """``budget(syncs=0)``: the with-block makes no host-device synchronisation."""
    return budget(syncs=0)


@pytest.fixture
def no_syncs():
    """``with no_syncs(): ...`` fails the test if the block syncs, naming every sync site."""
    return no_syncs_block


@pytest.fixture
def sim_budget():
    """``with sim_budget(syncs=0, d2h=0, launches=40): ...``: limits on the block's counts."""
    return budget


@pytest.fixture
def sim_count():
    """A fresh ``harness_sim.count()``: ``with sim_count as c: ...``, then assert on ``c``."""
    return harness_sim.count()
