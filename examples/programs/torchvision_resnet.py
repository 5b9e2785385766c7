"""torchvision's ResNet-18 trained as its reference classification script trains one (the idioms of
torchvision/references/classification/train.py, written here): torchvision's own transforms on
the batch, channels-last, bf16 autocast, SGD with momentum and weight decay, a cosine schedule,
label smoothing, and accuracy kept as a device tensor and printed with a format spec every few
steps. Count it without a GPU:
    python -m harness_sim run --as-cuda -- examples/programs/torchvision_resnet.py
"""
import argparse

import torch
import torchvision
from torchvision.transforms import v2

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=5)
parser.add_argument("--print-freq", type=int, default=2)
args = parser.parse_args()

torch.manual_seed(0)
device = torch.device("cuda")
model = torchvision.models.resnet18(num_classes=10).to(device, memory_format=torch.channels_last)
criterion = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.steps)
transform = v2.Compose([v2.RandomHorizontalFlip(), v2.Normalize(mean=[0.485, 0.456, 0.406],
                                                                std=[0.229, 0.224, 0.225])])
images = torch.rand(args.steps, 4, 3, 64, 64)
labels = torch.randint(0, 10, (args.steps, 4))
correct = torch.zeros((), device=device)
for step in range(args.steps):
    x = transform(images[step]).to(device, non_blocking=True).contiguous(
        memory_format=torch.channels_last)
    y = labels[step].to(device, non_blocking=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = model(x)
        loss = criterion(out, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    schedule.step()
    correct += (out.argmax(1) == y).sum()
    if (step + 1) % args.print_freq == 0:
        print(f"step {step + 1} loss {loss:.3f} correct {correct:.0f}")   # two syncs
