"""Mixed precision on sim as on CUDA (issue 36, section 3): torch.autocast("sim") follows the
policy PyTorch gives CUDA (ATen/autocast_mode.h's op lists), every other op falls through, and
GradScaler runs CUDA's ops with its one `.item()` per step."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import harness_sim


def test_ops_without_an_autocast_rule_run_inside_the_region():
    # each of these had no kernel for the Autocastsim key before the fallthrough
    with torch.autocast("sim", torch.bfloat16):
        a = torch.arange(6, device="sim", dtype=torch.float32)
        z = torch.zeros(3, device="sim").fill_(2.0)
        n = torch.empty(4, device="sim").normal_()
    assert a.dtype == torch.float32 and z.cpu().tolist() == [2.0, 2.0, 2.0] and n.shape == (4,)


def test_the_policy_is_cudas():
    x = torch.randn(4, 8, device="sim")
    w = torch.randn(8, 8, device="sim")
    with torch.autocast("sim", torch.bfloat16):
        assert torch.mm(x, w).dtype == torch.bfloat16                    # lower precision
        h = torch.mm(x, w)
        assert F.layer_norm(h, (8,)).dtype == torch.float32             # fp32
        assert torch.softmax(h, -1).dtype == torch.float32              # fp32_set_opt_dtype
        assert torch.addcmul(h, h, x).dtype == torch.float32            # promote (widest)
        assert (h + h).dtype == torch.bfloat16                          # falls through
        with pytest.raises(RuntimeError, match="unsafe to autocast"):   # banned, as on CUDA
            F.binary_cross_entropy(torch.rand(3, device="sim"), torch.rand(3, device="sim"))
    with torch.autocast("sim", torch.float16):
        assert torch.mm(x, w).dtype == torch.float16


def steps_counted(model, step, steps=3):
    """Runs one warm-up step (optimizer state, the scaler's first scale), then counts `steps`."""
    step()
    with harness_sim.count() as c:
        for _ in range(steps):
            with c.step():
                step()
    return c


def test_bf16_autocast_loop_with_fused_adamw_counts_its_casts():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.LayerNorm(32),
                                torch.nn.Linear(32, 4)).to("sim")
    opt = torch.optim.AdamW(model.parameters(), fused=True)
    x = torch.randn(8, 16, device="sim")
    y = torch.randint(0, 4, (8,), device="sim")

    def step():
        with torch.autocast("sim", torch.bfloat16):
            out = model(x)
            loss = F.cross_entropy(out, y)
        assert out.dtype == torch.bfloat16 and loss.dtype == torch.float32
        loss.backward()
        opt.step()
        opt.zero_grad()

    c = steps_counted(model, step)
    per_step = {op: n // 3 for op, n in c.launches_by_op.items()}
    # The casts (copy_): forward, Linear 1's input, weight and bias to bf16 (3), LayerNorm's
    # input to fp32 (1), Linear 2's input, weight and bias to bf16 (3), nll_loss's input to fp32
    # (1); backward, the cast back of each of those that needs a gradient (7). The weights' casts
    # are cached for the region, as on CUDA.
    assert per_step == {
        "aten::copy_": 15, "aten::addmm": 2, "aten::relu": 1, "aten::native_layer_norm": 1,
        "aten::_log_softmax": 1, "aten::nll_loss_forward": 1, "aten::fill_": 1,
        "aten::nll_loss_backward": 1, "aten::_log_softmax_backward_data": 1, "aten::mm": 3,
        "aten::sum": 2, "aten::native_layer_norm_backward": 1, "aten::threshold_backward": 1,
        "aten::_foreach_add_": 1, "aten::_fused_adamw_": 1}
    assert c.per_step("syncs") == 0


def test_fp16_loop_with_grad_scaler_runs_cudas_amp_ops_and_syncs_once_per_step():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 4)).to("sim")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("sim")
    x = torch.randn(8, 16, device="sim")
    y = torch.randint(0, 4, (8,), device="sim")

    def step():
        with torch.autocast("sim", torch.float16):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()

    c = steps_counted(model, step)
    per_step = {op: n // 3 for op, n in c.launches_by_op.items()}
    assert per_step["aten::_amp_foreach_non_finite_check_and_unscale_"] == 1
    assert per_step["aten::_amp_update_scale_"] == 1
    assert per_step["aten::reciprocal"] == 1  # the inverse scale unscale_ multiplies by
    # torch/amp/grad_scaler.py's _maybe_opt_step: `sum(v.item() for v in found_inf...)`
    assert c.per_step("syncs") == 1
    (site,) = c.sync_sites
    assert (site.op, site.reason) == ("aten::_local_scalar_dense", "item")
    assert "torch/amp/grad_scaler.py" in site.library
