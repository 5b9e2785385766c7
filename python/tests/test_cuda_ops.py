"""Sim runs the op CUDA PyTorch 2.11 runs on an H100, by name, per module (issue 36, section 2).
On sim's own device, and on CUDA tensors where sim serves CUDA (test_cuda_is_cuda runs this
module again with HARNESS_SIM_AS_CUDA=device).

Each case is one forward and backward of a module on sim, and pins every launch by op name: the
op that reaches CUDA's dispatch key where CUDA has a kernel of its own (cuDNN convolution, batch
norm and RNN; native_layer_norm; the SDPA backend sdp_utils.cpp picks on sm 9.0 with the wheel's
cuDNN 9.19), never CPU's kernel name or a composite's decomposition. Beside the module's ops,
every case has the backward's seed (`fill_`, torch.ones_like of the loss) and the loss (`sum`).
The values must equal CPU's (the sim computes them on the host).
"""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

import harness_sim
from harness_sim._device.mode import DEVICE_TYPE as DEVICE  # "cuda" where sim serves CUDA (run below)

SEED_AND_LOSS = {"aten::fill_": 1, "aten::sum": 1}


def ops_of_one_step(make, x, dtype):
    """Launches by op of a forward and backward of `make()` on sim, checked against CPU."""
    torch.manual_seed(0)
    cpu = make().to(dtype)
    sim = make().to(dtype)
    sim.load_state_dict(cpu.state_dict())
    sim.to(DEVICE)
    x = x.to(dtype) if x.is_floating_point() else x
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # cuDNN's weight-format warning, as on CUDA (bfloat16)
        with harness_sim.count() as c:
            out = sim(x.to(DEVICE))
            out = out[0] if isinstance(out, tuple) else out
            out.sum().backward()
    ref = cpu(x)
    ref = ref[0] if isinstance(ref, tuple) else ref
    ref.sum().backward()
    tol = {} if dtype == torch.float32 else {"atol": 5e-2, "rtol": 5e-2}
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), **tol)
    for (name, p_sim), p_cpu in zip(sim.named_parameters(), cpu.parameters()):
        torch.testing.assert_close(p_sim.grad.cpu(), p_cpu.grad, **tol, msg=name)
    return dict(c.launches_by_op), c


def with_seed(ops):
    merged = dict(SEED_AND_LOSS)
    for op, n in ops.items():
        merged[op] = merged.get(op, 0) + n
    return merged


BOTH = [torch.float32, torch.bfloat16]


@pytest.mark.parametrize("dtype", BOTH)
def test_linear_is_addmm_and_its_backward_mm_and_sum(dtype):
    ops, _ = ops_of_one_step(lambda: torch.nn.Linear(8, 4), torch.randn(3, 8), dtype)
    # grad of the weight (mm) and of the bias (sum over the batch)
    assert ops == with_seed({"aten::addmm": 1, "aten::mm": 1, "aten::sum": 1})


@pytest.mark.parametrize("dtype", BOTH)
def test_layer_norm_is_native_layer_norm_not_batch_norm(dtype):
    # native_layer_norm has a CUDA kernel and a CompositeExplicitAutograd one (built on batch
    # norm), which a PrivateUse1 device took before: cuda_kernel_ops.inc
    ops, _ = ops_of_one_step(lambda: torch.nn.LayerNorm(8), torch.randn(3, 8), dtype)
    assert ops == with_seed({"aten::native_layer_norm": 1, "aten::native_layer_norm_backward": 1})


@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("make, x, forward", [
    (lambda: torch.nn.Conv2d(3, 4, 3), torch.randn(2, 3, 8, 8), "aten::cudnn_convolution"),
    (lambda: torch.nn.Conv1d(3, 4, 3), torch.randn(2, 3, 8), "aten::cudnn_convolution"),
    (lambda: torch.nn.ConvTranspose2d(3, 4, 3), torch.randn(2, 3, 8, 8),
     "aten::cudnn_convolution_transpose"),
], ids=["conv2d", "conv1d", "conv_transpose2d"])
def test_convolution_is_cudnn_then_the_bias_added_in_place(dtype, make, x, forward):
    ops, _ = ops_of_one_step(make, x, dtype)
    assert ops == with_seed({forward: 1, "aten::add_": 1, "aten::convolution_backward": 1})


@pytest.mark.parametrize("dtype", BOTH)
def test_depthwise_convolution_is_cudas_own_kernel_with_the_bias_inside(dtype):
    ops, _ = ops_of_one_step(lambda: torch.nn.Conv2d(4, 4, 3, groups=4), torch.randn(2, 4, 8, 8),
                             dtype)
    assert ops == with_seed({"aten::_conv_depthwise2d": 1, "aten::convolution_backward": 1})


def test_batch_norm_float32_is_cudnn_batch_norm():
    ops, _ = ops_of_one_step(lambda: torch.nn.BatchNorm2d(3), torch.randn(2, 3, 8, 8),
                             torch.float32)
    # add_: num_batches_tracked += 1; copy_: the backward's grad.contiguous() of the expanded
    # seed (derivatives.yaml's cudnn_batch_norm formula)
    assert ops == with_seed({"aten::add_": 1, "aten::cudnn_batch_norm": 1, "aten::copy_": 1,
                             "aten::cudnn_batch_norm_backward": 1})


def test_batch_norm_bfloat16_is_native_batch_norm_as_cudnn_refuses_bfloat16():
    ops, _ = ops_of_one_step(lambda: torch.nn.BatchNorm2d(3), torch.randn(2, 3, 8, 8),
                             torch.bfloat16)
    assert ops == with_seed({"aten::add_": 1, "aten::native_batch_norm": 1,
                             "aten::native_batch_norm_backward": 1})


@pytest.mark.parametrize("dtype", BOTH)
@pytest.mark.parametrize("make, x, hidden_states", [
    (lambda: torch.nn.LSTM(4, 5, batch_first=True), torch.randn(2, 3, 4), 2),
    (lambda: torch.nn.GRU(4, 5), torch.randn(3, 2, 4), 1),
    (lambda: torch.nn.RNN(4, 5), torch.randn(3, 2, 4), 1),
], ids=["lstm", "gru", "rnn"])
def test_rnn_is_one_cudnn_rnn_for_the_whole_sequence(dtype, make, x, hidden_states):
    ops, c = ops_of_one_step(make, x, dtype)
    # zero_: the zero initial hidden (and cell) state nn.RNNBase makes
    assert ops == with_seed({"aten::zero_": hidden_states, "aten::_cudnn_rnn": 1,
                             "aten::_cudnn_rnn_backward": 1})
    # CUDA flattens a float32 module's weights once; a bfloat16 module's stay apart (Python's
    # cudnn.is_acceptable), so _cudnn_rnn copies them (4 tensors) at every call
    assert c.copies["d2d"]["count"] == (4 if dtype == torch.bfloat16 else 0)


def test_rnn_dropout_state_is_made_once():
    lstm = torch.nn.LSTM(4, 5, num_layers=2, dropout=0.3).to(DEVICE)
    x = torch.randn(3, 2, 4, device=DEVICE)
    lstm(x)  # the first training call with dropout makes cuDNN's dropout state
    with harness_sim.count() as c:
        lstm(x)[0].sum().backward()
    assert "aten::_cudnn_init_dropout_state" not in c.launches_by_op
    assert c.launches_by_op["aten::_cudnn_rnn"] == 1


def test_rnn_without_cudnn_runs_cudas_fused_cells():
    lstm = torch.nn.LSTM(4, 5).to(DEVICE)
    gru = torch.nn.GRU(4, 5).to(DEVICE)
    x = torch.randn(3, 2, 4)
    with torch.backends.cudnn.flags(enabled=False):
        with harness_sim.count() as c:
            lstm(x.to(DEVICE))[0].sum().backward()
            gru(x.to(DEVICE))[0].sum().backward()
        ref = torch.nn.LSTM(4, 5)
        ref.load_state_dict({k: v.cpu() for k, v in lstm.state_dict().items()})
        torch.testing.assert_close(lstm(x.to(DEVICE))[0].cpu(), ref(x)[0])
    ops = c.launches_by_op
    assert ops["aten::_thnn_fused_lstm_cell"] == 3 and ops["aten::_thnn_fused_gru_cell"] == 3
    assert ops["aten::_thnn_fused_lstm_cell_backward_impl"] == 3
    assert ops["aten::_thnn_fused_gru_cell_backward"] == 3


@pytest.mark.parametrize("dtype", BOTH)
def test_embedding_is_index_select_and_embedding_dense_backward(dtype):
    ops, _ = ops_of_one_step(lambda: torch.nn.Embedding(10, 4), torch.tensor([[1, 2], [3, 1]]),
                             dtype)
    assert ops == with_seed({"aten::index_select": 1, "aten::embedding_dense_backward": 1})


@pytest.mark.parametrize("dtype", BOTH)
def test_cross_entropy_is_log_softmax_and_nll_loss(dtype):
    logits = torch.randn(4, 5, dtype=dtype, device=DEVICE, requires_grad=True)
    target = torch.tensor([0, 2, 4, 1], device=DEVICE)
    with harness_sim.count() as c:
        F.cross_entropy(logits, target).backward()
    assert dict(c.launches_by_op) == {"aten::_log_softmax": 1, "aten::nll_loss_forward": 1,
                                      "aten::fill_": 1, "aten::nll_loss_backward": 1,
                                      "aten::_log_softmax_backward_data": 1}


# --- scaled_dot_product_attention: the backend sdp_utils.cpp picks on an H100 -----------------

def sdpa_ops(dtype, length=5, keys=5, head_dim=16, mask=None, causal=False):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, n, head_dim, dtype=dtype) for n in (length, keys, keys))
    sim = [t.to(DEVICE).requires_grad_() for t in (q, k, v)]
    cpu = [t.clone().requires_grad_() for t in (q, k, v)]
    with harness_sim.count() as c:
        out = F.scaled_dot_product_attention(*sim, attn_mask=None if mask is None else
                                             mask.to(DEVICE), is_causal=causal)
        out.sum().backward()
    ref = F.scaled_dot_product_attention(*cpu, attn_mask=mask, is_causal=causal)
    ref.sum().backward()
    tol = {} if dtype == torch.float32 else {"atol": 3e-2, "rtol": 3e-2}
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), **tol)
    for a, b in zip(sim, cpu):
        torch.testing.assert_close(a.grad.cpu(), b.grad, **tol)
    return dict(c.launches_by_op)


def fused(name, **extra):
    return with_seed({f"aten::_scaled_dot_product_{name}_attention": 1,
                      f"aten::_scaled_dot_product_{name}_attention_backward": 1, **extra})


def test_sdpa_float32_is_memory_efficient_attention():
    assert sdpa_ops(torch.float32) == fused("efficient")
    assert sdpa_ops(torch.float32, causal=True) == fused("efficient")


def test_sdpa_bfloat16_is_cudnn_attention_first_on_an_h100():
    assert sdpa_ops(torch.bfloat16) == fused("cudnn")
    assert sdpa_ops(torch.bfloat16, causal=True) == fused("cudnn")
    assert sdpa_ops(torch.bfloat16, length=3, causal=True) == fused("cudnn")  # flash refuses


def test_sdpa_boolean_mask_becomes_additive_then_the_backend_runs():
    mask = torch.rand(5, 5) > 0.3
    # where(mask, scalar_tensor(0), -inf): the scalar_tensor is a fill_, and where.ScalarOther
    # makes another; cuDNN takes a 2-d mask as it is
    assert sdpa_ops(torch.bfloat16, mask=mask) == fused(
        "cudnn", **{"aten::fill_": 2, "aten::where": 1})
    # the efficient kernel wants its mask 8-aligned: padded (fill_ and copy_), then sliced
    assert sdpa_ops(torch.float32, mask=mask) == fused(
        "efficient", **{"aten::fill_": 3, "aten::where": 1, "aten::copy_": 1})


def test_sdpa_three_dimensional_mask_is_not_cudnns_so_efficient_runs():
    mask = torch.randn(2, 5, 5, dtype=torch.bfloat16)
    ops = sdpa_ops(torch.bfloat16, mask=mask)
    assert ops["aten::_scaled_dot_product_efficient_attention"] == 1
    assert "aten::_scaled_dot_product_cudnn_attention" not in ops


def test_sdpa_flash_when_cudnn_cannot_and_math_when_nothing_fused_can():
    # a head dimension that is not a multiple of 8: cuDNN refuses, flash pads it
    ops = sdpa_ops(torch.bfloat16, head_dim=12)
    assert ops["aten::_scaled_dot_product_flash_attention"] == 1
    assert ops["aten::_scaled_dot_product_flash_attention_backward"] == 1
    # float32 with a head dimension that is not a multiple of 4: the math composite, as on CUDA
    ops = sdpa_ops(torch.float32, head_dim=6)
    assert ops["aten::bmm"] == 6 and ops["aten::_softmax"] == 1
    assert not any("attention" in op for op in ops)


def test_sdpa_output_of_a_gpt_block_needs_no_copy_to_be_made_contiguous():
    # q, k, v as a GPT block makes them (view + transpose of one projection): the fused kernels
    # give an output whose transpose back is contiguous, so `.contiguous()` copies nothing
    for dtype in BOTH:
        x = torch.randn(2, 5, 3 * 16, dtype=dtype, device=DEVICE)
        q, k, v = (t.view(2, 5, 2, 8).transpose(1, 2) for t in x.split(16, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        with harness_sim.count() as c:
            y.transpose(1, 2).contiguous().view(2, 5, 16)
        assert c.launches == 0, (dtype, c.launches_by_op)


def test_transformer_encoder_layer_attention_is_the_fused_backend():
    layer = lambda: torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    ops, _ = ops_of_one_step(layer, torch.randn(2, 5, 16), torch.float32)
    assert ops["aten::_scaled_dot_product_efficient_attention"] == 1
    assert ops["aten::native_layer_norm"] == 2
    ops, _ = ops_of_one_step(layer, torch.randn(2, 5, 16), torch.bfloat16)
    assert ops["aten::_scaled_dot_product_cudnn_attention"] == 1


@pytest.mark.parametrize("dtype", BOTH)
def test_rms_norm_is_cudas_fused_rms_norm(dtype):
    # `rms_norm` calls `_fused_rms_norm`, which CUDA has a kernel for; PrivateUse1 took its
    # composite (pow, mean, add, rsqrt, mul, ...)
    ops, _ = ops_of_one_step(lambda: torch.nn.RMSNorm(8), torch.randn(3, 4, 8), dtype)
    assert ops == with_seed({"aten::_fused_rms_norm": 1, "aten::_fused_rms_norm_backward": 1})


@pytest.mark.parametrize("region", [torch.float16, torch.bfloat16])
def test_rnn_under_autocast_runs_cudnn_in_float16_with_its_weights_recast_every_call(region):
    # AutocastRNN.cpp: float16 whatever the region's dtype; the weights cast into a new flat
    # buffer (zero_ and a copy_ per weight), the input and the hidden states cast
    lstm = torch.nn.LSTM(4, 5).to(DEVICE)
    x = torch.randn(3, 2, 4, device=DEVICE)
    with harness_sim.count() as c:
        with torch.autocast(DEVICE, region):
            out = lstm(x)[0]
        out.sum().backward()
    assert out.dtype == torch.float16
    # zero_: h0, c0 and the flat buffer; copy_: 4 weights, x, h0, c0 forward, 4 weights back
    assert dict(c.launches_by_op) == with_seed({
        "aten::zero_": 3, "aten::copy_": 11, "aten::_cudnn_rnn": 1, "aten::_cudnn_rnn_backward": 1})
    assert lstm.weight_ih_l0.grad.dtype == torch.float32


@pytest.mark.parametrize("dtype, kernel", [(torch.float32, "efficient"), (torch.bfloat16, "cudnn")])
def test_multihead_attention_without_weights_is_the_fused_kernel(dtype, kernel):
    # need_weights=False (what TransformerEncoderLayer passes) takes SDPA; a causal mask with
    # is_causal=True and no padding mask is dropped for is_causal (multi_head_attention_forward)
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(16, 2, batch_first=True).to(dtype).to(DEVICE)
    x = torch.randn(2, 5, 16, dtype=dtype, device=DEVICE)
    causal = torch.nn.Transformer.generate_square_subsequent_mask(5, device=DEVICE, dtype=dtype)
    with harness_sim.count() as c:
        out, weights = mha(x, x, x, attn_mask=causal, is_causal=True, need_weights=False)
        out.sum().backward()
    assert weights is None
    ops = c.launches_by_op
    assert ops[f"aten::_scaled_dot_product_{kernel}_attention"] == 1
    assert ops[f"aten::_scaled_dot_product_{kernel}_attention_backward"] == 1
    assert "aten::bmm" not in ops and "aten::_softmax" not in ops


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_softmax_of_half_in_float_is_one_kernel_on_cuda(log):
    # softmax(x, dtype=torch.float) of a half CUDA tensor is _softmax(x, half_to_float=True): one
    # kernel, and its backward gives a half gradient from the float one (SoftMax.cpp; autocast's
    # fp32 policy calls it so). Another device converts first: a copy, then the op (and the
    # gradient back).
    f, op = (F.log_softmax, "aten::_log_softmax") if log else (F.softmax, "aten::_softmax")
    x = torch.randn(4, 10, dtype=torch.half)
    on_device = x.to(DEVICE).requires_grad_()
    with harness_sim.count() as c:
        y = f(on_device, -1, dtype=torch.float)
        y.square().sum().backward()
    ref = x.float().requires_grad_()
    f(ref, -1).square().sum().backward()
    assert y.dtype == torch.float and on_device.grad.dtype == torch.half
    torch.testing.assert_close(y.detach().cpu(), f(x.float(), -1), atol=1e-3, rtol=1e-3)
    torch.testing.assert_close(on_device.grad.cpu().float(), ref.grad, atol=1e-2, rtol=1e-2)
    ops = dict(c.launches_by_op)
    assert ops[op] == ops[op + "_backward_data"] == 1
    assert ops.get("aten::copy_", 0) == (0 if DEVICE == "cuda" else 2), ops


@pytest.mark.parametrize("name", ["mm", "bmm", "addmm", "baddbmm"])
def test_a_product_with_out_dtype_is_one_kernel_in_float(name):
    # mm / bmm / addmm / baddbmm with out_dtype=torch.float32 of bf16 inputs: CUDA-only
    # overloads (TRL's chunked log-prob accumulates with addmm(..., out_dtype=float32, out=acc))
    a, b = torch.randn(2, 4, 8, dtype=torch.bfloat16), torch.randn(2, 8, 3, dtype=torch.bfloat16)
    acc = torch.randn(2, 4, 3)
    if name in ("mm", "addmm"):
        a, b, acc = a[0], b[0], acc[0]
    args = {"mm": (a, b), "bmm": (a, b), "addmm": (acc, a, b), "baddbmm": (acc, a, b)}[name]
    f = getattr(torch, name)
    on_device = [t.to(DEVICE) for t in args]
    out = torch.empty(acc.shape, device=DEVICE)
    with harness_sim.count() as c:
        y = f(*on_device, out_dtype=torch.float32)
        f(*on_device, out_dtype=torch.float32, out=out)
    expected = f(*[t.float() for t in args])
    assert y.dtype == out.dtype == torch.float32
    torch.testing.assert_close(y.cpu(), expected, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(out.cpu(), expected, atol=1e-4, rtol=1e-4)
    assert dict(c.launches_by_op) == {f"aten::{name}": 2}


# --- CTC loss: cuDNN's where CUDA takes it (native/cudnn/LossCTC.cpp), `_ctc_loss` otherwise -----

def ctc_case(lengths_as, targets_dtype, lengths_device="cpu"):
    """One ctc_loss forward and backward on the device, checked against CPU: (ops, counts)."""
    torch.manual_seed(0)
    T, N, C = 30, 3, 6
    x = torch.randn(T, N, C)
    target_lengths = torch.tensor([4, 2, 5], dtype=torch.int32)
    targets = torch.randint(1, C, (int(target_lengths.sum()),), dtype=targets_dtype)
    input_lengths = torch.full((N,), T, dtype=torch.int32)
    if lengths_as == "lists":
        il, tl = input_lengths.tolist(), target_lengths.tolist()
    else:
        il, tl = input_lengths.to(lengths_device), target_lengths.to(lengths_device)
    on_device = x.to(DEVICE).requires_grad_()
    with harness_sim.count() as c:
        loss = F.ctc_loss(on_device.log_softmax(2), targets, il, tl, reduction="sum")
        loss.backward()
    ref_x = x.clone().requires_grad_()
    ref = F.ctc_loss(ref_x.log_softmax(2), targets, input_lengths, target_lengths,
                     reduction="sum")
    ref.backward()
    torch.testing.assert_close(loss.detach().cpu(), ref.detach())
    torch.testing.assert_close(on_device.grad.cpu(), ref_x.grad, atol=1e-5, rtol=1e-4)
    return dict(c.launches_by_op), c


# Beside the loss's own ops: log_softmax forward and backward, the reduction, the backward's seed
SOFTMAX_AND_SEED = {"aten::_log_softmax": 1, "aten::_log_softmax_backward_data": 1,
                    "aten::sum": 1, "aten::fill_": 1}


@pytest.mark.parametrize("lengths_as", ["lists", "tensors"])
def test_ctc_loss_of_int32_cpu_targets_is_cudnns_on_cuda(lengths_as):
    ops, c = ctc_case(lengths_as, torch.int32)
    if DEVICE != "cuda":  # sim's own device: torch's native kernels, the targets moved over
        assert ops == {**SOFTMAX_AND_SEED, "aten::_ctc_loss": 1, "aten::_ctc_loss_backward": 1}
        return
    # `_cudnn_ctc_loss` gives the loss and its gradient at once; its backward only scales it
    # (`_cudnn_ctc_loss_backward` in FunctionsManual.cpp: raw_grad * grad_out, one mul)
    assert ops == {**SOFTMAX_AND_SEED, "aten::_cudnn_ctc_loss": 1, "aten::mul": 1}
    # lengths as tensors: cuDNN's v8 API reads targets and both lengths on the device: 3 H2D
    # copies from pageable memory, each one the host waits for
    h2d = 0 if lengths_as == "lists" else 3
    assert c.copies["h2d"]["count"] == c.syncs == h2d and c.copies["d2h"]["count"] == 0


def test_ctc_loss_with_lengths_on_the_device_reads_them_back_per_sample_to_choose_cudnn():
    ops, c = ctc_case("tensors", torch.int32, lengths_device=DEVICE)
    if DEVICE != "cuda":
        assert "aten::_ctc_loss" in ops
        return
    assert ops["aten::_cudnn_ctc_loss"] == 1
    # _use_cudnn_ctc_loss.Tensor copies the target lengths to the host once, then both lengths
    # again for each of the 3 samples it checks: 7 blocking D2H copies; and torch's composite
    # asks it twice (ctc_loss to pick its path, then ctc_loss_impl): 14. Then the CPU targets go
    # to the device for cuDNN (1 H2D). Each copy is a sync.
    assert c.copies["d2h"]["count"] == 14 and c.copies["h2d"]["count"] == 1 and c.syncs == 15


def test_ctc_loss_of_int64_targets_is_the_native_kernel_on_cuda_too():
    ops, _ = ctc_case("lists", torch.int64)
    assert ops == {**SOFTMAX_AND_SEED, "aten::_ctc_loss": 1, "aten::_ctc_loss_backward": 1}
