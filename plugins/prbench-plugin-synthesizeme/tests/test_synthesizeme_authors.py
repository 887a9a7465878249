"""``protocol=authors``: the SynthesizeMe reference's fitting, on a scripted LLM.

The scripted judge is right on a pair only when its prompt holds at least three demonstrations
with a verified reasoning, so the searches' outcomes are known by hand: the zero-shot and
labelled-only candidates fail validation, the unshuffled bootstrap passes it and stops the search.
A second script is never right on a validation pair, so every candidate ties at 0: the first one
wins each search, which shows what the reference's code does on a tie (the labelled-only
candidate gives the persona, from its labelled demos; zero-shot gives the final judge's demos).
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
    Candidate,
    authors_split,
    bootstrap_demos,
    candidate_demos,
    candidate_plans,
    presentation_order,
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
    assert plans[1]["kind"] == "labelled"
    assert plans[1]["labelled"] == random.Random(0).sample(range(6), MAX_LABELED)
    assert plans[2]["order"] == list(range(6)) and plans[2]["size"] == 6  # no limit
    for s, plan in enumerate(plans[3:]):
        order = list(range(6))
        random.Random(s).shuffle(order)
        assert plan["order"] == order
        assert plan["size"] == random.Random(s).randint(1, 6) and 1 <= plan["size"] <= 6
    assert len({tuple(p["order"]) for p in plans[3:]}) > 1  # shuffled differently
    # the persona search has no zero-shot program: 12 candidates, labelled-only first
    persona = candidate_plans(6, zero_shot=False)
    assert [p["name"] for p in persona] == [p["name"] for p in plans[1:]]
    assert len(persona) == 12 and persona[0]["kind"] == "labelled"


def test_each_split_is_presented_in_the_references_order(records, tmp_path: Path) -> None:
    """A fresh Random(42) per split, one choice([True, False]) per pair in the data's order."""
    rng = random.Random(42)
    assert presentation_order(5) == [rng.choice([True, False]) for _ in range(5)]
    prefs = user_preferences(records).by_user
    seen: dict[str, bool] = {}  # question -> chosen shown as A, in the validation prompts

    def script(chat):
        if kind(chat) == "persona":
            return "A persona."
        user = chat[-1]["content"]
        question = user.split("<question>\n")[-1].split("\n</question>")[0].strip()
        a, _ = answers(chat)
        seen.setdefault(question, a.strip() in chosen)
        return "Verdict: [[A]]"

    chosen = {p.chosen.strip() for ps in prefs.values() for p in ps}
    rm = SynthesizeMeJudge(_options(tmp_path), backend=ScriptedBackend(script))
    rm.personas([(r.id, "") for r in records])
    for ps in prefs.values():
        train, val = authors_split(ps, "u")
        for split in (train, val):  # each split starts its own stream
            want = presentation_order(len(split))
            assert [seen[p.question.strip()] for p in split] == want


def test_labelled_only_demos_are_carried_but_never_shown() -> None:
    """The reference's chat adapter drops demos without a reasoning from every prompt; they stay
    in the program (and reach the persona)."""
    from prbench.api import Pref

    train = [Pref(f"q{i}", f"c{i}", f"r{i}") for i in range(6)]
    shown_a = [True, False] * 3
    plans = candidate_plans(6)
    labelled = candidate_demos(plans[1], train, shown_a, {})
    assert labelled.shown == [] and len(labelled.carried) == MAX_LABELED
    assert all(d["reasoning"] == "" for d in labelled.carried)
    kept = {0: "r0", 3: "r3"}
    boot = candidate_demos(plans[2], train, shown_a, kept)
    assert [d["reasoning"] for d in boot.shown] == ["r0", "r3"]
    assert len(boot.carried) == MAX_LABELED and boot.carried[:2] == boot.shown
    assert candidate_demos(plans[0], train, shown_a, kept) == Candidate([], [])


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
            if q in train_q:  # a teacher: its labelled demos are dropped, as in the reference
                assert "<example " not in user
        for p in val:  # validation shows each pair in one order only
            shown = {answers(c) for c in judged if f"<question>\n{p.question.strip()}\n" in
                     c[-1]["content"]}
            assert len(shown) == 1
    persona_chats = [c for c in backend.chats if kind(c) == "persona"]
    assert len(persona_chats) == 6
    for c in persona_chats:  # the unshuffled bootstrap won: all 6 training pairs, reasoned
        user = c[-1]["content"]
        assert user.count("<choice ") == 6 and user.count("Reasoning: NOTE[") == 6
    assert all(NO_PERSONA in c[-1]["content"] for c in judged[:5])  # first search: no persona
    persona = next(iter(rm._personas.values()))
    first, second = persona.details["persona_search"], persona.details["demo_search"]
    # persona search (no zero-shot): labelled-only fails validation (its demos are not shown),
    # the unshuffled bootstrap passes: stop there
    assert first["scores"] == [0.0, 1.0] and first["chosen_name"] == "bootstrap"
    # demo search: zero-shot and labelled-only fail, the bootstrap passes
    assert second["scores"] == [0.0, 0.0, 1.0]
    assert second["evaluated"] == 3 and len(persona.demos) == 6
    assert all(d["reasoning"].startswith("NOTE[") for d in persona.demos)
    assert probs == [1.0] * len(records)
    stats = rm.stats()
    assert stats["protocol"] == "authors" and stats["headline_metric"] == "acc_single_order"
    assert "headline metric acc_single_order" in stats["diagnostics"][0]


def test_a_tie_is_won_by_the_first_candidate_and_the_persona_comes_from_its_demos(
    records: list[Record], tmp_path: Path
) -> None:
    """Every validation reply is wrong: all candidates tie at 0 and the first wins each search.

    The persona search's first candidate is labelled-only (no zero-shot there), so the persona is
    induced from its 4 labelled demos -- each pair as shown with the answer the user chose -- not
    from nothing; the demo search's first is zero-shot, so the final judge shows no demo. The
    teacher is right on the even training pairs only: bootstrap candidates carry labelled demos
    of the others, which no validation prompt shows.
    """
    prefs = user_preferences(records).by_user
    chosen = {p.chosen.strip() for ps in prefs.values() for p in ps} | {
        r.chosen.strip() for r in records}
    splits = {u: split_preferences(ps, u, 42, 0.3, "temporal") for u, ps in prefs.items()}
    index = {p.question.strip(): j for train, _ in splits.values() for j, p in enumerate(train)}

    def script(chat):
        if kind(chat) == "persona":
            return "A persona."
        user = chat[-1]["content"]
        question = user.split("<question>\n")[-1].split("\n</question>")[0].strip()
        a, _ = answers(chat)
        right = "A" if a.strip() in chosen else "B"
        wrong = "B" if right == "A" else "A"
        if question in index:  # the teacher: right on the even pairs only
            verdict = right if index[question] % 2 == 0 else wrong
            return f"NOTE[{question}] fits them.\nVerdict: [[{verdict}]]"
        return f"Verdict: [[{wrong}]]"  # validation and evaluation: always wrong

    backend = ScriptedBackend(script)
    rm = SynthesizeMeJudge(_options(tmp_path), backend=backend)
    rm.compare([PairRequest(r.id, r.question, r.chosen, r.rejected) for r in records])
    for persona in rm._personas.values():
        first, second = persona.details["persona_search"], persona.details["demo_search"]
        assert first["evaluated"] == 12 and first["scores"] == [0.0] * 12
        assert first["chosen_name"] == "labelled" and persona.details["persona_demos"] == 4
        assert second["evaluated"] == 13 and second["chosen_name"] == "zero-shot"
        assert persona.demos == []
    persona_chats = [c[-1]["content"] for c in backend.chats if kind(c) == "persona"]
    assert len(persona_chats) == len(prefs)
    for train, _ in splits.values():
        picked = random.Random(0).sample(range(len(train)), MAX_LABELED)
        (text,) = [t for t in persona_chats
                   if all(f"Question: {train[i].question.strip()}\n" in t for i in picked)]
        assert text.count("<choice ") == MAX_LABELED and "Reasoning: " not in text
        for i in picked:  # the pair and the true label
            block = text.split(f"Question: {train[i].question.strip()}\n")[1]
            block = block.split("</choice")[0]
            shown_a = block.split("Answer A: ")[1].split("\nAnswer B: ")[0].strip()
            label = "A" if shown_a == train[i].chosen.strip() else "B"
            assert f"They chose: Answer {label}" in block
    judged = [c[-1]["content"] for c in backend.chats if kind(c) == "judge"]
    for user in judged:  # every demo any prompt shows has its reasoning
        assert user.count("<example ") == len(re.findall(r"^Reasoning: NOTE\[", user, re.M))
        assert "<example " not in user or "Reasoning: " in user
    assert any("<example " in u for u in judged)  # bootstrap candidates do show their notes
