"""TRL's SFTTrainer with its chunked cross-entropy loss (loss_type="chunked_nll", the default since
TRL #5997) on a tiny Llama from a config, as trl_sft.py: the gallery's TRL #6842 case, run on the
release before the fix (1.10.0: two reads a forward in _chunked_cross_entropy_loss) and the one
after (1.11.0: one)."""
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
with tempfile.TemporaryDirectory() as out:
    config = SFTConfig(output_dir=out, per_device_train_batch_size=4, max_steps=4,
                       learning_rate=1e-3, bf16=torch.cuda.is_available(), logging_steps=2,
                       report_to="none", save_strategy="no", max_length=64,
                       loss_type="chunked_nll", use_cpu=not torch.cuda.is_available())
    trainer = SFTTrainer(model=tiny_llm.model(tok), args=config, train_dataset=data,
                         processing_class=tok)
    trainer.train()
print(f"trl sft chunked_nll: {trainer.state.global_step} steps")
