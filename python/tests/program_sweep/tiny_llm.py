"""What the language-model drivers share, all ours and nothing downloaded: a word-level tokenizer
built in memory, a two-layer Llama from a config, and generated text. (transformers is imported
only by what needs it: LitGPT's environment has none.)"""
import random

from tokenizers import Tokenizer, models, pre_tokenizers

WORDS = [f"w{i}" for i in range(200)]


def core_tokenizer() -> Tokenizer:
    """The tokenizer itself (the `tokenizers` library's): <pad> 0, <s> 1, </s> 2, <unk> 3."""
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3, **{w: i + 4 for i, w in enumerate(WORDS)}}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return core


def tokenizer():
    """The tokenizer as transformers' PreTrainedTokenizerFast, with a chat template."""
    from transformers import PreTrainedTokenizerFast
    tok = PreTrainedTokenizerFast(tokenizer_object=core_tokenizer(), pad_token="<pad>", bos_token="<s>",
                                  eos_token="</s>", unk_token="<unk>")
    tok.chat_template = ("{% for m in messages %}{{ m['role'] }} {{ m['content'] }} "
                         "{% endfor %}{% if add_generation_prompt %}assistant {% endif %}")
    return tok


def model(tok):
    """A two-layer Llama from a config, for `tok`'s vocabulary (random weights)."""
    from transformers import LlamaConfig, LlamaForCausalLM
    config = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=128, pad_token_id=tok.pad_token_id,
                         bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    return LlamaForCausalLM(config)


def sentences(n: int, length: int = 24, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(length)) for _ in range(n)]
