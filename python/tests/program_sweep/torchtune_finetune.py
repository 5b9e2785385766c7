"""torchtune's own command line, `tune run full_finetune_single_device` (or
`lora_finetune_single_device`) with a config written here: a 2-layer Llama 2 from torchtune's
component builder (`torchtune.models.llama2.llama2`, or `lora_llama2`), its random weights saved
for `FullModelTorchTuneCheckpointer`, a SentencePiece tokenizer trained on generated text for
`llama2_tokenizer`, and an Alpaca-style JSON dataset generated here for `alpaca_dataset`
(`source: json`); bf16, one device, 6 steps; the checkpoint the recipe saves at the end of the
epoch goes to a temporary directory. Ours: the config, the checkpoint, the tokenizer and the data.

    python torchtune_finetune.py full|lora  (runs `tune run ...` as the console script does)"""
import io
import json
import os
import sys
import tempfile

import sentencepiece
import torch
from omegaconf import OmegaConf

import tiny_llm

RECIPES = {"full": "full_finetune_single_device", "lora": "lora_finetune_single_device"}
# The model's shape: what torchtune's builder takes, besides the vocabulary
SHAPE = dict(num_layers=2, num_heads=4, num_kv_heads=2, embed_dim=64, intermediate_dim=128,
             max_seq_len=128)
ALPACA_WORDS = ("Below is an instruction that describes a task paired with an input that provides "
                "further context Write a response that appropriately completes the request "
                "### Instruction: Input: Response:")


def make_tokenizer(path: str) -> int:
    """A SentencePiece model trained on the generated words and Alpaca's prompt; its vocabulary
    size (unk 0, bos 1, eos 2, as Llama 2's)."""
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(tiny_llm.sentences(200) + [ALPACA_WORDS] * 20),
        model_writer=model, vocab_size=320, model_type="bpe", hard_vocab_limit=False,
        character_coverage=1.0, minloglevel=2)
    with open(path, "wb") as f:
        f.write(model.getvalue())
    return sentencepiece.SentencePieceProcessor(model_file=path).vocab_size()


def make_checkpoint(path: str, vocab_size: int) -> None:
    from torchtune.models.llama2 import llama2
    torch.manual_seed(0)
    torch.save(llama2(vocab_size=vocab_size, **SHAPE).state_dict(), path)


def make_config(kind: str, scratch: str, vocab_size: int) -> str:
    cuda = torch.cuda.is_available()
    model = {"_component_": "torchtune.models.llama2.llama2", "vocab_size": vocab_size, **SHAPE}
    if kind == "lora":
        model.update({"_component_": "torchtune.models.llama2.lora_llama2",
                      "lora_attn_modules": ["q_proj", "v_proj", "output_proj"],
                      "apply_lora_to_mlp": True, "apply_lora_to_output": False,
                      "lora_rank": 8, "lora_alpha": 16, "lora_dropout": 0.0})
    out = os.path.join(scratch, "out")
    cfg = {
        "output_dir": out,
        "model": model,
        "tokenizer": {"_component_": "torchtune.models.llama2.llama2_tokenizer",
                      "path": os.path.join(scratch, "checkpoint", "tokenizer.model"),
                      "max_seq_len": SHAPE["max_seq_len"]},
        "checkpointer": {"_component_": "torchtune.training.FullModelTorchTuneCheckpointer",
                         "checkpoint_dir": os.path.join(scratch, "checkpoint"),
                         "checkpoint_files": ["model.pt"], "recipe_checkpoint": None,
                         "output_dir": out, "model_type": "LLAMA2"},
        "resume_from_checkpoint": False,
        "dataset": {"_component_": "torchtune.datasets.alpaca_dataset", "source": "json",
                    "data_files": os.path.join(scratch, "data.json"), "packed": False},
        "seed": 0, "shuffle": True, "batch_size": 2, "epochs": 1, "max_steps_per_epoch": 6,
        "gradient_accumulation_steps": 1, "clip_grad_norm": None,
        "optimizer": {"_component_": "torch.optim.AdamW", "fused": True, "lr": 2e-5,
                      "weight_decay": 0.01},
        "lr_scheduler": {"_component_":
                         "torchtune.training.lr_schedulers.get_cosine_schedule_with_warmup",
                         "num_warmup_steps": 2},
        "loss": {"_component_": "torchtune.modules.loss.CEWithChunkedOutputLoss"},
        "compile": False,
        "device": "cuda" if cuda else "cpu",
        "dtype": "bf16",
        "enable_activation_checkpointing": True,
        "enable_activation_offloading": False,
        "metric_logger": {"_component_": "torchtune.training.metric_logging.DiskLogger",
                          "log_dir": os.path.join(out, "logs")},
        "log_every_n_steps": 1,
        "log_peak_memory_stats": True,
        "profiler": {"_component_": "torchtune.training.setup_torch_profiler", "enabled": False},
    }
    if kind == "full":
        cfg["optimizer_in_bwd"] = False
    else:
        cfg["save_adapter_weights_only"] = False
    path = os.path.join(scratch, f"{kind}.yaml")
    OmegaConf.save(OmegaConf.create(cfg), path)
    return path


kind = sys.argv[1] if len(sys.argv) > 1 else "full"
if kind not in RECIPES:
    sys.exit(f"torchtune_finetune.py: no recipe for {kind!r} (full or lora)")
with tempfile.TemporaryDirectory() as scratch:
    os.makedirs(os.path.join(scratch, "checkpoint"))
    vocab_size = make_tokenizer(os.path.join(scratch, "checkpoint", "tokenizer.model"))
    make_checkpoint(os.path.join(scratch, "checkpoint", "model.pt"), vocab_size)
    with open(os.path.join(scratch, "data.json"), "w") as f:
        json.dump([{"instruction": a, "input": "", "output": b} for a, b in
                   zip(tiny_llm.sentences(24, 8), tiny_llm.sentences(24, 8, seed=1))], f)
    config = make_config(kind, scratch, vocab_size)
    sys.argv = ["tune", "run", RECIPES[kind], "--config", config]
    from torchtune._cli.tune import main  # what the `tune` console script runs
    main()  # the recipe ends with sys.exit(recipe_main())
