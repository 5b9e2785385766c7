"""Lightning Fabric's own loop: Fabric(accelerator="cuda", precision="16-mixed") -- its GradScaler
-- with fabric.setup, setup_dataloaders, fabric.backward and fabric.clip_gradients, as Fabric's
examples train. Ours: the model's sizes and the generated data."""
import torch
from lightning.fabric import Fabric

fabric = Fabric(accelerator="cuda" if torch.cuda.is_available() else "cpu", devices=1,
                precision="16-mixed" if torch.cuda.is_available() else "32-true")
fabric.launch()
fabric.seed_everything(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
model, optimizer = fabric.setup(model, optimizer)
data = torch.utils.data.TensorDataset(torch.randn(96, 32), torch.randint(0, 4, (96,)))
loader = fabric.setup_dataloaders(torch.utils.data.DataLoader(data, batch_size=16))
for x, y in loader:
    loss = torch.nn.functional.cross_entropy(model(x), y)
    fabric.backward(loss)
    fabric.clip_gradients(model, optimizer, max_norm=1.0)
    optimizer.step()
    optimizer.zero_grad()
fabric.print(f"fabric: {len(loader)} steps, device {fabric.device}")
