"""Tiny random Hugging Face models and tokenizers for offline tests (importable by any test module).

Everything here is built on the fly in a temporary folder in well under a second: a byte-level BPE
tokenizer trained on a small built-in corpus (every text tokenises, nothing maps to ``<unk>``), a
simple Jinja chat template, and a randomly initialised Llama or Qwen2 model — either a sequence
classifier (a reward model) or a causal LM.

Example::

    from tests._hf_fixtures import build_tiny_model

    path = build_tiny_model(tmp_path / "rm", arch="llama", kind="seq-cls", template_adds_bos=True)
    model = AutoModelForSequenceClassification.from_pretrained(path)

BOS behaviour is controlled separately for the tokenizer and the template, covering the cases met
in real checkpoints: the tokenizer adds BOS and the template does not; the template writes
``{{ bos_token }}`` and the tokenizer does not; both do (a duplicated BOS, as with Llama-3.1
templates); neither (no BOS at all, as with Qwen).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Literal

#: Special tokens of the fixture tokenizer (role markers are atomic tokens).
SPECIAL_TOKENS = (
    "<pad>", "<s>", "</s>", "<unk>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"
)

_VOCABULARY = (
    "the a an of to in and or but with for on at by from about as into like over after before "
    "music film book song album painting artist guitar piano novel poem story theatre dance movie "
    "garden cooking recipe travel sleep habit exercise running budget career meditation morning "
    "family friend culture society history religion language politics community school tradition "
    "question answer post user profile prefer style short long detail example simple clear advice "
    "i you we they it he she my your our their think feel want need like love hate try learn "
    "good bad better best new old first last many few more most some any every each other "
    "is are was were be been being have has had do does did can could should would will may "
    "what why how when where who which because so if then than also just only very really "
    "practice play write read listen watch cook walk plan save spend move start stop keep help"
)
_WORDS = tuple(_VOCABULARY.split())


def chat_template(*, template_adds_bos: bool) -> str:
    """The fixture chat template: ``<|role|>`` + newline + content + ``<|end|>`` per message.

    Args:
        template_adds_bos: whether the rendered text starts with ``{{ bos_token }}``.
    """
    head = "{{ bos_token }}" if template_adds_bos else ""
    return (
        head
        + "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
        + "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
    )


def sample_text(rng: random.Random, n_words: int) -> str:
    """``n_words`` random words from the fixture vocabulary, with some punctuation."""
    words = [rng.choice(_WORDS) for _ in range(n_words)]
    for i in range(7, len(words), 8):
        words[i] += rng.choice([",", ".", "?", "!"])
    return " ".join(words)


def score_requests(n_questions: int = 8, answers: int = 2, seed: int = 0, *,
                   question_words: tuple[int, int] = (5, 20),
                   profile_words: tuple[int, int] = (0, 30),
                   answer_words: tuple[int, int] = (3, 40)) -> list[Any]:
    """Random score requests: ``answers`` answers per question (a pair by default), a profile each.

    Word counts are drawn from the given inclusive ranges; the same seed gives the same requests.
    """
    from prbench.profiles.base import ProfileView
    from prbench.scoring.base import ScoreRequest

    rng = random.Random(seed)
    out = []
    for i in range(n_questions):
        question = sample_text(rng, rng.randint(*question_words))
        profile = ProfileView(text=sample_text(rng, rng.randint(*profile_words)))
        for _ in range(answers):
            out.append(ScoreRequest(record_id=f"r{i}", question=question, profile=profile,
                                    response=sample_text(rng, rng.randint(*answer_words))))
    return out


def build_tokenizer(
    path: str | Path,
    *,
    tokenizer_adds_bos: bool = True,
    template_adds_bos: bool = False,
    vocab_size: int = 400,
    seed: int = 0,
    pad_token: str = "<pad>",
    template: str | None = None,
) -> Any:
    """Train a byte-level BPE tokenizer with a chat template and save it to ``path``.

    Args:
        path: the folder to write (created).
        tokenizer_adds_bos: the tokenizer prepends ``<s>`` when called with special tokens.
        template_adds_bos: the chat template starts with ``{{ bos_token }}``.
        vocab_size: the BPE vocabulary size (including the 256 byte symbols and specials).
        seed: seed of the training corpus.
        pad_token: the pad token (one of :data:`SPECIAL_TOKENS`; ``<|end|>`` makes every chat
            end with its pad token, as SmolLM2-style templates do).
        template: a chat template replacing the fixture's.

    Returns:
        The ``PreTrainedTokenizerFast`` (already saved).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    rng = random.Random(seed)
    corpus = [sample_text(rng, 40) for _ in range(300)] + [" ".join(_WORDS)]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    bos_id = tok.token_to_id("<s>")
    if tokenizer_adds_bos:
        tok.post_processor = processors.Sequence(
            [
                processors.ByteLevel(trim_offsets=False),
                processors.TemplateProcessing(
                    single="<s> $A", pair="<s> $A $B", special_tokens=[("<s>", bos_id)]
                ),
            ]
        )
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token=pad_token,
        unk_token="<unk>",
        additional_special_tokens=list(SPECIAL_TOKENS[4:]),
    )
    fast.chat_template = template or chat_template(template_adds_bos=template_adds_bos)
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(path)
    return fast


def build_tiny_model(
    path: str | Path,
    *,
    arch: Literal["llama", "qwen2", "qwen3", "mistral", "gemma2"] = "llama",
    kind: Literal["seq-cls", "causal-lm"] = "seq-cls",
    hidden_size: int = 32,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int | None = None,
    num_labels: int = 1,
    tokenizer_adds_bos: bool = True,
    template_adds_bos: bool = False,
    vocab_size: int = 400,
    max_position_embeddings: int = 4096,
    seed: int = 0,
    pad_token: str = "<pad>",
    template: str | None = None,
) -> Path:
    """Build and save a tiny random model with its tokenizer in one folder.

    Args:
        path: the folder to write (created); load it with ``from_pretrained(path)``.
        arch: ``"llama"``, ``"qwen2"``, ``"qwen3"``, ``"mistral"`` (sliding-window attention) or
            ``"gemma2"`` (sliding-window and full layers in turn, soft-capped logits).
        kind: ``"seq-cls"`` (``*ForSequenceClassification``, a reward model) or ``"causal-lm"``.
        hidden_size: model width.
        num_layers: decoder layers.
        num_heads: attention heads.
        num_kv_heads: key/value heads (grouped-query attention when smaller than ``num_heads``).
        intermediate_size: MLP width (default ``2 * hidden_size``).
        num_labels: classifier outputs (``seq-cls`` only).
        tokenizer_adds_bos: see :func:`build_tokenizer`.
        template_adds_bos: see :func:`build_tokenizer`.
        vocab_size: tokenizer vocabulary size (the model's embedding matches it).
        max_position_embeddings: longest supported input.
        seed: seed of the weights and of the tokenizer corpus.
        pad_token: see :func:`build_tokenizer` (also the config's ``pad_token_id``).
        template: see :func:`build_tokenizer`.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """
    import torch
    from transformers import (
        AutoModelForCausalLM,
        AutoModelForSequenceClassification,
        Gemma2Config,
        LlamaConfig,
        MistralConfig,
        Qwen2Config,
        Qwen3Config,
    )

    path = Path(path)
    tokenizer = build_tokenizer(
        path,
        tokenizer_adds_bos=tokenizer_adds_bos,
        template_adds_bos=template_adds_bos,
        vocab_size=vocab_size,
        seed=seed,
        pad_token=pad_token,
        template=template,
    )
    config_cls = {"llama": LlamaConfig, "qwen2": Qwen2Config, "qwen3": Qwen3Config,
                  "mistral": MistralConfig, "gemma2": Gemma2Config}[arch]
    extra: dict[str, Any] = {}
    if arch in ("qwen3", "gemma2", "mistral"):  # their default head_dim is a real model's
        extra["head_dim"] = hidden_size // num_heads
    if arch in ("mistral", "gemma2"):  # a window shorter than the inputs, so it matters
        extra["sliding_window"] = 16
    config = config_cls(
        **extra,
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or 2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        max_position_embeddings=max_position_embeddings,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        num_labels=num_labels,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    auto = AutoModelForSequenceClassification if kind == "seq-cls" else AutoModelForCausalLM
    model = auto.from_config(config)
    if kind == "seq-cls":
        # A random head with std 0.02 gives scores ~1e-2 apart; scale it so that differences
        # between answers are well above float noise and ties are impossible in practice.
        with torch.no_grad():
            model.score.weight.normal_(0.0, 1.0)
    model.eval()
    model.save_pretrained(path)
    return path
