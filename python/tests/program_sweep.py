"""Program sweep: the training frameworks people use, installed from PyPI at pinned versions, each
running its own training entry point unchanged under ``python -m harness_sim run --as-cuda`` on a
tiny configuration with generated data (the OpInfo sweep's counterpart for programs; issue 51).

Each framework gets a side environment, made once per machine from the pinned one: a virtual
environment holding the pinned torch and harness_sim (and what they require), their files
hard-linked (``scripts/lib/torch_only_venv.py``), into which pip installs the framework and every
other dependency fresh from PyPI with ``torch==<pinned>`` as a constraint: pip never replaces
torch (the environment is checked to import the pinned torch before it is used), and a framework
pinning an older release of a library than the pinned environment has (LitGPT's
huggingface_hub) gets its own. The drivers in ``program_sweep/`` hold only what is ours, a
configuration and generated data; the training code is the framework's, as installed.

For each program: whether it ran unchanged (run exited 0 and wrote a report) or its first failure
line; launches, syncs, H2D and D2H per counted step, and collectives by kind with their bytes;
its sync and copy sites by line (the framework's frames); the wall time under run, and of the same
command with plain ``python`` on this machine (no GPU: the framework takes its CPU path). A
program of several ranks (``nproc``) is started by torchrun, each rank under ``run`` (rank 0
writes the report of all); its figures are rank 0's.

    scripts/program_sweep.sh [--only NAME,...] [--json OUT.json] [--markdown OUT.md] [--no-cpu]
        [--compare-map]

Progress goes to stderr, one line per program. Exit status 0 when the sweep ran (whatever the
programs did), 2 on bad arguments.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DRIVERS = HERE / "program_sweep"
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "scripts" / "lib"))
import torch_only_venv  # noqa: E402
# What a side environment takes from the pinned one; the rest comes from PyPI.
PINNED_ROOTS = torch_only_venv.ROOTS + ("harness-sim",)
RUN_TIMEOUT_S = 900
INSTALL_TIMEOUT_S = 1800
# What the programs must not reach for: no hub, no telemetry, no experiment tracker.
QUIET_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
             "WANDB_MODE": "disabled", "HF_HUB_DISABLE_TELEMETRY": "1", "YOLO_OFFLINE": "1",
             "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}


@dataclasses.dataclass(frozen=True)
class Program:
    name: str                 # the sweep's name for it
    framework: str            # the PyPI distribution whose version the table gives
    requirements: tuple       # what pip installs into the side environment (pinned)
    entry: str                # the framework's entry point that trains
    driver: str               # program_sweep/<driver>: our configuration and data
    args: tuple = ()
    run_options: tuple = ()   # run's own options (what ends a step)
    nproc: int = 1            # ranks: above 1, torchrun starts each under run (rank 0 reports)


# The Hugging Face releases the pinned environment has (python/requirements-extra.txt), for the
# frameworks built on them; each framework's other dependencies are what pip resolves.
HF = ("transformers==5.24.0", "accelerate==1.15.0")
# torchtune 0.6.1 requires torchao without declaring it; 0.15.0 is the last torchao that still has
# the names torchtune.training.quantization imports (int4_weight_only, TensorCoreTiledLayout,
# qat.linear's enable_4w_fake_quant). sentencepiece: the driver trains the tokenizer with it.
TORCHTUNE = ("torchtune==0.6.1", "torchao==0.15.0", "torchdata==0.11.0", "sentencepiece==0.2.3",
             "omegaconf==2.3.0", "datasets==5.2.0")

# torchtitan 0.2.2: 0.3.0 imports what torch 2.11 does not have yet
# (torch.distributed.fsdp.DataParallelMeshDims, in full_dtensor.py, which its trainer imports).
TORCHTITAN = ("torchtitan==0.2.2", "torchdata==0.11.0", "datasets==5.2.0", "tokenizers==0.23.3",
              "tyro==1.0.17")
# torchtitan imports Triton unconditionally (its MoE kernels are defined when it is imported):
# Triton importable, as on a GPU machine; the dense Llama launches no Triton kernel.
WITH_TRITON = ("--with-triton",)

PROGRAMS = (
    Program("timm", "timm", ("timm==1.0.31",),
            "create_model, Mixup, NativeScaler (AMP), ModelEmaV3, channels_last, in train.py's loop",
            "timm_loop.py"),
    Program("sb3-ppo", "stable-baselines3", ("stable-baselines3==2.9.2",),
            "PPO('MlpPolicy', 'CartPole-v1').learn", "sb3.py", ("ppo",)),
    Program("sb3-sac", "stable-baselines3", ("stable-baselines3==2.9.2",),
            "SAC('MlpPolicy', 'Pendulum-v1').learn", "sb3.py", ("sac",)),
    Program("ignite", "pytorch-ignite", ("pytorch-ignite==0.5.5",),
            "create_supervised_trainer (AMP, GradScaler) + evaluator with metrics",
            "ignite_trainer.py"),
    # Keras's optimizer is its own (not a torch.optim.Optimizer): a step ends with its backward
    Program("keras", "keras", ("keras==3.15.1",), "Model.fit on the torch backend",
            "keras_fit.py", run_options=("--steps-from", "backward")),
    Program("peft-lora", "peft", ("peft==0.21.2", *HF),
            "get_peft_model(LoRA) + transformers Trainer, bf16", "peft_lora.py"),
    Program("trl-sft", "trl", ("trl==1.16.0", *HF, "datasets==5.2.0"), "SFTTrainer, bf16",
            "trl_sft.py"),
    Program("trl-dpo", "trl", ("trl==1.16.0", *HF, "datasets==5.2.0"),
            "DPOTrainer (the reference model a copy of the initial policy), bf16", "trl_dpo.py"),
    # The gallery's TRL #6842 (docs/gallery.md): the chunked loss before and after the fix
    Program("trl-sft-chunked-1.10", "trl", ("trl==1.10.0", *HF, "datasets==5.2.0"),
            "SFTTrainer, loss_type='chunked_nll', bf16 (before TRL #6842)", "trl_sft.py",
            ("chunked_nll",)),
    Program("trl-sft-chunked-1.11", "trl", ("trl==1.11.0", *HF, "datasets==5.2.0"),
            "SFTTrainer, loss_type='chunked_nll', bf16 (after TRL #6842)", "trl_sft.py",
            ("chunked_nll",)),
    # The gallery's Megatron-LM #7407 (docs/gallery.md): .item() inside the optimizer's step
    Program("megatron-plain", "megatron-core", ("megatron-core==0.16.1",),
            "FP32Optimizer(Adam).step(), OptimizerConfig defaults", "megatron_optimizer.py",
            ("plain",)),
    Program("megatron-count-zeros", "megatron-core", ("megatron-core==0.16.1",),
            "FP32Optimizer(Adam).step(), log_num_zeros_in_grad=True", "megatron_optimizer.py",
            ("count-zeros",)),
    Program("megatron-clip", "megatron-core", ("megatron-core==0.16.1",),
            "FP32Optimizer(Adam).step(), clip_grad=1.0", "megatron_optimizer.py", ("clip",)),
    Program("sentence-transformers", "sentence-transformers",
            ("sentence-transformers==6.2.0", *HF, "datasets==5.2.0"),
            "SentenceTransformerTrainer, MultipleNegativesRankingLoss, bf16",
            "sentence_transformers_fit.py"),
    Program("diffusers-fp16", "diffusers", ("diffusers==0.42.1", "accelerate==1.15.0"),
            "UNet2DModel + DDPMScheduler + EMAModel, Accelerate fp16 (train_unconditional's loop)",
            "diffusers_ddpm.py", ("fp16",)),
    # requests: litgpt/utils.py needs it to read its config and does not require it
    Program("litgpt-lora", "litgpt", ("litgpt==0.5.13", "requests==2.34.2"),
            "`litgpt finetune_lora` (Pythia-14m's config, random weights, a JSON dataset), bf16",
            "litgpt_lora.py"),
    Program("fabric", "lightning", ("lightning==2.6.6",),
            "Fabric(accelerator='cuda', precision='16-mixed'): setup, backward, clip_gradients",
            "fabric_loop.py"),
    Program("ultralytics", "ultralytics", ("ultralytics==8.4.190",),
            "`yolo train` (YOLOv8n from its config), AMP", "ultralytics_yolo.py"),
    Program("diffusers-bf16", "diffusers", ("diffusers==0.42.1", "accelerate==1.15.0"),
            "as above, Accelerate bf16", "diffusers_ddpm.py", ("bf16",)),
    Program("torchtune-full", "torchtune", TORCHTUNE,
            "`tune run full_finetune_single_device` (a 2-layer llama2 from its builder, random "
            "weights, a SentencePiece tokenizer, a JSON instruct dataset), bf16",
            "torchtune_finetune.py", ("full",)),
    Program("torchtune-lora", "torchtune", TORCHTUNE,
            "`tune run lora_finetune_single_device` (as above, lora_llama2), bf16",
            "torchtune_finetune.py", ("lora",)),
    Program("torchtitan-fsdp2", "torchtitan", TORCHTITAN,
            "`torchtitan.train` under torchrun (llama3 `debugmodel`, a generated `c4_test`), "
            "FSDP2 over 2 ranks", "torchtitan_train.py", ("fsdp",), WITH_TRITON, 2),
    Program("torchtitan-fsdp2-4", "torchtitan", TORCHTITAN, "as above, FSDP2 over 4 ranks",
            "torchtitan_train.py", ("fsdp",), WITH_TRITON, 4),
    Program("torchtitan-tp", "torchtitan", TORCHTITAN,
            "as above, 4 ranks: tensor parallel 2 x FSDP2 2", "torchtitan_train.py", ("tp",),
            WITH_TRITON, 4),
)


# ----------------------------------------------------------------------------------------------
# Side environments


def _cache_root() -> Path:
    return Path(os.environ.get("HARNESS_CACHE", "/var/cache/harness")) / "python"


def _pinned_torch(python: str) -> str:
    return subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                          check=True, capture_output=True, text=True).stdout.strip()


def side_environment(program: Program, log) -> str:
    """The Python of `program`'s side environment, made (once) if it is not there: the pinned
    torch and harness_sim hard-linked, the framework and its other dependencies installed by pip
    from PyPI with torch held at the pinned version."""
    torch_version = _pinned_torch(sys.executable)
    key = hashlib.sha256(json.dumps([sys.executable, torch_version, PINNED_ROOTS,
                                     program.requirements]).encode()).hexdigest()[:12]
    root = _cache_root() / f"sweep-{program.framework}-{key}"
    python = root / "bin" / "python"
    if (root / ".ready").exists():
        _link_harness_sim(python)
        return str(python)
    log(f"making {root} ({', '.join(program.requirements)})")
    if root.exists():
        shutil.rmtree(root)  # an attempt that did not finish
    torch_only_venv.make_venv(sys.executable, str(root), PINNED_ROOTS)
    constraints = root / "constraints.txt"
    constraints.write_text(f"torch=={torch_version.split('+')[0]}\n")
    pip = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                          "-c", str(constraints), *program.requirements],
                         capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    if pip.returncode != 0:
        raise RuntimeError(f"pip could not install {', '.join(program.requirements)}: "
                           f"{_last_line(pip.stderr)}")
    if _pinned_torch(str(python)) != torch_version:
        raise RuntimeError(f"the side environment's torch is not the pinned {torch_version}")
    (root / ".ready").write_text(time.strftime("%Y-%m-%d %H:%M:%S\n"))
    _link_harness_sim(python)
    return str(python)


def _link_harness_sim(python: Path) -> None:
    """harness_sim's files in the side environment linked again from the pinned one, which a
    rebuild replaces (new files: the old links would keep the old build)."""
    found = torch_only_venv.closure(sys.executable, ("harness-sim",))
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], check=True, capture_output=True, text=True).stdout.strip()
    # What an earlier build had and this one has not (a module since moved) goes too.
    shutil.rmtree(os.path.join(site, "harness_sim"), ignore_errors=True)
    for rel in found["dists"].get("harness-sim", []):
        src = os.path.normpath(os.path.join(found["site"], rel))
        if not src.startswith(found["site"] + os.sep) or not os.path.isfile(src):
            continue
        dst = os.path.join(site, os.path.relpath(src, found["site"]))
        if os.path.lexists(dst):
            os.remove(dst)
        torch_only_venv.link_or_copy(src, dst)


def _version_of(python: str, distribution: str) -> str:
    r = subprocess.run([python, "-c", "import sys; from importlib.metadata import version; "
                        f"print(version({distribution!r}))"], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else "?"


# ----------------------------------------------------------------------------------------------
# Running a program


@dataclasses.dataclass
class Outcome:
    name: str
    framework: str
    version: str
    entry: str
    unchanged: bool = False
    failure: str = ""
    measured_steps: int = 0
    ranks: int = 1
    per_step: dict = dataclasses.field(default_factory=dict)   # a rank's: rank 0's
    collectives: dict = dataclasses.field(default_factory=dict)  # kind -> [count, bytes] / step
    sync_sites: list = dataclasses.field(default_factory=list)
    copy_sites: list = dataclasses.field(default_factory=list)
    seconds_run: float | None = None
    seconds_cpu: float | None = None
    cpu_failure: str = ""
    mapped: str = ""          # with HARNESS_SIM_AS_CUDA=map (--compare-map): how it went


def _last_line(text: str, limit: int = 240) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    line = lines[-1] if lines else "(no output)"
    return line if len(line) <= limit else line[:limit - 3] + "..."


_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b[^:]*:")
# torchrun's own summary of a failed rank: not why it failed
_LAUNCHER_LINE = re.compile(r"^torch\.distributed\.elastic\.\S*ChildFailedError\b")


def _first_failure(stderr: str) -> str:
    """The line that says why a program failed: run's own error, else the exception's line (the
    last one, where a traceback ends), else the last line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in lines:
        if line.startswith("python -m harness_sim run: error"):
            return line
    for line in reversed(lines):
        if _EXCEPTION_LINE.match(line) and not _LAUNCHER_LINE.match(line):
            return line[:240]
    return _last_line(stderr)


def _steps(report: Path) -> dict | None:
    """The report's counted steps, a rank's (rank 0's where torchrun started several: the
    report's `steps` sums them); None when run found no step boundary in the program."""
    (scenario,) = json.loads(report.read_text())["scenarios"]
    variants = {v["name"]: v for v in scenario["variants"]}
    return variants.get("rank0/steps", variants.get("steps"))


def _launcher(program: Program, python: str) -> list:
    """What starts `program`'s processes: `python`, or torchrun (`torch.distributed.run`, as
    the `torchrun` script does) starting `nproc` of them on this machine."""
    if program.nproc == 1:
        return [python]
    return [python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node",
            str(program.nproc)]


def run_program(program: Program, python: str, cpu: bool, compare_map: bool = False,
                out: Path | None = None) -> Outcome:
    """`program` under `run --as-cuda` in `python`'s environment (and, with `cpu`, plainly): its
    outcome; its report kept at `out` when given."""
    outcome = Outcome(program.name, program.framework, _version_of(python, program.framework),
                      program.entry, ranks=program.nproc)
    launcher = _launcher(program, python)
    env = {**os.environ, **QUIET_ENV,
           "PYTHONPATH": os.pathsep.join([str(DRIVERS), os.environ.get("PYTHONPATH", "")])}
    env.pop("HARNESS_SIM_AS_CUDA", None)
    driver = [str(DRIVERS / program.driver), *program.args]
    with tempfile.TemporaryDirectory(prefix=f"sweep-{program.name}-") as work:
        report = out or Path(work) / "report.json"
        start = time.monotonic()
        r = _run([*launcher, "-m", "harness_sim", "run", "--as-cuda", *program.run_options,
                  "--out", str(report), "--", *driver], work, env)
        outcome.seconds_run = round(time.monotonic() - start, 1)
        if r.returncode == 0 and report.exists():
            outcome.unchanged = True
            steps = _steps(report)
            if steps is None:
                outcome.failure = "no training step found (run counted the program as a whole)"
            else:
                _read_report(outcome, steps)
        else:
            outcome.failure = f"exit {r.returncode}: {_first_failure(r.stderr)}"
        if compare_map:
            outcome.mapped = _mapped(program, python, driver, work, env)
        if cpu:
            start = time.monotonic()
            plain = _run([*launcher, *driver], work, env)
            outcome.seconds_cpu = round(time.monotonic() - start, 1)
            if plain.returncode != 0:
                outcome.cpu_failure = f"exit {plain.returncode}: {_first_failure(plain.stderr)}"
    return outcome


def outcomes_of(names, cpu: bool = False) -> dict:
    """The programs `names` run as the sweep runs them, their side environments made where
    missing: name -> Outcome. Raises RuntimeError when an environment cannot be made (pip could
    not reach PyPI, or could not install)."""
    return {p.name: run_program(p, side_environment(p, log=lambda message: None), cpu=cpu)
            for p in PROGRAMS if p.name in names}


def _mapped(program: Program, python: str, driver: list, work: str, env: dict) -> str:
    """The same run with CUDA's names mapped to sim instead (HARNESS_SIM_AS_CUDA=map): whether
    the program ran, and its syncs per step; or its failure."""
    report = Path(work) / "mapped.json"
    r = _run([*_launcher(program, python), "-m", "harness_sim", "run", "--as-cuda",
              *program.run_options, "--out", str(report), "--", *driver], work,
             {**env, "HARNESS_SIM_AS_CUDA": "map"})
    if r.returncode != 0 or not report.exists():
        return f"no: exit {r.returncode}: {_first_failure(r.stderr)}"
    steps = _steps(report)
    syncs = steps["per_step"].get("sync.count") if steps else None
    return f"yes, {_figure(syncs)} syncs/step"


def _run(cmd: list, cwd: str, env: dict) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=RUN_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        return subprocess.CompletedProcess(cmd, 124, e.stdout or "",
                                           f"timed out after {RUN_TIMEOUT_S} s")


def _read_report(outcome: Outcome, steps: dict) -> None:
    outcome.measured_steps = steps["measured_steps"]
    per_step = steps["per_step"]
    outcome.per_step = {k: per_step.get(f"{k}.count") for k in ("launch", "sync", "h2d", "d2h")}
    outcome.collectives = {key[len("collective."):-len(".count")]:
                           [value, per_step.get(key[:-len("count")] + "bytes")]
                           for key, value in per_step.items()
                           if key.startswith("collective.") and key.endswith(".count")
                           and key != "collective.count" and value}
    outcome.sync_sites = [(s["count"], s["op"], s["reason"], s["frame"])
                          for s in steps.get("sync_sites", [])]
    outcome.copy_sites = [(c["count"], c["kind"], c["how"], c["frame"])
                          for c in steps.get("copy_sites", [])]


# ----------------------------------------------------------------------------------------------
# The table


def _figure(value) -> str:
    """A count as it is, a mean to two decimals."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return str(value)


def _size(n) -> str:
    """Bytes as a reader takes them in: B, kB, MB (powers of 1000)."""
    if n is None:
        return "?"
    for unit, scale in (("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{_figure(round(n / scale, 2))} {unit}"
    return f"{_figure(n)} B"


def _collectives(o: Outcome) -> str:
    """A rank's collectives per step by kind, with their bytes; '-' for none."""
    return ", ".join(f"{_figure(count)} {kind} ({_size(size)})"
                     for kind, (count, size) in sorted(o.collectives.items())) or "-"


def render_markdown(outcomes: list[Outcome], torch_version: str) -> str:
    ran = sum(o.unchanged for o in outcomes)
    lines = [f"{ran} of {len(outcomes)} programs ran unchanged under `run --as-cuda` "
             f"(torch {torch_version}). Under torchrun the figures are rank 0's.", "",
             "| program | framework | entry point | unchanged | steps | launches / step | "
             "syncs / step | H2D / step | D2H / step | collectives / step | run s | plain CPU s | "
             "with the mapping |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for o in outcomes:
        p = o.per_step
        lines.append(
            f"| {o.name} | {o.framework} {o.version} | {o.entry} | "
            f"{('yes' + (' (' + o.failure + ')' if o.failure else '')) if o.unchanged else 'no: ' + o.failure.replace('|', '/')} | "
            f"{o.measured_steps or '-'} | {_figure(p.get('launch'))} | {_figure(p.get('sync'))} | "
            f"{_figure(p.get('h2d'))} | {_figure(p.get('d2h'))} | {_collectives(o)} | "
            f"{_figure(o.seconds_run)} | "
            f"{_figure(o.seconds_cpu)}{' (failed: ' + o.cpu_failure + ')' if o.cpu_failure else ''} | "
            f"{o.mapped.replace('|', '/') or '-'} |")
    lines += ["", "Sync and copy sites in the counted steps, by line:", ""]
    for o in outcomes:
        if not (o.sync_sites or o.copy_sites):
            continue
        lines.append(f"- **{o.name}**:")
        for count, op, reason, frame in o.sync_sites:
            lines.append(f"  - {count} x sync `{op}` ({reason}) at `{frame}`")
        for count, kind, how, frame in o.copy_sites:
            lines.append(f"  - {count} x {how} {kind} copy at `{frame}`")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------------------------
# Command line


def _parse(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="program_sweep.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated program names (default: every one)")
    parser.add_argument("--json", help="write the outcomes as JSON here")
    parser.add_argument("--markdown", help="write the table as Markdown here")
    parser.add_argument("--no-cpu", action="store_true",
                        help="do not time the same command with plain python")
    parser.add_argument("--compare-map", action="store_true",
                        help="run each program again with HARNESS_SIM_AS_CUDA=map (CUDA's names "
                             "mapped to sim) and give how it went")
    parser.add_argument("--list", action="store_true", help="list the programs and exit")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    try:
        args = _parse(argv)
    except SystemExit as e:
        return 0 if not e.code else 2
    if args.list:
        for p in PROGRAMS:
            print(f"{p.name:12} {' '.join(p.requirements):32} {p.entry}")
        return 0
    chosen = list(PROGRAMS)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = sorted(set(names) - {p.name for p in PROGRAMS})
        if unknown:
            print(f"program_sweep.py: error: no program named {', '.join(unknown)} "
                  f"(--list names them)", file=sys.stderr)
            return 2
        chosen = [p for p in PROGRAMS if p.name in names]
    outcomes = []
    for i, program in enumerate(chosen, start=1):
        def log(message, _i=i, _p=program):
            print(f"[{_i}/{len(chosen)}] {_p.name}: {message}", file=sys.stderr, flush=True)
        try:
            python = side_environment(program, log)
        except (RuntimeError, subprocess.SubprocessError) as e:
            outcome = Outcome(program.name, program.framework, "-", program.entry,
                              failure=f"not installed: {e}")
        else:
            outcome = run_program(program, python, cpu=not args.no_cpu,
                                  compare_map=args.compare_map)
        outcomes.append(outcome)
        per = outcome.per_step
        log("ran unchanged: " + (", ".join(f"{k} {_figure(v)}/step" for k, v in per.items())
                                 or outcome.failure)
            + (f"; collectives {_collectives(outcome)}/step" if outcome.collectives else "")
            + f" ({outcome.seconds_run} s; plain CPU {outcome.seconds_cpu} s)"
            if outcome.unchanged else f"FAILED: {outcome.failure}")
    torch_version = _pinned_torch(sys.executable)
    if args.json:
        Path(args.json).write_text(json.dumps({"torch": torch_version, "programs": [
            dataclasses.asdict(o) for o in outcomes]}, indent=1) + "\n")
    if args.markdown:
        Path(args.markdown).write_text(render_markdown(outcomes, torch_version))
    print(f"program_sweep: {sum(o.unchanged for o in outcomes)} of {len(outcomes)} ran unchanged",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
