"""``run --as-cuda``: a program written for CUDA runs unchanged on sim.

In a process started as ``python -m harness_sim run --as-cuda`` sim serves the CUDA device type
itself (``_device.mode.SERVES_CUDA``; docs/as-cuda.md): tensors are CUDA tensors, torch's own
CUDA-side code runs, and nothing maps the word "cuda". With ``HARNESS_SIM_AS_CUDA=map`` (or in a
process that did not start so, such as a test calling ``_run.main``), a device ``"cuda"``,
``"cuda:N"`` or ``torch.device("cuda", N)`` given to any torch function or Tensor method becomes
``sim:N`` through a ``TorchFunctionMode``, and ``torch.autocast("cuda")`` is sim's.

In both, every public name of ``torch.cuda``, ``torch.backends.cuda``, ``torch.backends.cudnn``
and ``torch.accelerator`` is mapped, answered as one H100, left as it is or refused, as the table
in ``_cuda.surface`` (docs/as-cuda.md) says. Refused, failing with ``UnsupportedOnSim`` naming the
call (exit 3): custom CUDA kernels (``torch.utils.cpp_extension.load`` / ``load_inline`` /
``CUDAExtension``), ``nn.DataParallel`` over several devices. Triton is absent, as on a machine
without it (``import triton`` is a ModuleNotFoundError; run names sim when the program fails on it,
and ``importlib.util.find_spec("triton")`` is None); with ``--with-triton`` it is importable and a
kernel launched is refused by name. ``torch.compile`` runs, with
sim's C++ kernels (``_device.compile``).
"""
from __future__ import annotations

import functools
import importlib
import sys

import torch
from torch.overrides import TorchFunctionMode

from .. import _C
from .._after_import import AfterImport
from .._device.distributed import register_distributed_backend
from .._device.mode import SERVES_CUDA
from .surface import (UnsupportedOnSim, map_device as _map_device, refusal, refused_function,
                      surface, visible_device_count)

__all__ = ["AsCuda", "UnsupportedOnSim"]


def _map(value):
    if isinstance(value, (torch.device, str)):
        return _map_device(value)
    if isinstance(value, (list, tuple)) and any(isinstance(v, (torch.device, str)) for v in value):
        return type(value)(_map_device(v) for v in value)
    return value


_CUDA_METHOD = torch.Tensor.cuda
_CUDA_BACKENDS = {None, "nccl", "gloo", "cuda:nccl", "cpu:gloo,cuda:nccl", "cuda:nccl,cpu:gloo"}


def _sim_backend(backend):
    """A process group's backend for CUDA tensors (NCCL, Gloo, or none named: NCCL with Gloo on
    a GPU machine) is sim's, with Gloo for the group's CPU tensors."""
    if isinstance(backend, str) and backend.lower() in _CUDA_BACKENDS or backend is None:
        return "cpu:gloo,cuda:sim" if SERVES_CUDA else "cpu:gloo,sim:sim"
    return backend
_IS_CUDA = torch.Tensor.is_cuda  # the property: the mode sees its __get__, made anew each time
_TYPE_METHOD = torch.Tensor.type


def _tensor_type(tensor, dtype=None, non_blocking=False, **kwargs):
    """``Tensor.type()`` names a sim tensor's type as CUDA's (``torch.cuda.FloatTensor``);
    ``Tensor.type(torch.cuda.HalfTensor)`` (the class or its name) casts on sim."""
    if dtype is None:
        return _TYPE_METHOD(tensor).replace("torch.sim.", "torch.cuda.")
    if isinstance(dtype, str) and dtype.startswith("torch.cuda."):
        dtype = getattr(torch.cuda, dtype[len("torch.cuda."):])
    if isinstance(dtype, type) and isinstance(getattr(dtype, "dtype", None), torch.dtype):
        device = tensor.device if tensor.device.type == "sim" else torch.device(
            "sim", torch.sim.current_device())
        return tensor.to(device, dtype.dtype, non_blocking=non_blocking)
    return _TYPE_METHOD(tensor, dtype, non_blocking, **kwargs)


class CudaToSim(TorchFunctionMode):
    """Every device argument that names CUDA names sim instead; ``Tensor.cuda(n)`` is
    ``Tensor.to("sim:n")``; a sim tensor ``is_cuda``, and its ``type()`` is CUDA's."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if getattr(func, "__self__", None) is _IS_CUDA:
            return args[0].device.type in ("cuda", "sim")
        if func is _TYPE_METHOD:
            return _tensor_type(*args, **kwargs)
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


def _cuda_accelerator_on_sim() -> None:
    """Lightning's ``accelerator="gpu"`` / ``"cuda"`` / ``"auto"`` under the mapping
    (``HARNESS_SIM_AS_CUDA=map`` only; where sim serves CUDA, Lightning's accelerator sees CUDA
    devices and nothing is patched): its devices are ``torch.device("cuda", i)``, which the mode
    makes sim's, and ``CUDAAccelerator.setup_device`` then refused them ("Device should be GPU,
    got sim:0")."""
    from lightning.pytorch.accelerators import cuda as accelerator

    def setup_device(self, device: torch.device) -> None:
        if device.type not in ("cuda", "sim"):
            raise accelerator.MisconfigurationException(
                f"Device should be GPU, got {device} instead")
        accelerator._check_cuda_matmul_precision(device)
        torch.sim.set_device(device.index or 0)

    accelerator.CUDAAccelerator.setup_device = setup_device


def _several_devices(name: str):
    return UnsupportedOnSim(refusal("nn.DataParallel over several devices",
                                    f"torch.nn.parallel.comm.{name} is CUDA's own C++"))


def _one_device_scatter(tensor, devices=None, chunk_sizes=None, dim=0, streams=None, *, out=None):
    """``comm.scatter`` to one device, as torch/csrc/cuda/comm.cpp's scatter does it: the whole
    tensor, ``.to(cuda:i, non_blocking=True)`` unless it is there already."""
    if out is not None or devices is None or len(devices) != 1:
        raise _several_devices("scatter")
    index = torch.cuda._utils._get_device_index(devices[0], optional=True)
    if tensor.device.type != "cpu" and tensor.get_device() == index:
        return (tensor,)
    return (tensor.to(torch.device("cuda", index), non_blocking=True),)


def _one_device_gather(tensors, dim=0, destination=None, *, out=None):
    """``comm.gather`` of one tensor, as comm.cpp's gather does it: a new tensor on the
    destination (-1: the CPU; None: the current device) and a copy into it, non-blocking when the
    destination is CUDA's."""
    if out is not None or len(tensors) != 1:
        raise _several_devices("gather")
    (tensor,) = tensors
    if destination == -1 or (isinstance(destination, (str, torch.device))
                             and torch.device(destination).type == "cpu"):
        device = torch.device("cpu")
    else:
        device = torch.device("cuda", torch.cuda._utils._get_device_index(destination, True))
    result = torch.empty(tensor.shape, dtype=tensor.dtype, device=device)
    result.copy_(tensor, non_blocking=device.type != "cpu")
    return result


def triton_refusal() -> str:
    """What a program that needs Triton is told under --as-cuda (after its ModuleNotFoundError)."""
    return ("import triton: Triton is absent under --as-cuda, as on a machine without it (its "
            "kernels are compiled for a GPU); a program that only imports it, or defines kernels "
            "it does not launch, runs with --as-cuda --with-triton")


def _forget_triton_probes() -> None:
    """torch caches whether Triton is there (``torch.utils._triton``'s ``functools.cache``
    probes, which dynamo and inductor ask): asked again, they see what is importable now."""
    import torch.utils._triton as probes
    for name in dir(probes):
        clear = getattr(getattr(probes, name), "cache_clear", None)
        if callable(clear):
            clear()


_STORAGE_NEW = torch.UntypedStorage.__new__


def _cuda_storage_on_sim(cls, *args, device=None, **kwargs):
    """``torch.UntypedStorage(...)`` where sim serves CUDA: a CUDA storage of a size, or of a
    sequence of bytes, is made by sim's allocator (a tensor's storage); any other as torch makes
    it."""
    if device is None or torch.device(device).type != "cuda" or kwargs or len(args) > 1:
        return _STORAGE_NEW(cls, *args, **({"device": device} if device is not None else {}),
                            **kwargs)
    if not args or isinstance(args[0], int):
        nbytes = args[0] if args else 0
        return torch.empty(nbytes, dtype=torch.uint8, device=device).untyped_storage()
    return torch.tensor(list(args[0]), dtype=torch.uint8).to(device).untyped_storage()


def _taking_over_cuda_kernels(load):
    """`load` (of a native library), after which the CUDA kernels it registered are sim's."""

    @functools.wraps(load)
    def load_then_take_over(*args, **kwargs):
        before = set(_C.cuda_kernel_ops())
        result = load(*args, **kwargs)
        new = sorted(set(_C.cuda_kernel_ops()) - before)
        if new:
            _C.take_over_cuda_kernels(new)
        return result

    return load_then_take_over


class AsCuda:
    """Installs ``--as-cuda`` for the program's run and takes it away afterwards. Where sim serves
    the CUDA device type itself (``_device.mode.SERVES_CUDA``), nothing maps "cuda": tensors are
    CUDA tensors and torch's own CUDA-side code (autograd, autocast, composite branches) runs; the
    surface's stand-ins stay. Otherwise the mapping (CudaToSim) is entered."""

    def __init__(self, with_triton: bool = False):
        self._lightning_hook = None
        self._triton_hook = None
        self._saved: list[tuple[object, str, object]] = []
        self._mode = CudaToSim()
        self._triton: dict = {}
        self._with_triton = with_triton

    def _set(self, owner, name, value):
        original = getattr(owner, name, None)
        self._saved.append((owner, name, original))
        if (callable(value) and hasattr(original, "__wrapped__")
                and not hasattr(value, "__wrapped__")):
            # torch's own code reads what a decorated function wraps: torch 2.15's dynamo reads
            # torch.cuda.use_mem_pool.__wrapped__ when it is imported
            # (torch/_dynamo/variables/torch.py); the stand-in answers as the original does.
            value.__wrapped__ = original.__wrapped__
        setattr(owner, name, value)

    def install(self) -> None:
        if SERVES_CUDA:
            self._serve_cuda()
        self._install_surface()
        # nn.DataParallel scatters its inputs and gathers their gradients with CUDA's own C++
        # (torch._C._scatter, ...) even on one device: on one device that is a copy, which sim
        # makes as CUDA's does; over several devices it is refused, naming it.
        # (Where "cuda" is mapped to sim, DataParallel's copy streams are not sim's: refused.)
        import torch.nn.parallel.comm as comm
        for name in ("broadcast_coalesced", "reduce_add") + (() if SERVES_CUDA else
                                                             ("scatter", "gather")):
            self._set(comm, name, refused_function(
                "nn.DataParallel over several devices",
                f"torch.nn.parallel.comm.{name} is CUDA's own C++"))
        if SERVES_CUDA:
            self._set(comm, "scatter", _one_device_scatter)
            self._set(comm, "gather", _one_device_gather)
        import torch.cuda.jiterator as jiterator
        self._set(jiterator, "_create_jit_fn",
                  refused_function("torch.cuda.jiterator", "it compiles a CUDA kernel"))
        import torch.utils.cpp_extension as ext
        for name in ("load", "load_inline", "CUDAExtension"):
            self._set(ext, name, refused_function(f"torch.utils.cpp_extension.{name}",
                                                  "custom CUDA kernels do not run on sim"))
        if not SERVES_CUDA:
            self._install_autocast()  # a CUDA tensor's autocast is torch's own
        self._install_distributed()
        if SERVES_CUDA:
            pass  # Lightning's CUDAAccelerator sees CUDA devices: nothing to patch
        elif "lightning.pytorch.accelerators.cuda" in sys.modules:
            self._patch_lightning()
        else:
            self._lightning_hook = AfterImport("lightning.pytorch.accelerators.cuda",
                                                self._patch_lightning)
            sys.meta_path.insert(0, self._lightning_hook)
        if self._with_triton:
            self._install_triton_without_launches()
        else:
            self._hide_triton()
        if not SERVES_CUDA:
            self._mode.__enter__()

    def _hide_triton(self) -> None:
        """Triton is absent, as on a machine without it: None in sys.modules makes `import
        triton` a ModuleNotFoundError (an ImportError) and importlib.util.find_spec("triton")
        None, so that every optional probe (torch's, DeepSpeed's, accelerate's, transformers'
        is_triton_available) takes its no-Triton branch. A Triton already imported (by torch or a
        library) is hidden from the program."""
        self._triton = {k: sys.modules.pop(k) for k in list(sys.modules)
                        if k == "triton" or k.startswith("triton.")}
        sys.modules["triton"] = None
        _forget_triton_probes()

    def _install_triton_without_launches(self) -> None:
        """``--with-triton``: Triton importable, as on a GPU machine, for a program or library
        that imports it unconditionally (torchtitan defines @triton.jit kernels when it is
        imported): defining kernels runs, launching one is refused by name, since sim runs no GPU
        kernel. torch's own probe (torch.utils._triton.has_triton) still says no Triton, so that
        torch.compile generates sim's kernels."""
        import torch._inductor.config as inductor_config
        self._set(inductor_config, "triton_disable_device_detection", True)
        _forget_triton_probes()
        if "triton.runtime.jit" in sys.modules:
            self._refuse_triton_launches()
        else:
            self._triton_hook = AfterImport("triton.runtime.jit", self._refuse_triton_launches)
            sys.meta_path.insert(0, self._triton_hook)

    def _refuse_triton_launches(self) -> None:
        from triton.runtime.jit import JITFunction

        def run(kernel, *args, **kwargs):
            name = getattr(getattr(kernel, "fn", None), "__qualname__", None) or repr(kernel)
            raise UnsupportedOnSim(refusal(f"launching the Triton kernel {name}",
                                           "Triton kernels are compiled for a GPU"))
        self._set(JITFunction, "run", run)

    def _serve_cuda(self) -> None:
        """Sim serves the CUDA device type; what torch's Python-facing C++ does with CUDA by
        calling the CUDA runtime itself is given sim's instead."""
        _C.serve_cuda()
        # torch's factories ask torch.cuda._lazy_init() before a first CUDA tensor, which
        # would initialise the CUDA runtime: sim's device is ready.
        self._set(torch.cuda, "_initialized", True)
        # UntypedStorage.resize_ of a CUDA storage is resize_bytes_cuda (StorageMethods.cpp):
        # a CUDAGuard and a cudaMemcpyAsync. FSDP2 resizes its parameters' storages each step.
        resize = torch.UntypedStorage.resize_

        @functools.wraps(resize)
        def resize_(storage, size):
            if storage.device.type != "cuda":
                return resize(storage, size)
            _C.resize_storage(storage, int(size))
            return storage

        self._set(torch.UntypedStorage, "resize_", resize_)
        # UntypedStorage(n, device="cuda") allocates with CUDA's caching allocator directly
        # (Storage.cpp), as storage.clone() and a module's deepcopy do: sim's memory instead.
        self._set(torch.UntypedStorage, "__new__", staticmethod(_cuda_storage_on_sim))
        # A library of custom ops loaded from now on (torch.ops.load_library, or an extension
        # module imported: torchvision's nms, an extension's) brings CUDA kernels of its own: sim
        # takes over those it registered, as it took over libtorch_cuda's. (Kernels Python code
        # registers with torch.library stay: they are composites of torch's ops.)
        self._set(torch.ops, "load_library", _taking_over_cuda_kernels(torch.ops.load_library))
        import importlib.machinery as machinery
        self._set(machinery.ExtensionFileLoader, "exec_module",
                  _taking_over_cuda_kernels(machinery.ExtensionFileLoader.exec_module))

    def _install_surface(self) -> None:
        """Every row of the table that has a stand-in: in its module, and in torch.cuda's
        submodules that hold the same name."""
        for module_name, rows in surface().items():
            module = importlib.import_module(module_name)
            for name, row in rows.items():
                if row.value is not None:
                    self._set(module, name, row.value)

    def _install_distributed(self) -> None:
        """A process group for CUDA (``init_process_group("nccl")``, or no backend named, which
        is NCCL's on a GPU machine) is sim's counting backend with Gloo for CPU tensors; a
        ``device_id`` naming CUDA names sim."""
        import torch.distributed as dist
        if not dist.is_available():
            return
        register_distributed_backend()

        def on_sim(function, backend_position: int):
            def wrapper(*args, **kwargs):
                args = list(args)
                if len(args) > backend_position:
                    args[backend_position] = _sim_backend(args[backend_position])
                else:
                    kwargs["backend"] = _sim_backend(kwargs.get("backend"))
                if "device_id" in kwargs:
                    kwargs["device_id"] = _map(kwargs["device_id"])
                return function(*args, **kwargs)
            wrapper.__name__ = function.__name__
            wrapper.__doc__ = function.__doc__
            return wrapper

        self._set(dist, "init_process_group", on_sim(dist.init_process_group, 0))
        self._set(dist.distributed_c10d, "init_process_group",
                  dist.init_process_group)
        self._set(dist, "new_group", on_sim(dist.new_group, 2))
        self._set(dist.distributed_c10d, "new_group", dist.new_group)

    def _install_autocast(self) -> None:
        """``torch.autocast("cuda")`` is autocast on sim, and the autocast state a program or a
        library reads or sets for ``"cuda"`` (``torch.is_autocast_enabled("cuda")``,
        ``torch.get_autocast_dtype("cuda")``, ``torch.amp.custom_fwd``'s) is sim's."""
        autocast_init = torch.amp.autocast_mode.autocast.__init__

        def autocast(self_, device_type, *args, **kwargs):
            autocast_init(self_, "sim" if device_type == "cuda" else device_type, *args, **kwargs)

        self._set(torch.amp.autocast_mode.autocast, "__init__", autocast)

        def on_sim(function, default_cuda: bool):
            def state(*args, **kwargs):
                if args and args[0] == "cuda":
                    args = ("sim", *args[1:])
                elif (default_cuda and "device_type" not in kwargs
                      and not (args and isinstance(args[0], str))):
                    args = ("sim", *args)  # is_autocast_enabled(), set_autocast_enabled(True)
                if kwargs.get("device_type") == "cuda":
                    kwargs["device_type"] = "sim"
                return function(*args, **kwargs)
            state.__name__ = function.__name__
            return state

        for name, default_cuda in (("is_autocast_enabled", True), ("get_autocast_dtype", False),
                                   ("set_autocast_enabled", True),
                                   ("set_autocast_dtype", False)):
            self._set(torch, name, on_sim(getattr(torch, name), default_cuda))
        self._set(torch.amp, "is_autocast_available",
                  on_sim(torch.amp.is_autocast_available, False))
        self._set(torch.amp.autocast_mode, "is_autocast_available",
                  on_sim(torch.amp.autocast_mode.is_autocast_available, False))
        # custom_fwd(cast_inputs=...) casts the tensors on its device_type's device: sim's
        cast = torch.amp.autocast_mode._cast
        self._set(torch.amp.autocast_mode, "_cast", lambda value, device_type, dtype: cast(
            value, "sim" if device_type == "cuda" else device_type, dtype))
        self._set(torch, "get_autocast_gpu_dtype", lambda: torch.get_autocast_dtype("sim"))
        self._set(torch, "set_autocast_gpu_dtype",
                  lambda dtype: torch.set_autocast_dtype("sim", dtype))

    def _patch_lightning(self) -> None:
        from lightning.pytorch.accelerators import cuda as accelerator
        self._saved.append((accelerator.CUDAAccelerator, "setup_device",
                            accelerator.CUDAAccelerator.setup_device))
        _cuda_accelerator_on_sim()

    def uninstall(self) -> None:
        if not SERVES_CUDA:
            self._mode.__exit__(None, None, None)
        for hook in (self._lightning_hook, self._triton_hook):
            if hook is not None and hook in sys.meta_path:
                sys.meta_path.remove(hook)
        if "triton" in sys.modules and sys.modules["triton"] is None:
            del sys.modules["triton"]
        sys.modules.update(self._triton)
        _forget_triton_probes()
        for owner, name, value in reversed(self._saved):
            setattr(owner, name, value)
        self._saved.clear()
