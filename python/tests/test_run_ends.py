"""python -m harness_sim run, however the program ends (issue 43): os._exit, a child it forked,
a rank that died, a signal while it is inside a C++ call; and another thread's counts.

Each program runs in a process of its own (os._exit and fork do not belong in pytest's). The
timeouts are hang guards only: what each test checks does not depend on timing."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from harness_sim._run import main as run

STEPS = """\
import torch
model = torch.nn.Linear(8, 2).to("sim")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
def steps(n):
    for _ in range(n):
        model(torch.ones(4, 8, device="sim")).sum().backward()
        opt.step()
        opt.zero_grad()
        model.weight.sum().item()  # one sync per step
"""

HANG_GUARD_S = 240


def _script(tmp_path, text: str, name: str = "prog.py") -> str:
    path = tmp_path / name
    path.write_text(STEPS + textwrap.dedent(text))
    return str(path)


def _run(tmp_path, *args, **kwargs) -> subprocess.CompletedProcess:
    """`python -m harness_sim run ARGS` in tmp_path, its TMPDIR there too; returns once the run
    and every process holding its output (a forked child) have ended."""
    return subprocess.run([sys.executable, "-m", "harness_sim", "run", *args], cwd=tmp_path,
                          env=dict(os.environ, TMPDIR=str(tmp_path)), capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=HANG_GUARD_S, **kwargs)


def _gate(tmp_path, max_syncs: int) -> str:
    rule = {"name": f"at most {max_syncs} syncs per step", "scenario": "prog",
            "variant": "steps", "metric": "per_step.sync.count", "max": max_syncs}
    path = tmp_path / "gate.json"
    path.write_text(json.dumps({"gate_version": 1, "rules": [rule]}))
    return str(path)


def _measured_steps(path) -> int:
    (scenario,) = json.loads(path.read_text())["scenarios"]
    return {v["name"]: v for v in scenario["variants"]}["steps"]["measured_steps"]


def _scratch_left(tmp_path) -> list[str]:
    return [p.name for p in tmp_path.iterdir() if p.name.startswith("harness_sim")]


def test_os_exit_0_writes_the_report_and_the_gates_decide(tmp_path, bench):
    # before: exit 0, no report, no message, the gate never evaluated
    prog = _script(tmp_path, "steps(4)\nimport os\nos._exit(0)\n")
    out = tmp_path / "r.json"
    r = _run(tmp_path, "--bench", bench, "--gate", _gate(tmp_path, 0), "--out", str(out), "--",
             prog)
    assert r.returncode == 1, r.stderr  # as after sys.exit(0): the gate fails
    assert _measured_steps(out) == 3 and "harness_sim run: prog: 4 steps, 3 counted" in r.stderr
    out.unlink()
    r = _run(tmp_path, "--bench", bench, "--gate", _gate(tmp_path, 5), "--out", str(out), "--",
             prog)
    assert r.returncode == 0 and _measured_steps(out) == 3, r.stderr
    assert _scratch_left(tmp_path) == []


def test_os_exit_non_zero_fails_the_program_and_writes_nothing(tmp_path):
    # before: exit 5, no message (3 is promised for a program that failed)
    out = tmp_path / "r.json"
    r = _run(tmp_path, "--out", str(out), "--", _script(tmp_path, "steps(3)\nimport os\n"
                                                                  "os._exit(5)\n"))
    assert r.returncode == 3
    assert "the program exited with status 5 (os._exit)" in r.stderr
    assert not out.exists() and _scratch_left(tmp_path) == []


def test_os_exit_on_another_thread_says_run_cannot_finish(tmp_path):
    prog = _script(tmp_path, """\
        import os, threading, time
        steps(2)
        threading.Thread(target=os._exit, args=(0,), name="quitter").start()
        time.sleep(600)
        """)
    out = tmp_path / "r.json"
    r = _run(tmp_path, "--out", str(out), "--", prog)
    assert r.returncode == 3
    assert "os._exit(0) on a thread other than the main one (quitter)" in r.stderr
    assert "nothing is written" in r.stderr and not out.exists()


def test_an_atexit_os_exit_0_does_not_turn_a_failed_gate_green(tmp_path, bench):
    prog = _script(tmp_path, "import atexit, os\natexit.register(os._exit, 0)\nsteps(3)\n")
    r = _run(tmp_path, "--bench", bench, "--gate", _gate(tmp_path, 0), "--", prog)
    assert r.returncode == 1, r.stderr


FORKS = """\
import multiprocessing, os, sys, time
steps(3)
# os._exit in children the program forks is theirs: a status of their own, no report
pid = os.fork()
if pid == 0:
    os._exit(7)
assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7
worker = multiprocessing.get_context("fork").Process(target=print, args=("worker ran",))
worker.start()
worker.join()
assert worker.exitcode == 0
# A child that reaches the end of the script once the run that started the program has ended
parent = os.getpid()
if os.fork() == 0:
    deadline = time.monotonic() + 120
    while os.getppid() == parent and time.monotonic() < deadline:
        time.sleep(0.05)
    print("child reached the end", flush=True)
else:
    steps(3)
"""


def test_only_the_process_run_started_writes(tmp_path):
    # before: the child replaced the report (6 steps -> 3) and printed a second summary
    out = tmp_path / "r.json"
    r = _run(tmp_path, "--out", str(out), "--", _script(tmp_path, FORKS))
    assert r.returncode == 0, r.stderr
    assert "worker ran" in r.stdout and "child reached the end" in r.stdout
    assert r.stderr.count("harness_sim run: prog:") == 1, r.stderr
    assert _measured_steps(out) == 5  # the parent's 6 steps, --skip-steps 1
    assert _scratch_left(tmp_path) == []


STUCK = """\
import datetime, pathlib, sys
import torch.distributed as dist
store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
pathlib.Path(sys.argv[1]).write_text("waiting")
# a call into C++ that does not return to Python, as a rendezvous with a rank that died
store.wait(["never"], datetime.timedelta(seconds=600))
"""


def _wait_for(path, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + HANG_GUARD_S
    while not path.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert path.exists(), proc.communicate(timeout=10)


def test_sigterm_ends_a_program_inside_a_cpp_call(tmp_path):
    # before: the handler waited for the call to return (torchrun SIGKILLs 30 s later)
    ready, out = tmp_path / "ready", tmp_path / "r.json"
    proc = subprocess.Popen([sys.executable, "-m", "harness_sim", "run", "--out", str(out), "--",
                             _script(tmp_path, STUCK), str(ready)], cwd=tmp_path,
                            env=dict(os.environ, TMPDIR=str(tmp_path)), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(ready, proc)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=HANG_GUARD_S)
    finally:
        proc.kill()
    assert proc.returncode == 143, err
    assert "SIGTERM; the program did not end within" in err
    assert not out.exists() and _scratch_left(tmp_path) == []


DEAD_RANK = """\
import datetime, os, subprocess, sys
import torch.distributed as dist
from harness_sim._frameworks import active_run
if os.environ.get("LOCAL_RANK") == "1":
    os.kill(os.getpid(), 9)  # rank 1 dies, as a rank SIGKILLed does
store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
ranks = active_run.started_ranks()  # rank 1 started as Lightning's DDP launcher does, under run
ranks.procs.append(subprocess.Popen(ranks.command([sys.executable, __file__]),
                                    env=dict(os.environ, LOCAL_RANK="1")))
store.wait(["rank 1 never comes"], datetime.timedelta(seconds=600))  # as in a rendezvous
"""


def test_a_started_rank_that_dies_ends_the_run_naming_it(tmp_path):
    # before: rank 0 waited inside the rendezvous for as long as its timeout
    out = tmp_path / "r.json"
    r = _run(tmp_path, "--out", str(out), "--", _script(tmp_path, DEAD_RANK))
    assert r.returncode == 3, r.stderr
    assert "rank 1 (started by the program) was killed by SIGKILL while the program ran" in \
        r.stderr
    assert not out.exists() and _scratch_left(tmp_path) == []


RANK_0_DIES = """\
import datetime, os, pathlib, subprocess, sys
import torch.distributed as dist
from harness_sim._frameworks import active_run
store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
if os.environ.get("LOCAL_RANK") == "1":
    pathlib.Path(sys.argv[1]).write_text(str(os.getpid()))
else:
    ranks = active_run.started_ranks()
    ranks.procs.append(subprocess.Popen(ranks.command([sys.executable, __file__, sys.argv[1]]),
                                        env=dict(os.environ, LOCAL_RANK="1")))
store.wait(["never"], datetime.timedelta(seconds=600))
"""


def test_a_started_rank_ends_when_rank_0_is_killed(tmp_path):
    rank1 = tmp_path / "rank1.pid"
    proc = subprocess.Popen([sys.executable, "-m", "harness_sim", "run", "--",
                             _script(tmp_path, RANK_0_DIES), str(rank1)], cwd=tmp_path,
                            env=dict(os.environ, TMPDIR=str(tmp_path)), stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(rank1, proc)
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=HANG_GUARD_S)  # until rank 1, which shares it, ends
    finally:
        proc.kill()
    assert "the process that started this rank" in err and "ended while the program ran" in err
    deadline = time.monotonic() + HANG_GUARD_S  # rank 0's remover runs once rank 0 is gone
    while _scratch_left(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _scratch_left(tmp_path) == []


THREADS = """\
import threading
go, done = threading.Event(), threading.Event()
def worker():  # no phase of its own
    go.wait()
    for _ in range(100):
        model.weight.sum().item()
    done.set()
threading.Thread(target=worker).start()
with torch.profiler.record_function("main_phase"):
    steps(1)
    go.set()
    done.wait()
steps(2)
"""


def test_another_threads_syncs_are_not_in_the_main_threads_phase(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert run(["--skip-steps", "0", "--out", str(out), "--", _script(tmp_path, THREADS)]) == 0
    (scenario,) = json.loads(out.read_text())["scenarios"]
    steps = {v["name"]: v for v in scenario["variants"]}["steps"]
    by_phase: dict = {}
    for site in steps["sync_sites"]:
        if site["op"] == "aten::_local_scalar_dense":
            by_phase[site["phase"]] = by_phase.get(site["phase"], 0) + site["count"]
    # main_phase holds the main thread's one item(); the worker's 100 are unphased, with the
    # main thread's item() after the second step (the one after the third and last step is in
    # no step's window)
    assert by_phase == {"main_phase": 1, "(none)": 100 + 1}
