"""A policy-gradient loop as reinforcement-learning scripts write one for CUDA: a Gaussian policy
samples its actions with torch.normal(mean, std) (std a learned tensor), REINFORCE's loss, Adam.
Count it without a GPU, under each torch you have, and compare (the upgrade check,
docs/python.md):
    python -m harness_sim run --as-cuda --out old.json -- examples/programs/cuda_gaussian_policy.py
On CUDA before torch 2.14, torch.normal read std.min() >= 0 back to the host twice per call (a
sync each); from 2.14 it checks on the device (#186508), and the step makes no sync at all.
"""
import argparse

import torch

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
args = parser.parse_args()

torch.manual_seed(0)
device = torch.device("cuda")
policy = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(),
                             torch.nn.Linear(32, 2)).to(device)
log_std = torch.nn.Parameter(torch.full((2,), -0.5, device=device))
opt = torch.optim.Adam([*policy.parameters(), log_std], lr=3e-3)
states = torch.randn(64, 8, device=device)
target = torch.tensor([0.5, -0.5], device=device)

for step in range(args.steps):
    mean = policy(states)
    std = log_std.exp().expand_as(mean)
    actions = torch.normal(mean.detach(), std.detach())        # exploration noise
    reward = -((actions - target) ** 2).sum(dim=1)
    log_prob = torch.distributions.Normal(mean, std).log_prob(actions).sum(dim=1)
    loss = -(log_prob * (reward - reward.mean())).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
print("mean reward kept on the device:", reward.mean().detach().shape)
