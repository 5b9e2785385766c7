"""diffusers' own UNet2DModel and DDPMScheduler trained as its train_unconditional example does:
noise added by the scheduler, the noise predicted, Accelerate's Accelerator with fp16 mixed
precision (bf16 with `bf16`), EMAModel, get_scheduler's cosine warm-up. Ours: the sizes and the
generated images.

    python diffusers_ddpm.py [fp16|bf16]"""
import sys

import torch
import torch.nn.functional as F
from accelerate import Accelerator
from diffusers import DDPMScheduler, UNet2DModel
from diffusers.optimization import get_scheduler
from diffusers.training_utils import EMAModel

precision = sys.argv[1] if len(sys.argv) > 1 else "fp16"
accelerator = Accelerator(mixed_precision=precision if torch.cuda.is_available() else "no")
torch.manual_seed(0)
model = UNet2DModel(sample_size=16, in_channels=3, out_channels=3, layers_per_block=1,
                    block_out_channels=(32, 64), norm_num_groups=8,
                    down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                    up_block_types=("AttnUpBlock2D", "UpBlock2D"))
noise_scheduler = DDPMScheduler(num_train_timesteps=100)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
images = torch.utils.data.TensorDataset(torch.randn(24, 3, 16, 16))
loader = torch.utils.data.DataLoader(images, batch_size=4, shuffle=True)
lr_scheduler = get_scheduler("cosine", optimizer=optimizer, num_warmup_steps=2,
                             num_training_steps=len(loader))
model, optimizer, loader, lr_scheduler = accelerator.prepare(model, optimizer, loader, lr_scheduler)
ema = EMAModel(accelerator.unwrap_model(model).parameters(), decay=0.999)
ema.to(accelerator.device)
for (clean,) in loader:
    noise = torch.randn_like(clean)
    timesteps = torch.randint(0, noise_scheduler.config.num_train_timesteps, (clean.shape[0],),
                              device=clean.device)
    noisy = noise_scheduler.add_noise(clean, noise, timesteps)
    with accelerator.accumulate(model):
        loss = F.mse_loss(model(noisy, timesteps).sample, noise)
        accelerator.backward(loss)
        if accelerator.sync_gradients:
            accelerator.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        lr_scheduler.step()
        optimizer.zero_grad()
    if accelerator.sync_gradients:
        ema.step(accelerator.unwrap_model(model).parameters())
print(f"diffusers {precision}: on {accelerator.device}, last loss {loss.item():.4f}")
