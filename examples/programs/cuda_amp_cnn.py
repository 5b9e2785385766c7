"""A CNN image classifier trained as CUDA scripts train one: Conv2d + BatchNorm2d blocks, fp16
autocast with torch.amp.GradScaler("cuda"), SGD with momentum, the loss printed every step.
Count it on a machine without a GPU:
    python -m harness_sim run --as-cuda -- examples/programs/cuda_amp_cnn.py
On sim each layer runs the op CUDA runs (cudnn_convolution, cudnn_batch_norm, ...), the casts
autocast makes are counted, and so are the scaler's one .item() and the print's per step.
"""
import argparse

import torch
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
args = parser.parse_args()

torch.manual_seed(0)
device = torch.device("cuda")


def block(c_in, c_out):
    return torch.nn.Sequential(torch.nn.Conv2d(c_in, c_out, 3, padding=1, bias=False),
                               torch.nn.BatchNorm2d(c_out), torch.nn.ReLU(),
                               torch.nn.MaxPool2d(2))


model = torch.nn.Sequential(block(3, 8), block(8, 16), torch.nn.Flatten(),
                            torch.nn.Linear(16 * 4 * 4, 10)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
scaler = torch.amp.GradScaler("cuda")
images = torch.randn(args.steps, 16, 3, 16, 16)
labels = torch.randint(0, 10, (args.steps, 16))
for step in range(args.steps):
    x, y = images[step].to(device), labels[step].to(device)
    with torch.autocast("cuda", dtype=torch.float16):
        loss = F.cross_entropy(model(x), y)
    opt.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    print(f"step {step} loss {loss.item():.4f}")
