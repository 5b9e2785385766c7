"""Megatron Core's own optimizer wrapper (megatron.core.optimizer.FP32Optimizer over torch's Adam,
configured by OptimizerConfig) stepping a small model on one CUDA rank, its process groups made by
megatron.core.parallel_state: the gallery's Megatron-LM #7407 case. `count-zeros` turns
log_num_zeros_in_grad on (the optimizer's step calls count_zeros(), which ends in .item());
`clip` sets clip_grad (the gradient norm, read back the same way in this release); `plain`
neither. Ours: the model, the data and the configuration."""
import os
import socket
import sys

import torch
import torch.distributed as dist
from megatron.core import parallel_state
from megatron.core.optimizer import OptimizerConfig
from megatron.core.optimizer.optimizer import FP32Optimizer

mode = sys.argv[1] if len(sys.argv) > 1 else "plain"
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
torch.cuda.set_device(0)
dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
parallel_state.initialize_model_parallel()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                            torch.nn.Linear(64, 1)).cuda()
config = OptimizerConfig(optimizer="adam", lr=1e-3, clip_grad=1.0 if mode == "clip" else 0.0,
                         log_num_zeros_in_grad=mode == "count-zeros")
optimizer = FP32Optimizer(torch.optim.Adam(model.parameters(), lr=1e-3), config,
                          init_state_fn=None)
for step in range(6):
    x, y = torch.randn(16, 32, device="cuda"), torch.randn(16, 1, device="cuda")
    optimizer.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    success, grad_norm, zeros = optimizer.step()
print(f"megatron {mode}: 6 steps, success={success}, grad_norm={grad_norm}, zeros={zeros}")
parallel_state.destroy_model_parallel()
dist.destroy_process_group()
