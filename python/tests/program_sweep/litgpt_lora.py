"""LitGPT's own command line, `litgpt finetune_lora`, on a checkpoint directory made here:
Pythia-14m's config (from LitGPT's model table) with random weights, a word-level tokenizer, and a JSON
instruction dataset generated in memory; bf16, one device, a few steps, no validation. Ours: the
checkpoint, the data and the options.

    python litgpt_lora.py  (runs `litgpt finetune_lora ...` as the console script does)"""
import json
import os
import sys
import tempfile
from pathlib import Path

import torch

import tiny_llm


def make_checkpoint(directory: str) -> None:
    from litgpt import GPT, Config
    from litgpt.utils import save_config
    config = Config.from_name("pythia-14m")
    torch.save(GPT(config).state_dict(), os.path.join(directory, "lit_model.pth"))
    save_config(config, Path(directory))
    tiny_llm.core_tokenizer().save(os.path.join(directory, "tokenizer.json"))
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": True,
                   "tokenizer_class": "PreTrainedTokenizerFast"}, f)
    with open(os.path.join(directory, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 1, "eos_token_id": 2}, f)


with tempfile.TemporaryDirectory() as scratch:
    checkpoint = os.path.join(scratch, "checkpoint")
    os.makedirs(checkpoint)
    make_checkpoint(checkpoint)
    data = os.path.join(scratch, "data.json")
    with open(data, "w") as f:
        json.dump([{"instruction": a, "input": "", "output": b} for a, b in
                   zip(tiny_llm.sentences(24, 8), tiny_llm.sentences(24, 8, seed=1))], f)
    sys.argv = ["litgpt", "finetune_lora", checkpoint, "--data", "JSON",
                "--data.json_path", data, "--data.val_split_fraction", "0.25",
                "--train.global_batch_size", "4", "--train.micro_batch_size", "4",
                "--train.max_steps", "6", "--train.save_interval", "1000",
                "--eval.interval", "1000", "--eval.final_validation", "false",
                "--eval.initial_validation", "false",
                "--precision", "bf16-true" if torch.cuda.is_available() else "32-true",
                "--devices", "1", "--out_dir", os.path.join(scratch, "out"),
                "--logger_name", "csv"]
    from litgpt.__main__ import main  # what the `litgpt` console script runs
    main()
