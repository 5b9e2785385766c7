"""Run under `python -m harness_sim run --as-cuda`: touches every public name of the modules
--as-cuda classifies, as a program would, and prints one JSON line: the names that did not behave
as their kind says (a mapped, answered or as-is name that raised; a refused one that ran or was
not refused by name) and a few answers. test_as_cuda_surface.py reads it."""
import contextlib
import importlib
import json
import warnings

import torch
import torch.backends.cudnn

from harness_sim._cuda.surface import (ANSWERED, AS_IS, MAPPED, MODULES, REFUSED,
                                       UnsupportedOnSim, surface)

warnings.simplefilter("ignore")  # the deprecated names warn that they are


def _a_cuda_tensor():
    return torch.ones(4, device="cuda")


# Arguments a call needs; a name absent here is called with none.
ARGS = {
    "torch.cuda.can_device_access_peer": lambda: (0, 0),
    "torch.cuda.check_error": lambda: (0,),
    "torch.cuda.manual_seed": lambda: (0,),
    "torch.cuda.manual_seed_all": lambda: (0,),
    "torch.cuda.set_device": lambda: (0,),
    "torch.cuda.set_per_process_memory_fraction": lambda: (0.5,),
    "torch.cuda.set_rng_state": lambda: (torch.cuda.get_rng_state(),),
    "torch.cuda.set_rng_state_all": lambda: (torch.cuda.get_rng_state_all(),),
    "torch.cuda.set_stream": lambda: (torch.cuda.current_stream(),),
    "torch.cuda.set_sync_debug_mode": lambda: (0,),
    "torch.cuda.caching_allocator_alloc": lambda: (16,),
    "torch.cuda.caching_allocator_delete": lambda: (0,),
    "torch.cuda.change_current_allocator": lambda: (None,),
    "torch.cuda.get_stream_from_external": lambda: (0,),
    "torch.cuda.use_mem_pool": lambda: (None,),
    "torch.cuda.make_graphed_callables": lambda: (None, None),
    "torch.cuda.device": lambda: (0,),
    "torch.cuda.device_of": lambda: (_a_cuda_tensor(),),
    "torch.cuda.StreamContext": lambda: (None,),
    "torch.cuda.ExternalStream": lambda: (0,),
    "torch.cuda.nvtx.mark": lambda: ("mark",),
    "torch.cuda.nvtx.range": lambda: ("range",),
    "torch.cuda.nvtx.range_push": lambda: ("pushed",),
    "torch.cuda.nvtx.range_start": lambda: ("started",),
    "torch.cuda.nvtx.range_end": lambda: (torch.cuda.nvtx.range_start("r"),),
    "torch.cuda.amp.custom_bwd": lambda: (lambda ctx, g: g,),
    "torch.backends.cuda.enable_cudnn_sdp": lambda: (True,),
    "torch.backends.cuda.enable_flash_sdp": lambda: (True,),
    "torch.backends.cuda.enable_math_sdp": lambda: (True,),
    "torch.backends.cuda.enable_mem_efficient_sdp": lambda: (True,),
    "torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp": lambda: (False,),
    "torch.backends.cuda.can_use_cudnn_attention": lambda: (None,),
    "torch.backends.cuda.can_use_efficient_attention": lambda: (None,),
    "torch.backends.cuda.can_use_flash_attention": lambda: (None,),
    "torch.backends.cudnn.is_acceptable": lambda: (_a_cuda_tensor(),),
    "torch.accelerator.set_device_idx": lambda: (0,),
    "torch.accelerator.set_device_index": lambda: (0,),
    "torch.accelerator.device_index": lambda: (0,),
    "torch.accelerator.set_stream": lambda: (torch.accelerator.current_stream(),),
    # torch 2.15's names
    "torch.cuda.export_dot": lambda: ("graph.dot",),
    "torch.cuda.export_graph_data": lambda: ("graph.pkl",),
    **{f"torch.cuda.graphs.register_graph_{event}_hook": lambda: (lambda graph: None,)
       for event in ("capture_start", "capture_end", "instantiate", "replay_start", "replay_end",
                     "destroy")},
    "torch.backends.cuda.cublas_workspace_size": lambda: (),
    "torch.backends.cuda.blas_workspace_size": lambda: (),
}
FLOAT_TENSOR = {"torch.cuda.FloatTensor", "torch.cuda.DoubleTensor"}
# Classes that are not made by a program (exception classes, classes of module objects, argument
# bundles a library makes): their rows are checked by name only.
NOT_MADE = {"CudaError", "DeferredCudaCallError", "cudaStatus", "SDPAParams", "cuBLASModule",
            "cuFFTPlanCache", "cuFFTPlanCacheAttrContextProp", "cuFFTPlanCacheManager",
            "CudnnModule", "GradScaler", "autocast"}


def _args(qualified: str) -> tuple:
    """The arguments a call of the name needs (torch.cuda.memory.X's are torch.cuda.X's)."""
    name = qualified.rsplit(".", 1)[-1]
    return ARGS.get(qualified, ARGS.get(f"torch.cuda.{name}", lambda: ()))()


def touch(qualified: str, obj):
    """Uses obj as a program would; returns what it gave."""
    args = _args(qualified)
    if isinstance(obj, type):
        made = obj(*args) if not issubclass(obj, torch.Tensor) else obj
        if hasattr(made, "__enter__"):
            with made:
                pass
        return made
    if callable(obj):
        result = obj(*args)
        if isinstance(result, contextlib.AbstractContextManager) or hasattr(result, "__enter__"):
            with result:
                pass
        return result
    return obj


def check(module_name: str, name: str, kind: str) -> str | None:
    """None when the name behaves as its kind says, else what it did."""
    module = importlib.import_module(module_name)
    qualified = f"{module_name}.{name}"
    obj = getattr(module, name)
    if kind == REFUSED:
        if name == "jiterator":
            obj, args = obj._create_jit_fn, ("template <typename T> T f(T x) { return x; }",)
        else:
            args = _args(qualified)
        try:
            obj(*args)
        except UnsupportedOnSim as e:
            return None if "not supported on sim" in str(e) else f"refused without naming: {e}"
        except Exception as e:  # noqa: BLE001 (what a program would have seen)
            return f"{type(e).__name__}: {e}"
        return "ran"
    if isinstance(obj, type) and (name in NOT_MADE or issubclass(obj, BaseException)):
        return None
    if isinstance(obj, type(torch)):
        return None  # a submodule: its own rows
    try:
        touch(qualified, obj)
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return None


def answers() -> dict:
    x = torch.cuda.FloatTensor(2, 3)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        autocast_seen = (torch.is_autocast_enabled("cuda"), torch.is_autocast_enabled(),
                         str(torch.get_autocast_dtype("cuda")))

    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
    def fwd_dtype(t):
        return str(t.dtype)

    with torch.autocast("cuda", dtype=torch.bfloat16):
        custom_fwd_cast = fwd_dtype(torch.ones(2, device="cuda", dtype=torch.bfloat16))
    return {
        "device_count": torch.cuda.device_count(),
        "capability": list(torch.cuda.get_device_capability()),
        "name": torch.cuda.get_device_name(0),
        "capturing": torch.cuda.graphs.is_current_stream_capturing(),
        "accelerator": torch.accelerator.current_accelerator().type,
        "legacy_tensor": [str(x.device), str(x.dtype), isinstance(x, torch.cuda.FloatTensor),
                          isinstance(x, torch.cuda.HalfTensor)],
        "memory_module_sees_tensor": torch.cuda.memory.memory_allocated() >= x.nbytes,
        "accelerator_memory_sees_tensor": torch.accelerator.memory_allocated() >= x.nbytes,
        "mem_get_info_total": torch.cuda.memory.mem_get_info()[1],
        "is_acceptable": torch.backends.cudnn.is_acceptable(x),
        "autocast_seen": list(autocast_seen),
        "custom_fwd_cast": custom_fwd_cast,
        "graph_is_class": isinstance(torch.cuda.CUDAGraph, type),
        "graph_subclassable": issubclass(type("G", (torch.cuda.CUDAGraph,), {}),
                                         torch.cuda.CUDAGraph),
    }


def main():
    table = surface()
    failures = {}
    kinds = {}
    for module_name in MODULES:
        for name, row in sorted(table[module_name].items()):
            kinds[row.kind] = kinds.get(row.kind, 0) + 1
            problem = check(module_name, name, row.kind)
            if problem:
                failures[f"{module_name}.{name} ({row.kind})"] = problem
    assert set(kinds) <= {MAPPED, ANSWERED, AS_IS, REFUSED}
    print("SURFACE " + json.dumps({"failures": failures, "kinds": kinds, "answers": answers()}))


main()
