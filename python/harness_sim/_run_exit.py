"""``python -m harness_sim run``'s exit statuses (bench's), and SIGTERM as an exception."""
from __future__ import annotations

EXIT_OK, EXIT_GATE, EXIT_USAGE, EXIT_FAILED = 0, 1, 2, 3
EXIT_SIGINT, EXIT_SIGTERM = 130, 143  # 128 + the signal, as a shell reports a process it ended


class _Terminated(BaseException):
    """SIGTERM, raised in the program so that its finally blocks run."""


def raise_terminated(signum, frame) -> None:
    """run's SIGTERM handler, from the program's start until run's outputs are written."""
    raise _Terminated()
