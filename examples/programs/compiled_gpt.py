"""A GPT-style training loop written for CUDA that compiles its model, as nanoGPT-style scripts do
by default (torch.compile, bf16 autocast, fused-QKV causal attention through
scaled_dot_product_attention, AdamW, a loss logged with .item() every few steps). Count it on a
machine without a GPU:
    python -m harness_sim run --as-cuda -- examples/programs/compiled_gpt.py
Add --no-compile to count the same loop eager.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--no-compile", action="store_true")
parser.add_argument("--steps", type=int, default=6)
args = parser.parse_args()


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab=128, block=32, dim=64, heads=4, layers=2):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(block, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab, bias=False)
        self.tok.weight = self.head.weight  # weight tying
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * layers))

    def forward(self, idx, targets):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


torch.manual_seed(0)
device = "cuda" if torch.cuda.is_available() else "cpu"
model = GPT().to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
if not args.no_compile:
    model = torch.compile(model)
data = torch.randint(0, 128, (args.steps, 8, 33))
for step in range(args.steps):
    batch = data[step].pin_memory().to(device, non_blocking=True)
    x, y = batch[:, :-1], batch[:, 1:]
    with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
        loss = model(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if step % 2 == 1:
        print(f"step {step} loss {loss.item():.4f}")
