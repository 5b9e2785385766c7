"""A plain training loop written for CUDA (model.cuda(), a loss.item() per step, a boolean-mask
index, .to(device) of a CPU batch). Count it on a machine without a GPU:
    python -m harness_sim run --as-cuda -- examples/programs/cuda_loop.py
"""
import torch
assert torch.cuda.is_available()
torch.manual_seed(0)
device = torch.device("cuda")
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
data = [(torch.randn(64, 16), torch.randn(64, 1)) for _ in range(6)]
for step, (x, y) in enumerate(data):
    x, y = x.to(device), y.to(device)
    pred = model(x)
    err = (pred - y).abs()
    loss = err[err < 1.0].mean()          # boolean-mask index: nonzero reads a size back
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")   # a sync per step
torch.cuda.synchronize()
print(torch.cuda.memory_allocated() > 0, next(model.parameters()).device)
