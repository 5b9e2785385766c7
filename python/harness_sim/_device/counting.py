"""Counting from Python: ``count()`` (a with-block of the instrument), ``phase()`` and reports."""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import datetime
import functools
import os
import socket
import sys
from typing import Iterable, Mapping

import torch

from .. import _C
from . import compile as _compile


class phase(contextlib.ContextDecorator):
    """``with harness_sim.phase("optimizer.step"):`` names what the program is doing. Every event
    counted inside is attributed to the innermost phase, as in bench's reports; it is also an NVTX
    range in the "harness" domain where NVTX is available. Phases must nest. Usable as a
    decorator."""

    def __init__(self, name: str):
        if not isinstance(name, str) or not name:
            raise ValueError("a phase needs a non-empty name")
        self.name = name

    def __enter__(self):
        _C.enter_phase(self.name)
        return self

    def __exit__(self, *exc):
        _C.exit_phase(self.name)
        return False


def _where(frame: str, library: str) -> str:
    if not frame:
        return library
    return f"{frame} ({library})" if library else frame


_allowed: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "harness_sim_allowed_sync", default=None)
_C.set_allowed_var(_allowed)


class allow_sync(contextlib.ContextDecorator):
    """``with harness_sim.allow_sync("logging every 100 steps"):`` marks what the program means to
    sync: its syncs are counted as any other, but each site says it is allowed and why, and
    ``--expect`` does not fail on it (reports and the console list it apart). The mark follows
    the thread and the asyncio task (a ``contextvars`` variable); it costs setting that variable
    and nothing else when nothing is counting. Nests (the innermost reason is named). Usable as a
    decorator."""

    def __init__(self, why: str):
        if not isinstance(why, str) or not why:
            raise ValueError("allow_sync needs a reason: what the program syncs for")
        self.why = why
        self._tokens: list[contextvars.Token] = []

    def __enter__(self):
        self._tokens.append(_allowed.set(self.why))
        return self

    def __exit__(self, *exc):
        _allowed.reset(self._tokens.pop())
        return False


@dataclasses.dataclass(frozen=True)
class SyncSite:
    """Where host-device synchronisations came from, one line of the program each: the phase,
    the op, why it synced, how many times, the program's own frame (``"train.py:42 in step"``,
    the path relative to the program's root or from its package on) and the library frame that
    made the call (``"torch/optim/optimizer.py:101 in _get_value"``), both ``""`` where not known
    (a thread without Python frames, such as a C++ thread's), and the host time waited in them
    (ns; on sim the time of the read or copy itself)."""

    phase: str
    op: str
    reason: str
    count: int
    frame: str = ""
    library: str = ""
    wait_ns: int | None = None
    allowed: str = ""  # inside harness_sim.allow_sync(why): why

    @property
    def where(self) -> str:
        """``"frame (library)"``, as the console shows it."""
        return _where(self.frame, self.library)

    def __str__(self) -> str:
        where = self.where
        return (f"{self.count} x {self.op} ({self.reason}) in phase {self.phase}"
                + (f" at {where}" if where else "")
                + (f" [allowed: {self.allowed}]" if self.allowed else ""))


@dataclasses.dataclass(frozen=True)
class CopySite:
    """The H2D or D2H tensor copies of one line that a user would move: ``how`` is "blocking"
    (the host waited for it) or "pageable" (non-blocking, from or into pageable host memory,
    which CUDA stages). Pinned non-blocking copies have no site."""

    phase: str
    kind: str
    how: str
    count: int
    bytes: int
    frame: str = ""
    library: str = ""

    @property
    def where(self) -> str:
        return _where(self.frame, self.library)

    def __str__(self) -> str:
        where = self.where
        return (f"{self.count} x {self.how} {self.kind} copy ({self.bytes} bytes) in phase "
                f"{self.phase}" + (f" at {where}" if where else ""))


class Counts:
    """What one ``count()`` block counted. Totals cover the whole block; ``per_step`` divides by
    the number of ``c.step()`` blocks (1 without any)."""

    def __init__(self):
        self._session = _C.CountSession()
        self._data = None

    # --- the with-block -------------------------------------------------------------------
    _active: "Counts | None" = None  # blocks do not nest: the instrument has one sink

    def __enter__(self) -> "Counts":
        if Counts._active is not None:
            raise RuntimeError("harness_sim.count() blocks do not nest: one is already counting")
        self._session.start()
        Counts._active = self
        self._data = None
        # Backward on this thread, as autograd runs it for CPU tensors: sim's kernels run on the
        # host, so CUDA's device thread would only hand each backward over and back, and a sync
        # in backward would have no Python frame to name (issue 26). Counts are the same.
        self._multithreading = torch._C._is_multithreading_enabled()
        torch._C._set_multithreading_enabled(False)
        return self

    def __exit__(self, *exc):
        torch._C._set_multithreading_enabled(self._multithreading)
        self._session.stop()
        Counts._active = None
        self._data = self._session.counts()
        return False

    @contextlib.contextmanager
    def step(self):
        """One training step: timed (step time and each phase's time, in the report) and counted
        towards ``steps`` (per-step figures divide by it)."""
        self._session.begin_step()
        try:
            yield self
        finally:
            self._session.end_step()

    # --- reading ----------------------------------------------------------------------------
    def _counts(self) -> dict:
        if self._data is None:
            raise RuntimeError("counts are read after the with-block of harness_sim.count() ends")
        return self._data

    @property
    def steps(self) -> int:
        return self._counts()["steps"]

    @property
    def total(self) -> dict:
        """Launches, launches_by_op, h2d / d2h / d2d (count, bytes, pinned), syncs, collectives,
        memory: the whole block."""
        return self._counts()["total"]

    @property
    def phases(self) -> dict:
        """The same figures by innermost phase ("(none)" outside every phase)."""
        return self._counts()["phases"]

    @property
    def launches(self) -> int:
        return self.total["launches"]

    @property
    def launches_by_op(self) -> dict:
        return dict(self.total["launches_by_op"])

    @property
    def copies(self) -> dict:
        return {kind: dict(self.total[kind]) for kind in ("h2d", "d2h", "d2d")}

    @property
    def syncs(self) -> int:
        return self.total["syncs"]

    @property
    def collectives(self) -> dict:
        return dict(self.total["collectives"])

    @property
    def sync_sites(self) -> list[SyncSite]:
        return [SyncSite(s["phase"], s["op"], s["reason"], s["count"], s["frame"], s["library"],
                         s["wait_ns"], s["allowed"]) for s in self._counts()["sync_sites"]]

    @property
    def copy_sites(self) -> list[CopySite]:
        return [CopySite(s["phase"], s["kind"], s["how"], s["count"], s["bytes"], s["frame"],
                         s["library"]) for s in self._counts()["copy_sites"]]

    def per_step(self, figure: str) -> float:
        """A total divided by the steps: "launches", "syncs", "h2d", "d2h", "d2d" (copy counts)."""
        value = self.total[figure]
        if isinstance(value, dict):
            value = value["count"]
        return value / max(self.steps, 1)

    def report(self, path: str | os.PathLike, scenario: str = "python", variant: str = "default",
               axes: Mapping[str, str] | None = None, **kwargs) -> None:
        """Writes this block as a schema-v1 report (one scenario, one variant): see
        :func:`write_report`."""
        write_report(path, {variant: self}, scenario=scenario,
                     axes={variant: dict(axes or {})}, **kwargs)

    def __repr__(self) -> str:
        if self._data is None:
            return "<harness_sim.Counts (counting)>"
        return (f"<harness_sim.Counts steps={self.steps} launches={self.launches} "
                f"syncs={self.syncs} d2h={self.total['d2h']['count']} "
                f"h2d={self.total['h2d']['count']}>")


def count() -> Counts:
    """``with harness_sim.count() as c:`` counts launches, copies, syncs and collectives on sim,
    by phase, for the with-block."""
    return Counts()


def printable(value):
    """`value` (a str, or a list or dict of them) with what is not UTF-8 -- a file name's bytes
    Python decoded with surrogateescape -- written as \\xfe (backslashreplace): reports are JSON,
    which holds UTF-8 only (a script named $'bad\\xffname.py' made run fail writing its report)."""
    if isinstance(value, str):
        return os.fsencode(value).decode("utf-8", "backslashreplace")
    if isinstance(value, list):
        return [printable(v) for v in value]
    if isinstance(value, dict):
        return {printable(k): printable(v) for k, v in value.items()}
    return value


def _provenance() -> dict:
    return {
        "tool_version": f"harness_sim {_C.HARNESS_VERSION}",
        "argv": printable(list(sys.argv)),
        "build_type": "Release",
        "libtorch_version": torch.__version__,
        "hostname": socket.gethostname(),
        "started_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def report_warnings() -> list[str]:
    """What every report of this process says about the trust in its numbers."""
    warnings = ["simulated device: copies, syncs and launches follow CUDA's rules; times are "
                "host CPU times, not GPU times"]
    warnings += _compile.report_warnings()
    if _C.compute() == "shapes":
        warnings.append("--compute shapes: no op computed its values (meta functions only); every "
                        "value the host read is a placeholder (events value_not_computed name "
                        "where), and times are not an op's times")
    return warnings


def write_report(path: str | os.PathLike, variants: Mapping[str, Counts], scenario: str = "python",
                 description: str = "counted from Python with harness_sim",
                 measured_window: str | None = None, config: Mapping[str, str] | None = None,
                 axes: Mapping[str, Mapping[str, str]] | None = None) -> None:
    """Writes a schema-v1 report (reports/schema/report-v1.md) of one scenario whose variants are
    the given ``count()`` blocks, atomically: ``bench compare`` and gates read it."""
    if not variants:
        raise ValueError("write_report needs at least one variant")
    rows = []
    for name, counts in variants.items():
        if not isinstance(counts, Counts):
            raise TypeError(f"variant {name!r}: expected harness_sim.Counts, got {type(counts)}")
        rows.append((name, dict((axes or {}).get(name, {})), counts._session))
    warnings = report_warnings()
    if measured_window is None:
        measured_window = "the with-block of harness_sim.count(); per step: its c.step() blocks"
    _C.write_report(os.fspath(path), _provenance(), warnings, printable(scenario),
                    printable(description), printable(measured_window),
                    printable({k: str(v) for k, v in (config or {}).items()}), rows)
