"""What ``run --as-cuda`` does with every public name of ``torch.cuda`` (and its submodules
``amp``, ``nvtx``, ``memory``, ``graphs``, ``streams``, ``random``, ``profiler``),
``torch.backends.cuda``, ``torch.backends.cudnn`` and ``torch.accelerator``.

Each name is one of four kinds:

- **mapped**: runs on sim (sim's memory, generator, streams, autocast, the report's phases);
- **answered**: answered as a machine with one H100 SXM answers;
- **as is**: torch's own, which needs no GPU (a flag sim's kernels read as CUDA's do, a fact of
  the wheel's build, an exception class, a decorator);
- **refused**: refused when called or made, naming the call (``UnsupportedOnSim``: exit 3); a
  class stays a class, so a library may still annotate with it, subclass it or test
  ``isinstance``.

``surface()`` is the table; ``AsCuda.install`` sets every row's stand-in, and
``markdown()`` is docs/as-cuda.md's table. ``public_names`` lists what a module offers (its
``__all__``); the tests fail on a name the table does not classify, so a new torch's names cannot
slip through unclassified.
"""
from __future__ import annotations

import contextlib
import importlib
import os
import types
from dataclasses import dataclass

import torch

from .._device.mode import DEVICE_TYPE, SERVES_CUDA
from .._device.module import generator_of

MAPPED, ANSWERED, AS_IS, REFUSED = "mapped", "answered", "as is", "refused"

# Modules whose names are all torch.cuda's own (torch.cuda re-exports them): their rows are
# torch.cuda's.
SHARED_WITH_TORCH_CUDA = ("torch.cuda.memory", "torch.cuda.graphs", "torch.cuda.streams",
                          "torch.cuda.random")
MODULES = ("torch.cuda", "torch.cuda.amp", "torch.cuda.nvtx", *SHARED_WITH_TORCH_CUDA,
           "torch.cuda.profiler", "torch.backends.cuda", "torch.backends.cudnn",
           "torch.accelerator")


class UnsupportedOnSim(RuntimeError):
    """A CUDA feature sim cannot run (a kernel of the program's own, a compiler, a graph)."""


def refusal(call: str, why: str) -> str:
    return f"{call} is not supported on sim ({why}); run the program without it, or on a GPU"


def refused_function(call: str, why: str):
    def refuse(*args, **kwargs):
        raise UnsupportedOnSim(refusal(call, why))
    refuse.__name__ = call.rsplit(".", 1)[-1]
    refuse.__qualname__ = refuse.__name__
    return refuse


def refused_class(call: str, why: str) -> type:
    """A class that may be annotated, subclassed and checked with ``isinstance``; making one is
    refused, naming it."""
    def __new__(cls, *args, **kwargs):
        raise UnsupportedOnSim(refusal(call, why))
    name = call.rsplit(".", 1)[-1]
    return type(name, (), {"__new__": __new__, "__module__": "torch.cuda",
                           "__doc__": f"{call} under --as-cuda: {why}, refused when made."})


@dataclass(frozen=True)
class Row:
    kind: str
    note: str
    # What --as-cuda puts in the module's place; None: torch's own stays (as is), or the mapping
    # is made elsewhere (the note says where).
    value: object = None
    # A name not every supported torch has: the release where the table first met it (2.11 is the
    # oldest supported). Its row applies where the running torch has the name; a row without it
    # whose name torch lacks is stale (test_as_cuda_surface.py).
    since: str | None = None


def public_names(module_name: str) -> list[str]:
    """The names a module offers programs: its ``__all__``; for ``torch.cuda.streams`` (which
    has none) the classes it defines; for ``torch.backends.cudnn`` its functions, constants and
    flags."""
    module = importlib.import_module(module_name)
    if module_name == "torch.backends.cudnn":
        inner = module.m if hasattr(module, "m") else module
        names = [n for n, v in vars(inner).items() if not n.startswith("_") and (
            n.isupper() or getattr(v, "__module__", None) == inner.__name__)]
        flags = [n for n, v in vars(type(module)).items() if not n.startswith("_")]
        return sorted(set(names) | set(flags))
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, v in vars(module).items() if not n.startswith("_") and
                 isinstance(v, type) and v.__module__ == module_name]
    return sorted(names)


# --- the machine the counts stand for ----------------------------------------------------------

class DeviceProperties:
    """``torch.cuda.get_device_properties`` under ``--as-cuda``: one H100 SXM (sm 9.0, 80 GB, 132
    SMs); the fields programs read (``torch._C._CudaDeviceProperties``'s)."""

    name = "NVIDIA H100 80GB HBM3"
    major, minor = 9, 0
    total_memory = 85_520_809_984  # 81559 MiB, as an H100 SXM reports it
    multi_processor_count = 132
    is_integrated = False
    is_multi_gpu_board = False
    max_threads_per_multi_processor = 2048
    warp_size = 32
    regs_per_multiprocessor = 65536
    L2_cache_size = 52_428_800
    clock_rate = 1_980_000  # kHz
    gcnArchName = "NVIDIA H100 80GB HBM3"
    uuid = "00000000-0000-0000-0000-000000000000"

    def __repr__(self) -> str:
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, "
                f"minor={self.minor}, total_memory={self.total_memory // 2**20}MB, "
                f"multi_processor_count={self.multi_processor_count}, L2_cache_size=50MB) "
                "(harness_sim --as-cuda)")


H100 = DeviceProperties()


def visible_device_count() -> int:
    """``torch.cuda.device_count()`` under ``--as-cuda``: a machine with one GPU, unless
    ``CUDA_VISIBLE_DEVICES`` names more (up to sim's devices), as CUDA counts them."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return 1
    named = [d for d in visible.split(",") if d.strip()]
    return min(len(named), torch.sim.device_count())


def map_device(d):
    """A device that names CUDA names sim instead (anything else is returned as it is); where sim
    serves CUDA itself, CUDA's name is sim's already."""
    if SERVES_CUDA:
        return d
    if isinstance(d, torch.device):
        return torch.device("sim", d.index) if d.type == "cuda" else d
    if isinstance(d, str) and (d == "cuda" or d.startswith("cuda:")):
        return "sim" + d[4:]
    return d


def device_index(device) -> int | None:
    if device is None or isinstance(device, int):
        return device
    return torch.device(map_device(torch.device(device))).index


def mem_get_info(device=None) -> tuple[int, int]:
    """(free, total) bytes: the H100's total less what sim holds on the device."""
    used = torch.sim.memory_allocated(device_index(device))
    return H100.total_memory - used, H100.total_memory


def can_device_access_peer(device, peer_device) -> bool:
    """Peers on an NVLink machine: two different visible devices reach each other."""
    a, b = device_index(device) or 0, device_index(peer_device) or 0
    return a != b and max(a, b) < visible_device_count()


def list_gpu_processes(device=None) -> str:
    return f"GPU:{device_index(device) or 0}\nno processes are running"


class _MemoryFraction:
    """``set_per_process_memory_fraction``: kept, and returned by ``get_...``; sim's memory has
    no cap to apply it to."""

    def __init__(self):
        self.fractions: dict[int, float] = {}

    def set(self, fraction: float, device=None) -> None:
        if not 0 <= fraction <= 1:
            raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
        self.fractions[device_index(device) or 0] = float(fraction)

    def get(self, device=None) -> float:
        return self.fractions.get(device_index(device) or 0, 1.0)


# --- sim's own, in CUDA's shapes ---------------------------------------------------------------

class Stream:
    """``torch.cuda.Stream`` on sim: one stream, in order; ``synchronize`` is a counted sync."""

    # What torch.Stream has: its id, device index and device type (c10's DeviceType number:
    # CUDA 1, PrivateUse1 20), as FSDP2 of torch 2.15 passes them to an op (record_grad_output_stream).
    stream_id = 0

    def __init__(self, device=None, priority=0, **kwargs):
        self.device = torch.device(DEVICE_TYPE, torch.sim.current_device())

    @property
    def device_index(self) -> int:
        return self.device.index

    @property
    def device_type(self) -> int:
        return 1 if self.device.type == "cuda" else 20

    def synchronize(self):
        torch.sim.synchronize()

    def wait_stream(self, stream):
        pass

    def wait_event(self, event):
        pass

    def record_event(self, event=None):
        event = event or Event()
        event.record(self)
        return event

    def query(self):
        return True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class StreamContext:
    """``with torch.cuda.StreamContext(s):``: sim's one stream is always current."""

    def __init__(self, stream):
        self.stream = stream

    def __enter__(self):
        return self.stream

    def __exit__(self, *exc):
        return False


class Event:
    """``torch.cuda.Event`` on sim: ``synchronize`` from the host is a counted sync;
    ``elapsed_time`` is the host time between the records, in ms."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        self._t = None

    def record(self, stream=None):
        import time
        self._t = time.perf_counter_ns()

    def synchronize(self):
        torch.sim.synchronize()

    def query(self):
        return True

    def wait(self, stream=None):
        pass

    def elapsed_time(self, end):
        return (end._t - self._t) / 1e6


def device_classes(sim) -> tuple[type, type]:
    """``torch.cuda.device`` and ``device_of``: contexts on sim's device (a
    ``torch.device("cuda", i)`` made before ``--as-cuda``'s mode too)."""

    class device(sim.device):
        def __init__(self, device):
            super().__init__(map_device(device))

    class device_of(device):
        def __init__(self, obj):
            super().__init__(obj.get_device() if obj.device.type in ("sim", "cuda") else -1)

    return device, device_of


def _legacy_tensor_type(name: str, dtype: torch.dtype) -> type:
    """``torch.cuda.FloatTensor`` and the like: a size makes an uninitialised sim tensor, a
    sequence a sim tensor of it (an H2D copy, as on CUDA); ``isinstance`` checks a sim tensor's
    dtype."""

    class Meta(type):
        def __instancecheck__(cls, obj):
            return (isinstance(obj, torch.Tensor) and obj.device.type == DEVICE_TYPE
                    and obj.dtype == dtype)

    def __new__(cls, *args, device=None):
        where = torch.device(DEVICE_TYPE, device_index(device) if device is not None
                             else torch.sim.current_device())
        if len(args) == 1 and not isinstance(args[0], (int, torch.Size)):
            return torch.tensor(args[0], dtype=dtype, device=where)
        return torch.empty(args or (0,), dtype=dtype, device=where)

    return Meta(name, (), {"__new__": __new__, "__module__": "torch.cuda", "dtype": dtype})


_LEGACY_TENSORS = {"BFloat16Tensor": torch.bfloat16, "BoolTensor": torch.bool,
                   "ByteTensor": torch.uint8, "CharTensor": torch.int8,
                   "DoubleTensor": torch.float64, "FloatTensor": torch.float32,
                   "HalfTensor": torch.float16, "IntTensor": torch.int32,
                   "LongTensor": torch.int64, "ShortTensor": torch.int16}
_LEGACY_STORAGES = ("BFloat16Storage", "BoolStorage", "ByteStorage", "CharStorage",
                    "ComplexDoubleStorage", "ComplexFloatStorage", "DoubleStorage",
                    "FloatStorage", "HalfStorage", "IntStorage", "LongStorage", "ShortStorage")


def memory_stats_as_nested_dict(device=None) -> dict:
    nested: dict = {}
    for key, value in torch.sim.memory_stats(device_index(device)).items():
        *path, leaf = key.split(".")
        node = nested
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


def memory_summary(device=None, abbreviated=False) -> str:
    index = device_index(device) or 0
    return (f"harness_sim --as-cuda: sim:{index} holds "
            f"{torch.sim.memory_allocated(index)} bytes of tensors "
            f"(peak {torch.sim.max_memory_allocated(index)}); sim has no caching allocator, so "
            "no segments, splits or retries to summarise")


class Cudart:
    """``torch.cuda.cudart()`` under ``--as-cuda``: the CUDA profiler's start and stop (what
    ``torch.cuda.profiler`` and Nsight-driven scripts call) do nothing on sim and succeed; any
    other runtime call is refused, naming it."""

    cudaError = types.SimpleNamespace(success=0)

    def cudaProfilerStart(self) -> int:
        return 0

    def cudaProfilerStop(self) -> int:
        return 0

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return refused_function(f"torch.cuda.cudart().{name}",
                                "the CUDA runtime is not sim's")


def check_error(res: int) -> None:
    if res != 0:
        raise torch.cuda.CudaError(res)


@contextlib.contextmanager
def profiler_profile():
    yield


def _accelerator_capability(device=None) -> dict:
    """``torch.accelerator.get_device_capability`` as CUDA's answers: every dtype."""
    dtypes = {v for v in vars(torch).values() if isinstance(v, torch.dtype)}
    return {"supported_dtypes": dtypes}


# --- the table ---------------------------------------------------------------------------------

_GRAPHS = "CUDA graphs capture GPU kernels"
_ALLOCATOR = "sim's memory is not CUDA's caching allocator"


def _torch_cuda_rows(sim, fraction: _MemoryFraction) -> dict[str, Row]:
    idle = "an idle H100's"
    device, device_of = device_classes(sim)
    rows = {
        # the device and the machine
        "is_available": Row(ANSWERED, "true", lambda: True),
        "is_initialized": Row(ANSWERED, "true", lambda: True),
        "init": Row(MAPPED, "sim's", sim.init),
        "device_count": Row(ANSWERED, "1, or as many as `CUDA_VISIBLE_DEVICES` names (up to "
                            "sim's 8)", visible_device_count),
        "current_device": Row(MAPPED, "sim's", sim.current_device),
        "set_device": Row(MAPPED, "sim's", lambda d: sim.set_device(
            d if isinstance(d, int) else map_device(torch.device(d)))),
        "device": Row(MAPPED, "a context on sim's device", device),
        "device_of": Row(MAPPED, "a context on the tensor's sim device", device_of),
        "get_device_name": Row(ANSWERED, f"`{H100.name}`", lambda device=None: H100.name),
        "get_device_properties": Row(ANSWERED, "sm 9.0, 80 GB, 132 SMs",
                                     lambda device=None: H100),
        "get_device_capability": Row(ANSWERED, "(9, 0)",
                                     lambda device=None: (H100.major, H100.minor)),
        "is_bf16_supported": Row(ANSWERED, "true", lambda including_emulation=True: True),
        "is_tf32_supported": Row(ANSWERED, "true", lambda: True),
        "can_device_access_peer": Row(ANSWERED, "true between two visible devices (NVLink)",
                                      can_device_access_peer),
        "get_arch_list": Row(AS_IS, "the wheel's build"),
        "get_gencode_flags": Row(AS_IS, "the wheel's build"),
        "has_half": Row(AS_IS, "true"),
        "has_magma": Row(AS_IS, "the wheel's build"),
        "clock_rate": Row(ANSWERED, "1980 MHz (NVML's answer on a real machine)",
                          lambda device=None: H100.clock_rate // 1000),
        "utilization": Row(ANSWERED, f"0 %, {idle} (sim runs no GPU kernels)",
                           lambda device=None: 0),
        "memory_usage": Row(ANSWERED, f"0 %, {idle}", lambda device=None: 0),
        "temperature": Row(ANSWERED, f"30 C, {idle}", lambda device=None: 30),
        "power_draw": Row(ANSWERED, f"70000 mW, {idle}", lambda device=None: 70_000),
        "device_memory_used": Row(ANSWERED, "what sim holds on the device",
                                  lambda device=None: sim.memory_reserved(device_index(device))),
        "list_gpu_processes": Row(ANSWERED, "no processes", list_gpu_processes),
        "ipc_collect": Row(ANSWERED, "nothing to collect", lambda: None),
        "CudaError": Row(AS_IS, "exception class"),
        "DeferredCudaCallError": Row(AS_IS, "exception class"),
        "cudaStatus": Row(AS_IS, "constants"),
        "check_error": Row(MAPPED, "0 is success", check_error),
        "cudart": Row(MAPPED, "profiler start/stop succeed; any other runtime call refused",
                      lambda: Cudart()),
        "current_blas_handle": Row(REFUSED, "a raw cuBLAS handle", refused_function(
            "torch.cuda.current_blas_handle", "a raw cuBLAS handle is CUDA's")),
        "current_solver_handle": Row(REFUSED, "a raw cuSOLVER handle", refused_function(
            "torch.cuda.current_solver_handle", "a raw cuSOLVER handle is CUDA's"), since="2.15"),
        # streams and events
        "Stream": Row(MAPPED, "sim's one in-order stream; `synchronize` is a counted sync",
                      Stream),
        "Event": Row(MAPPED, "`synchronize` is a counted sync; `elapsed_time` is host time",
                     Event),
        "StreamContext": Row(MAPPED, "sim's one stream", StreamContext),
        "ExternalStream": Row(REFUSED, "wraps a raw cudaStream_t", refused_class(
            "torch.cuda.ExternalStream", "it wraps a raw cudaStream_t")),
        "get_stream_from_external": Row(REFUSED, "wraps a raw cudaStream_t", refused_function(
            "torch.cuda.get_stream_from_external", "it wraps a raw cudaStream_t")),
        "GreenContext": Row(REFUSED, "partitions SMs", refused_class(
            "torch.cuda.GreenContext", "green contexts partition a GPU's SMs")),
        "current_stream": Row(MAPPED, "sim's stream", lambda device=None: Stream()),
        "default_stream": Row(MAPPED, "sim's stream", lambda device=None: Stream()),
        "set_stream": Row(MAPPED, "sim's one stream stays current", lambda stream: None),
        "stream": Row(MAPPED, "sim's one stream",
                      lambda stream=None: StreamContext(stream if stream is not None
                                                        else Stream())),
        "synchronize": Row(MAPPED, "a counted sync", lambda device=None: sim.synchronize(
            device_index(device))),
        "is_current_stream_capturing": Row(ANSWERED, "false: nothing is captured on sim",
                                           lambda: False),
        "get_sync_debug_mode": Row(MAPPED, "sim's", sim.get_sync_debug_mode),
        "set_sync_debug_mode": Row(MAPPED, "sim warns or fails at each wait an op makes, as "
                                   "CUDA does", sim.set_sync_debug_mode),
        # CUDA graphs
        "CUDAGraph": Row(REFUSED, _GRAPHS, refused_class("torch.cuda.CUDAGraph", _GRAPHS)),
        "graph": Row(REFUSED, _GRAPHS, refused_class("torch.cuda.graph", _GRAPHS)),
        "make_graphed_callables": Row(REFUSED, _GRAPHS, refused_function(
            "torch.cuda.make_graphed_callables", _GRAPHS)),
        "graph_pool_handle": Row(AS_IS, "an id, used only with CUDA graphs"),
        "export_dot": Row(AS_IS, "makes a hook for a CUDAGraph's capture (refused above)",
                          since="2.15"),
        "export_graph_data": Row(AS_IS, "makes a hook for a CUDAGraph (refused above)",
                                 since="2.15"),
        "graph_annotations": Row(AS_IS, "annotations of captured kernels; none on sim",
                                 since="2.15"),
        # memory
        "memory_allocated": Row(MAPPED, "sim's", sim.memory_allocated),
        "max_memory_allocated": Row(MAPPED, "sim's", sim.max_memory_allocated),
        "memory_reserved": Row(MAPPED, "sim's", sim.memory_reserved),
        "max_memory_reserved": Row(MAPPED, "sim's", sim.max_memory_reserved),
        "memory_cached": Row(MAPPED, "sim's reserved", sim.memory_reserved),
        "max_memory_cached": Row(MAPPED, "sim's reserved", sim.max_memory_reserved),
        "memory_stats": Row(MAPPED, "sim's", sim.memory_stats),
        "memory_stats_as_nested_dict": Row(MAPPED, "sim's", memory_stats_as_nested_dict),
        "memory_summary": Row(MAPPED, "sim's bytes and peak", memory_summary),
        "memory_snapshot": Row(ANSWERED, "no segments (sim has no caching allocator)",
                               lambda mempool_id=None, include_traces=True: []),
        "reset_peak_memory_stats": Row(MAPPED, "sim's", sim.reset_peak_memory_stats),
        "reset_max_memory_allocated": Row(MAPPED, "sim's peak", sim.reset_peak_memory_stats),
        "reset_max_memory_cached": Row(MAPPED, "sim's peak", sim.reset_peak_memory_stats),
        "reset_accumulated_memory_stats": Row(MAPPED, "sim keeps no accumulated counts",
                                              lambda device=None: None),
        "mem_get_info": Row(ANSWERED, "80 GB less what sim holds", mem_get_info),
        "empty_cache": Row(MAPPED, "sim's", sim.empty_cache),
        "get_allocator_backend": Row(AS_IS, "`native`"),
        "set_per_process_memory_fraction": Row(ANSWERED, "kept; sim's memory has no cap",
                                               fraction.set),
        "get_per_process_memory_fraction": Row(ANSWERED, "what was set, else 1.0",
                                               fraction.get),
        "caching_allocator_enable": Row(ANSWERED, "accepted (sim has no caching allocator)",
                                        lambda value=True: None),
        "caching_allocator_disabled": Row(ANSWERED, "a context that does nothing (sim has no "
                                          "caching allocator)", contextlib.nullcontext,
                                          since="2.15"),
        "caching_allocator_alloc": Row(REFUSED, "raw device pointers", refused_function(
            "torch.cuda.caching_allocator_alloc", _ALLOCATOR)),
        "caching_allocator_delete": Row(REFUSED, "raw device pointers", refused_function(
            "torch.cuda.caching_allocator_delete", _ALLOCATOR)),
        "CUDAPluggableAllocator": Row(REFUSED, "a custom allocator", refused_class(
            "torch.cuda.CUDAPluggableAllocator", _ALLOCATOR)),
        "change_current_allocator": Row(REFUSED, "a custom allocator", refused_function(
            "torch.cuda.change_current_allocator", _ALLOCATOR)),
        "MemPool": Row(REFUSED, "a private pool", refused_class("torch.cuda.MemPool",
                                                                _ALLOCATOR)),
        "use_mem_pool": Row(REFUSED, "a private pool", refused_function(
            "torch.cuda.use_mem_pool", _ALLOCATOR)),
        "host_memory_stats": Row(AS_IS, "CUDA's pinned-memory allocator, unused on sim: empty"),
        "host_memory_stats_as_nested_dict": Row(AS_IS, "empty, as above"),
        "reset_accumulated_host_memory_stats": Row(AS_IS, "as above"),
        "reset_peak_host_memory_stats": Row(AS_IS, "as above"),
        # random numbers
        "manual_seed": Row(MAPPED, "sim's generator", sim.manual_seed),
        "manual_seed_all": Row(MAPPED, "sim's generator", sim.manual_seed_all),
        "seed": Row(MAPPED, "sim's generator", sim.seed),
        "seed_all": Row(MAPPED, "sim's generator", sim.seed_all),
        "initial_seed": Row(MAPPED, "sim's generator", sim.initial_seed),
        "get_rng_state": Row(MAPPED, "sim's generator",
                             lambda device="cuda": sim.get_rng_state(map_device(device))),
        "set_rng_state": Row(MAPPED, "sim's generator",
                             lambda new_state, device="cuda": sim.set_rng_state(
                                 new_state, map_device(device))),
        "get_rng_state_all": Row(MAPPED, "sim's generator", sim.get_rng_state_all),
        "set_rng_state_all": Row(MAPPED, "sim's generator", sim.set_rng_state_all),
        "default_generators": Row(MAPPED, "sim's generator of each visible device", None),
        # submodules
        "amp": Row(MAPPED, "rows of `torch.cuda.amp`"),
        "nvtx": Row(MAPPED, "rows of `torch.cuda.nvtx`"),
        "memory": Row(MAPPED, "torch.cuda's rows"),
        "graphs": Row(MAPPED, "torch.cuda's rows"),
        "streams": Row(MAPPED, "torch.cuda's rows"),
        "random": Row(MAPPED, "torch.cuda's rows"),
        "profiler": Row(MAPPED, "rows of `torch.cuda.profiler`"),
        "jiterator": Row(REFUSED, "compiles a CUDA kernel (refused when a function is made)"),
        "nccl": Row(AS_IS, "NCCL on CUDA tensors directly; torch.distributed's collectives "
                    "run on sim's c10d"),
        "sparse": Row(AS_IS, "nothing public"),
        "tunable": Row(AS_IS, "TunableOp's settings; sim's GEMMs are not tuned"),
    }
    for name, dtype in _LEGACY_TENSORS.items():
        rows[name] = Row(MAPPED, f"a sim tensor of {dtype}", _legacy_tensor_type(name, dtype))
    for name in _LEGACY_STORAGES:
        rows[name] = Row(REFUSED, "a CUDA storage", refused_class(
            f"torch.cuda.{name}", "legacy typed storages are CUDA's; make a tensor"))
    generators = tuple(generator_of(i) for i in range(visible_device_count()))
    rows["default_generators"] = Row(MAPPED, rows["default_generators"].note, generators)
    return rows


_GRAPH_HOOKS = tuple(f"register_graph_{event}_hook" for event in (
    "capture_start", "capture_end", "instantiate", "replay_start", "replay_end", "destroy"))
# Names a module of SHARED_WITH_TORCH_CUDA gained after 2.11: its rows on every torch (the docs).
SHARED_SINCE = {"torch.cuda.memory": ("caching_allocator_disabled",),
                "torch.cuda.graphs": ("export_dot", "export_graph_data", *_GRAPH_HOOKS)}


def _graphs_only_rows() -> dict[str, Row]:
    """Names of torch.cuda.graphs that torch.cuda does not re-export: hooks on CUDA graphs."""
    hook = "registers a hook on CUDA graphs, which sim never captures (refused above)"
    return {name: Row(AS_IS, hook, since="2.15") for name in _GRAPH_HOOKS}


def _amp_rows() -> dict[str, Row]:
    return {
        "autocast": Row(MAPPED, "autocast on sim, CUDA's policy"),
        "GradScaler": Row(MAPPED, "scales, unscales and syncs once per step on sim"),
        "custom_fwd": Row(MAPPED, "reads sim's autocast state"),
        "custom_bwd": Row(MAPPED, "reads sim's autocast state"),
        "amp_definitely_not_available": Row(AS_IS, "false"),
    }


def _nvtx_rows() -> dict[str, Row]:
    return {
        "range_push": Row(MAPPED, "opens a phase of the report"),
        "range_pop": Row(MAPPED, "closes it"),
        "range": Row(MAPPED, "a phase (push and pop)"),
        "mark": Row(AS_IS, "an NVTX marker"),
        "range_start": Row(AS_IS, "an NVTX range across threads, not a phase"),
        "range_end": Row(AS_IS, "as above"),
    }


def _profiler_rows() -> dict[str, Row]:
    return {
        "start": Row(MAPPED, "succeeds; nothing to start", lambda: None),
        "stop": Row(MAPPED, "succeeds", lambda: None),
        "profile": Row(MAPPED, "a context that does nothing", profiler_profile),
    }


def _backends_cuda_rows() -> dict[str, Row]:
    sdp = "sim's attention reads it, as CUDA's choice of kernel does"
    refuse_sdpa = "asks CUDA's runtime checks of a device; run the attention and read the report"
    rows = {name: Row(AS_IS, sdp) for name in (
        "enable_cudnn_sdp", "enable_flash_sdp", "enable_math_sdp", "enable_mem_efficient_sdp",
        "cudnn_sdp_enabled", "flash_sdp_enabled", "math_sdp_enabled", "mem_efficient_sdp_enabled",
        "sdp_kernel", "allow_fp16_bf16_reduction_math_sdp",
        "fp16_bf16_reduction_math_sdp_allowed")}
    rows.update({
        "matmul": Row(AS_IS, "flags (allow_tf32, ...): torch's global flags"),
        "cuBLASModule": Row(AS_IS, "the class of `matmul`"),
        "is_built": Row(AS_IS, "the wheel's build"),
        "is_flash_attention_available": Row(AS_IS, "the wheel's build: true"),
        "SDPAParams": Row(AS_IS, "a class of arguments"),
        "preferred_blas_library": Row(AS_IS, "a global setting"),
        "preferred_linalg_library": Row(AS_IS, "a global setting"),
        "preferred_rocm_fa_library": Row(AS_IS, "a global setting (ROCm)"),
        "cufft_plan_cache": Row(AS_IS, "cuFFT's plan cache settings"),
        "cuFFTPlanCache": Row(AS_IS, "as above"),
        "cuFFTPlanCacheAttrContextProp": Row(AS_IS, "as above"),
        "cuFFTPlanCacheManager": Row(AS_IS, "as above"),
    })
    workspace = _BlasWorkspace()
    rows.update({
        "cublas_workspace_size": Row(ANSWERED, "an H100's (32 MiB, or `CUBLAS_WORKSPACE_CONFIG`'s"
                                     "); a size set is kept", workspace.cublas, since="2.15"),
        "blas_workspace_size": Row(ANSWERED, "as `cublas_workspace_size`, or cuBLASLt's",
                                   workspace.blas, since="2.15"),
        "cublaslt_workspace_size": Row(AS_IS, "torch's setting (1 MiB, or "
                                       "`CUBLASLT_WORKSPACE_SIZE`)", since="2.15"),
        "is_ck_sdpa_available": Row(AS_IS, "false (ROCm's)", since="2.15"),
    })
    for name in ("can_use_cudnn_attention", "can_use_efficient_attention",
                 "can_use_flash_attention"):
        rows[name] = Row(REFUSED, refuse_sdpa, refused_function(
            f"torch.backends.cuda.{name}", "it asks CUDA's runtime about a device"))
    return rows


class _BlasWorkspace:
    """``torch.backends.cuda.cublas_workspace_size`` and ``blas_workspace_size`` (torch 2.15),
    which ask the GPU's cuBLAS: an H100's default (CUDABlasHandlePool.cpp, sm 9.0: 4096 KiB x 8),
    or what ``CUBLAS_WORKSPACE_CONFIG`` (":SIZE_KIB:COUNT" pairs) says, or what was set."""

    def __init__(self):
        self._set: int | None = None

    def cublas(self, size: int | None = None) -> int:
        if size is not None:
            self._set = int(size)
        if self._set is not None:
            return self._set
        pairs = [p for p in os.environ.get("CUBLAS_WORKSPACE_CONFIG", "").split(":") if p]
        if pairs and len(pairs) % 2 == 0 and all(p.isdigit() for p in pairs):
            return sum(int(k) * 1024 * int(n) for k, n in zip(pairs[::2], pairs[1::2]))
        return 4096 * 1024 * 8

    def blas(self, size: int | None = None, backend=None) -> int:
        if backend is not None and "lt" in str(backend).lower():
            return torch.backends.cuda.cublaslt_workspace_size(size)
        return self.cublas(size)


def _is_acceptable(tensor) -> bool:
    """``torch.backends.cudnn.is_acceptable``: a sim tensor of a cuDNN dtype is."""
    import torch.backends.cudnn as cudnn
    inner = cudnn.m if hasattr(cudnn, "m") else cudnn
    return (bool(torch.backends.cudnn.enabled) and tensor.device.type in ("sim", "cuda")
            and tensor.dtype in inner.CUDNN_TENSOR_DTYPES)


def _backends_cudnn_rows() -> dict[str, Row]:
    flag = "a global flag sim's convolution, batch norm and RNN choices read, as CUDA's do"
    rows = {name: Row(AS_IS, flag) for name in (
        "enabled", "benchmark", "benchmark_limit", "deterministic", "allow_tf32",
        "fp32_precision", "conv", "flags", "set_flags")}
    rows["depthwise_kernel"] = Row(AS_IS, "a global flag (\"auto\", \"cudnn\", \"native\"); sim's "
                                   "depthwise choice is 2.11's \"auto\" and does not read it",
                                   since="2.15")
    rows.update({
        "is_available": Row(AS_IS, "the wheel's build: true"),
        "version": Row(AS_IS, "the wheel's cuDNN"),
        "is_acceptable": Row(MAPPED, "a sim tensor of a cuDNN dtype is", _is_acceptable),
        "CUDNN_TENSOR_DTYPES": Row(AS_IS, "constants"),
        "CudnnModule": Row(AS_IS, "the class of the module"),
    })
    return rows


def _accelerator_rows(sim) -> dict[str, Row]:
    cuda = torch.device("cuda")  # made before --as-cuda's mode, which would make it sim's
    rows = {
        "current_accelerator": Row(ANSWERED, "`cuda` (its devices become sim's)",
                                   lambda check_available=False: cuda),
        "is_available": Row(ANSWERED, "true", lambda: True),
        "device_count": Row(ANSWERED, "as `torch.cuda.device_count()`", visible_device_count),
        "get_device_capability": Row(ANSWERED, "every dtype, as CUDA's",
                                     _accelerator_capability),
        "get_memory_info": Row(ANSWERED, "as `torch.cuda.mem_get_info`", mem_get_info),
        "empty_cache": Row(MAPPED, "sim's", sim.empty_cache),
        "memory_allocated": Row(MAPPED, "sim's", sim.memory_allocated),
        "max_memory_allocated": Row(MAPPED, "sim's", sim.max_memory_allocated),
        "memory_reserved": Row(MAPPED, "sim's", sim.memory_reserved),
        "max_memory_reserved": Row(MAPPED, "sim's", sim.max_memory_reserved),
        "memory_stats": Row(MAPPED, "sim's", sim.memory_stats),
        "reset_peak_memory_stats": Row(MAPPED, "sim's", sim.reset_peak_memory_stats),
        "reset_accumulated_memory_stats": Row(MAPPED, "sim keeps no accumulated counts",
                                              lambda device=None: None),
    }
    rows["Graph"] = Row(REFUSED, _GRAPHS, refused_class("torch.accelerator.Graph", _GRAPHS),
                        since="2.15")
    rows["empty_host_cache"] = Row(AS_IS, "CUDA's pinned-memory cache, unused on sim",
                                   since="2.15")
    for name in ("current_device_idx", "current_device_index", "set_device_idx",
                 "set_device_index", "device_index", "current_stream", "set_stream",
                 "synchronize"):
        rows[name] = Row(AS_IS, "sim's (torch's accelerator is sim)")
    return rows


def surface() -> dict[str, dict[str, Row]]:
    """Module name -> public name -> its row, for every module in MODULES, as the running torch
    has them."""
    return {module_name: _present(module_name, rows) for module_name, rows in _table().items()}


def _table() -> dict[str, dict[str, Row]]:
    """Every row, of every supported torch."""
    sim = torch.sim
    cuda_rows = _torch_cuda_rows(sim, _MemoryFraction())
    table = {
        "torch.cuda": cuda_rows,
        "torch.cuda.amp": _amp_rows(),
        "torch.cuda.nvtx": _nvtx_rows(),
        "torch.cuda.profiler": _profiler_rows(),
        "torch.backends.cuda": _backends_cuda_rows(),
        "torch.backends.cudnn": _backends_cudnn_rows(),
        "torch.accelerator": _accelerator_rows(sim),
    }
    graphs_only = _graphs_only_rows()
    for module_name in SHARED_WITH_TORCH_CUDA:
        rows = {**cuda_rows, **graphs_only} if module_name == "torch.cuda.graphs" else cuda_rows
        names = set(public_names(module_name)) | set(SHARED_SINCE.get(module_name, ()))
        table[module_name] = {name: rows[name] for name in sorted(names) if name in rows}
    return table


def _present(module_name: str, rows: dict[str, Row]) -> dict[str, Row]:
    """The rows that apply to the running torch: a row of a newer name (``since``) where this
    torch has the name."""
    names = set(public_names(module_name))
    return {name: row for name, row in rows.items() if row.since is None or name in names}


def unclassified() -> dict[str, list[str]]:
    """Public names of MODULES the table does not classify (empty: every one is)."""
    table = surface()
    missing = {m: [n for n in public_names(m) if n not in table[m]] for m in MODULES}
    return {m: names for m, names in missing.items() if names}


def markdown() -> str:
    """docs/as-cuda.md's table: one row per module and kind, its names (of every supported torch;
    a name newer than 2.11 says which release)."""
    table = _table()
    lines = ["| module | kind | names (and what they answer or do) |", "|---|---|---|"]
    for module_name in MODULES:
        rows = table[module_name]
        if module_name in SHARED_WITH_TORCH_CUDA:
            lines.append(f"| `{module_name}` | | as `torch.cuda`: "
                         + ", ".join(f"`{n}`" + (f" (torch {rows[n].since})" if rows[n].since
                                                 else "") for n in sorted(rows)) + " |")
            continue
        for kind in (MAPPED, ANSWERED, AS_IS, REFUSED):
            names = sorted(n for n, row in rows.items() if row.kind == kind)
            if names:
                cells = "; ".join(f"`{n}` ({rows[n].note}"
                                  + (f"; torch {rows[n].since}" if rows[n].since else "") + ")"
                                  for n in names)
                lines.append(f"| `{module_name}` | {kind} | {cells} |")
    return "\n".join(lines) + "\n"
