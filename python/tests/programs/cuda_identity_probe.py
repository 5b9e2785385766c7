"""Run under `python -m harness_sim run --as-cuda` with HARNESS_SIM_AS_CUDA=device: what a
program and torch's own code see of a CUDA tensor, printed as one JSON line (IDENTITY {...}), and
the counts of a masked assignment and of GradScaler's step, each in a count() block."""
import json

import torch

import harness_sim

x = torch.randn(4, 3, device="cuda")
facts = {
    "type": x.device.type, "is_cuda": x.is_cuda, "str": str(x.device),
    "equal": x.device == torch.device("cuda", 0), "tensor_type": x.type(),
    "module_param": str(next(torch.nn.Linear(3, 2).cuda().parameters()).device),
    "accelerator": str(torch.accelerator.current_accelerator()),
    "pinned": torch.ones(3).pin_memory().is_pinned(),
    "to_cpu": str(x.cpu().device), "cuda_method": str(torch.ones(2).cuda().device),
}
with torch.autocast("cuda", dtype=torch.bfloat16):
    facts["autocast_dtype"] = str(torch.nn.functional.linear(x, torch.ones(2, 3, device="cuda")).dtype)

mask = x > 0
with harness_sim.count() as masked:
    x[mask] = -float("inf")
facts["masked_assign"] = {"syncs": masked.total["syncs"], "launches": masked.total["launches_by_op"]}

model = torch.nn.Linear(3, 1).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cuda")
with torch.autocast("cuda", dtype=torch.float16):
    loss = model(torch.randn(8, 3, device="cuda")).float().pow(2).mean()
scaler.scale(loss).backward()
with harness_sim.count() as scaled:
    scaler.step(opt)
    scaler.update()
facts["scaler_enabled"] = scaler.is_enabled()
facts["scaler_step"] = {"syncs": scaled.total["syncs"], "d2h": scaled.total["d2h"]["count"],
                        "launches": scaled.total["launches_by_op"]}
print("IDENTITY " + json.dumps(facts), flush=True)
