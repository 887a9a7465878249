"""Scorer protocols, the batching engine and the score cache."""

from prbench.scoring.base import PairRequest, PairwiseJudge, Scorer, ScoreRequest, ScorerExtras

__all__ = ["PairRequest", "PairwiseJudge", "ScoreRequest", "Scorer", "ScorerExtras"]
