"""``synthesizeme`` (pairwise judge) and ``synthesizeme-rating`` (pointwise).

Persona fitting (profile mode, and the preference method: verified bootstrapped reasoning, persona
induction, demonstration search) lives in :mod:`prbench_plugin_synthesizeme.fitting`; personas
are cached on disk (:mod:`prbench_plugin_synthesizeme.personas`).

Judging: each pair in both orders (``orders=one``: a seeded single order). An order whose reply has
no readable ``[[A]]``/``[[B]]`` verdict (after ``parse_retries`` retries), or whose persona could
not be induced, gives no verdict; P(first) is the share of readable orders that preferred the
first answer, ``nan`` when none did. Split orders give 0.5, which the harness scores as a tie --
wrong, never a half win.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from prbench.api import (
    OrderTally,
    PairRequest,
    ParseFailure,
    ScoreRequest,
    fingerprint_of,
    parse_pairwise,
    parse_rating,
)
from prbench_plugin_synthesizeme import prompts
from prbench_plugin_synthesizeme.fitting import (
    UNKNOWN_PERSONA,
    SynthesizeMeBase,
    parse_persona,
    seeded_order,
)
from prbench_plugin_synthesizeme.personas import Persona
from prbench_plugin_synthesizeme.plugin import AUTHORS_FIT_VERSION, SynthesizeMeRatingOptions

__all__ = ["UNKNOWN_PERSONA", "SynthesizeMeJudge", "SynthesizeMeRating", "parse_persona"]


class _SynthesizeMeBase(SynthesizeMeBase):
    """Fingerprint and description shared by both scorers (fitting: :mod:`.fitting`)."""

    # -- reporting -------------------------------------------------------------------------------

    def fingerprint(self) -> str:
        """Hash of what changes outputs: backend/model, prompts, fit mode and data, decoding."""
        o = self.options
        prefs = sorted((u, [[p.question, p.chosen, p.rejected] for p in ps])
                       for u, ps in self.preferences.by_user.items())
        users = sorted(self.preferences.user_of_record.items())
        return fingerprint_of({
            "component": self.name, "model": self._model(), "prompt_version":
            prompts.PROMPT_VERSION, "fit": o.fit, "orders": o.orders, "preferences": prefs,
            "users": users,
            "decoding": [o.max_new_tokens, o.persona_max_new_tokens, o.temperature, o.top_p,
                         o.seed],
            "demos": [o.demos, o.demo_candidates, o.val_fraction, o.split],
            "retries": [o.parse_retries, o.retry_temperature], "protocol": o.protocol,
            "authors_fit": AUTHORS_FIT_VERSION if o.protocol == "authors" else None,
            "scale": [getattr(o, "low", None), getattr(o, "high", None)],
        })

    def describe(self) -> dict[str, Any]:
        """Settings, counts, persona provenance and the fingerprint for the manifest."""
        out = super().describe()
        out.update(component=self.name, prompt_version=prompts.PROMPT_VERSION,
                   fingerprint=self.fingerprint(), model=self._model(),
                   n_users_with_preferences=len(self.preferences.by_user),
                   retry_temperatures=self.retry_temperatures())
        return out


class SynthesizeMeJudge(_SynthesizeMeBase):
    """The persona-conditioned pairwise judge (protocol: ``compare``)."""

    name = "synthesizeme"

    def reset_stats(self) -> None:
        """Forget the counts and details gathered so far."""
        super().reset_stats()
        self._tally = OrderTally()
        self._persona_failed = 0

    def _check_not_fitted_on(self, pair: PairRequest) -> None:
        for pref in self.user_pairs(pair.record_id):
            if pref.question.strip() == pair.question.strip() and {
                    pref.chosen.strip(), pref.rejected.strip()} == {pair.first.strip(),
                                                                    pair.second.strip()}:
                raise ValueError(
                    f"synthesizeme: the preferences of record {pair.record_id!r} contain the pair "
                    "under evaluation; a persona must never be fitted on the pair it judges"
                )

    def compare(self, pairs: Sequence[PairRequest]) -> list[float]:
        """P(first ≻ second) per pair; ``nan`` where no order gave a readable verdict."""
        o = self.options
        for p in pairs:
            self._check_not_fitted_on(p)
        personas = self.personas([(p.record_id, p.profile.text) for p in pairs])
        chats, plan = [], []
        for i, p in enumerate(pairs):
            persona = personas[p.record_id]
            if isinstance(persona, ParseFailure):
                continue
            orders = [True, False] if o.orders == "both" else [seeded_order(
                o.seed, p.record_id, p.first, p.second)]
            for first_is_a in orders:
                a, b = (p.first, p.second) if first_is_a else (p.second, p.first)
                chats.append(prompts.judge_chat(persona.persona, p.question, a, b, persona.demos))
                plan.append((i, first_is_a))
        items = [(pairs[i].record_id, {"step": "judge",
                                       "shown_first": "first" if first else "second"})
                 for i, first in plan]
        answers = self._ask(chats, parse_pairwise, items, persona=False, desc=self.name,
                            unit="verdict")
        per_pair: list[list[dict[str, Any]]] = [[] for _ in pairs]
        for (i, _), (_, where), (reply, verdict) in zip(plan, items, answers, strict=True):
            per_pair[i].append(self._tally.order(where["shown_first"], verdict, reply))
        out = []
        for p, orders in zip(pairs, per_pair, strict=True):
            persona_failed = isinstance(personas[p.record_id], ParseFailure)
            self._persona_failed += persona_failed
            out.append(self._tally.pair(p.record_id, orders, persona_failed=persona_failed))
        return out

    def stats(self) -> dict[str, Any]:
        """Counts since the last reset: pairs, invalid orders/pairs, position bias, personas.

        ``headline_metric`` names the number to report: ``acc_single_order`` under
        ``protocol=authors`` (the mean over all single-order verdicts, an unreadable one counting
        wrong: what the SynthesizeMe paper reports), strict ``acc`` otherwise; ``diagnostics``
        says so under ``prbench eval``'s summary.
        """
        authors = self.options.protocol == "authors"
        headline = "acc_single_order" if authors else "acc"
        lines = [f"synthesizeme: protocol={self.options.protocol}; headline metric {headline}"
                 + (" (the mean over every single-order verdict, unreadable = wrong, as the "
                    "SynthesizeMe paper reports; strict acc beside it)" if authors else "")]
        return {
            "judge": self.name, "backend": self.backend.fingerprint,
            "prompt_version": prompts.PROMPT_VERSION, "fit": self.options.fit,
            "protocol": self.options.protocol, "headline_metric": headline,
            "orders": self.options.orders, "seed": self.options.seed,
            **self._tally.stats(), "n_pairs_persona_failed": self._persona_failed,
            **self._fit_stats(), **self._stats_tail(), "diagnostics": lines,
        }

    def details(self) -> list[dict[str, Any]]:
        """One entry per judged pair: every order's verdict (or failure reason)."""
        return list(self._tally.details)


class SynthesizeMeRating(_SynthesizeMeBase):
    """The persona-conditioned rating of one answer (protocol: ``score``; for Best-of-N)."""

    name = "synthesizeme-rating"
    options: SynthesizeMeRatingOptions

    def score(self, requests: Sequence[ScoreRequest]) -> list[float]:
        """One grade per request; ``nan`` for an unreadable grade or a failed persona."""
        o = self.options
        personas = self.personas([(r.record_id, r.profile.text) for r in requests])
        chats, plan = [], []
        for i, r in enumerate(requests):
            persona = personas[r.record_id]
            if isinstance(persona, Persona):
                chats.append(prompts.rating_chat(persona.persona, r.question, r.response, o.low,
                                                 o.high))
                plan.append(i)
        out = [math.nan] * len(requests)

        def parse(text: str) -> float | ParseFailure:
            return parse_rating(text, low=o.low, high=o.high, integer=True)

        answers = self._ask(chats, parse, [(requests[i].record_id, {"step": "rating"})
                                           for i in plan], persona=False, desc=self.name,
                            unit="grade")
        for i, (_, value) in zip(plan, answers, strict=True):
            if not isinstance(value, ParseFailure):
                out[i] = float(value)
        return out

    def stats(self) -> dict[str, Any]:
        """Counts since the last reset: grades, failures by reason, personas."""
        return {"judge": self.name, "backend": self.backend.fingerprint,
                "prompt_version": prompts.PROMPT_VERSION, "fit": self.options.fit,
                "scale": [self.options.low, self.options.high], **self._fit_stats(),
                **self._stats_tail()}
