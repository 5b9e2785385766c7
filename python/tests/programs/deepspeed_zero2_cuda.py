"""DeepSpeed ZeRO-2 with bf16 on one rank, written for a GPU machine (its launcher's variables set
here): under `run --as-cuda` DeepSpeed's accelerator and engine see the CUDA device sim serves.
Prints one RESULT line."""
import json
import os
import socket

with socket.socket() as _s:  # a free port: nothing else of this machine's is disturbed
    _s.bind(("127.0.0.1", 0))
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(_s.getsockname()[1]))

import deepspeed  # noqa: E402
import torch  # noqa: E402
from deepspeed.accelerator import get_accelerator  # noqa: E402

model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
config = {"train_micro_batch_size_per_gpu": 8, "zero_optimization": {"stage": 2},
          "bf16": {"enabled": True},
          "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "torch_adam": True}}}
engine, _, _, _ = deepspeed.initialize(model=model, config=config,
                                       model_parameters=model.parameters())
for step in range(4):
    x = torch.randn(8, 32, device=engine.device, dtype=torch.bfloat16)
    loss = engine(x).float().square().mean()
    engine.backward(loss)
    engine.step()
print("RESULT " + json.dumps({"accelerator": get_accelerator().device_name(),
                              "device": str(engine.device),
                              "backend": get_accelerator().communication_backend_name()}))
