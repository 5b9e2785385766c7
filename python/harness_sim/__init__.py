"""harness_sim: the harness's simulated accelerator ``sim`` and its instrument, inside PyTorch.

``import harness_sim`` registers PyTorch's PrivateUse1 backend under the name ``sim``. A sim
tensor lives in host memory, but crossing the host-device boundary follows CUDA's rules: every
op on sim tensors is one kernel launch, ``.item()`` is a device-to-host copy and a sync, a
blocking copy between the host and sim is a copy and a sync. ``harness_sim.count()`` counts
them, by phase, exactly and deterministically, on a machine without a GPU::

    import torch, harness_sim
    model = torch.nn.Linear(8, 8).to("sim")
    with harness_sim.count() as c:
        with c.step(), harness_sim.phase("train.forward"):
            model(torch.randn(4, 8, device="sim")).sum().item()
    print(c.syncs, c.sync_sites)     # 1 sync: aten::_local_scalar_dense (item) in train.forward
    c.report("python.json")          # a schema-v1 report: `bench compare` and gates read it

See README.md, "From Python". The package is grouped by concept into layers, lowest first; a
module imports only its own layer and those below it (tests/layering/check_layers.py checks it):

    _C, _version, _after_import  base: the C++ extension, the torch release check, an import hook
    _device/       the sim device in torch, and the instrument's Python side (count, phase, reports)
    _cuda/         what ``run --as-cuda`` makes of CUDA
    _frameworks/   Lightning, DeepSpeed and pytest on sim (the public lightning, deepspeed, pytest)
    _run/          the ``python -m harness_sim run`` command
    top            this module, __main__, and the public modules lightning, deepspeed and pytest
"""
from __future__ import annotations

import sys

try:
    import torch
except ImportError as _e:
    if sys.argv[:1] == ["-m"]:  # python -m harness_sim ...: the command's status, with why
        print(f"python -m harness_sim: cannot import torch ({_e}); install the torch harness_sim "
              "was built against", file=sys.stderr)
        raise SystemExit(3) from None
    raise

from ._version import check_torch as _check_torch

_check_torch()

from . import _C  # noqa: E402  (after the version check: a mismatched build must not load)
from ._device.counting import (  # noqa: E402
    CopySite, Counts, SyncSite, allow_sync, count, phase, write_report)
# Where sim is to serve CUDA itself (run --as-cuda with HARNESS_SIM_AS_CUDA=device, issue 50),
# PrivateUse1 stays unnamed: a named one would be torch's accelerator, not CUDA.
from ._device.mode import (  # noqa: E402
    BACKEND_NAME, DEVICE_COUNT, SERVES_CUDA as _SERVES_CUDA, device)
from ._device.module import device_module as _device_module  # noqa: E402

__all__ = ["count", "phase", "allow_sync", "Counts", "SyncSite", "CopySite", "write_report", "device",
           "device_count", "synchronize", "memory_allocated", "max_memory_allocated", "reset_peak_memory_stats",
           "register_distributed_backend", "BACKEND_NAME"]
__version__ = _C.HARNESS_VERSION

_C.initialize(DEVICE_COUNT, not _SERVES_CUDA)  # names PrivateUse1 "sim" in c10, as rename_privateuse1_backend does
from ._device import shapes as _shapes, sites as _sites  # noqa: E402

_shapes.install()  # under --compute shapes: device tensors print their shape (docs/full-size.md)

_sites.configure()  # sites name files from the program's root (python -m harness_sim run's too)
if not _SERVES_CUDA and not hasattr(torch, BACKEND_NAME):
    torch.utils.rename_privateuse1_backend(BACKEND_NAME)  # the same name again: Python's side
    torch._register_device_module(BACKEND_NAME, _device_module)
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True)
elif _SERVES_CUDA:
    torch.sim = _device_module  # harness_sim's own calls (no program sees a sim device)

device_count = _device_module.device_count
synchronize = _device_module.synchronize
memory_allocated = _device_module.memory_allocated
max_memory_allocated = _device_module.max_memory_allocated
reset_peak_memory_stats = _device_module.reset_peak_memory_stats

from ._device.distributed import register_distributed_backend  # noqa: E402

register_distributed_backend()

from ._frameworks.lightning_run import install_import_hook as _install_lightning_hook  # noqa: E402

_install_lightning_hook()  # Trainer(accelerator="sim") once Lightning is imported

from ._frameworks.deepspeed_run import install_import_hook as _install_deepspeed_hook  # noqa: E402

_install_deepspeed_hook()  # sim as DeepSpeed's accelerator under run or with DS_ACCELERATOR=sim

from ._device import compile as _compile  # noqa: E402

_compile.install()  # torch.compile on sim, once torch's compiler is imported
