#!/usr/bin/env python3
"""A validator of the trace files bench writes (Chrome trace-event JSON, and the Kineto shape).

    python3 trace_check.py FILE_OR_DIRECTORY...    # exit 1 and one line per problem

Checks every event of a document:
  - "ts" (and "dur" of X events) are numbers, and dur >= 0;
  - B/E are balanced per thread (pid, tid), each E closing the innermost B of its name;
  - events are in time order per thread;
  - flows are paired: one "s" and one "f" per (cat, id), the "f" not before the "s", each bound to
    a slice of its thread (s: the slice that encloses it; f with bp "e": the one that encloses it);
  - numeric args are numbers, not strings ("bytes": "16384" is a problem);
  - every process and thread used is named (process_name, thread_name);
and, in the Kineto shape (a document with schemaVersion): distributedInfo's rank and world size,
device work (kernel, gpu_memcpy, gpu_memset) with integer stream, correlation, device and External
id, each correlated to a cuda_runtime call of the same document, and ProfilerStep#N names.
"""
from __future__ import annotations

import json
import math
import os
import re
import sys
from collections import defaultdict

# Args whose values are names that may look like numbers (a process group's uid is "0").
STRING_ARGS = {"Process Group Name", "Process Group Description", "name", "phase", "op"}
NUMBER_RE = re.compile(r"^-?\d+(\.\d+)?([eE][-+]?\d+)?$")
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def problems(doc) -> list[str]:
    out: list[str] = []
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return ["not a trace: no traceEvents list"]
    events = doc["traceEvents"]
    named_processes, named_threads = set(), set()
    used_threads = set()
    last_ts: dict = {}
    stacks: dict = defaultdict(list)
    slices: dict = defaultdict(list)  # (pid, tid) -> [(begin, end)]
    flows: dict = defaultdict(lambda: {"s": [], "f": []})
    for i, e in enumerate(events):
        where = f"event {i} ({e.get('ph')} {e.get('name')!r})"
        ph = e.get("ph")
        if ph not in {"B", "E", "X", "i", "I", "s", "t", "f", "M", "C"}:
            out.append(f"{where}: unknown ph")
            continue
        if "pid" not in e or "tid" not in e:
            out.append(f"{where}: no pid/tid")
            continue
        track = (e["pid"], e["tid"])
        if ph == "M":
            if e.get("name") == "process_name":
                named_processes.add(e["pid"])
            if e.get("name") == "thread_name":
                named_threads.add(track)
            continue
        used_threads.add(track)
        ts = e.get("ts")
        if not is_number(ts):
            out.append(f"{where}: ts {ts!r} is not a number")
            continue
        if ts < last_ts.get(track, -math.inf):
            out.append(f"{where}: ts {ts} before the previous event of thread {track} ({last_ts[track]})")
        last_ts[track] = max(ts, last_ts.get(track, -math.inf))
        for key, value in (e.get("args") or {}).items():
            if isinstance(value, str) and key not in STRING_ARGS and NUMBER_RE.match(value):
                out.append(f"{where}: arg {key!r} is the string {value!r}, not a number")
            if isinstance(value, float) and not math.isfinite(value):
                out.append(f"{where}: arg {key!r} is not finite")
        if ph == "X":
            dur = e.get("dur")
            if not is_number(dur) or dur < 0:
                out.append(f"{where}: dur {dur!r} is not a number >= 0")
            else:
                slices[track].append((ts, ts + dur))
        elif ph == "B":
            stacks[track].append((e.get("name"), ts))
        elif ph == "E":
            if not stacks[track]:
                out.append(f"{where}: E without a B on thread {track}")
            else:
                name, begin = stacks[track].pop()
                if "name" in e and e["name"] != name:
                    out.append(f"{where}: E closes {e['name']!r} but the innermost B is {name!r}")
                slices[track].append((begin, ts))
        elif ph in ("s", "f"):
            if "id" not in e:
                out.append(f"{where}: flow without an id")
            else:
                flows[(e.get("cat"), e["id"])][ph].append((track, ts, e.get("bp")))
    for track, stack in stacks.items():
        for name, _ in stack:
            out.append(f"thread {track}: B {name!r} never ends")

    def enclosed(track, ts) -> bool:
        return any(b <= ts <= end for b, end in slices.get(track, []))

    for (cat, fid), ends in flows.items():
        if len(ends["s"]) != 1 or len(ends["f"]) != 1:
            out.append(f"flow {cat} {fid}: {len(ends['s'])} start(s) and {len(ends['f'])} finish(es), not one each")
            continue
        (s_track, s_ts, _), (f_track, f_ts, bp) = ends["s"][0], ends["f"][0]
        if f_ts < s_ts:
            out.append(f"flow {cat} {fid}: finishes ({f_ts}) before it starts ({s_ts})")
        if not enclosed(s_track, s_ts):
            out.append(f"flow {cat} {fid}: its start at {s_ts} is in no slice of thread {s_track}")
        if bp == "e" and not enclosed(f_track, f_ts):
            out.append(f"flow {cat} {fid}: its finish (bp e) at {f_ts} is in no slice of thread {f_track}")
    for pid in sorted({t[0] for t in used_threads} - named_processes, key=str):
        out.append(f"process {pid} has no process_name")
    for track in sorted(used_threads - named_threads, key=str):
        out.append(f"thread {track} has no thread_name")
    if "schemaVersion" in doc:
        out += kineto_problems(doc)
    return out


def kineto_problems(doc) -> list[str]:
    out: list[str] = []
    info = doc.get("distributedInfo")
    if not isinstance(info, dict) or not isinstance(info.get("rank"), int) or \
            not isinstance(info.get("world_size"), int) or not 0 <= info["rank"] < info["world_size"]:
        out.append(f"distributedInfo {info!r}: no rank in [0, world_size)")
    if not isinstance(doc.get("deviceProperties"), list):
        out.append("no deviceProperties list")
    calls = {e["args"]["correlation"] for e in doc["traceEvents"]
             if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    for i, e in enumerate(doc["traceEvents"]):
        if e.get("ph") != "X":
            continue
        args = e.get("args", {})
        if e.get("cat") in DEVICE_CATS:
            for key in ("stream", "correlation", "device", "External id"):
                if not isinstance(args.get(key), int):
                    out.append(f"event {i} ({e['cat']} {e['name']!r}): arg {key!r} is {args.get(key)!r}, not an integer")
            if args.get("correlation", 0) > 0 and args.get("correlation") not in calls:
                out.append(f"event {i} ({e['cat']} {e['name']!r}): no cuda_runtime call of correlation {args.get('correlation')}")
        if e.get("name", "").startswith("ProfilerStep") and not re.match(r"^ProfilerStep#\d+$", e["name"]):
            out.append(f"event {i}: step name {e['name']!r} is not ProfilerStep#N")
    return out


def files_of(path: str) -> list[str]:
    if os.path.isdir(path):
        return sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".json"))
    return [path]


def main(argv: list[str]) -> int:
    bad = 0
    for path in argv:
        for name in files_of(path):
            with open(name) as f:
                found = problems(json.load(f))
            for p in found:
                print(f"{name}: {p}")
            bad += len(found)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
