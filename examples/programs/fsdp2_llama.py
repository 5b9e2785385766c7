"""A Llama-shaped decoder trained with torch's FSDP2, as torchtitan-style programs do: the model
built on the meta device, `fully_shard` per block and at the root (bf16 parameters for compute,
fp32 reduction), `to_empty` on the GPU, weights initialised in place, AdamW, a few steps.

Sizes by --preset: tiny (runs anywhere), 1b (Llama-3.2-1B's shape), 8b (Llama-3-8B's: 32 layers,
d_model 4096, 32 heads, 8 KV heads, FFN 14336, vocab 128256), 70b. Written for CUDA and NCCL;
under `torchrun --nproc-per-node N -m harness_sim run --as-cuda --compute shapes -- ...` it is
counted at full size on a CPU runner without computing a value (docs/full-size.md).
"""
from __future__ import annotations

import argparse
import math
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

PRESETS = {
    "tiny": dict(dim=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=160, vocab=256, seq_len=32),
    "1b": dict(dim=2048, n_layers=16, n_heads=32, n_kv_heads=8, ffn_dim=8192, vocab=128256,
               seq_len=2048),
    "8b": dict(dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, ffn_dim=14336, vocab=128256,
               seq_len=2048),
    "70b": dict(dim=8192, n_layers=80, n_heads=64, n_kv_heads=8, ffn_dim=28672, vocab=128256,
                seq_len=2048),
}


def rotary_tables(head_dim: int, seq_len: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = 1.0 / (500000.0 ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim))
    angles = torch.outer(torch.arange(seq_len, device=device).float(), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos(), angles.sin()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


class Attention(nn.Module):
    def __init__(self, dim: int, n_heads: int, n_kv_heads: int):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, dim // n_heads
        self.wq = nn.Linear(dim, n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(n_heads * self.head_dim, dim, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, s, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, s, self.n_kv_heads, self.head_dim).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        repeat = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(repeat, dim=1), v.repeat_interleave(repeat, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(b, s, -1))


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.attention_norm = nn.RMSNorm(cfg["dim"], eps=1e-5)
        self.attention = Attention(cfg["dim"], cfg["n_heads"], cfg["n_kv_heads"])
        self.ffn_norm = nn.RMSNorm(cfg["dim"], eps=1e-5)
        self.feed_forward = FeedForward(cfg["dim"], cfg["ffn_dim"])

    def forward(self, x, cos, sin):
        x = x + self.attention(self.attention_norm(x), cos, sin)
        return x + self.feed_forward(self.ffn_norm(x))


class Llama(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg["vocab"], cfg["dim"])
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg["n_layers"]))
        self.norm = nn.RMSNorm(cfg["dim"], eps=1e-5)
        self.output = nn.Linear(cfg["dim"], cfg["vocab"], bias=False)

    @torch.no_grad()
    def init_weights(self):
        std = 0.02
        for name, p in self.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            else:
                p.normal_(0.0, std / math.sqrt(2 * self.cfg["n_layers"]) if "wo" in name or "w2" in name else std)

    def forward(self, tokens):
        head_dim = self.cfg["dim"] // self.cfg["n_heads"]
        cos, sin = rotary_tables(head_dim, tokens.shape[1], tokens.device)
        cos, sin = cos.to(torch.bfloat16), sin.to(torch.bfloat16)
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h, cos, sin)
        return self.output(self.norm(h))


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, tokens: torch.Tensor):
    """One step on `tokens` (batch x seq_len + 1): next-token cross entropy, AdamW; the loss."""
    logits = model(tokens[:, :-1])
    loss = F.cross_entropy(logits.flatten(0, 1).float(), tokens[:, 1:].flatten())
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--preset", choices=sorted(PRESETS), default="tiny")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--init", choices=("meta", "full"), default="meta",
                        help="meta: build on meta, shard, materialise; full: build whole on the "
                             "GPU, then shard (Lightning #8722)")
    args = parser.parse_args()
    cfg = PRESETS[args.preset]

    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)
    torch.manual_seed(0)

    # --init meta: built without memory, sharded, then materialised shard by shard (torchtitan's
    # way). --init full: built and initialised whole on every rank's GPU, then sharded -- the
    # set-up of Lightning #8722, whose peak is the whole model on every rank.
    with torch.device("meta" if args.init == "meta" else device):
        model = Llama(cfg)
    if args.init == "full":
        model.init_weights()
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.layers:
        fully_shard(layer, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    if args.init == "meta":
        model.to_empty(device=device)
        model.init_weights()
    if rank == 0:
        print(f"set-up ({args.init}): peak memory on cuda:{local_rank} "
              f"{torch.cuda.max_memory_allocated(device) / 2**30:.2f} GiB")
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)

    parameters = sum(p.numel() for p in model.parameters())  # DTensors: the global numel
    if rank == 0:
        print(f"{args.preset}: {parameters / 1e9:.2f}B parameters on {world} ranks")
    for step in range(args.steps):
        tokens = torch.randint(0, cfg["vocab"], (args.batch_size, cfg["seq_len"] + 1), device=device)
        loss = train_step(model, optimizer, tokens)
        if rank == 0:
            print(f"step {step} loss {loss.item():.4f}")
    if rank == 0:
        print(f"peak memory on cuda:{local_rank}: {torch.cuda.max_memory_allocated(device) / 2**30:.2f} GiB")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
