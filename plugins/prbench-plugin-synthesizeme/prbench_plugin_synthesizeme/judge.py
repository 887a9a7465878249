"""``synthesizeme`` (pairwise judge) and ``synthesizeme-rating`` (pointwise), with persona fitting.

Fitting a persona (once per user and evidence; cached on disk, see
:mod:`prbench_plugin_synthesizeme.personas`):

- ``profile`` mode: the LLM writes a persona from the posts in the request's profile view. With no
  posts (the question-only condition) no call is made: the persona says nothing is known.
- ``preferences`` mode (the original method; the record's ``preferences`` field): a seeded
  train/validation split of the user's pairs; for each training pair the LLM reasons about what
  the choice reveals and names the answer it thinks was chosen -- the reasoning is kept only when
  it names the right one; the persona is induced from the kept reasonings (and the posts); then
  candidate demonstration sets (the empty set and seeded sets of kept pairs) are each tried on the
  validation pairs with the persona-conditioned judge, and the most accurate set is used.

Judging: each pair in both orders (``orders=one``: a seeded single order). An order whose reply has
no readable ``[[A]]``/``[[B]]`` verdict, or whose persona could not be induced, gives no verdict;
P(first) is the share of readable orders that preferred the first answer, ``nan`` when none did.
Split orders give 0.5, which the harness scores as a tie -- wrong, never a half win.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from prbench.backends.base import GenerationBackend
from prbench.judges.common import (
    LLMJudgeBase,
    OrderTally,
    generate_in_batches,
    seeded_unit,
    stable_hash,
)
from prbench.judges.parsing import ParseFailure, parse_pairwise, parse_rating, strip_reasoning
from prbench.scoring.base import PairRequest, ScoreRequest
from prbench.scoring.cache import fingerprint_of
from prbench_plugin_synthesizeme import prompts
from prbench_plugin_synthesizeme.personas import (
    Persona,
    PersonaStore,
    Pref,
    demo_candidates,
    load_preferences,
    split_preferences,
)
from prbench_plugin_synthesizeme.plugin import SynthesizeMeOptions, SynthesizeMeRatingOptions

#: The persona used when nothing at all is known about the user (no posts, no pairs).
UNKNOWN_PERSONA = ("Nothing is known about this person beyond their question; judge as a typical "
                   "person asking it would.")
_VERDICT_LINE = re.compile(r"^.*\bverdict\b.*$", re.IGNORECASE | re.MULTILINE)


def parse_persona(text: str) -> str | ParseFailure:
    """A persona reply without reasoning blocks; a failure when nothing is left."""
    body = strip_reasoning(text)
    if isinstance(body, ParseFailure):
        return body
    body = body.strip()
    if not body:
        return ParseFailure("empty", "the persona reply is empty", text[-200:])
    return body


def _orders(seed: int, *parts: object) -> list[bool]:
    return [seeded_unit("synthesizeme-order", seed, *parts) < 0.5]


class _SynthesizeMeBase(LLMJudgeBase):
    """Options, backend, preference data, persona fitting and persona cache of both scorers."""

    name = "synthesizeme"
    options: SynthesizeMeOptions

    def __init__(self, options: SynthesizeMeOptions,
                 backend: GenerationBackend | None = None) -> None:
        super().__init__(options, backend)
        self.preferences: dict[str, list[Pref]] = (
            load_preferences(options.preferences_data) if options.preferences_data else {}
        )
        self.store: PersonaStore | None = None
        if options.persona_cache:
            from prbench.paths import cache_dir

            root = options.persona_cache_dir or str(cache_dir("synthesizeme"))
            self.store = PersonaStore(f"{root}/personas.sqlite")
        self._personas: dict[str, Persona | ParseFailure] = {}

    def reset_stats(self) -> None:
        """Forget the counts gathered so far (personas stay cached)."""
        super().reset_stats()
        self._fit = {"induced": 0, "from_cache": 0, "failed": 0, "unknown_user": 0,
                     "reasonings_kept": 0, "reasonings_wrong": 0, "reasonings_invalid": 0,
                     "validation_replies_invalid": 0}
        self._used: dict[str, dict[str, Any]] = {}

    # -- fitting ---------------------------------------------------------------------------------

    def _mode(self, record_id: str) -> str:
        if self.options.fit == "profile":
            return "profile"
        if record_id in self.preferences:
            return "preferences"
        if self.options.fit == "preferences":
            raise ValueError(f"synthesizeme: fit=preferences, but record {record_id!r} has no "
                             f"`preferences` in {self.options.preferences_data}")
        return "profile"

    def _model(self) -> dict[str, Any]:
        o = self.options
        return {"backend": self.backend.fingerprint, "model": o.model, "revision": o.revision,
                "gguf_file": o.gguf_file}

    def _key(self, user: str, posts: str, mode: str) -> str:
        o = self.options
        prefs = [[p.question, p.chosen, p.rejected] for p in self.preferences.get(user, [])] \
            if mode == "preferences" else []
        settings = [o.persona_max_new_tokens, o.temperature, o.top_p, o.seed]
        if mode == "preferences":
            settings += [o.demos, o.demo_candidates, o.val_fraction, o.max_new_tokens, o.orders]
        return stable_hash(prompts.PROMPT_VERSION, mode, user, posts, prefs, self._model(),
                           settings)

    def _gen(self, chats: list[Any], *, persona: bool, desc: str) -> list[Any]:
        o = self.options
        config = o.generation_config(max_new_tokens=o.persona_max_new_tokens) if persona \
            else o.generation_config()
        return generate_in_batches(self.backend, chats, config, o.batch_size, desc=desc,
                                   unit="reply", keep_failures=True)

    def personas(self, users: Sequence[tuple[str, str]]) -> dict[str, Persona | ParseFailure]:
        """The persona of each ``(record id, posts)``, by record id (fitted when missing)."""
        wanted: dict[str, tuple[str, str, str]] = {}
        for user, posts in users:
            mode = self._mode(user)
            key = self._key(user, posts, mode)
            wanted[user] = (key, posts, mode)
        missing = [k for k, _, _ in wanted.values() if k not in self._personas]
        if missing and self.store is not None:
            found = self.store.get(missing)
            self._fit["from_cache"] += len(found)
            self._personas.update(found)
        todo = {u: w for u, w in wanted.items() if w[0] not in self._personas}
        for user, (key, posts, mode) in list(todo.items()):
            if mode == "profile" and not posts.strip():
                self._fit["unknown_user"] += 1
                self._personas[key] = Persona(key, user, "none", UNKNOWN_PERSONA, [], [],
                                              self._model())
                del todo[user]
        if todo:
            fitted = self._fit_profiles({u: w for u, w in todo.items() if w[2] == "profile"})
            fitted += self._fit_preferences({u: w for u, w in todo.items()
                                             if w[2] == "preferences"})
            good = [p for p in fitted if isinstance(p, Persona)]
            self._fit["induced"] += len(good)
            if good and self.store is not None:
                self.store.put(good)
        out = {}
        for user, (key, _, _) in wanted.items():
            out[user] = self._personas[key]
            p = self._personas[key]
            self._used[user] = {"mode": p.mode, "key": key[:16], "n_demos": len(p.demos)} \
                if isinstance(p, Persona) else {"failed": p.reason}
        return out

    def _induce(self, todo: dict[str, tuple[str, str, str]], chats: list[Any],
                details: dict[str, dict[str, Any]], demos: dict[str, list[Any]]) -> list[Any]:
        replies = self._gen(chats, persona=True, desc="synthesizeme personas")
        out: list[Persona | ParseFailure] = []
        for (user, (key, _, mode)), chat, reply in zip(todo.items(), chats, replies, strict=True):
            text = self._read(reply, parse_persona, user, step="persona")
            if isinstance(text, ParseFailure):
                self._fit["failed"] += 1
                self._personas[key] = text
                out.append(text)
                continue
            persona = Persona(key, user, mode, text, demos.get(user, []), chat, self._model(),
                              details.get(user, {}))
            self._personas[key] = persona
            out.append(persona)
        return out

    def _fit_profiles(self, todo: dict[str, tuple[str, str, str]]) -> list[Any]:
        if not todo:
            return []
        chats = [prompts.persona_from_posts_chat(posts) for _, posts, _ in todo.values()]
        return self._induce(todo, chats, {}, {})

    def _fit_preferences(self, todo: dict[str, tuple[str, str, str]]) -> list[Any]:
        if not todo:
            return []
        o = self.options
        splits = {u: split_preferences(self.preferences[u], u, o.seed, o.val_fraction)
                  for u in todo}
        # 1. bootstrap reasoning on the training pairs; kept only when it predicts the label
        chats, plan = [], []
        for user, (_, posts, _) in todo.items():
            for j, pref in enumerate(splits[user][0]):
                chosen_is_a = _orders(o.seed, "bootstrap", user, j)[0]
                a, b = (pref.chosen, pref.rejected) if chosen_is_a else (pref.rejected, pref.chosen)
                chats.append(prompts.bootstrap_chat(posts, pref.question, a, b))
                plan.append((user, pref, a, b, "A" if chosen_is_a else "B"))
        replies = self._gen(chats, persona=True, desc="synthesizeme reasoning")
        pool: dict[str, list[prompts.Demo]] = {u: [] for u in todo}
        for (user, pref, a, b, label), reply in zip(plan, replies, strict=True):
            verdict = self._read(reply, parse_pairwise, user, step="bootstrap")
            if isinstance(verdict, ParseFailure):
                self._fit["reasonings_invalid"] += 1
                continue
            if verdict != label:
                self._fit["reasonings_wrong"] += 1
                continue
            self._fit["reasonings_kept"] += 1
            body = strip_reasoning(str(reply))
            reasoning = _VERDICT_LINE.sub("", str(body)).strip()
            pool[user].append(prompts.Demo(question=pref.question, answer_a=a, answer_b=b,
                                           reasoning=reasoning, verdict=label))
        # 2. persona from the kept reasonings
        persona_chats = [prompts.persona_from_reasoning_chat(posts, [d["reasoning"]
                                                                     for d in pool[u]])
                         for u, (_, posts, _) in todo.items()]
        details = {u: {"n_train": len(splits[u][0]), "n_val": len(splits[u][1]),
                       "reasonings_kept": len(pool[u])} for u in todo}
        fitted = self._induce(todo, persona_chats, details, {})
        # 3. demonstration sets tried on the validation pairs
        self._select_demos([p for p in fitted if isinstance(p, Persona)], splits, pool)
        return fitted

    def _select_demos(self, personas: list[Persona], splits: dict[str, Any],
                      pool: dict[str, list[prompts.Demo]]) -> None:
        o = self.options
        chats, plan = [], []
        candidates = {}
        for p in personas:
            candidates[p.user] = demo_candidates(pool[p.user], o.demos, o.demo_candidates, o.seed,
                                                 p.user)
            if not splits[p.user][1] or len(candidates[p.user]) == 1:
                continue
            for c, demos in enumerate(candidates[p.user]):
                for v, pref in enumerate(splits[p.user][1]):
                    for chosen_is_a in (True, False):
                        a, b = (pref.chosen, pref.rejected) if chosen_is_a else (pref.rejected,
                                                                                  pref.chosen)
                        chats.append(prompts.judge_chat(p.persona, pref.question, a, b, demos))
                        plan.append((p.user, c, v, "A" if chosen_is_a else "B"))
        replies = self._gen(chats, persona=False, desc="synthesizeme demo selection")
        votes: dict[tuple[str, int, int], list[bool]] = {}
        for (user, c, v, label), reply in zip(plan, replies, strict=True):
            verdict = parse_pairwise(reply)
            if isinstance(verdict, ParseFailure):
                self._fit["validation_replies_invalid"] += 1
                continue
            votes.setdefault((user, c, v), []).append(verdict == label)
        for p in personas:
            sets = candidates[p.user]
            n_val = len(splits[p.user][1])
            if not n_val or len(sets) == 1:
                p.demos = sets[1] if len(sets) > 1 else []
                p.details["demo_selection"] = "no validation pairs: first seeded set"
                continue
            acc = []
            for c in range(len(sets)):
                right = sum(
                    1 for v in range(n_val)
                    if (w := votes.get((p.user, c, v))) and sum(w) / len(w) > 0.5
                )
                acc.append(right / n_val)
            best = max(range(len(sets)), key=lambda c: (acc[c], -c))
            p.demos = sets[best]
            p.details.update(validation_accuracy=acc, chosen_set=best)

    # -- reporting -------------------------------------------------------------------------------

    def fingerprint(self) -> str:
        """Hash of what changes outputs: backend/model, prompts, fit mode and data, decoding."""
        o = self.options
        prefs = sorted((u, [[p.question, p.chosen, p.rejected] for p in ps])
                       for u, ps in self.preferences.items())
        return fingerprint_of({
            "component": self.name, "model": self._model(), "prompt_version":
            prompts.PROMPT_VERSION, "fit": o.fit, "orders": o.orders, "preferences": prefs,
            "decoding": [o.max_new_tokens, o.persona_max_new_tokens, o.temperature, o.top_p,
                         o.seed],
            "demos": [o.demos, o.demo_candidates, o.val_fraction],
            "scale": [getattr(o, "low", None), getattr(o, "high", None)],
        })

    def _fit_stats(self) -> dict[str, Any]:
        return {"personas": dict(self._fit), "persona_cache": str(self.store.path)
                if self.store else None, "users": dict(self._used)}

    def describe(self) -> dict[str, Any]:
        """Settings, counts, persona provenance and the fingerprint for the manifest."""
        out = super().describe()
        out.update(component=self.name, prompt_version=prompts.PROMPT_VERSION,
                   fingerprint=self.fingerprint(), model=self._model(),
                   n_users_with_preferences=len(self.preferences))
        return out

    def close(self) -> None:
        """Close the persona cache."""
        if self.store is not None:
            self.store.close()


class SynthesizeMeJudge(_SynthesizeMeBase):
    """The persona-conditioned pairwise judge (protocol: ``compare``)."""

    name = "synthesizeme"

    def reset_stats(self) -> None:
        """Forget the counts and details gathered so far."""
        super().reset_stats()
        self._tally = OrderTally()
        self._persona_failed = 0

    def _check_not_fitted_on(self, pair: PairRequest) -> None:
        for pref in self.preferences.get(pair.record_id, []):
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
            orders = [True, False] if o.orders == "both" else _orders(
                o.seed, p.record_id, p.first, p.second)
            for first_is_a in orders:
                a, b = (p.first, p.second) if first_is_a else (p.second, p.first)
                chats.append(prompts.judge_chat(persona.persona, p.question, a, b, persona.demos))
                plan.append((i, first_is_a))
        replies = self._generate(chats, unit="verdict")
        per_pair: list[list[dict[str, Any]]] = [[] for _ in pairs]
        for (i, first_is_a), reply in zip(plan, replies, strict=True):
            shown_first = "first" if first_is_a else "second"
            verdict = self._read(reply, parse_pairwise, pairs[i].record_id, step="judge",
                                 shown_first=shown_first)
            per_pair[i].append(self._tally.order(shown_first, verdict))
        out = []
        for p, orders in zip(pairs, per_pair, strict=True):
            persona_failed = isinstance(personas[p.record_id], ParseFailure)
            self._persona_failed += persona_failed
            out.append(self._tally.pair(p.record_id, orders, persona_failed=persona_failed))
        return out

    def stats(self) -> dict[str, Any]:
        """Counts since the last reset: pairs, invalid orders/pairs, position bias, personas."""
        return {
            "judge": self.name, "backend": self.backend.fingerprint,
            "prompt_version": prompts.PROMPT_VERSION, "fit": self.options.fit,
            "orders": self.options.orders, "seed": self.options.seed,
            **self._tally.stats(), "n_pairs_persona_failed": self._persona_failed,
            **self._fit_stats(), **self._stats_tail(),
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
        replies = self._generate(chats, unit="grade")
        out = [math.nan] * len(requests)

        def parse(text: str) -> float | ParseFailure:
            return parse_rating(text, low=o.low, high=o.high, integer=True)

        for i, reply in zip(plan, replies, strict=True):
            value = self._read(reply, parse, requests[i].record_id, step="rating")
            if not isinstance(value, ParseFailure):
                out[i] = float(value)
        return out

    def stats(self) -> dict[str, Any]:
        """Counts since the last reset: grades, failures by reason, personas."""
        return {"judge": self.name, "backend": self.backend.fingerprint,
                "prompt_version": prompts.PROMPT_VERSION, "fit": self.options.fit,
                "scale": [self.options.low, self.options.high], **self._fit_stats(),
                **self._stats_tail()}
