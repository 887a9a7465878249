"""SynthesizeMe's preference method (fit=preferences) on the bundled per-user preference sample.

Scripted backends stand in for the LLM: the prompts it receives, the reasoning it keeps, the demo
set it picks, the retries it makes and the split it uses are checked against what the method must
do; the end-to-end runs go through ``prbench eval`` and plain ``lm_eval`` with a loopback server.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from _synthesizeme_fakes import LoopbackOpenAI, ScriptedBackend, answers, kind, taste_llm
from prbench_plugin_synthesizeme.fitting import parse_persona, seeded_order
from prbench_plugin_synthesizeme.judge import SynthesizeMeJudge
from prbench_plugin_synthesizeme.personas import Persona, split_preferences
from prbench_plugin_synthesizeme.plugin import SynthesizeMeOptions

from prbench.api import (
    PairRequest,
    ParseFailure,
    Pref,
    ProfileView,
    Record,
    load_records,
    parse_options,
    parse_pairwise,
    user_preferences,
)


@pytest.fixture(scope="module")
def records() -> list[Record]:
    return load_records("preferences_sample")


def judge(tmp_path: Path, script, **options) -> tuple[SynthesizeMeJudge, ScriptedBackend]:
    backend = ScriptedBackend(script)
    raw = {"model": "scripted", "persona_cache_dir": str(tmp_path / "personas"),
           "fit": "preferences", "preferences_data": "preferences_sample", **options}
    opts = parse_options(SynthesizeMeOptions, raw, component="synthesizeme")
    return SynthesizeMeJudge(opts, backend=backend), backend


def pairs_of(records: list[Record]) -> list[PairRequest]:
    """Every held-out pair, the chosen answer first in every other record."""
    out = []
    for i, r in enumerate(records):
        first, second = (r.chosen, r.rejected) if i % 2 == 0 else (r.rejected, r.chosen)
        out.append(PairRequest(r.id, r.question, first, second, category=r.category))
    return out


def accuracy(records: list[Record], probs: list[float]) -> float:
    right = [(p > 0.5) if i % 2 == 0 else (p < 0.5) for i, p in enumerate(probs)]
    return sum(right) / len(right)


def test_fitting_uses_each_users_own_pairs_and_beats_chance(records, tmp_path: Path) -> None:
    rm, backend = judge(tmp_path, taste_llm)
    probs = rm.compare(pairs_of(records))
    stats = rm.stats()
    assert stats["fit_modes"] == {"preferences": 18}
    assert stats["personas"]["induced"] == 6  # one persona per user, shared by its 3 records
    prefs = user_preferences(records)
    held = {r.question for r in records}
    boot = [c[-1]["content"] for c in backend.chats if kind(c) == "bootstrap"]
    for user, pairs in prefs.by_user.items():
        train, val = split_preferences(pairs, user, 0, 0.3)
        assert (len(train), len(val)) == (6, 3)
        for p in train:  # each training pair is shown once, with both of its answers
            shown = [b for b in boot if f"<question>\n{p.question}\n" in b]
            assert len(shown) == 1 and p.chosen in shown[0] and p.rejected in shown[0]
    assert len(boot) == 36 and not any(q in b for q in held for b in boot)
    # the scripted LLM learns a taste only from verified notes; with them it gets every held-out
    # pair right, with a persona from the posts alone it never does
    assert accuracy(records, probs) == 1.0
    profile_rm, _ = judge(tmp_path / "p", taste_llm, fit="profile")
    flat = profile_rm.compare([PairRequest(p.record_id, p.question, p.first, p.second,
                                           profile=ProfileView(text=r.profile[0].text))
                               for p, r in zip(pairs_of(records), records, strict=True)])
    assert flat == [0.5] * 18 and profile_rm.stats()["fit_modes"] == {"profile": 18}


def test_reasoning_verification_drops_mismatches(records, tmp_path: Path) -> None:
    def script(chat):
        if kind(chat) == "bootstrap":  # always "A", with a note naming the question
            question = chat[-1]["content"].split("<question>\n")[1].split("\n")[0]
            return f"NOTE[{question}] they like it.\nVerdict: [[A]]"
        return "A persona." if kind(chat) == "persona" else "Verdict: [[A]]"

    rm, backend = judge(tmp_path, script)
    rm.compare(pairs_of(records)[:1])  # user pu01
    train, _ = split_preferences(rm.user_pairs(records[0].id), "pu01", 0, 0.3)
    right = [p for j, p in enumerate(train) if seeded_order(0, "bootstrap", "pu01", j)]
    wrong = [p for p in train if p not in right]
    assert right and wrong  # the seeded order shows the chosen answer as A for some pairs only
    fit = rm.stats()["personas"]
    assert (fit["reasonings_kept"], fit["reasonings_wrong"]) == (len(right), len(wrong))
    persona_chat = next(c[-1]["content"] for c in backend.chats if kind(c) == "persona")
    assert persona_chat.count("Observation ") == len(right)
    for p in right:
        assert f"NOTE[{p.question}]" in persona_chat
    for p in wrong:
        assert f"NOTE[{p.question}]" not in persona_chat
    persona = next(p for p in rm._personas.values() if isinstance(p, Persona))
    assert persona.details["reasonings_kept"] == len(right)


def test_demo_search_picks_the_set_that_wins_on_validation(records, tmp_path: Path) -> None:
    prefs = user_preferences(records).by_user["pu02"]
    train, val = split_preferences(prefs, "pu02", 0, 0.3)
    key_question = train[2].question
    chosen = {p.chosen for p in prefs} | {r.chosen for r in records}

    def script(chat):
        what = kind(chat)
        if what == "bootstrap":
            a, _ = answers(chat)
            return f"Reason.\nVerdict: [[{'A' if a in chosen else 'B'}]]"
        if what == "persona":
            return "Likes exact numbers."
        a, _ = answers(chat)  # right only when the key pair is among the demonstrations
        knows = f"Question: {key_question}" in chat[-1]["content"]
        return f"Verdict: [[{'A' if (a in chosen) == knows else 'B'}]]"

    rm, backend = judge(tmp_path, script)
    record = next(r for r in records if r.extra["user_id"] == "pu02")
    assert rm.compare([PairRequest(record.id, record.question, record.chosen,
                                   record.rejected)]) == [1.0]  # the chosen demos reach the judge
    final = [c[-1]["content"] for c in backend.chats[-2:]]
    assert all(f"<question>\n{record.question}\n" in f and f"Question: {key_question}" in f
               for f in final)
    persona = next(p for p in rm._personas.values() if isinstance(p, Persona))
    acc = persona.details["validation_accuracy"]
    assert persona.details["n_candidate_sets"] == len(acc) == 9  # the empty set + 8 seeded sets
    assert acc[0] == 0.0 and set(acc) == {0.0, 1.0}
    assert persona.details["chosen_set"] == acc.index(1.0)
    assert 1 <= len(persona.demos) <= 4
    assert any(d["question"] == key_question for d in persona.demos)
    assert all(d["reasoning"] == "Reason." for d in persona.demos)  # all verified here
    assert {d["question"] for d in persona.demos} <= {p.question for p in train}
    assert not {d["question"] for d in persona.demos} & {p.question for p in val}


def test_parse_failures_are_retried_at_rising_temperature(tmp_path: Path) -> None:
    seen: Counter[str] = Counter()

    def script(chat):
        if kind(chat) == "persona":
            return "A night worker."
        a, _ = answers(chat)
        seen[a] += 1
        if "NEVER" in chat[-1]["content"] or seen[a] <= 2:  # unreadable twice, then a verdict
            return "Both have merits."
        return "Verdict: [[A]]" if a == "good" else "Verdict: [[B]]"

    rm, backend = judge(tmp_path, script, fit="profile", preferences_data="")
    view = ProfileView(text="Post 1: I work nights.")
    out = rm.compare([PairRequest("r1", "How?", "good", "bad", profile=view),
                      PairRequest("r2", "NEVER?", "good2", "bad2", profile=view)])
    assert out[0] == 1.0 and math.isnan(out[1])
    judged = [t for c, t in zip(backend.chats, backend.temperatures, strict=True)
              if kind(c) == "judge"]
    assert judged[:4] == [0.0] * 4  # the first try of every order, greedy
    assert judged[4:8] == [0.25] * 4 and judged[8:12] == [0.5] * 4  # r1 recovers on try 3
    assert judged[12:] == [0.75] * 2  # r2 is asked 3 times more, then given up
    stats = rm.stats()
    assert stats["parse_retries"] == {"replies_retried": 4, "retry_calls": 10, "recovered": 2,
                                      "temperatures": [0.25, 0.5, 0.75]}
    assert stats["n_parse_failures"] == 2 and stats["n_invalid_orders"] == 2  # final outcomes
    rm2, backend2 = judge(tmp_path, script, fit="profile", preferences_data="",
                          parse_retries="0", persona_cache="false")
    assert math.isnan(rm2.compare([PairRequest("r3", "NEVER?", "x", "y", profile=view)])[0])
    assert sum(kind(c) == "judge" for c in backend2.chats) == 2


def test_retry_temperatures_must_rise() -> None:
    from prbench.api import OptionsError
    from prbench.testing import PluginRegistry

    with pytest.raises(OptionsError, match=r"retry_temperature \(0.75\) is below temperature"):
        PluginRegistry().build("scorer", "synthesizeme", {"model": "m", "temperature": "1"})
    opts = parse_options(SynthesizeMeOptions, {"model": "m", "temperature": "0.5",
                                               "retry_temperature": "1.1"}, component="s")
    rm = SynthesizeMeJudge(opts, backend=ScriptedBackend(taste_llm))
    assert rm.retry_temperatures() == pytest.approx([0.7, 0.9, 1.1])


def test_temporal_split_keeps_the_users_order(records, tmp_path: Path) -> None:
    prefs = [Pref(f"Q{i}?", f"yes {i}", f"no {i}") for i in range(10)]
    train, val = split_preferences(prefs, "u", 0, 0.3, "temporal")
    assert train == prefs[:7] and val == prefs[7:]
    shuffled = split_preferences(prefs, "u", 0, 0.3)
    assert shuffled[0] != prefs[:7] and len(shuffled[1]) == 3
    assert split_preferences(prefs[:2], "u", 0, 0.3, "temporal") == (prefs[:2], [])
    rm, backend = judge(tmp_path, taste_llm, split="temporal")
    rm.compare(pairs_of(records)[:1])
    user_pairs = rm.user_pairs(records[0].id)
    asked = [c[-1]["content"].split("<question>\n")[1].split("\n")[0]
             for c in backend.chats if kind(c) == "bootstrap"]
    assert asked == [p.question for p in user_pairs[:6]]
    persona = next(p for p in rm._personas.values() if isinstance(p, Persona))
    assert persona.details["split"] == "temporal" and persona.details["n_val"] == 3


CORPUS = [
    ("They want metric units.\nVerdict: [[A]]", "A"),
    ("Reasoning here.\nVerdict: [[B]]", "B"),
    ("<think>A looks better... no, B.</think>\nVerdict: [[B]]", "B"),
    ("<think>Verdict: [[A]]</think>\nOn reflection the second fits.\nVerdict: [[B]]", "B"),
    ("**Verdict:** [[A]]", "A"),
    ("verdict: [[b]]", "B"),
    ("Verdict: [[A]] or [[B]]", None),
    ("Both answers are fine.\nVerdict: tie", None),
    ("I cannot decide.", None),
    ("", None),
    ("<think>The person prefers A because", None),
    ("Verdict: [[C]]", None),
    ("They like humour.\nVerdict: [[A]]\n", "A"),
    ("Answer B is kinder.\n\nVerdict: [[B]]  ", "B"),
    ("Verdict: [[A]]\nVerdict: [[B]]", None),
    ("   \n  ", None),
]


@pytest.mark.parametrize(("reply", "expected"), CORPUS)
def test_verdict_reply_corpus(reply: str, expected: str | None) -> None:
    got = parse_pairwise(reply)
    if expected is None:
        assert isinstance(got, ParseFailure), got
    else:
        assert got == expected


def test_reply_corpora_are_large_enough() -> None:
    assert len(CORPUS) >= 15
    assert {e for _, e in CORPUS} == {"A", "B", None}
    assert parse_persona("<think>hmm</think>\nA retired nurse.") == "A retired nurse."
    assert isinstance(parse_persona("<think>never closed"), ParseFailure)
    assert isinstance(parse_persona("<think>x</think>   "), ParseFailure)


# -- end to end: prbench eval and plain lm_eval on the bundled preference sample -----------------


def _model_args(server: LoopbackOpenAI, tmp_path: Path, **extra: str) -> str:
    args = {"scorer": "synthesizeme", "backend": "openai", "model": "taste",
            "base_url": server.base_url, "cache_dir": "", "max_retries": "0",
            "persona_cache_dir": str(tmp_path / "personas"), "fit": "preferences",
            "preferences_data": "preferences_sample", **extra}
    return ",".join(f"{k}={v}" for k, v in args.items())


@pytest.mark.slow
def test_prbench_eval_on_the_preference_sample(tmp_path: Path, capsys) -> None:
    from prbench.testing import run_cli

    with LoopbackOpenAI(taste_llm) as server:
        code = run_cli(["eval", "--tasks", "personalized_preferences_sample_noprofile",
                     "--model_args", _model_args(server, tmp_path), "--output_path",
                     str(tmp_path / "out"), "--no-progress"])
    out = capsys.readouterr().out
    assert code == 0, out[-2000:]
    found = next((tmp_path / "out").rglob("results_*.json"))
    results = json.loads(found.read_text())
    task = results["results"]["personalized_preferences_sample_noprofile"]
    assert task["acc,none"] >= 0.8 and task["invalid,none"] == 0
    stats = results["config"]["prbench"]["scorer"]["runtime"]["scorer"]["stats"]
    assert stats["fit_modes"] == {"preferences": 18} and stats["personas"]["induced"] == 6
    print("synthesizeme fit=preferences, scripted taste LLM, preference sample:",
          task["acc,none"])


@pytest.mark.slow
def test_plain_lm_eval_on_the_preference_sample(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    with LoopbackOpenAI(taste_llm) as server:
        proc = subprocess.run(
            [sys.executable, "-m", "lm_eval", "--tasks", "personalized_preferences_sample",
             "--model", "prbench", "--model_args", _model_args(server, tmp_path),
             "--metadata", json.dumps({"prbench_profile": "all"}),
             "--output_path", str(tmp_path / "out")],
            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
        )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    results = json.loads(next((tmp_path / "out").rglob("results_*.json")).read_text())
    assert results["results"]["personalized_preferences_sample"]["acc,none"] >= 0.8
    stats = results["config"]["prbench"]["scorer"]["runtime"]["scorer"]["stats"]
    assert stats["fit_modes"] == {"preferences": 18}
