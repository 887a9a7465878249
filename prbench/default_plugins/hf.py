"""Built-in Hugging Face reward models.

- ``hf-classifier``: any ``AutoModelForSequenceClassification`` reward model (hub id with revision,
  or a local folder), scored through its chat template with exactly one BOS, length-sorted
  token-budgeted batches and prefix sharing, or exactly as the released pointwise script does
  (``input_format=released``); its ``fingerprint()`` lets the scorer runtime cache its scores
  (:mod:`prbench.backends.hf_classifier`).
- ``served-rm``: the same reward model served by a running vLLM or SGLang server (``/pooling`` or
  ``/classify``), fed token ids rendered here as ``hf-classifier`` renders them
  (:mod:`prbench.backends.served_rm`).

Registering imports neither torch nor transformers; they load when a scorer is built.
"""

from __future__ import annotations

from prbench.backends.hf_classifier_options import HFClassifierOptions
from prbench.backends.served_rm import ServedRMOptions
from prbench.hookspecs import hookimpl


@hookimpl
def register_scorers(register) -> None:
    """Register ``hf-classifier`` and ``served-rm``."""
    register(
        "hf-classifier",
        "prbench.backends.hf_classifier:HFClassifierScorer",
        options=HFClassifierOptions,
        description="HF sequence-classifier reward model (chat template, one BOS, or the "
                    "released script's input with input_format=released)",
        tags=("pointwise", "hf"),
    )
    register(
        "served-rm",
        "prbench.backends.served_rm:ServedRMScorer",
        options=ServedRMOptions,
        description="reward model served by vLLM (/pooling, /classify) or SGLang (/classify); "
                    "chat rendered locally as hf-classifier renders it, sent as token ids",
        tags=("pointwise", "served"),
    )
