"""``protocol=authors``: the fitting procedure of the SynthesizeMe reference implementation.

The reference implementation (SALT-NLP/SynthesizeMe, ``personalrm/synthesizeme.py``) fits a user
in two DSPy random searches over few-shot programs. This module runs the same searches with
explicit, seeded steps; Python's ``random`` draws the shuffles and sizes the way DSPy's
``BootstrapFewShotWithRandomSearch`` and ``BootstrapFewShot`` draw them. Where the reference's
code does something its design did not intend, this module does what the code does, so results
can be compared with it pair for pair:

- **Labelled-only demos are carried, never shown.** The reference's labelled-only demos carry
  keys that are not the judge signature's output fields, so DSPy's chat adapter leaves them out
  of every prompt. Its teacher therefore judges with no demos, its "labelled-only" candidate
  is judged as a zero-shot program, and validation and final prompts show only the demos with a
  reasoning (:class:`Candidate`: ``carried`` and ``shown``).
- **The persona search has 12 candidates** (:func:`candidate_plans` with ``zero_shot=False``):
  labelled-only first, then the bootstraps; the demo search has 13 (zero-shot first).
- **The persona is induced from every demo the winning candidate carries**: each pair, its
  reasoning where it has one, and which answer the user chose
  (:func:`prbench_plugin_synthesizeme.prompts.persona_from_demos_chat`).

For each user, the labelled pairs are split without shuffling: the first ``int(0.7 n)`` train,
the rest validate. Each split's pairs are shown in the reference's presentation order
(:func:`presentation_order`: a fresh ``random.Random(42)`` per split, one ``choice([True,
False])`` per pair). Then, twice:

1. **Candidate programs** (:func:`candidate_plans`), in this order: zero-shot (no demos; the
   demo search only); labelled only (``random.Random(0).sample`` of 4 training pairs, without
   reasoning); the unshuffled bootstrap; and 10 shuffled bootstraps
   (``random.Random(s).shuffle`` of the training pairs and a size
   ``random.Random(s).randint(1, n)``, ``s = 0..9``).
2. **Bootstrap** (:func:`bootstrap_demos`): the teacher -- the judge with no demo shown --
   reasons about each training pair; in the candidate's order, a reasoning is kept when its
   verdict is the user's choice, until ``size`` are kept. Labelled demos of the pairs not kept
   fill the carried set up to 4 (``random.Random(0)`` shuffle and sample, as DSPy does).
3. **Validation** in one order (the presentation order): the share of validation pairs the
   candidate's judge, shown the candidate's demos with a reasoning, gets right. The first
   candidate with the best score wins; the search stops at the first candidate scoring 80% or
   more (the reference's ``stop_at_score=80``).

The first search runs the judge without a persona; every demo the winning candidate carries
induces the persona. The second search runs the persona-conditioned judge (the teacher too) and
the demos its winner shows are the final judge's. Replies are generated for every candidate up
front (the searches' answers do not depend on the order of generation with greedy decoding),
then read in the reference's order, so the candidates after an early stop cost generation but
are not used.
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Sequence
from typing import Any

from prbench.api import ParseFailure, Pref, parse_pairwise, strip_reasoning
from prbench_plugin_synthesizeme import prompts
from prbench_plugin_synthesizeme.personas import Persona

#: The reference's settings: labelled demos per teacher / per set, shuffled candidates, early stop.
MAX_LABELED = 4
SHUFFLED_CANDIDATES = 10
STOP_AT = 0.8
#: What the judge is told about the user before a persona exists (the first search).
NO_PERSONA = ("Not described yet: judge from this person's earlier choices shown below, and from "
              "the question.")
_VERDICT_LINE = re.compile(r"^.*\bverdict\b.*$", re.IGNORECASE | re.MULTILINE)


def presentation_order(n: int, seed: int = 42) -> list[bool]:
    """Whether each of a split's ``n`` pairs shows its chosen answer first, as the reference draws.

    The reference converts each split (training, validation) on its own with a fresh
    ``random.Random(42)`` and one ``choice([True, False])`` per pair in the data's order (a
    ``flip`` column would override it; prbench's preference data has none).
    """
    rng = random.Random(seed)
    return [rng.choice([True, False]) for _ in range(n)]


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One candidate program's demos.

    Attributes:
        carried: every demo the program holds (verified reasonings, then labelled-only demos
            without reasoning): what the persona is induced from.
        shown: the demos its prompts show: those with a reasoning (the reference's chat adapter
            leaves the labelled-only ones out).
    """

    carried: list[prompts.Demo]
    shown: list[prompts.Demo]


def candidate_plans(
    n_train: int, shuffled: int = SHUFFLED_CANDIDATES, *, zero_shot: bool = True
) -> list[dict[str, Any]]:
    """The candidate programs of one search over ``n_train`` training pairs, in search order.

    Each plan: ``name``, ``kind`` (``zero-shot``, ``labelled``, ``bootstrap``), ``order`` (the
    training pairs' indices in the candidate's order), ``size`` (most kept reasonings) and, for
    ``labelled``, ``labelled`` (the indices of its demos). ``zero_shot=False`` leaves the
    zero-shot program out (the reference's persona search: 12 candidates).
    """
    base = list(range(n_train))
    k = min(MAX_LABELED, n_train)
    plans: list[dict[str, Any]] = [
        {"name": "zero-shot", "kind": "zero-shot", "order": base, "size": 0},
    ] if zero_shot else []
    plans += [
        {"name": "labelled", "kind": "labelled", "order": base, "size": 0,
         "labelled": random.Random(0).sample(base, k)},
        {"name": "bootstrap", "kind": "bootstrap", "order": base, "size": n_train},
    ]
    for s in range(shuffled):
        order = list(base)
        random.Random(s).shuffle(order)
        size = random.Random(s).randint(1, max(1, n_train))
        plans.append({"name": f"shuffled-{s}", "kind": "bootstrap", "order": order,
                      "size": size})
    return plans


def _demo(pref: Pref, chosen_is_a: bool, reasoning: str = "") -> prompts.Demo:
    a, b = (pref.chosen, pref.rejected) if chosen_is_a else (pref.rejected, pref.chosen)
    return prompts.Demo(question=pref.question, answer_a=a, answer_b=b, reasoning=reasoning,
                        verdict="A" if chosen_is_a else "B")


def bootstrap_demos(plan: dict[str, Any], kept: dict[int, str]) -> tuple[list[int], list[int]]:
    """The demos of a bootstrap candidate: ``(kept indices, labelled-only indices)``.

    Args:
        plan: the candidate (:func:`candidate_plans`).
        kept: the verified reasoning of each training pair under the teacher (pairs whose
            teacher verdict was wrong or unreadable are absent).
    """
    chosen: list[int] = []
    for j in plan["order"]:
        if len(chosen) >= plan["size"]:
            break
        if j in kept:
            chosen.append(j)
    rest = [j for j in plan["order"] if j not in chosen]
    random.Random(0).shuffle(rest)
    fill = max(0, min(MAX_LABELED - len(chosen), len(rest)))
    return chosen, random.Random(0).sample(rest, fill)


def candidate_demos(plan: dict[str, Any], train: Sequence[Pref], shown_a: Sequence[bool],
                    kept: dict[int, str]) -> Candidate:
    """A candidate's carried and shown demos (see :class:`Candidate`).

    Args:
        plan: the candidate (:func:`candidate_plans`).
        train: the training pairs.
        shown_a: per training pair, whether its chosen answer is shown as A
            (:func:`presentation_order`).
        kept: the teacher's verified reasoning per training pair.
    """
    if plan["kind"] == "zero-shot":
        return Candidate([], [])
    if plan["kind"] == "labelled":
        return Candidate([_demo(train[i], shown_a[i]) for i in plan["labelled"]], [])
    boot, raw = bootstrap_demos(plan, kept)
    reasoned = [_demo(train[j], shown_a[j], kept[j]) for j in boot]
    return Candidate(reasoned + [_demo(train[j], shown_a[j]) for j in raw], reasoned)


def _reasoning(reply: str) -> str:
    return _VERDICT_LINE.sub("", str(strip_reasoning(str(reply)))).strip()


class AuthorsSearch:
    """The two searches of ``protocol=authors`` for a batch of users (see the module docstring).

    Args:
        base: the scorer (a ``fitting.SynthesizeMeBase``: its LLM calls with retries, counts and
            options; typed loosely, as this module sits below it).
        splits: per user, ``(training pairs, validation pairs)``.
        zero_shot: whether the zero-shot program is a candidate (the demo search: yes; the
            persona search: no).
    """

    def __init__(self, base: Any, splits: dict[str, tuple[list[Pref], list[Pref]]],
                 *, zero_shot: bool = True) -> None:
        self.base = base
        self.splits = splits
        seed = base.options.seed
        self.order = {u: (presentation_order(len(t), seed), presentation_order(len(v_), seed))
                      for u, (t, v_) in splits.items()}
        self.plans = {u: candidate_plans(len(t), zero_shot=zero_shot)
                      for u, (t, _) in splits.items()}

    def _ask(self, requests: list[tuple[str, Any, dict[str, Any]]], desc: str) -> dict[str, Any]:
        """Ask each distinct chat once; ``{chat key: (reply, verdict)}``."""
        unique: dict[str, tuple[Any, str, dict[str, Any]]] = {}
        for key, chat, where in requests:
            unique.setdefault(key, (chat, where["user"], where))
        keys = list(unique)
        answers = self.base._ask([unique[k][0] for k in keys], parse_pairwise,
                                 [(unique[k][1], unique[k][2]) for k in keys], persona=False,
                                 desc=desc)
        return dict(zip(keys, answers, strict=True))

    def search(self, personas: dict[str, str], stage: str) -> dict[str, dict[str, Any]]:
        """One random search per user.

        Returns:
            ``{user: {"demos" (shown), "carried", "scores", "chosen", "chosen_name",
            "evaluated"}}``.
        """
        # 1. the teacher's reasoning on every training pair: no demo is shown to it
        wanted: list[tuple[str, Any, dict[str, Any]]] = []
        teacher: dict[str, list[str]] = {}
        for u in self.plans:
            train, _ = self.splits[u]
            shown = self.order[u][0]
            teacher[u] = []
            for j, pref in enumerate(train):
                chat = prompts.judge_chat(personas[u], pref.question, *_shown(pref, shown[j]))
                teacher[u].append(_key(chat))
                wanted.append((teacher[u][-1], chat, {"user": u, "step": f"{stage}-teacher",
                                                      "pair": j}))
        taught = self._ask(wanted, f"synthesizeme {stage} bootstrap")
        # 2. each candidate's demos
        sets_of: dict[str, list[Candidate]] = {}
        for u, plans in self.plans.items():
            train, _ = self.splits[u]
            shown = self.order[u][0]
            kept = {}
            for j, key in enumerate(teacher[u]):
                reply, verdict = taught[key]
                if not isinstance(verdict, ParseFailure) and verdict == (
                        "A" if shown[j] else "B"):
                    kept[j] = _reasoning(reply)
            sets_of[u] = [candidate_demos(plan, train, shown, kept) for plan in plans]
        # 3. validation, one order per pair, with the demos each candidate shows
        wanted = []
        for u, sets in sets_of.items():
            _, val = self.splits[u]
            shown = self.order[u][1]
            for c, cand in enumerate(sets):
                for v, pref in enumerate(val):
                    chat = prompts.judge_chat(personas[u], pref.question,
                                              *_shown(pref, shown[v]), cand.shown)
                    wanted.append((_key(chat), chat, {"user": u, "step": f"{stage}-validation",
                                                      "set": c, "pair": v}))
        judged = self._ask(wanted, f"synthesizeme {stage} validation")
        out: dict[str, dict[str, Any]] = {}
        for u, sets in sets_of.items():
            _, val = self.splits[u]
            shown = self.order[u][1]
            scores: list[float] = []
            best = 0
            for c, cand in enumerate(sets):
                right = 0
                for v, pref in enumerate(val):
                    chat = prompts.judge_chat(personas[u], pref.question,
                                              *_shown(pref, shown[v]), cand.shown)
                    verdict = judged[_key(chat)][1]
                    right += (not isinstance(verdict, ParseFailure)
                              and verdict == ("A" if shown[v] else "B"))
                scores.append(right / len(val) if val else 0.0)
                if scores[-1] > scores[best]:
                    best = c
                if scores[-1] >= STOP_AT:
                    break
            out[u] = {"demos": sets[best].shown, "carried": sets[best].carried,
                      "scores": scores, "chosen": best,
                      "chosen_name": self.plans[u][best]["name"], "evaluated": len(scores)}
        return out


def _shown(pref: Pref, chosen_is_a: bool) -> tuple[str, str]:
    return (pref.chosen, pref.rejected) if chosen_is_a else (pref.rejected, pref.chosen)


def _key(chat: Any) -> str:
    import json

    return json.dumps(chat, sort_keys=True, ensure_ascii=False)


def authors_split(prefs: Sequence[Pref], user: str) -> tuple[list[Pref], list[Pref]]:
    """The reference's split of a user's pairs: the first ``int(0.7 n)`` train, the rest validate.

    Raises:
        ValueError: a split with no training or no validation pair (the reference refuses a user
            without validation pairs), naming the user.
    """
    cut = int(len(prefs) * 0.7)
    train, val = list(prefs[:cut]), list(prefs[cut:])
    if not train or not val:
        missing = "training" if not train else "validation"
        raise ValueError(f"synthesizeme: protocol=authors: user {user!r} has {len(prefs)} "
                         f"labelled pair(s); the reference's split (the first int(0.7 n) train, "
                         f"the rest validate) leaves no {missing} pair")
    return train, val


def fit_authors(base: Any, fits: Sequence[Any]) -> list[Persona | ParseFailure]:
    """Fit each user by the reference's procedure (see the module docstring).

    The persona comes from every demo the first search's winner carries, the demos from the
    second search's winner (the ones it shows).

    Args:
        base: the scorer (``fitting.SynthesizeMeBase``).
        fits: the users to fit (``fitting._Fit``: ``subject``, ``posts``, ``key``, ``mode``);
            each user's pairs are split by :func:`authors_split`.
    """
    splits = {f.subject: authors_split(base.preferences.by_user[f.subject], f.subject)
              for f in fits}
    search = AuthorsSearch(base, {f.subject: splits[f.subject] for f in fits}, zero_shot=False)
    first = search.search({f.subject: NO_PERSONA for f in fits}, "persona")
    chats, details = [], {}
    for f in fits:
        won = first[f.subject]
        carried = won["carried"]
        notes = sum(1 for d in carried if d["reasoning"].strip())
        chats.append(prompts.persona_from_demos_chat(f.posts, carried))
        train, val = splits[f.subject]
        details[f.subject] = {
            "protocol": "authors", "split": "temporal", "n_train": len(train),
            "n_val": len(val), "reasonings_kept": notes, "persona_demos": len(carried),
            "persona_search": {k: won[k] for k in ("scores", "chosen", "chosen_name",
                                                   "evaluated")},
        }
        base._fit["reasonings_kept"] += notes
    fitted = base._induce(list(fits), chats, details)
    good = [p for p in fitted if isinstance(p, Persona)]
    if good:
        second = AuthorsSearch(base, {p.user: splits[p.user] for p in good}).search(
            {p.user: p.persona for p in good}, "demos")
        for p in good:
            won = second[p.user]
            p.demos = won["demos"]
            p.details["demo_search"] = {k: won[k] for k in ("scores", "chosen", "chosen_name",
                                                            "evaluated")}
    return fitted
