"""DeepSpeed on sim: ``SimAccelerator`` is a DeepSpeed accelerator for the simulated device, so that
``deepspeed.initialize`` (ZeRO stages 0-3) and Lightning's ``DeepSpeedStrategy`` run on sim ranks
and every collective, copy and sync DeepSpeed makes is counted. ``install()`` makes it DeepSpeed's
accelerator; ``import harness_sim`` does that by itself under ``python -m harness_sim run`` or
with ``DS_ACCELERATOR=sim``. The implementation, and what DeepSpeed sees of sim, is
``_frameworks/deepspeed.py``; importing this module imports DeepSpeed."""
from __future__ import annotations

from ._frameworks.deepspeed import COMMUNICATION_BACKEND, SimAccelerator, install

__all__ = ["SimAccelerator", "install", "COMMUNICATION_BACKEND"]
