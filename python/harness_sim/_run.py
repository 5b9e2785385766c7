"""``python -m harness_sim run [options] -- SCRIPT.py [ARGS...]`` (or ``-m MODULE [ARGS...]``):
counts an unmodified program on sim, per step, and writes a schema-v1 report.

The program runs as ``python SCRIPT.py ARGS`` would (runpy as ``__main__``, ``sys.argv``,
``sys.path[0]``), with sim registered, the instrument counting and, with ``--as-cuda``, its CUDA
calls mapped to sim. Exit codes as bench's: 0, 1 a gate failed, 2 bad usage or input, 3 the
program failed (its traceback on stderr, or its own non-zero exit status), 130 / 143 on SIGINT /
SIGTERM; nothing is written then.
"""
from __future__ import annotations

import argparse
import os
import runpy
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

EXIT_OK, EXIT_GATE, EXIT_USAGE, EXIT_FAILED = 0, 1, 2, 3
DEFAULT_SKIP = 1
RANK_WAIT_S = 300  # how long rank 0's run waits for the ranks the program started, once it ended

_EPILOG = f"""\
Steps: one per optimizer.step() of any torch.optim.Optimizer (--steps-from optimizer), or one per
Lightning training batch (--steps-from lightning). A step's window runs from the end of the
previous step (or the start) to the end of this one. --skip-steps (default {DEFAULT_SKIP}) leaves
the first steps out of the per-step figures: the first window holds the program's set-up (the
model's H2D copies, the optimizer's lazily created state), which a steady-state step does not.
What follows the last step is counted in the program's total, never per step.

Exit codes: 0 ok, 1 a gate failed, 2 bad usage or input, 3 the program failed, 130/143 on
SIGINT/SIGTERM."""


class _Terminated(BaseException):
    """SIGTERM, raised in the program so that its finally blocks run."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m harness_sim run",
        usage="python -m harness_sim run [options] -- SCRIPT.py [ARGS...]\n"
              "       python -m harness_sim run [options] -m MODULE [ARGS...]",
        description="Count an unmodified training program's launches, copies, syncs and "
                    "collectives per step on the simulated device.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--as-cuda", action="store_true",
                   help="run a program written for CUDA unchanged: 'cuda' devices, .cuda() and "
                        "torch.cuda's API land on sim (README: what is mapped)")
    p.add_argument("-o", "--out", help="write the schema-v1 report here (atomically)")
    p.add_argument("-g", "--gate", action="append", default=[],
                   help="evaluate this gate file on the report; exit 1 if a rule fails "
                        "(repeatable; needs the bench binary)")
    p.add_argument("--trace", metavar="PATH",
                   help="write a timeline of the program as bench --trace does (atomically): "
                        "steps, phases, every launch, copy, sync and collective")
    p.add_argument("--trace-format", choices=("chrome", "kineto"), default="chrome",
                   help="chrome (default): one Chrome/Perfetto JSON file; kineto: PATH is a "
                        "directory, and rank0.pt.trace.json in it is shaped as PyTorch's "
                        "profiler writes it (HolisticTraceAnalysis reads it)")
    p.add_argument("--baseline", help="baseline report for the gates' baseline rules and --html")
    p.add_argument("--html", help="write bench's HTML page of the report (needs the bench binary)")
    p.add_argument("--bench", help="the bench binary for --gate / --html (default: $HARNESS_BENCH, "
                                   "else `bench` on PATH)")
    p.add_argument("--steps-from", choices=("optimizer", "lightning"), default="optimizer",
                   help="what ends a step (default: optimizer)")
    p.add_argument("--skip-steps", type=int, default=DEFAULT_SKIP, metavar="K",
                   help=f"leave the first K steps out of the per-step figures (default "
                        f"{DEFAULT_SKIP}: the first holds the set-up)")
    p.add_argument("--scenario", help="the report's scenario name (default: the script's or "
                                      "module's name)")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary on stderr")
    # A rank the program started itself (Lightning's DDP runs the script again per local rank):
    # run counts it as well and writes its report as DIR/rank<LOCAL_RANK>.json for rank 0's run
    # to merge (see _StartedRanks).
    p.add_argument("--rank-dir", help=argparse.SUPPRESS)
    # With --rank-dir: trace the rank too (into DIR, for rank 0's run to merge), with rank 0's
    # trace origin "ORIGIN_NS,UNIX_NS".
    p.add_argument("--rank-trace-origin", help=argparse.SUPPRESS)
    return p


class _StartedRanks:
    """The ranks a program counted by `run` starts itself, each run again under `run`.

    Lightning's DDP (SimDDPStrategy's launcher, harness_sim.lightning) asks command() for each
    local rank's command line while `run` is counting the program; `run` then waits for those
    processes and merges their reports into its own, as bench merges its ranks'."""

    active: "_StartedRanks | None" = None

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


def _as_rank(args: argparse.Namespace, rank_dir: str) -> None:
    """Makes this run a rank other than 0 (one Lightning started, or torchrun's): its report (and,
    with a trace origin from rank 0, its trace) into `rank_dir` for rank 0's run, nothing else."""
    rank = int(os.environ.get("LOCAL_RANK", "0"))
    args.rank_dir = rank_dir
    args.out = _rank_report(rank_dir, rank)
    args.quiet, args.gate, args.html, args.baseline = True, [], None, None
    args.trace = None
    if args.rank_trace_origin:
        args.trace = (_rank_trace(rank_dir, rank, "chrome") if args.trace_format == "chrome" else
                      os.path.join(rank_dir, "kineto"))


def _rank_report(rank_dir: str, rank: int) -> str:
    return os.path.join(rank_dir, f"rank{rank}.json")


def _rank_trace(rank_dir: str, rank: int, fmt: str) -> str:
    """Where a started rank writes its trace: a Chrome file, or its Kineto-shaped file in
    RANK_DIR/kineto (_C.kineto_trace_file)."""
    from . import _C
    if fmt == "chrome":
        return os.path.join(rank_dir, f"rank{rank}.trace.json")
    return _C.kineto_trace_file(os.path.join(rank_dir, "kineto"), rank)


def _split(argv: list[str]) -> tuple[list[str], str | None, str | None, list[str]]:
    """(options, script, module, program args): options end at `--` or at `-m MODULE`."""
    for i, arg in enumerate(argv):
        if arg == "--":
            rest = argv[i + 1:]
            if rest[:1] == ["-m"]:
                return argv[:i], None, (rest[1] if len(rest) > 1 else ""), rest[2:]
            return argv[:i], (rest[0] if rest else ""), None, rest[1:]
        if arg == "-m":
            return argv[:i], None, (argv[i + 1] if i + 1 < len(argv) else ""), argv[i + 2:]
    return argv, None, None, []


def _find_bench(explicit: str | None) -> str | None:
    for candidate in (explicit, os.environ.get("HARNESS_BENCH"), shutil.which("bench")):
        if candidate and os.access(candidate, os.X_OK) and os.path.isfile(candidate):
            return candidate
    return None


def _usage(parser: argparse.ArgumentParser, message: str) -> int:
    parser.print_usage(sys.stderr)
    print(f"python -m harness_sim run: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: list[str]) -> int:
    parser = _parser()
    options, script, module, program_args = _split(argv)
    if "-h" in options or "--help" in options:
        parser.print_help()
        return EXIT_OK
    try:
        args = parser.parse_args(options)
    except SystemExit as e:  # argparse has printed why
        return EXIT_USAGE if e.code else EXIT_OK
    if script is None and module is None:
        return _usage(parser, "no program: give `-- SCRIPT.py [ARGS...]` or `-m MODULE [ARGS...]`")
    if script == "" or module == "":
        return _usage(parser, "`--` or `-m` must be followed by the program")
    if script is not None and not os.path.isfile(script):
        return _usage(parser, f"no such script: {script}")
    if args.skip_steps < 0:
        return _usage(parser, "--skip-steps must be >= 0")
    torchrun = None
    job = None if args.rank_dir else _TorchrunPeers.of_this_job()
    if job is not None:
        directory, local_rank, local_world = job
        if local_world != int(os.environ["WORLD_SIZE"]):
            return _usage(parser, f"under torchrun, run merges the ranks of one node: this job has "
                                  f"{os.environ['WORLD_SIZE']} ranks on nodes of {local_world}")
        if args.trace:
            return _usage(parser, "--trace under torchrun is not supported: trace the program "
                                  "on one rank, or as Lightning's DDP starts its ranks")
        if local_rank == 0:
            torchrun = _TorchrunPeers(directory, local_world)
    if args.rank_trace_origin is not None and not args.rank_dir:
        return _usage(parser, "--rank-trace-origin is for a rank run with --rank-dir")
    if args.rank_dir:  # a rank the program started: its report for rank 0's run, nothing else
        if not os.path.isdir(args.rank_dir):
            return _usage(parser, f"--rank-dir {args.rank_dir}: no such directory")
        if args.rank_trace_origin is not None:
            try:
                origin = tuple(int(x) for x in args.rank_trace_origin.split(","))
            except ValueError:
                origin = ()
            if len(origin) != 2:
                return _usage(parser, f"--rank-trace-origin {args.rank_trace_origin}: "
                                      "ORIGIN_NS,UNIX_NS")
            args.rank_trace_origin = origin
        _as_rank(args, args.rank_dir)
    bench = None
    if args.gate or args.html:
        bench = _find_bench(args.bench)
        if bench is None:
            return _usage(parser, "--gate and --html need the bench binary: pass --bench PATH or "
                                  "set HARNESS_BENCH (./scripts/setup.sh builds build/bench/bench)")
    for path, what in [(g, "--gate") for g in args.gate] + [(args.baseline, "--baseline")]:
        if path and not os.path.isfile(path):
            return _usage(parser, f"{what} {path}: no such file")
    for path, what in ((args.out, "--out"), (args.html, "--html")):
        if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            return _usage(parser, f"{what} {path}: its directory does not exist")
    if job is not None and torchrun is None:  # torchrun's rank r > 0, its flags checked as rank 0's
        os.makedirs(job[0], exist_ok=True)
        _as_rank(args, job[0])
        bench = None

    import harness_sim  # noqa: F401  (registers sim, torch.sim, the c10d backend)
    from . import _C, _counting
    from ._windows import RangePhases, StepWindows

    if args.trace:  # an unwritable --trace is found now, not after the program ran
        message = _check_trace(args.trace, args.trace_format)
        if message:
            return _usage(parser, message)

    name = args.scenario or (os.path.splitext(os.path.basename(script))[0] if script else module)
    out = args.out
    workdir = tempfile.mkdtemp(prefix="harness_sim_run.")
    remover = _remove_when_gone([workdir] + ([torchrun.directory] if torchrun else []))
    report_path = out or os.path.join(workdir, "report.json")
    config = {"program": script or f"-m {module}", "args": " ".join(program_args),
              "steps_from": args.steps_from, "skip_steps": str(args.skip_steps),
              "as_cuda": str(args.as_cuda).lower()}

    def write(path: str, variants: list) -> None:
        windows_desc = ("one window per optimizer.step(): from the end of the previous step to "
                        "the end of this one" if args.steps_from == "optimizer" else
                        "one window per Lightning training batch: from the end of the previous "
                        "batch to the end of this one")
        _C_write(path, variants, name, config,
                 f"{windows_desc}; variant steps: the windows of the steps after the first "
                 f"{args.skip_steps}; before_steps: what ran before them; what follows the last "
                 "step is in neither")

    def _C_write(path, variants, scenario, cfg, window):
        warnings = ["simulated device: copies, syncs and launches follow CUDA's rules; times are "
                    "host CPU times, not GPU times"]
        if args.as_cuda:
            warnings.append("--as-cuda: the program's CUDA calls ran on sim")
        harness_sim._C.write_report(path, _counting._provenance(), warnings, scenario,
                                    f"python -m harness_sim run: {cfg['program']}", window, cfg,
                                    [(n, {}, s) for n, s in variants])

    trace = _C.TraceSession(f"harness_sim run: {name}") if args.trace else None
    if trace is not None and args.rank_dir:  # a started rank: its rank, on rank 0's clock origin
        trace.set_rank(int(os.environ.get("LOCAL_RANK", "0")),
                       int(os.environ.get("WORLD_SIZE", "1")))
        trace.set_origin(*args.rank_trace_origin)
    ranks = None
    if not args.rank_dir:  # ranks the program starts are counted too (one level: not theirs)
        child = ["--scenario", name, "--steps-from", args.steps_from,
                 "--skip-steps", str(args.skip_steps)] + (["--as-cuda"] if args.as_cuda else [])
        if trace is not None:
            child += ["--trace-format", args.trace_format,
                      "--rank-trace-origin", ",".join(str(x) for x in trace.origin())]
        ranks = _StartedRanks(workdir, child)
        _StartedRanks.active = ranks
    windows = StepWindows(args.skip_steps, write, trace)
    phases = RangePhases()
    cuda = None
    hooks = []
    status = EXIT_OK
    old_argv, old_path0 = list(sys.argv), sys.path[0] if sys.path else None
    old_term = signal.getsignal(signal.SIGTERM)

    def on_term(signum, frame):
        raise _Terminated()

    from . import _lightning_run
    try:
        signal.signal(signal.SIGTERM, on_term)
        if args.as_cuda:
            from ._as_cuda import AsCuda
            cuda = AsCuda()
            cuda.install()
        phases.install()
        # Backward on this thread, as autograd runs it for CPU tensors: sim's kernels run on the
        # host, so CUDA's device thread would only hand each backward over and back and run a
        # second OpenMP team on the same cores. What is counted is the same (issue 26).
        import torch
        torch._C._set_multithreading_enabled(False)
        if args.steps_from == "optimizer":
            import torch.optim.optimizer as optimizer
            hooks.append(optimizer.register_optimizer_step_post_hook(
                lambda *_: windows.boundary()))
        _lightning_run.activate(windows, lightning_steps=args.steps_from == "lightning")
        if script is not None:
            sys.argv = [script] + program_args
            sys.path[0] = os.path.dirname(os.path.abspath(script))
            runpy.run_path(script, run_name="__main__")
        else:
            sys.argv = [module] + program_args  # runpy sets argv[0] to the module's file
            sys.path[0] = os.getcwd()
            runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as e:
        code = e.code
        if code not in (None, 0):
            if not isinstance(code, int):
                print(code, file=sys.stderr)
            print(f"python -m harness_sim run: the program exited with status {code}",
                  file=sys.stderr)
            status = EXIT_FAILED
    except KeyboardInterrupt:
        status = 130
    except _Terminated:
        status = 143
    except BaseException as e:  # the program failed: its traceback, as python would print it
        from ._as_cuda import UnsupportedOnSim
        if isinstance(e, UnsupportedOnSim):
            print(f"python -m harness_sim run --as-cuda: {e}", file=sys.stderr)
        else:
            traceback.print_exc()
        status = EXIT_FAILED
    finally:
        _StartedRanks.active = None
        windows.finish()
        for h in hooks:
            h.remove()
        _lightning_run.deactivate()
        phases.uninstall()
        if trace is not None:
            trace.stop()  # after the phases the program left open have closed
        if cuda is not None:
            cuda.uninstall()
        sys.argv = old_argv
        if old_path0 is not None:
            sys.path[0] = old_path0

    # The outputs, each written atomically; SIGINT / SIGTERM while they are written (the handler
    # runs between Python calls, so never inside one) removes those already written: nothing is
    # written unless run exits 0 or 1.
    written: list[str] = []
    try:
        # The other ranks: those the program started (Lightning), or torchrun's.
        peers = ranks if ranks is not None and ranks.procs else torchrun
        if peers is not None and status == EXIT_OK:
            why = peers.wait(timeout_s=RANK_WAIT_S,
                             trace_format=args.trace_format if trace is not None else None)
            if why:
                print(f"python -m harness_sim run: {why}", file=sys.stderr)
                status = EXIT_FAILED
        if status != EXIT_OK:
            return status
        peer_reports = peers.reports() if peers is not None else []
        if peer_reports:  # one report of every rank, as bench writes
            rank0 = os.path.join(workdir, "rank0.json")
            windows.write_final(rank0)
            _C.merge_rank_reports([rank0] + peer_reports, report_path)
        else:
            windows.write_final(report_path)
        written += [out] if out else []
        if trace is not None and ranks is not None and ranks.procs:
            written += _write_rank_traces(trace, ranks, args, workdir, _trace_metadata(config))
        elif trace is not None:
            trace.write(args.trace, args.trace_format, _trace_metadata(config))
            written.append(args.trace if args.trace_format == "chrome" else
                           _C.kineto_trace_file(args.trace, 0))
        if not args.quiet:
            _summary(windows, name, args.skip_steps, report_path if out else None,
                     written[-1] if trace is not None else None,
                     ranks=1 + len(peer_reports), by_torchrun=torchrun is not None)
        if bench is not None:
            status = _gates(bench, report_path, args)
    except _C.InputError as e:  # an output could not be written (a full disk, ...)
        print(f"python -m harness_sim run: error: {e}", file=sys.stderr)
        status = EXIT_USAGE
    except KeyboardInterrupt:
        status = 130
    except _Terminated:
        status = 143
    finally:
        signal.signal(signal.SIGTERM, old_term)
        if ranks is not None and status not in (EXIT_OK, EXIT_GATE):
            ranks.stop()  # the run failed or was stopped: no rank is left running
        shutil.rmtree(workdir, ignore_errors=True)
        if torchrun is not None:  # the other ranks' reports, merged or not
            shutil.rmtree(torchrun.directory, ignore_errors=True)
        os.close(remover)  # nothing left for it to remove: it ends
        if status not in (EXIT_OK, EXIT_GATE):
            for path in written:
                if path != "-" and os.path.isfile(path):
                    os.unlink(path)
    return status


def _check_trace(path: str, fmt: str) -> str | None:
    """Why --trace PATH cannot be written as --trace-format asks (None: it can), as bench
    checks it: chrome, a file whose directory exists and is writable; kineto, a directory
    (created now) in which rank0.pt.trace.json can be written."""
    from . import _C
    target = path
    if fmt == "kineto":
        if path == "-":
            return "--trace -: --trace-format kineto writes a file into a directory"
        if os.path.exists(path) and not os.path.isdir(path):
            return (f"--trace {path}: is not a directory (--trace-format kineto writes "
                    "rank0.pt.trace.json into one)")
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as e:
            return f"--trace {path}: {e.strerror}"
        target = _C.kineto_trace_file(path, 0)
    try:
        _C.check_writable(target, "--trace")
    except _C.InputError as e:
        return str(e)
    return None


def _write_rank_traces(trace, ranks: _StartedRanks, args, workdir: str,
                       metadata: dict) -> list[str]:
    """The trace of every rank, as bench writes a run of several ranks: chrome, one document (a
    process per rank); kineto, each rank's file in the --trace directory. Returns what it wrote
    (the last: what the summary names)."""
    from . import _C
    trace.set_rank(0, 1 + len(ranks.procs))
    theirs = ranks.traces(args.trace_format)  # ranks.wait() saw each of them
    if args.trace_format == "chrome":
        mine = os.path.join(workdir, "rank0.trace.json")
        trace.write(mine, "chrome", metadata)
        _C.merge_trace_files([mine] + theirs, args.trace)
        return [args.trace]
    written = []
    for rank, path in enumerate(theirs, start=1):  # each written whole or not at all
        target = _C.kineto_trace_file(args.trace, rank)
        partial = target + ".partial"
        try:
            shutil.copyfile(path, partial)
            os.replace(partial, target)
        except OSError as e:
            if os.path.exists(partial):
                os.unlink(partial)
            for done in written:
                os.unlink(done)
            raise _C.InputError(f"--trace {target}: {e.strerror or e}") from None
        written.append(target)
    trace.write(args.trace, "kineto", metadata)
    return written + [_C.kineto_trace_file(args.trace, 0)]


def _trace_metadata(config: dict) -> dict:
    """The trace's otherData (with the device and instrument, which TraceSession adds)."""
    from . import _counting
    p = _counting._provenance()
    return {"tool": p["tool_version"], "started_at": p["started_at"],
            "libtorch_version": p["libtorch_version"], "program": config["program"],
            "args": config["args"]}


def _summary(windows, name: str, skip: int, out: str | None, trace: str | None = None,
             ranks: int = 1, by_torchrun: bool = False) -> None:
    f = windows.figures()
    w = sys.stderr.write
    w(f"harness_sim run: {name}: {windows.seen} steps, {windows.counted} counted "
      f"(--skip-steps {skip})\n")
    if ranks > 1:
        how = ("torchrun's, each under run" if by_torchrun else
               f"the program started {ranks - 1}, each counted too")
        w(f"  {ranks} ranks ({how}); below: rank 0's. "
          "The report's variants are merged over the ranks, and rank<r>/... are each rank's\n")
    w(f"  {'':<26}{'launches':>10}{'syncs':>8}{'h2d':>7}{'d2h':>7}{'d2d':>7}\n")
    n = max(windows.counted, 1)
    if f["steps"]:
        s = f["steps"]
        w(f"  {'per step':<26}" + "".join(f"{s[k] / n:>{wd}.4g}" for k, wd in
                                           (("launches", 10), ("syncs", 8), ("h2d", 7),
                                            ("d2h", 7), ("d2d", 7))) + "\n")
    for label, key in (("before the counted steps", "before"), ("after the last step", "after"),
                       ("program total", "total")):
        s = f[key]
        if s:
            w(f"  {label:<26}{s['launches']:>10}{s['syncs']:>8}{s['h2d']:>7}{s['d2h']:>7}"
              f"{s['d2d']:>7}\n")
    if f["steps"] and windows._at_last_boundary:
        sites = windows._at_last_boundary["sync_sites"]
        if sites:
            w(f"  sync sites in the {windows.counted} counted steps:\n")
        for site in sites:
            frames = [fr for fr in site["frames"] if fr]
            where = (f" at {frames[0]}" + (f" (+{len(frames) - 1} more)" if len(frames) > 1
                                            else "")) if frames else ""
            w(f"    {site['count']} x {site['op']} ({site['reason']}) in {site['phase']}"
              f"{where}\n")
    if f["steps"] is None:
        w("  no step counted: the report has no per-step figures\n")
    if out:
        w(f"  report: {out}\n")
    if trace:
        w(f"  trace: {trace}\n")


def _gates(bench: str, report: str, args) -> int:
    cmd = [bench, "compare", args.baseline or report, report]
    for g in args.gate:
        cmd += ["--gate", g]
    if args.html:
        cmd += ["--html", args.html]
    result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sys.stderr.write(result.stdout)
    sys.stderr.write(result.stderr)
    if result.returncode in (EXIT_OK, EXIT_GATE):
        return result.returncode
    return EXIT_USAGE
