"""How ``python -m harness_sim run``'s command line divides: its options, then the program (after
``--``, or ``-m MODULE``) and the program's arguments. Imports nothing of torch: the package reads
it while it is imported, to choose the device sim serves (_device)."""
from __future__ import annotations


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
