#!/usr/bin/env python3
"""The layers hold: no #include goes up them, the report layer includes no Torch, and every folder
of the library says in a README what lives there and what it may include.

Layers, lowest first (harness/README.md):
  0 base       harness/errors.h, harness/interrupt.{h,cpp}, harness/device_kind.h
  1 report     harness/report/**            (no Torch headers)
  2 instrument harness/instrument/**
  3 runtime    harness/runtime/**
  4 framework  the rest of harness/ (scenario.h, measure, variant_runner, registry, pch.h)
  5 scenarios  scenarios/**, python/csrc/**  (the Python module is an adapter at this height)
  6 bench      bench/**
Usage: check_layers.py [REPO_ROOT]; exit 1 naming every include that goes up."""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), "..", ".."))
BASE = {"harness/errors.h", "harness/interrupt.h", "harness/interrupt.cpp", "harness/device_kind.h"}
NAMES = ["base", "report", "instrument", "runtime", "framework", "scenarios", "bench"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
TORCH = re.compile(r'^\s*#\s*include\s+<(ATen|c10|torch|caffe2)/', re.M)


def layer(path):
    """The layer of a repository-relative path, or None outside the layered code."""
    if path in BASE:
        return 0
    for prefix, n in (("harness/report/", 1), ("harness/instrument/", 2), ("harness/runtime/", 3),
                      ("scenarios/", 5), ("python/csrc/", 5), ("bench/", 6)):
        if path.startswith(prefix):
            return n
    if path.startswith("harness/"):
        return 4
    return None


def sources():
    for top in ("harness", "scenarios", "bench", "python/csrc"):
        for d, _, files in os.walk(os.path.join(ROOT, top)):
            for f in files:
                if f.endswith((".h", ".cpp")):
                    yield os.path.relpath(os.path.join(d, f), ROOT)


def problems():
    out = []
    for src in sorted(sources()):
        text = open(os.path.join(ROOT, src), encoding="utf-8").read()
        mine = layer(src)
        for target in INCLUDE.findall(text):
            if "/" not in target:  # a file beside it ("count_session.h")
                target = os.path.join(os.path.dirname(src), target)
            theirs = layer(target)
            if theirs is None:
                continue
            if not os.path.exists(os.path.join(ROOT, target)):
                out.append(f"{src}: includes {target}, which does not exist")
            elif theirs > mine:
                out.append(f"{src} ({NAMES[mine]}) includes {target} ({NAMES[theirs]}): "
                           "up the layers")
        if mine == 1 and TORCH.search(text):
            out.append(f"{src} (report) includes a Torch header: the report layer has no Torch")
    for top in ("harness", "scenarios", "bench"):
        for d, dirs, _ in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [x for x in dirs if not x.startswith(".")]
            if not os.path.exists(os.path.join(d, "README.md")):
                out.append(f"{os.path.relpath(d, ROOT)}/ has no README.md saying what lives there "
                           "and what it may include")
    return out


if __name__ == "__main__":
    found = problems()
    for p in found:
        print("layering:", p)
    if found:
        sys.exit(1)
    print(f"layering: {sum(1 for _ in sources())} files, no include goes up the layers")
