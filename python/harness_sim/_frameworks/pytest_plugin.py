"""The pytest plugin's fixtures and context managers (public as ``harness_sim.pytest``, whose
docstring says how to use them): what a with-block may cost the device, counted on sim."""
from __future__ import annotations

import contextlib

import pytest

from .._device.counting import Counts, count

# Figure name -> how to read it from a harness_sim.Counts.
_FIGURES = {
    "syncs": lambda c: c.syncs,
    "launches": lambda c: c.launches,
    "h2d": lambda c: c.total["h2d"]["count"],
    "d2h": lambda c: c.total["d2h"]["count"],
    "d2d": lambda c: c.total["d2d"]["count"],
    "collectives": lambda c: sum(t["count"] for t in c.collectives.values()),
}


def _describe(counts: Counts, over: dict[str, tuple[int, int]]) -> str:
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
    with count() as counts:
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
    return count()
