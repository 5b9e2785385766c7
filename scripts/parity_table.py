#!/usr/bin/env python3
"""Parity of a `cuda` report with a `sim` report of the same scenarios.

    scripts/parity_table.py CUDA.json SIM.json [--markdown OUT.md]

For each variant found in both reports: H2D / D2H / D2D copies and syncs per measured step must be
equal (the counting contract, DESIGN.md); launches are shown side by side with their ratio, since a
CUDA op may issue zero or several kernels. Prints a markdown table.

Exit codes: 0 every compared count is equal, 1 some differ (named on stderr), 2 bad input (a file
that is missing or not a harness report, a report whose counts were not measured, nothing to
compare).
"""
import argparse
import json
import math
import sys

# Per-step counts that must be equal on cuda and sim.
PARITY = ("h2d.count", "h2d.bytes", "d2h.count", "d2h.bytes", "d2d.count", "sync.count")


class BadInput(Exception):
    pass


def load(path):
    try:
        with open(path) as f:
            report = json.load(f)
    except OSError as e:
        raise BadInput("%s: %s" % (path, e.strerror))
    except json.JSONDecodeError as e:
        raise BadInput("%s: not JSON (%s)" % (path, e))
    if not isinstance(report, dict) or "schema_version" not in report or "scenarios" not in report:
        raise BadInput("%s: not a harness report (no schema_version / scenarios)" % path)
    status = report.get("provenance", {}).get("instrument_status")
    if status != "ok":
        raise BadInput("%s: instrument status is %r: its counts were not measured" % (path, status))
    return report


def variants(report):
    out = {}
    for scenario in report["scenarios"]:
        for v in scenario["variants"]:
            if v.get("status") == "ok" and v.get("per_step"):
                out[(scenario["name"], v["name"])] = v
    return out


def fmt(x):
    if x is None:
        return "null"
    return str(int(x)) if float(x).is_integer() else "%.2f" % x


def compare(cuda_report, sim_report):
    """Returns (markdown lines, list of mismatches)."""
    cuda, sim = variants(cuda_report), variants(sim_report)
    common = sorted(set(cuda) & set(sim))
    if not common:
        raise BadInput("the reports have no scenario variant in common")
    p = cuda_report["provenance"]
    lines = [
        "Parity on %s (%s, LibTorch %s, CUDA %s) vs sim: per measured step" % (
            p.get("device_name", "?"), p.get("instrument", "?"), p.get("libtorch_version", "?"),
            p.get("cuda_version", "?")),
        "",
        "| scenario | variant | H2D | D2H | D2D | syncs | launches cuda | launches sim | ratio |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    mismatches = []
    for key in common:
        c, s = cuda[key]["per_step"], sim[key]["per_step"]
        cells = []
        for metric in ("h2d.count", "d2h.count", "d2d.count", "sync.count"):
            same = c.get(metric) == s.get(metric)
            cells.append(fmt(c.get(metric)) if same else
                         "**%s vs %s**" % (fmt(c.get(metric)), fmt(s.get(metric))))
        for metric in PARITY:
            if c.get(metric) != s.get(metric):
                mismatches.append("%s %s: %s cuda %s, sim %s" % (
                    key[0], key[1], metric, fmt(c.get(metric)), fmt(s.get(metric))))
        lc, ls = c.get("launch.count"), s.get("launch.count")
        ratio = "%.2f" % (lc / ls) if lc is not None and ls else "n/a"
        lines.append("| %s | %s | %s | %s | %s | %s |" % (
            key[0], key[1], " | ".join(cells), fmt(lc), fmt(ls), ratio))
    only = sorted(set(cuda) ^ set(sim))
    if only:
        lines += ["", "In one report only: " + ", ".join("%s %s" % k for k in only)]
    return lines, mismatches


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cuda_report")
    parser.add_argument("sim_report")
    parser.add_argument("--markdown", help="also write the table to this file")
    args = parser.parse_args(argv)
    try:
        lines, mismatches = compare(load(args.cuda_report), load(args.sim_report))
    except BadInput as e:
        print("parity_table: error: %s" % e, file=sys.stderr)
        return 2
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    for m in mismatches:
        print("parity_table: differs: " + m, file=sys.stderr)
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
