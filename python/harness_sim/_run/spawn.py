"""The ranks a program counted by ``python -m harness_sim run`` starts with multiprocessing's
spawn start method: ``torch.multiprocessing.spawn`` (PyTorch's examples/imagenet
``--multiprocessing-distributed``), a ``spawn`` context's Process.

A spawned child is a new interpreter that runs ``multiprocessing.spawn.spawn_main``; started as
it is, it would import neither harness_sim nor the CUDA sim serves, nor be counted. While the
program runs, run starts each such child as ``python -m harness_sim run --rank-dir DIR --spawned
... -m harness_sim._run.spawn_main`` instead (multiprocessing's own spawn_main, its arguments
unchanged): it serves CUDA as the parent does and is counted as the parent is. A child that joined
a process group writes its report as DIR/rank<R>.json, R its rank in the default group, and the
parent's run merges those reports as torchrun's ranks' (the parent itself, which only started
them, is none of the ranks). A spawned child that joined no group (a DataLoader worker) writes
nothing. One level, as for the ranks Lightning starts: what a spawned child spawns runs plainly."""
from __future__ import annotations

import functools
import multiprocessing.spawn as mp_spawn
import multiprocessing.util as mp_util
import os
import re

_RANK: int | None = None  # in a spawned child: its rank once it joined a process group


class SpawnedRanks:
    """In the run of the program (not of a rank): spawned children started under run, their
    reports in `directory` (created now)."""

    def __init__(self, directory: str, options: list[str]):
        self.directory = directory
        self.options = options
        self._original = None
        os.makedirs(directory, exist_ok=True)

    def install(self) -> None:
        if self._original is None:
            self._original = mp_spawn.get_command_line
            mp_spawn.get_command_line = self.command_line

    def uninstall(self) -> None:
        if self._original is not None:
            mp_spawn.get_command_line = self._original
            self._original = None

    def command_line(self, **kwds) -> list[str]:
        """multiprocessing.spawn.get_command_line's replacement: the child under run, its
        spawn_main arguments (tracker_fd=, pipe_handle=) passed on as KEY=VALUE."""
        return [mp_spawn.get_executable(), *mp_util._args_from_interpreter_flags(),
                "-m", "harness_sim", "run", "--rank-dir", self.directory, "--spawned",
                *self.options, "-m", "harness_sim._run.spawn_main", "--multiprocessing-fork",
                *(f"{key}={value}" for key, value in kwds.items())]

    def ranks(self) -> list[int]:
        """The ranks whose reports are there, in order."""
        found = []
        for name in os.listdir(self.directory):
            m = re.fullmatch(r"rank(\d+)\.json", name)
            if m:
                found.append(int(m.group(1)))
        return sorted(found)

    def reports(self) -> list[str]:
        """Every spawned rank's report, rank 0's first."""
        return [os.path.join(self.directory, f"rank{r}.json") for r in self.ranks()]

    def wait(self, timeout_s: float, trace_format: str | None = None) -> str | None:
        """The spawned ranks have ended with the program (multiprocessing joins them): why their
        reports cannot be merged, or None."""
        del timeout_s, trace_format  # nothing to wait for; spawned ranks are not traced
        ranks = self.ranks()
        if ranks != list(range(len(ranks))):
            missing = sorted(set(range(max(ranks) + 1)) - set(ranks))
            return (f"the program's spawned processes left reports of ranks {ranks}, none of "
                    f"rank {', '.join(map(str, missing))}: a rank's process failed or joined "
                    "no process group")
        return None


def watch_rank() -> None:
    """In a spawned child: remembers its rank when it joins the default process group (a program
    calls init_process_group after the child has started; it is often destroyed before the end)."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    original = c10d.init_process_group

    @functools.wraps(original)
    def init_process_group(*args, **kwargs):
        global _RANK
        result = original(*args, **kwargs)
        _RANK = dist.get_rank()
        return result

    dist.init_process_group = c10d.init_process_group = init_process_group


def report_of_this_rank(directory: str) -> str | None:
    """Where this spawned child writes its report: DIR/rank<R>.json, or None when it joined no
    process group (it is no rank)."""
    return None if _RANK is None else os.path.join(directory, f"rank{_RANK}.json")
