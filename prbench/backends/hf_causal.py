"""A generation backend running a Hugging Face causal LM in-process (a hub id, a folder or GGUF).

* Chats are rendered with the tokenizer's chat template (or ``chat_template``: the template or
  its file) with the generation prompt, tokenised without special tokens, and given exactly one
  BOS when the model expects one (the scorers' BOS policy, so a template that writes a BOS and a
  tokenizer that adds one never give two).
* Generation runs in length-sorted batches of at most ``batch_size`` chats, left-padded, with an
  explicit attention mask. Greedy decoding (``temperature == 0``) is batch-invariant: a chat gets
  the same tokens alone or in any batch (up to floating-point ties).
* Sampling (``temperature > 0``) draws every chat's tokens from its own random generator, seeded
  from ``config.seed`` and the chat's prompt tokens, so the same seed and chat give the same
  sample in the same call, in a later call and in batches of other chats. The output is a
  function of (model, chat, config): ask for several samples of one chat with several seeds.
* ``logprobs`` sums the log-probabilities of a continuation's tokens (tokenised on their own,
  without special tokens) after the rendered prompt; left padding plus explicit position ids
  keep it independent of the batch, and only the continuation's logits are computed.
* Every reply is a :class:`~prbench.backends.base.Completion`: ``finish_reason`` is ``"length"``
  when the reply used all ``max_new_tokens`` without an end-of-sequence token or a stop string
  (judges then count it as ``truncated``), ``"stop"`` otherwise.
* A chat whose prompt is longer than the model's context gets a
  :class:`~prbench.backends.base.GenerationFailure` (``prompt-too-long``) in its place; the other
  chats are generated. An empty or unreadable output is text like any other: the caller's parser
  counts it as a failure (never a verdict).
* ``device="auto"`` takes CUDA when present, else the CPU; ``cuda``/``cuda:N`` without CUDA is an
  error naming the option (:func:`prbench.devices.resolve_device`). ``dtype="auto"`` is float32
  on the CPU and the checkpoint's dtype on a GPU.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from prbench.backends.base import (
    BackendSpec,
    Chat,
    Completion,
    GenerationConfig,
    GenerationFailure,
    Reply,
)
from prbench.backends.chat_inputs import load_chat_template, resolve_bos, template_sha256
from prbench.backends.checks import check_chats, check_config, cut_at_stop
from prbench.backends.model_files import check_model_files, loading
from prbench.devices import resolve_device

if TYPE_CHECKING:
    import torch

logger = logging.getLogger(__name__)

_PROBE_CHAT: Chat = [{"role": "user", "content": "Hello"}]


def resolve_dtype(dtype: str, device: str) -> Any:
    """Map a dtype setting to a torch dtype (or ``"auto"``: the checkpoint's, on a GPU)."""
    import torch

    table = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if dtype == "auto":
        return torch.float32 if device == "cpu" else "auto"
    if dtype not in table:
        raise ValueError(f"unknown dtype {dtype!r}; use auto, float32, bfloat16 or float16")
    return table[dtype]


def plan(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Group item indices into length-sorted batches of at most ``batch_size`` items.

    The scoring engine's planner with a padded-token budget of ``batch_size`` times the longest
    item: a batch never holds more than ``batch_size`` items, nor more padded tokens than a full
    batch of the longest item.
    """
    from prbench.scoring.engine import plan_batches

    if not lengths:
        return []
    return plan_batches(
        list(lengths), token_budget=batch_size * max(lengths), max_batch_size=batch_size
    )


def split_gguf_path(model: str, gguf_file: str) -> tuple[str, str]:
    """Accept ``model=<folder or hub id>, gguf_file=<name>`` or ``model=<path to a .gguf>``."""
    if not gguf_file and model.lower().endswith(".gguf") and os.path.isfile(model):
        folder, name = os.path.split(os.path.abspath(model))
        return folder, name
    return model, gguf_file


class HFCausalBackend:
    """Generate with, and score continuations under, a causal LM from transformers.

    Args:
        spec: ``backend="hf"``; ``model``, ``revision``, ``gguf_file``, ``dtype``, ``device``,
            ``chat_template``, ``trust_remote_code`` and ``batch_size`` are used.

    Attributes:
        fingerprint: ``hf:<model>@<revision>[#<gguf_file>]:<dtype>[:template-<hash>]``.
        device: the device the model runs on.

    Raises:
        ValueError: a bad setting, or a tokenizer with neither a chat template nor
            ``chat_template``, nor a pad, EOS or UNK token to pad with.
    """

    def __init__(self, spec: BackendSpec) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if spec.backend != "hf":
            raise ValueError(f"HFCausalBackend needs backend='hf', got {spec.backend!r}")
        if not spec.model:
            raise ValueError("the hf backend needs `model` (a hub id, local folder or .gguf file)")
        if spec.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {spec.batch_size}")
        self.spec = spec
        model_id, gguf_file = split_gguf_path(spec.model, spec.gguf_file)
        self.device = resolve_device(spec.device)
        dtype = resolve_dtype(spec.dtype, self.device)
        kwargs: dict[str, Any] = {"trust_remote_code": spec.trust_remote_code}
        if not os.path.isdir(model_id):
            kwargs["revision"] = spec.revision
        if gguf_file:
            kwargs["gguf_file"] = gguf_file
        check_model_files(model_id, spec.revision, what="hf backend model",
                          marker=gguf_file or "config.json")
        with loading(model_id):
            self.tokenizer = AutoTokenizer.from_pretrained(model_id, **kwargs)
            self.model = AutoModelForCausalLM.from_pretrained(model_id, dtype=dtype, **kwargs)
        self.model.to(self.device).eval()
        self._setup_tokens()
        if spec.chat_template:
            self._template = load_chat_template(spec.chat_template)
        else:
            self._template = getattr(self.tokenizer, "chat_template", None)
        if isinstance(self._template, dict):  # named templates: the default one renders chats
            self._template = self._template.get("default")
        if not self._template:
            raise ValueError(
                f"{spec.model}: the tokenizer has no chat template; pass `chat_template` "
                "(a Jinja template rendering `messages` with `add_generation_prompt`, or its file)"
            )
        self.bos = resolve_bos(self.tokenizer, "auto", self._render(_PROBE_CHAT))
        params = inspect.signature(self.model.forward).parameters
        self._keeps_logits = "logits_to_keep" in params
        self._takes_positions = "position_ids" in params
        self.fingerprint = self._make_fingerprint(gguf_file)
        torch_dtype = next(self.model.parameters()).dtype
        logger.info("loaded %s on %s (%s)", self.fingerprint, self.device, torch_dtype)

    def _setup_tokens(self) -> None:
        tok = self.tokenizer
        if tok.pad_token_id is None:
            if tok.eos_token is not None:
                tok.pad_token = tok.eos_token
            elif tok.unk_token is not None:
                tok.pad_token = tok.unk_token
            else:
                raise ValueError(f"{self.spec.model}: the tokenizer has no pad, EOS or UNK token")
        self.pad_id: int = int(tok.pad_token_id)
        eos: set[int] = set()
        configured = self.model.generation_config.eos_token_id
        if isinstance(configured, int):
            eos.add(configured)
        elif configured:
            eos.update(int(e) for e in configured)
        if tok.eos_token_id is not None:
            eos.add(int(tok.eos_token_id))
        if not eos:
            raise ValueError(f"{self.spec.model}: neither the model nor the tokenizer names EOS")
        self.eos_ids: tuple[int, ...] = tuple(sorted(eos))

    def _make_fingerprint(self, gguf_file: str) -> str:
        name = self.spec.model
        if not os.path.isdir(name) and not os.path.isfile(name):
            name = f"{name}@{self.spec.revision}"
        if gguf_file and gguf_file not in name:
            name = f"{name}#{gguf_file}"
        dtype = str(next(self.model.parameters()).dtype).removeprefix("torch.")
        parts = [f"hf:{name}", dtype]
        if self.spec.chat_template:
            parts.append(f"template-{template_sha256(self._template)}")
        return ":".join(parts)

    # -- prompts --------------------------------------------------------------------------------

    def _render(self, chat: Chat) -> str:
        return self.tokenizer.apply_chat_template(
            list(chat),
            chat_template=self._template,
            tokenize=False,
            add_generation_prompt=True,
        )

    def encode_chat(self, chat: Chat) -> list[int]:
        """Token ids of a chat rendered with its generation prompt (exactly one BOS, or none).

        The BOS policy is the scorers' (:func:`prbench.backends.chat_inputs.resolve_bos`): a BOS
        written by the template and one added by the tokenizer give one BOS, not two.
        """
        ids = list(self.tokenizer(self._render(chat), add_special_tokens=False).input_ids)
        return self.bos.apply(ids)

    def _left_pad(self, rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        import torch

        width = max(len(r) for r in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, row in enumerate(rows):
            if row:
                ids[i, width - len(row) :] = torch.tensor(row, dtype=torch.long)
                mask[i, width - len(row) :] = 1
        return ids.to(self.device), mask.to(self.device)

    def _context(self) -> int | None:
        """The model's context length in positions, when its config states one."""
        config = self.model.config
        limit = getattr(config, "max_position_embeddings", None) or getattr(
            config, "n_positions", None
        )
        return limit if isinstance(limit, int) else None

    def _too_long(self, i: int, n: int, what: str) -> str:
        return (
            f"chat {i}: the {what} is {n} tokens, more than the model's context "
            f"({self._context()} positions); shorten the chat"
        )

    def _check_lengths(self, lengths: list[int], what: str, new_tokens: int = 0) -> None:
        """Refuse inputs longer than the model's context; warn when generation would overrun it.

        Raises:
            ValueError: an input (named by its position) exceeds the context length.
        """
        limit = self._context()
        if limit is None or not lengths:
            return
        for i, n in enumerate(lengths):
            if n > limit:
                raise ValueError(self._too_long(i, n, what))
        longest = max(lengths)
        if longest + new_tokens > limit:
            logger.warning(
                "a prompt of %d tokens plus max_new_tokens=%d exceeds the model's context "
                "(%d positions); the output may degrade or be cut",
                longest,
                new_tokens,
                limit,
            )

    # -- generation -----------------------------------------------------------------------------

    def generate(self, chats: Sequence[Chat], config: GenerationConfig) -> list[Reply]:
        """One completion per chat, in order (see the module docstring for determinism).

        A chat whose prompt does not fit the model's context gets a ``prompt-too-long``
        :class:`~prbench.backends.base.GenerationFailure`; the others are generated.
        """
        check_chats(chats)
        check_config(config)
        prompts = [self.encode_chat(chat) for chat in chats]
        limit = self._context()
        outputs: list[Reply] = [""] * len(prompts)
        todo: list[int] = []
        for i, prompt in enumerate(prompts):
            if limit is not None and len(prompt) > limit:
                detail = self._too_long(i, len(prompt), "prompt")
                logger.warning("%s; the item is recorded as invalid", detail)
                outputs[i] = GenerationFailure(reason="prompt-too-long", detail=detail)
            else:
                todo.append(i)
        self._check_lengths([len(prompts[i]) for i in todo], "prompt", config.max_new_tokens)
        lengths = [len(prompts[i]) + config.max_new_tokens for i in todo]
        for batch in plan(lengths, self.spec.batch_size):
            items = [todo[b] for b in batch]
            texts = self._generate_batch([prompts[i] for i in items], config)
            for i, text in zip(items, texts, strict=True):
                outputs[i] = text
        return outputs

    def _generate_batch(
        self, prompts: list[list[int]], config: GenerationConfig
    ) -> list[Completion]:
        import torch
        from transformers import GenerationConfig as HFGenerationConfig
        from transformers import LogitsProcessorList, StoppingCriteriaList

        ids, mask = self._left_pad(prompts)
        width = ids.shape[1]
        # A fresh config: the checkpoint's sampling defaults (temperature, top_k, repetition
        # penalty, ...) must not leak into a run whose settings are recorded as ours.
        gen_config = HFGenerationConfig(
            max_new_tokens=config.max_new_tokens,
            do_sample=False,
            num_beams=1,
            eos_token_id=list(self.eos_ids),
            pad_token_id=self.pad_id,
            bos_token_id=self.tokenizer.bos_token_id,
        )
        processors = LogitsProcessorList()
        if config.temperature > 0:
            seeds = [_row_seed(config.seed, prompt) for prompt in prompts]
            processors.append(_SeededSampler(seeds, config.temperature, config.top_p))
        criteria = StoppingCriteriaList()
        if config.stop:
            criteria.append(_StopOnStrings(self.tokenizer, config.stop, width))
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=ids,
                attention_mask=mask,
                generation_config=gen_config,
                logits_processor=processors,
                stopping_criteria=criteria,
            )
        texts = []
        eos = set(self.eos_ids)
        for row in out[:, width:].tolist():
            end = next((k for k, t in enumerate(row) if t in eos), None)
            text = self.tokenizer.decode(row[:end], skip_special_tokens=True)
            cut = cut_at_stop(text, config.stop)
            # No end-of-sequence token, no stop string and the whole budget generated: the
            # reply was cut at max_new_tokens.
            budget_used = end is None and len(row) >= config.max_new_tokens and cut == text
            texts.append(Completion(cut, "length" if budget_used else "stop"))
        return texts

    # -- scoring --------------------------------------------------------------------------------

    def logprobs(self, chats: Sequence[Chat], continuations: Sequence[str]) -> list[float]:
        """Sum of the log-probabilities of each continuation's tokens after its chat's prompt.

        An empty continuation scores 0.0 (log 1).

        Raises:
            ValueError: chats and continuations differ in number.
            TypeError: a continuation is not a string.
        """
        check_chats(chats)
        if len(chats) != len(continuations):
            raise ValueError(
                f"logprobs needs one continuation per chat: {len(chats)} chats, "
                f"{len(continuations)} continuations"
            )
        for i, cont in enumerate(continuations):
            if not isinstance(cont, str):
                raise TypeError(f"continuation {i} must be a string, got {type(cont).__name__}")
        prompts = [self.encode_chat(chat) for chat in chats]
        conts = [list(self.tokenizer(c, add_special_tokens=False).input_ids) for c in continuations]
        self._check_lengths(
            [len(p) + len(c) for p, c in zip(prompts, conts, strict=True)], "prompt+continuation"
        )
        scores = [0.0] * len(chats)
        todo = [i for i in range(len(chats)) if conts[i]]
        lengths = [len(prompts[i]) + len(conts[i]) for i in todo]
        for batch in plan(lengths, self.spec.batch_size):
            items = [todo[b] for b in batch]
            values = self._score_batch([prompts[i] for i in items], [conts[i] for i in items])
            for i, value in zip(items, values, strict=True):
                scores[i] = value
        return scores

    def _score_batch(self, prompts: list[list[int]], conts: list[list[int]]) -> list[float]:
        import torch

        ids, mask = self._left_pad([p + c for p, c in zip(prompts, conts, strict=True)])
        longest = max(len(c) for c in conts)
        keep = longest + 1
        kwargs: dict[str, Any] = {"input_ids": ids, "attention_mask": mask, "use_cache": False}
        if self._takes_positions:
            kwargs["position_ids"] = (mask.cumsum(-1) - 1).clamp(min=0)
        if self._keeps_logits:
            kwargs["logits_to_keep"] = keep
        with torch.inference_mode():
            logits = self.model(**kwargs).logits[:, -keep:, :].float()
        values = []
        for r, cont in enumerate(conts):
            start = longest - len(cont)
            rows = torch.log_softmax(logits[r, start : start + len(cont)], dim=-1)
            target = torch.tensor(cont, device=rows.device).unsqueeze(-1)
            values.append(float(rows.gather(-1, target).sum()))
        return values


def _row_seed(seed: int, prompt: list[int]) -> int:
    """A 63-bit seed from the call's seed and the chat's prompt tokens."""
    digest = hashlib.sha256(f"{seed}:{','.join(map(str, prompt))}".encode()).digest()
    return int.from_bytes(digest[:8], "little") & ((1 << 63) - 1)


class _SeededSampler:
    """Sample each row from its own generator; the result is a one-hot mask greedy search follows.

    Temperature and nucleus (top-p) filtering are applied here, in float32.
    """

    def __init__(self, seeds: list[int], temperature: float, top_p: float) -> None:
        self.seeds = seeds
        self.temperature = temperature
        self.top_p = top_p
        self.generators: list[Any] | None = None

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        import torch

        if self.generators is None:
            self.generators = [
                torch.Generator(device=scores.device).manual_seed(s) for s in self.seeds
            ]
        probs = torch.softmax(scores.float() / self.temperature, dim=-1)
        if self.top_p < 1.0:
            sorted_probs, order = probs.sort(dim=-1, descending=True, stable=True)
            before = sorted_probs.cumsum(dim=-1) - sorted_probs
            sorted_probs = sorted_probs.masked_fill(before >= self.top_p, 0.0)
            probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
        chosen = torch.stack(
            [
                torch.multinomial(probs[r], 1, generator=self.generators[r])
                for r in range(probs.shape[0])
            ]
        )
        out = torch.full_like(scores, float("-inf"))
        return out.scatter(-1, chosen, 0.0)


class _StopOnStrings:
    """Stop a row once its generated text contains one of the stop strings."""

    def __init__(self, tokenizer: Any, stop: Sequence[str], prompt_width: int) -> None:
        self.tokenizer = tokenizer
        self.stop = tuple(stop)
        self.prompt_width = prompt_width
        # A character takes at most 4 byte-level tokens; decode a window that surely holds one.
        self.window = 4 * max(len(s) for s in stop) + 4

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs: Any) -> Any:
        import torch

        tails = input_ids[:, self.prompt_width :][:, -self.window :].tolist()
        texts = self.tokenizer.batch_decode(tails, skip_special_tokens=True)
        done = [any(s in text for s in self.stop) for text in texts]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)
