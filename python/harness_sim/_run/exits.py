"""``python -m harness_sim run``'s exit statuses (bench's), SIGTERM as an exception, and the
program's ``os._exit`` as an end that run still reports."""
from __future__ import annotations

import operator
import os
import sys
import threading
from typing import Callable

EXIT_OK, EXIT_GATE, EXIT_USAGE, EXIT_FAILED = 0, 1, 2, 3
EXIT_SIGINT, EXIT_SIGTERM = 130, 143  # 128 + the signal, as a shell reports a process it ended

_real_exit = os._exit  # the process's end, whoever replaced os._exit since


def end_process(status: int) -> None:
    """Ends this process now with `status`, as os._exit does (no finally blocks, no atexit
    handlers), once run's own messages are out."""
    sys.stderr.flush()
    _real_exit(status)


class _Terminated(BaseException):
    """SIGTERM, raised in the program so that its finally blocks run."""


def raise_terminated(signum, frame) -> None:
    """run's SIGTERM handler, from the program's start until run's outputs are written."""
    raise _Terminated()


class OsExitHook:
    """``os._exit(code)`` while the program runs, in the process run started.

    On its main thread, the program ends as with ``sys.exit(code)``: `finish(code)` writes what
    was counted and evaluates the gates (0), or says the program failed (any other code), and
    returns run's status, with which the process then ends. os._exit runs no finally block and
    no atexit handler, and neither does the program's part here. On another thread the main one
    is still running the program, so run cannot finish its counting: it says so and the process
    ends with EXIT_FAILED. Anywhere else (a child the program forked, a multiprocessing worker,
    which end with os._exit as a rule) it is os._exit itself."""

    def __init__(self, finish: Callable[[int], int]):
        self.pid = os.getpid()
        self._finish = finish
        self._hook = self._exit  # one bound method: os._exit is compared with it by identity

    def install(self) -> None:
        os._exit = self._hook

    def uninstall(self) -> None:
        if os._exit is self._hook:
            os._exit = _real_exit

    def _exit(self, code, /) -> None:
        code = operator.index(code)  # a TypeError as os._exit's own for what is not an int
        if os._exit is not self._hook:  # kept from while the program ran: run has ended it
            os._exit(code)
        if os.getpid() != self.pid:
            _real_exit(code)
        if threading.current_thread() is not threading.main_thread():
            print(f"python -m harness_sim run: the program called os._exit({code}) on a thread "
                  f"other than the main one ({threading.current_thread().name}), which is still "
                  "running it: run cannot finish counting; nothing is written", file=sys.stderr)
            end_process(EXIT_FAILED)
        status = EXIT_FAILED
        try:
            status = self._finish(code)
        finally:
            end_process(status)


def keep_status_at_exit(status: int) -> None:
    """After run has decided its status (the program over, the report written, the gates
    evaluated): an ``os._exit(n)`` in one of the program's atexit handlers ends the process with
    run's status when that is not 0, so a failed gate or program cannot end as 0."""
    if status == EXIT_OK:
        return
    pid = os.getpid()

    def _exit(code, /):
        _real_exit(status if os.getpid() == pid else operator.index(code))

    os._exit = _exit
