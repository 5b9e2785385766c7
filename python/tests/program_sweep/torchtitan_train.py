"""torchtitan's own trainer, `python -m torchtitan.train --job.config_file ...` (what torchtitan's
run_train.sh starts under torchrun on each rank), with a TOML config written here: Llama 3's
`debugmodel` flavor (torchtitan's own model args, random weights), FSDP2 over every rank
(`data_parallel_shard_degree = -1`), or with `tp` 2-way tensor parallel and FSDP2 over the rest;
a word-level tokenizer saved as `tokenizer.json` for `model.hf_assets_path`, and generated text
for the `c4_test` dataset from a local JSON file (`training.dataset_path`), as torchtitan's own
tests feed it; 6 steps of 2 sequences of 128 tokens per rank, no checkpoint, no profiling, no
tensorboard or wandb. Ours: the config, the tokenizer and the data. Each rank writes its own copy
of them (the same files) into a scratch directory of its own. torchtitan imports Triton when it is
imported: run it with `run --as-cuda --with-triton`.

    torchrun --standalone --nproc-per-node N torchtitan_train.py [fsdp|tp]"""
import json
import os
import runpy
import sys
import tempfile

import tiny_llm

LAYOUTS = {"fsdp": 1, "tp": 2}  # tensor_parallel_degree; FSDP2 shards over the remaining ranks
STEPS = 6


def make_tokenizer(directory: str) -> None:
    """The word-level tokenizer as torchtitan's HuggingFaceTokenizer loads it: tokenizer.json,
    with its BOS and EOS tokens named in tokenizer_config.json."""
    os.makedirs(directory)
    tiny_llm.core_tokenizer().save(os.path.join(directory, "tokenizer.json"))
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": True,
                   "add_eos_token": True}, f)


def make_dataset(directory: str) -> None:
    """C4's shape (one {"text": ...} per line), in a directory `datasets.load_dataset` reads."""
    os.makedirs(directory)
    with open(os.path.join(directory, "data.json"), "w") as f:
        for text in tiny_llm.sentences(200, 40):
            f.write(json.dumps({"text": text}) + "\n")


def make_config(scratch: str, tp: int) -> str:
    config = f"""
[job]
dump_folder = "{scratch}/outputs"
description = "harness program sweep: llama3 debugmodel"

[profiling]
enable_profiling = false
enable_memory_snapshot = false

[metrics]
log_freq = 1
enable_tensorboard = false
enable_wandb = false

[model]
name = "llama3"
flavor = "debugmodel"
hf_assets_path = "{scratch}/tokenizer"

[optimizer]
name = "AdamW"
lr = 8e-4
eps = 1e-8

[lr_scheduler]
warmup_steps = 2
decay_ratio = 0.8
decay_type = "linear"
min_lr_factor = 0.0

[training]
local_batch_size = 2
seq_len = 128
max_norm = 1.0
steps = {STEPS}
dataset = "c4_test"
dataset_path = "{scratch}/c4_test"

[parallelism]
data_parallel_replicate_degree = 1
data_parallel_shard_degree = -1
fsdp_reshard_after_forward = "default"
tensor_parallel_degree = {tp}
pipeline_parallel_degree = 1
context_parallel_degree = 1

[checkpoint]
enable = false

[activation_checkpoint]
mode = "selective"
selective_ac_option = "2"

[compile]
enable = false

[validation]
enable = false
"""
    path = os.path.join(scratch, "train.toml")
    with open(path, "w") as f:
        f.write(config)
    return path


layout = sys.argv[1] if len(sys.argv) > 1 else "fsdp"
if layout not in LAYOUTS:
    sys.exit(f"torchtitan_train.py: no layout {layout!r} (fsdp or tp)")
with tempfile.TemporaryDirectory(prefix="torchtitan-") as scratch:
    os.environ["HF_DATASETS_CACHE"] = os.path.join(scratch, "hf_datasets")
    make_tokenizer(os.path.join(scratch, "tokenizer"))
    make_dataset(os.path.join(scratch, "c4_test"))
    config = make_config(scratch, LAYOUTS[layout])
    sys.argv = ["torchtitan/train.py", "--job.config_file", config]
    runpy.run_module("torchtitan.train", run_name="__main__", alter_sys=True)
