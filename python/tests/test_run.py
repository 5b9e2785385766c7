"""python -m harness_sim run: unmodified programs counted per step (issue 24)."""
from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import REPO, site_counts
from harness_sim._run import main as run

PROGRAMS = REPO / "examples" / "programs"

LOOP = """\
import sys, torch
model = torch.nn.Linear(8, 2).to("sim")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
steps = int(sys.argv[1])
for i in range(steps):
    with torch.profiler.record_function("forward"):
        loss = model(torch.randn(16, 8).to("sim")).pow(2).mean()
    torch.cuda.nvtx.range_push("backward")
    loss.backward()
    torch.cuda.nvtx.range_pop()
    opt.step()
    opt.zero_grad()
    print(loss.item())
print("done", sys.argv[1:])
"""


def _script(tmp_path, text: str, name: str = "prog.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def _report(path) -> dict:
    report = json.loads(open(path).read())
    (scenario,) = report["scenarios"]
    return {v["name"]: v for v in scenario["variants"]} | {"_scenario": scenario}


@pytest.mark.release
def test_steps_are_optimizer_steps_and_windows_end_at_them(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert run(["--out", str(out), "--", _script(tmp_path, LOOP), "5"]) == 0
    assert "done ['5']" in capsys.readouterr().out  # sys.argv as `python prog.py 5` has it
    r = _report(out)
    steps = r["steps"]
    assert r["_scenario"]["name"] == "prog" and steps["measured_steps"] == 4  # --skip-steps 1
    # A window ends at optimizer.step(): step i's loss.item() is in window i+1, and the last one
    # follows the last step: windows 2..5 hold the item() of steps 1..4, never step 5's.
    assert steps["total"]["sync.count"] == 4 + 4      # 4 blocking H2D copies + 4 item()
    assert steps["total"]["d2h.count"] == 4
    sites = site_counts(steps, "phase", "op", "reason")
    assert sites == {("(none)", "aten::_local_scalar_dense", "item"): 4,
                     ("forward", "aten::copy_", "blocking copy H2D"): 4}
    # record_function and NVTX ranges are phases, and so is torch.optim's own record_function.
    assert {"forward", "backward", "Optimizer.step#SGD.step",
            "Optimizer.zero_grad#SGD.zero_grad"} <= set(steps["phases"])
    assert steps["phases"]["backward"]["launch.count"] > 0
    # The first step's window (model to sim, the first batch) is before_steps, not per step.
    assert r["before_steps"]["total"]["h2d.count"] == 3  # weight, bias, the first batch
    # The machine probe after each measured step (bench compare reads step times against it),
    # and this process's intra-op threads, as bench's reports have them.
    probe = steps["samples"]["machine_probe"]
    assert len(probe) == 4 and all(ns > 0 for ns in probe)
    assert steps["timing"]["machine_probe.median"] == statistics.median(probe)
    import torch
    report = json.loads(out.read_text())
    assert report["provenance"]["intra_op_threads"] == torch.get_num_threads() > 0


OWN_OPTIMIZER = """\
import torch
w = torch.randn(8, 2, device="sim", requires_grad=True)
for i in range(5):
    loss = (torch.randn(16, 8).to("sim") @ w).pow(2).mean()
    loss.backward()
    with torch.no_grad():  # an optimizer of the program's own, not a torch.optim.Optimizer
        w -= 0.1 * w.grad
        w.grad = None
"""


def test_steps_from_backward_for_a_program_with_an_optimizer_of_its_own(tmp_path):
    out = tmp_path / "r.json"
    prog = _script(tmp_path, OWN_OPTIMIZER)
    assert run(["--out", str(out), "--", prog]) == 0
    assert "steps" not in _report(out)  # no torch.optim step: no step found
    assert run(["--steps-from", "backward", "--out", str(out), "--", prog]) == 0
    r = _report(out)
    steps = r["steps"]
    assert steps["measured_steps"] == 4  # 5 backward passes, --skip-steps 1
    # per step: the batch's blocking H2D copy, and no other sync
    assert steps["per_step"]["h2d.count"] == 1 and steps["per_step"]["sync.count"] == 1
    assert r["_scenario"]["measured_window"].startswith("one window per backward pass")
    assert r["_scenario"]["config"]["steps_from"] == "backward"


CONTAINER = """\
import torch
model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 2)).to("sim")


class Container(torch.optim.Optimizer):  # as torchtitan's OptimizersContainer: one per part
    def __init__(self, parts):
        self.inner = [torch.optim.AdamW(p.parameters(), lr=0.1) for p in parts]
        super().__init__([p for o in self.inner for g in o.param_groups for p in g["params"]], {})

    def step(self, closure=None):
        for o in self.inner:
            o.step()


opt = Container(list(model))
for i in range(5):
    loss = model(torch.randn(16, 8).to("sim")).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
"""


def test_an_optimizer_whose_step_steps_others_is_one_step(tmp_path):
    # torch calls the global step hooks around the container's step and around each inner
    # AdamW's: a step ends when the outermost returns, so 5 training steps are 5 steps, not 15
    out = tmp_path / "r.json"
    assert run(["--out", str(out), "--", _script(tmp_path, CONTAINER)]) == 0
    steps = _report(out)["steps"]
    assert steps["measured_steps"] == 4  # --skip-steps 1
    assert steps["per_step"]["h2d.count"] == 1  # each window holds one whole training step
    assert steps["launches_by_op"]["aten::_foreach_sqrt"] == 2 * 4  # both AdamW steps in each


NESTED = """\
import json, sys, torch, harness_sim
model = torch.nn.Linear(8, 2).to("sim")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
with harness_sim.count() as c:
    for i in range(4):
        loss = model(torch.randn(16, 8).to("sim")).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        loss.item()
print("INNER " + json.dumps({"syncs": c.syncs, "h2d": c.copies["h2d"]["count"]}))
"""


def test_a_programs_own_count_inside_run_counts_what_it_would_alone(tmp_path, capsys):
    # The program's harness_sim.count() and run's sessions count at once: each gets every event
    # (the inner block lost what followed run's first step boundary when only one could).
    prog = _script(tmp_path, NESTED)
    assert subprocess.run([sys.executable, prog], capture_output=True, text=True,
                          check=True).stdout.strip() == 'INNER {"syncs": 8, "h2d": 4}'
    out = tmp_path / "r.json"
    assert run(["--skip-steps", "0", "--out", str(out), "--", prog]) == 0
    assert 'INNER {"syncs": 8, "h2d": 4}' in capsys.readouterr().out
    r = _report(out)
    # run counted them too: 4 windows, the first from the start (the model's weight and bias,
    # then 4 batches: 6 blocking H2D copies; 3 item()s; the last item() follows the last step).
    assert r["steps"]["total"]["h2d.count"] == 6
    assert r["steps"]["total"]["sync.count"] == 6 + 3


@pytest.mark.release
def test_sync_sites_name_the_programs_file_and_line(tmp_path, capsys):
    prog = _script(tmp_path, LOOP)
    assert run(["--skip-steps", "0", "--", prog, "3"]) == 0
    err = capsys.readouterr().err
    assert "3 steps, 3 counted (--skip-steps 0)" in err
    assert f"2 x aten::_local_scalar_dense (item) in (none) at {prog}:13 in <module>" in err
    assert "after the last step" in err  # the last loss.item(): in the total, not per step


def test_gates_and_html_through_bench(tmp_path, bench):
    prog = _script(tmp_path, LOOP)
    gate = tmp_path / "gate.json"
    rule = {"name": "at most 2 syncs per step", "scenario": "prog", "variant": "steps",
            "metric": "per_step.sync.count", "max": 2}
    gate.write_text(json.dumps({"gate_version": 1, "rules": [rule]}))
    html = tmp_path / "r.html"
    assert run(["--bench", bench, "--gate", str(gate), "--html", str(html), "--", prog, "4"]) == 0
    assert html.read_text().lstrip().lower().startswith("<!doctype html")
    rule["max"] = 1
    gate.write_text(json.dumps({"gate_version": 1, "rules": [rule]}))
    assert run(["--bench", bench, "--gate", str(gate), "--", prog, "4"]) == 1


def _with_line(after: str, line: str) -> str:
    """LOOP with `line` inserted after the line that starts with `after` (same indent)."""
    out = []
    for text in LOOP.splitlines():
        out.append(text)
        if text.strip().startswith(after):
            out.append(text[:len(text) - len(text.lstrip())] + line)
    return "\n".join(out) + "\n"


def test_expectations_pass_a_moved_line_and_fail_a_new_one_by_name(tmp_path, capsys, bench):
    prog = _script(tmp_path, LOOP)
    expected, base = tmp_path / "expect.json", tmp_path / "base.json"
    assert run(["-q", "--write-expectations", str(expected), "--out", str(base), "--",
                prog, "4"]) == 0
    # Every variant's sites: the counted steps', and those before them (the model's .to()).
    entries = json.loads(expected.read_text())["sites"]
    assert {e["variant"] for e in entries} == {"steps", "before_steps"}
    assert {(e["site"], e["what"], e["frame"], e["per_step"]) for e in entries
            if e["variant"] == "steps"} == {
        ("sync", "aten::_local_scalar_dense, item", f"{prog}:13 in <module>", 1),
        ("sync", "aten::copy_, blocking copy H2D", f"{prog}:7 in <module>", 1),
        ("copy", "blocking H2D", f"{prog}:7 in <module>", 1)}
    assert run(["-q", "--expect", str(expected), "--", prog, "4"]) == 0
    # A line above the loop moves every site down by one: they are the same sites.
    _script(tmp_path, "import os\n" + LOOP)
    assert run(["-q", "--expect", str(expected), "--", prog, "4"]) == 0
    capsys.readouterr()
    # One more .item() per step, in a helper the loop calls: that line is named, exit 1. (All the
    # others move down by 3 lines and pass: same function, same op, same count.)
    _script(tmp_path, "def peek(m):\n    return m.weight.sum().item()\n\n" +
            _with_line("opt.zero_grad()", "peek(model)"))
    head = tmp_path / "head.json"
    assert run(["-q", "--expect", str(expected), "--out", str(head), "--", prog, "4"]) == 1
    err = capsys.readouterr().err
    assert "8 sites checked against" in err and "1 unexpected, 0 above their count, 0 stale" in err
    assert (f"UNEXPECTED prog steps: 1 sync/step at {prog}:2 in peek "
            "(aten::_local_scalar_dense, item) in (none): not expected") in err
    # A failed expectation, as a failed gate, keeps the report: compare names the line too.
    r = subprocess.run([bench, "compare", str(base), str(head)], capture_output=True, text=True)
    assert r.returncode == 1, r.stdout + r.stderr  # per_step.sync.count 2 -> 3
    assert (f"+1 sync/step at {prog}:2 in peek (aten::_local_scalar_dense, item) in (none): new"
            in r.stdout), r.stdout
    assert "sites by line (per step, base -> head):" in r.stdout
    # An expected site that stops occurring is stale: a warning, a failure with --strict.
    _script(tmp_path, LOOP.replace("    print(loss.item())\n", "    loss = loss.detach()\n"))
    assert run(["-q", "--expect", str(expected), "--", prog, "4"]) == 0
    assert "stale      prog steps: expected 1 sync/step at" in capsys.readouterr().err
    assert run(["-q", "--strict", "--expect", str(expected), "--", prog, "4"]) == 1
    # Bad input: a missing file, a file that is not an expectations file.
    assert run(["--expect", str(tmp_path / "none.json"), "--", prog, "4"]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text('{"expectations_version": 1, "sites": [{"scenario": "prog"}]}')
    assert run(["--expect", str(bad), "--", prog, "4"]) == 2
    assert "sites[0]: missing 'variant'" in capsys.readouterr().err


def test_allowed_syncs_are_listed_apart_and_not_checked(tmp_path, capsys):
    prog = _script(tmp_path, "import harness_sim\n" + LOOP.replace(
        "    print(loss.item())\n",
        "    with harness_sim.allow_sync('the loss, printed'):\n        print(loss.item())\n"))
    expected = tmp_path / "expect.json"
    assert run(["--write-expectations", str(expected), "--", prog, "4"]) == 0
    err = capsys.readouterr().err
    assert (f"3 x aten::_local_scalar_dense (item) in (none) at {prog}:15 in <module> "
            "[allowed: the loss, printed]") in err
    assert all(e["what"] != "aten::_local_scalar_dense, item"
               for e in json.loads(expected.read_text())["sites"])
    assert run(["--expect", str(expected), "--", prog, "4"]) == 0
    assert "1 allowed in the program" in capsys.readouterr().err


def test_exit_codes(tmp_path, capsys):
    prog = _script(tmp_path, "import sys\nif sys.argv[1] == 'raise': raise ValueError('boom')\n"
                             "sys.exit(int(sys.argv[1]))\n")
    out = tmp_path / "r.json"
    assert run(["--out", str(out), "--", prog, "0"]) == 0 and out.exists()
    out.unlink()
    assert run(["--out", str(out), "--", prog, "4"]) == 3 and not out.exists()
    assert run(["--out", str(out), "--", prog, "raise"]) == 3 and not out.exists()
    err = capsys.readouterr().err
    assert "exited with status 4" in err and "ValueError: boom" in err and "Traceback" in err
    assert run([]) == 2
    assert run(["--", str(tmp_path / "missing.py")]) == 2
    # The program without the `--` that ends run's options: said so, with the command to type.
    capsys.readouterr()
    assert run(["--out", str(out), "--as-cuda", prog, "0"]) == 2 and not out.exists()
    assert f"the program goes after '--': python -m harness_sim run [options] -- {prog}" in (
        capsys.readouterr().err)
    assert run(["--gate", str(tmp_path / "no.json"), "--bench", sys.executable, "--", prog, "0"]) == 2
    # The options of a rank run started for rank 0's run (internal, still checked).
    capsys.readouterr()
    assert run(["--rank-dir", str(tmp_path / "none"), "--", prog, "0"]) == 2
    assert run(["--rank-trace-origin", "1,2", "--", prog, "0"]) == 2
    assert run(["--rank-dir", str(tmp_path), "--rank-trace-origin", "x", "--", prog, "0"]) == 2
    err = capsys.readouterr().err
    assert "no such directory" in err and "is for a rank run with --rank-dir" in err
    assert "--rank-trace-origin x: ORIGIN_NS,UNIX_NS" in err
    assert not list(tmp_path.glob(".*.tmp"))  # nothing half-written left behind


RAN = """\
import pathlib, sys
pathlib.Path(sys.argv[1]).write_text("ran")
"""


@pytest.mark.parametrize("flags,message", [
    (["--out", "{dir}"], "--out {dir}: is a directory"),
    (["--html", "{dir}"], "--html {dir}: is a directory"),
    (["--gate", "{dir}"], "--gate {dir}: is a directory"),
    (["--out", "{dir}/r.json", "--trace", "{dir}/r.json"],
     "--out and --trace name one file, {dir}/r.json"),
    (["--out", "{dir}/r.json", "--write-expectations", "{dir}/r.json"],
     "--out and --write-expectations name one file"),
    (["--out", ""], "--out: an empty path"),
    (["--trace", ""], "--trace: an empty path"),
    (["--gate", "{dir}/g.json", "--bench", "{dir}/no_bench"],
     "--bench {dir}/no_bench: not an executable file"),
])
def test_bad_outputs_and_inputs_are_refused_before_the_program_runs(
        tmp_path, capsys, monkeypatch, bench, flags, message):
    # issue 43: each was found only after the program ran (or never: one output replaced the
    # other, an empty path meant none, a bad --bench gave way to $HARNESS_BENCH)
    (tmp_path / "g.json").write_text('{"rules": []}')
    monkeypatch.setenv("HARNESS_BENCH", os.path.abspath(bench))
    marker = tmp_path / "ran"
    flags = [f.format(dir=tmp_path) for f in flags]
    assert run([*flags, "--", _script(tmp_path, RAN), str(marker)]) == 2
    assert message.format(dir=tmp_path) in capsys.readouterr().err
    assert not marker.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.json", "prog.py"]


def test_a_bench_that_crashes_is_said_to_have_crashed(tmp_path, capsys):
    # before: exit 2 and not a word (a bench built against another libharness segfaults)
    crashing = tmp_path / "bench"
    crashing.write_text("#!/bin/sh\nkill -SEGV $$\n")
    crashing.chmod(0o755)
    (tmp_path / "g.json").write_text(json.dumps({"gate_version": 1, "rules": [
        {"scenario": "prog", "variant": "steps", "metric": "per_step.sync.count", "max": 0}]}))
    assert run(["--bench", str(crashing), "--gate", str(tmp_path / "g.json"), "--",
                _script(tmp_path, "print('ran')\n")]) == 2
    assert f"{crashing} compare was killed by signal 11: the gates were not evaluated" in \
        capsys.readouterr().err


def test_a_missing_module_is_bad_input(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run(["-m", "no_such_module_here.train"]) == 2
    assert "no module named 'no_such_module_here' (-m no_such_module_here.train)" in (
        capsys.readouterr().err)


def test_a_missing_submodule_is_bad_input_and_nothing_is_imported(tmp_path, capsys, monkeypatch):
    """The package's directories are searched without importing it (issue 53: it exited 3)."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("raise SystemExit('imported')\n")
    (package / "train.py").write_text("")
    monkeypatch.chdir(tmp_path)
    assert run(["-m", "pkg.missing.train"]) == 2
    assert "no module named 'pkg.missing' (-m pkg.missing.train)" in capsys.readouterr().err


def test_the_summary_shows_the_top_sites_and_how_many_more(tmp_path, capsys):
    """30 syncing lines in one function: each named by its own line (sites read each function's
    line table once, issue 53), the console shows 20 and says how many more the report has."""
    body = "".join(f"    x.item()  # {i}\n" for i in range(30))
    prog = _script(tmp_path, "import torch\n"
                   "x = torch.ones(1, device='sim')\n"
                   "w = torch.nn.Parameter(torch.ones(1, device='sim'))\n"
                   "opt = torch.optim.SGD([w], lr=0.1)\n"
                   "def step():\n" + body +
                   "for _ in range(3):\n"
                   "    step(); w.sum().backward(); opt.step(); opt.zero_grad()\n")
    out = tmp_path / "r.json"
    assert run(["--out", str(out), "--", prog]) == 0
    err = capsys.readouterr().err
    assert err.count("x aten::_local_scalar_dense (item)") == 20
    assert "... and 10 more sites in the report" in err
    (scenario,) = json.loads(out.read_text())["scenarios"]
    steps = next(v for v in scenario["variants"] if v["name"] == "steps")
    assert sorted(int(s["frame"].split(":")[1].split()[0]) for s in steps["sync_sites"]) == \
        list(range(6, 36))


@pytest.mark.parametrize("script", [b"d\xfe/p.py", b"bad\xffname.py"])
def test_paths_that_are_not_utf8_are_named_escaped(tmp_path, script):
    """A program in a directory, or a script, whose name is not UTF-8 runs and its sites and
    report name it with \\xfe escapes (issue 53: exit 3 at its first sim tensor; a traceback and
    exit 1 writing the report)."""
    root = os.fsencode(tmp_path)
    path = os.path.join(root, script)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"import torch\nx = torch.ones(2).to('sim')\n"
                b"w = torch.nn.Parameter(torch.ones(1, device='sim'))\n"
                b"opt = torch.optim.SGD([w], lr=0.1)\n"
                b"for _ in range(3):\n    x.sum().item(); w.sum().backward(); opt.step()\n")
    r = subprocess.run([os.fsencode(sys.executable), b"-m", b"harness_sim", b"run", b"--out",
                        b"r.json", b"--", script], cwd=root, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    escaped = script.decode("utf-8", "backslashreplace")
    assert f"at {escaped}:6 in <module>".encode() in r.stderr
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    (scenario,) = report["scenarios"]
    assert scenario["name"] == os.path.splitext(os.path.basename(escaped))[0]
    steps = next(v for v in scenario["variants"] if v["name"] == "steps")
    assert {s["frame"] for s in steps["sync_sites"]} == {f"{escaped}:6 in <module>"}


def test_run_without_torch_says_so_and_exits_3(tmp_path):
    """Not 1, a failed gate's status (issue 53)."""
    shadow = tmp_path / "shadow" / "torch"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('no torch here')\n")
    r = subprocess.run([sys.executable, "-m", "harness_sim", "run", "--", "x.py"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(tmp_path / "shadow")))
    assert r.returncode == 3, r.stderr
    assert "cannot import torch (no torch here)" in r.stderr and "Traceback" not in r.stderr


_MARK = "import pathlib; pathlib.Path('ran').touch()\n"


@pytest.mark.parametrize("flag, content, message", [
    ("--gate", "{not json", "not valid JSON"),
    ("--gate", json.dumps({"gate_version": 1, "rules": [{"scenario": "no_such_scenario", "variant": "steps",
                                      "metric": "per_step.sync.count", "max": 0}]}),
     "no_such_scenario"),
    ("--gate", json.dumps({"gate_version": 1, "rules": [{"scenario": "prog",
                                                          "variant": "no_such_variant",
                                      "metric": "per_step.sync.count", "max": 0}]}),
     "no_such_variant"),
    ("--baseline", "{}", "invalid report 'input.json'"),
    ("--expect", json.dumps({"expectations_version": 1, "sites": [
        {"scenario": "prog", "variant": "steps", "site": "sync", "phase": "(none)",
         "what": "aten::_local_scalar_dense, item", "frame": "prog.py:1 in <module>",
         "per_step": 1, "reason": "r"}] * 2}),
     "sites[1] is the same site as sites[0]"),
])
def test_bad_inputs_are_found_before_the_program_runs(tmp_path, capsys, monkeypatch, flag,
                                                      content, message):
    """As bench reads its gates, baseline and expectations before it runs anything (issue 53:
    run found them after the program had run to its end)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "input.json").write_text(content)
    prog = _script(tmp_path, _MARK)
    assert run([flag, "input.json", "--", prog]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("flag", ["--gate", "--expect", "--baseline"])
def test_an_input_that_is_not_a_regular_file_gets_benchs_message(tmp_path, capsys, monkeypatch,
                                                                 flag):
    monkeypatch.chdir(tmp_path)
    os.mkfifo(tmp_path / "fifo")
    prog = _script(tmp_path, _MARK)
    for path, kind in ((str(tmp_path / "fifo"), "is a FIFO"),
                       ("/dev/zero", "is a character device")):
        assert run([flag, path, "--", prog]) == 2
        err = capsys.readouterr().err
        assert f"cannot read" in err and f"{path}': {kind}; give a regular file" in err, err
    assert not (tmp_path / "ran").exists()


def test_relative_outputs_stay_where_run_was_started(tmp_path, monkeypatch):
    # a program that changes directory does not move run's outputs
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    prog = _script(tmp_path, LOOP.replace("import sys, torch",
                                          f"import os, sys, torch\nos.chdir({str(elsewhere)!r})"))
    monkeypatch.chdir(work)
    assert run(["--out", "r.json", "--trace", "t.json", "--", prog, "3"]) == 0
    assert (work / "r.json").is_file() and (work / "t.json").is_file()
    assert list(elsewhere.iterdir()) == []


def test_sigterm_exits_143_and_writes_nothing(tmp_path):
    prog = _script(tmp_path, """\
        import pathlib, sys, time, torch
        model = torch.nn.Linear(4, 1).to("sim")
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            model(torch.ones(2, 4, device="sim")).sum().backward(); opt.step()
        pathlib.Path(sys.argv[1]).write_text("stepping")
        time.sleep(120)
        """)
    ready, out, trace = tmp_path / "ready", tmp_path / "r.json", tmp_path / "t.json"
    p = subprocess.Popen([sys.executable, "-m", "harness_sim", "run", "--out", str(out),
                          "--trace", str(trace), "--", prog, str(ready)], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not ready.exists() and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.2)
    p.send_signal(signal.SIGTERM)
    assert p.wait(60) == 143
    assert not out.exists() and not trace.exists()
    assert not [p for p in tmp_path.iterdir() if ".tmp" in p.name]


def test_module_mode(tmp_path, monkeypatch, capsys):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "train.py").write_text(LOOP)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "m.json"
    assert run(["--out", str(out), "-m", "mypkg.train", "3"]) == 0
    assert "done ['3']" in capsys.readouterr().out
    r = _report(out)
    assert r["_scenario"]["name"] == "mypkg.train" and r["steps"]["measured_steps"] == 2


@pytest.mark.release
def test_version_and_check_still_work():
    done = subprocess.run([sys.executable, "-m", "harness_sim", "--version", "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.rstrip().endswith("ok")


@pytest.mark.release
def test_a_session_rewinds_to_its_mark():
    # run's step windows: marked at each step's end, rewound when the program ends, so what
    # followed the last step is in no per-step figure (and no report is written per step).
    import torch
    import harness_sim  # noqa: F401
    from harness_sim import _C

    s = _C.CountSession()
    x = torch.ones(4, device="sim")
    s.start()
    s.begin_step()
    (x * 2).sum().item()  # a launch or two, one sync
    s.end_step()
    s.stop()
    s.mark()
    at_mark = s.counts()
    s.start()
    s.begin_step()
    x.cpu()
    x.nonzero()
    s.end_step()
    s.stop()
    assert s.counts()["total"]["syncs"] > at_mark["total"]["syncs"]
    assert s.counts()["steps"] == 2
    s.rewind()
    assert s.counts() == at_mark
    with pytest.raises(RuntimeError, match="stop it first"):
        s.start()
        s.mark()
    s.stop()
    with pytest.raises(RuntimeError, match="without a mark"):
        _C.CountSession().rewind()
