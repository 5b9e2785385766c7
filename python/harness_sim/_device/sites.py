"""How sites name the program's files: relative to the program's root (the git root above the
directory the program started in, else that directory), or from the package on for a file under
a directory packages are imported from (``transformers/trainer.py``), so that two machines'
reports name the same lines."""
from __future__ import annotations

import os
import site
import sys
import sysconfig

from .. import _C


def program_root(start: str | None = None) -> str:
    """The git root above ``start`` (default: the working directory), else ``start``."""
    start = os.path.realpath(start or os.getcwd())
    here = start
    while True:
        if os.path.exists(os.path.join(here, ".git")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return start
        here = parent


def package_dirs() -> list[str]:
    """Where this interpreter imports installed packages and the standard library from."""
    dirs = set()
    for name in ("purelib", "platlib", "stdlib", "platstdlib"):
        path = sysconfig.get_paths().get(name)
        if path:
            dirs.add(path)
    try:
        dirs.update(site.getsitepackages())
        dirs.add(site.getusersitepackages())
    except AttributeError:  # a virtualenv's old site module
        pass
    dirs.update(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    # A package's files are named through their real path as well as the one imported from.
    return sorted({d for p in dirs if p for d in (p, os.path.realpath(p))})


def configure(root: str | None = None) -> str:
    """Names sites relative to ``root`` (default: :func:`program_root`); returns it."""
    root = os.path.realpath(root) if root else program_root()
    _C.set_site_paths(root, package_dirs())
    return root
