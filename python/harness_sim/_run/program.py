"""The program counted by ``python -m harness_sim run``, run as ``python SCRIPT.py ARGS`` (or
``python -m MODULE ARGS``) would run it, with run's counting added to the process for its run
and taken away after it, and how it ended as run's exit status."""
from __future__ import annotations

import functools
import os
import runpy
import signal
import sys
import traceback
from typing import Callable

import torch
import torch.optim.optimizer as optimizer

from .._cuda.as_cuda import AsCuda, UnsupportedOnSim, triton_refusal
from .._frameworks import active_run
from .exits import (EXIT_FAILED, EXIT_OK, EXIT_SIGINT, EXIT_SIGTERM, OsExitHook, _Terminated,
                    raise_terminated)
from .options import RunOptions
from .ranks import StartedRanks
from .spawn import SpawnedRanks, watch_rank
from .watch import Watchdog
from .windows import RangePhases, StepWindows


def run_program(options: RunOptions, windows: StepWindows, trace, finish: Callable[[int], int],
                watchdog: Watchdog, spawned: SpawnedRanks | None = None,
                ranks: StartedRanks | None = None) -> int:
    """Runs the program, counted into `windows` (and `trace`): EXIT_OK, EXIT_FAILED (its own
    non-zero exit status or its failure, said on stderr), or 130 / 143 on SIGINT / SIGTERM. From
    now on SIGTERM raises _Terminated; the caller restores its handler once the outputs are
    written. `finish(status)` is run's end after the program (its outputs, its gates): a program
    that ends with os._exit reaches it there and then ends with its status (OsExitHook).
    `watchdog` ends run when the program cannot be ended between Python calls (watch).
    `spawned`: while the program runs, the children it spawns are started under run (spawn).
    `ranks`: the ranks the program starts itself (Lightning's DDP), each under run: handed to the
    frameworks while the program runs (_frameworks.active_run).

    In a child the program forked, the script's end is the child's: it leaves as `python
    SCRIPT.py` would (SystemExit, or the program's exception), and nothing of run's follows:
    only the process run started writes a report, a trace or a summary."""
    counting = _Counting(options, windows, trace, watchdog, spawned, ranks)
    exit_hook = OsExitHook(functools.partial(_finish_at_os_exit, counting, finish))
    counting.exit_hook = exit_hook
    status = EXIT_OK
    try:
        signal.signal(signal.SIGTERM, raise_terminated)
        counting.install()
        _run_as_main(options)
    except BaseException as e:  # the program's own exit, a signal, or its failure
        if os.getpid() != exit_hook.pid:
            _leave_forked_child(e)
        status = _status_of(e)
    finally:
        counting.uninstall()
    if os.getpid() != exit_hook.pid:
        raise SystemExit(0)  # a forked child that reached the script's end
    return status


def _finish_at_os_exit(counting: "_Counting", finish: Callable[[int], int], code: int) -> int:
    """os._exit(code) in the program, on its main thread: run ends as after sys.exit(code)."""
    status = EXIT_OK
    if code != 0:
        print(f"python -m harness_sim run: the program exited with status {code} (os._exit)",
              file=sys.stderr)
        status = EXIT_FAILED
    counting.uninstall()
    return finish(status)


def _leave_forked_child(e: BaseException) -> None:
    """Re-raises the program's end `e` in a child it forked, as python would end on it."""
    if isinstance(e, _Terminated):
        raise SystemExit(EXIT_SIGTERM) from None
    raise e


class _Counting:
    """What run adds to the process for the program's run, taken away again after it, however
    the program ended (also part-way through install())."""

    def __init__(self, options: RunOptions, windows: StepWindows, trace, watchdog: Watchdog,
                 spawned: SpawnedRanks | None = None, ranks: StartedRanks | None = None):
        self.options, self.windows, self.trace = options, windows, trace
        self.watchdog = watchdog
        self.spawned = spawned
        self.ranks = ranks
        self.exit_hook: OsExitHook | None = None
        self._installed = False
        self.phases = RangePhases()
        self.cuda: AsCuda | None = None
        self.hooks: list = []
        self.argv, self.path0 = list(sys.argv), sys.path[0] if sys.path else None

    def install(self) -> None:
        self._installed = True
        self.watchdog.start()
        if self.exit_hook is not None:
            self.exit_hook.install()
        if self.options.as_cuda:
            self.cuda = AsCuda(with_triton=self.options.with_triton)
            self.cuda.install()
        self.phases.install()
        if self.spawned is not None:
            self.spawned.install()
        if self.options.spawned:
            watch_rank()
        # Backward on this thread, as autograd runs it for CPU tensors: sim's kernels run on the
        # host, so CUDA's device thread would only hand each backward over and back and run a
        # second OpenMP team on the same cores. What is counted is the same (issue 26).
        torch._C._set_multithreading_enabled(False)
        if self.options.steps_from == "optimizer":
            self.hooks.append(_OptimizerSteps(self._stepped))
        elif self.options.steps_from == "backward":
            self.hooks.append(_BackwardSteps(self._stepped))
        active_run.activate(self.windows, lightning_steps=self.options.steps_from == "lightning",
                            ranks=self.ranks)

    def _stepped(self, *_) -> None:
        self.windows.boundary()

    def uninstall(self) -> None:
        if not self._installed:
            return  # once: an os._exit in the program has taken it away already
        self._installed = False
        self.watchdog.stop()
        if self.exit_hook is not None:
            self.exit_hook.uninstall()
        active_run.deactivate()  # no rank is started from now on
        if self.spawned is not None:
            self.spawned.uninstall()
        self.windows.finish()
        for h in self.hooks:
            h.remove()
        self.phases.uninstall()
        if self.trace is not None:
            self.trace.stop()  # after the phases the program left open have closed
        if self.cuda is not None:
            self.cuda.uninstall()
        sys.argv = self.argv
        if self.path0 is not None:
            sys.path[0] = self.path0


class _OptimizerSteps:
    """A step ends when an optimizer's ``step()`` returns -- the outermost one: an optimizer whose
    step calls others' (torchtitan's OptimizersContainer, a torch.optim.Optimizer stepping each
    model part's AdamW) is one step, not one per optimizer. ``remove()`` takes the hooks away."""

    def __init__(self, stepped: Callable[[], None]):
        self._stepped = stepped
        self._open: list = []  # the optimizers whose step() is running, outermost first
        self._handles = [optimizer.register_optimizer_step_pre_hook(self._pre),
                         optimizer.register_optimizer_step_post_hook(self._post)]

    def _pre(self, opt, *_) -> None:
        self._close(opt)  # still open: its last step raised, and the program went on
        self._open.append(opt)

    def _post(self, opt, *_) -> None:
        self._close(opt)
        if not self._open:
            self._stepped()

    def _close(self, opt) -> None:
        for i, o in enumerate(self._open):
            if o is opt:
                del self._open[i:]
                return

    def remove(self) -> None:
        for h in self._handles:
            h.remove()


class _BackwardSteps:
    """A step ends with each ``torch.autograd.backward`` (``Tensor.backward`` calls it): for a
    framework whose optimizer is not a torch.optim.Optimizer (Keras), one backward per step.
    ``remove()`` puts torch's function back, as a hook handle does."""

    def __init__(self, stepped: Callable[[], None]):
        self._original = torch.autograd.backward

        @functools.wraps(self._original)
        def backward(*args, **kwargs):
            result = self._original(*args, **kwargs)
            stepped()
            return result

        torch.autograd.backward = backward

    def remove(self) -> None:
        torch.autograd.backward = self._original


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
        if (isinstance(e, ModuleNotFoundError) and (e.name or "").split(".")[0] == "triton"
                and "triton" in sys.modules and sys.modules["triton"] is None):
            print(f"python -m harness_sim run --as-cuda: {triton_refusal()}", file=sys.stderr)
    return EXIT_FAILED
