"""A classifier trained with Hugging Face Accelerate as its examples train one (examples/
nlp_example.py's loop): `Accelerator(mixed_precision="bf16")`, `accelerator.prepare` of the model,
optimizer, DataLoader and LR scheduler, `accelerator.backward`, `accelerator.clip_grad_norm_` when
gradients are synced, and a running accuracy kept on the device from `accelerator.gather`, read
(with the loss) every few steps. A small MLP over random features; 6 steps. Count it without a GPU:
    python -m harness_sim run --as-cuda -- examples/programs/accelerate_loop.py
Per step, as on CUDA: the batch's two blocking H2D copies (the prepared DataLoader's
send_to_device, non_blocking=False by default) and nothing else; the log's two .item()s every
--log-every steps (test_run_hf.py names the lines).
"""
import argparse

import torch
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import set_seed

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--log-every", type=int, default=3)
args = parser.parse_args()

set_seed(0)
features, classes, batch = 32, 10, 16
accelerator = Accelerator(mixed_precision="bf16")

model = torch.nn.Sequential(torch.nn.Linear(features, 64), torch.nn.GELU(),
                            torch.nn.LayerNorm(64), torch.nn.Linear(64, classes))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
x = torch.randn(batch * args.steps, features)
y = torch.randint(0, classes, (batch * args.steps,))
train_dataloader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y),
                                               batch_size=batch, shuffle=True)
lr_scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-3, total_steps=args.steps)
model, optimizer, train_dataloader, lr_scheduler = accelerator.prepare(
    model, optimizer, train_dataloader, lr_scheduler)

model.train()
correct = torch.zeros((), device=accelerator.device, dtype=torch.long)
seen = 0
for step, (inputs, labels) in enumerate(train_dataloader):
    logits = model(inputs)
    loss = F.cross_entropy(logits, labels)
    accelerator.backward(loss)
    if accelerator.sync_gradients:
        accelerator.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    lr_scheduler.step()
    optimizer.zero_grad()
    predictions, references = accelerator.gather((logits.argmax(dim=-1), labels))
    correct += (predictions == references).sum()   # on the device: no sync
    seen += references.numel()
    if (step + 1) % args.log_every == 0:
        mean_loss = accelerator.gather(loss.detach()).mean()
        accelerator.print(f"step {step + 1} loss {mean_loss.item():.3f} "   # .item(): a sync
                          f"accuracy {correct.item() / seen:.3f}")          # and another
accelerator.print(f"device {accelerator.device} mixed precision {accelerator.mixed_precision}")
