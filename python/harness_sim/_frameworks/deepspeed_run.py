"""DeepSpeed without code changes: sim becomes DeepSpeed's accelerator (harness_sim.deepspeed) as
soon as DeepSpeed's accelerator module has been imported, before DeepSpeed picks one itself, when
the program runs under ``python -m harness_sim run`` (unless ``DS_ACCELERATOR`` names another) or
when ``DS_ACCELERATOR=sim``. Importing DeepSpeed is slow, and harness_sim does not need it: the
hook only waits for a program that imports it."""
from __future__ import annotations

import os

from .._after_import import after_import
from . import active_run

_MODULE = "deepspeed.accelerator.real_accelerator"


def wanted() -> bool:
    chosen = os.environ.get("DS_ACCELERATOR")
    return chosen == "sim" or (chosen is None and active_run.running())


def _install() -> None:
    if wanted():
        from .deepspeed import install
        install()


def install_import_hook() -> None:
    after_import(_MODULE, _install)
