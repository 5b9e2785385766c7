"""sentence-transformers' SentenceTransformerTrainer with its MultipleNegativesRankingLoss, on a
tiny BERT saved from a config to a scratch directory (its Transformer module loads it from
there; nothing is downloaded) and generated sentence pairs. Ours: the sizes, the vocabulary and
the data."""
import random
import tempfile

import torch
from datasets import Dataset
from sentence_transformers import (SentenceTransformer, SentenceTransformerTrainer,
                                   SentenceTransformerTrainingArguments, losses, models)
from tokenizers import Tokenizer, models as tok_models, pre_tokenizers
from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

words = [f"w{i}" for i in range(200)]
vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4,
         **{w: i + 5 for i, w in enumerate(words)}}
core = Tokenizer(tok_models.WordLevel(vocab=vocab, unk_token="[UNK]"))
core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
rng = random.Random(0)
pairs = [(" ".join(rng.choices(words, k=10)), " ".join(rng.choices(words, k=10)))
         for _ in range(32)]
with tempfile.TemporaryDirectory() as scratch:
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="[PAD]",
                                        unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
                                        mask_token="[MASK]")
    tokenizer.save_pretrained(scratch)
    BertModel(BertConfig(vocab_size=len(vocab), hidden_size=64, num_hidden_layers=2,
                         num_attention_heads=4, intermediate_size=128)).save_pretrained(scratch)
    embedder = models.Transformer(scratch, max_seq_length=32)
    model = SentenceTransformer(modules=[embedder, models.Pooling(64, "mean")])
    data = Dataset.from_dict({"anchor": [a for a, _ in pairs], "positive": [p for _, p in pairs]})
    args = SentenceTransformerTrainingArguments(
        output_dir=scratch + "/out", per_device_train_batch_size=8, max_steps=4,
        learning_rate=1e-4, bf16=torch.cuda.is_available(), report_to="none",
        save_strategy="no", logging_steps=2, use_cpu=not torch.cuda.is_available())
    trainer = SentenceTransformerTrainer(model=model, args=args, train_dataset=data,
                                         loss=losses.MultipleNegativesRankingLoss(model))
    trainer.train()
print(f"sentence-transformers: {trainer.state.global_step} steps on {model.device}")
