"""A loop that builds its GradScaler only where its model's device is CUDA (timm's train.py does
so: `if device.type == 'cuda'`), so that a device that only pretends to be CUDA would silently
run another program: no scaler, no unscale, no found_inf read back."""
import json

import torch

model = torch.nn.Linear(16, 4).to("cuda" if torch.cuda.is_available() else "cpu")
device = next(model.parameters()).device
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
scaler = torch.amp.GradScaler("cuda") if device.type == "cuda" else None
for step in range(6):
    x = torch.randn(8, 16, device=device)
    with torch.autocast(device.type, dtype=torch.float16, enabled=scaler is not None):
        loss = model(x).float().pow(2).mean()
    optimizer.zero_grad()
    if scaler is not None:
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    else:
        loss.backward()
        optimizer.step()
print("RESULT " + json.dumps({"device": device.type, "scaler": scaler is not None}), flush=True)
