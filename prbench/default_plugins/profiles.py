"""Built-in profile builders: ``none``, ``all``, ``dense``, ``bm25`` and ``ranked``.

Registration is cheap: the option dataclasses come from modules that import no model library;
``bm25s``, ``torch``, ``transformers`` and ``sentence_transformers`` load when a builder is built.
"""

from __future__ import annotations

from prbench.hookspecs import hookimpl
from prbench.profiles.bm25 import BM25Options
from prbench.profiles.dense import DenseOptions
from prbench.profiles.ranked import RankedOptions
from prbench.profiles.simple import AllPostsOptions


@hookimpl
def register_profile_builders(register) -> None:
    """Register the built-in profile builders."""
    register(
        "none", "prbench.profiles.simple:NoneBuilder",
        description="no profile (the question-only condition)",
    )
    register(
        "all", "prbench.profiles.simple:AllPostsBuilder", options=AllPostsOptions,
        description="every post in the given order, up to a token budget",
    )
    register(
        "dense", "prbench.profiles.dense:DenseBuilder", options=DenseOptions,
        description="top-k posts by embedding similarity to the question (MiniLM, contriever, ...)",
    )
    register(
        "bm25", "prbench.profiles.bm25:BM25Builder", options=BM25Options,
        description="top-k posts by BM25 against the question (bm25s)",
    )
    register(
        "ranked", "prbench.profiles.ranked:RankedBuilder", options=RankedOptions,
        description="top-k posts from a `prbench rank` file (dense ranked once, read anywhere)",
    )
