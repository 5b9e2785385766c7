"""Which torch this package's extension was built for, and the check that refuses a mismatch."""
from __future__ import annotations

import torch

try:
    from ._build_info import TORCH_VERSION as BUILT_FOR  # written by setup.py at build time
except ImportError:  # a source tree without a build
    BUILT_FOR = None


def _release(version: str) -> str:
    return version.split("+", 1)[0]


# The running torch's (major, minor): what the release-dependent rules and tests key on
# (harness/instrument/sim/torch_release.h is the C++ side's).
TORCH_RELEASE: tuple[int, int] = tuple(int(p) for p in _release(torch.__version__).split(".")[:2])


def check_torch() -> None:
    """Raises ImportError unless the running torch is the release the extension was built for.

    The extension is C++ compiled against torch's headers and linked against its libraries:
    another release has another ABI, and loading it would crash or miscount.
    """
    if BUILT_FOR is None:
        raise ImportError(
            "harness_sim is not built: install it with "
            "`pip install --no-build-isolation ./python` (see README, 'From Python')")
    if _release(torch.__version__) != _release(BUILT_FOR):
        raise ImportError(
            f"harness_sim was built for torch {BUILT_FOR} but this Python has torch "
            f"{torch.__version__}: reinstall it against this torch "
            "(`pip install --no-build-isolation --force-reinstall ./python`)")
