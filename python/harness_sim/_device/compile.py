"""``torch.compile`` on sim: what compiled code costs, counted as eager code is.

**The backend.** Inductor, as on CUDA, with sim registered as a device whose kernels are generated
as for the CPU (``register_backend_for_device``: C++ and OpenMP, since sim memory is host memory,
which is how PyTorch's own test of an out-of-tree inductor backend does it). Each kernel inductor
generates is **one launch**, named ``inductor::<kernel>`` (``inductor::cpp_fused_gelu_0``), as a
Triton kernel is one launch on CUDA; what inductor leaves to ATen (matmuls, convolutions, SDPA:
its "extern kernels") runs through the dispatcher and is counted as in eager code. Inductor's C++
backend fuses as its Triton backend does for pointwise and reduction chains, but not always
alike (docs/compile.md gives the measured difference). ``backend="aot_eager"`` or ``"eager"``
need nothing of this: every ATen op of their graphs runs on sim and is a launch.

**Graph breaks and recompilations** are events with the line dynamo names:

- a graph break is counted each time a compiled graph that ended at one has run (dynamo's
  ``GraphCompileReason``, on the graph it hands its backend), with the first line of dynamo's
  reason and the line of the program it broke at: ``graph_break.count`` per step;
- a recompilation is counted when dynamo recompiles a frame because a guard failed, with the
  guard (``get_and_maybe_log_recompilation_reasons``): ``recompile.count``.

The op at a break (``.item()``, a print of a tensor) runs eagerly and is counted as any other:
a sync at its line. Both hooks are dynamo internals of the torch releases harness_sim supports
(2.11 and 2.15), pinned by python/tests/test_compile.py.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import re
import sys

import torch

from .. import _C
from .._after_import import after_import
from .mode import DEVICE_TYPE, SERVES_CUDA

LAUNCH_PREFIX = "inductor::"
_REASON_CHARS = 160
_installed = {"inductor": False, "dynamo": False}
_launched = {"any": False}  # whether a kernel inductor generated for sim ran in this process

BACKEND_NOTE = ("torch.compile: inductor generated C++ kernels for sim, each one launch "
                "(inductor::<kernel>); on CUDA it generates Triton kernels, which fuse alike but "
                "not always the same (docs/compile.md)")


_SHAPES_ONLY = _C.compute() == "shapes"


def report_warnings() -> list[str]:
    """What a report says of compiled code: the backend, once inductor generated code for sim."""
    return [BACKEND_NOTE] if _launched["any"] else []


def _launch(name, kernel, *args):
    """What the generated wrapper calls for each kernel: one launch, timed for the trace. Under
    ``--compute shapes`` the kernel is not run: its buffers have no bytes (inductor allocated
    them by shape, which is all a later op sees)."""
    begin = _C.begin_time()
    if not _SHAPES_ONLY:
        kernel(*args)
    _C.record_launch(name, begin)
    _launched["any"] = True


def empty_strided_cuda_on_sim(size, stride, dtype) -> torch.Tensor:
    """What a wrapper inductor generated for a CUDA device allocates its buffers with, where sim
    serves CUDA: torch's own (``torch._C._dynamo.guards._empty_strided_cuda``) calls CUDA's
    caching allocator directly."""
    return torch.empty_strided(size, stride, dtype=dtype, device="cuda")


def _register_inductor() -> None:
    """Sim in inductor's and dynamo's device registries (once, after torch._inductor.compile_fx
    has been imported)."""
    if _installed["inductor"]:
        return
    _installed["inductor"] = True
    from torch._dynamo.device_interface import CpuInterface, register_interface_for_device
    from torch._inductor.codegen.common import (register_backend_for_device,
                                                register_device_op_overrides)
    from torch._inductor.codegen.cpp import CppScheduling
    from torch._inductor.codegen.cpu_device_op_overrides import CpuDeviceOpOverrides
    from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen
    from torch._inductor.virtualized import V

    class SimInterface(CpuInterface):
        """Dynamo's and inductor's view of sim: CPU's, with sim's devices."""

        @staticmethod
        def current_device() -> int:
            return _C.current_device()

        @staticmethod
        def device_count() -> int:
            return _C.device_count()

        @staticmethod
        def is_triton_capable(device=None) -> bool:
            return False

    class SimWrapperCodegen(PythonWrapperCodegen):
        """Python wrapper code that calls each generated kernel through ``_launch``."""

        @staticmethod
        def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
            if is_subgraph:
                return SubgraphPythonWrapperCodegen(subgraph_name, parent_wrapper,
                                                    partition_signatures)
            return SimWrapperCodegen()

        def write_header(self) -> None:
            super().write_header()
            # (this module by its name: the generated code imports it)
            self.imports.splice(f"from {__name__} import _launch as _harness_sim_launch",
                                strip=True)
            if SERVES_CUDA:  # torch's allocates with CUDA's caching allocator, not the device's
                self.header.splice(f"from {__name__} import "
                                   "empty_strided_cuda_on_sim as empty_strided_cuda", strip=True)

        def _generate_kernel_call_helper(self, kernel_name, call_args, *, device=None,
                                         triton=True, **kwargs):
            device = device or V.graph.get_current_device_or_throw()
            if device.type != DEVICE_TYPE or triton:
                return super()._generate_kernel_call_helper(
                    kernel_name, call_args, device=device, triton=triton, **kwargs)
            args = ", ".join([repr(LAUNCH_PREFIX + kernel_name), kernel_name, *call_args])
            self.writeline(f"_harness_sim_launch({args}){self.ending}")
            return None

    _backend_of_sim_is_cpus()
    _sim_nodes_are_cpu_nodes()
    if SERVES_CUDA:
        _cuda_needs_no_triton()
    # Where sim serves CUDA, these replace CUDA's own entries (Triton's code generator).
    register_interface_for_device(DEVICE_TYPE, SimInterface)
    keyed = "device_custom_pass" in inspect.signature(register_backend_for_device).parameters
    key = {"device_custom_pass": _make_codegen_key_pass()} if keyed else {}
    register_backend_for_device(DEVICE_TYPE, CppScheduling, SimWrapperCodegen, **key)
    register_device_op_overrides(DEVICE_TYPE, CpuDeviceOpOverrides())


@functools.cache
def _codegen_key() -> tuple[str, str, str]:
    """What the code generated for sim depends on besides torch's inputs: this module (its name,
    which the generated code imports, and its source) and the extension's version."""
    with open(__file__, "rb") as f:
        source = hashlib.sha256(f.read()).hexdigest()
    return (__name__, source, _C.HARNESS_VERSION)


def _make_codegen_key_pass():
    """A graph pass that changes nothing and names harness_sim's code generator. Inductor's
    FX graph cache (on disk, across processes) keys a compiled graph on the uuid() of each
    device's pass (torch/_inductor/custom_graph_pass.py): a graph compiled with another
    harness_sim, whose generated code imports another module or calls _launch otherwise, is then
    compiled again instead of loaded."""
    from torch._inductor.custom_graph_pass import CustomGraphModulePass

    class CodegenKey(CustomGraphModulePass):
        def __call__(self, gm) -> None:
            pass

        def uuid(self):
            return _codegen_key()

    return CodegenKey()


def _backend_of_sim_is_cpus() -> None:
    """Inductor asks ``get_current_backend(device_type)`` which code generator a device has
    (its dtype propagation and bf16 upcasts follow the answer): any device but cpu, mps and xpu is
    answered as CUDA's (Triton). Sim's is the CPU's. The function is imported by name into
    inductor's modules: each one that holds it gets the answer for sim."""
    from torch._inductor import config, utils

    original = utils.get_current_backend
    if getattr(original, "_harness_sim", False):
        return

    @functools.wraps(original)
    def get_current_backend(device_type=None):
        if not device_type:
            from torch._inductor.virtualized import V
            device_type = V.graph.get_current_device_or_throw().type
        return config.cpu_backend if device_type == DEVICE_TYPE else original(device_type)

    get_current_backend._harness_sim = True
    for name, module in list(sys.modules.items()):
        if (name == "torch._inductor" or name.startswith("torch._inductor.")) and \
                getattr(module, "get_current_backend", None) is original:
            module.get_current_backend = get_current_backend


def _sim_nodes_are_cpu_nodes() -> None:
    """The scheduler keeps the CPU's code generator to the CPU's rules (no SIMD loop reindexing
    or grouping, torch 2.15's fusion of a reduction with a pointwise) by asking a node
    ``is_cpu()``, and lowering asks ``ir.is_cpu(x)``: sim's nodes are generated as the CPU's."""
    from torch._inductor import ir, scheduler

    node_is_cpu = scheduler.BaseSchedulerNode.is_cpu
    if getattr(node_is_cpu, "_harness_sim", False):
        return

    @functools.wraps(node_is_cpu)
    def is_cpu(self) -> bool:
        device = self.get_device()
        return device is not None and device.type in ("cpu", DEVICE_TYPE)

    is_cpu._harness_sim = True
    scheduler.BaseSchedulerNode.is_cpu = is_cpu
    if hasattr(ir, "is_cpu") and hasattr(ir, "get_device_type"):
        def ir_is_cpu(x) -> bool:
            return ir.get_device_type(x) in ("cpu", DEVICE_TYPE)

        ir.is_cpu = ir_is_cpu


def _cuda_needs_no_triton() -> None:
    """Where sim serves CUDA, inductor generates for a CUDA device as for sim: C++ kernels on
    host memory. So CUDA is not one of inductor's GPUs (``utils.GPU_TYPES``, which ``is_gpu``
    reads: the SIMD loop grouping and reordering for Triton, GPU-only lowerings), and the
    scheduler's check that Triton is installed for a GPU (``Scheduler.create_backend``) is the
    CPU's: none."""
    from torch._inductor import config, scheduler, utils
    if "cuda" in utils.GPU_TYPES:
        utils.GPU_TYPES.remove("cuda")
    # What inductor's passes read of CUDA's code generator (the online softmax pattern is for
    # Triton's kernels only, post_grad.py): the CPU's.
    config.cuda_backend = config.cpu_backend
    from torch._inductor.codegen.common import get_scheduling_for_device
    from torch._inductor.virtualized import V

    create_backend = scheduler.Scheduler.create_backend
    if getattr(create_backend, "_harness_sim", False):
        return

    @functools.wraps(create_backend)
    def create_sim_backend(self, device):
        if device.type != "cuda":
            return create_backend(self, device)
        V.graph.add_device_info(device)
        return get_scheduling_for_device("cuda")(self)

    create_sim_backend._harness_sim = True
    scheduler.Scheduler.create_backend = create_sim_backend


def _reason_text(reason: str) -> str:
    """Dynamo's reason, first line, at most _REASON_CHARS characters."""
    text = " ".join(str(reason).strip().splitlines()[:1]).strip() or "graph break"
    return text if len(text) <= _REASON_CHARS else text[:_REASON_CHARS - 3] + "..."


_CACHE_ENTRY = re.compile(r"^\d+/\d+: ")
_NUMBER = re.compile(r"(?<![\w.:/])-?\d+(\.\d+)?([eE][-+]?\d+)?(?![\w.])")


def _guard_text(reason: str) -> str:
    """The guard that failed, as one site however its values change: without dynamo's cache
    entry ("1/3: ") and with each number as N (a guard on a Python float fails with a new value
    each step: "___stack0 == N")."""
    return _reason_text(_NUMBER.sub("N", _CACHE_ENTRY.sub("", str(reason).strip())))


def _site(stack) -> tuple[str, str]:
    """(frame, library) of a stack of ``traceback.FrameSummary``, outermost first."""
    lines = [(f.filename, int(f.lineno or 0), f.name) for f in reversed(list(stack or []))]
    return tuple(_C.site_of(lines)) if lines else ("", "")


def _counting_breaks(compiled, reason: str, frame: str, library: str):
    """``compiled`` (a graph that ended at a graph break), recording the break each time it has
    run."""

    @functools.wraps(compiled)
    def run_then_break(*args, **kwargs):
        result = compiled(*args, **kwargs)
        _C.record_event("graph_break", reason, frame, library)
        return result

    return run_then_break


def _register_dynamo() -> None:
    """Graph breaks and recompilations recorded (once, after torch._dynamo has been imported)."""
    if _installed["dynamo"]:
        return
    _installed["dynamo"] = True
    from torch._dynamo import convert_frame
    from torch._dynamo.output_graph import OutputGraph

    call_user_compiler = OutputGraph.call_user_compiler

    @functools.wraps(call_user_compiler)
    def compile_graph(self, gm, *args, **kwargs):
        compiled = call_user_compiler(self, gm, *args, **kwargs)
        why = getattr(gm, "compile_subgraph_reason", None) or getattr(
            self, "compile_subgraph_reason", None)
        if why is None or not getattr(why, "graph_break", False):
            return compiled
        frame, library = _site(getattr(why, "user_stack", None))
        return _counting_breaks(compiled, _reason_text(why.reason), frame, library)

    OutputGraph.call_user_compiler = compile_graph

    reasons_of = convert_frame.get_and_maybe_log_recompilation_reasons

    @functools.wraps(reasons_of)
    def recompilation_reasons(cache_entry, frame, *args, **kwargs):
        reasons = reasons_of(cache_entry, frame, *args, **kwargs)
        if not kwargs.get("skip_logging", False):
            code = getattr(frame, "f_code", None)
            where = ("", "")
            if code is not None:
                where = tuple(_C.site_of([(code.co_filename, code.co_firstlineno,
                                           code.co_name)]))
            what = _guard_text(reasons[0]) if reasons else "a guard failed"
            _C.record_event("recompile", what, *where)
        return reasons

    convert_frame.get_and_maybe_log_recompilation_reasons = recompilation_reasons


def install() -> None:
    """Sim for ``torch.compile``: at once where torch's compiler is imported already, else
    right after it is."""
    after_import("torch._dynamo", _register_dynamo)
    after_import("torch._inductor.compile_fx", _register_inductor)
