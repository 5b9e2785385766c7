"""The op lists sim takes from PyTorch's sources stay PyTorch's (issue 36): checked against the
torch that is installed, so a new torch's additions cannot slip through."""
from __future__ import annotations

import subprocess
import sys

import torch

import harness_sim  # noqa: F401  (registers sim's kernels)
from harness_sim._version import TORCH_RELEASE

from conftest import REPO


def has_kernel(op: str, key: str) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(op, key)


def test_generated_list_is_what_native_functions_yaml_gives():
    done = subprocess.run([sys.executable, str(REPO / "scripts/gen_cuda_kernel_ops.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_every_op_cuda_runs_itself_and_pu1_took_a_composite_of_has_a_sim_kernel():
    # libtorch_cuda is loaded in torch's Python (no GPU needed), so the dispatcher knows which
    # ops have a CUDA kernel: each with a CompositeExplicitAutograd kernel too must be sim's own
    missing = []
    for name in torch._C._dispatch_get_all_op_names():
        if not name.startswith("aten::"):
            continue
        composite = (has_kernel(name, "CompositeExplicitAutograd")
                     or has_kernel(name, "CompositeImplicitAutograd"))
        if has_kernel(name, "CUDA") and composite and not has_kernel(name, "PrivateUse1"):
            missing.append(name)
    assert missing == []


def test_cuda_only_ops_that_composites_call_on_cuda_have_sim_kernels():
    for op in ["aten::cudnn_convolution", "aten::cudnn_convolution_transpose",
               "aten::_conv_depthwise2d", "aten::conv_depthwise3d", "aten::cudnn_batch_norm",
               "aten::cudnn_batch_norm_backward", "aten::_cudnn_rnn", "aten::_cudnn_rnn_backward",
               "aten::_cudnn_init_dropout_state", "aten::_thnn_fused_lstm_cell",
               "aten::_thnn_fused_lstm_cell_backward_impl", "aten::_thnn_fused_gru_cell",
               "aten::_thnn_fused_gru_cell_backward", "aten::_fused_rms_norm",
               "aten::_fused_rms_norm_backward", "aten::_scaled_dot_product_cudnn_attention",
               "aten::_scaled_dot_product_cudnn_attention_backward",
               "aten::_scaled_dot_product_flash_attention",
               "aten::_scaled_dot_product_flash_attention_backward",
               "aten::_scaled_dot_product_efficient_attention",
               "aten::_scaled_dot_product_efficient_attention_backward"]:
        assert has_kernel(op, "PrivateUse1"), op


def test_autocast_policy_covers_every_op_cuda_has_one_for():
    # what AutocastCUDA has a kernel for (autocast_mode.cpp, AutocastRNN.cpp), AutocastPrivateUse1
    # has too, and nothing more
    # (ATen's: a library such as torchvision registers its own ops for AutocastCUDA when imported)
    def aten(key):
        return {op for op in torch._C._dispatch_get_registrations_for_dispatch_key(key)
                if op.startswith("aten::")}

    cuda, sim = aten("AutocastCUDA"), aten("AutocastPrivateUse1")
    # 2.15 dropped the named-tensor overloads and added rms_norm (fp32) and linalg_matrix_sqrth
    assert len(cuda) == {(2, 11): 126, (2, 15): 121}.get(TORCH_RELEASE, len(cuda))
    assert cuda == sim
