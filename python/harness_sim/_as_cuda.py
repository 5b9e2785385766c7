"""``run --as-cuda``: a program written for CUDA runs unchanged on sim.

Mapped (README, "Counting your own program"): ``torch.cuda.is_available()`` is true; a device
``"cuda"``, ``"cuda:N"`` or ``torch.device("cuda", N)`` given to any torch function or Tensor
method (factories, ``.to``, ``.cuda()``, ``Module.to`` / ``.cuda()``, ``pin_memory``) becomes
``sim:N``, through a ``TorchFunctionMode``; ``torch.cuda.synchronize``, ``current_device``,
``set_device``, ``memory_allocated`` / ``max_memory_allocated`` /
``reset_peak_memory_stats``, ``manual_seed(_all)`` are sim's; the machine is one H100
(``get_device_properties``, ``get_device_capability``, ``get_device_name``, ``mem_get_info``,
``is_bf16_supported``; ``device_count`` 1 unless ``CUDA_VISIBLE_DEVICES`` names more);
``is_current_stream_capturing`` is false; ``torch.accelerator.current_accelerator()`` is cuda; ``torch.cuda.Stream`` and
``Event`` are stand-ins on sim's one stream (a ``synchronize()`` of either is a counted sync;
``Event.elapsed_time`` is host time); ``torch.autocast("cuda")`` is autocast on sim.
Not mapped, and failing with ``UnsupportedOnSim`` naming the call (exit 3): ``torch.compile``,
CUDA graphs (``torch.cuda.graph``, ``CUDAGraph``: classes still, refused when made;
``make_graphed_callables`` when called), Triton
(``import triton``), custom CUDA kernels (``torch.utils.cpp_extension.load`` / ``load_inline``
/ ``CUDAExtension``, ``torch.cuda.jiterator``).
"""
from __future__ import annotations

import importlib.abc
import os
import sys
import time

import torch
from torch.overrides import TorchFunctionMode

import harness_sim


class UnsupportedOnSim(RuntimeError):
    """A CUDA feature sim cannot run (a kernel of the program's own, a compiler, a graph)."""


def _unsupported(call: str, why: str):
    def refuse(*args, **kwargs):
        raise UnsupportedOnSim(f"{call} is not supported on sim ({why}); run the program "
                               "without it, or on a GPU")
    return refuse


def _map_device(d):
    if isinstance(d, torch.device):
        return torch.device("sim", d.index) if d.type == "cuda" else d
    if isinstance(d, str) and (d == "cuda" or d.startswith("cuda:")):
        return "sim" + d[4:]
    return d


def _map(value):
    if isinstance(value, (torch.device, str)):
        return _map_device(value)
    if isinstance(value, (list, tuple)) and any(isinstance(v, (torch.device, str)) for v in value):
        return type(value)(_map_device(v) for v in value)
    return value


_CUDA_METHOD = torch.Tensor.cuda


class CudaToSim(TorchFunctionMode):
    """Every device argument that names CUDA names sim instead; ``Tensor.cuda(n)`` is
    ``Tensor.to("sim:n")``."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is _CUDA_METHOD:
            tensor, *rest = args
            device = rest[0] if rest else kwargs.pop("device", None)
            if isinstance(device, int):
                device = torch.device("sim", device)
            elif device is None:
                device = torch.device("sim", torch.sim.current_device())
            else:
                device = _map_device(torch.device(device))
            return tensor.to(device, non_blocking=kwargs.get("non_blocking", False),
                             memory_format=kwargs.get("memory_format", torch.preserve_format))
        args = tuple(_map(a) for a in args)
        kwargs = {k: _map(v) for k, v in kwargs.items()}
        return func(*args, **kwargs)


class Stream:
    """``torch.cuda.Stream`` on sim: one stream, in order; ``synchronize`` is a counted sync."""

    def __init__(self, device=None, priority=0, **kwargs):
        self.device = torch.device("sim", torch.sim.current_device())

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


class Event:
    """``torch.cuda.Event`` on sim: ``synchronize`` / ``wait`` from the host is a counted sync;
    ``elapsed_time`` is the host time between the records, in ms."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        self._t = None

    def record(self, stream=None):
        self._t = time.perf_counter_ns()

    def synchronize(self):
        torch.sim.synchronize()

    def query(self):
        return True

    def wait(self, stream=None):
        pass

    def elapsed_time(self, end):
        return (end._t - self._t) / 1e6


class DeviceProperties:
    """``torch.cuda.get_device_properties`` under ``--as-cuda``: one H100 SXM (sm 9.0, 80 GB, 132
    SMs), the machine the counts stand for; the fields programs read
    (``torch._C._CudaDeviceProperties``'s)."""

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
    gcnArchName = "NVIDIA H100 80GB HBM3"
    uuid = "00000000-0000-0000-0000-000000000000"

    def __repr__(self) -> str:
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, "
                f"minor={self.minor}, total_memory={self.total_memory // 2**20}MB, "
                f"multi_processor_count={self.multi_processor_count}, L2_cache_size=50MB) "
                "(harness_sim --as-cuda)")


_H100 = DeviceProperties()


def visible_device_count() -> int:
    """``torch.cuda.device_count()`` under ``--as-cuda``: a machine with one GPU, unless
    ``CUDA_VISIBLE_DEVICES`` names more (up to sim's devices), as CUDA counts them."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return 1
    named = [d for d in visible.split(",") if d.strip()]
    return min(len(named), torch.sim.device_count())


def mem_get_info(device=None) -> tuple[int, int]:
    """(free, total) bytes: the H100's total less what sim holds on the device."""
    used = torch.sim.memory_allocated(_index(device))
    return _H100.total_memory - used, _H100.total_memory


def _index(device) -> int | None:
    if device is None or isinstance(device, int):
        return device
    return torch.device(_map_device(torch.device(device))).index


class _RefusedOnCall:
    """A CUDA class sim cannot run (``CUDAGraph``): it stays a class (annotated, subclassed,
    checked with ``isinstance``); making one is refused, naming the call."""

    _call = ""
    _why = ""

    def __new__(cls, *args, **kwargs):
        raise UnsupportedOnSim(f"{cls._call} is not supported on sim ({cls._why}); run the "
                               "program without it, or on a GPU")


class CUDAGraph(_RefusedOnCall):
    _call = "torch.cuda.CUDAGraph"
    _why = "CUDA graphs capture GPU kernels"


class graph(_RefusedOnCall):
    _call = "torch.cuda.graph"
    _why = "CUDA graphs capture GPU kernels"


def _cuda_accelerator_on_sim() -> None:
    """Lightning's ``accelerator="gpu"`` / ``"cuda"`` / ``"auto"`` under ``--as-cuda``: its
    devices are ``torch.device("cuda", i)``, which the mode makes sim's, and
    ``CUDAAccelerator.setup_device`` then refused them ("Device should be GPU, got sim:0")."""
    from lightning.pytorch.accelerators import cuda as accelerator

    def setup_device(self, device: torch.device) -> None:
        if device.type not in ("cuda", "sim"):
            raise accelerator.MisconfigurationException(
                f"Device should be GPU, got {device} instead")
        accelerator._check_cuda_matmul_precision(device)
        torch.sim.set_device(device.index or 0)

    accelerator.CUDAAccelerator.setup_device = setup_device


class _BlockTriton(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        if fullname != "triton" and not fullname.startswith("triton."):
            return None
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename.startswith("<frozen"):
            frame = frame.f_back
        if frame is not None and "/torch/" in frame.f_code.co_filename:
            # torch probing for an optional Triton (torch.utils._triton): there is none on sim
            raise ModuleNotFoundError(f"No module named {fullname!r} (harness_sim --as-cuda)",
                                      name=fullname)
        raise UnsupportedOnSim("import triton is not supported on sim (Triton kernels are "
                               "compiled for a GPU); run the program without it, or on a GPU")


class AsCuda:
    """Installs the mapping for the program's run and takes it away afterwards."""

    def __init__(self):
        self._saved: list[tuple[object, str, object]] = []
        self._mode = CudaToSim()
        self._finder = _BlockTriton()
        self._triton: dict = {}

    def _set(self, owner, name, value):
        self._saved.append((owner, name, getattr(owner, name, None)))
        setattr(owner, name, value)

    def install(self) -> None:
        sim = torch.sim
        cuda = torch.cuda
        for name, value in {
            "is_available": lambda: True, "is_initialized": lambda: True,
            "current_device": sim.current_device,
            "set_device": lambda d: sim.set_device(_map_device(d) if not isinstance(d, int)
                                                    else d),
            "synchronize": lambda device=None: sim.synchronize(
                device if device is None or isinstance(device, int)
                else _map_device(torch.device(device))),
            "memory_allocated": sim.memory_allocated,
            "memory_reserved": sim.memory_reserved,
            "max_memory_reserved": sim.max_memory_reserved,
            "memory_stats": sim.memory_stats,
            "empty_cache": sim.empty_cache,
            "max_memory_allocated": sim.max_memory_allocated,
            "reset_peak_memory_stats": sim.reset_peak_memory_stats,
            "manual_seed": sim.manual_seed, "manual_seed_all": sim.manual_seed_all,
            "device_count": visible_device_count,
            "get_device_name": lambda device=None: _H100.name,
            "get_device_properties": lambda device=None: _H100,
            "get_device_capability": lambda device=None: (_H100.major, _H100.minor),
            "is_bf16_supported": lambda including_emulation=True: True,
            # torch.optim's step() asks (Optimizer._accelerator_graph_capture_health_check):
            # nothing is ever captured on sim
            "is_current_stream_capturing": lambda: False,
            "mem_get_info": mem_get_info,
            "Stream": Stream, "Event": Event,
            "current_stream": lambda device=None: Stream(),
            "default_stream": lambda device=None: Stream(),
            "stream": lambda s=None: s if s is not None else Stream(),
            "graph": graph,
            "CUDAGraph": CUDAGraph,
            "make_graphed_callables": _unsupported("torch.cuda.make_graphed_callables",
                                                   "CUDA graphs capture GPU kernels"),
        }.items():
            self._set(cuda, name, value)
        # torch.accelerator names CUDA, as on a GPU machine (a program picking its device with
        # it takes its CUDA branch); the device it names becomes sim through the mode below.
        accelerator = torch.accelerator
        cuda_device = torch.device("cuda")  # made before the mode, which would map it to sim
        self._set(accelerator, "current_accelerator",
                  lambda check_available=False: cuda_device)
        self._set(accelerator, "device_count", visible_device_count)
        self._set(accelerator, "is_available", lambda: True)
        self._set(torch, "compile", _unsupported("torch.compile", "it generates Triton or C++ "
                                                 "kernels, not sim ops"))
        # nn.DataParallel over several devices scatters, replicates and gathers with CUDA's own
        # C++ (torch._C._scatter, ...): refused, naming it (one device runs its module directly)
        import torch.nn.parallel.comm as comm
        for name in ("scatter", "gather", "broadcast_coalesced", "reduce_add"):
            self._set(comm, name, _unsupported(
                "nn.DataParallel over several devices",
                f"torch.nn.parallel.comm.{name} is CUDA's own C++"))
        import torch.cuda.jiterator as jiterator
        self._set(jiterator, "_create_jit_fn",
                  _unsupported("torch.cuda.jiterator", "it compiles a CUDA kernel"))
        import torch.utils.cpp_extension as ext
        for name in ("load", "load_inline", "CUDAExtension"):
            self._set(ext, name, _unsupported(f"torch.utils.cpp_extension.{name}",
                                              "custom CUDA kernels do not run on sim"))
        autocast_init = torch.amp.autocast_mode.autocast.__init__

        def autocast(self_, device_type, *args, **kwargs):
            autocast_init(self_, "sim" if device_type == "cuda" else device_type, *args, **kwargs)

        self._set(torch.amp.autocast_mode.autocast, "__init__", autocast)
        self._lightning_hook = None
        if "lightning.pytorch.accelerators.cuda" in sys.modules:
            self._patch_lightning()
        else:
            from ._lightning_run import _AfterImport
            self._lightning_hook = _AfterImport("lightning.pytorch.accelerators.cuda",
                                                self._patch_lightning)
            sys.meta_path.insert(0, self._lightning_hook)
        # A Triton already imported (by torch or a library) is hidden from the program.
        self._triton = {k: sys.modules.pop(k) for k in list(sys.modules)
                        if k == "triton" or k.startswith("triton.")}
        sys.meta_path.insert(0, self._finder)
        self._mode.__enter__()

    def _patch_lightning(self) -> None:
        from lightning.pytorch.accelerators import cuda as accelerator
        self._saved.append((accelerator.CUDAAccelerator, "setup_device",
                            accelerator.CUDAAccelerator.setup_device))
        _cuda_accelerator_on_sim()

    def uninstall(self) -> None:
        self._mode.__exit__(None, None, None)
        if self._lightning_hook is not None and self._lightning_hook in sys.meta_path:
            sys.meta_path.remove(self._lightning_hook)
        if self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)
        sys.modules.update(self._triton)
        for owner, name, value in reversed(self._saved):
            setattr(owner, name, value)
        self._saved.clear()
