"""The mode sim's device takes in this process, chosen once while harness_sim is imported, before
the first sim tensor: whether sim serves the CUDA device type itself or is the PrivateUse1 device
``sim`` (``SERVES_CUDA``, ``DEVICE_TYPE``), and whether its kernels compute values or shapes
(``COMPUTE``). Both come from the environment or, in a process started as ``python -m
harness_sim run``, from run's own options: so this module also knows how run's command line
divides (``split_run_argv``; run's option parser builds on it). Imports only torch and the
package's C++ module."""
from __future__ import annotations

import os
import sys

import torch

from .. import _C

BACKEND_NAME = "sim"  # PrivateUse1's name, in c10 and in torch's Python
DEVICE_COUNT = 8  # the sim devices of a process: sim:0 .. sim:7


# --- run's command line: its options, then the program (after ``--``, or ``-m MODULE``) ----
def split_run_argv(argv: list[str]) -> tuple[list[str], str | None, str | None, list[str]]:
    """(options, script, module, program args) of run's `argv` (after ``run``): options end at
    ``--`` or at ``-m MODULE``."""
    for i, arg in enumerate(argv):
        if arg == "--":
            rest = argv[i + 1:]
            if rest[:1] == ["-m"]:
                return argv[:i], None, (rest[1] if len(rest) > 1 else ""), rest[2:]
            return argv[:i], (rest[0] if rest else ""), None, rest[1:]
        if arg == "-m":
            return argv[:i], None, (argv[i + 1] if i + 1 < len(argv) else ""), argv[i + 2:]
    return argv, None, None, []


def run_compute_option(argv: list[str]) -> str | None:
    """The value of ``--compute`` where this process is ``python -m harness_sim run`` and the
    package is being imported by it (see started_as_run_as_cuda), else None."""
    if argv[:2] != ["-m", "run"]:
        return None
    options = split_run_argv(argv[2:])[0]
    for i, arg in enumerate(options):
        if arg == "--compute" and i + 1 < len(options):
            return options[i + 1]
        if arg.startswith("--compute="):
            return arg.split("=", 1)[1]
    return None


def started_as_run_as_cuda(argv: list[str]) -> bool:
    """Whether this process is ``python -m harness_sim run [options] --as-cuda ...`` and the
    package is being imported by it: while ``-m`` imports a package, ``sys.argv[0]`` is "-m"
    and the rest is the command line's (python's documented behaviour; ``torchrun -m
    harness_sim run ...`` starts each rank as such a process)."""
    if argv[:2] != ["-m", "run"]:
        return False
    options = split_run_argv(argv[2:])[0]
    return "--as-cuda" in options


# --- the mode ------------------------------------------------------------------------------------
def _serves_cuda(env: dict, argv: list[str]) -> bool:
    """Whether sim serves the CUDA device type itself in this process (issue 50): in a process
    started as ``python -m harness_sim run --as-cuda``, unless HARNESS_SIM_AS_CUDA=map asks for
    the mapping of CUDA's names to ``sim`` (_cuda.as_cuda); anywhere with
    HARNESS_SIM_AS_CUDA=device.
    Chosen while harness_sim is imported, once: a named PrivateUse1 would be torch's accelerator,
    and CUDA's hooks are taken over before anything asks them (sim::serve_cuda)."""
    mode = env.get("HARNESS_SIM_AS_CUDA", "")
    if mode not in ("", "map", "device"):
        why = (f"HARNESS_SIM_AS_CUDA={mode!r}: expected 'device' (sim serves the CUDA device "
               "type) or 'map' (CUDA's names mapped to the sim device)")
        if argv[:2] == ["-m", "run"]:  # run's bad usage: its message and exit status 2
            print(f"python -m harness_sim run: error: {why}", file=sys.stderr)
            raise SystemExit(2)
        raise ImportError(why)
    return mode == "device" or (mode == "" and started_as_run_as_cuda(argv))


# The device type sim's tensors have in this process: "sim" (PrivateUse1), or "cuda" where sim
# serves CUDA itself. A process that serves CUDA says so to the processes it starts (DataLoader
# workers spawned, a program's own subprocesses), so that a CUDA tensor means the same in each.
SERVES_CUDA = _serves_cuda(os.environ, sys.argv)
DEVICE_TYPE = "cuda" if SERVES_CUDA else "sim"
if SERVES_CUDA:
    os.environ["HARNESS_SIM_AS_CUDA"] = "device"


def _compute_mode(env: dict, argv: list[str]) -> str:
    """What sim's kernels compute in this process (sim_device.h, Compute): "values" (the
    default) or "shapes" (meta functions only: docs/full-size.md), from run's ``--compute``
    while ``python -m harness_sim run`` imports the package, else HARNESS_SIM_COMPUTE. Chosen
    before the first sim tensor; the processes this one starts are told by the environment."""
    mode = run_compute_option(argv) or env.get("HARNESS_SIM_COMPUTE", "") or "values"
    if mode not in ("values", "shapes"):
        why = (f"compute mode {mode!r}: expected 'values' (every op computed) or 'shapes' (meta "
               "functions only)")
        if argv[:2] == ["-m", "run"]:  # run's bad usage: its message and exit status 2
            print(f"python -m harness_sim run: error: {why}", file=sys.stderr)
            raise SystemExit(2)
        raise ImportError(f"HARNESS_SIM_COMPUTE: {why}")
    return mode


COMPUTE = _compute_mode(os.environ, sys.argv)
_C.set_compute(COMPUTE)
if COMPUTE == "shapes":
    os.environ["HARNESS_SIM_COMPUTE"] = "shapes"


def device(index: int = 0) -> torch.device:
    """Sim's device `index`: ``torch.device("sim", index)``, or ``torch.device("cuda", index)``
    where sim serves CUDA (HARNESS_SIM_AS_CUDA=device, run --as-cuda)."""
    return torch.device("cuda" if SERVES_CUDA else BACKEND_NAME, index)
