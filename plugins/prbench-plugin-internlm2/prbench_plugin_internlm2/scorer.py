"""The ``internlm2-reward`` scorer: InternLM2-Reward checkpoints scored as their own code scores.

InternLM2-Reward is loaded with ``AutoModel`` and the checkpoint's own code. Its ``get_score``
renders a chat with the tokenizer's chat template (which writes the BOS), encodes it without
special tokens, appends the reward token and reads the value head at that token. Two ways to run
it (``call=``):

- ``forward`` (default): prbench encodes each chat exactly as ``get_score`` does, puts the reward
  token right after each chat's last token, right-pads a length-sorted, token-budgeted batch and
  calls the checkpoint's ``forward`` once per batch. Every row keeps the positions it has alone,
  so a score does not depend on the batch it lands in (equal to ``get_score`` up to float noise).
- ``get_score``: the checkpoint's own method, one chat per call, as the model card scores —
  slower. (reward-bench encodes each chat on its own and batches the ``forward`` call, which is
  what ``forward`` does.)

The checkpoint's batched ``get_scores`` is not used: it calls ``tokenizer.batch_encode_plus``,
which transformers 5 removed, and it appends the reward token after the padding, so a chat's
reward shifts with the longest chat of its batch. Both paths pass ``use_cache=False``: a score
needs no cache, and with the config's ``use_cache=true`` the checkpoint's decoder converts caches
with ``DynamicCache.from_legacy_cache``, also removed in transformers 5.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prbench.api import (
    ChatEncoder,
    ScoreRequest,
    UnscoredInputs,
    build_chat,
    encoded_records,
    fingerprint_of,
    kept_inputs,
    model_identity,
    profile_texts,
    shown_profiles,
    torch_device,
)
from prbench_plugin_internlm2.plugin import InternLM2RewardOptions

#: Bump when a change alters scores for the same options.
SCORER_VERSION = 2


def _remote_code_files(pretrained: str) -> dict[str, str]:
    """SHA-256 (short) of every ``*.py`` shipped in a local checkpoint folder."""
    path = Path(pretrained).expanduser()
    if not path.is_dir():
        return {}
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:16] for p in sorted(path.glob("*.py"))
    }


class InternLM2RewardScorer(UnscoredInputs):
    """InternLM2-Reward through its remote API (see the module docstring).

    Args:
        options: the validated options (``trust_remote_code`` is true, or they fail to build).

    Raises:
        ValueError: remote code was not allowed.
    """

    component = "internlm2-reward"

    def __init__(self, options: InternLM2RewardOptions) -> None:
        from transformers import AutoTokenizer

        if not options.trust_remote_code:  # options refuse this already; never load without it
            from prbench_plugin_internlm2.plugin import REMOTE_CODE_REFUSAL

            raise ValueError(REMOTE_CODE_REFUSAL)
        self.options = options
        self.device = torch_device(options.device)
        # the model card loads the weights in float16 on a GPU; float32 on a CPU
        self.dtype_name = (
            ("float16" if self.device.type == "cuda" else "float32")
            if options.dtype == "auto" else options.dtype
        )
        self.tokenizer = AutoTokenizer.from_pretrained(
            options.pretrained, revision=options.revision, trust_remote_code=True
        )
        # the reward token takes one position: chats are fitted into max_length - 1 tokens
        self.encoder = ChatEncoder(
            self.tokenizer, max_length=options.max_length - 1, position=options.profile_position,
            user_format=options.effective_user_format, system_format=options.system_format,
            released_profile=options.released_profile,
        )
        self.description: dict[str, Any] = {
            "scorer": self.component,
            "version": SCORER_VERSION,
            "model": model_identity(options.pretrained, options.revision),
            "remote_code": _remote_code_files(options.pretrained),
            "dtype": self.dtype_name,
            "max_length": options.max_length,
            "profile_position": options.profile_position,
            "user_format": options.user_format,
            "system_format": options.system_format,
            "input_format": options.input_format,
            # the template text's short sha256, as prbench's hf-classifier records it
            "chat_template": hashlib.sha256(template.encode("utf-8")).hexdigest()[:16]
            if (template := self.encoder.template) else "none",
            "call": options.call,
        }
        self.model: Any = None
        self.counts: Counter[str] = Counter()
        self._last_encoded: dict[int, Any] = {}  # the last chats() call's inputs, by request
        self._start_unscored()

    def fingerprint(self) -> str:
        """Hash of everything that changes scores (weights/commit, remote code, dtype, inputs)."""
        return fingerprint_of(self.description)

    def _load(self) -> Any:
        if self.model is not None:
            return self.model
        import torch
        from transformers import AutoModel

        o = self.options
        model = AutoModel.from_pretrained(
            o.pretrained, revision=o.revision, dtype=getattr(torch, self.dtype_name),
            trust_remote_code=True,
        )
        reward_id = getattr(model.config, "reward_token_id", None)
        if not callable(getattr(model, "get_score", None)) or not isinstance(reward_id, int):
            raise TypeError(
                f"{o.pretrained}: the model ({type(model).__name__}) has no get_score(tokenizer, "
                "chat) method or no config.reward_token_id; is this an InternLM2-Reward checkpoint?"
            )
        self.model = model.to(self.device).eval()
        return self.model

    def chats(
        self, requests: Sequence[ScoreRequest]
    ) -> tuple[list[list[dict[str, str]] | None], list[int]]:
        """The chat each request is scored on (fitted to ``max_length``) and its token count.

        A request whose answer alone does not fit gets ``None`` (and 0 tokens): it is not scored,
        its reason is kept (:meth:`failures`).
        """
        for i, r in enumerate(requests):
            for field in ("question", "response"):
                if not isinstance(getattr(r, field), str):
                    raise TypeError(
                        f"request {i} (record {r.record_id!r}): {field} must be a string"
                    )
        profiles = profile_texts(self.encoder, requests)
        encoded = self._encode(requests, profiles)
        chats: list[list[dict[str, str]] | None] = []
        lengths = []
        position = self.options.profile_position
        self._last_invalid = {}
        self._last_encoded = {id(r): e for r, e in zip(requests, encoded, strict=True)}
        for r, e, shown in zip(requests, encoded, profiles, strict=True):
            if e.invalid:
                self._last_invalid[id(r)] = e.invalid
                self.counts["invalid_too_long"] += 1
                self._failures.append(
                    {"item": r.record_id, "stage": "encode", "reason": "too-long",
                     "detail": e.invalid}
                )
                chats.append(None)
                lengths.append(0)
                continue
            question = r.question
            profile = shown if position != "none" else ""
            if e.truncated == "profile":
                profile = profile[: len(profile) - e.removed_chars].rstrip()
            elif e.truncated == "question":
                question = question[: len(question) + len(profile) - e.removed_chars].rstrip()
                profile = ""
            if e.truncated:
                self.counts[f"truncated_{e.truncated}"] += 1
            chats.append(
                build_chat(
                    question, r.response, profile, position=position,
                    user_format=self.options.effective_user_format,
                    system_format=self.options.system_format,
                )
            )
            lengths.append(len(e.ids) + 1)
        return chats, lengths

    def _encode(self, requests: Sequence[ScoreRequest], profiles: list[str]) -> list[Any]:
        """The encoder's inputs of the requests (the chats, rendered, fitted, tokenised)."""
        return list(self.encoder.encode(
            [r.question for r in requests], [r.response for r in requests],
            profiles, names=[r.record_id for r in requests],
        ))

    def request_inputs(self, requests: Sequence[ScoreRequest], *, sent: bool
                       ) -> list[dict[str, Any] | None]:
        """The input as scored of each request: the rendered chat, its cut, the profile's span.

        ``tokens`` and ``tokens_full`` count the reward token the model reads, after the chat's
        ids. An answer too long to score has ``tokens`` 0.

        Args:
            requests: the requests of the last :meth:`score` call (``sent=True``: the inputs it
                built), or score-cache hits (``sent=False``: built now, nothing scored).
            sent: which of the two.
        """
        requests = list(requests)
        if sent:
            encoded = kept_inputs(self._last_encoded, requests)
            if encoded is None:
                return [None] * len(requests)
        else:  # encoded again, no counts or failures recorded
            encoded = self._encode(requests, profile_texts(self.encoder, requests))
        records = encoded_records(self.encoder, encoded,
                                  shown_profiles(self.encoder, requests))
        for record, e in zip(records, encoded, strict=True):
            record["tokens"] = record["tokens"] + 1 if e.ids else 0
            record["tokens_full"] += 1
        return list(records)

    def input_ids(self, chat: list[dict[str, str]], reward_token_id: int) -> list[int]:
        """The ids ``get_score`` scores: template text, no special tokens, then the reward token.

        Args:
            chat: the messages.
            reward_token_id: the checkpoint's reward token (``config.reward_token_id``).

        Returns:
            The token ids, the reward token last.
        """
        text = self.tokenizer.apply_chat_template(
            chat, chat_template=self.encoder.template, tokenize=False, add_generation_prompt=False
        )
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return [*ids, reward_token_id]

    def score(self, requests: Sequence[ScoreRequest]) -> list[float]:
        """One reward per request, in request order (``nan`` for an answer too long to score)."""
        requests = list(requests)
        if not requests:
            return []
        all_chats, all_lengths = self.chats(requests)
        keep = [i for i, chat in enumerate(all_chats) if chat is not None]
        scores = [math.nan] * len(requests)
        if keep:
            kept = self._score_chats(
                [all_chats[i] for i in keep],  # type: ignore[misc]
                [all_lengths[i] for i in keep],
            )
            for i, value in zip(keep, kept, strict=True):
                scores[i] = value
        self.counts["requests"] += len(requests)
        return scores  # the scorer runtime checks the count and the values

    def _score_chats(self, chats: list[list[dict[str, str]]], lengths: list[int]) -> list[float]:
        """The rewards of fitted chats (``lengths``: their token counts, reward token included)."""
        import torch

        from prbench.api import BatchStats, run_batches

        model = self._load()
        if self.options.call == "get_score":

            def forward(batch: list[int]) -> list[float]:
                out = []
                with torch.inference_mode():
                    for i in batch:
                        reward = model.get_score(self.tokenizer, chats[i], use_cache=False)
                        out.append(float(reward))
                self.counts["get_score_calls"] += len(batch)
                return out

            budget, most = self.options.batch_tokens, 1
        else:
            reward_id = int(model.config.reward_token_id)
            pad_id = self.tokenizer.pad_token_id
            pad_id = reward_id if pad_id is None else int(pad_id)
            ids = [self.input_ids(chat, reward_id) for chat in chats]
            lengths = [len(row) for row in ids]

            def forward(batch: list[int]) -> list[float]:
                width = max(lengths[i] for i in batch)
                rows = torch.full((len(batch), width), pad_id, dtype=torch.long)
                mask = torch.zeros((len(batch), width), dtype=torch.bool)
                for r, i in enumerate(batch):  # right padding after the reward token
                    rows[r, : lengths[i]] = torch.tensor(ids[i], dtype=torch.long)
                    mask[r, : lengths[i]] = True
                with torch.inference_mode():
                    out = model(
                        input_ids=rows.to(self.device), attention_mask=mask.to(self.device),
                        use_cache=False, return_dict=False,
                    )[0]
                self.counts["forward_calls"] += 1
                return out.float().reshape(-1).cpu().tolist()

            budget, most = self.options.batch_tokens, self.options.batch_size

        stats = BatchStats()  # the scorer runtime shows the progress bar
        scores = run_batches(
            lengths, forward, token_budget=budget, max_batch_size=most, stats=stats,
        )
        self.counts["oom_retries"] += stats.oom_retries
        bad = [i for i, s in enumerate(scores) if not math.isfinite(s)]
        if bad:
            raise RuntimeError(f"{self.component}: non-finite reward for request {bad[0]}")
        return scores

    def stats(self) -> dict[str, int]:
        """Counts so far: requests, forward / get_score calls, truncations, OOM retries."""
        return dict(self.counts)

    def describe(self) -> dict[str, Any]:
        """Settings for the results manifest: checkpoint + commit, remote-code hashes, dtype."""
        from prbench.api import options_to_dict

        return {
            "component": self.component,
            "fingerprint": self.fingerprint(),
            "options": options_to_dict(self.options),
            "settings": self.description,
            "resolved": {"device": str(self.device), "dtype": self.dtype_name},
            "stats": self.stats(),
        }
