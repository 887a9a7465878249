"""Personalised pair generation: source records (question, profile, rubric) -> chosen/rejected.

See :mod:`prbench.pairs.generator` for the ``rubric-contrast`` recipe, :mod:`prbench.pairs.filters`
for the checks, and :mod:`prbench.pairs.build` for the resumable ``prbench build`` engine.
"""

from prbench.pairs.base import PairGenerator, PairOutcome

__all__ = ["PairGenerator", "PairOutcome"]
