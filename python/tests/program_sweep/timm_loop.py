"""timm's training utilities in the loop its train.py runs (train_one_epoch): a model from its zoo
(resnet10t, 10 classes), channels_last, Mixup with label smoothing and its SoftTargetCrossEntropy,
create_optimizer_v2 (AdamW), create_scheduler_v2 (cosine, stepped per update), NativeScaler (a
GradScaler with clipping) under AMP, and ModelEmaV3, seeded as train.py seeds (random_seed: torch,
NumPy and random; Mixup draws mixup or cutmix per batch from NumPy, each with its own ops). Ours:
the sizes and the generated images."""
import torch
from timm import create_model
from timm.data import Mixup
from timm.loss import SoftTargetCrossEntropy
from timm.optim import create_optimizer_v2
from timm.scheduler import create_scheduler_v2
from timm.utils import ModelEmaV3, NativeScaler, random_seed

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
random_seed(0)
model = create_model("resnet10t", num_classes=10).to(device).to(memory_format=torch.channels_last)
optimizer = create_optimizer_v2(model, opt="adamw", lr=1e-3, weight_decay=0.05)
scheduler, _ = create_scheduler_v2(optimizer, sched="cosine", num_epochs=1, updates_per_epoch=6)
mixup = Mixup(mixup_alpha=0.8, cutmix_alpha=1.0, label_smoothing=0.1, num_classes=10)
loss_fn = SoftTargetCrossEntropy()
scaler = NativeScaler(device=device.type)
ema = ModelEmaV3(model, decay=0.999)
batches = [(torch.randn(8, 3, 64, 64), torch.randint(0, 10, (8,))) for _ in range(6)]
model.train()
for step, (images, target) in enumerate(batches):
    images, target = images.to(device, non_blocking=True), target.to(device, non_blocking=True)
    images, target = mixup(images, target)
    images = images.contiguous(memory_format=torch.channels_last)
    with torch.autocast(device.type, dtype=torch.float16 if device.type == "cuda" else torch.bfloat16):
        loss = loss_fn(model(images), target)
    optimizer.zero_grad()
    scaler(loss, optimizer, clip_grad=1.0, parameters=model.parameters())
    ema.update(model, step=step)
    scheduler.step_update(num_updates=step + 1)
print(f"timm: {len(batches)} steps, last loss {loss.item():.4f}")
