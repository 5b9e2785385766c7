"""``run --as-cuda``: a program written for CUDA runs unchanged on sim.

Mapped (README, "Counting your own program"): ``torch.cuda.is_available()`` is true; a device
``"cuda"``, ``"cuda:N"`` or ``torch.device("cuda", N)`` given to any torch function or Tensor
method (factories, ``.to``, ``.cuda()``, ``Module.to`` / ``.cuda()``, ``pin_memory``) becomes
``sim:N``, through a ``TorchFunctionMode``; ``torch.cuda.synchronize``, ``current_device``,
``set_device``, ``device_count``, ``memory_allocated`` / ``max_memory_allocated`` /
``reset_peak_memory_stats``, ``manual_seed(_all)`` are sim's; ``torch.cuda.Stream`` and
``Event`` are stand-ins on sim's one stream (a ``synchronize()`` of either is a counted sync;
``Event.elapsed_time`` is host time); ``torch.autocast("cuda")`` is autocast on sim.
Not mapped, and failing with ``UnsupportedOnSim`` naming the call (exit 3): ``torch.compile``,
CUDA graphs (``torch.cuda.graph``, ``CUDAGraph``, ``make_graphed_callables``), Triton
(``import triton``), custom CUDA kernels (``torch.utils.cpp_extension.load`` / ``load_inline``
/ ``CUDAExtension``, ``torch.cuda.jiterator``).
"""
from __future__ import annotations

import importlib.abc
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
            "device_count": sim.device_count, "current_device": sim.current_device,
            "set_device": lambda d: sim.set_device(_map_device(d) if not isinstance(d, int)
                                                    else d),
            "synchronize": lambda device=None: sim.synchronize(
                device if device is None or isinstance(device, int)
                else _map_device(torch.device(device))),
            "memory_allocated": sim.memory_allocated,
            "max_memory_allocated": sim.max_memory_allocated,
            "reset_peak_memory_stats": sim.reset_peak_memory_stats,
            "manual_seed": sim.manual_seed, "manual_seed_all": sim.manual_seed_all,
            "get_device_name": lambda device=None: "sim (harness_sim --as-cuda)",
            "Stream": Stream, "Event": Event,
            "current_stream": lambda device=None: Stream(),
            "default_stream": lambda device=None: Stream(),
            "stream": lambda s=None: s if s is not None else Stream(),
            "graph": _unsupported("torch.cuda.graph", "CUDA graphs capture GPU kernels"),
            "CUDAGraph": _unsupported("torch.cuda.CUDAGraph", "CUDA graphs capture GPU kernels"),
            "make_graphed_callables": _unsupported("torch.cuda.make_graphed_callables",
                                                   "CUDA graphs capture GPU kernels"),
        }.items():
            self._set(cuda, name, value)
        self._set(torch, "compile", _unsupported("torch.compile", "it generates Triton or C++ "
                                                 "kernels, not sim ops"))
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
        # A Triton already imported (by torch or a library) is hidden from the program.
        self._triton = {k: sys.modules.pop(k) for k in list(sys.modules)
                        if k == "triton" or k.startswith("triton.")}
        sys.meta_path.insert(0, self._finder)
        self._mode.__enter__()

    def uninstall(self) -> None:
        self._mode.__exit__(None, None, None)
        if self._finder in sys.meta_path:
            sys.meta_path.remove(self._finder)
        sys.modules.update(self._triton)
        for owner, name, value in reversed(self._saved):
            setattr(owner, name, value)
        self._saved.clear()
