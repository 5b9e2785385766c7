#!/usr/bin/env python3
"""Soak and determinism check of bench on sim (not a ctest: it takes minutes).

  scripts/soak.py [--runs 50] [--steps 5] [--bench build/bench/bench] [--scenario NAME ...]

1. Runs every scenario (or the ones named) --runs times on sim and checks that every count --
   per_step, total and phase counts and bytes, memory levels, launches by op, sync sites, status and
   correctness -- is identical in every run. Times are left out: they are measurements, not counts.
2. Runs resume_adam with 10x and 100x the steps and checks that peak RSS grows by no more than what
   the report's own data needs (the samples kept per step) plus a margin: no leak per step.
3. After every run: nothing left in the run's private TMPDIR, no bench process left behind.

Prints a summary with the figures; exits 1 if any check failed.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIME_KEYS = ("time.",)  # phase keys that are measurements
MEMORY_KEYS = ("memory.", "host_memory.")  # levels: checked apart (see split_memory)


def split_memory(counts):
    """(events, memory): the counting contract's events and bytes, and the memory levels."""
    events, memory = {}, {}
    for variant, c in counts.items():
        e = dict(c)
        m = {}
        for part in ("per_step", "total"):
            if isinstance(c.get(part), dict):
                e[part] = {k: x for k, x in c[part].items() if not k.startswith(MEMORY_KEYS)}
                m[part] = {k: x for k, x in c[part].items() if k.startswith(MEMORY_KEYS)}
        e["phases"] = {p: {k: x for k, x in pc.items() if not k.startswith(MEMORY_KEYS)}
                       for p, pc in c["phases"].items()}
        m["phases"] = {p: {k: x for k, x in pc.items() if k.startswith(MEMORY_KEYS)}
                       for p, pc in c["phases"].items()}
        events[variant], memory[variant] = e, m
    return events, memory


def counts_of(report):
    """Everything in a report that must not change between identical runs on sim."""
    out = {}
    units = report.get("measurements", {})

    def untimed(measurements):  # times (unit ns: phase times, sync waits) are not counts
        return {k: x for k, x in (measurements or {}).items()
                if not k.startswith(TIME_KEYS) and units.get(k, {}).get("unit") != "ns"}

    for s in report["scenarios"]:
        for v in s["variants"]:
            key = f'{s["name"]}/{v["name"]}'
            phases = {p: untimed(c) for p, c in v.get("phases", {}).items()}
            sites = [{k: x for k, x in site.items() if k != "wait_ns"}
                     for site in v.get("sync_sites", [])]
            out[key] = {"status": v.get("status"), "measured_steps": v.get("measured_steps"),
                        "per_step": untimed(v.get("per_step")), "total": untimed(v.get("total")),
                        "phases": phases,
                        "launches_by_op": v.get("launches_by_op"),
                        "sync_sites": sites,
                        "correctness": (v.get("correctness") or {}).get("passed")}
    return out


def differences(a, b, path=""):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            yield from differences(a.get(k), b.get(k), f"{path}.{k}" if path else k)
    elif a != b:
        yield f"{path}: {a!r} != {b!r}"


def bench_processes(bench):
    out = subprocess.run(["pgrep", "-f", bench], capture_output=True, text=True).stdout
    return [int(p) for p in out.split() if int(p) != os.getpid()]


def run_bench(bench, args, tmpdir):
    """Runs bench; returns (exit code, peak RSS in KiB, seconds, stderr)."""
    os.makedirs(tmpdir, exist_ok=True)
    env = dict(os.environ, TMPDIR=tmpdir)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    t0 = time.time()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([bench, *args], stdout=subprocess.DEVNULL, stderr=err,
                                stdin=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return proc.returncode, usage.ru_maxrss, time.time() - t0, err.read().decode(errors="replace")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--bench", default=os.path.join(REPO, "build", "bench", "bench"))
    ap.add_argument("--scenario", action="append", default=[])
    o = ap.parse_args()
    bench = os.path.abspath(o.bench)
    if not os.access(bench, os.X_OK):
        sys.exit(f"soak: no bench binary at {bench} (build first: ./scripts/setup.sh)")
    scenarios = o.scenario or subprocess.run([bench, "--list"], capture_output=True, text=True,
                                             check=True).stdout.split("\n")
    scenarios = [s for s in scenarios if s and not s.startswith(" ")]
    work = tempfile.mkdtemp(prefix="soak-")
    failures = []
    summary = []
    memory_diffs = {}  # scenario -> memory levels that differed from run 1 in some run
    try:
        # 1. Determinism, and nothing left behind.
        for scenario in scenarios:
            first = first_memory = None
            seconds = []
            for i in range(o.runs):
                out = os.path.join(work, "report.json")
                tmpdir = os.path.join(work, "tmp")
                code, _, secs, err = run_bench(bench, ["-s", scenario, "-d", "sim", "--steps",
                                                       str(o.steps), "-q", "--out", out], tmpdir)
                seconds.append(secs)
                if code != 0:
                    failures.append(f"{scenario} run {i + 1}: exit {code}: {err.strip()[-400:]}")
                    break
                if os.listdir(tmpdir):
                    failures.append(f"{scenario} run {i + 1}: left {os.listdir(tmpdir)} in TMPDIR")
                left = bench_processes(bench)
                if left:
                    failures.append(f"{scenario} run {i + 1}: bench processes left: {left}")
                with open(out) as f:
                    events, memory = split_memory(counts_of(json.load(f)))
                if first is None:
                    first, first_memory = events, memory
                else:
                    diff = list(differences(first, events))
                    if diff:
                        failures.append(f"{scenario} run {i + 1} differs from run 1: " +
                                        "; ".join(diff[:5]) + (" ..." if len(diff) > 5 else ""))
                        break
                    for d in differences(first_memory, memory):
                        memory_diffs.setdefault(scenario, set()).add(d.split(":")[0])
                print(f"\r[soak] {scenario}: {i + 1}/{o.runs} runs", end="", file=sys.stderr,
                      flush=True)
            print(file=sys.stderr)
            values = sum(len(json.dumps(v)) for v in (first or {}).values())
            summary.append(f"{scenario}: {len(seconds)} runs of {len(first or {})} variants "
                           f"(--steps {o.steps}), counts identical: "
                           f"{'yes' if not any(f.startswith(scenario + ' ') for f in failures) else 'NO'}"
                           f"; {min(seconds):.1f}-{max(seconds):.1f} s a run ({values} bytes of counts)"
                           f"; memory levels that varied: {len(memory_diffs.get(scenario, ()))}")
            for key in sorted(memory_diffs.get(scenario, ()))[:6]:
                summary.append(f"    varied: {key}")

        # 2. Peak RSS against the number of steps (resume_adam, one variant).
        rss = {}
        for steps in (o.steps * 20, o.steps * 200, o.steps * 2000):
            out = os.path.join(work, "rss.json")
            code, kib, secs, err = run_bench(bench, ["-s", "resume_adam", "-d", "sim", "-v",
                                                     "fresh/foreach", "--steps", str(steps), "-q",
                                                     "--out", out], os.path.join(work, "tmp"))
            if code != 0:
                failures.append(f"rss run with --steps {steps}: exit {code}: {err[-400:]}")
                break
            with open(out) as f:
                report = json.load(f)
            samples = sum(len(s) for sc in report["scenarios"] for v in sc["variants"]
                          for s in v.get("samples", {}).values())
            rss[steps] = (kib, samples, secs)
            summary.append(f"resume_adam fresh/foreach --steps {steps}: peak RSS {kib / 1024:.1f} "
                           f"MiB, {samples} samples in the report, {secs:.1f} s")
        if len(rss) == 3:
            (s0, (k0, n0, _)), _, (s2, (k2, n2, _)) = sorted(rss.items())
            grown_kib = k2 - k0
            # What the data needs: each sample is a double in a vector and a number in the JSON
            # text and its parsed tree (about 100 bytes in all); allow 2x that plus 16 MiB.
            allowed_kib = 2 * (n2 - n0) * 100 / 1024 + 16 * 1024
            summary.append(f"peak RSS grew {grown_kib / 1024:.1f} MiB from {s0} to {s2} steps "
                           f"(allowed {allowed_kib / 1024:.1f} MiB for {n2 - n0} more samples)")
            if grown_kib > allowed_kib:
                failures.append(f"peak RSS grows with the steps: +{grown_kib} KiB from {s0} to "
                                f"{s2} steps, more than the {allowed_kib:.0f} KiB the data needs")
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print("\n".join(summary))
    if failures:
        print("\nFAILED:\n  " + "\n  ".join(failures))
        return 1
    print("\nsoak: every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
