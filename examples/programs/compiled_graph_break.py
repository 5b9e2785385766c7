"""A compiled training step whose forward reads a value back with .item() (a graph break: dynamo
stops the graph there, the read syncs, a second graph goes on). Count it, and ask whether a step
could be captured in a CUDA graph:
    python -m harness_sim run -- examples/programs/compiled_graph_break.py
    python -m harness_sim run -- examples/programs/compiled_graph_break.py --capturable
With --capturable the step reads nothing back: it has no graph break and no capture blocker.
"""
import argparse

import torch
import torch.nn.functional as F

import harness_sim  # noqa: F401  (the sim device)

parser = argparse.ArgumentParser()
parser.add_argument("--capturable", action="store_true")
parser.add_argument("--steps", type=int, default=6)
args = parser.parse_args()

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 1)).to("sim")
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=True)


@torch.compile
def forward(x, y):
    loss = F.mse_loss(model(x), y)
    if not args.capturable:
        scale = loss.detach().item()  # graph break: a sync between two graphs
        loss = loss / max(scale, 1.0)
    return loss


xs, ys = torch.randn(args.steps, 64, 16, device="sim"), torch.randn(args.steps, 64, 1, device="sim")
for step in range(args.steps):
    loss = forward(xs[step], ys[step])
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
