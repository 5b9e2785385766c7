"""torch.compile of CUDA code sim ran into before sim served CUDA itself (issue 50): a compiled
Conv2d + BatchNorm2d module (inductor plans convolution layouts with CUDA's meta functions) and
`torch.autocast("cuda")` inside a compiled function. Prints one RESULT line."""
import json

import torch
m = torch.nn.Sequential(torch.nn.Conv2d(3, 24, 3, padding=1), torch.nn.BatchNorm2d(24), torch.nn.ReLU(),
                        torch.nn.Conv2d(24, 24, 3, padding=1), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                        torch.nn.Linear(24, 10)).cuda()
opt = torch.optim.SGD(m.parameters(), lr=0.1)
cm = torch.compile(m)

@torch.compile
def amp_step(x):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return (x @ x.t()).float().sum()

for step in range(4):
    x = torch.randn(8, 3, 32, 32, device="cuda")
    loss = cm(x).square().mean()
    loss.backward(); opt.step(); opt.zero_grad()
    y = amp_step(torch.randn(16, 16, device="cuda"))
print("RESULT " + json.dumps({"device": str(loss.device), "amp_out": str(y.dtype)}))
