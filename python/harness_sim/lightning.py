"""Lightning on sim: ``lightning.Trainer(accelerator=SimAccelerator(), devices=1)`` trains on the
simulated device, and ``CountingCallback`` counts the training steps with harness_sim.

``import harness_sim`` alone registers ``accelerator="sim"`` and DDP on sim ranks once Lightning is
imported (``register_accelerator``). The implementation is ``_frameworks/lightning.py``; importing
this module imports Lightning."""
from __future__ import annotations

from ._frameworks.lightning import (CountingCallback, RunCallback, SimAccelerator, SimDDPStrategy,
                                    register_accelerator)

__all__ = ["SimAccelerator", "CountingCallback", "SimDDPStrategy", "RunCallback",
           "register_accelerator"]
