"""What ``python -m harness_sim run`` writes once the program has ended: the report (merged over
the ranks), the trace, the summary on stderr, and bench's gates and HTML page of the report."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

from .. import _C
from .._device import counting as _counting
from .exits import EXIT_GATE, EXIT_OK, EXIT_USAGE
from .options import RunOptions
from .ranks import StartedRanks, _TorchrunPeers
from .spawn import SpawnedRanks
from .windows import StepWindows


def start_trace(options: RunOptions):
    """The program's timeline from now on (a _C.TraceSession), when --trace asks for one."""
    if not options.trace:
        return None
    trace = _C.TraceSession(f"harness_sim run: {options.name}")
    if options.rank_dir:  # a started rank: its rank, on rank 0's clock origin
        trace.set_rank(int(os.environ.get("LOCAL_RANK", "0")),
                       int(os.environ.get("WORLD_SIZE", "1")))
        trace.set_origin(*options.rank_trace_origin)
    return trace


def write_report(options: RunOptions, path: str, variants: list) -> None:
    """StepWindows' writer: the report of the program's `variants` (name, counts) at `path`."""
    warnings = _counting.report_warnings()
    if options.as_cuda:
        warnings.append("--as-cuda: the program's CUDA calls ran on sim")
    config = _config(options)
    printable = _counting.printable
    _C.write_report(path, _counting._provenance(), warnings, printable(options.name),
                    printable(f"python -m harness_sim run: {config['program']}"),
                    printable(_window(options)), printable(config),
                    [(n, {}, s) for n, s in variants])


def _config(options: RunOptions) -> dict:
    return {"program": options.script or f"-m {options.module}",
            "args": " ".join(options.program_args), "steps_from": options.steps_from,
            "skip_steps": str(options.skip_steps), "as_cuda": str(options.as_cuda).lower()}


def _window(options: RunOptions) -> str:
    """The report's measured window."""
    each = {"optimizer": "one window per optimizer.step(): from the end of the previous step "
                         "to the end of this one",
            "lightning": "one window per Lightning training batch: from the end of the previous "
                         "batch to the end of this one",
            "backward": "one window per backward pass: from the end of the previous backward to "
                        "the end of this one"}[options.steps_from]
    return (f"{each}; variant steps: the windows of the steps after the first "
            f"{options.skip_steps}; before_steps: what ran before them; what follows the last "
            "step is in neither")


def write_outputs(options: RunOptions, windows: StepWindows, trace,
                  ranks: StartedRanks | None, peers: StartedRanks | _TorchrunPeers | None,
                  workdir: str, written: list[str]) -> int:
    """The report (one of every rank when there are `peers`, as bench writes), the trace and the
    summary, then the gates: EXIT_OK, or the gates' status. Each output goes into `written` once
    it is there, for the caller to remove if run is stopped before it ends."""
    report_path = options.out or os.path.join(workdir, "report.json")
    peer_reports = peers.reports() if peers is not None else []
    if isinstance(peers, SpawnedRanks):  # every rank spawned: this process is none of them
        _C.merge_rank_reports(peer_reports, report_path)
    elif peer_reports:
        rank0 = os.path.join(workdir, "rank0.json")
        windows.write_final(rank0)
        _C.merge_rank_reports([rank0] + peer_reports, report_path)
    else:
        windows.write_final(report_path)
    written += [options.out] if options.out else []
    if trace is not None:
        written += _write_trace(trace, ranks, options, workdir)
    if not options.quiet and isinstance(peers, SpawnedRanks):
        _spawned_summary(report_path, options.name, len(peer_reports),
                         report_path if options.out else None)
    elif not options.quiet:
        _summary(windows, options.name, options.skip_steps,
                 report_path if options.out else None, written[-1] if trace is not None else None,
                 ranks=1 + len(peer_reports), by_torchrun=options.torchrun is not None)
    if options.write_expectations:
        _C.write_expectations(report_path, options.write_expectations,
                              f"written by python -m harness_sim run from {_config(options)['program']}"
                              "; give each site a reason")
        written.append(options.write_expectations)
    status = EXIT_OK
    if options.expect:
        failed, text = _C.check_expectations(report_path, options.expect, options.strict)
        sys.stderr.write(text)
        status = EXIT_GATE if failed else EXIT_OK
    if options.bench is not None:
        gates = _gates(options.bench, report_path, options)
        status = gates if gates != EXIT_OK else status
    return status


def remove_written(written: list[str]) -> None:
    for path in written:
        if path != "-" and os.path.isfile(path):
            os.unlink(path)


def _write_trace(trace, ranks: StartedRanks | None, options: RunOptions,
                 workdir: str) -> list[str]:
    """Writes the trace (every rank's, when the program started ranks); returns what it wrote
    (the last: what the summary names)."""
    metadata = _trace_metadata(options)
    if ranks is not None and ranks.procs:
        return _write_rank_traces(trace, ranks, options, workdir, metadata)
    trace.write(options.trace, options.trace_format, metadata)
    return [options.trace if options.trace_format == "chrome" else
            _C.kineto_trace_file(options.trace, 0)]


def _write_rank_traces(trace, ranks: StartedRanks, options: RunOptions, workdir: str,
                       metadata: dict) -> list[str]:
    """The trace of every rank, as bench writes a run of several ranks: chrome, one document (a
    process per rank); kineto, each rank's file in the --trace directory. Returns what it wrote
    (the last: what the summary names)."""
    trace.set_rank(0, 1 + len(ranks.procs))
    theirs = ranks.traces(options.trace_format)  # ranks.wait() saw each of them
    if options.trace_format == "chrome":
        mine = os.path.join(workdir, "rank0.trace.json")
        trace.write(mine, "chrome", metadata)
        _C.merge_trace_files([mine] + theirs, options.trace)
        return [options.trace]
    written = []
    for rank, path in enumerate(theirs, start=1):  # each written whole or not at all
        target = _C.kineto_trace_file(options.trace, rank)
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
    trace.write(options.trace, "kineto", metadata)
    return written + [_C.kineto_trace_file(options.trace, 0)]


def _trace_metadata(options: RunOptions) -> dict:
    """The trace's otherData (with the device and instrument, which TraceSession adds)."""
    p = _counting._provenance()
    config = _config(options)
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
        _site_lines(windows._at_last_boundary, windows.counted)
    if f["steps"] is None:
        w("  no step counted: the report has no per-step figures\n")
    if out:
        w(f"  report: {out}\n")
    if trace:
        w(f"  trace: {trace}\n")


def _spawned_summary(report: str, name: str, ranks: int, out: str | None) -> None:
    """The summary of a program whose ranks it spawned (spawn): rank 0's figures, read
    from the merged report (the program's own process counted none of the ranks' steps)."""
    import json
    with open(report, encoding="utf-8") as f:
        variants = {v["name"]: v for v in json.load(f)["scenarios"][0]["variants"]}
    w = sys.stderr.write
    steps = variants.get("rank0/steps") or variants.get("steps")  # one rank: not prefixed
    counted = steps["measured_steps"] if steps else 0
    w(f"harness_sim run: {name}: {ranks} rank{'s' if ranks != 1 else ''} the program spawned "
      f"(multiprocessing's spawn), each counted; {counted} steps counted on rank 0\n")
    w("  below: rank 0's. The report's variants are merged over the ranks, and rank<r>/... are "
      "each rank's\n")
    w(f"  {'':<26}{'launches':>10}{'syncs':>8}{'h2d':>7}{'d2h':>7}{'d2d':>7}"
      f"{'collectives':>13}\n")
    if steps and counted:
        p = steps["per_step"]
        w(f"  {'per step':<26}" + "".join(
            f"{p.get(k, 0):>{wd}.4g}" for k, wd in
            (("launch.count", 10), ("sync.count", 8), ("h2d.count", 7), ("d2h.count", 7),
             ("d2d.count", 7), ("collective.count", 13))) + "\n")
    else:
        w("  no step counted on rank 0: the report has no per-step figures\n")
    if out:
        w(f"  report: {out}\n")


# The sites of each kind the summary shows; the rest are counted in the report.
MAX_SITE_LINES = 20


def _site_lines(counts: dict, steps: int) -> None:
    """The lines of the program that synced, made a blocking or pageable copy, or had an event
    in the counted steps, the most frequent first: at most MAX_SITE_LINES of each kind, then how
    many more the report has (a program with 100,000 syncing lines printed them all)."""
    w = sys.stderr.write

    def block(rows, heading, text):
        rows = sorted(rows, key=lambda s: -s["count"])
        if rows:
            w(f"  {heading.format(steps=steps)}, by line:\n")
        for s in rows[:MAX_SITE_LINES]:
            where = _counting._where(s["frame"], s["library"])
            w(f"    {s['count']} x {text(s)} in {s['phase']}" + (f" at {where}" if where else "")
              + (f" [allowed: {s['allowed']}]" if s.get("allowed") else "") + "\n")
        if len(rows) > MAX_SITE_LINES:
            w(f"    ... and {len(rows) - MAX_SITE_LINES} more sites in the report\n")

    events = counts.get("event_sites", [])
    block(counts["sync_sites"], "sync sites in the {steps} counted steps",
          lambda s: f"{s['op']} ({s['reason']})")
    block(counts["copy_sites"], "copy sites in the {steps} counted steps (blocking or pageable)",
          lambda s: f"{s['how']} {s['kind']} ({s['bytes']} bytes)")
    kinds = ("graph breaks, recompilations, capture blockers and values not computed"
             if any(e["kind"] == "value_not_computed" for e in events) else
             "graph breaks, recompilations and capture blockers")
    block(events, kinds + " in the {steps} counted steps", lambda s: f"{s['kind']} ({s['what']})")


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
    if result.returncode < 0:  # bench crashed: say so, its own output may say nothing
        print(f"python -m harness_sim run: {bench} compare was killed by signal "
              f"{-result.returncode}: the gates were not evaluated", file=sys.stderr)
    return EXIT_USAGE
