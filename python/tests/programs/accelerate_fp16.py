"""Hugging Face Accelerate with fp16 mixed precision (what every diffusers and *_no_trainer.py
script passes): Accelerator refuses a device that is not CUDA's; unwrap_model afterwards imports
DeepSpeed where it is installed, which probes for Triton."""
import json

import torch
from accelerate import Accelerator

# The same weights and data every run. Unseeded, one CI run (2026-11-29) counted one
# _amp_update_scale_ more than measured steps; a step the GradScaler skipped is the guess.
torch.manual_seed(0)
accelerator = Accelerator(mixed_precision="fp16")
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
model, optimizer = accelerator.prepare(model, optimizer)
for step in range(6):
    x = torch.randn(32, 16, device=accelerator.device)
    with accelerator.autocast():
        loss = model(x).float().pow(2).mean()
    accelerator.backward(loss)
    optimizer.step()
    optimizer.zero_grad()
unwrapped = accelerator.unwrap_model(model)
print("RESULT " + json.dumps({"device": str(accelerator.device),
                              "unwrapped": type(unwrapped).__name__,
                              "scaler": accelerator.scaler is not None}), flush=True)
