"""DeepSpeed on sim: ``SimAccelerator`` is a DeepSpeed accelerator for the simulated device, so that
``deepspeed.initialize`` (ZeRO stages 0-3) and Lightning's ``DeepSpeedStrategy`` run on sim ranks
and every collective, copy and sync DeepSpeed makes is counted.

DeepSpeed picks its accelerator once (``deepspeed.accelerator.get_accelerator``) and names only its
own there (``DS_ACCELERATOR`` accepts cuda, cpu, xpu, ...); a new device is set with
``deepspeed.accelerator.set_accelerator`` before the first ``get_accelerator``, which ``import
deepspeed`` already makes. ``install()`` does that. ``import harness_sim`` does it by itself when
DeepSpeed's accelerator module has been imported, under ``python -m harness_sim run`` or with
``DS_ACCELERATOR=sim`` (_frameworks/deepspeed_run.py).

The accelerator behaves as DeepSpeed's CUDA accelerator does (an asynchronous device: streams and
events, pinned host memory, ``is_synchronized_device() == False``), so DeepSpeed takes the code
paths it takes on a GPU; its communication backend is harness_sim's counting c10d backend for sim
tensors beside Gloo for CPU tensors (``"cpu:gloo,sim:sim"``). DeepSpeed's own compiled ops (fused
Adam, CPU Adam, async I/O) are not built for sim: their builders are DeepSpeed's
``NotImplementedBuilder``, so DeepSpeed keeps the program's own torch optimizer."""
from __future__ import annotations

import functools
import importlib

import torch
from deepspeed.accelerator.abstract_accelerator import DeepSpeedAccelerator

from .._device.mode import DEVICE_TYPE

# Where sim serves CUDA itself (run --as-cuda), its device is "cuda" and DeepSpeed's code sees
# CUDA tensors and a "cuda" accelerator, as on a GPU machine.
COMMUNICATION_BACKEND = f"cpu:gloo,{DEVICE_TYPE}:sim"


class SimAccelerator(DeepSpeedAccelerator):
    """harness_sim's ``sim`` device as DeepSpeed's accelerator (deepspeed/accelerator/
    abstract_accelerator.py; modelled on cuda_accelerator.py, with torch.sim for torch.cuda)."""

    def __init__(self):
        self._name = DEVICE_TYPE
        self._communication_backend_name = COMMUNICATION_BACKEND
        self._compile_backend = "inductor"

    # What kind of device: an asynchronous one, as CUDA (DeepSpeed then records and waits for
    # events, uses an all-gather stream, and does not time with host timers).
    def is_synchronized_device(self):
        return False

    def use_host_timers(self):
        return self.is_synchronized_device()

    def resolves_data_dependency(self):
        return self.is_synchronized_device()

    def handles_memory_backpressure(self):
        return self.is_synchronized_device()

    # Device APIs
    def device_name(self, device_index=None):
        return self._name if device_index is None else f"{self._name}:{device_index}"

    def device(self, device_index=None):
        return torch.sim.device(device_index)

    def set_device(self, device_index):
        torch.sim.set_device(device_index)

    def current_device(self):
        return torch.sim.current_device()

    def current_device_name(self):
        return f"{self._name}:{torch.sim.current_device()}"

    def device_count(self):
        return torch.sim.device_count()

    def synchronize(self, device_index=None):
        return torch.sim.synchronize(device_index)

    # RNG APIs
    def random(self):
        return torch.random

    def set_rng_state(self, new_state, device_index=None):
        return torch.sim.set_rng_state(new_state, self._device(device_index))

    def get_rng_state(self, device_index=None):
        return torch.sim.get_rng_state(self._device(device_index))

    def manual_seed(self, seed):
        return torch.sim.manual_seed(seed)

    def manual_seed_all(self, seed):
        return torch.sim.manual_seed(seed)

    def initial_seed(self):
        return torch.sim.initial_seed()

    def default_generator(self, device_index):
        return torch.random.default_generator  # sim's random numbers come from the host's

    # Streams and events: torch's generic ones on the current sim device
    @property
    def Stream(self):
        return _on_current_device(torch.Stream)

    def stream(self, stream):
        return torch.sim.stream(stream)

    def current_stream(self, device_index=None):
        return torch.sim.current_stream(device_index)

    def default_stream(self, device_index=None):
        return torch.sim.default_stream(device_index)

    @property
    def Event(self):
        return _on_current_device(torch.Event)

    # Memory management
    def empty_cache(self):
        return torch.sim.empty_cache()

    def memory_allocated(self, device_index=None):
        return torch.sim.memory_allocated(device_index)

    def max_memory_allocated(self, device_index=None):
        return torch.sim.max_memory_allocated(device_index)

    def reset_max_memory_allocated(self, device_index=None):
        return torch.sim.reset_peak_memory_stats(device_index)

    def memory_cached(self, device_index=None):
        return torch.sim.memory_allocated(device_index)  # sim caches nothing

    def max_memory_cached(self, device_index=None):
        return torch.sim.max_memory_allocated(device_index)

    def reset_max_memory_cached(self, device_index=None):
        return torch.sim.reset_peak_memory_stats(device_index)

    def memory_stats(self, device_index=None):
        return torch.sim.memory_stats(device_index)

    def reset_peak_memory_stats(self, device_index=None):
        return torch.sim.reset_peak_memory_stats(device_index)

    def memory_reserved(self, device_index=None):
        return torch.sim.memory_reserved(device_index)

    def max_memory_reserved(self, device_index=None):
        return torch.sim.max_memory_reserved(device_index)

    def total_memory(self, device_index=None):
        import psutil  # a DeepSpeed requirement
        return psutil.virtual_memory().total  # sim memory is host memory

    def available_memory(self, device_index=None):
        import psutil
        return psutil.virtual_memory().available

    # Data types
    def is_bf16_supported(self):
        return torch.sim.is_bf16_supported()

    def is_fp16_supported(self):
        return True

    def supported_dtypes(self):
        return [torch.float, torch.half, torch.bfloat16]

    # Misc
    def amp(self):
        return torch.amp

    def is_available(self):
        return True

    def range_push(self, msg):
        return None

    def range_pop(self):
        return None

    def lazy_call(self, callback):
        return callback()

    def communication_backend_name(self):
        return self._communication_backend_name

    def is_triton_supported(self):
        return False

    # Graph operations: none (as DeepSpeed's CPU and XPU accelerators)
    def create_graph(self):
        return None

    def capture_to_graph(self, graph, pool=None, stream=None):
        from deepspeed.runtime.utils import noop_context
        return noop_context()

    def replay_graph(self, graph):
        return None

    # Tensor operations: tensors on the current sim device (as the XPU accelerator's)
    @property
    def BFloat16Tensor(self):
        return self._tensor(torch.bfloat16)

    @property
    def ByteTensor(self):
        return self._tensor(torch.uint8)

    @property
    def DoubleTensor(self):
        return self._tensor(torch.double)

    @property
    def FloatTensor(self):
        return self._tensor(torch.float)

    @property
    def HalfTensor(self):
        return self._tensor(torch.half)

    @property
    def IntTensor(self):
        return self._tensor(torch.int)

    @property
    def LongTensor(self):
        return self._tensor(torch.long)

    def pin_memory(self, tensor, align_bytes=1):
        return tensor.pin_memory()

    def is_pinned(self, tensor):
        return tensor.is_pinned()

    def on_accelerator(self, tensor):
        return tensor.device.type == self._name

    # Op builders: DeepSpeed's compiled ops are not built for sim (see the module's docstring)
    def op_builder_dir(self):
        return "deepspeed.ops.op_builder.cpu"

    def create_op_builder(self, op_name):
        return self.get_op_builder(op_name)()

    def get_op_builder(self, class_name):
        from deepspeed.ops.op_builder.cpu import NotImplementedBuilder
        return NotImplementedBuilder

    def build_extension(self):
        from torch.utils.cpp_extension import BuildExtension
        return BuildExtension

    def export_envs(self):
        return []

    def visible_devices_envs(self):
        return []

    def set_visible_devices_envs(self, current_env, local_accelerator_ids):
        return None

    def get_compile_backend(self):
        return self._compile_backend

    def set_compile_backend(self, backend):
        supported = torch._dynamo.list_backends(exclude_tags=())
        if backend not in supported:
            raise ValueError(f"{backend} not supported by {self.device_name()}. "
                             f"Supported Backends are {supported}")
        self._compile_backend = backend

    def _device(self, device_index):
        return self._name if device_index is None else f"{self._name}:{device_index}"

    def _tensor(self, dtype):
        return functools.partial(torch.tensor, dtype=dtype, device=self.current_device_name())


def _on_current_device(cls):
    """``cls(...)`` (torch.Stream, torch.Event) on the current sim device unless told otherwise:
    DeepSpeed makes them as ``get_accelerator().Stream()``, as torch.cuda.Stream() is made."""

    @functools.wraps(cls, updated=())
    def make(*args, **kwargs):
        if not args and "device" not in kwargs:
            kwargs["device"] = f"{DEVICE_TYPE}:{torch.sim.current_device()}"
        kwargs.pop("enable_timing", None) if cls is torch.Stream else None
        return cls(*args, **kwargs)

    return make


def install() -> SimAccelerator:
    """Makes sim DeepSpeed's accelerator (``deepspeed.accelerator.set_accelerator``) and returns
    it; does nothing when it already is."""
    # importlib: at its first import, this runs before deepspeed.accelerator has the attribute
    real_accelerator = importlib.import_module("deepspeed.accelerator.real_accelerator")
    current = real_accelerator.ds_accelerator
    if isinstance(current, SimAccelerator):
        return current
    accelerator = SimAccelerator()
    real_accelerator.set_accelerator(accelerator)
    return accelerator

