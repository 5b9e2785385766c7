"""HolisticTraceAnalysis reads the Kineto-shaped trace of a 2-rank sim run (issue 25): its
temporal breakdown, GPU kernel breakdown, communication/computation overlap and CUDA kernel launch
statistics work, and its figures agree with the report's (launches, copies and collectives per
rank). HTA is an optional test dependency (python/requirements-extra.txt, which
scripts/test_python.sh installs): without it this test is skipped."""
from __future__ import annotations

import json
import subprocess

import pytest

hta = pytest.importorskip(
    "hta.trace_analysis",
    reason="holistictraceanalysis is not installed (python/requirements-extra.txt)")


@pytest.fixture(scope="module")
def run(bench, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hta")
    trace_dir, report = tmp / "trace", tmp / "report.json"
    r = subprocess.run([bench, "-s", "zero_broadcast", "-d", "sim", "--nproc", "2", "--trace",
                        str(trace_dir), "--trace-format", "kineto", "--out", str(report), "-q"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    # The last step's kernels too (HTA's default drops them), so that every count is the report's.
    analysis = hta.TraceAnalysis(trace_dir=str(trace_dir), include_last_profiler_step=True)
    return analysis, json.loads(report.read_text())


def per_rank_totals(report, rank: int) -> dict:
    """The report's counts of one rank: the sum over its own variants (rank<r>/...)."""
    totals = {"launch.count": 0, "copies": 0, "collective.count": 0}
    for scenario in report["scenarios"]:
        for v in scenario["variants"]:
            if v["axes"].get("rank") != str(rank):
                continue
            t = v["total"]
            totals["launch.count"] += t["launch.count"]
            totals["copies"] += t["h2d.count"] + t["d2h.count"] + t["d2d.count"]
            totals["collective.count"] += t["collective.count"]
    return totals


def test_hta_loads_both_ranks_and_counts_what_the_report_counts(run):
    analysis, report = run
    trace = analysis.t
    assert sorted(trace.get_ranks()) == [0, 1]
    symbols = trace.symbol_table.get_sym_table()
    for rank in (0, 1):
        df = trace.get_trace(rank)
        cat = df["cat"].map(lambda i: symbols[i])
        name = df["name"].map(lambda i: symbols[i])
        on_gpu = df["stream"].ge(0) & df["correlation"].ge(0)
        nccl = on_gpu & cat.eq("kernel") & name.str.startswith("nccl")
        want = per_rank_totals(report, rank)
        got = {"launch.count": int((on_gpu & cat.eq("kernel") & ~nccl).sum()),
               "copies": int((on_gpu & cat.eq("gpu_memcpy")).sum()),
               "collective.count": int(nccl.sum()) + int(name.str.startswith("gloo:").sum())}
        print(f"rank {rank}: HTA's dataframe {got}, the report {want}")
        assert got == want
        assert want["launch.count"] > 0 and want["copies"] > 0 and want["collective.count"] > 0


def test_hta_analyses_work(run):
    analysis, report = run
    import pandas as pd
    pd.set_option("display.width", 200)
    pd.set_option("display.max_columns", 20)

    temporal = analysis.get_temporal_breakdown(visualize=False)
    print("get_temporal_breakdown:\n", temporal.to_string())
    assert list(temporal["rank"]) == [0, 1]
    assert (temporal["kernel_time(us)"] > 0).all() and (temporal["compute_time(us)"] > 0).all()
    parts = temporal["idle_time(us)"] + temporal["compute_time(us)"] + temporal["non_compute_time(us)"]
    assert (parts - temporal["kernel_time(us)"]).abs().max() < 1e-6

    by_type, by_kernel = analysis.get_gpu_kernel_breakdown(visualize=False)
    print("get_gpu_kernel_breakdown (by type):\n", by_type.to_string())
    print("get_gpu_kernel_breakdown (top kernels):\n", by_kernel.head(12).to_string())
    assert {"COMMUNICATION", "COMPUTATION"} <= set(by_type["kernel_type"])
    assert set(by_kernel[by_kernel["kernel_type"] == "COMMUNICATION"]["rank"]) == {0, 1}

    overlap = analysis.get_comm_comp_overlap(visualize=False)
    print("get_comm_comp_overlap:\n", overlap.to_string())
    assert list(overlap["rank"]) == [0, 1]
    assert overlap["comp_comm_overlap_pctg"].between(0, 100).all()

    launches = analysis.get_cuda_kernel_launch_stats(ranks=[0, 1], visualize=False)
    for rank in (0, 1):
        df = launches[rank]
        want = per_rank_totals(report, rank)
        print(f"get_cuda_kernel_launch_stats rank {rank}: {len(df)} launches (the report: "
              f"{want['launch.count']} launches + {want['copies']} copies + "
              f"{want['collective.count']} collectives)\n", df.describe().to_string())
        # Every kernel, copy and NCCL kernel, joined to the call that launched it.
        assert len(df) == want["launch.count"] + want["copies"] + want["collective.count"]
        assert (df["launch_delay"] >= 0).all()
