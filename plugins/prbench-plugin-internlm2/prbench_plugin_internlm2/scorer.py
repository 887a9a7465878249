"""The ``internlm2-reward`` scorer: batches of chats through the checkpoint's ``get_scores``.

InternLM2-Reward is loaded with ``AutoModel`` and the checkpoint's own code. That code renders a
chat with the tokenizer's chat template, encodes it without special tokens (the template writes
the BOS), appends the reward token and reads its value head there. prbench does not re-implement
any of that: it builds the chats (with the profile where ``profile_position`` puts it), cuts the
profile of over-long chats (then the question, never the answer), sorts chats by length and calls
``model.get_scores(tokenizer, chats)`` on token-budgeted batches.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prbench.backends.chat_inputs import ChatEncoder, build_chat, template_sha256
from prbench.backends.hf_classifier import model_identity, resolve_dtype
from prbench.devices import torch_device
from prbench.scoring.base import ScoreRequest, check_scores
from prbench.scoring.cache import fingerprint_of
from prbench_plugin_internlm2.plugin import InternLM2RewardOptions

#: Bump when a change alters scores for the same options.
SCORER_VERSION = 1


def _remote_code_files(pretrained: str) -> dict[str, str]:
    """SHA-256 (short) of every ``*.py`` shipped in a local checkpoint folder."""
    path = Path(pretrained).expanduser()
    if not path.is_dir():
        return {}
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()[:16] for p in sorted(path.glob("*.py"))
    }


class InternLM2RewardScorer:
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
        self.dtype_name = resolve_dtype(options.dtype, self.device)
        self.tokenizer = AutoTokenizer.from_pretrained(
            options.pretrained, revision=options.revision, trust_remote_code=True
        )
        # the reward token takes one position: chats are fitted into max_length - 1 tokens
        self.encoder = ChatEncoder(
            self.tokenizer, max_length=options.max_length - 1, position=options.profile_position,
            user_format=options.user_format, system_format=options.system_format,
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
            "chat_template": template_sha256(self.encoder.template),
        }
        self.model: Any = None
        self.counts: Counter[str] = Counter()

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
        if not callable(getattr(model, "get_scores", None)):
            raise TypeError(
                f"{o.pretrained}: the model ({type(model).__name__}) has no get_scores(tokenizer, "
                "chats) method; is this an InternLM2-Reward checkpoint?"
            )
        self.model = model.to(self.device).eval()
        return self.model

    def chats(
        self, requests: Sequence[ScoreRequest]
    ) -> tuple[list[list[dict[str, str]]], list[int]]:
        """The chat each request is scored on (fitted to ``max_length``) and its token count."""
        for i, r in enumerate(requests):
            for field in ("question", "response"):
                if not isinstance(getattr(r, field), str):
                    raise TypeError(
                        f"request {i} (record {r.record_id!r}): {field} must be a string"
                    )
        encoded = self.encoder.encode(
            [r.question for r in requests], [r.response for r in requests],
            [r.profile.text for r in requests], names=[r.record_id for r in requests],
        )
        chats, lengths = [], []
        position = self.options.profile_position
        for r, e in zip(requests, encoded, strict=True):
            question = r.question
            profile = r.profile.text if position != "none" else ""
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
                    user_format=self.options.user_format,
                    system_format=self.options.system_format,
                )
            )
            lengths.append(len(e.ids) + 1)
        return chats, lengths

    def score(self, requests: Sequence[ScoreRequest]) -> list[float]:
        """One reward per request, in request order."""
        import torch

        from prbench.scoring.engine import BatchStats, run_batches

        requests = list(requests)
        if not requests:
            return []
        chats, lengths = self.chats(requests)
        model = self._load()

        def forward(batch: list[int]) -> list[float]:
            with torch.inference_mode():
                out = model.get_scores(self.tokenizer, [chats[i] for i in batch])
            out = [out] if isinstance(out, int | float) else list(out)
            if len(out) != len(batch):
                raise RuntimeError(
                    f"get_scores returned {len(out)} scores for {len(batch)} chats"
                )
            self.counts["get_scores_calls"] += 1
            return [float(s) for s in out]

        stats = BatchStats()  # the scorer runtime shows the progress bar
        scores = run_batches(
            lengths, forward, token_budget=self.options.batch_tokens,
            max_batch_size=self.options.batch_size, stats=stats,
        )
        self.counts["requests"] += len(requests)
        self.counts["oom_retries"] += stats.oom_retries
        bad = [i for i, s in enumerate(scores) if not math.isfinite(s)]
        if bad:
            raise RuntimeError(f"{self.component}: non-finite reward for request {bad[0]}")
        return check_scores(scores, len(requests), self.component)

    def stats(self) -> dict[str, int]:
        """Counts so far: requests, get_scores calls, truncations, OOM retries."""
        return dict(self.counts)

    def describe(self) -> dict[str, Any]:
        """Settings for the results manifest: checkpoint + commit, remote-code hashes, dtype."""
        from prbench.options import options_to_dict

        return {
            "component": self.component,
            "fingerprint": self.fingerprint(),
            "options": options_to_dict(self.options),
            "settings": self.description,
            "resolved": {"device": str(self.device), "dtype": self.dtype_name},
            "stats": self.stats(),
        }
