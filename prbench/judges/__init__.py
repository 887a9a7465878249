"""LLM judges: prompts, strict reply parsers, and the pairwise, rating and rubric-aspect judges.

Importing this package is cheap; a judge builds its model backend only when it is constructed.
"""

from prbench.judges.parsing import (
    ParseFailure,
    parse_aspect_scores,
    parse_pairwise,
    parse_plan,
    parse_rating,
)

__all__ = [
    "ParseFailure",
    "parse_aspect_scores",
    "parse_pairwise",
    "parse_plan",
    "parse_rating",
]
