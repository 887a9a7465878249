"""Built-in Hugging Face reward models.

- ``hf-classifier``: any ``AutoModelForSequenceClassification`` reward model (hub id with revision,
  or a local folder), scored through its chat template with exactly one BOS, length-sorted
  token-budgeted batches and prefix sharing, or exactly as the released pointwise script does
  (``input_format=released``); its ``fingerprint()`` lets the scorer runtime cache its scores
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
        description="HF sequence-classifier reward model (chat template, one BOS, or the "
                    "released script's input with input_format=released)",
        tags=("pointwise", "hf"),
    )
