"""PEFT's LoRA (get_peft_model on q_proj and v_proj) trained by transformers' Trainer: a tiny Llama
from a config, bf16, generated token data. Ours: the sizes, the tokenizer and the data
(tiny_llm.py)."""
import tempfile

import torch
from peft import LoraConfig, get_peft_model
from transformers import Trainer, TrainingArguments

import tiny_llm

tok = tiny_llm.tokenizer()
model = get_peft_model(tiny_llm.model(tok), LoraConfig(r=8, lora_alpha=16,
                                                       target_modules=["q_proj", "v_proj"]))
ids = tok(tiny_llm.sentences(32), return_tensors="pt")["input_ids"]
data = [{"input_ids": row, "labels": row} for row in ids]
with tempfile.TemporaryDirectory() as out:
    args = TrainingArguments(output_dir=out, per_device_train_batch_size=4, max_steps=6,
                             learning_rate=1e-3, bf16=torch.cuda.is_available(), logging_steps=3,
                             report_to="none", save_strategy="no", use_cpu=not torch.cuda.is_available())
    Trainer(model=model, args=args, train_dataset=data).train()
print(f"peft lora: trainable {sum(p.numel() for p in model.parameters() if p.requires_grad)}")
