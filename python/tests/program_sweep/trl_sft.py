"""TRL's SFTTrainer on a tiny Llama from a config, a conversational dataset generated in memory
(datasets.Dataset), bf16 on CUDA. Ours: the sizes, the tokenizer and the data (tiny_llm.py).
An argument, if given, is SFTConfig's loss_type (the gallery's TRL #6842 case: "chunked_nll");
without one, the release's default."""
import sys
import tempfile

import torch
from datasets import Dataset
from trl import SFTConfig, SFTTrainer

import tiny_llm

tok = tiny_llm.tokenizer()
texts = tiny_llm.sentences(32, length=12)
data = Dataset.from_list([{"messages": [{"role": "user", "content": a},
                                        {"role": "assistant", "content": b}]}
                          for a, b in zip(texts[::2], texts[1::2])])
loss = {"loss_type": sys.argv[1]} if len(sys.argv) > 1 else {}
with tempfile.TemporaryDirectory() as out:
    config = SFTConfig(output_dir=out, per_device_train_batch_size=4, max_steps=4,
                       learning_rate=1e-3, bf16=torch.cuda.is_available(), logging_steps=2,
                       report_to="none", save_strategy="no", max_length=64,
                       use_cpu=not torch.cuda.is_available(), **loss)
    trainer = SFTTrainer(model=tiny_llm.model(tok), args=config, train_dataset=data,
                         processing_class=tok)
    trainer.train()
print(f"trl sft: {trainer.state.global_step} steps")
