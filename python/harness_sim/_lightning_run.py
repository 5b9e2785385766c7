"""Lightning without code changes: ``accelerator="sim"`` by name once harness_sim is imported, and
what ``python -m harness_sim run`` adds to every Trainer of the program it runs.

Importing Lightning is slow, and harness_sim does not need it: ``install_import_hook`` registers
``SimAccelerator`` in Lightning's ``AcceleratorRegistry`` when ``lightning.pytorch`` has finished
importing (at once if it already has). ``callbacks`` is the ``lightning.pytorch.callbacks_factory``
entry point (python/pyproject.toml): Lightning calls it for every Trainer, and it returns
harness_sim's ``RunCallback`` only while ``run`` counts a program.
"""
from __future__ import annotations

import importlib.abc
import sys

_active: dict | None = None  # {"windows": StepWindows, "lightning_steps": bool} while run counts


def activate(windows, lightning_steps: bool) -> None:
    global _active
    _active = {"windows": windows, "lightning_steps": lightning_steps}


def deactivate() -> None:
    global _active
    _active = None


def running() -> bool:
    """Whether ``python -m harness_sim run`` is counting a program in this process."""
    return _active is not None


def callbacks() -> list:
    """The entry point Lightning's callback connector loads for each Trainer."""
    if _active is None:
        return []
    # Here, not at the top: `import harness_sim` imports this module, and .lightning imports
    # Lightning, which only a program that uses it should pay for.
    from .lightning import RunCallback
    return [RunCallback(_active["windows"], _active["lightning_steps"])]


def _register() -> None:
    partial = sys.modules.get("harness_sim.lightning")
    if partial is not None and not hasattr(partial, "register_accelerator"):
        return  # harness_sim.lightning is importing Lightning: it registers itself at its end
    from .lightning import register_accelerator  # here: once Lightning is imported (see callbacks)
    register_accelerator()


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs a function right after a module has been executed by its own loader."""

    def __init__(self, name: str, then):
        self.name, self.then = name, then

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader, then, me = spec.loader, self.then, self
        exec_module = loader.exec_module

        def exec_then(module):
            exec_module(module)
            if me in sys.meta_path:
                sys.meta_path.remove(me)
            then()

        loader.exec_module = exec_then
        return spec


def install_import_hook() -> None:
    if "lightning.pytorch" in sys.modules:
        _register()
    elif not any(isinstance(f, _AfterImport) and f.name == "lightning.pytorch"
                 for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport("lightning.pytorch", _register))
