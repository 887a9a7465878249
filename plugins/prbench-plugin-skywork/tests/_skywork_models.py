"""Tiny random Qwen3 / Llama / Gemma-2 sequence classifiers with a trained BPE tokenizer.

Each imitates the BOS behaviour of the real checkpoints: Qwen3 has no BOS token; the Llama-3.1
and Gemma-2 templates write a BOS and the tokenizer adds another (the double-BOS trap).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Literal

Arch = Literal["qwen3", "llama", "gemma2"]
SPECIALS = ["<pad>", "<s>", "</s>", "<unk>", "<|user|>", "<|assistant|>", "<|system|>", "<|end|>"]
_WORDS_TEXT = (
    "the a of to in and with for on my your i you we it is are was be have do can should "
    "music film book song guitar piano garden cooking travel sleep habit running budget "
    "career family friend culture history language school practice play write read listen "
    "walk plan answer question user profile post style short long simple clear advice good "
    "better new old photography lens camera night light art paint dance theatre poem story "
    "meditation morning "
)
WORDS = tuple(_WORDS_TEXT.split())


def _template(with_bos: bool) -> str:
    head = "{{ bos_token }}" if with_bos else ""
    return head + (
        "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
    )


def build_rm(path: Path, arch: Arch, seed: int = 0) -> Path:
    """Save a tiny random ``*ForSequenceClassification`` of ``arch`` and its tokenizer."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import (
        AutoModelForSequenceClassification,
        Gemma2Config,
        LlamaConfig,
        PreTrainedTokenizerFast,
        Qwen3Config,
    )

    rng = random.Random(seed)
    corpus = [" ".join(rng.choice(WORDS) for _ in range(30)) for _ in range(200)]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=SPECIALS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    has_bos = arch != "qwen3"
    if has_bos:  # the tokenizer adds a BOS and so does the template: one must be stripped
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A", pair="<s> $A $B", special_tokens=[("<s>", tok.token_to_id("<s>"))]
        )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>" if has_bos else None, eos_token="</s>",
        pad_token="<pad>", unk_token="<unk>", additional_special_tokens=SPECIALS[4:],
    )
    fast.chat_template = _template(with_bos=has_bos)
    path.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(path)
    common = dict(
        vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
        pad_token_id=fast.pad_token_id, eos_token_id=fast.eos_token_id, num_labels=1,
        tie_word_embeddings=False,
    )
    if has_bos:
        common["bos_token_id"] = fast.bos_token_id
    if arch == "qwen3":
        config = Qwen3Config(head_dim=8, **common)
    elif arch == "gemma2":
        config = Gemma2Config(head_dim=8, query_pre_attn_scalar=8, sliding_window=64, **common)
    else:
        config = LlamaConfig(**common)
    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_config(config)
    with torch.no_grad():  # spread the random head so that scores differ well above float noise
        model.score.weight.normal_(0.0, 1.0)
    model.save_pretrained(path)
    return path
