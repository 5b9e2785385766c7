"""The ``python -m harness_sim run`` command, a module per step: command (``main``, the steps in
order), options, program (the program's run: its step windows, its watchdog), ranks and spawn
(the other ranks), output (the report, trace, summary and gates), exits (run's exit statuses),
spawn_main (a spawned child's program). The highest layer below the public API: may import
_frameworks, _cuda, _device and the base; never harness_sim itself or its public modules.
"""
from .command import main

__all__ = ["main"]
