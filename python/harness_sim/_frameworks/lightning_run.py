"""Lightning without code changes: ``accelerator="sim"`` by name once harness_sim is imported, and
what ``python -m harness_sim run`` adds to every Trainer of the program it runs.

Importing Lightning is slow, and harness_sim does not need it: ``install_import_hook`` registers
``SimAccelerator`` in Lightning's ``AcceleratorRegistry`` when ``lightning.pytorch`` has finished
importing (at once if it already has). ``callbacks`` is the ``lightning.pytorch.callbacks_factory``
entry point (python/pyproject.toml): Lightning calls it for every Trainer, and it returns
harness_sim's ``RunCallback`` only while ``run`` counts a program.
"""
from __future__ import annotations

import sys

from .._after_import import after_import
from . import active_run


def callbacks() -> list:
    """The entry point Lightning's callback connector loads for each Trainer."""
    if not active_run.running():
        return []
    # Here, not at the top: `import harness_sim` imports this module, and .lightning imports
    # Lightning, which only a program that uses it should pay for.
    from .lightning import RunCallback
    return [RunCallback(active_run.windows(), active_run.lightning_steps())]


def _register() -> None:
    partial = sys.modules.get(__package__ + ".lightning")
    if partial is not None and not hasattr(partial, "register_accelerator"):
        return  # harness_sim.lightning is importing Lightning: it registers itself at its end
    from .lightning import register_accelerator  # here: once Lightning is imported (see callbacks)
    register_accelerator()


def install_import_hook() -> None:
    after_import("lightning.pytorch", _register)
