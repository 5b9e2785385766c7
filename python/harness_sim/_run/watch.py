"""What ends ``python -m harness_sim run`` when the program cannot end it: a thread that watches,
while the program runs, for SIGTERM or SIGINT that the program's main thread does not act on (it
is inside a C++ call that does not return to Python, such as a rendezvous or a collective with a
rank that died: Python's handlers run only between Python calls), for a rank the program started
that died, and, in such a rank, for the end of the process that started it.

Each gives the program GRACE_S to end by itself (its own failure, then run's usual end); then the
watchdog says why and ends the process: the started ranks stopped, run's scratch directories
removed, nothing written, exit 143 / 130 / 3."""
from __future__ import annotations

import os
import select
import signal
import sys
import threading
import time
from typing import Callable

from .exits import EXIT_FAILED, EXIT_SIGINT, EXIT_SIGTERM, end_process, raise_terminated
from .ranks import StartedRanks

GRACE_S = 3.0  # how long the program has to end by itself once run has reason to end it
POLL_S = 0.25  # how often the started ranks and the parent are looked at
IDLE_S = 1.0  # how often it looks for ranks started since, when there are none to watch


class Watchdog:
    """Started and stopped by the main thread around the program's run (start(), stop()).
    `abandon` stops what run started (its ranks, its scratch directories) before the end."""

    def __init__(self, started: StartedRanks | None, is_rank: bool,
                 abandon: Callable[[], None]):
        self._started = started
        self._parent = os.getppid() if is_rank else None
        self._abandon = abandon
        self._stopping = threading.Event()
        self._ending = threading.Lock()  # held from the decision to end the process to its end
        self._reported: set[int] = set()  # started ranks already said to have died
        self._end: tuple[float, int, str] | None = None  # (deadline, status, why)
        self._wakeup: tuple[int, int] | None = None
        self._previous_wakeup = -1
        self._thread = threading.Thread(target=self._watch, name="harness_sim run watchdog",
                                        daemon=True)

    def start(self) -> None:
        global _watching
        self._listen_for_signals()
        _watching = self
        self._thread.start()

    def stop(self) -> None:
        """The program has ended (or is ending) in Python: run's own end follows. (In a child
        the program forked there is no watchdog: nothing to stop.)"""
        global _watching
        self._stopping.set()
        if _watching is not self:
            return
        _watching = None
        if self._wakeup is not None:
            try:
                os.write(self._wakeup[1], b"\0")  # wakes the watch: 0 is no signal's number
            except BlockingIOError:  # full of signals' numbers: it is awake anyway
                pass
        with self._ending:  # the watchdog may be ending the process: it then never returns
            pass
        self._thread.join()
        self._stop_listening()

    # --- signals: Python's C handler writes each one's number to the wakeup fd at once ---------
    def _listen_for_signals(self) -> None:
        read_end, write_end = os.pipe()
        os.set_blocking(write_end, False)
        try:
            self._previous_wakeup = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
        except ValueError:  # not the main thread (run inside another program's thread)
            os.close(read_end)
            os.close(write_end)
            return
        self._wakeup = (read_end, write_end)

    def _stop_listening(self) -> None:
        if self._wakeup is None:
            return
        read_end, write_end = self._wakeup
        current = signal.set_wakeup_fd(self._previous_wakeup, warn_on_full_buffer=False)
        if current != write_end:  # the program set its own since: it stays
            signal.set_wakeup_fd(current)
        os.close(read_end)
        os.close(write_end)
        self._wakeup = None

    def _signals(self) -> list[int]:
        """The signals that arrived within POLL_S (IDLE_S while there is nothing else to watch:
        the thread costs the program nothing that shows in its step times)."""
        busy = self._parent is not None or self._end is not None or (
            self._started is not None and self._started.procs)
        timeout = POLL_S if busy else IDLE_S
        if self._wakeup is None:
            self._stopping.wait(timeout)
            return []
        readable, _, _ = select.select([self._wakeup[0]], [], [], timeout)
        return [b for b in os.read(self._wakeup[0], 64) if b] if readable else []

    # --- the watch ----------------------------------------------------------------------------
    def _watch(self) -> None:
        while not self._stopping.is_set():
            for signum in self._signals():
                self._on_signal(signum)
            self._look_at_ranks()
            if self._end is not None and time.monotonic() >= self._end[0]:
                self._end_process()

    def _on_signal(self, signum: int) -> None:
        if signum == signal.SIGTERM and _handled_by_run(signal.SIGTERM, raise_terminated):
            self._ending_in(EXIT_SIGTERM, "SIGTERM")
        elif signum == signal.SIGINT and _handled_by_run(signal.SIGINT,
                                                        signal.default_int_handler):
            self._ending_in(EXIT_SIGINT, "SIGINT")

    def _look_at_ranks(self) -> None:
        if self._parent is not None and os.getppid() != self._parent:
            self._ending_in(EXIT_FAILED, f"the process that started this rank (pid "
                                         f"{self._parent}) ended while the program ran")
            self._parent = None
        for rank, proc in enumerate(list(self._started.procs) if self._started else [], 1):
            code = proc.poll()
            if code is None or code == 0 or rank in self._reported:
                continue
            self._reported.add(rank)
            why = f"rank {rank} (started by the program) {_how_it_ended(code)} while the program ran"
            print(f"python -m harness_sim run: {why}", file=sys.stderr, flush=True)
            self._ending_in(EXIT_FAILED, why)

    def _ending_in(self, status: int, why: str) -> None:
        if self._end is None:
            self._end = (time.monotonic() + GRACE_S, status, why)

    def _end_process(self) -> None:
        with self._ending:
            if self._stopping.is_set():
                return  # the program ended in time: run's own end follows
            _, status, why = self._end
            print(f"python -m harness_sim run: {why}; the program did not end within "
                  f"{GRACE_S:.0f} s of it (it is inside a call that does not return to Python, "
                  "such as a rendezvous or a collective with a rank that died): run ends it, "
                  "and nothing is written", file=sys.stderr)
            try:
                self._abandon()
            finally:
                end_process(status)


_watching: Watchdog | None = None  # the one watching this process, between start() and stop()


def _forget_in_child() -> None:
    """A child the program forks has no watchdog, and its signals are its own: they must not
    reach the parent's through the wakeup fd that the child would otherwise share."""
    global _watching
    if _watching is not None and _watching._wakeup is not None:
        signal.set_wakeup_fd(-1)
    _watching = None


os.register_at_fork(after_in_child=_forget_in_child)


def _handled_by_run(signum: int, handler) -> bool:
    """Whether `signum` still ends the program as run has it (its handler, alone or among
    Lightning's composed handlers): a program that handles the signal its own way is left to."""
    current = signal.getsignal(signum)
    return current is handler or handler in getattr(current, "signal_handlers", ())


def _how_it_ended(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"
