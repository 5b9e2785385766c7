"""Lightning Fabric on CUDA, as a user writes it: `python fabric_cuda.py PRECISION` (32-true or
16-mixed). Under `run --as-cuda` with HARNESS_SIM_AS_CUDA=device, Fabric's own CUDA checks
(lightning/fabric/accelerators/cuda.py) see CUDA devices."""
import json
import sys

import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda", devices=1, precision=sys.argv[1])
fabric.launch()
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
model, optimizer = fabric.setup(model, optimizer)
for step in range(6):
    x = torch.randn(32, 16, device=fabric.device)
    loss = model(x).float().pow(2).mean()
    optimizer.zero_grad()
    fabric.backward(loss)
    optimizer.step()
scaler = getattr(fabric.strategy.precision, "scaler", None)
print("RESULT " + json.dumps({"device": str(fabric.device), "scaler": scaler is not None}),
      flush=True)
