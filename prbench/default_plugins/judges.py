"""Built-in LLM components: judges, the planner profile condition and the pair generator.

- ``llm-judge`` (pairwise): an LLM picks the answer that suits the user better, in both orders.
- ``llm-rating``: an LLM grades each answer 0-10 for the user (pointwise; usable for Best-of-N).
- ``rubric-judge``: DIAGNOSTIC -- scores an answer 0/1/2 on each gold rubric aspect (downstream
  quality); it reads the hidden rubric, so it is never a reward model under test.
- ``planner`` (profile builder): the RM sees the aspects an LLM infers from retrieved posts.
- ``rubric-contrast`` (pair generator): chosen/rejected pairs from rubric records.

Registration imports only option dataclasses; models load when a component is built.
"""

from __future__ import annotations

from prbench.hookspecs import hookimpl
from prbench.judges.pairwise import LLMJudgeOptions
from prbench.judges.planner import PlannerOptions
from prbench.judges.rating import LLMRatingOptions
from prbench.judges.rubric import RubricJudgeOptions
from prbench.pairs.generator import RubricContrastOptions


@hookimpl
def register_scorers(register) -> None:
    """Register the LLM judges."""
    register(
        "llm-judge", "prbench.judges.pairwise:LLMPairwiseJudge", options=LLMJudgeOptions,
        tags=("pairwise",),
        description="LLM picks the answer that suits the user better (both orders, strict parse)",
    )
    register(
        "llm-rating", "prbench.judges.rating:LLMRatingScorer", options=LLMRatingOptions,
        description="LLM grades each answer 0-10 for the user (nan when unreadable)",
    )
    register(
        "rubric-judge", "prbench.judges.rubric:RubricJudge", options=RubricJudgeOptions,
        diagnostic=True,
        description="DIAGNOSTIC: LLM scores each gold rubric aspect 0/1/2 (downstream quality)",
    )


@hookimpl
def register_profile_builders(register) -> None:
    """Register the planner profile condition."""
    register(
        "planner", "prbench.judges.planner:PlannerProfileBuilder", options=PlannerOptions,
        description="aspects the user will expect, inferred by an LLM from retrieved posts",
    )


@hookimpl
def register_pair_generators(register) -> None:
    """Register the rubric-contrast pair generator."""
    register(
        "rubric-contrast", "prbench.pairs.generator:RubricContrastGenerator",
        options=RubricContrastOptions,
        description="chosen covers the user's rubric, rejected avoids it; length/leak checks",
    )
