"""A slice of the OpInfo / ModuleInfo sweep (opinfo_sweep.py): each listed op and module of torch's
own test databases gives on sim what it gives on CPU, sample by sample, forward and gradients.

The whole sweep (every op and module) is ``python python/tests/opinfo_sweep.py --markdown OUT.md``;
this slice is the ops and modules of training steps: convolutions, normalizations, attention,
embedding, losses, dropout, recurrent layers. Needs expecttest (python/requirements-extra.txt),
skipped without it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Ops: names or name.variant of op_db (a name takes all its variants).
SLICE_OPS = [
    "nn.functional.conv1d",
    "nn.functional.conv2d",
    "nn.functional.conv_transpose2d",
    "nn.functional.layer_norm",
    "nn.functional.batch_norm",
    "nn.functional.group_norm",
    "nn.functional.scaled_dot_product_attention",
    "nn.functional.embedding",
    "nn.functional.cross_entropy",
    "nn.functional.dropout",
    "addr",
    "all",
    "any",
    # conjugate views copied to the host (crashed before): fft's inverse and Hermitian
    # transforms, eig
    "fft.ifft",
    "fft.hfft",
    "fft.ihfft",
    "linalg.eig",
]

SLICE_MODULES = [
    "nn.Conv2d",
    "nn.ConvTranspose2d",
    "nn.LSTM",
    "nn.GRU",
    "nn.RNN",
    "nn.LSTMCell",
    "nn.GRUCell",
    "nn.RMSNorm",
    "nn.BatchNorm2d",
    "nn.LayerNorm",
    "nn.MultiheadAttention",
    "nn.TransformerEncoderLayer",
    "nn.Embedding",
]

# float32, and bfloat16 / float16 where CPU has them (modules: bfloat16 for the layers
# opinfo_sweep.BF16_MODULES lists).
DTYPES = ["float32", "bfloat16", "float16"]


@pytest.fixture(scope="module")
def sweep():
    pytest.importorskip(
        "expecttest",
        reason="torch's OpInfo/ModuleInfo databases need expecttest "
               "(pip install -r python/requirements-extra.txt)")
    import opinfo_sweep

    return opinfo_sweep.run_sweep(SLICE_OPS, SLICE_MODULES, DTYPES)


def _explain(item) -> str:
    lines = [f"{item.kind} {item.name}: {item.status} "
             f"(fail {item.counts['fail']}, mismatch {item.counts['mismatch']}, "
             f"pass {item.counts['pass']}, skip {item.counts['skip']}): {item.reason}"]
    for s in item.samples:
        if s.status in ("fail", "mismatch"):
            mode = "" if s.training is None else (" train" if s.training else " eval")
            lines.append(f"  {s.dtype} #{s.index}{mode}: {s.reason}  [{s.desc}]")
    return "\n".join(lines[:25])


def _check(items, name):
    assert items, f"{name}: not in torch's test database"
    bad = [i for i in items if i.status in ("fail", "mismatch")]
    if bad:
        pytest.fail("\n".join(_explain(i) for i in bad), pytrace=False)
    # A variant CPU has no dtype for (batch_norm.without_cudnn) is skipped; the name still ran.
    if not any(i.status == "pass" for i in items):
        pytest.fail("\n".join(_explain(i) for i in items), pytrace=False)


@pytest.mark.parametrize("name", SLICE_OPS)
def test_op_matches_cpu(sweep, name):
    _check([r for r in sweep.ops if r.name == name or r.name.startswith(name + ".")], name)


@pytest.mark.parametrize("name", SLICE_MODULES)
def test_module_matches_cpu(sweep, name):
    _check([r for r in sweep.modules if r.name == name], name)


def test_slice_compared_gradients(sweep):
    """The slice exercised backward, not only forward: gradients were compared on most samples."""
    s = sweep.summary()
    assert s["ops"]["samples"]["backward_checked"] > 100
    assert s["modules"]["samples"]["backward_checked"] > 100


def test_slice_on_cuda_tensors_where_sim_serves_cuda(sweep, tmp_path):
    """The same slice on CUDA tensors, as under `run --as-cuda` (sim serves the CUDA device type:
    sim's kernels at CUDA's key, torch's own CUDA-side code): every op and module gives what it
    gives on sim. A sample that draws random numbers from CUDA's generator (dropout, attention
    with dropout) is skipped, as test_compare_cpu skips random ops: CUDA's numbers are not CPU's."""
    out = tmp_path / "cuda.json"
    env = dict(os.environ, HARNESS_SIM_AS_CUDA="device")
    r = subprocess.run([sys.executable, str(Path(__file__).parent / "opinfo_sweep.py"),
                        "--ops", ",".join(SLICE_OPS), "--modules", ",".join(SLICE_MODULES),
                        "--dtypes", ",".join(DTYPES), "--json", str(out)],
                       env=env, capture_output=True, text=True, timeout=900,
                       stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr[-3000:]
    on_cuda = json.loads(out.read_text())
    items = {(i["kind"], i["name"]): i for i in on_cuda["ops"] + on_cuda["modules"]}
    on_sim = {(i.kind, i.name): i for i in sweep.ops + sweep.modules}
    assert {k: i["status"] for k, i in items.items()} == {k: i.status for k, i in on_sim.items()}
    for key, item in items.items():
        counts = item["counts"]
        assert counts["fail"] == counts["mismatch"] == 0, (key, item["reason"])
        # every sample ran on CUDA tensors as on sim: passed, or skipped as random
        assert counts["pass"] + counts["skip"] == sum(on_sim[key].counts.values()), key
    random = {name for (_, name), i in items.items() if i["counts"]["skip"]}
    assert random == {"nn.functional.dropout", "nn.functional.scaled_dot_product_attention"}
