"""``python -m harness_sim run``'s options: the parser, and every check made of them before the
program runs, so that bad usage exits 2 with nothing run and nothing written."""
from __future__ import annotations

import argparse
import dataclasses
import importlib.machinery
import importlib.util
import os
import shutil
import sys

from .. import _C
from .._device import counting as _counting
from .._device.mode import split_run_argv
from .exits import EXIT_OK, EXIT_USAGE
from .ranks import _rank_report, _rank_trace, _TorchrunPeers

DEFAULT_SKIP = 1

_EPILOG = f"""\
Steps: one per optimizer.step() of any torch.optim.Optimizer (--steps-from optimizer), one per
Lightning training batch (--steps-from lightning), or one per backward pass (--steps-from
backward: a framework with an optimizer of its own, such as Keras). A step's window runs from
the end of the previous step (or the start) to the end of this one. --skip-steps (default {DEFAULT_SKIP}) leaves
the first steps out of the per-step figures: the first window holds the program's set-up (the
model's H2D copies, the optimizer's lazily created state), which a steady-state step does not.
What follows the last step is counted in the program's total, never per step.

Exit codes: 0 ok, 1 a gate failed, 2 bad usage or input, 3 the program failed, 130/143 on
SIGINT/SIGTERM."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m harness_sim run",
        usage="python -m harness_sim run [options] -- SCRIPT.py [ARGS...]\n"
              "       python -m harness_sim run [options] -m MODULE [ARGS...]",
        description="Count an unmodified training program's launches, copies, syncs and "
                    "collectives per step on the simulated device.",
        epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--compute", choices=("values", "shapes"), default="values",
                   help="values (default): sim computes every op; shapes: only each op's meta "
                        "function (tensors without memory, values read by the host are zeros), "
                        "counted the same: a model at full size (docs/full-size.md)")
    p.add_argument("--as-cuda", action="store_true",
                   help="run a program written for CUDA unchanged: 'cuda' devices, .cuda() and "
                        "torch.cuda's API land on sim (README: what is mapped)")
    p.add_argument("--with-triton", action="store_true",
                   help="with --as-cuda: Triton importable, as on a GPU machine (a program that "
                        "imports it unconditionally runs; a Triton kernel launched is refused); "
                        "without it Triton is absent, as on a machine without it")
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
    p.add_argument("--expect", metavar="FILE",
                   help="check the sync and copy sites by line against this expectations file "
                        "(docs/expectations.md); exit 1 on a site not in it or above its count")
    p.add_argument("--write-expectations", metavar="FILE",
                   help="write the counted steps' sync and copy sites by line, with their counts "
                        "per step, as an expectations file to edit and commit")
    p.add_argument("--strict", action="store_true",
                   help="with --expect: an expected site that did not occur fails too")
    p.add_argument("--baseline", help="baseline report for the gates' baseline rules and --html")
    p.add_argument("--html", help="write bench's HTML page of the report (needs the bench binary)")
    p.add_argument("--bench", help="the bench binary for --gate / --html (default: $HARNESS_BENCH, "
                                   "else `bench` on PATH)")
    p.add_argument("--steps-from", choices=("optimizer", "lightning", "backward"),
                   default="optimizer",
                   help="what ends a step (default: optimizer)")
    p.add_argument("--skip-steps", type=int, default=DEFAULT_SKIP, metavar="K",
                   help=f"leave the first K steps out of the per-step figures (default "
                        f"{DEFAULT_SKIP}: the first holds the set-up)")
    p.add_argument("--scenario", help="the report's scenario name (default: the script's or "
                                      "module's name)")
    p.add_argument("-q", "--quiet", action="store_true", help="no summary on stderr")
    # A rank the program started itself (Lightning's DDP runs the script again per local rank):
    # run counts it as well and writes its report as DIR/rank<LOCAL_RANK>.json for rank 0's run
    # to merge (see ranks.StartedRanks).
    p.add_argument("--rank-dir", help=argparse.SUPPRESS)
    # With --rank-dir: trace the rank too (into DIR, for rank 0's run to merge), with rank 0's
    # trace origin "ORIGIN_NS,UNIX_NS".
    p.add_argument("--rank-trace-origin", help=argparse.SUPPRESS)
    # With --rank-dir: a child multiprocessing's spawn start method started (spawn): its
    # report is DIR/rank<R>.json, R its rank in the process group it joins (none: no report).
    p.add_argument("--spawned", action="store_true", help=argparse.SUPPRESS)
    return p


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """The checked options of one run. A rank other than 0 (one the program started, or
    torchrun's) has already been made one by _as_rank: its report into the ranks' directory, no
    gates, no HTML, no summary."""

    script: str | None
    module: str | None
    program_args: list[str]
    as_cuda: bool
    with_triton: bool  # --as-cuda with Triton importable (its kernels refused at launch)
    compute: str  # "values" or "shapes" (the package chose it while it was imported)
    out: str | None
    gate: list[str]
    expect: str | None
    write_expectations: str | None
    strict: bool
    trace: str | None
    trace_format: str
    baseline: str | None
    html: str | None
    steps_from: str
    skip_steps: int
    scenario: str | None
    quiet: bool
    rank_dir: str | None
    rank_trace_origin: tuple[int, int] | None
    spawned: bool  # a spawned child (spawn): its report's name is known once it has a rank
    bench: str | None  # the bench binary, found, when the gates or --html are to run
    torchrun: _TorchrunPeers | None  # on local rank 0 of a torchrun job: its other ranks

    @property
    def name(self) -> str:
        """The report's scenario."""
        return self.scenario or (os.path.splitext(os.path.basename(self.script))[0]
                                 if self.script else self.module)

    def for_started_ranks(self, trace) -> list[str]:
        """The options of each rank the program starts, run again under run: this run's counting,
        and, with a trace, its format and this trace's clock origin."""
        child = ["--scenario", self.name, "--steps-from", self.steps_from,
                 "--skip-steps", str(self.skip_steps), "--compute", self.compute] + (
                     ["--as-cuda"] if self.as_cuda else []) + (
                     ["--with-triton"] if self.with_triton else [])
        if trace is not None:
            child += ["--trace-format", self.trace_format,
                      "--rank-trace-origin", ",".join(str(x) for x in trace.origin())]
        return child


class _Usage(Exception):
    """Bad usage: why, printed after the usage line."""


def parse_options(argv: list[str]) -> RunOptions | int:
    """run's options in `argv`, checked; or, when nothing is to run, run's exit status: 0 after
    -h, 2 after bad usage (the usage line and why are on stderr)."""
    parser = _parser()
    options, script, module, program_args = split_run_argv(argv)
    if "-h" in options or "--help" in options:
        parser.print_help()
        return EXIT_OK
    if script is None and module is None:
        program = _program_without_separator(parser, options)
        if program is not None:
            return _usage(parser, f"the program goes after '--': python -m harness_sim run "
                                  f"[options] -- {program} [ARGS...] (or -m MODULE)")
    try:
        args = parser.parse_args(options)
    except SystemExit as e:  # argparse has printed why
        return EXIT_USAGE if e.code else EXIT_OK
    try:
        return _checked(args, script, module, program_args)
    except _Usage as e:
        return _usage(parser, str(e))


def _program_without_separator(parser: argparse.ArgumentParser, options: list[str]) -> str | None:
    """The first word of `options` that is neither an option nor an option's value (`run
    --as-cuda train.py`: the program, given without the ``--`` that ends run's options); None
    when there is none."""
    takes_value = {flag for action in parser._actions if action.nargs != 0
                   for flag in action.option_strings}
    words = iter(options)
    for word in words:
        if word.startswith("-"):
            if word in takes_value:
                next(words, None)
            continue
        return word
    return None


def _usage(parser: argparse.ArgumentParser, message: str) -> int:
    parser.print_usage(sys.stderr)
    print(f"python -m harness_sim run: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _checked(args: argparse.Namespace, script: str | None, module: str | None,
             program_args: list[str]) -> RunOptions:
    """The options, each checked in the order that picks the message a bad command line gets;
    raises _Usage."""
    _check_program(args, script, module)
    if args.with_triton and not args.as_cuda:
        raise _Usage("--with-triton goes with --as-cuda (Triton kernels are CUDA's)")
    _refuse_empty_paths(args)
    job, torchrun = _torchrun_job(args)
    _check_rank(args)
    bench = _bench(args)
    _check_paths(args)
    _read_inputs(args, script, module)
    if job is not None and torchrun is None:  # torchrun's rank r > 0, its flags checked as rank 0's
        os.makedirs(job[0], exist_ok=True)
        _as_rank(args, job[0])
        bench = None
    if args.trace:  # an unwritable --trace is found now, not after the program ran
        message = _check_trace(args.trace, args.trace_format)
        if message:
            raise _Usage(message)
    if args.compute != _C.compute():
        raise _Usage(f"--compute {args.compute}: this process computes {_C.compute()} (the mode is "
                     "chosen while harness_sim is imported, before any tensor): start it as "
                     f"`python -m harness_sim run --compute {args.compute} ...`, or set "
                     f"HARNESS_SIM_COMPUTE={args.compute}")
    _resolve_paths(args)  # a program that changes directory does not move them
    bench = os.path.abspath(bench) if bench else bench
    return RunOptions(
        script=script, module=module, program_args=program_args, as_cuda=args.as_cuda,
        with_triton=args.with_triton,
        compute=args.compute,
        out=args.out, gate=args.gate, expect=args.expect,
        write_expectations=args.write_expectations, strict=args.strict,
        trace=args.trace, trace_format=args.trace_format,
        baseline=args.baseline, html=args.html, steps_from=args.steps_from,
        skip_steps=args.skip_steps, scenario=args.scenario, quiet=args.quiet,
        rank_dir=args.rank_dir, rank_trace_origin=args.rank_trace_origin,
        spawned=args.spawned, bench=bench,
        torchrun=torchrun)


def _check_program(args: argparse.Namespace, script: str | None, module: str | None) -> None:
    if script is None and module is None:
        raise _Usage("no program: give `-- SCRIPT.py [ARGS...]` or `-m MODULE [ARGS...]`")
    if script == "" or module == "":
        raise _Usage("`--` or `-m` must be followed by the program")
    if script is not None and not os.path.isfile(script):
        raise _Usage(f"no such script: {script}")
    # A module that is not there is bad input, as a missing script is: its top-level package is
    # looked up, and its submodules in the package's directories, importing nothing (a package's
    # __init__ runs when the program does, counted).
    if module is not None:
        missing = _missing_part(module)
        if missing:
            raise _Usage(f"no module named {missing!r} (-m {module})")
    if args.skip_steps < 0:
        raise _Usage("--skip-steps must be >= 0")


def _missing_part(dotted: str) -> str | None:
    """The first part of module `dotted` ("pkg", "pkg.sub") that `python -m` would not find, or
    None: the top level as _top_level_spec finds it, each submodule as a file or a
    directory in its package's directories. Where a package's directories cannot be known without
    importing it (a package made at import time), the rest is left to the run."""
    parts = dotted.split(".")
    spec = _top_level_spec(parts[0])
    if spec is None:
        return parts[0]
    if len(parts) > 1 and spec.submodule_search_locations is None:
        return ".".join(parts[:2])  # a module, not a package: it has no submodules
    locations = list(spec.submodule_search_locations or [])
    suffixes = importlib.machinery.all_suffixes()
    for i, part in enumerate(parts[1:], start=2):
        found = []
        for base in locations:
            if os.path.isdir(os.path.join(base, part)):
                found.append(os.path.join(base, part))
            elif any(os.path.isfile(os.path.join(base, part + s)) for s in suffixes):
                found.append(None)
        if not found and locations:
            return ".".join(parts[:i])
        locations = [f for f in found if f]
        if not locations:
            break  # a module file: what follows it is for the run to judge
    return None


def _top_level_spec(name: str):
    """How `python -m` would find the package or module `name`, from the directory it adds (the
    current one) as the program will run (program), importing nothing; None: it would not."""
    saved = sys.path[0] if sys.path else None
    if sys.path:
        sys.path[0] = os.getcwd()
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    finally:
        if saved is not None:
            sys.path[0] = saved


def _torchrun_job(args: argparse.Namespace
                  ) -> tuple[tuple[str, int, int] | None, _TorchrunPeers | None]:
    """(_TorchrunPeers.of_this_job(), and on its local rank 0 the other ranks to merge) when this
    run is a rank of a torchrun job, else (None, None)."""
    job = None if args.rank_dir else _TorchrunPeers.of_this_job()
    if job is None:
        return None, None
    directory, local_rank, local_world = job
    if local_world != int(os.environ["WORLD_SIZE"]):
        raise _Usage(f"under torchrun, run merges the ranks of one node: this job has "
                     f"{os.environ['WORLD_SIZE']} ranks on nodes of {local_world}")
    if args.trace:
        raise _Usage("--trace under torchrun is not supported: trace the program "
                     "on one rank, or as Lightning's DDP starts its ranks")
    return job, (_TorchrunPeers(directory, local_world) if local_rank == 0 else None)


def _check_rank(args: argparse.Namespace) -> None:
    """--rank-dir and --rank-trace-origin; a rank the program started becomes one (_as_rank)."""
    if args.rank_trace_origin is not None and not args.rank_dir:
        raise _Usage("--rank-trace-origin is for a rank run with --rank-dir")
    if args.spawned and (not args.rank_dir or args.rank_trace_origin is not None):
        raise _Usage("--spawned is for a spawned child's run with --rank-dir, without a trace")
    if not args.rank_dir:
        return
    # A rank the program started: its report for rank 0's run, nothing else.
    if not os.path.isdir(args.rank_dir):
        raise _Usage(f"--rank-dir {args.rank_dir}: no such directory")
    if args.rank_trace_origin is not None:
        try:
            origin = tuple(int(x) for x in args.rank_trace_origin.split(","))
        except ValueError:
            origin = ()
        if len(origin) != 2:
            raise _Usage(f"--rank-trace-origin {args.rank_trace_origin}: ORIGIN_NS,UNIX_NS")
        args.rank_trace_origin = origin
    _as_rank(args, args.rank_dir)


# The paths run reads or writes, resolved when run starts: a program that changes directory does
# not move them.
_PATH_OPTIONS = ("out", "trace", "html", "baseline", "expect", "write_expectations", "bench",
                 "rank_dir")
# The outputs: no two may be one file, and none may be a directory.
_OUTPUTS = (("out", "--out"), ("trace", "--trace"), ("html", "--html"),
            ("write_expectations", "--write-expectations"))


def _refuse_empty_paths(args: argparse.Namespace) -> None:
    """An empty path would silently mean no output (or no input)."""
    for name in _PATH_OPTIONS:
        if getattr(args, name) == "":
            raise _Usage(f"--{name.replace('_', '-')}: an empty path")
    if any(g == "" for g in args.gate):
        raise _Usage("--gate: an empty path")


def _resolve_paths(args: argparse.Namespace) -> None:
    """Every path option made absolute, once checked (the messages name them as given)."""
    for name in _PATH_OPTIONS:
        value = getattr(args, name)
        if value is not None and not (name == "trace" and value == "-"):
            setattr(args, name, os.path.abspath(value))
    args.gate = [os.path.abspath(g) for g in args.gate]


def _bench(args: argparse.Namespace) -> str | None:
    """The bench binary, when --gate or --html need it: --bench as given (never another one in
    its place), else $HARNESS_BENCH, else `bench` on PATH."""
    if not (args.gate or args.html):
        return None
    if args.bench is not None:
        if not (os.path.isfile(args.bench) and os.access(args.bench, os.X_OK)):
            raise _Usage(f"--bench {args.bench}: not an executable file")
        return args.bench
    bench = _find_bench()
    if bench is None:
        raise _Usage("--gate and --html need the bench binary: pass --bench PATH or "
                     "set HARNESS_BENCH (./scripts/setup.sh builds build/bench/bench)")
    return bench


def _find_bench() -> str | None:
    for candidate in (os.environ.get("HARNESS_BENCH"), shutil.which("bench")):
        if candidate and os.access(candidate, os.X_OK) and os.path.isfile(candidate):
            return candidate
    return None


def _check_paths(args: argparse.Namespace) -> None:
    """The files read exist and are files; the outputs are files in directories that exist, and
    no two of them are one file."""
    for path, what in ([(g, "--gate") for g in args.gate] + [(args.baseline, "--baseline"),
                                                             (args.expect, "--expect")]):
        if path and os.path.isdir(path):
            raise _Usage(f"{what} {path}: is a directory")
        if path and not os.path.exists(path):
            raise _Usage(f"{what} {path}: no such file")
    seen: dict[str, str] = {}
    for name, what in _OUTPUTS:
        path = getattr(args, name)
        if not path or path == "-" or (name == "trace" and args.trace_format == "kineto"):
            continue  # (a kineto trace is a directory: _check_trace)
        if os.path.isdir(path):
            raise _Usage(f"{what} {path}: is a directory")
        if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise _Usage(f"{what} {path}: its directory does not exist")
        key = os.path.abspath(path)
        if key in seen:
            raise _Usage(f"{seen[key]} and {what} name one file, {path}: each output needs "
                         "its own")
        seen[key] = what


def _read_inputs(args: argparse.Namespace, script: str | None, module: str | None) -> None:
    """The gate files, the baseline and the expectations file read and checked now, as bench
    reads its own before it runs anything: one that is malformed, names a scenario or variant
    this run cannot report, or is not a regular file (a FIFO, /dev/zero) is bad input before the
    program runs, not after (issue 53)."""
    name = args.scenario or (os.path.splitext(os.path.basename(script))[0] if script else module)
    try:  # paths as their bytes (a name need not be UTF-8); the scenario as the report names it
        _C.check_run_inputs([os.fsencode(g) for g in args.gate], os.fsencode(args.baseline or ""),
                            os.fsencode(args.expect or ""), _counting.printable(name))
    except ValueError as e:  # _C.InputError
        raise _Usage(str(e)) from None


def _as_rank(args: argparse.Namespace, rank_dir: str) -> None:
    """Makes this run a rank other than 0 (one Lightning started, or torchrun's): its report (and,
    with a trace origin from rank 0, its trace) into `rank_dir` for rank 0's run, nothing else."""
    rank = int(os.environ.get("LOCAL_RANK", "0"))
    args.rank_dir = rank_dir
    args.out = None if args.spawned else _rank_report(rank_dir, rank)
    args.quiet, args.gate, args.html, args.baseline = True, [], None, None
    args.expect = args.write_expectations = None
    args.trace = None
    if args.rank_trace_origin:
        args.trace = (_rank_trace(rank_dir, rank, "chrome") if args.trace_format == "chrome" else
                      os.path.join(rank_dir, "kineto"))


def _check_trace(path: str, fmt: str) -> str | None:
    """Why --trace PATH cannot be written as --trace-format asks (None: it can), as bench
    checks it: chrome, a file whose directory exists and is writable; kineto, a directory
    (created now) in which rank0.pt.trace.json can be written."""
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
