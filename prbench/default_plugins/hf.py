"""Built-in Hugging Face reward models.

- ``hf-classifier``: any ``AutoModelForSequenceClassification`` reward model (hub id with revision,
  or a local folder), scored through its chat template with exactly one BOS, length-sorted
  token-budgeted batches, prefix sharing and the persistent score cache
  (:mod:`prbench.backends.hf_classifier`).

Registering imports neither torch nor transformers; they load when a scorer is built.
"""

from __future__ import annotations

from prbench.backends.hf_classifier import HFClassifierOptions
from prbench.hookspecs import hookimpl


@hookimpl
def register_scorers(register) -> None:
    """Register ``hf-classifier``."""
    register(
        "hf-classifier",
        "prbench.backends.hf_classifier:HFClassifierScorer",
        options=HFClassifierOptions,
        description="HF sequence-classifier reward model (chat template, one BOS, cached)",
        tags=("pointwise", "hf"),
    )
