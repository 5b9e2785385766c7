"""TRL's DPOTrainer (a preference trainer) on a tiny Llama from a config, a preference dataset
generated in memory (prompt, chosen, rejected), bf16 on CUDA. Ours: the sizes, the tokenizer, the
data (tiny_llm.py) and the reference model, a copy of the initial policy: TRL 1.16 would load it
again from the policy's hub name, which a model built from a config has not."""
import copy
import tempfile

import torch
from datasets import Dataset
from trl import DPOConfig, DPOTrainer

import tiny_llm

tok = tiny_llm.tokenizer()
texts = tiny_llm.sentences(48, length=8)
data = Dataset.from_list([{"prompt": p, "chosen": c, "rejected": r}
                          for p, c, r in zip(texts[::3], texts[1::3], texts[2::3])])
with tempfile.TemporaryDirectory() as out:
    config = DPOConfig(output_dir=out, per_device_train_batch_size=4, max_steps=4,
                       learning_rate=1e-3, bf16=torch.cuda.is_available(), logging_steps=2,
                       report_to="none", save_strategy="no", max_length=64,
                       use_cpu=not torch.cuda.is_available())
    policy = tiny_llm.model(tok)
    trainer = DPOTrainer(model=policy, ref_model=copy.deepcopy(policy), args=config,
                         train_dataset=data, processing_class=tok)
    trainer.train()
print(f"trl dpo: {trainer.state.global_step} steps")
