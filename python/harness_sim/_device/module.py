"""``torch.sim``: the device module PyTorch looks up for the PrivateUse1 backend named ``sim``
(as ``torch.cuda`` is for CUDA).

Its members are the contract PyTorch's own code relies on for an out-of-tree device (checked
against torch_openreg, PyTorch's example backend, and against what torch 2.11 calls on a device
module): ``device`` (the context manager ``torch/_utils.py`` enters to restore a storage onto the
device in ``torch.load``), ``_utils._get_device_index`` (``torch/serialization.py``'s
``_validate_device``), ``is_available`` / ``device_count`` / ``current_device`` / ``set_device``,
the RNG functions (``torch.random.fork_rng``, checkpointing), ``get_amp_supported_dtype``
(``torch.autocast``), streams and events, ``synchronize`` and memory statistics. The current
device is the sim device guard's (``torch.accelerator.current_device_index()`` reads the same):
per thread, as CUDA's is.
"""
from __future__ import annotations

import types

import torch

from .. import _C
from .mode import DEVICE_TYPE, SERVES_CUDA


def _get_device_index(device, optional: bool = False, allow_cpu: bool = False) -> int:
    """The index of a sim device given as an int, a string or a ``torch.device`` (None, or a
    device without an index: the current device when ``optional``), as
    ``torch.cuda._utils._get_device_index`` does for CUDA."""
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type == "cpu" and allow_cpu:
            return -1
        if device.type != DEVICE_TYPE:
            raise ValueError(f"expected a {DEVICE_TYPE} device (sim's), got {device}")
        device = device.index
    if device is None:
        if not optional:
            raise ValueError("expected a sim device with an index, got none")
        return current_device()
    if not isinstance(device, int):
        raise ValueError(f"expected a sim device, got {device!r}")
    return device


def is_available() -> bool:
    return True


def is_initialized() -> bool:
    return _C.is_initialized()


def _lazy_init() -> None:
    pass  # the backend is registered when harness_sim is imported


init = _lazy_init


def _is_in_bad_fork() -> bool:
    return False  # nothing of sim's state is lost in a forked child: it is host memory


def device_count() -> int:
    return _C.device_count()


def current_device() -> int:
    return _C.current_device()


def set_device(device) -> None:
    index = _get_device_index(device, optional=True)
    if index < 0:
        return
    if index >= device_count():
        raise ValueError(f"sim device {index} out of range: this process has {device_count()}")
    _C.set_device(index)


class device:
    """``with torch.sim.device(1):`` makes sim:1 the current device for the block, as
    ``torch.cuda.device`` does (an int, a string, a ``torch.device``; None or a negative index:
    no change)."""

    def __init__(self, device):
        self.idx = _get_device_index(device, optional=True) if device is not None else -1
        self.prev_idx = -1

    def __enter__(self):
        if self.idx >= 0:
            self.prev_idx = _C.exchange_device(self.idx)
        return self

    def __exit__(self, *exc):
        if self.prev_idx >= 0:
            _C.set_device(self.prev_idx)
        return False


class device_of(device):
    """``with torch.sim.device_of(tensor):`` the tensor's device, if it is a sim tensor."""

    def __init__(self, obj):
        super().__init__(obj.get_device() if obj.device.type == DEVICE_TYPE else -1)


def synchronize(device=None) -> None:
    """A device synchronize: counted as a sync ("device synchronize"), as on CUDA."""
    _C.synchronize(_get_device_index(device, optional=True))


_SYNC_DEBUG_MODES = {"default": 0, "warn": 1, "error": 2}


def set_sync_debug_mode(debug_mode) -> None:
    """CUDA's sync debug mode, on sim: ``"warn"`` (1) warns and ``"error"`` (2) fails at every
    wait an op makes of itself (``.item()``, a blocking copy, a host read of device data, the last
    known while counting), with CUDA's message; explicit synchronizes are not checked, as on CUDA.
    ``"default"`` (0) turns it off."""
    if isinstance(debug_mode, str):
        if debug_mode not in _SYNC_DEBUG_MODES:
            raise RuntimeError("invalid value of debug_mode, expected one of `default`, "
                               f"`warn`, `error`, got {debug_mode!r}")
        debug_mode = _SYNC_DEBUG_MODES[debug_mode]
    _C.set_sync_debug_mode(int(debug_mode))


def get_sync_debug_mode() -> int:
    return _C.sync_debug_mode()


# --- streams and events: torch's generic ones (sim work completes before an op returns) ------
Stream = torch.Stream
Event = torch.Event


def current_stream(device=None) -> torch.Stream:
    return torch.accelerator.current_stream(_get_device_index(device, optional=True))


default_stream = current_stream


def set_stream(stream: torch.Stream) -> None:
    torch.accelerator.set_stream(stream)


class stream:
    """``with torch.sim.stream(s):`` (sim has one stream per device; None: no change)."""

    def __init__(self, stream):
        self.stream = stream

    def __enter__(self):
        if self.stream is not None:
            self.stream.__enter__()
        return self.stream

    def __exit__(self, *exc):
        if self.stream is not None:
            self.stream.__exit__(*exc)
        return False


# Tensor.record_stream(s): CUDA's caching allocator keeps the tensor's block until the work queued on
# s is done (no kernel, no sync). Sim work is done when its op returns: nothing to keep. Without
# this kernel the op fell through to the CPU, which has none (DeepSpeed's ZeRO-3 calls it on every
# parameter it frees, partition_parameters.py free_param).
_record_stream = torch.library.Library("aten", "IMPL")
_record_stream.impl("record_stream", lambda self, stream: None, "PrivateUse1")


# --- memory ------------------------------------------------------------------------------------
# Allocated: what tensors hold, each request rounded as CUDA's caching allocator rounds it.
# Reserved: what that allocator would hold from the driver for the same requests (its 2 MiB and
# 20 MiB segments, blocks split and reused; harness/instrument/caching_allocator_model.h).
def memory_allocated(device=None) -> int:
    return _C.memory_stats(_get_device_index(device, optional=True))[0]


def max_memory_allocated(device=None) -> int:
    return _C.memory_stats(_get_device_index(device, optional=True))[1]


def memory_reserved(device=None) -> int:
    return _C.memory_stats(_get_device_index(device, optional=True))[2]


def max_memory_reserved(device=None) -> int:
    return _C.memory_stats(_get_device_index(device, optional=True))[3]


def reset_peak_memory_stats(device=None) -> None:
    _C.reset_peak(_get_device_index(device, optional=True))


def memory_stats(device=None) -> dict:
    allocated, peak, reserved, reserved_peak = _C.memory_stats(
        _get_device_index(device, optional=True))
    return {"allocated_bytes.all.current": allocated, "allocated_bytes.all.peak": peak,
            "reserved_bytes.all.current": reserved, "reserved_bytes.all.peak": reserved_peak}


def empty_cache() -> None:
    """The modelled segments with nothing allocated in them go back (CUDA's empty_cache)."""
    _C.empty_cache(current_device())


# --- RNG ------------------------------------------------------------------------------------
# On `sim`, ops draw random numbers from the CPU's generator (sim_runtime.cpp's hooks): one for
# every sim device. Where sim serves CUDA, each device has CUDA's kind of generator, a Philox seed
# and offset (cuda_generator.cpp), and these functions answer as torch.cuda's do.
def generator_of(device=None) -> torch.Generator:
    if not SERVES_CUDA:
        return torch.default_generator
    index = _get_device_index(device, optional=True) if device is not None else current_device()
    return _C.cuda_default_generator(index)


def _generators() -> list[torch.Generator]:
    return ([_C.cuda_default_generator(i) for i in range(device_count())] if SERVES_CUDA
            else [torch.default_generator])


def manual_seed(seed: int) -> None:
    # Not torch.manual_seed: that seeds every device's generator, this one included.
    generator_of().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for generator in _generators():
        generator.manual_seed(int(seed))


def seed() -> None:
    generator_of().seed()


def seed_all() -> None:
    random_seed = generator_of().seed()
    for generator in _generators():
        generator.manual_seed(random_seed)


def initial_seed() -> int:
    return generator_of().initial_seed()


def get_rng_state(device=None) -> torch.Tensor:
    return generator_of(device).get_state()


def set_rng_state(new_state: torch.Tensor, device=None) -> None:
    generator_of(device).set_state(new_state.clone())


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(i) for i in range(device_count())]


def set_rng_state_all(new_states) -> None:
    for i, state in enumerate(new_states):
        # on sim, one generator for every device: the last state wins
        set_rng_state(state, i if SERVES_CUDA else None)


# --- autocast ---------------------------------------------------------------------------------
def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.float16, torch.bfloat16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


_utils = types.ModuleType("torch.sim._utils")
_utils._get_device_index = _get_device_index
amp = types.ModuleType("torch.sim.amp")
amp.get_amp_supported_dtype = get_amp_supported_dtype

MEMBERS = ["is_available", "is_initialized", "init", "_lazy_init", "_is_in_bad_fork",
           "device_count", "current_device", "set_device", "device", "device_of", "synchronize",
           "Stream", "Event", "current_stream", "default_stream", "set_stream", "stream",
           "memory_allocated", "max_memory_allocated", "reset_peak_memory_stats",
           "memory_reserved", "max_memory_reserved", "memory_stats", "empty_cache",
           "manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed",
           "get_rng_state", "set_rng_state", "get_rng_state_all", "set_rng_state_all",
           "set_sync_debug_mode", "get_sync_debug_mode",
           "get_amp_supported_dtype", "is_bf16_supported", "_utils", "amp"]

device_module = types.ModuleType("torch.sim")
device_module.__doc__ = __doc__
for _name in MEMBERS:
    setattr(device_module, _name, globals()[_name])
