"""What ``python -m harness_sim run`` hands the frameworks while it counts a program in this
process (``_run.program`` activates it for the program's run): the step windows that Lightning's
training batches end with ``--steps-from lightning``, and the ranks the program starts itself,
which Lightning's launchers start under run too. The frameworks read it; they import nothing of
run (it is the layer above them)."""
from __future__ import annotations

from typing import Protocol


class StepBoundaries(Protocol):
    """run's step windows (``_run.windows.StepWindows``), as a framework sees them."""

    def boundary(self) -> None: ...


class StartedRanks(Protocol):
    """The ranks a program starts itself (``_run.ranks.StartedRanks``), as a launcher sees
    them: the command line of a rank under run, and the started processes run waits for."""

    procs: list

    def command(self, program: list[str]) -> list[str]: ...


_active: dict | None = None  # while run counts: {"windows", "lightning_steps", "ranks"}


def activate(windows: StepBoundaries, lightning_steps: bool,
             ranks: StartedRanks | None = None) -> None:
    global _active
    _active = {"windows": windows, "lightning_steps": lightning_steps, "ranks": ranks}


def deactivate() -> None:
    global _active
    _active = None


def running() -> bool:
    """Whether ``python -m harness_sim run`` is counting a program in this process."""
    return _active is not None


def windows() -> StepBoundaries | None:
    return _active["windows"] if _active else None


def lightning_steps() -> bool:
    """Whether each Lightning training batch ends a step (``--steps-from lightning``)."""
    return bool(_active and _active["lightning_steps"])


def started_ranks() -> StartedRanks | None:
    """The ranks the program starts, each under run (None: run starts none, as in a rank)."""
    return _active["ranks"] if _active else None
