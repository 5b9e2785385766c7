"""Sim picks the SDPA backend CUDA picks on an H100 in the torch release it runs with
(harness/instrument/sim/torch_release.h; docs/counting.md, "CUDA's choice of op").

Each case is an input whose backend changed between 2.11 and 2.15 in sdp_utils.cpp /
attention.cpp, with the backend expected of the running release: 3-d (unbatched) inputs, implicit
MQA, memory-efficient GQA, memory-efficient storage-offset alignment, cuDNN's dropout in 1/16ths,
cuDNN's and flash's 65535 batches and heads, cuDNN's backward head dimensions. The backend is
read from the launches (the fused op and its backward, else math's bmm); where there is no
dropout the values must equal CPU's, as in test_cuda_ops.py.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import harness_sim

from harness_sim._version import TORCH_RELEASE as RELEASE


def since(major: int, minor: int) -> bool:
    return RELEASE >= (major, minor)


FUSED = ("cudnn", "flash", "efficient")


def backend_of(ops: dict) -> str:
    """The SDPA backend that ran: its forward (and, where counted, backward) launch, else math."""
    ran = [name for name in FUSED if f"aten::_scaled_dot_product_{name}_attention" in ops]
    assert len(ran) <= 1, ops
    if ran:
        return ran[0]
    assert ops.get("aten::bmm", 0) >= 1 and ops.get("aten::_softmax", 0) == 1, ops
    return "math"


def run(q, k, v, grad=True, compare=True, **kwargs) -> str:
    """The backend of scaled_dot_product_attention(q, k, v, **kwargs) on sim (forward and, with
    `grad`, backward), its output (and gradients) checked against CPU's where `compare`."""
    mask = kwargs.pop("attn_mask", None)
    sim = [t.to("sim").requires_grad_(grad) for t in (q, k, v)]
    with harness_sim.count() as c:
        out = F.scaled_dot_product_attention(
            *sim, attn_mask=None if mask is None else mask.to("sim"), **kwargs)
        if grad:
            out.sum().backward()
    ops = dict(c.launches_by_op)
    name = backend_of(ops)
    if grad and name != "math":
        assert ops[f"aten::_scaled_dot_product_{name}_attention_backward"] == 1, ops
    if compare:
        cpu = [t.detach().cpu().clone().requires_grad_(grad) for t in (q, k, v)]
        ref = F.scaled_dot_product_attention(*cpu, attn_mask=mask, **kwargs)
        tol = {} if q.dtype == torch.float32 else {"atol": 3e-2, "rtol": 3e-2}
        assert out.shape == ref.shape
        torch.testing.assert_close(out.detach().cpu(), ref.detach(), **tol)
        if grad:
            ref.sum().backward()
            for a, b in zip(sim, cpu):
                torch.testing.assert_close(a.grad.cpu(), b.grad, **tol)
    return name


def qkv(q_shape, kv_shape=None, dtype=torch.bfloat16):
    torch.manual_seed(0)
    kv_shape = kv_shape or q_shape
    return (torch.randn(q_shape, dtype=dtype), torch.randn(kv_shape, dtype=dtype),
            torch.randn(kv_shape, dtype=dtype))


def test_unbatched_inputs_take_a_fused_backend_from_2_14():
    # attention.cpp normalize_unbatched_input (#192271): [heads, length, head_dim] is run as a
    # batch of one; before, 3-d inputs failed check_tensor_shapes and ran math
    fused = since(2, 14)
    assert run(*qkv((2, 5, 16))) == ("cudnn" if fused else "math")
    assert run(*qkv((2, 5, 16), dtype=torch.float32)) == ("efficient" if fused else "math")
    # a 2-d mask is unsqueezed with them; cuDNN takes it as a 4-d one
    mask = torch.randn(5, 5, dtype=torch.bfloat16)
    assert run(*qkv((2, 5, 16)), attn_mask=mask) == ("cudnn" if fused else "math")
    # the output keeps the inputs' 3 dimensions (and gradients their shapes): run() compares them
    # with CPU's, whose own kernel choice changed with the same release


def test_implicit_mqa_takes_a_fused_backend_from_2_14():
    # one head of k and v for several of q, without enable_gqa (#191085, supports_mqa)
    fused = since(2, 14)
    assert run(*qkv((2, 4, 5, 16), (2, 1, 5, 16))) == ("cudnn" if fused else "math")
    assert run(*qkv((2, 4, 5, 12), (2, 1, 5, 12))) == ("flash" if fused else "math")
    assert run(*qkv((2, 4, 5, 16), (2, 1, 5, 16), torch.float32)) == (
        "efficient" if fused else "math")


def test_memory_efficient_takes_grouped_query_heads_from_2_14():
    # float32 (neither cuDNN nor flash) with enable_gqa: memory-efficient gained GQA (#191085)
    q, k, v = qkv((2, 4, 5, 16), (2, 2, 5, 16), torch.float32)
    assert run(q, k, v, enable_gqa=True) == ("efficient" if since(2, 14) else "math")


def offset_views(shape, offset, dtype=torch.float32):
    """q, k, v on sim as views `offset` elements into their storage."""
    torch.manual_seed(0)
    n = torch.Size(shape).numel()
    return tuple(torch.randn(n + offset, dtype=dtype).to("sim")[offset:].view(shape)
                 for _ in range(3))


def test_memory_efficient_needs_16_byte_aligned_storage_offsets_from_2_14():
    # check_data_ptr_alignment_mem_efficient (#184258): 1 float32 element (4 bytes) in is not
    # aligned, 4 elements (16 bytes) in is
    q, k, v = offset_views((2, 2, 5, 16), 1)
    assert q.storage_offset() == 1
    assert run(q, k, v) == ("math" if since(2, 14) else "efficient")
    assert run(*offset_views((2, 2, 5, 16), 4)) == "efficient"


def test_cudnn_takes_dropout_in_sixteenths_only_from_2_12():
    # check_cudnn_dropout (#174245): 0.1 is not a multiple of 1/16, so flash runs it
    q, k, v = qkv((2, 2, 5, 16))
    assert run(q, k, v, compare=False, dropout_p=0.1) == ("flash" if since(2, 12) else "cudnn")
    assert run(q, k, v, compare=False, dropout_p=0.125) == "cudnn"


def test_cudnn_and_flash_take_at_most_65535_heads():
    # check_cudnn_tensor_shapes (2.13, #180718) and check_flash_attention_grid_size (2.15): the
    # kernels' grid; memory-efficient has no such limit
    many = (1, 65536, 2, 8)
    expected = "cudnn" if not since(2, 13) else "flash" if not since(2, 15) else "efficient"
    assert run(*qkv(many), grad=False) == expected
    # a head dimension cuDNN refuses (not a multiple of 8) and memory-efficient too: flash, or math
    # where flash has the limit
    assert run(*qkv((1, 65536, 2, 12)), grad=False) == ("math" if since(2, 15) else "flash")
    assert run(*qkv((1, 65535, 2, 8)), grad=False) == "cudnn"


def test_cudnn_backward_takes_its_own_head_dimensions_from_2_14():
    # check_cudnn_d256_bprop_head_dim (#185553, with a cuDNN past 9.22: 9.26 in 2.15's wheel):
    # with an input that requires grad only (<=128, <=128), (192, 128) or (256, 256)
    new = since(2, 14)
    assert run(*qkv((1, 2, 4, 160))) == ("flash" if new else "cudnn")
    assert run(*qkv((1, 2, 4, 160)), grad=False) == "cudnn"  # the forward has them all
    assert run(*qkv((1, 2, 4, 256))) == "cudnn"
    q, k, _ = qkv((1, 2, 4, 192))
    v = torch.randn(1, 2, 4, 128, dtype=torch.bfloat16)
    assert run(q, k, v) == "cudnn"  # its output has v's head dimension in q's layout
