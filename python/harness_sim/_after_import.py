"""Running a function right after a module has been imported, without importing it: how
harness_sim joins a library (torch's compiler, Lightning, DeepSpeed) only in a program that uses
it. Imports nothing of the package (the layers above share it: tests/layering/check_layers.py)."""
from __future__ import annotations

import importlib.abc
import sys
from typing import Callable


class AfterImport(importlib.abc.MetaPathFinder):
    """Runs a function right after a module has been executed by its own loader."""

    def __init__(self, name: str, then: Callable[[], None]):
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


def after_import(name: str, then: Callable[[], None]) -> None:
    """``then()`` at once where module `name` has been imported already, else right after it is
    (once: a second call for the same module while the first waits adds nothing)."""
    if name in sys.modules:
        then()
    elif not any(isinstance(f, AfterImport) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, AfterImport(name, then))
