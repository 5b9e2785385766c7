"""The other ranks of a program counted by ``python -m harness_sim run``: those the program starts
itself (Lightning's DDP), each run again under run, or torchrun's, each already under run; and
the scratch directory where they leave their reports for rank 0's run to merge."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time

from .. import _C
from .exits import EXIT_FAILED, EXIT_OK

RANK_WAIT_S = 300  # how long rank 0's run waits for the ranks the program started, once it ended


class StartedRanks:
    """The ranks a program counted by `run` starts itself, each run again under `run`.

    Lightning's DDP (SimDDPStrategy's launcher, _frameworks/lightning.py) asks command() for each
    local rank's command line while `run` is counting the program (it finds this object through
    _frameworks.active_run, which run activates for the program's run) and adds the processes it
    started to procs; `run` then waits for those processes and merges their reports into its
    own, as bench merges its ranks'."""

    def __init__(self, rank_dir: str, options: list[str]):
        self.rank_dir = rank_dir
        self.options = options
        self.procs: list[subprocess.Popen] = []

    def command(self, program: list[str]) -> list[str]:
        """`program` is `[python, SCRIPT, ARGS...]` or `[python, -m, MODULE, ARGS...]`."""
        python, rest = program[0], list(program[1:])
        target = rest if rest[:1] == ["-m"] else ["--"] + rest
        return [python, "-m", "harness_sim", "run", "--rank-dir", self.rank_dir,
                *self.options, *target]

    def reports(self) -> list[str]:
        return [_rank_report(self.rank_dir, r) for r in range(1, len(self.procs) + 1)]

    def traces(self, fmt: str) -> list[str]:
        return [_rank_trace(self.rank_dir, r, fmt) for r in range(1, len(self.procs) + 1)]

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    def wait(self, timeout_s: float, trace_format: str | None = None) -> str | None:
        """Waits for every started rank; returns why one failed (or left no report, or no trace
        in `trace_format`), or None."""
        for rank, proc in enumerate(self.procs, start=1):
            try:
                code = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                return f"rank {rank} did not end within {timeout_s:.0f} s of rank 0"
            if code != 0:
                return f"rank {rank} (started by the program) exited with status {code}"
        for rank, path in enumerate(self.reports(), start=1):
            if not os.path.isfile(path):
                return f"rank {rank} wrote no report"
        for rank, path in enumerate(self.traces(trace_format) if trace_format else [], start=1):
            if not os.path.isfile(path):
                return f"rank {rank} wrote no trace"
        return None


class _TorchrunPeers:
    """The other local ranks of a torchrun job (torch.distributed.run) that runs `python -m
    harness_sim run` as each rank's program: every rank counts its own program; a rank other than
    0 writes its report into a directory all of them derive from the job (its run id, port and
    restart count), and rank 0's `run` waits for those reports and merges them into its own, as
    for the ranks Lightning starts."""

    def __init__(self, directory: str, world: int):
        self.directory = directory
        self.world = world

    @staticmethod
    def of_this_job() -> tuple[str, int, int] | None:
        """(directory, local rank, local world size) when this process is a rank of a torchrun job
        of several ranks (TORCHELASTIC_RUN_ID is torchrun's), else None."""
        env = os.environ
        if "TORCHELASTIC_RUN_ID" not in env:
            return None
        world = int(env.get("WORLD_SIZE", "1"))
        if world <= 1:
            return None
        # What torchrun's agent gives every rank of this attempt of this job alike: its run id
        # (a fresh one per --standalone job), the rendezvous port and the restart count.
        name = (f"harness_sim_torchrun.{os.getuid()}.{env['TORCHELASTIC_RUN_ID']}."
                f"{env.get('MASTER_PORT', '')}.{env.get('TORCHELASTIC_RESTART_COUNT', '0')}")
        return (os.path.join(tempfile.gettempdir(), name), int(env.get("LOCAL_RANK", "0")),
                int(env.get("LOCAL_WORLD_SIZE", str(world))))

    def reports(self) -> list[str]:
        return [_rank_report(self.directory, r) for r in range(1, self.world)]

    def wait(self, timeout_s: float, trace_format: str | None = None) -> str | None:
        """Waits for every other rank's report; returns why one is missing, or None. (No traces:
        --trace under torchrun is refused.)"""
        assert trace_format is None
        deadline = time.monotonic() + timeout_s
        for rank, path in enumerate(self.reports(), start=1):
            while not os.path.isfile(path):
                if time.monotonic() > deadline:
                    return (f"torchrun's rank {rank} wrote no report within {timeout_s:.0f} s of "
                            "rank 0's end")
                time.sleep(0.02)
        return None


def other_ranks(ranks: StartedRanks | None, torchrun: _TorchrunPeers | None, spawned=None):
    """The ranks whose reports rank 0's run merges: those the program started (Lightning's),
    those it spawned (a spawn.SpawnedRanks with reports, rank 0's among them), or
    torchrun's."""
    if ranks is not None and ranks.procs:
        return ranks
    if spawned is not None and spawned.ranks():
        return spawned
    return torchrun


def wait_for_ranks(peers: StartedRanks | _TorchrunPeers, trace_format: str | None) -> int:
    """EXIT_OK once every other rank has ended and left its report (and its trace in
    `trace_format`, if given), else EXIT_FAILED, saying why."""
    why = peers.wait(timeout_s=RANK_WAIT_S, trace_format=trace_format)
    if why:
        print(f"python -m harness_sim run: {why}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


# The remover's program: it waits for end of file on its standard input, which comes once `run`
# has ended, however it ended, and then removes the directories it was given.
_REMOVER = """
import os, shutil, sys
try:
    while os.read(0, 512):
        pass
except OSError:
    pass
for path in sys.argv[1:]:
    shutil.rmtree(path, ignore_errors=True)
"""


def _remove_when_gone(paths: list[str]) -> int:
    """Starts a process that removes `paths` once this process has ended, also by SIGKILL (which
    torchrun's agent sends a rank 30 s after its SIGTERM when the rank is inside a C++ call, such as
    a rendezvous with a rank that died: Python's SIGTERM handler never ran). It holds the read end
    of a pipe whose only write end (returned) this process holds: closing it, or ending, lets the
    remover go. In a session of its own, so that a Ctrl-C to the caller's process group does not
    stop it first."""
    read_end, write_end = os.pipe()  # neither is inherited by what the program starts (PEP 446)
    subprocess.Popen([sys.executable, "-I", "-S", "-c", _REMOVER, *paths], stdin=read_end,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True)
    os.close(read_end)
    return write_end


class Scratch:
    """run's temporary directory (the report when there is no --out, rank 0's files to merge, the
    started ranks' reports) and, on rank 0 of a torchrun job, the job's directory of the other
    ranks' reports: removed by remove(), or by the remover once run is gone, however it ended."""

    def __init__(self, torchrun: _TorchrunPeers | None):
        self.workdir = tempfile.mkdtemp(prefix="harness_sim_run.")
        self.torchrun = torchrun
        self._remover = _remove_when_gone([self.workdir] +
                                          ([torchrun.directory] if torchrun else []))

    def remove(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)
        if self.torchrun is not None:  # the other ranks' reports, merged or not
            shutil.rmtree(self.torchrun.directory, ignore_errors=True)
        os.close(self._remover)  # nothing left for it to remove: it ends


def _rank_report(rank_dir: str, rank: int) -> str:
    return os.path.join(rank_dir, f"rank{rank}.json")


def _rank_trace(rank_dir: str, rank: int, fmt: str) -> str:
    """Where a started rank writes its trace: a Chrome file, or its Kineto-shaped file in
    RANK_DIR/kineto (_C.kineto_trace_file)."""
    if fmt == "chrome":
        return os.path.join(rank_dir, f"rank{rank}.trace.json")
    return _C.kineto_trace_file(os.path.join(rank_dir, "kineto"), rank)
