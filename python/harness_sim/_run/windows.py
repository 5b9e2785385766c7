"""What ``python -m harness_sim run`` counts: step windows ended by the program's own step
boundaries, and phases from the program's own ranges (record_function, NVTX).

The instrument keeps counts in a session until the session stops, and a stop adds everything
since its start. A step's window runs from the end of the previous step to the end of this one,
so what follows the last step looks like the start of another window until the program ends.
``StepWindows`` therefore marks the steps' session at every counted step's end
(``CountSession.mark()``, a copy of its counts) and, when the program ends, rewinds it to the last
mark: what follows the last step is never in a report's per-step figures. It is counted all the
same (``after`` below) and shown in the program's total on the console. The report is written
once, at the end.
"""
from __future__ import annotations

import threading
from typing import Callable

import torch

from .. import _C


def _figures(counts: dict) -> dict:
    """The figures the console shows, from a session's counts (``CountSession.counts()``)."""
    t = counts["total"]
    return {"launches": t["launches"], "syncs": t["syncs"], "h2d": t["h2d"]["count"],
            "d2h": t["d2h"]["count"], "d2d": t["d2d"]["count"],
            "collectives": sum(c["count"] for c in t["collectives"].values())}


class StepWindows:
    """Counts a program by step windows.

    ``before``: from the start to the beginning of the first counted window (imports, set-up,
    and the ``skip`` warm-up steps). ``steps``: the windows of the counted steps, each from the
    end of the previous step (or the start) to the end of this one. ``after``: what follows the
    last step. ``boundary()`` is called at the end of every step (an ``optimizer.step()``, or a
    Lightning training batch); ``write_final(path)`` writes the report as of the last one."""

    def __init__(self, skip: int, write: Callable[[str, list], None], trace=None):
        if skip < 0:
            raise ValueError("--skip-steps must be >= 0")
        self.skip = skip
        self.seen = 0  # step boundaries the program reached
        self._write = write
        self.before = _C.CountSession()
        self.steps = _C.CountSession()
        # --trace: both sessions' events on one timeline (_C.TraceSession), with the counted
        # steps as steps and, when the program ends, sections named as the report's variants.
        self._trace = trace
        self._started_ns = self._steps_from_ns = self._last_boundary_ns = 0
        if trace is not None:
            self.before.set_trace(trace)
            self.steps.set_trace(trace)
            self._started_ns = trace.now()
        self._at_last_boundary: dict | None = None  # steps' counts at the last counted boundary
        self.after: dict | None = None
        self._thread = threading.get_ident()
        self._done = False
        if skip == 0:
            self._open_window()
        else:
            self.before.start()

    def _open_window(self) -> None:
        self.steps.start()
        self.steps.begin_step()
        if self._trace is not None:
            if not self._steps_from_ns:
                self._steps_from_ns = self._trace.now()
            self._trace.step_begin(self.seen + 1)  # the program's step this window ends at

    def boundary(self) -> None:
        """The end of a step: closes its window (if counted) and opens the next."""
        if self._done:
            return
        self.seen += 1
        if self.seen < self.skip:
            return
        if self.seen == self.skip:  # the last warm-up step ended: the first window opens
            self.before.stop()
            self._open_window()
            return
        self.steps.end_step()
        if self._trace is not None:
            self._trace.step_end()
            self._last_boundary_ns = self._trace.now()
        self.steps.stop()
        self.steps.mark()
        self._open_window()

    @property
    def counted(self) -> int:
        """Steps whose window is in the per-step figures."""
        return max(self.seen - self.skip, 0)

    def finish(self) -> None:
        """The program ended: stops counting; ``after`` is what followed the last step."""
        if self._done:
            return
        self._done = True
        if self.before.active:
            self.before.stop()
        if self.steps.active:
            self.steps.stop()
        if self._trace is not None:
            self._sections()
            self.before.set_trace(None)
            self.steps.set_trace(None)
        if not self.steps.marked:
            self.after = self.steps.counts() if self.seen >= self.skip else None
        else:
            now = self.steps.counts()
            self.steps.rewind()
            self._at_last_boundary = self.steps.counts()
            self.after = _subtract(now, self._at_last_boundary)

    def _sections(self) -> None:
        """The trace's sections, as the report's variants: before_steps, steps (to the end of
        the last counted step) and what followed it; or, with no step counted, after_steps."""
        t, end = self._trace, self._trace.now()
        parts = []
        if self.skip > 0:
            parts.append(("before_steps", self._started_ns, self._steps_from_ns or end))
        if self._steps_from_ns and self.steps.marked:
            parts += [("steps", self._steps_from_ns, self._last_boundary_ns),
                      ("after the last step", self._last_boundary_ns, end)]
        elif self._steps_from_ns:
            parts.append(("after_steps", self._steps_from_ns, end))
        for name, begin, finish in parts:
            t.section_begin(name, begin)
            t.section_end(name, finish)

    def write_final(self, path: str) -> None:
        """Writes the report as of the last counted step to ``path`` (atomically). With no step
        counted there are no per-step figures: the report has what ran, as ``before_steps``
        (with --skip-steps) and ``after_steps`` (from the end of the last warm-up step)."""
        if self.steps.marked:
            self._write(path, [("before_steps", self.before), ("steps", self.steps)])
            return
        variants = []
        if self.skip > 0:
            variants.append(("before_steps", self.before))
        if self.seen >= self.skip:
            variants.append(("after_steps", self.steps))
        self._write(path, variants)

    def figures(self) -> dict:
        """before / steps / after / total as console figures (None where nothing ran)."""
        before = _figures(self.before.counts()) if self.skip > 0 else None
        steps = _figures(self._at_last_boundary) if self._at_last_boundary else None
        after = _figures(self.after) if self.after else None
        parts = [p for p in (before, steps, after) if p]
        total = {k: sum(p[k] for p in parts) for k in parts[0]} if parts else None
        return {"before": before, "steps": steps, "after": after, "total": total}


def _subtract(now: dict, then: dict) -> dict:
    """Counts ``now`` less ``then`` (totals only: what the console needs of the tail)."""
    a, b = now["total"], then["total"]
    total = {k: a[k] - b[k] for k in ("launches", "syncs")}
    for kind in ("h2d", "d2h", "d2d"):
        total[kind] = {"count": a[kind]["count"] - b[kind]["count"]}
    total["collectives"] = {name: {"count": c["count"] - b["collectives"].get(name, {"count": 0})
                                   ["count"]} for name, c in a["collectives"].items()}
    return {"total": total}


class RangePhases:
    """The program's own ranges as harness phases, on the thread that runs it:
    ``torch.profiler.record_function`` / ``torch.autograd.profiler.record_function`` (and so
    torch.optim's ``Optimizer.step#Adam.step`` and ``Optimizer.zero_grad#Adam.zero_grad``, and
    the DataLoader's ``enumerate(DataLoader)#...``), and ``torch.cuda.nvtx.range_push/pop`` and
    ``range``. A range that ends out of order (not the innermost one opened) ends no phase, and the
    phases inside it close with it."""

    def __init__(self):
        self._thread = threading.get_ident()
        self._open: list[tuple[object, str]] = []  # (owner, name), innermost last
        self._saved: list[tuple[object, str, object]] = []

    def _enter(self, owner, name: str) -> None:
        if threading.get_ident() != self._thread or not name:
            return
        _C.enter_phase(name)
        self._open.append((owner, name))

    def _exit(self, owner) -> None:
        if threading.get_ident() != self._thread:
            return
        if not any(o is owner for o, _ in self._open):
            return
        while self._open:
            o, name = self._open.pop()
            _C.exit_phase(name)
            if o is owner:
                return

    def install(self) -> None:
        rf = torch.autograd.profiler.record_function
        enter, exit_ = rf.__enter__, rf.__exit__
        phases = self

        def __enter__(self):
            result = enter(self)
            phases._enter(self, self.name)
            return result

        def __exit__(self, *exc):
            phases._exit(self)
            return exit_(self, *exc)

        nvtx = torch.cuda.nvtx
        push, pop = nvtx.range_push, nvtx.range_pop
        nvtx_stack: list[object] = []

        def range_push(msg):
            token = object()
            nvtx_stack.append(token)
            phases._enter(token, str(msg))
            try:
                return push(msg)
            except RuntimeError:  # an NVTX without libnvToolsExt: the phase is what counts here
                return len(nvtx_stack) - 1

        def range_pop():
            if nvtx_stack:
                phases._exit(nvtx_stack.pop())
            try:
                return pop()
            except RuntimeError:
                return len(nvtx_stack)

        for owner, name, value in ((rf, "__enter__", __enter__), (rf, "__exit__", __exit__),
                                   (nvtx, "range_push", range_push),
                                   (nvtx, "range_pop", range_pop)):
            self._saved.append((owner, name, getattr(owner, name)))
            setattr(owner, name, value)

    def uninstall(self) -> None:
        for owner, name, value in reversed(self._saved):
            setattr(owner, name, value)
        self._saved.clear()
        while self._open:
            _C.exit_phase(self._open.pop()[1])
