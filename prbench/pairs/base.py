"""The pair-generator protocol: source records in, checked chosen/rejected pairs out.

A pair generator (registered with ``register_pair_generators``) turns source records -- question,
profile, narrative, rubric, no answers (see :mod:`prbench.pairs.source`) -- into one
:class:`PairOutcome` per record: the two answers and whether they passed its checks, with the
reasons when they did not. ``prbench build`` (:mod:`prbench.pairs.build`) drives any generator:
it batches records, writes kept pairs append-only, keeps dropped ones with their reasons, resumes
after a crash and reports.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from prbench.records import Record

#: The reason code of a pair the backend could not generate (or judge) for this record: a
#: transient failure, so ``prbench build`` writes nothing for it and the next run tries again.
GENERATION_FAILED = "generation-failed"


@dataclasses.dataclass
class PairOutcome:
    """What a generator made of one source record.

    Attributes:
        record_id: the source record's id.
        chosen: the answer that covers the rubric ("" when none could be made).
        rejected: the answer that avoids it ("" when none could be made).
        reasons: why the pair is dropped (reason codes); empty when it is kept.
            :data:`GENERATION_FAILED` among them means "not made yet", not "dropped".
        metrics: numbers behind the checks (word counts, leak scores, ...), written with the pair.
        raw: the generator's raw replies, kept for dropped pairs so they can be inspected.
    """

    record_id: str
    chosen: str
    rejected: str
    reasons: list[str] = dataclasses.field(default_factory=list)
    metrics: dict[str, Any] = dataclasses.field(default_factory=dict)
    raw: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def kept(self) -> bool:
        """True when every check passed."""
        return not self.reasons


@runtime_checkable
class PairGenerator(Protocol):
    """Makes chosen/rejected pairs from source records."""

    def settings(self) -> dict[str, Any]:
        """Everything that changes the output (options, model fingerprint, prompt version).

        ``prbench build`` stores it next to the output and refuses to resume with other settings.
        """
        ...

    def generate(self, records: Sequence[Record]) -> list[PairOutcome]:
        """One outcome per record, in order; a function of the records and the settings only."""
        ...
