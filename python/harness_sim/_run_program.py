"""The program counted by ``python -m harness_sim run``, run as ``python SCRIPT.py ARGS`` (or
``python -m MODULE ARGS``) would run it, with run's counting added to the process for its run
and taken away after it, and how it ended as run's exit status."""
from __future__ import annotations

import os
import runpy
import signal
import sys
import traceback

import torch
import torch.optim.optimizer as optimizer

from . import _lightning_run
from ._as_cuda import AsCuda, UnsupportedOnSim
from ._run_exit import (EXIT_FAILED, EXIT_OK, EXIT_SIGINT, EXIT_SIGTERM, _Terminated,
                        raise_terminated)
from ._run_options import RunOptions
from ._run_ranks import _StartedRanks
from ._windows import RangePhases, StepWindows


def run_program(options: RunOptions, windows: StepWindows, trace) -> int:
    """Runs the program, counted into `windows` (and `trace`): EXIT_OK, EXIT_FAILED (its own
    non-zero exit status or its failure, said on stderr), or 130 / 143 on SIGINT / SIGTERM. From
    now on SIGTERM raises _Terminated; the caller restores its handler once the outputs are
    written."""
    counting = _Counting(options, windows, trace)
    status = EXIT_OK
    try:
        signal.signal(signal.SIGTERM, raise_terminated)
        counting.install()
        _run_as_main(options)
    except BaseException as e:  # the program's own exit, a signal, or its failure
        status = _status_of(e)
    finally:
        counting.uninstall()
    return status


class _Counting:
    """What run adds to the process for the program's run, taken away again after it, however
    the program ended (also part-way through install())."""

    def __init__(self, options: RunOptions, windows: StepWindows, trace):
        self.options, self.windows, self.trace = options, windows, trace
        self.phases = RangePhases()
        self.cuda: AsCuda | None = None
        self.hooks: list = []
        self.argv, self.path0 = list(sys.argv), sys.path[0] if sys.path else None

    def install(self) -> None:
        if self.options.as_cuda:
            self.cuda = AsCuda()
            self.cuda.install()
        self.phases.install()
        # Backward on this thread, as autograd runs it for CPU tensors: sim's kernels run on the
        # host, so CUDA's device thread would only hand each backward over and back and run a
        # second OpenMP team on the same cores. What is counted is the same (issue 26).
        torch._C._set_multithreading_enabled(False)
        if self.options.steps_from == "optimizer":
            self.hooks.append(optimizer.register_optimizer_step_post_hook(self._stepped))
        _lightning_run.activate(self.windows,
                                lightning_steps=self.options.steps_from == "lightning")

    def _stepped(self, *_) -> None:
        self.windows.boundary()

    def uninstall(self) -> None:
        _StartedRanks.active = None
        self.windows.finish()
        for h in self.hooks:
            h.remove()
        _lightning_run.deactivate()
        self.phases.uninstall()
        if self.trace is not None:
            self.trace.stop()  # after the phases the program left open have closed
        if self.cuda is not None:
            self.cuda.uninstall()
        sys.argv = self.argv
        if self.path0 is not None:
            sys.path[0] = self.path0


def _run_as_main(options: RunOptions) -> None:
    if options.script is not None:
        sys.argv = [options.script] + options.program_args
        sys.path[0] = os.path.dirname(os.path.abspath(options.script))
        runpy.run_path(options.script, run_name="__main__")
    else:
        # runpy sets argv[0] to the module's file
        sys.argv = [options.module] + options.program_args
        sys.path[0] = os.getcwd()
        runpy.run_module(options.module, run_name="__main__", alter_sys=True)


def _status_of(e: BaseException) -> int:
    """run's exit status for the program that raised `e`, saying on stderr why it failed; called
    while `e` is being handled (its traceback is printed from there)."""
    if isinstance(e, SystemExit):
        code = e.code
        if code in (None, 0):
            return EXIT_OK
        if not isinstance(code, int):
            print(code, file=sys.stderr)
        print(f"python -m harness_sim run: the program exited with status {code}",
              file=sys.stderr)
        return EXIT_FAILED
    if isinstance(e, KeyboardInterrupt):
        return EXIT_SIGINT
    if isinstance(e, _Terminated):
        return EXIT_SIGTERM
    if isinstance(e, UnsupportedOnSim):
        print(f"python -m harness_sim run --as-cuda: {e}", file=sys.stderr)
    else:  # the program failed: its traceback, as python would print it
        traceback.print_exc()
    return EXIT_FAILED
