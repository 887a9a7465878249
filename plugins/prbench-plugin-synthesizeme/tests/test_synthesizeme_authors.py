"""``protocol=authors``: the SynthesizeMe reference's fitting, on a scripted LLM.

The scripted judge is right on a pair only when its prompt holds at least three demonstrations
with a verified reasoning, so the searches' outcomes are known by hand: the zero-shot and
labelled-only candidates fail validation, the unshuffled bootstrap passes it and stops the search.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from _synthesizeme_fakes import ScriptedBackend, answers, kind
from prbench_plugin_synthesizeme.authors import (
    MAX_LABELED,
    NO_PERSONA,
    authors_split,
    bootstrap_demos,
    candidate_plans,
)
from prbench_plugin_synthesizeme.judge import SynthesizeMeJudge
from prbench_plugin_synthesizeme.personas import split_preferences
from prbench_plugin_synthesizeme.plugin import AUTHORS, SynthesizeMeOptions

from prbench.api import PairRequest, Record, load_records, parse_options, user_preferences


@pytest.fixture(scope="module")
def records() -> list[Record]:
    return load_records("preferences_sample")


def _options(tmp_path: Path, **extra) -> SynthesizeMeOptions:
    raw = {"model": "scripted", "persona_cache_dir": str(tmp_path / "personas"),
           "preferences_data": "preferences_sample", "protocol": "authors", **extra}
    return parse_options(SynthesizeMeOptions, raw, component="synthesizeme")


def test_protocol_authors_sets_the_reference_settings(tmp_path: Path) -> None:
    opts = _options(tmp_path)
    for name, value in AUTHORS.items():
        assert getattr(opts, name) == value, name
    assert (opts.max_new_tokens, opts.persona_max_new_tokens, opts.seed) == (8192, 8192, 42)
    assert opts.retry_temperature == opts.temperature == 0.0  # greedy retries
    assert _options(tmp_path, demos="4").demos == 4  # the same value may be given
    with pytest.raises(Exception, match=r"protocol=authors sets .*drop demos=2 \(authors: 4\)"):
        _options(tmp_path, demos="2")
    with pytest.raises(Exception, match=r"fit='profile' \(authors: 'preferences'\)"):
        _options(tmp_path, fit="profile")


def test_the_split_is_the_references() -> None:
    from prbench.api import Pref

    pairs = [Pref(f"q{i}", f"c{i}", f"r{i}") for i in range(9)]
    train, val = authors_split(pairs, "u")
    assert train == pairs[:6] and val == pairs[6:]  # int(0.7 * 9) = 6, unshuffled
    assert authors_split(pairs[:2], "u") == (pairs[:1], pairs[1:2])  # int(1.4) = 1
    with pytest.raises(ValueError, match=r"user 'u' has 1 labelled pair\(s\).*no training pair"):
        authors_split(pairs[:1], "u")


def test_candidate_sets_are_the_references() -> None:
    plans = candidate_plans(6)
    assert [p["name"] for p in plans] == (["zero-shot", "labelled", "bootstrap"]
                                          + [f"shuffled-{s}" for s in range(10)])
    assert plans[0]["teacher"] == [] and plans[1]["kind"] == "labelled"
    assert plans[1]["teacher"] == random.Random(0).sample(range(6), MAX_LABELED)
    assert plans[2]["order"] == list(range(6)) and plans[2]["size"] == 6  # no limit
    for s, plan in enumerate(plans[3:]):
        order = list(range(6))
        random.Random(s).shuffle(order)
        assert plan["order"] == order
        assert plan["size"] == random.Random(s).randint(1, 6) and 1 <= plan["size"] <= 6
        assert plan["teacher"] == random.Random(0).sample(order, MAX_LABELED)
    assert len({tuple(p["order"]) for p in plans[3:]}) > 1  # shuffled differently


def test_bootstrap_keeps_verified_reasonings_in_order_then_fills_with_labels() -> None:
    plan = {"order": [2, 0, 1, 3, 4], "size": 2}
    kept, raw = bootstrap_demos(plan, {0: "r0", 3: "r3", 1: "r1"})  # 2's reasoning was wrong
    assert kept == [0, 1]  # the first two verified ones in the candidate's order
    rest = [2, 3, 4]
    random.Random(0).shuffle(rest)
    assert raw == random.Random(0).sample(rest, MAX_LABELED - 2) and not set(raw) & {0, 1}
    many, fill = bootstrap_demos({"order": [0, 1, 2, 3, 4], "size": 5},
                                 {j: "r" for j in range(5)})
    assert many == [0, 1, 2, 3, 4] and fill == []  # more than 4 kept: no labelled fill


class _Recording(ScriptedBackend):
    def __init__(self, script) -> None:
        super().__init__(script)
        self.budgets: list[int] = []

    def generate(self, chats, config):
        self.budgets.extend([config.max_new_tokens] * len(chats))
        return super().generate(chats, config)


def test_the_searches_run_as_the_reference(records: list[Record], tmp_path: Path) -> None:
    prefs = user_preferences(records).by_user
    chosen = {p.chosen.strip() for ps in prefs.values() for p in ps} | {
        r.chosen.strip() for r in records}
    splits = {u: split_preferences(ps, u, 42, 0.3, "temporal") for u, ps in prefs.items()}
    train_questions = {p.question.strip() for train, _ in splits.values() for p in train}
    failed_once: set[str] = set()

    def script(chat):
        user = chat[-1]["content"]
        if kind(chat) == "persona":
            return f"A persona built from {user.count('Observation ')} notes."
        question = user.split("<question>\n")[1].split("\n</question>")[0].strip()
        a, _ = answers(chat)
        right = "A" if a.strip() in chosen else "B"
        if question in train_questions:  # the teacher: right, with a note (two fail once)
            if question not in failed_once and len(failed_once) < 2:
                failed_once.add(question)
                return "I cannot decide."
            return f"NOTE[{question}] fits them.\nVerdict: [[{right}]]"
        reasoned = len(re.findall(r"^Reasoning: ", user, re.M))
        wrong = "B" if right == "A" else "A"
        return f"Verdict: [[{right if reasoned >= 3 else wrong}]]"

    backend = _Recording(script)
    rm = SynthesizeMeJudge(_options(tmp_path), backend=backend)
    pairs = [PairRequest(r.id, r.question, r.chosen, r.rejected) for r in records]
    probs = rm.compare(pairs)
    assert set(backend.budgets) == {8192} and set(backend.temperatures) == {0.0}
    assert failed_once and rm.stats()["parse_retries"]["recovered"] >= 1  # greedy retries
    judged = [c for c in backend.chats if kind(c) == "judge"]
    for train, val in splits.values():
        assert (len(train), len(val)) == (6, 3)
        train_q = {p.question.strip() for p in train}
        for c in judged:
            user = c[-1]["content"]
            q = user.split("<question>\n")[1].split("\n</question>")[0].strip()
            if q in train_q:  # a teacher: at most 4 labelled demos, never the pair itself
                demos = user.count("<example ")
                assert demos in (MAX_LABELED - 1, MAX_LABELED) and f"Question: {q}\n" not in user
                assert "Reasoning: " not in user
        for p in val:  # validation shows each pair in one order only
            shown = {answers(c) for c in judged if f"<question>\n{p.question.strip()}\n" in
                     c[-1]["content"]}
            assert len(shown) == 1
    persona_chats = [c for c in backend.chats if kind(c) == "persona"]
    assert len(persona_chats) == 6
    for c in persona_chats:  # the unshuffled bootstrap won: all 6 training reasonings
        assert c[-1]["content"].count("Observation ") == 6
    assert all(NO_PERSONA in c[-1]["content"] for c in judged[:5])  # first search: no persona
    persona = next(iter(rm._personas.values()))
    first, second = persona.details["persona_search"], persona.details["demo_search"]
    # zero-shot and labelled-only fail validation, the unshuffled bootstrap passes: stop there
    assert first["scores"] == [0.0, 0.0, 1.0] and first["chosen_name"] == "bootstrap"
    assert second["evaluated"] == 3 and len(persona.demos) == 6
    assert all(d["reasoning"].startswith("NOTE[") for d in persona.demos)
    assert probs == [1.0] * len(records)
    stats = rm.stats()
    assert stats["protocol"] == "authors" and stats["headline_metric"] == "acc_single_order"
    assert "headline metric acc_single_order" in stats["diagnostics"][0]
