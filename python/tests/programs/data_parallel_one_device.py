"""nn.DataParallel on a machine with one GPU (pytorch/examples' imagenet default path): it
scatters the batch and gathers the gradient even on one device."""
import json

import torch

model = torch.nn.DataParallel(torch.nn.Linear(16, 4)).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(6):
    x = torch.randn(8, 16)  # on the CPU: DataParallel copies it to the device
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("RESULT " + json.dumps({"device_ids": model.device_ids,
                              "output": str(model(torch.randn(2, 16)).device)}), flush=True)
