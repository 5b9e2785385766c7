"""What a program sees of CUDA's random number generators (run under `run --as-cuda`): their
state is CUDA's (a Philox seed and offset, 16 bytes), random ops advance the offset and are
determined by the state, the host's generator is not drawn from, and FSDP2 parameters on a
device mesh are initialised with `normal_` through DTensor's RNG tracker. Prints one RESULT line."""
import json
import os
import socket

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.fsdp import fully_shard


def offset() -> int:
    return int(torch.cuda.get_rng_state()[8:].view(torch.int64).item())


def generator_facts() -> dict:
    torch.manual_seed(1234)
    state = torch.cuda.get_rng_state()
    host_before = torch.get_rng_state()
    first = torch.randn(1000, device="cuda")
    after_randn = offset()
    torch.cuda.set_rng_state(state)
    again = torch.randn(1000, device="cuda")
    F.dropout(torch.ones(8, device="cuda"), 0.5, training=True)
    big = torch.empty(2_000_000, device="cuda").uniform_()
    after_dropout_and_big = offset()
    torch.cuda.manual_seed(7)
    g = torch.Generator(device="cuda")
    g.manual_seed(7)
    with torch.random.fork_rng(device_type="cuda"):
        torch.rand(3, device="cuda")
    return {
        "state_bytes": state.numel(), "state_dtype": str(state.dtype),
        "seed": torch.cuda.initial_seed(), "offset_after_randn": after_randn,
        "replayed": bool(torch.equal(first.cpu(), again.cpu())),
        "host_untouched": bool(torch.equal(host_before, torch.get_rng_state())),
        "offset_after_dropout_and_big": after_dropout_and_big,
        "generator_device": str(g.device),
        "same_stream": bool(torch.equal(torch.randn(5, device="cuda", generator=g).cpu(),
                                        torch.randn(5, device="cuda").cpu())),
        "fork_restored_offset": offset(),
        "default_generators": [str(d.device) for d in torch.cuda.default_generators],
    }


def fsdp2_init() -> dict:
    with socket.socket() as s:  # a free port
        s.bind(("127.0.0.1", 0))
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(s.getsockname()[1]))
    dist.init_process_group("nccl", rank=0, world_size=1)
    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Linear(32, 4))
    for layer in model:
        fully_shard(layer)
    fully_shard(model)
    model.to_empty(device="cuda")
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.02)  # DTensor's RNG tracker: CUDA's generator's seed and offset
    params = list(model.parameters())
    loss = model(torch.randn(8, 16, device="cuda")).sum()
    loss.backward()
    dist.destroy_process_group()
    return {"param_type": type(params[0]).__name__, "device": str(params[0].device),
            "std_ok": bool(0.005 < float(params[0].detach().full_tensor().std()) < 0.05)}


if __name__ == "__main__":
    print("RESULT " + json.dumps({**generator_facts(), **fsdp2_init()}))
