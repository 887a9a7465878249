"""The built-in ``embedding-similarity`` baseline scorer.

Registration imports only the options dataclass; the encoder's model libraries load when the
scorer is built.
"""

from __future__ import annotations

from prbench.hookspecs import hookimpl
from prbench.scoring.embedding import EmbeddingSimilarityOptions


@hookimpl
def register_scorers(register) -> None:
    """Register the embedding-similarity scorer."""
    register(
        "embedding-similarity", "prbench.scoring.embedding:EmbeddingSimilarityScorer",
        options=EmbeddingSimilarityOptions, tags=("baseline",),
        description="cosine of the answer's embedding with the question (+ profile) embedding",
    )
