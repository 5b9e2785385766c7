"""``torch.sim``: the device module PyTorch looks up for the PrivateUse1 backend named ``sim``
(as ``torch.cuda`` is for CUDA): device count, current device, synchronize, memory, RNG."""
from __future__ import annotations

import types

import torch

from . import _C

_current = 0


def _index(device) -> int:
    if device is None:
        return _current
    if isinstance(device, int):
        return device
    device = torch.device(device)
    return _current if device.index is None else device.index


def is_available() -> bool:
    return True


def is_initialized() -> bool:
    return _C.is_initialized()


def _lazy_init() -> None:
    pass


def device_count() -> int:
    return _C.device_count()


def current_device() -> int:
    return _current


def set_device(device) -> None:
    global _current
    index = _index(device)
    if not 0 <= index < device_count():
        raise ValueError(f"sim device {index} out of range: this process has {device_count()}")
    _current = index


def synchronize(device=None) -> None:
    """A device synchronize: counted as a sync ("device synchronize"), as on CUDA."""
    _C.synchronize(_index(device))


def memory_allocated(device=None) -> int:
    return _C.memory_stats(_index(device))[0]


def max_memory_allocated(device=None) -> int:
    return _C.memory_stats(_index(device))[1]


def reset_peak_memory_stats(device=None) -> None:
    _C.reset_peak(_index(device))


# Sim ops draw random numbers from the CPU's generator (sim_runtime.cpp's hooks).
def _is_in_bad_fork() -> bool:
    return False


def manual_seed(seed: int) -> None:
    # Not torch.manual_seed: that seeds every device's generator, this one included.
    torch.default_generator.manual_seed(seed)


manual_seed_all = manual_seed


def get_rng_state(device=None) -> torch.Tensor:
    return torch.get_rng_state()


def set_rng_state(state: torch.Tensor, device=None) -> None:
    torch.set_rng_state(state)


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.float16, torch.bfloat16]


def is_bf16_supported() -> bool:
    return True


device_module = types.ModuleType("torch.sim")
for _name in ["is_available", "is_initialized", "_lazy_init", "device_count", "current_device",
              "set_device", "synchronize", "memory_allocated", "max_memory_allocated",
              "reset_peak_memory_stats", "manual_seed", "manual_seed_all", "get_rng_state",
              "set_rng_state", "get_amp_supported_dtype", "is_bf16_supported", "_is_in_bad_fork"]:
    setattr(device_module, _name, globals()[_name])
