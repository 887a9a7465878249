"""``rubric-contrast``: the published recipe for personalised pairs, with checks.

For each source record a generator LLM writes two answers to the question, both tailored to the
user's past posts (picked by a profile builder, default ``dense``) and both at most
``answer_words`` words:

- **chosen** is told the aspects the user expects (the gold rubric) and asked to cover them;
- **rejected** is told the same aspects and asked to leave them out while staying accurate,
  helpful and suited to the user's style.

The pair then goes through :class:`prbench.pairs.filters.PairFilter` (both answers non-empty,
word counts within ``min_length_ratio``, the rejected answer must not mention the aspects;
optionally the rubric judge confirms). An answer the backend could not generate (see
:class:`~prbench.backends.base.GenerationFailure`) marks the pair ``generation-failed``, with the
backend's reason in its metrics: ``prbench build`` leaves it for the next run. Sampling is seeded;
with the ``hf`` backend each chat's sample depends only on the model, the chat and the settings,
not on the batch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from prbench.judges import prompts
from prbench.judges.common import (
    MOST_TOKENS,
    BackendOptions,
    build_component,
    generate_in_batches,
    resolve_backend,
)
from prbench.judges.parsing import ParseFailure, clean_answer
from prbench.options import options_to_dict
from prbench.pairs.base import GENERATION_FAILED, PairOutcome
from prbench.pairs.filters import FilterOptions, PairFilter
from prbench.profiles.base import build_views

if TYPE_CHECKING:
    from prbench.backends.base import GenerationBackend
    from prbench.judges.rubric import RubricJudge
    from prbench.profiles.base import ProfileBuilder
    from prbench.records import Record

#: Options that do not change what is generated (left out of the resume check).
VOLATILE_OPTIONS = frozenset(
    {"device", "batch_size", "max_concurrency", "timeout", "max_retries", "cache_dir",
     "api_key_env"}
)


@dataclasses.dataclass(frozen=True)
class RubricContrastOptions(FilterOptions, BackendOptions):
    """Options of ``rubric-contrast``: backend, decoding, profile, prompt and filter settings."""

    profile_builder: str = dataclasses.field(
        default="dense",
        metadata={"help": "profile-builder id choosing the posts the generator is shown"},
    )
    profile_builder_options: dict[str, Any] = dataclasses.field(
        default_factory=dict,
        metadata={"help": 'its options as JSON, e.g. {"k": 10, "model": "minilm"}'},
    )
    answer_words: int = dataclasses.field(
        default=100, metadata={"help": "word limit stated in the generation prompts", "ge": 1,
                               "le": 100_000}
    )
    include_reasons: bool = dataclasses.field(
        default=True, metadata={"help": "tell the chosen prompt why each aspect matters"}
    )
    max_new_tokens: int = dataclasses.field(
        default=256, metadata={"help": "tokens per answer", "ge": 1, "le": MOST_TOKENS})
    temperature: float = dataclasses.field(
        default=0.7, metadata={"help": "sampling temperature (0 = greedy)", "ge": 0, "le": 100}
    )
    top_p: float = dataclasses.field(
        default=0.9, metadata={"help": "nucleus mass when sampling", "gt": 0, "le": 1})
    judge_model: str = dataclasses.field(
        default="", metadata={"help": "rubric judge model for judge_check ('' = the generator)"}
    )
    judge_gguf_file: str = dataclasses.field(
        default="", metadata={"help": "GGUF file inside judge_model (hf)"}
    )

    def __post_init__(self) -> None:
        BackendOptions.__post_init__(self)
        FilterOptions.__post_init__(self)
        if self.answer_words < 1:
            raise ValueError("answer_words must be at least 1")


class RubricContrastGenerator:
    """Implements :class:`prbench.pairs.base.PairGenerator` with the published recipe.

    Args:
        options: the generator's options.
        backend: a ready generation backend; built from ``options`` otherwise.
        profile_builder: a ready profile builder; resolved from ``options.profile_builder``
            through the plugin registry otherwise.
        judge: a ready rubric judge for ``judge_check``; built from the options otherwise.
    """

    name = "rubric-contrast"

    def __init__(
        self,
        options: RubricContrastOptions,
        backend: GenerationBackend | None = None,
        profile_builder: ProfileBuilder | None = None,
        judge: RubricJudge | None = None,
    ) -> None:
        self.options = options
        self.backend = resolve_backend(options, backend, self.name)
        self._profile_builder = profile_builder
        if options.judge_check and judge is None:
            judge = self._build_judge()
        self.filter = PairFilter(options, judge)

    def _build_judge(self) -> RubricJudge:
        from prbench.judges.rubric import RubricJudge, RubricJudgeOptions

        o = self.options
        shared = {
            f.name: getattr(o, f.name)
            for f in dataclasses.fields(BackendOptions)
            if f.name not in ("temperature", "top_p", "max_new_tokens")
        }
        judge_options = RubricJudgeOptions(**shared, temperature=0.0, max_new_tokens=512,
                                           on_failure="nan")
        if not o.judge_model:
            return RubricJudge(judge_options, backend=self.backend)
        judge_options = dataclasses.replace(
            judge_options, model=o.judge_model, gguf_file=o.judge_gguf_file
        )
        return RubricJudge(judge_options)

    @property
    def profile_builder(self) -> ProfileBuilder:
        """The builder that picks the posts shown to the generator (resolved on first use)."""
        if self._profile_builder is None:
            self._profile_builder = build_component(
                "profile-builder",
                self.options.profile_builder,
                self.options.profile_builder_options,
                f"{self.name} (option `profile_builder`)",
            )
        return self._profile_builder

    def settings(self) -> dict[str, Any]:
        """Options that change the output, the backend fingerprint and the prompt version."""
        options = {
            k: v for k, v in options_to_dict(self.options).items() if k not in VOLATILE_OPTIONS
        }
        judge = self.filter.judge
        return {
            "generator": self.name,
            "options": options,
            "backend": self.backend.fingerprint,
            "judge_backend": judge.backend.fingerprint if judge is not None else None,
            "prompt_version": prompts.PROMPT_VERSION,
        }

    def _aspects(self, record: Record) -> list[tuple[str, str]]:
        return [
            (a.aspect, a.reason if self.options.include_reasons else "")
            for a in record.rubric_aspects
        ]

    def generate(self, records: Sequence[Record]) -> list[PairOutcome]:
        """Write, clean and check one pair per record.

        Raises:
            ValueError: a record has no rubric aspects, or the profile builder is unavailable.
        """
        o = self.options
        for r in records:
            if not r.rubric_aspects:
                raise ValueError(f"{self.name}: record {r.id!r} has no rubric aspects")
        what = f"{self.name}: profile builder {o.profile_builder!r}"
        views = build_views(self.profile_builder, records, what) if records else []
        chats = []
        for record, view in zip(records, views, strict=True):
            aspects = self._aspects(record)
            chats.append(prompts.chosen_chat(record.question, view.text, aspects, o.answer_words))
            chats.append(
                prompts.rejected_chat(record.question, view.text, aspects, o.answer_words)
            )
        replies = generate_in_batches(  # cut answers go to the drop_unfinished filter
            self.backend, chats, o.generation_config(), o.batch_size, keep_failures=True,
            truncated_is_failure=False,
        )
        outcomes: list[PairOutcome] = []
        items = []
        for i, record in enumerate(records):
            raw_chosen, raw_rejected = replies[2 * i], replies[2 * i + 1]
            metrics: dict[str, Any] = {"profile_posts": [p.id for p in views[i].items]}
            answers = []
            reasons: list[str] = []
            for side, raw in (("chosen", raw_chosen), ("rejected", raw_rejected)):
                cleaned = clean_answer(raw)
                if isinstance(cleaned, ParseFailure):
                    metrics[f"{side}_failure"] = cleaned.reason
                    if cleaned.reason == GENERATION_FAILED:
                        metrics[f"{side}_failure_detail"] = cleaned.detail
                        if not reasons:
                            reasons.append(GENERATION_FAILED)
                    answers.append("")
                else:
                    answers.append(cleaned)
            outcomes.append(
                PairOutcome(
                    record_id=record.id,
                    chosen=answers[0],
                    rejected=answers[1],
                    reasons=reasons,
                    metrics=metrics,
                    raw={"chosen": str(raw_chosen), "rejected": str(raw_rejected)},
                )
            )
            items.append((answers[0], answers[1], record.rubric_aspects, record.question))
        for outcome, check in zip(outcomes, self.filter.check(items), strict=True):
            outcome.reasons.extend(check.reasons)
            outcome.metrics.update(check.metrics)
        return outcomes
