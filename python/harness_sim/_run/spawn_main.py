"""A child that multiprocessing's spawn start method started while ``python -m harness_sim run``
counted its parent (_run/spawn.py): run runs this module as the child's program, and it runs
multiprocessing's own ``spawn_main`` with the arguments the parent gave it (KEY=VALUE)."""
import sys
from multiprocessing import spawn


def main(argv: list[str]) -> None:
    kwargs = {}
    for arg in argv[2:]:  # argv[1] is --multiprocessing-fork, which spawn_main asserts
        key, _, value = arg.partition("=")
        kwargs[key] = None if value == "None" else int(value)
    spawn.spawn_main(**kwargs)


if __name__ == "__main__":
    main(sys.argv)
