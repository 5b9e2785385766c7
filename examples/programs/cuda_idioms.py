"""Idioms of CUDA training scripts that touch torch.cuda beyond devices, in one loop:
torch.cuda.is_bf16_supported() at import (a GPT training script's dtype pick), the device from
torch.accelerator, the GPU's properties, a CUDAGraph annotation (Hugging Face transformers
names it in a type hint), Adam (whose step() asks torch.cuda.is_current_stream_capturing()) and
clip_grad_norm_(error_if_nonfinite=True), whose check syncs inside torch. Count it without a GPU:
    python -m harness_sim run --as-cuda -- examples/programs/cuda_idioms.py
"""
from typing import Optional

import torch

dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
device = torch.accelerator.current_accelerator()
assert device is not None and device.type == "cuda", device
props = torch.cuda.get_device_properties(0)
graph: Optional[torch.cuda.CUDAGraph] = None        # named, never made
annotated = torch.cuda.CUDAGraph | None              # PEP 604 union of the class
print(f"{torch.cuda.device_count()} x {props.name}, sm {props.major}.{props.minor}, "
      f"{props.total_memory // 2**30} GiB, {props.multi_processor_count} SMs, {dtype}")

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(),
                            torch.nn.Linear(32, 4)).to(device)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.randn(8, 16, device=device)
y = torch.randint(0, 4, (8,), device=device)
for step in range(5):
    with torch.autocast(device.type, dtype=dtype):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)
    opt.step()
    opt.zero_grad(set_to_none=True)
print("done", next(model.parameters()).device)
