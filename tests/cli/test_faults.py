"""Injected faults on the real bench binary. Each must end in a clear message, the documented exit
code, no hang, no process left behind and nothing half-written:
  - SIGINT / SIGTERM, with and without ranks: exit 130 / 143, no report, no temporary files;
  - a rank stopped with SIGSTOP: its peers time out, the launcher names it, exit 3;
  - MASTER_PORT taken, half-set torchrun environments: exit 2;
  - TMPDIR missing, or the scratch directory removed mid-run;
  - a full disk or an I/O error (an LD_PRELOAD shim, tests/faults/fail_io.cpp) while writing the
    report, the markdown, the trace, the Google Benchmark JSON and a checkpoint.

Environment: BENCH (the bench binary), FAIL_IO (the shim), SOURCE_DIR (the repository root).
"""
import errno
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time
import unittest

BENCH = os.environ["BENCH"]
FAIL_IO = os.environ["FAIL_IO"]
RANK_ENV = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def clean_env(tmpdir, **extra):
    env = {k: v for k, v in os.environ.items() if k not in RANK_ENV}
    env["TMPDIR"] = tmpdir
    env.update(extra)
    return env


def children_of(pid):
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


def rank_of(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for item in f.read().split(b"\0"):
                if item.startswith(b"RANK="):
                    return int(item[5:])
    except OSError:
        pass
    return None


class Run:
    """bench started in the background, stderr to a file, in a private TMPDIR and output folder."""

    def __init__(self, test, *args, env_extra=None, new_session=False):
        self.tmp = tempfile.mkdtemp(prefix="faults-")
        self.tmpdir = os.path.join(self.tmp, "tmpdir")  # bench's TMPDIR: must end empty
        self.outdir = os.path.join(self.tmp, "out")
        os.mkdir(self.tmpdir)
        os.mkdir(self.outdir)
        test.addCleanup(shutil.rmtree, self.tmp, True)
        self.err_path = os.path.join(self.tmp, "stderr")
        self.err_file = open(self.err_path, "w")
        test.addCleanup(self.err_file.close)
        self.outputs = ["--out", self.out("report.json"), "--markdown", self.out("summary.md"),
                        "--trace", self.out("trace.json"), "--gbench-out", self.out("gbench.json")]
        self.proc = subprocess.Popen([BENCH, *args, *self.outputs], stdout=subprocess.DEVNULL,
                                     stderr=self.err_file, stdin=subprocess.DEVNULL,
                                     env=clean_env(self.tmpdir, **(env_extra or {})),
                                     start_new_session=new_session)
        test.addCleanup(self.kill)

    def out(self, name):
        return os.path.join(self.outdir, name)

    def stderr(self):
        with open(self.err_path) as f:
            return f.read()

    def wait_for(self, text, timeout=120):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if text in self.stderr():
                return
            if self.proc.poll() is not None:
                raise AssertionError(f"bench ended ({self.proc.returncode}) before '{text}':\n"
                                     + self.stderr())
            time.sleep(0.05)
        raise AssertionError(f"no '{text}' within {timeout} s:\n" + self.stderr())

    def wait(self, timeout=120):
        return self.proc.wait(timeout=timeout)

    def kill(self):  # a test that failed midway: nothing may outlive it
        if self.proc.poll() is None:
            for pid in children_of(self.proc.pid):
                os.kill(pid, signal.SIGKILL)
            self.proc.kill()
            self.proc.wait()


class Leftovers:
    def assert_nothing_left(self, run, pids=()):
        self.assertEqual(os.listdir(run.outdir), [], "outputs were written: " + run.stderr())
        self.assertEqual(os.listdir(run.tmpdir), [], "temporary files were left behind")
        for pid in pids:
            self.assertFalse(alive(pid), f"process {pid} outlived the run")


class Interrupts(unittest.TestCase, Leftovers):
    def interrupt_single_process(self, sig):
        run = Run(self, "--scenario", "resume_adam", "--device", "sim", "--steps", "100000")
        run.wait_for("[resume_adam 1/")
        time.sleep(0.5)
        sent = time.time()
        run.proc.send_signal(sig)
        self.assertEqual(run.wait(), 128 + sig, run.stderr())
        self.assertLess(time.time() - sent, 10, "the stop took too long")
        self.assertIn("interrupted by " + signal.Signals(sig).name, run.stderr())
        self.assertIn("stopped without writing a report", run.stderr())
        self.assert_nothing_left(run)

    def test_sigint_single_process_exits_130(self):
        self.interrupt_single_process(signal.SIGINT)

    def test_sigterm_single_process_exits_143(self):
        self.interrupt_single_process(signal.SIGTERM)

    def start_ranks(self, new_session=False):
        run = Run(self, "--scenario", "zero_broadcast", "--device", "sim", "--nproc", "2",
                  "--steps", "100000", "--timeout", "30", new_session=new_session)
        run.wait_for("[zero_broadcast 1/")
        ranks = children_of(run.proc.pid)
        self.assertEqual(len(ranks), 2, run.stderr())
        time.sleep(0.5)
        return run, ranks

    def interrupt_ranks(self, sig):
        run, ranks = self.start_ranks()
        run.proc.send_signal(sig)
        self.assertEqual(run.wait(), 128 + sig, run.stderr())
        self.assertIn("bench: interrupted by " + signal.Signals(sig).name, run.stderr())
        self.assert_nothing_left(run, ranks)

    def test_sigint_with_ranks_exits_130(self):
        self.interrupt_ranks(signal.SIGINT)

    def test_sigterm_with_ranks_exits_143(self):
        self.interrupt_ranks(signal.SIGTERM)

    def test_ctrl_c_to_the_process_group(self):
        # A terminal's Ctrl-C reaches the launcher and every rank at once.
        run, ranks = self.start_ranks(new_session=True)
        os.killpg(run.proc.pid, signal.SIGINT)
        self.assertEqual(run.wait(), 130, run.stderr())
        self.assert_nothing_left(run, ranks)

    def test_ranks_die_with_a_killed_launcher(self):
        # SIGKILL cannot be caught: the launcher cannot stop its ranks, the kernel does
        # (PR_SET_PDEATHSIG). Nothing may go on running, nor write a report after the caller saw
        # 137, and the ranks' TMPDIR folder is removed by the launcher's detached remover.
        run, ranks = self.start_ranks()
        self.addCleanup(lambda: [os.kill(p, signal.SIGKILL) for p in ranks if alive(p)])
        self.assertTrue(os.listdir(run.tmpdir), "the ranks' TMPDIR folder is not where expected")
        run.proc.kill()
        self.assertEqual(run.wait(), -signal.SIGKILL)
        deadline = time.time() + 10
        while any(alive(p) for p in ranks) and time.time() < deadline:
            time.sleep(0.05)
        self.assertEqual([p for p in ranks if alive(p)], [], "a rank outlived its launcher")
        deadline = time.time() + 10
        while os.listdir(run.tmpdir) and time.time() < deadline:
            time.sleep(0.05)
        self.assertEqual(os.listdir(run.tmpdir), [], "the ranks' TMPDIR folder was left behind")
        time.sleep(1)
        self.assertEqual(os.listdir(run.outdir), [], "a report was written after the kill")

    def test_killed_single_process_leaves_no_scratch(self):
        # A plain bench killed by SIGKILL left its scratch folder and checkpoints
        # ($TMPDIR/harness-*/.../step=N.ckpt) every time (issue 43): its detached remover, as a
        # launcher's, removes the folder once the process has gone.
        # (fresh/foreach checkpoints at step N = --steps, then trains N more steps)
        run = Run(self, "--scenario", "resume_adam", "--device", "sim", "--steps", "200")
        run.wait_for("[resume_adam 1/")
        deadline = time.time() + 120
        checkpoints = []
        while not checkpoints and time.time() < deadline and run.proc.poll() is None:
            checkpoints = [f for _, _, files in os.walk(run.tmpdir) for f in files
                           if f.endswith(".ckpt")]
            time.sleep(0.05)
        self.assertTrue(checkpoints, "no checkpoint in the scratch folder:\n" + run.stderr())
        run.proc.kill()
        self.assertEqual(run.wait(), -signal.SIGKILL)
        deadline = time.time() + 10
        while os.listdir(run.tmpdir) and time.time() < deadline:
            time.sleep(0.05)
        self.assertEqual(os.listdir(run.tmpdir), [], "the scratch folder was left behind")
        self.assertEqual(os.listdir(run.outdir), [], "a report was written after the kill")

    def test_more_ranks_than_sim_devices_is_bad_input_before_any_starts(self):
        started = time.time()
        r = subprocess.run([BENCH, "--scenario", "zero_broadcast", "--device", "sim", "--nproc",
                            "9", "--steps", "1"], capture_output=True, text=True, timeout=60,
                           stdin=subprocess.DEVNULL, env=clean_env(tempfile.gettempdir()))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--nproc 9 ranks: each rank owns one device and --device sim has 8",
                      r.stderr)
        self.assertLess(time.time() - started, 5, "ranks were started")

    def test_stopped_rank_is_named_and_the_run_ends(self):
        run = Run(self, "--scenario", "zero_broadcast", "--device", "sim", "--nproc", "2",
                  "--steps", "100000", "--timeout", "3")
        run.wait_for("[zero_broadcast 1/")
        ranks = children_of(run.proc.pid)
        stopped = [p for p in ranks if rank_of(p) == 1]
        self.assertEqual(len(stopped), 1, ranks)
        time.sleep(0.5)
        os.kill(stopped[0], signal.SIGSTOP)
        sent = time.time()
        self.assertEqual(run.wait(timeout=120), 3, run.stderr())
        # The peers give up after --timeout (a collective, then the store): well under a minute.
        self.assertLess(time.time() - sent, 60)
        self.assertIn("rank 1 of 2 was stopped by SIGSTOP", run.stderr())
        self.assertIn("the other ranks were stopped", run.stderr())
        self.assert_nothing_left(run, ranks)


class Environment(unittest.TestCase):
    def bench(self, *args, tmpdir=None, **env):
        tmp = tempfile.mkdtemp(prefix="faults-")
        self.addCleanup(shutil.rmtree, tmp, True)
        return subprocess.run([BENCH, *args], capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL, env=clean_env(tmpdir or tmp, **env))

    def test_master_port_taken_is_bad_input(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen()
            port = s.getsockname()[1]
            r = self.bench("--scenario", "zero_broadcast", "--device", "sim", "--timeout", "5",
                           RANK="0", WORLD_SIZE="2", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                           MASTER_PORT=str(port))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(f"MASTER_PORT {port} is already in use", r.stderr)
        self.assertNotIn("frame #", r.stderr)

    def test_half_set_rank_environment_is_bad_input(self):
        for env, message in [({"RANK": "1"}, "RANK=1 is set but WORLD_SIZE is not"),
                             ({"LOCAL_RANK": "0"}, "LOCAL_RANK=0 is set but WORLD_SIZE is not"),
                             ({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1",
                               "LOCAL_WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                               "MASTER_PORT": "29500"},
                              "LOCAL_RANK=1 is not below LOCAL_WORLD_SIZE=1"),
                             ({"RANK": "0", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "3",
                               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"},
                              "LOCAL_WORLD_SIZE='3' is not an integer in [1, 2]")]:
            with self.subTest(env=env):
                r = self.bench("--scenario", "resume_adam", "--device", "sim", **env)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(message, r.stderr)

    def test_tmpdir_missing_or_not_a_directory(self):
        tmp = tempfile.mkdtemp(prefix="faults-")
        self.addCleanup(shutil.rmtree, tmp, True)
        a_file = os.path.join(tmp, "file")
        open(a_file, "w").close()
        for tmpdir, reason in [(os.path.join(tmp, "missing"), "No such file or directory"),
                               (a_file, "Not a directory")]:
            for scenario in ("resume_adam", "zero_broadcast"):  # the scratch and the ranks' dir
                with self.subTest(tmpdir=tmpdir, scenario=scenario):
                    r = self.bench("--scenario", scenario, "--device", "sim", "--steps", "1",
                                   tmpdir=tmpdir)
                    self.assertEqual(r.returncode, 2, r.stderr)
                    self.assertIn(f"cannot create a temporary directory in {tmpdir}", r.stderr)
                    self.assertIn(reason, r.stderr)


class Outputs(unittest.TestCase):
    """Where a report may go: a regular file is replaced atomically, anything else (a device, a
    FIFO, stdout) is written in place and never replaced; every bad output is bad input (exit 2),
    found before any scenario runs."""
    RUN = ("--scenario", "resume_adam", "--device", "sim", "--steps", "1",
           "--variant", "fresh/foreach")

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="faults-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def bench(self, *args, **kwargs):
        return subprocess.run([BENCH, *self.RUN, *args], capture_output=True, text=True,
                              timeout=300, stdin=subprocess.DEVNULL, env=clean_env(self.tmp),
                              **kwargs)

    def assert_report(self, text):
        self.assertEqual(json.loads(text)["scenarios"][0]["name"], "resume_adam")

    def test_dev_null_is_written_not_replaced(self):
        r = self.bench("--out", "/dev/null", "--markdown", "/dev/null")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(stat.S_ISCHR(os.stat("/dev/null").st_mode), "/dev/null was replaced")

    def test_dash_is_stdout_and_the_table_goes_to_stderr(self):
        r = self.bench("--out", "-")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_report(r.stdout)
        self.assertIn("fresh/foreach", r.stderr)

    def test_dev_stdout_is_written_in_place(self):
        r = self.bench("--out", "/dev/stdout")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_report(r.stdout[r.stdout.index("{\n"):])

    def test_fifo_is_written_in_place(self):
        fifo = os.path.join(self.tmp, "report.fifo")
        os.mkfifo(fifo)
        got = []

        def read_fifo():
            with open(fifo) as f:
                got.append(f.read())

        reader = threading.Thread(target=read_fifo)
        reader.start()
        r = self.bench("--out", fifo)
        reader.join(timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_report(got[0])
        self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode), "the FIFO was replaced")

    def test_symlink_target_is_replaced_and_the_link_stays(self):
        for existing in (True, False):
            with self.subTest(target_exists=existing):
                target = os.path.join(self.tmp, f"target-{existing}.json")
                link = os.path.join(self.tmp, f"link-{existing}.json")
                if existing:
                    with open(target, "w") as f:
                        f.write("old")
                os.symlink(os.path.basename(target), link)  # relative, as ln -s makes them
                r = self.bench("--out", link)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertTrue(os.path.islink(link), "the symlink was replaced")
                with open(target) as f:
                    self.assert_report(f.read())
                self.assertEqual([f for f in os.listdir(self.tmp) if ".tmp" in f], [])

    def assert_bad_input_before_the_run(self, r, message):
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(message, r.stderr)
        self.assertNotIn("[resume_adam", r.stderr, "the scenario ran before the check")

    def test_bad_outputs_exit_2_before_the_run(self):
        long_path = os.path.join(self.tmp, "x" * 5000 + ".json")
        self.assert_bad_input_before_the_run(self.bench("--out", long_path), "File name too long")
        self.assert_bad_input_before_the_run(self.bench("--trace", self.tmp), "is a directory")
        if os.geteuid() == 0:  # root writes into any directory whose file system lets it
            unwritable = "/sys"
        else:
            unwritable = os.path.join(self.tmp, "read-only")
            os.mkdir(unwritable, 0o555)
        self.assert_bad_input_before_the_run(
            self.bench("--markdown", os.path.join(unwritable, "summary.md")),
            f"cannot create a file in {unwritable}")

    def test_gate_path_that_is_a_directory_is_bad_input(self):
        self.assert_bad_input_before_the_run(self.bench("--gate", self.tmp), "is a directory")

    def test_two_outputs_on_one_path_exit_2_before_the_run(self):
        # Before, the later output silently replaced the report (issue 43).
        out = os.path.join(self.tmp, "r.json")
        link = os.path.join(self.tmp, "link.json")
        os.symlink("r.json", link)
        for args, message in [
                (("-o", out, "--html", out), "--out and --html name one file, " + out),
                (("-o", out, "--markdown", out), "--out and --markdown name one file, " + out),
                (("--markdown", out, "--gbench-out", link),
                 "--markdown and --gbench-out name one file, " + link),
                (("-o", "-", "--markdown", "-"), "--out and --markdown name one file, -")]:
            with self.subTest(args=args):
                self.assert_bad_input_before_the_run(self.bench(*args), message)
                self.assertIn("each output needs its own", self.bench(*args).stderr)
        self.assertEqual(sorted(os.listdir(self.tmp)), ["link.json"], "something was written")
        r = subprocess.run([BENCH, "compare", "base.json", "head.json", "-o", out, "--html", out],
                           capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--out and --html name one file, " + out, r.stderr)

    def test_empty_path_exits_2_before_the_run(self):
        # Before, an empty --out (or --html, --baseline, ...) silently meant none (issue 43).
        for option in ("-o", "--out", "--markdown", "--html", "--trace", "--gbench-out",
                       "--write-expectations", "--gate", "--baseline", "--expect"):
            with self.subTest(option=option):
                named = "--out" if option == "-o" else option
                self.assert_bad_input_before_the_run(self.bench(option, ""),
                                                     named + ": an empty path")
        self.assertEqual(os.listdir(self.tmp), [], "something was written")
        for args in (("-o", ""), ("--html", "")):
            r = subprocess.run([BENCH, "compare", "base.json", "head.json", *args],
                               capture_output=True, text=True, timeout=60,
                               stdin=subprocess.DEVNULL)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn(": an empty path", r.stderr)


class Inputs(unittest.TestCase):
    """Gates, baselines and compared reports: regular files or stdin, read whole up to 256 MiB;
    anything else is refused at once (exit 2), and so is a JSON object with a repeated key."""
    GATE = {"gate_version": 1, "rules": [{"scenario": "resume_adam", "variant": "fresh/foreach",
                                          "metric": "per_step.sync.count", "max": 1000}]}

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="faults-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def bench(self, *args, stdin_text=None):
        return subprocess.run([BENCH, *args], capture_output=True, text=True, timeout=60,
                              input=stdin_text,
                              stdin=subprocess.DEVNULL if stdin_text is None else None,
                              env=clean_env(self.tmp))

    def run_gate(self, *args, **kwargs):
        return self.bench("--scenario", "resume_adam", "--device", "sim", "--steps", "1",
                          "--variant", "fresh/foreach", *args, **kwargs)

    def test_fifo_and_dev_zero_are_refused_at_once(self):
        fifo = os.path.join(self.tmp, "gate.fifo")
        os.mkfifo(fifo)  # no writer: reading it would hang
        for path, kind in [(fifo, "is a FIFO"), ("/dev/zero", "is a character device")]:
            for args in (("--gate", path), ("--baseline", path)):
                with self.subTest(args=args):
                    started = time.time()
                    r = self.run_gate(*args)
                    self.assertEqual(r.returncode, 2, r.stderr)
                    self.assertIn(f"'{path}': {kind}; give a regular file, or - for stdin",
                                  r.stderr)
                    self.assertNotIn("[resume_adam", r.stderr)
                    self.assertLess(time.time() - started, 20)
            with self.subTest(compare=path):
                r = self.bench("compare", path, path)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(kind, r.stderr)

    def test_gate_from_stdin(self):
        r = self.run_gate("--gate", "-", stdin_text=json.dumps(self.GATE))
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_waiting_on_stdin_ends_at_the_first_sigterm(self):
        # A gate read from a pipe that is never closed: one SIGTERM ends the wait (a blocking
        # read would restart after the handler and wait on).
        tmp = tempfile.mkdtemp(prefix="faults-stdin-")
        self.addCleanup(shutil.rmtree, tmp, True)
        proc = subprocess.Popen([BENCH, "--scenario", "resume_adam", "--device", "sim",
                                 "--gate", "-", "--out", os.path.join(tmp, "r.json")],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, env=clean_env(tmp))
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        self.addCleanup(proc.stdin.close)
        self.addCleanup(proc.stderr.close)
        proc.stdin.write(b'{"gates": [')  # a start, and then nothing more
        proc.stdin.flush()
        time.sleep(1.5)
        self.assertIsNone(proc.poll(), "bench did not wait for the rest of stdin")
        sent = time.time()
        proc.send_signal(signal.SIGTERM)
        self.assertEqual(proc.wait(timeout=20), 143)
        self.assertLess(time.time() - sent, 5, "the first SIGTERM did not end the read")
        self.assertIn("interrupted by SIGTERM", proc.stderr.read().decode())
        self.assertEqual(os.listdir(tmp), [], "something was written")

    def test_duplicate_key_is_bad_input_naming_it(self):
        text = json.dumps(self.GATE)
        gate = os.path.join(self.tmp, "gate.json")
        with open(gate, "w") as f:
            f.write(text.replace('"max": 1000', '"max": 1000, "max": 0'))
        r = self.run_gate("--gate", gate)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(f"gate file '{gate}': duplicate key 'max'", r.stderr)


class ScratchRemoved(unittest.TestCase, Leftovers):
    def test_scratch_directory_removed_mid_run(self):
        run = Run(self, "--scenario", "resume_adam", "--device", "sim", "--steps", "50",
                  "--variant", "resume_*/foreach")
        # As soon as the scratch directory exists, it is removed and a file takes its name, so that
        # the run cannot simply create it again: every checkpoint save then fails.
        replaced = []
        deadline = time.time() + 60

        def replace_scratch():
            while not replaced and time.time() < deadline and run.proc.poll() is None:
                for name in os.listdir(run.tmpdir):
                    path = os.path.join(run.tmpdir, name)
                    shutil.rmtree(path, ignore_errors=True)
                    try:
                        open(path, "w").close()
                    except OSError:  # bench wrote into it meanwhile (rmtree lost a race): again
                        continue
                    replaced.append(name)
                time.sleep(0.002)

        remover = threading.Thread(target=replace_scratch)
        remover.start()
        code = run.wait()
        remover.join()
        self.assertTrue(replaced, "the scratch directory never appeared: " + run.stderr())
        self.assertEqual(code, 3, run.stderr())
        # Whether the file came before the checkpoint directory was made or after, the save fails.
        self.assertRegex(run.stderr(), "resume_move_all/foreach FAILED: the fresh run it resumes "
                         "from failed: cannot (create the checkpoint directory|write checkpoint)")
        # mkdir says "File exists" when the file came between its look and its mkdir; bench names
        # the file that is in the way either way. A save that ran between the removal and the
        # file finds nothing there.
        self.assertRegex(run.stderr(), "Not a directory|No such file or directory")
        self.assertEqual(os.listdir(run.tmpdir), [], "the scratch path was not cleaned up")


class DiskFaults(unittest.TestCase, Leftovers):
    """The shim fails one call on one output; bench says which file and why and writes nothing
    half-done (the outputs before it are whole; the failing one and its .tmp are absent)."""

    def run_with_fault(self, path_part, call, err):
        run = Run(self, "--scenario", "resume_adam", "--device", "sim", "--steps", "2",
                  "--variant", "fresh/foreach", "--variant", "resume_move_all/foreach",
                  env_extra={"LD_PRELOAD": FAIL_IO, "HARNESS_FAIL_PATH": path_part,
                             "HARNESS_FAIL_CALL": call, "HARNESS_FAIL_ERRNO": str(err)})
        code = run.wait()
        return run, code

    def test_every_output_on_full_disk_and_io_error(self):
        outputs = {"report.json": "--out", "summary.md": "--markdown", "trace.json": "--trace",
                   "gbench.json": "--gbench-out"}
        for name in outputs:
            for call, err in [("fopen", errno.ENOSPC), ("fwrite", errno.ENOSPC),
                              ("fsync", errno.EIO), ("fclose", errno.EIO), ("rename", errno.EIO)]:
                with self.subTest(output=name, call=call):
                    run, code = self.run_with_fault(name, call, err)
                    err_text = run.stderr()
                    self.assertIn(f"fail_io: {call}", err_text, "the shim did not fire")
                    self.assertEqual(code, 2, err_text)
                    self.assertIn(f"cannot write '{run.out(name)}': {os.strerror(err)}", err_text)
                    left = os.listdir(run.outdir)
                    self.assertNotIn(name, left)
                    self.assertEqual([f for f in left if ".tmp" in f], [])
                    self.assertEqual(os.listdir(run.tmpdir), [])

    def test_checkpoint_on_full_disk_fails_the_variant(self):
        for call, err in [("fwrite", errno.ENOSPC), ("fsync", errno.EIO), ("rename", errno.EIO)]:
            with self.subTest(call=call):
                run, code = self.run_with_fault("/resume_adam_", call, err)
                err_text = run.stderr()
                self.assertIn(f"fail_io: {call}", err_text, "the shim did not fire")
                self.assertEqual(code, 3, err_text)
                self.assertIn(f"fresh/foreach FAILED: cannot write checkpoint", err_text)
                self.assertIn("/resume_adam_foreach/step=2.ckpt': " + os.strerror(err), err_text)
                self.assertIn("resume_move_all/foreach: the fresh run it resumes from failed: "
                              "cannot write checkpoint", err_text)
                # The run went on and reported: the failed variant is in the report.
                self.assertTrue(os.path.exists(run.out("report.json")))
                self.assertEqual(os.listdir(run.tmpdir), [])


if __name__ == "__main__":
    unittest.main()
