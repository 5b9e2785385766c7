"""`run --as-cuda` and the whole public surface of torch.cuda, torch.backends.cuda,
torch.backends.cudnn and torch.accelerator: every name classified (a new torch's names fail the
first test until they are), each behaving as its kind says when a program uses it, and the table
in docs/as-cuda.md the generated one."""
from __future__ import annotations

import json
import subprocess
import sys

import harness_sim  # noqa: F401  (torch.sim)
from harness_sim._cuda import surface as surface_module
from conftest import REPO

PROBE = REPO / "python" / "tests" / "programs" / "cuda_surface_probe.py"


def _run_as_cuda(tmp_path, program, *args):
    return subprocess.run([sys.executable, "-m", "harness_sim", "run", "--as-cuda", "--",
                           str(program), *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL)


def test_every_public_name_is_classified():
    assert surface_module.unclassified() == {}
    table = surface_module.surface()
    stale = {m: [n for n in table[m] if n not in surface_module.public_names(m)]
             for m in surface_module.MODULES}
    assert {m: names for m, names in stale.items() if names} == {}


def test_a_name_torch_adds_fails_the_classification(monkeypatch):
    import torch.cuda
    monkeypatch.setattr(torch.cuda, "__all__", [*torch.cuda.__all__, "new_in_next_torch"])
    assert surface_module.unclassified() == {"torch.cuda": ["new_in_next_torch"]}


def test_every_name_behaves_as_its_kind(tmp_path):
    r = _run_as_cuda(tmp_path, PROBE)
    assert r.returncode == 0, r.stderr[-3000:]
    (line,) = [x for x in r.stdout.splitlines() if x.startswith("SURFACE ")]
    result = json.loads(line[len("SURFACE "):])
    assert result["failures"] == {}
    assert sum(result["kinds"].values()) > 200 and set(result["kinds"]) == {
        "mapped", "answered", "as is", "refused"}
    assert result["answers"] == {
        "device_count": 1, "capability": [9, 0], "name": "NVIDIA H100 80GB HBM3",
        "capturing": False, "accelerator": "cuda",
        "legacy_tensor": ["cuda:0", "torch.float32", True, False],
        "memory_module_sees_tensor": True, "accelerator_memory_sees_tensor": True,
        "mem_get_info_total": 85_520_809_984, "is_acceptable": True,
        # torch.autocast("cuda") is torch's AutocastCUDA, and so is the state libraries read
        "autocast_seen": [True, True, "torch.bfloat16"],
        # custom_fwd(cast_inputs=float32) casts a bf16 input inside the region, as on CUDA
        "custom_fwd_cast": "torch.float32",
        "graph_is_class": True, "graph_subclassable": True,
    }


def test_docs_table_is_the_generated_one():
    docs = (REPO / "docs" / "as-cuda.md").read_text()
    assert surface_module.markdown() in docs, (
        "docs/as-cuda.md's table is not the generated one: paste the output of\n"
        "  python -c 'import harness_sim._cuda.surface as s; print(s.markdown())'")


SYNC_DEBUG = """\
import warnings
import torch
x = torch.arange(6.0, device="cuda")
torch.cuda.set_sync_debug_mode("error")
assert torch.cuda.get_sync_debug_mode() == 2
for what, call in [("item", lambda: x.sum().item()), ("blocking D2H", lambda: x.cpu()),
                   ("host mask read", lambda: x[x > 2])]:
    try:
        call()
        print("NOT REFUSED", what)
    except RuntimeError as e:
        assert "called a synchronizing CUDA operation" in str(e), e
        print("refused", what)
torch.cuda.synchronize()  # explicit: never checked, as on CUDA
y = x.to("cpu", non_blocking=True).pin_memory() if False else x * 2  # no wait
torch.cuda.set_sync_debug_mode("warn")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    x.max().item()
print("warned", sum("called a synchronizing CUDA operation" in str(w.message) for w in caught))
torch.cuda.set_sync_debug_mode(0)
x.max().item()
print("off")
"""


def test_sync_debug_mode_warns_and_fails_where_cuda_does(tmp_path):
    program = tmp_path / "sync_debug.py"
    program.write_text(SYNC_DEBUG)
    r = _run_as_cuda(tmp_path, program)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.splitlines()[:5] == ["refused item", "refused blocking D2H",
                                         "refused host mask read", "warned 1", "off"]


def test_sync_debug_mode_refuses_a_bad_mode(tmp_path):
    program = tmp_path / "bad_mode.py"
    program.write_text("import torch\ntorch.cuda.set_sync_debug_mode('loud')\n")
    r = _run_as_cuda(tmp_path, program)
    assert r.returncode != 0
    assert "invalid value of debug_mode" in r.stderr and "'loud'" in r.stderr


LSTM_FLATTENED = """\
import warnings
import torch
lstm = torch.nn.LSTM(8, 16, num_layers=2).cuda()  # nn.RNNBase._apply -> flatten_parameters()
print("chunks", len({w.untyped_storage().data_ptr() for w in lstm._flat_weights}))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    lstm(torch.randn(5, 3, 8, device="cuda"))[0].sum().backward()
print("warnings", sum("contiguous chunk" in str(w.message) for w in caught))
"""


def test_a_cuda_rnn_module_is_flattened_into_one_chunk(tmp_path):
    """On CUDA, nn.LSTM(...).cuda() flattens its weights into one buffer
    (_cudnn_rnn_flatten_weight: a zero fill, one device-to-device copy per weight) so that
    `_cudnn_rnn` copies nothing per call; under --as-cuda, sim does the same."""
    program = tmp_path / "lstm.py"
    program.write_text(LSTM_FLATTENED)
    out = tmp_path / "lstm.json"
    r = subprocess.run([sys.executable, "-m", "harness_sim", "run", "--as-cuda", "--out",
                        str(out), "--", str(program)], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "chunks 1" in r.stdout and "warnings 0" in r.stdout
    (scenario,) = json.loads(out.read_text())["scenarios"]
    before = {v["name"]: v for v in scenario["variants"]}["before_steps"]
    # the program has no optimizer step: everything it did is "before the counted steps"
    # the flatten's copies: w_ih, w_hh, b_ih, b_hh of each layer; none in the forward (one
    # `_cudnn_rnn` on the flattened weights) or the backward
    assert before["total"]["d2d.count"] == 2 * 4
    assert before["launches_by_op"]["aten::_cudnn_rnn"] == 1
