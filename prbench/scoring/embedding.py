"""The ``embedding-similarity`` baseline scorer.

Scores an answer by the cosine similarity between its embedding and the embedding of a query made
from the question and (by default) the profile view of the task condition. It is a cheap,
non-generative baseline: it rewards answers that talk about what the question and the user's
posts talk about, with no notion of quality. It shares the encoder and on-disk embedding cache of
the ``dense`` profile builder (:mod:`prbench.profiles.embed`).

The query puts the question first by default (``query=question+profile``): sentence embedders
truncate (MiniLM at 256 tokens), and a profile placed first would push the question out of the
window on all but the shortest profiles.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, Literal

from prbench.profiles.embed import EncoderKind
from prbench.profiles.encoder_options import EmbedThreads, EncoderOptions, encoder_option
from prbench.scoring.base import ScoreRequest

QUERY_MODES = ("question+profile", "profile+question", "question")
SEPARATOR = "\n\n"


@dataclasses.dataclass(frozen=True)
class EmbeddingSimilarityOptions(EncoderOptions):
    """Options of the ``embedding-similarity`` scorer."""

    model: str = encoder_option("model")
    pretrained: str | None = dataclasses.field(
        default=None,
        metadata={"help": "lm-eval style synonym of model (pretrained=...); wins when given"},
    )
    encoder: EncoderKind = encoder_option("encoder")  # noqa: RUF009 (returns a dataclasses.field)
    revision: str | None = encoder_option("revision")
    query: Literal["question+profile", "profile+question", "question"] = dataclasses.field(
        default="question+profile",
        metadata={"help": "the text compared with the answer: question then profile, profile "
                          "then question, or the question only"},
    )
    max_length: int | None = encoder_option("max_length")
    batch_size: int | None = encoder_option("batch_size")
    device: str = encoder_option("device")
    embed_cache: bool = encoder_option("embed_cache")
    cache_dir: str | None = encoder_option("cache_dir")
    trust_remote_code: bool = encoder_option("trust_remote_code")
    # a score must not depend on the batch it was computed in: bf16 moves a score by ~1e-3 with
    # the batch's padding, so the scorer stays in fp32 unless asked (profiles rank in auto)
    embed_dtype: str = dataclasses.field(
        default="float32",
        metadata={"help": "float32 | bfloat16 | bfloat16-weights | auto (auto = bf16 autocast "
                          "on a CPU with AMX); float32 by default: bf16 "
                          "scores move by ~1e-3 with the batch's padding"},
    )
    embed_backend: str = encoder_option("embed_backend")
    embed_threads: EmbedThreads = encoder_option(  # noqa: RUF009 (it returns a field)
        "embed_threads")

    def __post_init__(self) -> None:
        if self.pretrained is not None and self.model != "minilm" and self.pretrained != self.model:
            raise ValueError(
                f"options 'model' ({self.model!r}) and 'pretrained' ({self.pretrained!r}) name "
                "different models; give one of them"
            )
        self.check_encoder_options()

    @property
    def model_name(self) -> str:
        """The model to use (``pretrained`` when given, else ``model``)."""
        return self.pretrained or self.model


def build_query(request: ScoreRequest, mode: str) -> str:
    """The query text of a request; an empty profile leaves the question alone."""
    profile = request.profile.text if request.profile is not None else ""
    if mode == "question" or not profile:
        return request.question
    if mode == "profile+question":
        return profile + SEPARATOR + request.question
    return request.question + SEPARATOR + profile


class EmbeddingSimilarityScorer:
    """cosine(embed(query), embed(answer)); higher means the answer is closer to the query.

    Raises:
        prbench.model_ref.ModelUnavailableError: the model cannot be found (at
            construction).
    """

    def __init__(self, options: EmbeddingSimilarityOptions | None = None) -> None:
        self.options = options or EmbeddingSimilarityOptions()
        self.encoder = self.options.make_encoder(self.options.model_name)

    def score(self, requests: Sequence[ScoreRequest]) -> list[float]:
        """One cosine in [-1, 1] per request, in request order (batch-size independent)."""
        import numpy as np

        requests = list(requests)
        if not requests:
            return []
        for i, r in enumerate(requests):
            if not isinstance(r.response, str):
                raise TypeError(
                    f"request {i} (record {r.record_id!r}): response is a "
                    f"{type(r.response).__name__}, not a string"
                )
        queries = [build_query(r, self.options.query) for r in requests]
        vectors = self.encoder.encode(queries + [r.response for r in requests]).astype(np.float64)
        q, a = vectors[: len(requests)], vectors[len(requests) :]
        norms = np.maximum(np.linalg.norm(q, axis=1) * np.linalg.norm(a, axis=1), 1e-12)
        return [float(x) for x in (q * a).sum(axis=1) / norms]

    def request_inputs(self, requests: Sequence[ScoreRequest], *, sent: bool
                       ) -> list[dict[str, Any]]:
        """The input as scored (:mod:`prbench.scoring.inputs`): the two texts embedded.

        The query (question and profile, as ``query`` puts them) and the answer, as two
        messages with the roles ``query`` and ``answer``; no token counts (the encoder's own
        truncation is not re-run here).
        """
        return [{"messages": [{"role": "query", "content": build_query(r, self.options.query)},
                              {"role": "answer", "content": str(r.response)}]}
                for r in requests]
