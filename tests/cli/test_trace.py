#!/usr/bin/env python3
"""Every trace bench writes passes the validator (trace_check.py): chrome and kineto, 1 and 2
ranks on sim, and cuda's from synthetic CUPTI records (unit_tests writes those). Then what each
shows: named processes, one track order on every rank, flows, collectives as spans, numbers as
numbers; and the validator itself catches what it is for."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_check  # noqa: E402

BENCH = os.environ["BENCH"]
UNIT_TESTS = os.environ.get("UNIT_TESTS", "")  # set where the build has CUPTI


def bench(*args):
    return subprocess.run([BENCH, *args], capture_output=True, text=True, timeout=600)


def load(path):
    with open(path) as f:
        return json.load(f, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))


class Written(unittest.TestCase):
    """Each shape bench writes, run for real, then validated and read."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        one = ["-s", "resume_adam", "-d", "sim", "--variant", "resume_move_all/foreach", "--steps", "3", "-q"]
        two = ["-s", "zero_broadcast", "-d", "sim", "--nproc", "2", "--steps", "3", "-q"]
        cls.runs = {
            "chrome1": bench(*one, "--trace", os.path.join(d, "chrome1.json"),
                             "--out", os.path.join(d, "chrome1.report.json")),
            "chrome2": bench(*two, "--trace", os.path.join(d, "chrome2.json")),
            "kineto1": bench(*one, "--trace", os.path.join(d, "kineto1"), "--trace-format", "kineto"),
            "kineto2": bench(*two, "--trace", os.path.join(d, "kineto2"), "--trace-format", "kineto",
                             "--out", os.path.join(d, "kineto2.report.json")),
        }

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def docs(self, name):
        self.assertEqual(self.runs[name].returncode, 0, self.runs[name].stderr)
        files = trace_check.files_of(self.path(name if name.startswith("kineto") else name + ".json"))
        self.assertTrue(files, name)
        return {f: load(f) for f in files}

    def test_every_trace_passes_the_validator(self):
        for name in self.runs:
            for f, doc in self.docs(name).items():
                self.assertEqual(trace_check.problems(doc), [], f)

    def test_kineto_writes_a_file_per_rank_with_its_rank(self):
        self.assertEqual(sorted(os.listdir(self.path("kineto1"))), ["rank0.pt.trace.json"])
        docs = self.docs("kineto2")
        self.assertEqual(sorted(os.path.basename(f) for f in docs),
                         ["rank0.pt.trace.json", "rank1.pt.trace.json"])
        for f, doc in docs.items():
            rank = int(os.path.basename(f)[4])
            self.assertEqual(doc["distributedInfo"]["rank"], rank)
            self.assertEqual(doc["distributedInfo"]["world_size"], 2)
            self.assertEqual(doc["schemaVersion"], 1)
            cats = {e.get("cat") for e in doc["traceEvents"]}
            for cat in ("cpu_op", "cuda_runtime", "kernel", "gpu_memcpy", "user_annotation"):
                self.assertIn(cat, cats, f)
            steps = [e["name"] for e in doc["traceEvents"] if e.get("name", "").startswith("ProfilerStep")]
            self.assertEqual(steps[:2], ["ProfilerStep#0", "ProfilerStep#1"])
            nccl = [e for e in doc["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith("nccl")]
            self.assertTrue(nccl, f)
            for e in nccl:
                for key in ("Collective name", "In msg nelems", "Out msg nelems", "Group size", "dtype"):
                    self.assertIn(key, e["args"], e)
                self.assertEqual(e["args"]["Group size"], 2)

    def test_kineto_counts_are_the_reports(self):
        report = load(self.path("kineto2.report.json"))
        for f, doc in self.docs("kineto2").items():
            rank = str(doc["distributedInfo"]["rank"])
            mine = [v for s in report["scenarios"] for v in s["variants"] if v["axes"].get("rank") == rank]
            want_launches = sum(v["total"]["launch.count"] for v in mine)
            want_copies = sum(v["total"][k] for v in mine for k in ("h2d.count", "d2h.count", "d2d.count"))
            events = doc["traceEvents"]
            kernels = [e for e in events if e.get("cat") == "kernel" and not e["name"].startswith("nccl")]
            copies = [e for e in events if e.get("cat") == "gpu_memcpy"]
            self.assertEqual(len(kernels), want_launches, f)
            self.assertEqual(len(copies), want_copies, f)

    def test_chrome_processes_named_and_tracks_alike_on_every_rank(self):
        one = self.docs("chrome1")[self.path("chrome1.json")]["traceEvents"]
        names = {e["pid"]: e["args"]["name"] for e in one if e.get("name") == "process_name"}
        self.assertEqual(list(names.values()), ["bench"])
        two = self.docs("chrome2")[self.path("chrome2.json")]["traceEvents"]
        names = {e["pid"]: e["args"]["name"] for e in two if e.get("name") == "process_name"}
        self.assertEqual(names, {0: "rank 0", 1: "rank 1"})
        tracks = {0: {}, 1: {}}
        for e in two:
            if e.get("name") == "thread_name":
                tracks[e["pid"]][e["args"]["name"]] = e["tid"]
        shared = set(tracks[0]) & set(tracks[1])
        for track in ("variants", "steps", "phases", "host"):
            self.assertIn(track, shared, tracks)
        for track in shared:
            self.assertEqual(tracks[0][track], tracks[1][track], track)
        # Each rank's own device (sim:0, sim:1), its streams at the same ids.
        for stream in (7, 20):
            self.assertEqual(tracks[0]["sim 0 stream %d" % stream], tracks[1]["sim 1 stream %d" % stream])
        # Device slices on each rank's own device: sim 0 and sim 1 name different tracks.
        for pid in (0, 1):
            mine = [e for e in two if e["pid"] == pid and e["ph"] != "M"]
            collectives = [e for e in mine if e.get("cat") == "collective"]
            self.assertTrue(collectives, pid)
            self.assertTrue(all(e["ph"] == "X" and e["dur"] >= 0 for e in collectives))
            self.assertTrue(any(e["dur"] > 0 for e in collectives))

    def test_chrome_flows_join_each_launch_and_copy_to_its_slice(self):
        events = self.docs("chrome1")[self.path("chrome1.json")]["traceEvents"]
        slices = [e for e in events if e.get("cat") in ("kernel", "memcpy")]
        starts = {e["id"]: e for e in events if e["ph"] == "s"}
        finishes = {e["id"]: e for e in events if e["ph"] == "f"}
        self.assertTrue(slices)
        self.assertEqual(len(starts), len(slices))
        self.assertEqual(set(starts), set(finishes))
        memcpys = [e for e in events if e.get("cat") == "memcpy"]
        self.assertTrue(memcpys and all(isinstance(e["args"]["bytes"], int) for e in memcpys))
        # The resumed run's 3 measured steps (its uninterrupted reference run has its own).
        steps = [e["name"] for e in events if e.get("cat") == "step"]
        self.assertEqual(steps[-3:], ["step 4", "step 5", "step 6"])

    def test_chrome_counts_are_the_reports(self):
        self.assertEqual(self.runs["chrome2"].returncode, 0)
        r = bench("-s", "zero_broadcast", "-d", "sim", "--nproc", "2", "--steps", "3", "-q",
                  "--trace", self.path("c2.json"), "--out", self.path("c2.report.json"))
        self.assertEqual(r.returncode, 0, r.stderr)
        events, report = load(self.path("c2.json"))["traceEvents"], load(self.path("c2.report.json"))
        for rank in (0, 1):
            mine = [v for s in report["scenarios"] for v in s["variants"] if v["axes"].get("rank") == str(rank)]
            kernels = [e for e in events if e["pid"] == rank and e.get("cat") == "kernel"]
            collectives = [e for e in events if e["pid"] == rank and e.get("cat") == "collective"]
            self.assertEqual(len(kernels), sum(v["total"]["launch.count"] for v in mine))
            self.assertEqual(len(collectives), sum(v["total"]["collective.count"] for v in mine))

    def test_kineto_needs_a_directory(self):
        with tempfile.TemporaryDirectory() as d:
            f = os.path.join(d, "file")
            open(f, "w").close()
            r = bench("-s", "resume_adam", "-d", "sim", "--trace", f, "--trace-format", "kineto", "-q")
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("not a directory", r.stderr)
            r = bench("-s", "resume_adam", "-d", "sim", "--trace-format", "kineto", "-q")
            self.assertEqual(r.returncode, 2, r.stderr)


@unittest.skipUnless(UNIT_TESTS, "this build has no CUPTI: no synthetic CUDA traces")
class FromSyntheticCuptiRecords(unittest.TestCase):
    def test_cuda_traces_pass_the_validator(self):
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([UNIT_TESTS, "--gtest_filter=CuptiAggregator.TraceFilesFromSyntheticRecords"],
                               capture_output=True, text=True, env={**os.environ, "HARNESS_TRACE_DUMP_DIR": d},
                               timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertEqual(sorted(os.listdir(d)), ["cupti.chrome.json", "cupti.kineto.json"])
            for name in os.listdir(d):
                doc = load(os.path.join(d, name))
                self.assertEqual(trace_check.problems(doc), [], name)
                self.assertTrue(any(e["ph"] == "s" for e in doc["traceEvents"]), name)


class TheValidatorCatches(unittest.TestCase):
    def doc(self, *events):
        meta = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "p"}},
                {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "t"}},
                {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "u"}}]
        return {"traceEvents": meta + list(events)}

    def x(self, ts, dur, tid=1, **args):
        return {"ph": "X", "name": "op", "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}

    def test_a_good_document_has_no_problem(self):
        good = self.doc({"ph": "B", "name": "p", "pid": 1, "tid": 1, "ts": 0}, self.x(1, 2, bytes=4),
                        {"ph": "s", "id": 1, "cat": "c", "name": "l", "pid": 1, "tid": 1, "ts": 1},
                        self.x(2, 1, tid=2),
                        {"ph": "f", "id": 1, "cat": "c", "name": "l", "pid": 1, "tid": 2, "ts": 2, "bp": "e"},
                        {"ph": "E", "name": "p", "pid": 1, "tid": 1, "ts": 5})
        self.assertEqual(trace_check.problems(good), [])

    def test_each_problem(self):
        cases = {
            "never ends": [{"ph": "B", "name": "p", "pid": 1, "tid": 1, "ts": 0}],
            "without a B": [{"ph": "E", "name": "p", "pid": 1, "tid": 1, "ts": 0}],
            "not a number >= 0": [self.x(0, -1)],
            "not a number": [self.x("0", 1)],
            "before the previous": [self.x(5, 1), self.x(1, 1)],
            "not one each": [self.x(0, 2), {"ph": "s", "id": 3, "cat": "c", "name": "l", "pid": 1, "tid": 1, "ts": 1}],
            "in no slice": [self.x(0, 1), {"ph": "s", "id": 3, "cat": "c", "name": "l", "pid": 1, "tid": 1, "ts": 0.5},
                            {"ph": "f", "id": 3, "cat": "c", "name": "l", "pid": 1, "tid": 2, "ts": 9, "bp": "e"}],
            "not a number": [self.x(0, 1, bytes="16384")],
            "no thread_name": [self.x(0, 1, tid=7)],
        }
        for what, events in cases.items():
            found = trace_check.problems(self.doc(*events))
            self.assertTrue(any(what in p for p in found), (what, found))
        kineto = self.doc(self.x(0, 1))
        kineto.update({"schemaVersion": 1, "deviceProperties": [], "distributedInfo": {"rank": 2, "world_size": 2}})
        kineto["traceEvents"].append({"ph": "X", "cat": "kernel", "name": "k", "pid": 1, "tid": 2, "ts": 3,
                                      "dur": 1, "args": {"stream": 7, "correlation": 9, "device": 0,
                                                         "External id": 9}})
        found = trace_check.problems(kineto)
        self.assertTrue(any("distributedInfo" in p for p in found), found)
        self.assertTrue(any("no cuda_runtime call of correlation 9" in p for p in found), found)


if __name__ == "__main__":
    unittest.main()
