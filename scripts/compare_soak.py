#!/usr/bin/env python3
"""Is `bench compare` quiet on unchanged code, and does it still find a real slowdown? (Not a
ctest: it takes many minutes, and its figures are the machine's.)

  scripts/compare_soak.py [--pairs 20] [--repetitions 3] [--interleave] [--scenario all ...]
                          [--slow 'resume_adam:fresh/foreach=1.3'] [--bench build/bench/bench]

1. Runs `bench -s SCENARIO... -d sim --repetitions R` PAIRS+1 times, one after another, and
   compares each run with the next (`bench compare`, default settings): every pair is unchanged
   code, so every compare must exit 0. Tallies the exit codes and the rows by verdict.
2. Runs once more with HARNESS_TEST_SLOW_STEPS (each measured step of the named variant made
   --slow's factor slower, inside its time) and compares the last unchanged run with it: the
   variant's samples.step_time must be a regression.

With --interleave, each pair is measured as a CI job would measure two builds on one machine:
base and head processes alternate (base, head, base, head, ...: `bench --repetitions 1` each) and
`bench merge` makes each side's report, so that both sides sample the same minutes of the machine.

Prints one line per compare and a summary; exits 1 if a self-compare failed or the slowdown was not
found.
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_bench(bench, scenarios, repetitions, out, env=None):
    cmd = [bench, "--device", "sim", "--repetitions", str(repetitions), "--quiet", "--out", out]
    for s in scenarios:
        cmd += ["--scenario", s]
    started = time.monotonic()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                       env=env)
    if r.returncode != 0:
        sys.exit(f"compare_soak: {' '.join(cmd)} exited {r.returncode}: {r.stderr}")
    return time.monotonic() - started


def merge(bench, out, parts):
    r = subprocess.run([bench, "merge", out, *parts], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"compare_soak: bench merge exited {r.returncode}: {r.stderr}")


def interleaved(bench, scenarios, repetitions, base, head, head_env=None):
    """Base and head processes alternating, each side merged; returns the seconds taken."""
    seconds = 0.0
    parts = {base: [], head: []}
    for k in range(repetitions):
        for side, env in ((base, None), (head, head_env)):
            parts[side].append(f"{side}.{k}")
            seconds += run_bench(bench, scenarios, 1, parts[side][-1], env=env)
    merge(bench, base, parts[base])
    merge(bench, head, parts[head])
    return seconds


def compare(bench, base, head):
    r = subprocess.run([bench, "compare", base, head, "--format", "json"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode not in (0, 1):
        sys.exit(f"compare_soak: bench compare {base} {head} exited {r.returncode}: {r.stderr}")
    return r.returncode, json.loads(r.stdout)


def time_rows(doc, change):
    return [row for row in doc["rows"]
            if row["change"] == change and row["metric"].startswith("samples.")]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--scenario", action="append", default=[])
    ap.add_argument("--interleave", action="store_true")
    ap.add_argument("--slow", default="resume_adam:fresh/foreach=1.3")
    ap.add_argument("--bench", default=os.path.join(REPO, "build", "bench", "bench"))
    args = ap.parse_args()
    scenarios = args.scenario or ["all"]
    tallies = collections.Counter()
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        runs = []
        for i in range(args.pairs + 1):
            if args.interleave:  # each pair measured afresh, its two sides interleaved
                if i == 0:
                    continue
                base, head = os.path.join(tmp, f"base{i}.json"), os.path.join(tmp, f"head{i}.json")
                seconds = interleaved(args.bench, scenarios, args.repetitions, base, head)
                runs += [base, head]
            else:
                runs.append(os.path.join(tmp, f"run{i}.json"))
                seconds = run_bench(args.bench, scenarios, args.repetitions, runs[-1])
                if i == 0:
                    print(f"run 0: {seconds:.0f} s", flush=True)
                    continue
            code, doc = compare(args.bench, runs[-2], runs[-1])
            tallies.update({k: v for k, v in doc["tally"].items()})
            regressions = time_rows(doc, "regression")
            print(f"pair {i}/{args.pairs} ({seconds:.0f} s): exit {code}, "
                  f"{doc['tally']['regression']} regressions, "
                  f"{doc['tally']['inconclusive']} inconclusive"
                  + "".join(f"\n  {r['scenario']} {r['variant']} {r['metric']}: {r['note']}"
                            for r in regressions), flush=True)
            if code != 0:
                failed.append(i)

        target, factor = args.slow.rsplit("=", 1)
        scenario, variant = target.split(":", 1)
        slow = os.path.join(tmp, "slow.json")
        slow_env = dict(os.environ, HARNESS_TEST_SLOW_STEPS=args.slow)
        if args.interleave:
            base = os.path.join(tmp, "slow_base.json")
            interleaved(args.bench, scenarios, args.repetitions, base, slow, head_env=slow_env)
        else:
            base = runs[-1]
            run_bench(args.bench, scenarios, args.repetitions, slow, env=slow_env)
        code, doc = compare(args.bench, base, slow)
        found = [r for r in doc["rows"] if r["scenario"] == scenario and r["variant"] == variant
                 and r["metric"] == "samples.step_time"]
        verdict = found[0]["change"] if found else "absent"
        print(f"slowdown {args.slow}: {verdict} (exit {code}): "
              f"{found[0]['note'] if found else ''}")

    print(f"\nself-compares: {args.pairs - len(failed)} of {args.pairs} exit 0"
          + (f" (failed: pairs {failed})" if failed else ""))
    print("rows over all self-compares: " +
          ", ".join(f"{k} {v}" for k, v in sorted(tallies.items())))
    ok = not failed and verdict == "regression"
    print("compare_soak: " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
