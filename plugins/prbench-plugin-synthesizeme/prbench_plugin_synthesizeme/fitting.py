"""Persona fitting shared by both SynthesizeMe scorers: profile mode and the preference method.

``profile`` mode: the LLM writes a persona from the posts in the request's profile view; with no
posts no call is made and the persona says that nothing is known.

``preferences`` mode (the method of the paper, for records whose user has labelled pairs):

1. **Bootstrapped reasoning with self-verification.** The user's pairs are split into training
   and validation pairs (``split=shuffled``: seeded; ``temporal``: oldest pairs train). For each
   training pair (answers in a seeded order) the LLM reasons about what the choice reveals and
   names the answer it thinks the user chose; the reasoning is kept only when it names the
   user's real choice.
2. **Persona induction** from the kept reasonings (and the posts, if any).
3. **Demonstration selection.** Candidate demo sets -- the empty set and ``demo_candidates``
   seeded sets of up to ``demos`` of the user's training pairs, each with its verified reasoning
   when it has one -- are each tried with the persona-conditioned judge on the validation pairs
   (both orders); the set with the best validation accuracy is used (ties: the earlier set).

``protocol=authors`` replaces steps 1-3 by the reference implementation's two random searches
(:mod:`prbench_plugin_synthesizeme.authors`).

Every LLM reply that does not parse is asked again up to ``parse_retries`` times with a rising
temperature (retry ``k`` of ``n`` samples at ``temperature + (retry_temperature - temperature) *
k / n`` with seed ``seed + k``); only the final outcome is counted as a failure.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from prbench.api import (
    GenerationBackend,
    GenerationFailure,
    LLMJudgeBase,
    ParseFailure,
    Pref,
    UserPreferences,
    generate_in_batches,
    parse_pairwise,
    stable_hash,
    strip_reasoning,
)
from prbench_plugin_synthesizeme import prompts
from prbench_plugin_synthesizeme.personas import (
    Persona,
    PersonaStore,
    demo_candidates,
    load_preferences,
    seeded_order,
    split_preferences,
)
from prbench_plugin_synthesizeme.plugin import AUTHORS_FIT_VERSION, SynthesizeMeOptions

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
        return ParseFailure("empty", "the reply is empty", text[-200:])
    return body


@dataclasses.dataclass(frozen=True)
class _Fit:
    """One persona to fit: its cache key, whose it is, the posts and the mode."""

    key: str
    subject: str
    posts: str
    mode: str


class SynthesizeMeBase(LLMJudgeBase):
    """Options, backend, preference data, persona fitting and persona cache of both scorers."""

    name = "synthesizeme"
    options: SynthesizeMeOptions

    def __init__(self, options: SynthesizeMeOptions,
                 backend: GenerationBackend | None = None) -> None:
        super().__init__(options, backend)
        self.preferences: UserPreferences = (
            load_preferences(options.preferences_data) if options.preferences_data
            else UserPreferences({}, {})
        )
        self.store: PersonaStore | None = None
        if options.persona_cache:
            from prbench.api import cache_dir

            root = options.persona_cache_dir or str(cache_dir("synthesizeme"))
            self.store = PersonaStore(f"{root}/personas.sqlite")
        self._personas: dict[str, Persona | ParseFailure] = {}

    def reset_stats(self) -> None:
        """Forget the counts gathered so far (personas stay cached)."""
        super().reset_stats()
        self._fit = {"induced": 0, "from_cache": 0, "failed": 0, "unknown_user": 0,
                     "reasonings_kept": 0, "reasonings_wrong": 0, "reasonings_invalid": 0,
                     "validation_replies_invalid": 0}
        self._retries = {"replies_retried": 0, "retry_calls": 0, "recovered": 0}
        self._used: dict[str, dict[str, Any]] = {}
        self._record_modes: dict[str, str] = {}

    # -- asking the LLM, with retries --------------------------------------------------------------

    def retry_temperatures(self) -> list[float]:
        """The temperature of each retry of an unparsable reply, in order (rising)."""
        o = self.options
        n = o.parse_retries
        return [o.temperature + (o.retry_temperature - o.temperature) * k / n
                for k in range(1, n + 1)]

    def _ask(self, chats: Sequence[Any], parse: Callable[[str], Any],
             items: Sequence[tuple[str, dict[str, Any]]], *, persona: bool, desc: str,
             unit: str = "reply") -> list[tuple[Any, Any]]:
        """Generate one reply per chat and parse it, retrying parse failures.

        Args:
            chats: the chats.
            parse: the reply parser (a value or a :class:`ParseFailure`).
            items: per chat, the item id and context for the failure list.
            persona: use ``persona_max_new_tokens`` (personas and reasonings).
            desc: the progress-bar label.
            unit: what the bar counts.

        Returns:
            Per chat, ``(final reply, parsed value or ParseFailure)``. A backend failure is not
            retried here (the backend has its own retries); only the final reply of a chat is
            counted in the failure statistics.
        """
        o = self.options
        base = o.generation_config(max_new_tokens=o.persona_max_new_tokens) if persona \
            else o.generation_config()
        replies = generate_in_batches(self.backend, chats, base, o.batch_size, desc=desc,
                                      unit=unit, keep_failures=True)
        parsed = [None if isinstance(r, GenerationFailure) else parse(r) for r in replies]
        pending = [i for i, p in enumerate(parsed) if isinstance(p, ParseFailure)]
        self._retries["replies_retried"] += len(pending)
        for k, temperature in enumerate(self.retry_temperatures(), start=1):
            if not pending:
                break
            config = dataclasses.replace(base, temperature=temperature, seed=o.seed + k)
            again = generate_in_batches(self.backend, [chats[i] for i in pending], config,
                                        o.batch_size, desc=None, keep_failures=True)
            self._retries["retry_calls"] += len(pending)
            still = []
            for i, reply in zip(pending, again, strict=True):
                replies[i] = reply
                parsed[i] = None if isinstance(reply, GenerationFailure) else parse(reply)
                if isinstance(parsed[i], ParseFailure):
                    still.append(i)
                elif not isinstance(reply, GenerationFailure):
                    self._retries["recovered"] += 1
            pending = still
        out = []
        for reply, (item, where) in zip(replies, items, strict=True):
            out.append((reply, self._read(reply, parse, item, **where)))
        return out

    # -- which persona a record gets -----------------------------------------------------------

    def _subject(self, record_id: str) -> tuple[str, str]:
        """``(mode, subject)``: the fit mode of a record and whose persona it gets."""
        found = self.preferences.for_record(record_id)
        if self.options.fit == "profile" or (found is None and self.options.fit == "auto"):
            return "profile", record_id
        if found is None:
            raise ValueError(f"synthesizeme: fit=preferences, but record {record_id!r} has no "
                             f"`preferences` in {self.options.preferences_data}")
        return "preferences", found[0]

    def user_pairs(self, record_id: str) -> list[Pref]:
        """The labelled pairs of a record's user (``[]`` when it has none)."""
        found = self.preferences.for_record(record_id)
        return [] if found is None else found[1]

    def _model(self) -> dict[str, Any]:
        o = self.options
        return {"backend": self.backend.fingerprint, "model": o.model, "revision": o.revision,
                "gguf_file": o.gguf_file}

    def _key(self, subject: str, posts: str, mode: str) -> str:
        o = self.options
        prefs = [[p.question, p.chosen, p.rejected] for p in self.preferences.by_user[subject]] \
            if mode == "preferences" else []
        settings = [o.persona_max_new_tokens, o.temperature, o.top_p, o.seed, o.parse_retries,
                    o.retry_temperature]
        if mode == "preferences":
            settings += [o.demos, o.demo_candidates, o.val_fraction, o.split, o.max_new_tokens,
                         o.orders, o.protocol]
            if o.protocol == "authors":
                settings.append(AUTHORS_FIT_VERSION)
        return stable_hash(prompts.PROMPT_VERSION, mode, subject, posts, prefs, self._model(),
                           settings)

    def personas(self, records: Sequence[tuple[str, str]]) -> dict[str, Persona | ParseFailure]:
        """The persona of each ``(record id, posts)``, by record id (fitted when missing).

        Records of one user with labelled pairs share one persona (fitted once).
        """
        wanted: dict[str, _Fit] = {}
        for record_id, posts in records:
            mode, subject = self._subject(record_id)
            wanted[record_id] = _Fit(self._key(subject, posts, mode), subject, posts, mode)
            self._record_modes[record_id] = mode
        missing = sorted({f.key for f in wanted.values() if f.key not in self._personas})
        if missing and self.store is not None:
            found = self.store.get(missing)
            self._fit["from_cache"] += len(found)
            self._personas.update(found)
        todo: dict[str, _Fit] = {}
        for fit in wanted.values():
            if fit.key in self._personas or fit.key in todo:
                continue
            if fit.mode == "profile" and not fit.posts.strip():
                self._fit["unknown_user"] += 1
                self._personas[fit.key] = Persona(fit.key, fit.subject, "none", UNKNOWN_PERSONA,
                                                  [], [], self._model())
                continue
            todo[fit.key] = fit
        if todo:
            fitted = self._fit_profiles([f for f in todo.values() if f.mode == "profile"])
            fitted += self._fit_preferences([f for f in todo.values() if f.mode == "preferences"])
            good = [p for p in fitted if isinstance(p, Persona)]
            self._fit["induced"] += len(good)
            if good and self.store is not None:
                self.store.put(good)
        out = {}
        for record_id, fit in wanted.items():
            p = self._personas[fit.key]
            out[record_id] = p
            self._used[fit.subject] = {"mode": p.mode, "key": fit.key[:16],
                                       "n_demos": len(p.demos)} \
                if isinstance(p, Persona) else {"failed": p.reason}
        return out

    def fit_mode_counts(self) -> dict[str, int]:
        """How many records were judged under each fit mode since the last reset."""
        return dict(sorted(Counter(self._record_modes.values()).items()))

    # -- fitting -------------------------------------------------------------------------------

    def _induce(self, fits: Sequence[_Fit], chats: list[Any], details: dict[str, dict[str, Any]],
                ) -> list[Persona | ParseFailure]:
        answers = self._ask(chats, parse_persona, [(f.subject, {"step": "persona"}) for f in fits],
                            persona=True, desc="synthesizeme personas")
        out: list[Persona | ParseFailure] = []
        for fit, chat, (_, text) in zip(fits, chats, answers, strict=True):
            if isinstance(text, ParseFailure):
                self._fit["failed"] += 1
                self._personas[fit.key] = text
                out.append(text)
                continue
            persona = Persona(fit.key, fit.subject, fit.mode, text, [], chat, self._model(),
                              details.get(fit.subject, {}))
            self._personas[fit.key] = persona
            out.append(persona)
        return out

    def _fit_profiles(self, fits: Sequence[_Fit]) -> list[Persona | ParseFailure]:
        if not fits:
            return []
        return self._induce(fits, [prompts.persona_from_posts_chat(f.posts) for f in fits], {})

    def _fit_preferences(self, fits: Sequence[_Fit]) -> list[Persona | ParseFailure]:
        if not fits:
            return []
        o = self.options
        if o.protocol == "authors":
            from prbench_plugin_synthesizeme.authors import fit_authors

            return fit_authors(self, fits)
        splits = {f.subject: split_preferences(self.preferences.by_user[f.subject], f.subject,
                                               o.seed, o.val_fraction, o.split) for f in fits}
        # 1. bootstrapped reasoning on the training pairs; kept only when it predicts the label
        chats, plan = [], []
        for fit in fits:
            for j, pref in enumerate(splits[fit.subject][0]):
                chosen_is_a = seeded_order(o.seed, "bootstrap", fit.subject, j)
                a, b = (pref.chosen, pref.rejected) if chosen_is_a else (pref.rejected, pref.chosen)
                chats.append(prompts.bootstrap_chat(fit.posts, pref.question, a, b))
                plan.append((fit.subject, j, pref, a, b, "A" if chosen_is_a else "B"))
        answers = self._ask(chats, parse_pairwise,
                            [(p[0], {"step": "bootstrap", "pair": p[1]}) for p in plan],
                            persona=True, desc="synthesizeme reasoning")
        kept: dict[str, list[prompts.Demo]] = {f.subject: [] for f in fits}
        pool: dict[str, list[prompts.Demo]] = {f.subject: [] for f in fits}
        for (user, _, pref, a, b, label), (reply, verdict) in zip(plan, answers, strict=True):
            reasoning = ""
            if isinstance(verdict, ParseFailure):
                self._fit["reasonings_invalid"] += 1
            elif verdict != label:
                self._fit["reasonings_wrong"] += 1
            else:
                self._fit["reasonings_kept"] += 1
                reasoning = _VERDICT_LINE.sub("", str(strip_reasoning(str(reply)))).strip()
            demo = prompts.Demo(question=pref.question, answer_a=a, answer_b=b,
                                reasoning=reasoning, verdict=label)
            pool[user].append(demo)  # every training pair is a labelled demo candidate
            if reasoning:
                kept[user].append(demo)
        # 2. persona from the verified reasonings
        persona_chats = [prompts.persona_from_reasoning_chat(
            f.posts, [d["reasoning"] for d in kept[f.subject]]) for f in fits]
        details = {f.subject: {"split": o.split, "n_train": len(splits[f.subject][0]),
                               "n_val": len(splits[f.subject][1]),
                               "reasonings_kept": len(kept[f.subject])} for f in fits}
        fitted = self._induce(fits, persona_chats, details)
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
        answers = self._ask(chats, parse_pairwise,
                            [(u, {"step": "validation", "set": c, "pair": v})
                             for u, c, v, _ in plan],
                            persona=False, desc="synthesizeme demo selection")
        votes: dict[tuple[str, int, int], list[bool]] = {}
        for (user, c, v, label), (_, verdict) in zip(plan, answers, strict=True):
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
                # a validation pair counts when the readable orders agree on the user's choice
                right = sum(
                    1 for v in range(n_val)
                    if (w := votes.get((p.user, c, v))) and sum(w) / len(w) > 0.5
                )
                acc.append(right / n_val)
            best = max(range(len(sets)), key=lambda c: (acc[c], -c))
            p.demos = sets[best]
            p.details.update(validation_accuracy=acc, chosen_set=best,
                             n_candidate_sets=len(sets))

    # -- reporting -----------------------------------------------------------------------------

    def _fit_stats(self) -> dict[str, Any]:
        return {"fit_modes": self.fit_mode_counts(), "personas": dict(self._fit),
                "parse_retries": {**self._retries, "temperatures": self.retry_temperatures()},
                "persona_cache": str(self.store.path) if self.store else None,
                "users": dict(self._used)}

    def close(self) -> None:
        """Close the persona cache."""
        if self.store is not None:
            self.store.close()
