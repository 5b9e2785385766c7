"""OpInfo / ModuleInfo sweep: every op of PyTorch's ``op_db`` and every module of its ``module_db``
on the sim device, compared with CPU.

sim runs CPU's kernel (or a sim kernel that follows CUDA) on host memory, so each output must equal
CPU's. For each OpInfo (filtered with ``--ops``) and dtype (float32, and bfloat16 / float16 where the
op's CPU dtypes have them; an op without float32 gets the one dtype ``test_compare_cpu`` would pick),
each sample of ``op.sample_inputs("sim", dtype, requires_grad=...)`` runs on sim and on a CPU copy
(the reference), after ``torch.manual_seed(0)`` on each side (sim draws from the CPU generator, so
random ops give equal values). That is torch's ``test_ops.py::TestCommon::test_compare_cpu`` with
sim for CUDA: samples built for the device (the tensors an OpInfo keeps on CPU stay there), a CPU
copy of each, ``output_process_fn_grad`` on both outputs, ``TestCase.assertEqual`` with
``atol=rtol=1e-3`` (raised by any ``toleranceOverride`` the OpInfo gives that test). The CPU copy
keeps each tensor's storage, strides and offset. ``--samples-on cpu`` builds samples on CPU and
copies them to sim instead. Then, where the op supports autograd and outputs are floating, input
gradients of a deterministic weighted sum of the outputs are compared. ModuleInfos follow
``test_modules.py::TestModule::test_cpu_gpu_parity`` (module and inputs built on CPU, the module
``copy.deepcopy``-ed and the inputs moved to sim; outputs, input and parameter gradients and the
module's state after the step are compared).

Each sample is ``pass``, ``fail`` (sim raised: exception type and first line), ``mismatch``
(values differ: the largest absolute difference) or ``skip`` (CPU itself raised). An op or module
passes when every sample it ran passes.

    python python/tests/opinfo_sweep.py [--ops GLOB,...] [--modules GLOB,...] [--no-ops]
        [--no-modules] [--dtypes float32,bfloat16,float16] [--max-samples N]
        [--json OUT.json] [--markdown OUT.md]

``--ops`` alone runs only ops, ``--modules`` alone only modules. Progress goes to stderr, one line
per op or module. Exit status 0 when the sweep ran (whatever the results), 2 on bad arguments, 1
when it could not start (torch's test databases need ``expecttest``:
python/requirements-extra.txt). As a script it runs the items in a child process and starts a new
one after a crash or a hang, so one bad kernel costs one item, not the sweep (``--no-isolate`` runs
in this process). From pytest: ``run_sweep(op_names=[...], module_names=[...], dtypes=[...])``.
"""
from __future__ import annotations

import argparse
import collections
import copy
import dataclasses
import fnmatch
import json
import math
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from typing import Any, Callable, Iterable, Optional, Sequence

import torch
import torch.utils._pytree as pytree

# The device sim serves: "sim", or "cuda" with HARNESS_SIM_AS_CUDA=device (as under `run
# --as-cuda`: the sweep then runs on CUDA tensors, sim's kernels at CUDA's key and torch's own
# CUDA-side code).
SIM = "cuda" if os.environ.get("HARNESS_SIM_AS_CUDA") == "device" else "sim"
DEFAULT_DTYPES = ("float32", "bfloat16", "float16")
DTYPE_NAMES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
}

# test_compare_cpu: self.assertEqual(cuda_results, cpu_results, atol=1e-3, rtol=1e-3); a
# toleranceOverride on that test raises them (TestCase takes the larger of the two).
COMPARE_ATOL = 1e-3
COMPARE_RTOL = 1e-3

# Lower precision: one rounding of the dtype apart (2 units in the last place). Sim runs CUDA's
# split of an op where CPU fuses it (cudnn_convolution then the bias add_: the output rounded
# twice) and CUDA's fused kernels that accumulate in float32 where CPU's path rounds at each
# step; test_compare_cpu itself tests float32 only.
LOW_PRECISION_TOLERANCE = {torch.bfloat16: (1e-2, 2 * 2.0 ** -7), torch.float16: (1e-3, 2 * 2.0 ** -10)}
# ... or two roundings at the scale of the whole output (of the largest |cpu| value): a sum of
# many terms (a convolution's) rounds by the scale of its terms, not of its result.
LOW_PRECISION_SCALE = {torch.bfloat16: 2 * 2.0 ** -7, torch.float16: 2 * 2.0 ** -10}
# Modules in lower precision: test_cpu_gpu_parity's own CPU-against-GPU tolerance (atol 5e-2,
# which it gives float32), for layers whose forward and backward chain several such ops.
MODULE_LOW_PRECISION_TOLERANCE = (5e-2, 5e-2)

# Ops whose output is uninitialized memory: no two devices (no two calls) agree. test_compare_cpu
# skips them too ("output is non-deterministic"); its other skips (random ops, undefined shifts and
# casts, unique's order) are run here, since sim runs CPU's kernels on CPU's generator.
UNDEFINED_OUTPUT_OPS = frozenset(
    {"empty", "empty_like", "empty_permuted", "empty_strided", "new_empty", "new_empty_strided"}
)

# Modules also swept in bfloat16 (when CPU runs them in bfloat16).
BF16_MODULES = frozenset(
    {
        "nn.Linear",
        "nn.Conv1d",
        "nn.Conv2d",
        "nn.Conv3d",
        "nn.ConvTranspose1d",
        "nn.ConvTranspose2d",
        "nn.ConvTranspose3d",
        "nn.LSTM",
        "nn.GRU",
        "nn.LayerNorm",
        "nn.BatchNorm1d",
        "nn.BatchNorm2d",
        "nn.BatchNorm3d",
        "nn.MultiheadAttention",
        "nn.TransformerEncoderLayer",
    }
)

# ANY_DTYPE_ORDER of torch/testing/_internal/common_device_type.py: the dtype test_compare_cpu picks
# (OpDTypes.any_common_cpu_cuda_one) for an op that has no float32.
ANY_DTYPE_ORDER = (
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
    torch.float16,
    torch.bfloat16,
    torch.long,
    torch.int32,
    torch.int16,
    torch.int8,
    torch.uint8,
    torch.bool,
)

STATUSES = ("pass", "fail", "mismatch", "skip")
DEFAULT_SAMPLE_TIMEOUT_S = 120.0
DEFAULT_ITEM_TIMEOUT_S = 900.0


# ----------------------------------------------------------------------------------------------
# Results


@dataclasses.dataclass
class SampleResult:
    dtype: str
    index: int
    desc: str
    status: str  # pass | fail | mismatch | skip
    stage: str = ""  # forward | backward | to_sim | state (where it failed or mismatched)
    reason: str = ""
    max_diff: Optional[float] = None  # largest |sim - cpu| over all compared values
    max_rel: Optional[float] = None  # largest |sim - cpu| / largest |cpu| of the same tensor
    exact: bool = False  # every compared value bit-equal (NaN == NaN)
    backward: str = ""  # "checked", or why not
    training: Optional[bool] = None  # modules only

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class ItemResult:
    kind: str  # op | module
    name: str
    status: str  # pass | fail | mismatch | skip
    dtypes: list = dataclasses.field(default_factory=list)
    counts: dict = dataclasses.field(default_factory=lambda: {s: 0 for s in STATUSES})
    samples_exact: int = 0  # passing samples whose values are bit-equal
    backward_checked: int = 0
    backward_not_checked: dict = dataclasses.field(default_factory=dict)  # why -> passing samples
    max_diff_passed: float = 0.0  # largest difference among passing samples
    reason: str = ""  # the most common reason among failing (else mismatching, else skipped) samples
    notes: list = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    samples: list = dataclasses.field(default_factory=list)  # SampleResult of non-passing samples

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def add(self, r: SampleResult) -> None:
        self.counts[r.status] += 1
        if r.status == "pass":
            self.samples_exact += r.exact
            if r.max_diff is not None and r.max_diff > self.max_diff_passed:
                self.max_diff_passed = r.max_diff
        else:
            self.samples.append(r)
        if r.backward == "checked":
            self.backward_checked += 1
        elif r.backward and r.status == "pass":
            why = re.sub(r"\s+", " ", r.backward)[:160]
            self.backward_not_checked[why] = self.backward_not_checked.get(why, 0) + 1

    def finish(self) -> None:
        c = self.counts
        if c["fail"]:
            self.status = "fail"
        elif c["mismatch"]:
            self.status = "mismatch"
        elif c["pass"]:
            self.status = "pass"
        else:
            self.status = "skip"
        if self.status == "pass":
            return
        bad = [s for s in self.samples if s.status == self.status]
        if not bad:
            return
        key = lambda r: re.sub(r", max abs diff .*$", "", r)  # noqa: E731
        reason, _ = collections.Counter(key(s.reason) for s in bad).most_common(1)[0]
        same = [s for s in bad if key(s.reason) == reason]
        diffs = [s.max_diff for s in same if s.max_diff is not None]
        rels = [s.max_rel for s in same if s.max_rel is not None]
        if self.status == "mismatch" and diffs and reason.endswith("values differ"):
            reason += f", max abs diff {max(diffs):.3g}"
            if rels:
                reason += f" ({max(rels):.2g} of the largest |cpu|)"
        self.reason = reason

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["samples"] = [s if isinstance(s, dict) else s.to_dict() for s in self.samples]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "ItemResult":
        d = dict(d)
        d["samples"] = [SampleResult(**s) for s in d.get("samples", [])]
        return cls(**d)


@dataclasses.dataclass
class SweepResult:
    ops: list  # ItemResult
    modules: list  # ItemResult
    dtypes: list
    seconds: float = 0.0
    options: dict = dataclasses.field(default_factory=dict)
    build: dict = dataclasses.field(default_factory=dict)  # sim_build()

    def items(self) -> list:
        return list(self.ops) + list(self.modules)

    def by_name(self) -> dict:
        return {(r.kind, r.name): r for r in self.items()}

    def failing(self) -> list:
        return [r for r in self.items() if r.status in ("fail", "mismatch")]

    @staticmethod
    def _tally(items: Sequence[ItemResult]) -> dict:
        t = {"total": len(items)}
        for s in STATUSES:
            t[s] = sum(r.status == s for r in items)
        t["samples"] = {s: sum(r.counts[s] for r in items) for s in STATUSES}
        t["samples"]["exact"] = sum(r.samples_exact for r in items)
        t["samples"]["backward_checked"] = sum(r.backward_checked for r in items)
        return t

    def summary(self) -> dict:
        return {"ops": self._tally(self.ops), "modules": self._tally(self.modules)}

    def to_json(self) -> dict:
        return {
            "schema": "opinfo_sweep/1",
            "torch": torch.__version__,
            "python": platform.python_version(),
            "dtypes": list(self.dtypes),
            "seconds": round(self.seconds, 1),
            "options": self.options,
            "harness_sim": self.build,
            "rules": {
                "atol": COMPARE_ATOL,
                "rtol": COMPARE_RTOL,
                "skipped_as_undefined": sorted(UNDEFINED_OUTPUT_OPS),
            },
            "summary": self.summary(),
            "ops": [r.to_dict() for r in self.ops],
            "modules": [r.to_dict() for r in self.modules],
        }

    def to_markdown(self) -> str:
        return render_markdown(self)


# ----------------------------------------------------------------------------------------------
# Helpers


class SampleTimeout(BaseException):
    """Not an Exception: the handlers of a sim failure let it through to _timed_out."""


class _Alarm:
    """Raises SampleTimeout in the main thread after `seconds` (between Python bytecodes: a kernel
    that never returns is left to the parent's watchdog)."""

    def __init__(self, seconds: Optional[float]):
        self.seconds = seconds
        self.active = False

    def __enter__(self):
        import threading

        if self.seconds and threading.current_thread() is threading.main_thread() and hasattr(
            signal, "setitimer"
        ):
            def on_alarm(signum, frame):
                raise SampleTimeout(f"sample took more than {self.seconds:g} s")

            self.previous = signal.signal(signal.SIGALRM, on_alarm)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
            self.active = True
        return self

    def __exit__(self, *exc):
        if self.active:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)
        return False


def _timed_out(fn: Callable[[], SampleResult], dtype: torch.dtype, index: int, desc: str,
               training: Optional[bool] = None) -> SampleResult:
    try:
        return fn()
    except SampleTimeout as e:
        return SampleResult(dtype=_short_dtype(dtype), index=index, desc=desc, status="fail",
                            stage="timeout", reason=f"timeout: {e}", training=training)


def _first_line(e: BaseException, limit: int = 300) -> str:
    text = str(e).strip()
    line = text.splitlines()[0].strip() if text else ""
    if not line and text:
        line = text.strip()
    out = f"{type(e).__name__}: {line}" if line else type(e).__name__
    return out if len(out) <= limit else out[: limit - 3] + "..."


def _short_dtype(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _describe_value(v: Any) -> str:
    if isinstance(v, torch.Tensor):
        shape = "x".join(str(s) for s in v.shape) or "()"
        extra = "" if v.is_contiguous() or v.numel() <= 1 else " nc"
        return f"{_short_dtype(v.dtype)}[{shape}]{extra}"
    if isinstance(v, (list, tuple)):
        inner = ", ".join(_describe_value(x) for x in v[:4])
        return f"[{inner}{', ...' if len(v) > 4 else ''}]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}={_describe_value(x)}" for k, x in list(v.items())[:4]) + "}"
    r = repr(v)
    return r if len(r) <= 30 else r[:27] + "..."


def _describe(input_: Any, args: Sequence = (), kwargs: Optional[dict] = None, name: str = "") -> str:
    parts = [_describe_value(input_)] if input_ is not None else []
    parts += [_describe_value(a) for a in args]
    parts += [f"{k}={_describe_value(v)}" for k, v in (kwargs or {}).items()]
    text = ", ".join(parts)
    if name:
        text = f"{name}: {text}"
    return text if len(text) <= 160 else text[:157] + "..."


_DEVICE_STRING = re.compile(rf"^(cpu|{SIM})(:\d+)?$")


def _map_tree(obj: Any, on_tensor: Callable[[torch.Tensor], Any], src: str, dst: str) -> Any:
    """Map tensors through nested lists, tuples (named ones kept) and dicts, and turn device
    arguments of type `src` (torch.device, or a string such as "cpu" / "sim:0") into `dst`."""
    if isinstance(obj, torch.Tensor):
        return on_tensor(obj)
    if isinstance(obj, torch.device):
        return torch.device(dst) if obj.type == src else obj
    if isinstance(obj, str):
        m = _DEVICE_STRING.match(obj)
        return dst if m and m.group(1) == src else obj
    if isinstance(obj, list):
        return [_map_tree(x, on_tensor, src, dst) for x in obj]
    if isinstance(obj, tuple):
        items = [_map_tree(x, on_tensor, src, dst) for x in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else tuple(items)
    if isinstance(obj, dict):
        return {k: _map_tree(v, on_tensor, src, dst) for k, v in obj.items()}
    return obj


def _copy_tensor(t: torch.Tensor, device: str, keep_layout: bool) -> torch.Tensor:
    """t's values on `device`, a new leaf with t's requires_grad. keep_layout copies the whole
    storage and rebuilds the same view on it (sizes, strides, storage offset: a sample's
    non-contiguous, expanded or partial views stay what they are); otherwise t.to(device), as
    test_compare_cpu and test_cpu_gpu_parity do."""
    with torch.no_grad():
        d = t.detach()
        r = None
        if (keep_layout and d.layout == torch.strided and not d.is_conj() and not d.is_neg()
                and not d.is_quantized):
            storage = d.untyped_storage()
            storage = storage.cpu() if device == "cpu" else storage.to(device=device)
            r = torch.empty(0, dtype=d.dtype, device=device).set_(
                storage, d.storage_offset(), d.size(), d.stride())
        if r is None:
            r = d.to(device)
    if t.requires_grad:
        r.requires_grad_(True)
    return r


def _copy_tree(obj: Any, device: str, memo: Optional[dict], keep_layout: bool) -> Any:
    memo = {} if memo is None else memo
    src = "cpu" if device == SIM else SIM

    def move(t: torch.Tensor) -> torch.Tensor:
        hit = memo.get(id(t))
        if hit is None or hit[0] is not t:
            hit = memo[id(t)] = (t, _copy_tensor(t, device, keep_layout))
        return hit[1]

    return _map_tree(obj, move, src, device)


def to_sim(obj: Any, memo: Optional[dict] = None, keep_layout: bool = False) -> Any:
    """Every tensor moved to sim (a new leaf with the same requires_grad, as test_cpu_gpu_parity
    does), cpu device arguments turned into sim, the rest as it is. A tensor passed twice
    (op(x, x)) gives one sim tensor, through `memo` (id -> (tensor, copy))."""
    return _copy_tree(obj, SIM, memo, keep_layout)


def to_cpu(obj: Any, memo: Optional[dict] = None, keep_layout: bool = True) -> Any:
    """The CPU reference of a sample built on sim: to_sim the other way."""
    return _copy_tree(obj, "cpu", memo, keep_layout)


def _outputs_belong_on_sim(obj: Any) -> bool:
    """A sample's outputs must be on sim when it has a sim tensor or device argument and no
    explicit CPU device argument (zeros_like(x, device="cpu"), torch.arange(2))."""
    on_sim = False
    for x in _leaves(obj):
        if isinstance(x, torch.Tensor):
            on_sim = on_sim or x.device.type == SIM
        elif isinstance(x, torch.device):
            if x.type == "cpu":
                return False
            on_sim = on_sim or x.type == SIM
        elif isinstance(x, str) and _DEVICE_STRING.match(x):
            if x.startswith("cpu"):
                return False
            on_sim = True
    return on_sim


def _to_cpu_tensor(t: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return t.detach().to("cpu")


def _leaves(obj: Any) -> list:
    return pytree.tree_leaves(obj)


def _tensor_leaves(obj: Any) -> list:
    return [x for x in _leaves(obj) if isinstance(x, torch.Tensor)]


def _max_abs_diff(expected: torch.Tensor, actual: torch.Tensor) -> tuple[float, float, bool]:
    """(largest |actual - expected|, that over the largest finite |expected|, bit-equal), NaN ==
    NaN; inf where shapes differ or only one side is NaN. The second tells rounding (a few eps of
    the dtype) from a wrong value."""
    a, b = expected, actual
    if a.shape != b.shape:
        return math.inf, math.inf, False
    if a.numel() == 0:
        return 0.0, 0.0, a.dtype == b.dtype
    if a.is_complex() or b.is_complex():
        a2, b2 = a.to(torch.complex128), b.to(torch.complex128)
        equal = (a2 == b2) | (a2.isnan() & b2.isnan())
    elif a.is_floating_point() or b.is_floating_point():
        a2, b2 = a.to(torch.float64), b.to(torch.float64)
        equal = (a2 == b2) | (a2.isnan() & b2.isnan())
    else:
        a2, b2 = a.to(torch.int64), b.to(torch.int64)
        equal = a2 == b2
    if bool(equal.all()):
        return 0.0, 0.0, a.dtype == b.dtype
    diff = (a2 - b2).abs().to(torch.float64)
    mag = a2.abs().to(torch.float64)
    diff = torch.where(equal, torch.zeros_like(diff), diff)
    diff = torch.where(diff.isnan(), torch.full_like(diff, math.inf), diff)
    mag = mag[mag.isfinite()]
    largest = float(mag.max()) if mag.numel() else 0.0
    worst = float(diff.max())
    return worst, (worst / largest if largest > 0 else math.inf), False


_comparer = None


def _get_comparer():
    global _comparer
    if _comparer is None:
        from torch.testing._internal.common_utils import TestCase

        class _Compare(TestCase):
            def runTest(self):  # pragma: no cover - never run
                pass

        _comparer = _Compare()
    return _comparer


def compare(expected: Any, actual: Any, atol: float, rtol: float, check_device: bool = True,
            scale_rtol: Optional[float] = None
            ) -> tuple[bool, Optional[float], Optional[float], bool, str]:
    """(close, max abs diff, that relative to the largest |expected|, bit-exact, message):
    TestCase.assertEqual(actual, expected, atol=, rtol=) as test_compare_cpu calls it (exact dtype,
    any device), the actual side copied to CPU first; with check_device, a tensor of `actual` not
    on sim is a mismatch. `scale_rtol` (lower precision): also close when the largest difference
    is within that fraction of the largest |expected| (roundings at the scale of the output)."""
    exp_t = _tensor_leaves(expected)
    act_t = _tensor_leaves(actual)
    for t in act_t if check_device else ():
        if t.device.type != SIM:
            return False, None, None, False, f"output on {t.device.type}, not on sim"
    try:
        actual_cpu = pytree.tree_map(
            lambda x: _to_cpu_tensor(x) if isinstance(x, torch.Tensor) else x, actual
        )
    except Exception as e:  # copying back failed: a sim failure
        raise _SimCopyError(e) from e
    max_diff: Optional[float] = None
    max_rel: Optional[float] = None
    exact = True
    if len(exp_t) == len(act_t):
        for a, b in zip(exp_t, _tensor_leaves(actual_cpu)):
            if a.layout != torch.strided or b.layout != torch.strided:
                continue
            d, r, eq = _max_abs_diff(a.detach(), b)
            max_diff = d if max_diff is None else max(max_diff, d)
            max_rel = r if max_rel is None else max(max_rel, r)
            exact = exact and eq
    else:
        exact = False
    try:
        _get_comparer().assertEqual(actual_cpu, expected, atol=atol, rtol=rtol, exact_device=False)
    except AssertionError as e:
        if scale_rtol is not None and max_rel is not None and max_rel <= scale_rtol:
            return True, max_diff, max_rel, False, ""
        text = str(e).strip().splitlines()
        msg = text[0] if text else "not equal"
        return False, max_diff, max_rel, False, msg
    if not exp_t and not act_t:
        exact = True
    return True, max_diff, max_rel, exact, ""


class _SimCopyError(Exception):
    def __init__(self, e: BaseException):
        super().__init__(_first_line(e))
        self.inner = e


def _grad_weights(t: torch.Tensor) -> torch.Tensor:
    """Deterministic weights in [-1, 1) of t's shape and dtype (on CPU)."""
    n = t.numel()
    w = (torch.arange(n, dtype=torch.float64) * 0.371 + 0.13) % 2.0 - 1.0
    return w.reshape(t.shape).to(t.dtype)


def _tolerance(decorator_infos: Iterable, cls_name: str, test_name: str, dtype: torch.dtype) -> tuple[float, float]:
    """atol, rtol raised by toleranceOverride decorators the database gives (cls_name, test_name)."""
    from torch.testing._internal.common_device_type import toleranceOverride

    atol, rtol = COMPARE_ATOL, COMPARE_RTOL
    for d in decorator_infos:
        if getattr(d, "test_name", None) != test_name:
            continue
        if d.cls_name not in (None, cls_name) or d.device_type not in (None, "cuda"):
            continue
        if d.dtypes is not None and dtype not in d.dtypes:
            continue
        if not d.active_if:
            continue
        for dec in d.decorators:
            if isinstance(dec, toleranceOverride) and dtype in dec.d:
                atol = max(atol, dec.d[dtype].atol)
                rtol = max(rtol, dec.d[dtype].rtol)
    return atol, rtol


def _test_notes(decorator_infos: Iterable, cls_name: str, test_name: str) -> list:
    """What torch's own CPU-vs-CUDA test says about this op: its skips and expected failures."""
    notes = []
    for d in decorator_infos:
        if getattr(d, "test_name", None) != test_name or d.cls_name not in (None, cls_name):
            continue
        if not d.active_if:
            continue
        where = f" on {d.device_type}" if d.device_type else ""
        dts = f" for {','.join(_short_dtype(x) for x in d.dtypes)}" if d.dtypes else ""
        for dec in d.decorators:
            name = getattr(dec, "__name__", "")
            if name == "expectedFailure":
                notes.append(f"{test_name}: expected failure{where}{dts}")
            elif name in ("decorator", "skip") or "skip" in name.lower():
                cells = getattr(dec, "__closure__", None) or ()
                texts = [c.cell_contents for c in cells if isinstance(c.cell_contents, str)]
                why = f" ({texts[0]})" if texts else ""
                notes.append(f"{test_name}: skipped{where}{dts}{why}")
    return notes


def _import_databases():
    try:
        import expecttest  # noqa: F401  (common_utils imports it)
    except ImportError as e:
        raise ImportError(
            "torch's OpInfo/ModuleInfo databases need expecttest: pip install -r "
            "python/requirements-extra.txt"
        ) from e
    from torch.testing._internal.common_methods_invocations import op_db
    from torch.testing._internal.common_modules import module_db

    return op_db, module_db


def sim_build() -> dict:
    """Which harness_sim extension ran (it is rebuilt often): path, modification time, hash."""
    import hashlib
    import importlib.util

    spec = importlib.util.find_spec("harness_sim")
    if spec is None or not spec.submodule_search_locations:
        return {}
    folder = list(spec.submodule_search_locations)[0]
    libs = sorted(f for f in os.listdir(folder) if f.startswith("_C") and f.endswith(".so"))
    if not libs:
        return {"path": folder}
    path = os.path.join(folder, libs[0])
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    mtime = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(os.path.getmtime(path)))
    return {"path": path, "modified": mtime, "sha256": digest}


def _import_sim():
    import harness_sim  # noqa: F401  registers the sim device

    if SIM == "cuda":  # sim serves CUDA, and torch.cuda answers as under run --as-cuda
        from harness_sim._cuda.as_cuda import AsCuda
        AsCuda().install()
    return harness_sim


class _RandomOps:
    """Whether an op that may draw random numbers (tagged nondeterministic_seeded) drew some while
    it was entered, where sim serves CUDA: CUDA's generator's offset, or the host generator's
    state, moved during the op (sim's own attention kernels draw their dropout on the host). A
    CUDA kernel draws other numbers than the CPU's, so such a sample is not compared
    (test_compare_cpu skips random ops). An OpInfo's own seeding (wrapper_set_seed,
    freeze_rng_state) restores the generators' states afterwards, so each op is watched, not the
    sample's start and end."""

    def __init__(self):
        self.seen = False
        self._mode = None

    def __enter__(self) -> "_RandomOps":
        if SIM == "cuda":
            from torch.utils._python_dispatch import TorchDispatchMode

            watch = self

            class Watch(TorchDispatchMode):
                def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                    if torch.Tag.nondeterministic_seeded not in func.tags:
                        return func(*args, **(kwargs or {}))
                    before = _generator_states()
                    out = func(*args, **(kwargs or {}))
                    watch.seen = watch.seen or not all(
                        torch.equal(a, b) for a, b in zip(before, _generator_states()))
                    return out

            self._mode = Watch()
            self._mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._mode is not None:
            self._mode.__exit__(*exc)


def _generator_states() -> tuple:
    return torch.cuda.default_generators[0].get_state(), torch.default_generator.get_state()


def select_ops(op_db: Sequence, globs: Optional[Sequence[str]]) -> list:
    """Indices into op_db of the ops whose full name (name.variant) or name matches a glob."""
    out = []
    for i, op in enumerate(op_db):
        if globs is None or any(
            fnmatch.fnmatchcase(op.full_name, g) or fnmatch.fnmatchcase(op.name, g) for g in globs
        ):
            out.append(i)
    return out


def select_modules(module_db: Sequence, globs: Optional[Sequence[str]]) -> list:
    out = []
    for i, m in enumerate(module_db):
        if globs is None or any(
            fnmatch.fnmatchcase(m.name, g) or fnmatch.fnmatchcase(m.name.removeprefix("nn."), g)
            for g in globs
        ):
            out.append(i)
    return out


def op_dtypes(op, dtypes: Sequence[torch.dtype]) -> list:
    supported = op.supported_dtypes("cpu")
    chosen = [d for d in dtypes if d in supported]
    if torch.float32 in dtypes and torch.float32 not in supported:
        fallback = next((d for d in ANY_DTYPE_ORDER if d in supported), None)
        if fallback is not None and fallback not in chosen:
            chosen.insert(0, fallback)
    return chosen


def module_dtypes(module_info, dtypes: Sequence[torch.dtype]) -> list:
    chosen = []
    if torch.float32 in dtypes:
        supported = module_info.supported_dtypes("cpu")
        if torch.float32 in supported:
            chosen.append(torch.float32)
        else:
            fallback = next((d for d in ANY_DTYPE_ORDER if d in supported), None)
            if fallback is not None:
                chosen.append(fallback)
    if torch.bfloat16 in dtypes and module_info.name in BF16_MODULES:
        chosen.append(torch.bfloat16)
    return chosen


# ----------------------------------------------------------------------------------------------
# Ops

# Called before each sample with (dtype, index, training, description): the isolated worker
# records it, so a crash or a hang names the sample it happened in.
_sample_hook: Optional[Callable[[str, int, Optional[bool], str], None]] = None


def _op_sample(op, sample, dtype: torch.dtype, index: int, atol: float, rtol: float,
               timeout: Optional[float], samples_on: str = SIM) -> SampleResult:
    desc = _describe(sample.input, sample.args, sample.kwargs, getattr(sample, "name", "") or "")
    res = SampleResult(dtype=_short_dtype(dtype), index=index, desc=desc, status="pass")

    # The copy first (an op may write into its inputs): a sample built on sim (as test_compare_cpu
    # builds it on CUDA) gets a CPU copy with the same layout; one built on CPU, a sim copy.
    try:
        memo: dict = {}
        if samples_on == SIM:
            cpu_input = to_cpu(sample.input, memo)
            cpu_args = to_cpu(sample.args, memo)
            cpu_kwargs = to_cpu(sample.kwargs, memo)
            sim_input, sim_args, sim_kwargs = sample.input, sample.args, sample.kwargs
        else:
            sim_input = to_sim(sample.input, memo, keep_layout=True)
            sim_args = to_sim(sample.args, memo, keep_layout=True)
            sim_kwargs = to_sim(sample.kwargs, memo, keep_layout=True)
            cpu_input, cpu_args, cpu_kwargs = sample.input, sample.args, sample.kwargs
    except Exception as e:
        res.status, res.stage = "fail", "copy"
        res.reason = f"copying the sample {'to cpu' if samples_on == SIM else 'to sim'}: " \
                     f"{_first_line(e)}"
        return res
    cpu_grad_inputs = [t for t in _tensor_leaves((cpu_input, cpu_args, cpu_kwargs))
                       if t.requires_grad]
    sim_grad_inputs = [t for t in _tensor_leaves((sim_input, sim_args, sim_kwargs)) if t.requires_grad]
    check_device = _outputs_belong_on_sim((sim_input, sim_args, sim_kwargs))

    with _Alarm(timeout):
        try:
            torch.manual_seed(0)
            cpu_out = op(cpu_input, *cpu_args, **cpu_kwargs)
            cpu_out = sample.output_process_fn_grad(cpu_out)
        except SampleTimeout as e:
            res.status, res.stage, res.reason = "skip", "forward", f"cpu: {_first_line(e)}"
            return res
        except Exception as e:
            res.status, res.stage, res.reason = "skip", "forward", f"cpu raised {_first_line(e)}"
            return res

    with _Alarm(timeout):
        try:
            torch.manual_seed(0)
            with _RandomOps() as random_ops:
                sim_out = op(sim_input, *sim_args, **sim_kwargs)
            sim_out = sample.output_process_fn_grad(sim_out)
        except Exception as e:
            res.status, res.stage, res.reason = "fail", "forward", _first_line(e)
            return res
        if random_ops.seen:
            res.status, res.stage = "skip", "forward"
            res.reason = "draws random numbers from CUDA's generator: not the CPU's numbers"
            return res

        try:
            ok, diff, rel, exact, msg = compare(cpu_out, sim_out, atol, rtol, check_device,
                                                scale_rtol=LOW_PRECISION_SCALE.get(dtype))
        except _SimCopyError as e:
            res.status, res.stage, res.reason = "fail", "forward", f"copy to cpu: {e}"
            return res
        except Exception as e:
            res.status, res.stage = "mismatch", "forward"
            res.reason = f"forward: cannot compare ({_first_line(e)})"
            return res
        res.max_diff, res.max_rel, res.exact = diff, rel, exact
        if not ok:
            res.status, res.stage = "mismatch", "forward"
            res.reason = _mismatch_reason("forward", diff, rel, msg)
            return res

        # Backward: d(sum_i w_i . out_i)/d(inputs), out_i the floating outputs that need grad.
        if not cpu_grad_inputs:
            res.backward = "no input requires grad"
            return res
        cpu_leaves = _leaves(cpu_out)
        sim_leaves = _leaves(sim_out)
        picks = [i for i, t in enumerate(cpu_leaves) if isinstance(t, torch.Tensor)
                 and t.is_floating_point() and t.requires_grad]
        if not picks:
            res.backward = "no floating output requires grad"
            return res
        if len(sim_leaves) != len(cpu_leaves) or len(sim_grad_inputs) != len(cpu_grad_inputs):
            res.status, res.stage, res.reason = "mismatch", "backward", "backward: structure differs"
            return res
        weights = [_grad_weights(cpu_leaves[i]) for i in picks]
        try:
            cpu_grads = torch.autograd.grad([cpu_leaves[i] for i in picks], cpu_grad_inputs,
                                            grad_outputs=weights, allow_unused=True)
        except SampleTimeout as e:
            res.backward = f"cpu: {_first_line(e)}"
            return res
        except Exception as e:
            res.backward = f"cpu backward raised {_first_line(e)}"
            return res
        try:
            outs = []
            for i in picks:
                t = sim_leaves[i]
                if not (isinstance(t, torch.Tensor) and t.requires_grad):
                    res.status, res.stage = "mismatch", "backward"
                    res.reason = "backward: a sim output does not require grad"
                    return res
                outs.append(t)
            sim_grads = torch.autograd.grad(outs, sim_grad_inputs,
                                            grad_outputs=[w.to(t.device) for w, t in
                                                          zip(weights, outs)],
                                            allow_unused=True)
        except Exception as e:
            res.status, res.stage, res.reason = "fail", "backward", _first_line(e)
            return res
        res.backward = "checked"
        try:
            ok, diff, rel, exact, msg = compare(list(cpu_grads), list(sim_grads), atol, rtol,
                                                check_device=False,
                                                scale_rtol=LOW_PRECISION_SCALE.get(dtype))
        except _SimCopyError as e:
            res.status, res.stage, res.reason = "fail", "backward", f"copy to cpu: {e}"
            return res
        except Exception as e:
            res.status, res.stage = "mismatch", "backward"
            res.reason = f"backward: cannot compare ({_first_line(e)})"
            return res
        if diff is not None:
            res.max_diff = diff if res.max_diff is None else max(res.max_diff, diff)
        if rel is not None:
            res.max_rel = rel if res.max_rel is None else max(res.max_rel, rel)
        res.exact = res.exact and exact
        if not ok:
            res.status, res.stage = "mismatch", "backward"
            res.reason = _mismatch_reason("backward", diff, rel, msg)
    return res


def _mismatch_reason(stage: str, diff: Optional[float], rel: Optional[float], msg: str) -> str:
    if msg.startswith(("Tensor-likes are not close", "Scalars are not close",
                       "Scalars are not equal", "Tensor-likes are not equal")):
        if diff is not None:
            text = f"{stage}: values differ, max abs diff {diff:.3g}"
            if rel is not None:
                text += f" ({rel:.2g} of the largest |cpu|)"
            return text
        return f"{stage}: values differ"
    return f"{stage}: {msg}"


def run_op(op, dtypes: Sequence[torch.dtype], *, max_samples: Optional[int] = None,
           sample_timeout: Optional[float] = DEFAULT_SAMPLE_TIMEOUT_S,
           reference_inputs: bool = False, samples_on: str = SIM) -> ItemResult:
    t0 = time.monotonic()
    item = ItemResult(kind="op", name=op.full_name, status="skip")
    item.notes = _test_notes(op.decorators, "TestCommon", "test_compare_cpu")
    if op.name in UNDEFINED_OUTPUT_OPS:
        item.reason = "output is uninitialized memory (test_compare_cpu skips it too)"
        item.seconds = time.monotonic() - t0
        return item
    chosen = op_dtypes(op, dtypes)
    item.dtypes = [_short_dtype(d) for d in chosen]
    if not chosen:
        item.reason = "no requested dtype is supported on CPU"
        item.seconds = time.monotonic() - t0
        return item
    for dtype in chosen:
        requires_grad = bool(
            op.supports_autograd
            and dtype.is_floating_point
            and dtype in op.supported_backward_dtypes("cpu")
        )
        atol, rtol = _tolerance(op.decorators, "TestCommon", "test_compare_cpu", dtype)
        if dtype in LOW_PRECISION_TOLERANCE:
            atol, rtol = (max(atol, LOW_PRECISION_TOLERANCE[dtype][0]),
                          max(rtol, LOW_PRECISION_TOLERANCE[dtype][1]))
        torch.manual_seed(0)
        index = 0
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                make = op.reference_inputs if reference_inputs else op.sample_inputs
                samples = iter(make(samples_on, dtype, requires_grad=requires_grad))
                index = 0
                while max_samples is None or index < max_samples:
                    try:
                        sample = next(samples)
                    except StopIteration:
                        break
                    if _sample_hook is not None:
                        _sample_hook(_short_dtype(dtype), index, None, _describe(
                            sample.input, sample.args, sample.kwargs, getattr(sample, "name", "")))
                    item.add(_timed_out(
                        lambda: _op_sample(op, sample, dtype, index, atol, rtol, sample_timeout,
                                           samples_on),
                        dtype, index, "(timed out)"))
                    index += 1
        except Exception as e:  # the sample generator itself raised
            where = "sim" if samples_on == SIM else "cpu"
            item.add(SampleResult(
                dtype=_short_dtype(dtype), index=index, desc="(sample_inputs)",
                status="fail" if samples_on == SIM else "skip", stage="sample_inputs",
                reason=f"{op.full_name}'s sample_inputs on {where} raised {_first_line(e)}"))
    item.finish()
    item.seconds = time.monotonic() - t0
    return item


# ----------------------------------------------------------------------------------------------
# Modules


def _module_sample(module_info, module_input, dtype: torch.dtype, training: bool, index: int,
                   atol: float, rtol: float, timeout: Optional[float]) -> SampleResult:
    fwd = module_input.forward_input
    cons = module_input.constructor_input
    desc = _describe(None, fwd.args, fwd.kwargs, module_input.desc or "")
    res = SampleResult(dtype=_short_dtype(dtype), index=index, desc=desc, status="pass",
                       training=training)
    cls = module_info.module_cls

    with _Alarm(timeout):
        try:
            torch.manual_seed(0)
            m = cls(*cons.args, **cons.kwargs)
            m.to(dtype)
            m.train(training)
            if module_info.is_lazy:  # materialize the parameters once, on CPU
                with torch.no_grad():
                    m(*fwd.args, **fwd.kwargs)
        except Exception as e:
            res.status, res.stage, res.reason = "skip", "construct", f"cpu raised {_first_line(e)}"
            return res

    try:
        sm = copy.deepcopy(m).to(SIM)
        memo: dict = {}
        sim_args = to_sim(fwd.args, memo)
        sim_kwargs = to_sim(fwd.kwargs, memo)
    except Exception as e:
        res.status, res.stage, res.reason = "fail", "to_sim", _first_line(e)
        return res
    cpu_inputs = [t for t in _tensor_leaves((fwd.args, fwd.kwargs)) if t.requires_grad]
    sim_inputs = [t for t in _tensor_leaves((sim_args, sim_kwargs)) if t.requires_grad]
    cpu_params = [p for p in m.parameters() if p.requires_grad]
    sim_params = [p for p in sm.parameters() if p.requires_grad]

    with _Alarm(timeout):
        try:
            torch.manual_seed(0)
            cpu_out = m(*fwd.args, **fwd.kwargs)
        except SampleTimeout as e:
            res.status, res.stage, res.reason = "skip", "forward", f"cpu: {_first_line(e)}"
            return res
        except Exception as e:
            res.status, res.stage, res.reason = "skip", "forward", f"cpu raised {_first_line(e)}"
            return res

    with _Alarm(timeout):
        try:
            torch.manual_seed(0)
            sim_out = sm(*sim_args, **sim_kwargs)
        except Exception as e:
            res.status, res.stage, res.reason = "fail", "forward", _first_line(e)
            return res
        try:
            ok, diff, rel, exact, msg = compare(cpu_out, sim_out, atol, rtol,
                                                scale_rtol=LOW_PRECISION_SCALE.get(dtype))
        except _SimCopyError as e:
            res.status, res.stage, res.reason = "fail", "forward", f"copy to cpu: {e}"
            return res
        except Exception as e:
            res.status, res.stage = "mismatch", "forward"
            res.reason = f"forward: cannot compare ({_first_line(e)})"
            return res
        res.max_diff, res.max_rel, res.exact = diff, rel, exact
        if not ok:
            res.status, res.stage = "mismatch", "forward"
            res.reason = _mismatch_reason("forward", diff, rel, msg)
            return res

        cpu_leaves, sim_leaves = _leaves(cpu_out), _leaves(sim_out)
        picks = [i for i, t in enumerate(cpu_leaves) if isinstance(t, torch.Tensor)
                 and t.is_floating_point() and t.requires_grad]
        wrt_cpu = cpu_inputs + cpu_params
        wrt_sim = sim_inputs + sim_params
        if not picks or not wrt_cpu:
            res.backward = "no floating output requires grad"
        elif len(sim_leaves) != len(cpu_leaves) or len(wrt_sim) != len(wrt_cpu):
            res.status, res.stage, res.reason = "mismatch", "backward", "backward: structure differs"
            return res
        else:
            weights = [_grad_weights(cpu_leaves[i]) for i in picks]
            cpu_grads = None
            try:
                cpu_grads = torch.autograd.grad([cpu_leaves[i] for i in picks], wrt_cpu,
                                                grad_outputs=weights, allow_unused=True)
            except Exception as e:
                res.backward = f"cpu backward raised {_first_line(e)}"
            if cpu_grads is not None:
                try:
                    outs = [sim_leaves[i] for i in picks]
                    if not all(isinstance(t, torch.Tensor) and t.requires_grad for t in outs):
                        res.status, res.stage = "mismatch", "backward"
                        res.reason = "backward: a sim output does not require grad"
                        return res
                    sim_grads = torch.autograd.grad(outs, wrt_sim,
                                                    grad_outputs=[w.to(SIM) for w in weights],
                                                    allow_unused=True)
                except Exception as e:
                    res.status, res.stage, res.reason = "fail", "backward", _first_line(e)
                    return res
                res.backward = "checked"
                try:
                    ok, diff, rel, exact, msg = compare(list(cpu_grads), list(sim_grads), atol, rtol,
                                                        scale_rtol=LOW_PRECISION_SCALE.get(dtype))
                except _SimCopyError as e:
                    res.status, res.stage, res.reason = "fail", "backward", f"copy to cpu: {e}"
                    return res
                if diff is not None:
                    res.max_diff = diff if res.max_diff is None else max(res.max_diff, diff)
                if rel is not None:
                    res.max_rel = rel if res.max_rel is None else max(res.max_rel, rel)
                res.exact = res.exact and exact
                if not ok:
                    res.status, res.stage = "mismatch", "backward"
                    res.reason = _mismatch_reason("backward", diff, rel, msg)
                    return res

        # The module's state after the step (running statistics, ...).
        try:
            ok, diff, rel, exact, msg = compare(dict(m.state_dict()), dict(sm.state_dict()), atol, rtol,
                                                scale_rtol=LOW_PRECISION_SCALE.get(dtype))
        except _SimCopyError as e:
            res.status, res.stage, res.reason = "fail", "state", f"copy to cpu: {e}"
            return res
        if diff is not None:
            res.max_diff = diff if res.max_diff is None else max(res.max_diff, diff)
        if rel is not None:
            res.max_rel = rel if res.max_rel is None else max(res.max_rel, rel)
        res.exact = res.exact and exact
        if not ok:
            res.status, res.stage = "mismatch", "state"
            res.reason = _mismatch_reason("state", diff, rel, msg)
    return res


def run_module(module_info, dtypes: Sequence[torch.dtype], *, max_samples: Optional[int] = None,
               sample_timeout: Optional[float] = DEFAULT_SAMPLE_TIMEOUT_S) -> ItemResult:
    t0 = time.monotonic()
    item = ItemResult(kind="module", name=module_info.name, status="skip")
    item.notes = _test_notes(module_info.decorators, "TestModule", "test_cpu_gpu_parity")
    chosen = module_dtypes(module_info, dtypes)
    item.dtypes = [_short_dtype(d) for d in chosen]
    if not chosen:
        item.reason = "no requested dtype is supported on CPU"
        item.seconds = time.monotonic() - t0
        return item
    modes = [True, False] if module_info.train_and_eval_differ else [True]
    for dtype in chosen:
        # test_cpu_gpu_parity's own toleranceOverride (float32: atol 5e-2) is not taken: sim runs
        # CPU's kernels, so the ops' 1e-3 applies, raised only by a ModuleInfo's own override.
        atol, rtol = _tolerance(module_info.decorators, "TestModule", "test_cpu_gpu_parity", dtype)
        if dtype in LOW_PRECISION_TOLERANCE:
            atol, rtol = (max(atol, MODULE_LOW_PRECISION_TOLERANCE[0]),
                          max(rtol, MODULE_LOW_PRECISION_TOLERANCE[1]))
        for training in modes:
            torch.manual_seed(0)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    inputs = module_info.module_inputs_func(
                        module_info, device="cpu", dtype=dtype, requires_grad=True,
                        training=training)
                    index = 0
                    for module_input in inputs:
                        if max_samples is not None and index >= max_samples:
                            break
                        if module_input.forward_input is None:
                            continue
                        if _sample_hook is not None:
                            _sample_hook(_short_dtype(dtype), index, training, _describe(
                                None, module_input.forward_input.args,
                                module_input.forward_input.kwargs, module_input.desc or ""))
                        item.add(_timed_out(
                            lambda: _module_sample(module_info, module_input, dtype, training,
                                                   index, atol, rtol, sample_timeout),
                            dtype, index, module_input.desc or "(timed out)", training))
                        index += 1
            except Exception as e:
                item.add(SampleResult(dtype=_short_dtype(dtype), index=-1,
                                      desc="(module_inputs_func)", status="skip",
                                      stage="module_inputs", training=training,
                                      reason=f"cpu module_inputs_func raised {_first_line(e)}"))
    item.finish()
    item.seconds = time.monotonic() - t0
    return item


# ----------------------------------------------------------------------------------------------
# Sweep


def _progress_line(pos: int, total: int, item: ItemResult) -> str:
    c = item.counts
    head = f"[{pos:>{len(str(total))}}/{total}] {item.kind:<6} {item.name:<44}"
    dt = ",".join(item.dtypes) or "-"
    tally = (f"{item.total:>4} samples: pass {c['pass']} fail {c['fail']} "
             f"mismatch {c['mismatch']} skip {c['skip']}")
    tail = f"  {item.seconds:6.1f} s  {item.status.upper()}"
    if item.status in ("fail", "mismatch") or (item.status == "skip" and item.reason):
        tail += f": {item.reason[:140]}"
    return f"{head} {dt:<26} {tally}{tail}"


def _parse_dtypes(names: Sequence[Any]) -> list:
    out = []
    for n in names:
        if isinstance(n, torch.dtype):
            out.append(n)
            continue
        n = n.strip().replace("torch.", "")
        if not n:
            continue
        if n not in DTYPE_NAMES:
            raise ValueError(f"unknown dtype {n!r} (one of {', '.join(DTYPE_NAMES)})")
        out.append(DTYPE_NAMES[n])
    return out


def run_sweep(op_names: Optional[Sequence[str]] = None,
              module_names: Optional[Sequence[str]] = None,
              dtypes: Sequence[Any] = DEFAULT_DTYPES, *,
              ops: bool = True, modules: bool = True,
              max_samples: Optional[int] = None,
              sample_timeout: Optional[float] = DEFAULT_SAMPLE_TIMEOUT_S,
              reference_inputs: bool = False,
              samples_on: str = SIM,
              progress: Optional[Callable[[str], None]] = None) -> SweepResult:
    """Run the sweep in this process. op_names / module_names are names or globs (None: all); an
    op's glob matches its full name or its name (``normal`` is every ``normal`` variant), a
    module's matches ``nn.Conv2d`` or ``Conv2d``. Needs expecttest (ImportError otherwise)."""
    dtype_list = _parse_dtypes(dtypes)
    op_db, module_db = _import_databases()
    _import_sim()
    op_idx = select_ops(op_db, op_names) if ops else []
    mod_idx = select_modules(module_db, module_names) if modules else []
    return _run_selected(op_db, module_db, op_idx, mod_idx, dtype_list, max_samples=max_samples,
                         sample_timeout=sample_timeout, reference_inputs=reference_inputs,
                         samples_on=samples_on, progress=progress)


def _run_selected(op_db, module_db, op_idx, mod_idx, dtype_list, *, max_samples, sample_timeout,
                  reference_inputs, samples_on, progress) -> SweepResult:
    total = len(op_idx) + len(mod_idx)
    t0 = time.monotonic()
    result = SweepResult(ops=[], modules=[], dtypes=[_short_dtype(d) for d in dtype_list],
                         options={"max_samples": max_samples, "reference_inputs": reference_inputs,
                                  "samples_on": samples_on, "isolated": False})
    pos = 0
    for i in op_idx:
        pos += 1
        item = _guarded(lambda: run_op(op_db[i], dtype_list, max_samples=max_samples,
                                       sample_timeout=sample_timeout,
                                       reference_inputs=reference_inputs, samples_on=samples_on),
                        "op", op_db[i].full_name)
        result.ops.append(item)
        if progress:
            progress(_progress_line(pos, total, item))
    for i in mod_idx:
        pos += 1
        item = _guarded(lambda: run_module(module_db[i], dtype_list, max_samples=max_samples,
                                           sample_timeout=sample_timeout), "module", module_db[i].name)
        result.modules.append(item)
        if progress:
            progress(_progress_line(pos, total, item))
    result.seconds = time.monotonic() - t0
    result.build = sim_build()
    return result


def _guarded(fn: Callable[[], ItemResult], kind: str, name: str) -> ItemResult:
    try:
        return fn()
    except Exception as e:  # a bug of the sweep or an escape from a sample: record, go on
        item = ItemResult(kind=kind, name=name, status="fail",
                          reason=f"sweep error: {_first_line(e)}")
        item.notes.append(traceback.format_exc(limit=3).strip().splitlines()[-1])
        return item


# ----------------------------------------------------------------------------------------------
# Markdown


def _reason_key(reason: str) -> str:
    key = re.sub(r"0x[0-9a-fA-F]+", "0x…", reason)
    key = re.sub(r"'aten::[\w.]+'", "'aten::<op>'", key)
    key = re.sub(r"aten::[\w.]+", "aten::<op>", key)
    key = re.sub(r"max abs diff .*$", "max abs diff …", key)
    key = re.sub(r"\b\d+(\.\d+)?(e[-+]?\d+)?\b", "N", key)
    return key


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(result: SweepResult) -> str:
    s = result.summary()
    lines = [
        "# OpInfo / ModuleInfo sweep: sim against CPU",
        "",
        f"torch {torch.__version__}, dtypes {', '.join(result.dtypes)}, "
        f"{result.seconds / 60:.1f} min"
        + (f", at most {result.options.get('max_samples')} samples per dtype"
           if result.options.get("max_samples") else "")
        + (", reference_inputs" if result.options.get("reference_inputs") else ", sample_inputs")
        + f" built on {result.options.get('samples_on', SIM)}"
        + f". Tolerance: float32 atol = rtol = {COMPARE_ATOL:g} (test_compare_cpu's); bfloat16 and"
        " float16 ops: one rounding of the dtype (bfloat16 atol 1e-2, rtol 2**-6; float16 atol"
        " 1e-3, rtol 2**-9; or the largest difference within that rtol of the largest |cpu|);"
        " modules in bfloat16: atol = rtol = 5e-2 (test_cpu_gpu_parity's)."
        + (f" harness_sim extension built {result.build['modified']} "
           f"(sha256 {result.build['sha256']})." if result.build.get("sha256") else ""),
        "",
        "## Summary",
        "",
        "| | total | passed | failed | mismatched | skipped |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for kind in ("ops", "modules"):
        t = s[kind]
        lines.append(f"| {kind} | {t['total']} | {t['pass']} | {t['fail']} | {t['mismatch']} | "
                     f"{t['skip']} |")
    for kind in ("ops", "modules"):
        t = s[kind]["samples"]
        total = sum(t[x] for x in STATUSES)
        lines.append(f"| {kind[:-1]} samples | {total} | {t['pass']} | {t['fail']} | "
                     f"{t['mismatch']} | {t['skip']} |")
    lines += [
        "",
        "A sample fails when sim raised, mismatches when values differ, is skipped when CPU itself "
        "raised. Passing samples with bit-equal values: "
        f"ops {s['ops']['samples']['exact']}, modules {s['modules']['samples']['exact']}; "
        f"with gradients compared: ops {s['ops']['samples']['backward_checked']}, "
        f"modules {s['modules']['samples']['backward_checked']}.",
        "",
    ]
    failing = result.failing()
    if not failing:
        lines += ["No op or module fails or mismatches.", ""]
    else:
        groups: dict = collections.OrderedDict()
        for r in failing:
            groups.setdefault((r.status, _reason_key(r.reason)), []).append(r)
        ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        lines += [
            "## Failing and mismatching, by reason",
            "",
            "| status | reason | count | ops / modules |",
            "| --- | --- | ---: | --- |",
        ]
        for (status, _key), members in ordered:
            reason = members[0].reason if len(members) == 1 else _reason_key(members[0].reason)
            names = ", ".join(f"`{m.name}`" for m in members)
            lines.append(f"| {status} | {_md_escape(reason)} | {len(members)} | {names} |")
        lines += [
            "",
            "## Every failing or mismatching op and module",
            "",
            "| kind | name | status | dtypes | fail / mismatch / pass / skip | reason | first bad sample | torch's own test says |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in sorted(failing, key=lambda r: (r.kind != "op", r.name)):
            c = r.counts
            bad = next((x for x in r.samples if x.status == r.status), None)
            where = ""
            if bad is not None:
                where = f"{bad.dtype} #{bad.index}"
                if bad.training is False:
                    where += " eval"
                where += f" {bad.desc}"
            lines.append(
                f"| {r.kind} | `{r.name}` | {r.status} | {','.join(r.dtypes)} | "
                f"{c['fail']} / {c['mismatch']} / {c['pass']} / {c['skip']} | "
                f"{_md_escape(r.reason)} | {_md_escape(where)} | {_md_escape('; '.join(r.notes))} |"
            )
        lines.append("")
    skipped = [r for r in result.items() if r.status == "skip"]
    if skipped:
        lines += ["## Skipped (nothing ran on sim)", "", "| kind | name | reason |",
                  "| --- | --- | --- |"]
        for r in skipped:
            lines.append(f"| {r.kind} | `{r.name}` | {_md_escape(r.reason)} |")
        lines.append("")
    inexact = [r for r in result.items() if r.status == "pass" and r.max_diff_passed > 0]
    if inexact:
        lines += ["## Passing within tolerance but not bit-equal", "",
                  "| kind | name | largest difference | bit-equal samples / passed |",
                  "| --- | --- | ---: | --- |"]
        for r in sorted(inexact, key=lambda r: -r.max_diff_passed):
            lines.append(f"| {r.kind} | `{r.name}` | {r.max_diff_passed:.3g} | "
                         f"{r.samples_exact} / {r.counts['pass']} |")
        lines.append("")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# Isolation: items run in a child process; a crash or a hang costs one item.


def _worker_main(config_path: str, out_path: str) -> int:
    with open(config_path) as f:
        cfg = json.load(f)
    dtypes = _parse_dtypes(cfg["dtypes"])
    op_db, module_db = _import_databases()
    _import_sim()
    global _sample_hook
    with open(out_path, "a", buffering=1) as out:
        def note(dtype: str, index: int, training: Optional[bool], desc: str) -> None:
            out.write(json.dumps({"event": "sample", "dtype": dtype, "index": index,
                                  "training": training, "desc": desc}) + "\n")
            out.flush()

        _sample_hook = note
        for pos, (kind, idx) in zip(range(cfg["offset"] + 1, 10**9), cfg["items"]):
            name = op_db[idx].full_name if kind == "op" else module_db[idx].name
            out.write(json.dumps({"event": "start", "kind": kind, "index": idx, "name": name}) + "\n")
            out.flush()
            if kind == "op":
                item = _guarded(lambda: run_op(op_db[idx], dtypes, max_samples=cfg["max_samples"],
                                               sample_timeout=cfg["sample_timeout"],
                                               reference_inputs=cfg["reference_inputs"],
                                               samples_on=cfg["samples_on"]),
                                kind, name)
            else:
                item = _guarded(lambda: run_module(module_db[idx], dtypes,
                                                   max_samples=cfg["max_samples"],
                                                   sample_timeout=cfg["sample_timeout"]),
                                kind, name)
            out.write(json.dumps({"event": "result", "kind": kind, "index": idx,
                                  "item": item.to_dict()}) + "\n")
            out.flush()
            print(_progress_line(pos, cfg["total"], item), file=sys.stderr, flush=True)
    return 0


def _signal_name(rc: int) -> str:
    if rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    return f"exit status {rc}"


def run_sweep_isolated(items: list, names: dict, dtype_names: Sequence[str], *,
                       max_samples: Optional[int], sample_timeout: Optional[float],
                       item_timeout: float, reference_inputs: bool,
                       samples_on: str = SIM) -> tuple[list, list]:
    """Run (kind, index) items in child processes; returns (op results, module results)."""
    done: dict = {}
    total = len(items)
    pending = list(items)
    tmp = tempfile.mkdtemp(prefix="opinfo_sweep.")
    restarts = -1
    while pending:
        restarts += 1
        offset = total - len(pending)
        cfg_path = os.path.join(tmp, f"config{restarts}.json")
        out_path = os.path.join(tmp, f"out{restarts}.jsonl")
        with open(cfg_path, "w") as f:
            json.dump({"items": pending, "dtypes": list(dtype_names), "offset": offset,
                       "total": total, "max_samples": max_samples,
                       "sample_timeout": sample_timeout, "reference_inputs": reference_inputs,
                       "samples_on": samples_on}, f)
        open(out_path, "w").close()
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", cfg_path,
                                 out_path], stdin=subprocess.DEVNULL)
        current: Optional[tuple] = None
        last_sample: Optional[dict] = None
        started_at = time.monotonic()
        read_at = 0
        hung = False
        finished_before = len(done)

        def drain():
            nonlocal read_at, current, started_at, last_sample
            with open(out_path) as f:
                f.seek(read_at)
                while True:
                    line = f.readline()
                    if not line or not line.endswith("\n"):
                        break
                    read_at = f.tell()
                    ev = json.loads(line)
                    if ev["event"] == "sample":
                        last_sample = ev
                        continue
                    key = (ev["kind"], ev["index"])
                    if ev["event"] == "start":
                        current, started_at, last_sample = key, time.monotonic(), None
                    else:
                        done[key] = ItemResult.from_dict(ev["item"])
                        current = None

        while True:
            try:
                rc = proc.wait(timeout=2.0)
                break
            except subprocess.TimeoutExpired:
                pass
            drain()
            if current is not None and time.monotonic() - started_at > item_timeout:
                hung = True
                proc.kill()  # our own child
                rc = proc.wait()
                break
        drain()
        pending = [k for k in pending if tuple(k) not in done]
        if not pending:
            break
        if current is None:
            if len(done) == finished_before:
                raise RuntimeError(f"the sweep's worker stopped ({_signal_name(rc)}) before "
                                   "running anything: see its stderr above")
            continue  # died between items: start again from the next one
        kind, idx = current
        why = (f"hung: no result after {item_timeout:g} s (killed)" if hung
               else f"crashed the process ({_signal_name(rc)})")
        item = ItemResult(kind=kind, name=names[current], status="fail", reason=why)
        if last_sample is not None:
            item.samples.append(SampleResult(
                dtype=last_sample["dtype"], index=last_sample["index"], desc=last_sample["desc"],
                status="fail", stage="crash" if not hung else "hang", reason=why,
                training=last_sample["training"]))
            item.counts["fail"] = 1
        done[current] = item
        print(_progress_line(total - len(pending) + 1, total, item), file=sys.stderr, flush=True)
        pending = [k for k in pending if tuple(k) not in done]
    shutil.rmtree(tmp, ignore_errors=True)
    ops_out = [done[tuple(k)] for k in items if k[0] == "op"]
    mods_out = [done[tuple(k)] for k in items if k[0] == "module"]
    return ops_out, mods_out


# ----------------------------------------------------------------------------------------------
# Command line


def _split(values: Optional[Sequence[str]]) -> Optional[list]:
    if values is None:
        return None
    out = []
    for v in values:
        out += [x.strip() for x in v.split(",") if x.strip()]
    return out


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) == 3 and argv[0] == "--worker":
        return _worker_main(argv[1], argv[2])
    p = argparse.ArgumentParser(
        prog="opinfo_sweep.py",
        description="Every OpInfo of torch's op_db and ModuleInfo of its module_db on sim against "
                    "CPU.")
    p.add_argument("--ops", action="append", metavar="GLOB,...",
                   help="ops to run: names or globs (name or name.variant), comma-separated")
    p.add_argument("--modules", action="append", metavar="GLOB,...",
                   help="modules to run (nn.Conv2d or Conv2d), comma-separated globs")
    p.add_argument("--no-ops", action="store_true", help="run no ops")
    p.add_argument("--no-modules", action="store_true", help="run no modules")
    p.add_argument("--dtypes", default=",".join(DEFAULT_DTYPES),
                   help="comma-separated, of float32, bfloat16, float16, float64 (default: %(default)s)")
    p.add_argument("--max-samples", type=int, default=None, metavar="N",
                   help="at most N samples per op (module) and dtype")
    p.add_argument("--reference-inputs", action="store_true",
                   help="op.reference_inputs (a superset, what test_compare_cpu uses) instead of "
                        "op.sample_inputs")
    p.add_argument("--samples-on", choices=(SIM, "cpu"), default=SIM,
                   help="build each op's samples on sim and copy them to CPU for the reference, "
                        "as test_compare_cpu builds them on CUDA (default), or build them on CPU "
                        "and copy them to sim")
    p.add_argument("--json", metavar="OUT.json", help="write the results as JSON")
    p.add_argument("--markdown", metavar="OUT.md", help="write the summary as Markdown")
    p.add_argument("--sample-timeout", type=float, default=DEFAULT_SAMPLE_TIMEOUT_S, metavar="S",
                   help="a sample taking longer fails (default %(default)g s; 0: none)")
    p.add_argument("--item-timeout", type=float, default=DEFAULT_ITEM_TIMEOUT_S, metavar="S",
                   help="an op or module taking longer is killed and fails (isolated runs only; "
                        "default %(default)g s)")
    p.add_argument("--no-isolate", action="store_true",
                   help="run in this process (a crash ends the sweep)")
    p.add_argument("--list", action="store_true", help="list the selected ops and modules, run nothing")
    args = p.parse_args(argv)

    try:
        dtypes = _parse_dtypes(args.dtypes.split(","))
    except ValueError as e:
        p.error(str(e))
    if not dtypes:
        p.error("--dtypes: none given")
    if args.max_samples is not None and args.max_samples < 1:
        p.error("--max-samples must be at least 1")
    if args.no_ops and args.no_modules:
        p.error("--no-ops and --no-modules: nothing to run")
    op_globs, mod_globs = _split(args.ops), _split(args.modules)
    if op_globs is not None and args.no_ops:
        p.error("--ops with --no-ops")
    if mod_globs is not None and args.no_modules:
        p.error("--modules with --no-modules")
    # --ops alone means only ops, --modules alone only modules.
    run_ops = not args.no_ops and not (mod_globs is not None and op_globs is None)
    run_mods = not args.no_modules and not (op_globs is not None and mod_globs is None)

    try:
        op_db, module_db = _import_databases()
    except ImportError as e:
        print(f"opinfo_sweep: {e}", file=sys.stderr)
        return 1
    op_idx = select_ops(op_db, op_globs) if run_ops else []
    mod_idx = select_modules(module_db, mod_globs) if run_mods else []
    for globs, db, sel, what in ((op_globs, op_db, select_ops, "op"),
                                 (mod_globs, module_db, select_modules, "module")):
        for g in globs or []:
            if not sel(db, [g]):
                p.error(f"no {what} matches {g!r}")
    if args.list:
        for i in op_idx:
            print(f"op     {op_db[i].full_name}")
        for i in mod_idx:
            print(f"module {module_db[i].name}")
        return 0
    if not op_idx and not mod_idx:
        p.error("nothing selected")

    sample_timeout = args.sample_timeout or None
    print(f"opinfo_sweep: {len(op_idx)} ops, {len(mod_idx)} modules, dtypes "
          f"{','.join(_short_dtype(d) for d in dtypes)}", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    if args.no_isolate:
        try:
            _import_sim()
        except Exception as e:
            print(f"opinfo_sweep: cannot import harness_sim: {_first_line(e)}", file=sys.stderr)
            return 1
        result = _run_selected(
            op_db, module_db, op_idx, mod_idx, dtypes, max_samples=args.max_samples,
            sample_timeout=sample_timeout, reference_inputs=args.reference_inputs,
            samples_on=args.samples_on,
            progress=lambda line: print(line, file=sys.stderr, flush=True))
    else:
        items = [["op", i] for i in op_idx] + [["module", i] for i in mod_idx]
        names = {("op", i): op_db[i].full_name for i in op_idx}
        names.update({("module", i): module_db[i].name for i in mod_idx})
        try:
            ops_out, mods_out = run_sweep_isolated(
                items, names, [_short_dtype(d) for d in dtypes], max_samples=args.max_samples,
                sample_timeout=sample_timeout, item_timeout=args.item_timeout,
                reference_inputs=args.reference_inputs, samples_on=args.samples_on)
        except RuntimeError as e:
            print(f"opinfo_sweep: {e}", file=sys.stderr)
            return 1
        result = SweepResult(ops=ops_out, modules=mods_out,
                             dtypes=[_short_dtype(d) for d in dtypes],
                             options={"max_samples": args.max_samples,
                                      "reference_inputs": args.reference_inputs,
                                      "samples_on": args.samples_on, "isolated": True})
    result.seconds = time.monotonic() - t0
    result.build = sim_build()
    s = result.summary()
    for kind in ("ops", "modules"):
        t = s[kind]
        if t["total"]:
            print(f"opinfo_sweep: {kind}: {t['total']} total, {t['pass']} passed, {t['fail']} "
                  f"failed, {t['mismatch']} mismatched, {t['skip']} skipped", file=sys.stderr)
    print(f"opinfo_sweep: {result.seconds:.0f} s", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result.to_json(), f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(result.to_markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
