"""``python -m harness_sim run [options] -- SCRIPT.py [ARGS...]`` (or ``-m MODULE [ARGS...]``):
counts an unmodified program on sim, per step, and writes a schema-v1 report.

The program runs as ``python SCRIPT.py ARGS`` would (runpy as ``__main__``, ``sys.argv``,
``sys.path[0]``), with sim registered, the instrument counting and, with ``--as-cuda``, its CUDA
calls mapped to sim. Exit codes as bench's: 0, 1 a gate failed, 2 bad usage or input, 3 the
program failed (its traceback on stderr, or its own non-zero exit status), 130 / 143 on SIGINT /
SIGTERM; nothing is written then.

main() runs the steps in order, each from a module of its own: the options checked
(options), the program run under counting (program, its steps in windows, with a watchdog for
what the program cannot end itself: watch), the other ranks collected (ranks, spawn), the outputs
written and the gates evaluated (output); exits holds run's exit statuses. However the program
ends (returning, sys.exit, an exception, os._exit on its main thread), run's end after it is the
same: _after_program.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import signal
import sys

from .. import _C
from .exits import (EXIT_FAILED, EXIT_GATE, EXIT_OK, EXIT_SIGINT, EXIT_SIGTERM, EXIT_USAGE,
                    _Terminated)
from .options import RunOptions, parse_options
from .output import remove_written, start_trace, write_outputs, write_report
from .program import run_program
from .ranks import Scratch, StartedRanks, other_ranks, wait_for_ranks
from .spawn import SpawnedRanks, report_of_this_rank
from .watch import Watchdog
from .windows import StepWindows

__all__ = ["main", "EXIT_OK", "EXIT_GATE", "EXIT_USAGE", "EXIT_FAILED"]


def main(argv: list[str]) -> int:
    options = parse_options(argv)
    if isinstance(options, int):  # -h, or bad usage: nothing to run
        return options
    scratch = Scratch(options.torchrun)
    trace = start_trace(options)
    # The ranks the program starts are counted too (one level: not theirs).
    ranks = (None if options.rank_dir else
             StartedRanks(scratch.workdir, options.for_started_ranks(trace)))
    spawned = (None if options.rank_dir else
               SpawnedRanks(os.path.join(scratch.workdir, "spawned"),
                            options.for_started_ranks(None)))
    windows = StepWindows(options.skip_steps, functools.partial(write_report, options), trace)
    finish = functools.partial(_after_program, options, windows, trace, ranks, spawned, scratch,
                               signal.getsignal(signal.SIGTERM))
    watchdog = Watchdog(ranks, is_rank=options.rank_dir is not None,
                        abandon=functools.partial(_abandon, ranks, scratch))
    return finish(run_program(options, windows, trace, finish, watchdog, spawned, ranks))


def _after_program(options: RunOptions, windows: StepWindows, trace, ranks: StartedRanks | None,
                   spawned: SpawnedRanks | None, scratch: Scratch, old_term, status: int) -> int:
    """Once the program has ended with `status`: the other ranks waited for, the outputs written
    and the gates evaluated, each output atomically. SIGINT / SIGTERM while they are written (the
    handler runs between Python calls, so never inside one) removes those already written:
    nothing is written unless run exits 0 or 1. Returns run's exit status."""
    written: list[str] = []
    # A spawned child writes a rank's report, or nothing if it joined no process group.
    is_rank = not options.spawned or report_of_this_rank(options.rank_dir) is not None
    if options.spawned and is_rank:
        options = dataclasses.replace(options, out=report_of_this_rank(options.rank_dir))
    try:
        peers = other_ranks(ranks, options.torchrun, spawned)
        if peers is not None and status == EXIT_OK:
            status = wait_for_ranks(peers, options.trace_format if trace is not None else None)
        if status == EXIT_OK and is_rank:
            status = write_outputs(options, windows, trace, ranks, peers, scratch.workdir,
                                   written)
    except _C.InputError as e:  # an output could not be written (a full disk, ...)
        print(f"python -m harness_sim run: error: {e}", file=sys.stderr)
        status = EXIT_USAGE
    except KeyboardInterrupt:
        status = EXIT_SIGINT
    except _Terminated:
        status = EXIT_SIGTERM
    finally:
        signal.signal(signal.SIGTERM, old_term)
        failed = status not in (EXIT_OK, EXIT_GATE)
        if ranks is not None and failed:
            ranks.stop()  # the run failed or was stopped: no rank is left running
        scratch.remove()
        if failed:
            remove_written(written)
    return status


def _abandon(ranks: StartedRanks | None, scratch: Scratch) -> None:
    """What run started, stopped and removed, when the watchdog ends run in the program's
    stead (nothing was written yet)."""
    if ranks is not None:
        ranks.stop()
    scratch.remove()
