"""PyTorch Ignite's own supervised trainer (create_supervised_trainer with AMP and a GradScaler)
and evaluator with its Accuracy and Loss metrics, on generated data. Ours: the model's sizes, the
data."""
import torch
from ignite.engine import Events, create_supervised_evaluator, create_supervised_trainer
from ignite.metrics import Accuracy, Loss

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4)).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
loss_fn = torch.nn.CrossEntropyLoss()
data = [(torch.randn(16, 32), torch.randint(0, 4, (16,))) for _ in range(6)]
amp = device == "cuda"
trainer = create_supervised_trainer(model, optimizer, loss_fn, device=device,
                                    amp_mode="amp" if amp else None, scaler=amp)
evaluator = create_supervised_evaluator(model, metrics={"accuracy": Accuracy(), "loss": Loss(loss_fn)},
                                        device=device)


@trainer.on(Events.EPOCH_COMPLETED)
def validate(engine):
    evaluator.run(data[:2])
    print(f"ignite: epoch {engine.state.epoch} {evaluator.state.metrics}")


trainer.run(data, max_epochs=1)
