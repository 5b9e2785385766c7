"""A word-level LSTM language model trained as CUDA scripts train one: embedding, a 2-layer
LSTM with dropout, bf16 autocast, clip_grad_norm_, Adam's foreach-free for-loop (SGD here) and
perplexity from the running loss every few steps. Count it without a GPU:
    python -m harness_sim run --as-cuda -- examples/programs/cuda_lstm_lm.py
On sim the LSTM is one cuDNN `_cudnn_rnn` per call, as on CUDA (float16 inside autocast,
whatever its dtype: AutocastRNN.cpp).
"""
import argparse
import math

import torch
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--log-every", type=int, default=3)
args = parser.parse_args()

torch.manual_seed(0)
device = torch.device("cuda")
vocab, emb, hidden, seq, batch = 50, 16, 32, 12, 4


class LanguageModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, emb)
        self.rnn = torch.nn.LSTM(emb, hidden, num_layers=2, dropout=0.2)
        self.head = torch.nn.Linear(hidden, vocab)

    def forward(self, tokens):
        out, _ = self.rnn(self.embed(tokens))
        return self.head(out)


model = LanguageModel().to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.5)
corpus = torch.randint(0, vocab, (args.steps, seq + 1, batch))
total_loss = torch.zeros((), device=device)   # kept on the device: no sync per step
for step in range(args.steps):
    tokens = corpus[step].to(device, non_blocking=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(tokens[:-1])
        loss = F.cross_entropy(logits.reshape(-1, vocab).float(), tokens[1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    opt.step()
    total_loss += loss.detach()
    if (step + 1) % args.log_every == 0:
        mean = total_loss / args.log_every
        print(f"step {step + 1} ppl {math.exp(mean):.1f}")   # float(mean): a sync
        total_loss.zero_()
