"""A causal language model fine-tuned with Hugging Face's `transformers.Trainer`, as a user on one
GPU drives it: a tiny Llama built from its config (2 layers, hidden 64, vocabulary 128; randomly
initialised, nothing downloaded), a map-style dataset of random token ids (labels = input ids),
and TrainingArguments as on a GPU (bf16=True, per-device batch, logging_steps, max_steps,
report_to="none", save_strategy="no", a scratch output_dir). Count it without a GPU:
    python -m harness_sim run --as-cuda -- examples/programs/hf_trainer.py
Per step, as on CUDA: the batch's two blocking H2D copies (Accelerate's send_to_device with
non_blocking=False), three .item()s of transformers' own (Trainer's NaN/Inf filter of the loss,
two; the packed-sequence check of create_causal_mask, one), and the log's loss and grad norm
.item() every logging_steps (test_run_hf.py names the lines).
"""
import argparse
import tempfile

import torch
from transformers import LlamaConfig, LlamaForCausalLM, Trainer, TrainingArguments

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=6)
parser.add_argument("--logging-steps", type=int, default=2)
args = parser.parse_args()

torch.manual_seed(0)
vocab, seq, batch = 128, 32, 4


class RandomTokens(torch.utils.data.Dataset):
    """Token ids for causal LM: the model shifts the labels itself."""

    def __init__(self, n):
        self.ids = torch.randint(0, vocab, (n, seq))

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


config = LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=128,
                     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                     max_position_embeddings=seq)
model = LlamaForCausalLM(config)

with tempfile.TemporaryDirectory() as output_dir:
    training_args = TrainingArguments(
        output_dir=output_dir, max_steps=args.steps, per_device_train_batch_size=batch,
        learning_rate=1e-3, warmup_steps=1, bf16=True, logging_steps=args.logging_steps,
        report_to="none", save_strategy="no", dataloader_num_workers=0, seed=0)
    trainer = Trainer(model=model, args=training_args,
                      train_dataset=RandomTokens(batch * args.steps))
    result = trainer.train()
    print(f"device {trainer.args.device} steps {result.global_step} "
          f"loss {result.training_loss:.3f}")
