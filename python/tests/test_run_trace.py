"""python -m harness_sim run --trace: the counted program's timeline, as bench --trace writes it
(issue 24). Every trace passes tests/cli/trace_check.py, and its launches, copies and syncs are
the report's: the counted steps' inside the steps, before_steps' before them."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import REPO
from harness_sim._run import main as run
from test_run import LOOP, _report, _script

TRACE_CHECK = REPO / "tests" / "cli" / "trace_check.py"


def trace_check(path) -> None:
    done = subprocess.run([sys.executable, str(TRACE_CHECK), str(path)], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def _sections(events) -> dict:
    """The "variants" track's sections: name -> (begin, end) in µs."""
    begins, out = {}, {}
    for e in events:
        if e.get("cat") == "variant":
            if e["ph"] == "B":
                begins[e["name"]] = e["ts"]
            else:
                out[e["name"]] = (begins.pop(e["name"]), e["ts"])
    return out


def _inside(events, cat: str, spans) -> int:
    return sum(1 for e in events if e.get("cat") == cat and e["ph"] == "X"
               and any(b <= e["ts"] <= end for b, end in spans))


def test_chrome_trace_of_a_loop(tmp_path, capsys):
    out, trace = tmp_path / "r.json", tmp_path / "t.json"
    assert run(["--out", str(out), "--trace", str(trace), "--", _script(tmp_path, LOOP), "6"]) == 0
    assert f"trace: {trace}" in capsys.readouterr().err
    trace_check(trace)
    r = _report(out)
    before, steps = r["before_steps"]["total"], r["steps"]["total"]
    doc = json.loads(trace.read_text())
    events = doc["traceEvents"]
    assert doc["otherData"]["program"].endswith("prog.py") and doc["otherData"]["args"] == "6"
    # The counted steps are the trace's steps, numbered as the program's steps (the first one is
    # --skip-steps'), and its sections are the report's variants and what followed.
    marked = [e for e in events if e.get("cat") == "step"]
    assert [e["name"] for e in marked] == [f"step {n}" for n in range(2, 7)]
    sections = _sections(events)
    assert list(sections) == ["before_steps", "steps", "after the last step"]
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in marked]
    # Every launch is a kernel on the device stream and a host call with an arrow to it.
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert len(kernels) == before["launch.count"] + steps["launch.count"]  # none after: an item()
    assert _inside(events, "kernel", spans) == steps["launch.count"] == 5 * 11
    assert _inside(events, "kernel", [sections["before_steps"]]) == before["launch.count"]
    copies = steps["h2d.count"] + steps["d2h.count"] + steps["d2d.count"]
    assert _inside(events, "memcpy", spans) == copies
    assert _inside(events, "sync", spans) == steps["sync.count"] == 10
    # The program's record_function and NVTX ranges, and torch.optim's, are phases on the trace.
    phases = {e["name"] for e in events if e.get("cat") == "phase"}
    assert {"forward", "backward", "Optimizer.step#SGD.step"} <= phases


@pytest.fixture(scope="module")
def kineto_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("kineto")
    out, trace = tmp / "r.json", tmp / "trace"
    # 20 steps: HTA 0.5.0 with pandas 3 fails on a trace of fewer than 128 correlations (it
    # narrows the column to int8, then stores row numbers in it).
    assert run(["-q", "--out", str(out), "--trace", str(trace), "--trace-format", "kineto", "--",
                _script(tmp, LOOP), "20"]) == 0
    return trace, _report(out)


def test_kineto_trace_of_a_loop(kineto_run):
    trace, r = kineto_run
    assert sorted(p.name for p in trace.iterdir()) == ["rank0.pt.trace.json"]
    trace_check(trace)
    events = json.loads((trace / "rank0.pt.trace.json").read_text())["traceEvents"]
    steps = [e for e in events if e.get("name", "").startswith("ProfilerStep#")]
    assert [e["name"] for e in steps] == [f"ProfilerStep#{k}" for k in range(19)]
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in steps]
    assert _inside(events, "kernel", spans) == r["steps"]["total"]["launch.count"]


def test_hta_reads_the_kineto_trace(kineto_run):
    hta = pytest.importorskip(
        "hta.trace_analysis",
        reason="holistictraceanalysis is not installed (python/requirements-extra.txt)")
    trace, r = kineto_run
    analysis = hta.TraceAnalysis(trace_dir=str(trace), include_last_profiler_step=True)
    df = analysis.t.get_trace(0)
    symbols = analysis.t.symbol_table.get_sym_table()
    cat = df["cat"].map(lambda i: symbols[i])
    on_gpu = df["stream"].ge(0) & df["correlation"].ge(0)
    kernels = on_gpu & cat.eq("kernel")
    steps, before = r["steps"]["total"], r["before_steps"]["total"]
    # HTA's iterations are the counted steps: their kernels are the report's launches.
    assert int((kernels & df["iteration"].ge(0)).sum()) == steps["launch.count"]
    assert int(kernels.sum()) == before["launch.count"] + steps["launch.count"]
    assert int((on_gpu & cat.eq("gpu_memcpy") & df["iteration"].ge(0)).sum()) == \
        steps["h2d.count"] + steps["d2h.count"] + steps["d2d.count"]
    temporal = analysis.get_temporal_breakdown(visualize=False)
    assert list(temporal["rank"]) == [0] and (temporal["kernel_time(us)"] > 0).all()
    launches = analysis.get_cuda_kernel_launch_stats(ranks=[0], visualize=False)[0]
    assert len(launches) > steps["launch.count"]  # every launch and copy, joined to its call


MARKER = """\
import pathlib, sys
pathlib.Path(sys.argv[1]).write_text("ran")
"""


def test_an_unwritable_trace_is_exit_2_before_the_program_runs(tmp_path, capsys):
    prog, ran = _script(tmp_path, MARKER), tmp_path / "ran"
    a_file = tmp_path / "file.json"
    a_file.write_text("{}")
    for trace, fmt in ((tmp_path / "no" / "such" / "t.json", "chrome"),
                       (tmp_path, "chrome"),                # a directory
                       (a_file, "kineto"),                  # a file where a directory goes
                       ("-", "kineto")):
        assert run(["--trace", str(trace), "--trace-format", fmt, "--", prog, str(ran)]) == 2
        assert not ran.exists()
        assert "--trace" in capsys.readouterr().err
    assert run(["--trace", str(tmp_path / "t.json"), "--trace-format", "perfetto", "--",
                prog, str(ran)]) == 2


def test_a_failed_program_writes_no_trace(tmp_path):
    prog = _script(tmp_path, "import torch\ntorch.ones(2, device='sim').sum()\nraise SystemExit(5)\n")
    trace, kineto = tmp_path / "t.json", tmp_path / "k"
    assert run(["--trace", str(trace), "--", prog]) == 3
    assert run(["--trace", str(kineto), "--trace-format", "kineto", "--", prog]) == 3
    assert not trace.exists() and list(kineto.iterdir()) == []
    assert not [p for p in tmp_path.rglob("*") if ".tmp" in p.name]


def _run_ranks(tmp_path, *args):
    """run of Lightning's DDP example in a process of its own (Lightning starts rank 1 by running
    the program again)."""
    r = subprocess.run([sys.executable, "-m", "harness_sim", "run", "-q", *args, "--",
                        "lightning_ddp.py", "--max-steps", "20"],
                       cwd=REPO / "examples" / "programs", capture_output=True, text=True,
                       timeout=300, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


def test_every_rank_a_program_starts_is_on_the_chrome_trace(tmp_path):
    out, trace = tmp_path / "r.json", tmp_path / "t.json"
    _run_ranks(tmp_path, "--out", str(out), "--trace", str(trace))
    trace_check(trace)
    r = _report(out)
    events = json.loads(trace.read_text())["traceEvents"]
    # One document, a process per rank (pid = rank, as bench's ranks), each rank's steps holding
    # the launches and collectives its report variant counted.
    names = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    assert names == {0: "rank 0", 1: "rank 1"}
    for rank in (0, 1):
        mine = [e for e in events if e.get("pid") == rank]
        steps = [(e["ts"], e["ts"] + e["dur"]) for e in mine if e.get("cat") == "step"]
        assert len(steps) == 19  # 20 steps, --skip-steps 1
        counted = r[f"rank{rank}/steps"]["total"]
        assert _inside(mine, "kernel", steps) == counted["launch.count"]
        assert sum(1 for e in mine if e.get("name") == "ncclDevKernel_AllReduce"
                   and any(b <= e["ts"] <= end for b, end in steps)) == \
            counted["collective.all_reduce.count"] == 19


def test_every_rank_a_program_starts_has_its_kineto_file_and_hta_reads_them(tmp_path):
    out, trace = tmp_path / "r.json", tmp_path / "trace"
    _run_ranks(tmp_path, "--out", str(out), "--trace", str(trace), "--trace-format", "kineto")
    assert sorted(p.name for p in trace.iterdir()) == ["rank0.pt.trace.json",
                                                       "rank1.pt.trace.json"]
    trace_check(trace)
    docs = [json.loads((trace / f"rank{rank}.pt.trace.json").read_text()) for rank in (0, 1)]
    assert [d["distributedInfo"]["rank"] for d in docs] == [0, 1]
    assert {d["distributedInfo"]["world_size"] for d in docs} == {2}
    assert docs[0]["baseTimeNanoseconds"] == docs[1]["baseTimeNanoseconds"]  # rank 0's origin
    hta = pytest.importorskip(
        "hta.trace_analysis",
        reason="holistictraceanalysis is not installed (python/requirements-extra.txt)")
    analysis = hta.TraceAnalysis(trace_dir=str(trace), include_last_profiler_step=True)
    temporal = analysis.get_temporal_breakdown(visualize=False)
    assert sorted(temporal["rank"]) == [0, 1] and (temporal["kernel_time(us)"] > 0).all()
