"""python -m harness_sim --version: which torch the extension was built for, and a self-check.
python -m harness_sim run [options] -- SCRIPT.py [ARGS...]: count an unmodified program (run -h)."""
from __future__ import annotations

import argparse
import sys

import torch

# Importing the package checks the running torch against the one the extension was built for
# and refuses a mismatch (ImportError naming both).
import harness_sim
from harness_sim import _C
from harness_sim._version import BUILT_FOR


def main() -> int:
    if sys.argv[1:2] == ["run"]:
        from harness_sim._run import main as run
        from harness_sim._run.exits import keep_status_at_exit
        status = run(sys.argv[2:])
        keep_status_at_exit(status)  # the program's atexit handlers run after this
        return status
    parser = argparse.ArgumentParser(prog="python -m harness_sim", description=__doc__)
    parser.add_argument("--version", action="store_true",
                        help="print versions: this package, the torch it was built for, this torch")
    parser.add_argument("--check", action="store_true",
                        help="count one .item() on sim and print what was counted")
    args = parser.parse_args()
    if not (args.version or args.check):
        parser.print_help()
        return 2
    if args.version:
        print(f"harness_sim {harness_sim.__version__}: built for torch {BUILT_FOR} "
              f"(LibTorch {_C.TORCH_VERSION}), running torch {torch.__version__}; "
              f"report schema {_C.REPORT_SCHEMA_VERSION}; {harness_sim.device_count()} sim devices")
    if args.check:
        x = torch.ones(4, device="sim")
        with harness_sim.count() as c:
            (x * 2).sum().item()
        print(f"counted: {c.launches} launches {c.launches_by_op}, {c.syncs} sync(s): "
              + "; ".join(str(s) for s in c.sync_sites))
        ok = c.launches == 2 and c.syncs == 1 and c.total["d2h"]["count"] == 1
        print("ok" if ok else "UNEXPECTED COUNTS")
        return 0 if ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
