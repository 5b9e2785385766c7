#!/usr/bin/env python3
"""Writes tests/report/fixtures/otava_change_points.json: fixed series and the change points that
apache-otava's own E-Divisive with a t-test finds in them (otava.analysis.compute_change_points,
the function `otava analyze` calls). ctest's report_tests compare the C++ implementation
(harness/report/history/change_points.h) against it.

apache-otava is not in python/requirements.txt: it pulls in BigQuery, Postgres and Slack clients
the harness has no use for. Run this in a scratch environment when the series or Otava change:

    python3 -m venv /tmp/otava && /tmp/otava/bin/pip install apache-otava==0.8.0
    /tmp/otava/bin/python scripts/otava_fixture.py tests/report/fixtures/otava_change_points.json
"""
import json
import math
import random
import sys
from importlib.metadata import version

from otava.analysis import compute_change_points


def noise(seed, n, mean=0.0, sigma=1.0):
    rng = random.Random(seed)
    return [round(rng.gauss(mean, sigma), 6) for _ in range(n)]


def series():
    """(name, values, options): each a pattern the history check must handle."""
    out = []
    # The case: a 1.5-sigma shift at index 30 of 60.
    out.append(("shift_1.5_sigma_at_30", noise(1, 30, 100, 1) + noise(2, 30, 101.5, 1), {}))
    # Step times in ns: three levels over 150 runs (several windows).
    out.append(("three_levels_150", noise(3, 50, 2.0e6, 4e4) + noise(4, 60, 2.3e6, 4e4) +
                noise(5, 40, 2.1e6, 4e4), {}))
    # No change: 100 runs of noise.
    out.append(("noise_100", noise(6, 100, 50, 2), {}))
    # A short history with a large jump.
    out.append(("short_jump", [10.0, 10.2, 9.9, 10.1, 15.0, 15.2, 14.9, 15.1], {}))
    # A slow drift then a step.
    drift = [100 + 0.05 * i + x for i, x in enumerate(noise(7, 80, 0, 0.5))]
    out.append(("drift_then_step", drift + noise(8, 40, 108, 0.5), {}))
    # The variance changes, the mean barely does.
    out.append(("variance_change", noise(9, 50, 10, 0.1) + noise(10, 50, 10.05, 2), {}))
    # Many small steps, judged with a minimum magnitude of 5 %.
    steps = []
    for k, level in enumerate([100, 103, 110, 111, 125]):
        steps += noise(20 + k, 25, level, 1)
    out.append(("small_steps_min_magnitude", steps, {"min_magnitude": 0.05}))
    # A narrower window and a looser threshold.
    out.append(("window_20_p_0.01", noise(30, 40, 5, 0.3) + noise(31, 40, 5.4, 0.3),
                {"window": 20, "max_pvalue": 0.01}))
    # Counts (exact, piecewise constant): the t-test sees zero variance.
    out.append(("constant_steps", [4.0] * 12 + [6.0] * 12 + [5.0] * 6, {}))
    return out


def main():
    cases = []
    for name, values, opts in series():
        options = {"window": 50, "max_pvalue": 0.001, "min_magnitude": 0.0, **opts}
        points, weak = compute_change_points(list(values), window_len=options["window"],
                                             max_pvalue=options["max_pvalue"],
                                             min_magnitude=options["min_magnitude"])

        def described(cp):
            p = float(cp.stats.pvalue)
            return {"index": int(cp.index), "pvalue": None if math.isnan(p) else p,
                    "mean_before": float(cp.stats.mean_1), "mean_after": float(cp.stats.mean_2)}

        cases.append({"name": name, "options": options, "series": values,
                      "change_points": [described(cp) for cp in points],
                      "weak_change_points": [int(cp.index) for cp in weak]})
    doc = {"generator": "scripts/otava_fixture.py",
           "otava": "apache-otava " + version("apache-otava"),
           "function": "otava.analysis.compute_change_points", "cases": cases}
    with open(sys.argv[1], "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
