"""Tests of the SynthesizeMe plugin: personas, both orders, invalid counts, fit modes, lm-eval."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _synthesizeme_fakes import LoopbackOpenAI, ScriptedBackend, answers, build_tiny_causal_lm, kind
from prbench_plugin_synthesizeme.judge import UNKNOWN_PERSONA, SynthesizeMeJudge, SynthesizeMeRating
from prbench_plugin_synthesizeme.personas import PersonaStore, split_preferences
from prbench_plugin_synthesizeme.plugin import SynthesizeMeOptions, SynthesizeMeRatingOptions

from prbench.api import OptionsError, PairRequest, ProfileView, ScoreRequest, parse_options
from prbench.testing import PluginRegistry

GOOD, BAD = "A plan built around your night shifts.", "A generic plan."
POSTS = ProfileView(text="Post 1 (Category: work): I work night shifts as a nurse.")


def pair(rid: str, first: str = GOOD, second: str = BAD, question: str = "How do I sleep?",
         profile: ProfileView = POSTS) -> PairRequest:
    return PairRequest(record_id=rid, question=question, first=first, second=second,
                       profile=profile)


def prefers_good(chat) -> str:
    """Persona text for persona chats; picks the GOOD answer; 'BROKEN' questions get junk."""
    what = kind(chat)
    if what == "persona":
        return "A night-shift nurse who needs plans that fit irregular hours."
    if what == "rating":
        return "Reasoning.\nRating: 8" if GOOD in chat[-1]["content"] else "Rating: 3"
    if "BROKEN" in chat[-1]["content"]:
        return "Both are fine.\nVerdict: a tie."
    a, _ = answers(chat)
    return "This person needs it.\nVerdict: [[A]]" if GOOD in a else "Verdict: [[B]]"


def judge(tmp_path: Path, script=prefers_good, **options) -> tuple[SynthesizeMeJudge,
                                                                    ScriptedBackend]:
    backend = ScriptedBackend(script)
    raw = {"model": "scripted", "persona_cache_dir": str(tmp_path / "personas"), **options}
    opts = parse_options(SynthesizeMeOptions, raw, component="synthesizeme")
    return SynthesizeMeJudge(opts, backend=backend), backend


def test_both_orders_and_invalid_verdicts(tmp_path: Path) -> None:
    rm, backend = judge(tmp_path)
    out = rm.compare([pair("r1"), pair("r2", first=BAD, second=GOOD),
                      pair("r3", question="BROKEN?")])
    assert out[:2] == [1.0, 0.0] and math.isnan(out[2])
    stats = rm.stats()
    assert stats["n_pairs"] == 3 and stats["n_orders"] == 6
    assert stats["n_invalid_orders"] == 2 and stats["n_pairs_unjudged"] == 1
    assert stats["parse_failure_reasons"] == {"tie": 2}
    assert [(f["item"], f["step"]) for f in stats["failures"]] == [("r3", "judge")] * 2
    assert stats["first_shown_win_rate"] == 0.5 and stats["n_order_flips"] == 0
    assert backend.count("judge") == 6 + 3 * 2  # r3's two orders are asked again 3 times
    assert stats["parse_retries"]["replies_retried"] == 2
    assert stats["parse_retries"]["retry_calls"] == 6 and stats["parse_retries"]["recovered"] == 0
    assert stats["fit_modes"] == {"profile": 3}
    # each order's final reply reaches the harness with its verdict (samples file, explorer)
    first = rm.request_extras([pair("r1"), pair("r2"), pair("r3")])[0]
    assert [r["verdict"] for r in first["replies"]] == ["A", "B"]
    assert first["replies"][0]["reply"] == "This person needs it.\nVerdict: [[A]]"


def test_position_bias_split_orders_are_ties(tmp_path: Path) -> None:
    rm, _ = judge(tmp_path, script=lambda c: "ok" if kind(c) == "persona" else "Verdict: [[A]]")
    assert rm.compare([pair("r1"), pair("r2")]) == [0.5, 0.5]  # a tie, scored wrong
    stats = rm.stats()
    assert stats["first_shown_win_rate"] == 1.0 and stats["n_order_flips"] == 2
    assert stats["order_agreement"] == 0.0
    described = rm.describe()
    assert described["prompt_version"] == "synthesizeme-2" and described["fingerprint"]


def test_one_order_is_seeded(tmp_path: Path) -> None:
    rm, backend = judge(tmp_path, orders="one")
    pairs = [pair(f"r{i}") for i in range(8)]
    assert rm.compare(pairs) == [1.0] * 8
    assert rm.compare(pairs[3:4]) == [1.0]
    assert backend.count("judge") == 9
    shown = [answers(c)[0] == GOOD for c in backend.chats if kind(c) == "judge"]
    assert shown[8] == shown[3] and 0 < sum(shown[:8]) < 8


def test_profile_personas_are_cached_with_prompt_and_model(tmp_path: Path) -> None:
    rm, backend = judge(tmp_path)
    empty = pair("r2", profile=ProfileView(text=""))
    rm.compare([pair("r1"), empty, pair("r1")])
    assert backend.count("persona") == 1  # r1 once; no posts -> no call
    persona_chat = next(c for c in backend.chats if kind(c) == "persona")
    assert "night shifts as a nurse" in persona_chat[-1]["content"]
    judged = [c[-1]["content"] for c in backend.chats if kind(c) == "judge"]
    assert any(UNKNOWN_PERSONA in j for j in judged)
    assert any("night-shift nurse who needs" in j for j in judged)
    assert rm.stats()["personas"]["unknown_user"] == 1
    store = PersonaStore(tmp_path / "personas" / "personas.sqlite")
    assert len(store) == 1
    row = store.store.query("SELECT user, mode, prompt, model FROM personas")[0]
    assert row[0] == "r1" and row[1] == "profile"
    assert "night shifts" in row[2] and json.loads(row[3])["backend"] == "scripted-synthesizeme"
    # a new judge (another run) reads the persona from disk
    rm2, backend2 = judge(tmp_path)
    rm2.compare([pair("r1")])
    assert backend2.count("persona") == 0 and rm2.stats()["personas"]["from_cache"] == 1
    # another profile is another persona
    rm2.compare([pair("r1", profile=ProfileView(text="Post 1: I grow tomatoes."))])
    assert backend2.count("persona") == 1


def test_failed_persona_gives_invalid_pairs_and_is_not_cached(tmp_path: Path) -> None:
    def script(chat):
        return "<think>never ends" if kind(chat) == "persona" else prefers_good(chat)

    rm, backend = judge(tmp_path, script=script)
    assert math.isnan(rm.compare([pair("r1")])[0])
    stats = rm.stats()
    assert stats["n_pairs_persona_failed"] == 1 and stats["personas"]["failed"] == 1
    assert backend.count("judge") == 0
    assert len(PersonaStore(tmp_path / "personas" / "personas.sqlite")) == 0


def _records_with_preferences(tmp_path: Path, prefs: dict[str, list[dict]]) -> Path:
    from prbench.api import load_records

    out = tmp_path / "Art_and_Entertainment.jsonl"
    rows = []
    for r in load_records("sample", domains=["Art_and_Entertainment"]):
        row = r.to_dict()
        row.pop("domain", None)
        if r.id in prefs:
            row["preferences"] = prefs[r.id]
        rows.append(json.dumps(row))
    out.write_text("\n".join(rows) + "\n")
    return out


def _prefs(n: int) -> list[dict]:
    return [{"question": f"Question {i}?", "chosen": f"{GOOD} ({i})", "rejected": f"{BAD} ({i})"}
            for i in range(n)]


def test_preferences_mode_keeps_only_reasoning_that_predicts_the_label(tmp_path: Path) -> None:
    data = _records_with_preferences(tmp_path, {"ae-01": _prefs(6)})

    def script(chat):
        what = kind(chat)
        if what == "bootstrap":  # always says A: right only when the chosen answer was shown as A
            return "They value fit.\nVerdict: [[A]]"
        return prefers_good(chat)

    rm, backend = judge(tmp_path, script=script, preferences_data=str(data), demos=1)
    assert rm.compare([pair("ae-01"), pair("ae-02")]) == [1.0, 1.0]
    fit = rm.stats()["personas"]
    train, val = split_preferences(rm.preferences.by_user["ae-01"], "ae-01", 0, 0.3)
    assert len(train) + len(val) == 6 and len(val) == 2
    boot = [c for c in backend.chats if kind(c) == "bootstrap"]
    right = sum(answers(c)[0].startswith(GOOD) for c in boot)
    assert len(boot) == len(train) and fit["reasonings_kept"] == right
    assert fit["reasonings_wrong"] == len(train) - right
    persona_chats = [c[-1]["content"] for c in backend.chats if kind(c) == "persona"]
    from_pairs = next(p for p in persona_chats if "<observations>" in p)
    assert from_pairs.count("Observation ") == right
    assert rm.stats()["users"]["ae-01"]["mode"] == "preferences"
    assert rm.stats()["users"]["ae-02"]["mode"] == "profile"  # fit=auto: no pairs -> profile
    persona = next(p for p in rm._personas.values() if p.user == "ae-01")
    assert persona.details["validation_accuracy"] and len(persona.demos) <= 1


def test_preferences_must_not_contain_the_evaluated_pair(tmp_path: Path) -> None:
    from prbench.api import load_records

    # a file whose own records are clean (prbench validate rejects a record's own pair among its
    # preferences) but that is used to judge other data: record ae-01's pairs hold ae-02's pair
    rec, other = load_records("sample", domains=["Art_and_Entertainment"])[:2]
    leak = [{"question": other.question, "chosen": other.chosen, "rejected": other.rejected}]
    data = _records_with_preferences(tmp_path, {rec.id: leak + _prefs(2)})
    rm, _ = judge(tmp_path, preferences_data=str(data))
    with pytest.raises(ValueError, match="contain the pair under evaluation"):
        rm.compare([PairRequest(rec.id, other.question, other.rejected, other.chosen)])


def test_preference_data_errors_name_the_record(tmp_path: Path) -> None:
    bad = _records_with_preferences(tmp_path, {"ae-02": [{"question": "Q?", "chosen": "x"}]})
    with pytest.raises(ValueError, match=r"record 'ae-02'.*preferences\[0\]\.rejected"):
        judge(tmp_path, preferences_data=str(bad))
    good = _records_with_preferences(tmp_path, {"ae-02": _prefs(2)})
    rm, _ = judge(tmp_path, preferences_data=str(good), fit="preferences")
    with pytest.raises(ValueError, match="fit=preferences, but record 'ae-03'"):
        rm.compare([pair("ae-03")])
    with pytest.raises(OptionsError, match="needs preferences_data"):
        PluginRegistry().build("scorer", "synthesizeme", {"model": "m", "fit": "preferences"})


def test_rating_mode(tmp_path: Path) -> None:
    backend = ScriptedBackend(prefers_good)
    opts = parse_options(SynthesizeMeRatingOptions, {
        "model": "m", "persona_cache": "false"}, component="synthesizeme-rating")
    rm = SynthesizeMeRating(opts, backend=backend)
    reqs = [ScoreRequest("r1", "How?", GOOD, POSTS), ScoreRequest("r1", "How?", BAD, POSTS),
            ScoreRequest("r2", "BROKEN", "junk", POSTS)]
    backend.script = lambda c: prefers_good(c) if "junk" not in c[-1]["content"] else "hmm"
    out = rm.score(reqs)
    assert out[:2] == [8.0, 3.0] and math.isnan(out[2])
    assert rm.stats()["n_parse_failures"] == 1 and backend.count("persona") == 2
    assert rm.fingerprint() != judge(tmp_path)[0].fingerprint()


def test_openai_compatible_server_and_runtime(tmp_path: Path) -> None:
    from prbench.api import build_runtime

    with LoopbackOpenAI(prefers_good) as server:
        options = {"backend": "openai", "model": "judge", "base_url": server.base_url,
                   "cache_dir": "", "max_retries": "0", "persona_cache_dir": str(tmp_path),
                   "cache": "false", "progress": "false"}
        with build_runtime("synthesizeme", options) as rt:
            assert rt.pairwise
            assert rt.compare([pair("r1"), pair("r2", first=BAD, second=GOOD)]) == [1.0, 0.0]
            described = rt.describe()
        # identical chats are sent once: one persona (same posts), r2 = r1 swapped (2 orders)
        assert server.calls == 3
    assert described["scorer"]["stats"]["first_shown_win_rate"] == 0.5


# -- end to end with a tiny random causal LM ----------------------------------------------------


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_causal_lm(tmp_path_factory.mktemp("synthme") / "lm")


@pytest.mark.slow
def test_prbench_eval_with_a_tiny_causal_lm(tiny_lm: Path, tmp_path: Path, capsys) -> None:
    from prbench.testing import run_cli

    code = run_cli(["eval", "--tasks", "personalized_rewardbench_sample", "--limit", "3",
                 "--device", "cpu", "--model_args",
                 f"scorer=synthesizeme,backend=hf,model={tiny_lm},max_new_tokens=4,"
                 "persona_max_new_tokens=6,cache_dir=", "--output_path", str(tmp_path / "out"),
                 "--max-invalid", "1"])  # a random LM gives no readable verdict
    out = capsys.readouterr().out
    assert code == 0, out[-2000:]
    found = next((tmp_path / "out").rglob("results_*.json"))
    assert found.with_name(found.name.replace("results_", "prbench_manifest_")).exists()
    results = json.loads(found.read_text())
    group = results["results"]["personalized_rewardbench_sample"]
    print("synthesizeme tiny causal LM (limit 3/domain):",
          {k: v for k, v in group.items() if "," in k})
    stats = results["config"]["prbench"]["scorer"]["runtime"]["scorer"]["stats"]
    # a random LM never ends its persona within 6 tokens: a reply cut at the budget is a failure
    # (reason truncated), never a persona, and its pairs get no verdict
    assert stats["n_pairs"] == 9 and stats["personas"]["induced"] == 0
    assert stats["personas"]["failed"] == 9
    assert "truncated" in json.dumps(stats["failures"])
    assert stats["fit_modes"] == {"profile": 9}  # no labelled pairs in the benchmark: said so
    assert group["invalid,none"] == 1.0


@pytest.mark.slow
def test_plain_lm_eval_with_a_tiny_causal_lm(tiny_lm: Path, tmp_path: Path) -> None:
    args = (f"scorer=synthesizeme-rating,backend=hf,model={tiny_lm},max_new_tokens=4,"
            "persona_max_new_tokens=6,cache_dir=")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "lm_eval", "--tasks", "personalized_rewardbench_sample",
         "--model", "prbench", "--device", "cpu", "--limit", "2", "--model_args", args,
         "--output_path", str(tmp_path / "out")],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    results_file = next((tmp_path / "out").rglob("results_*.json"))
    results = json.loads(results_file.read_text())
    assert list(results_file.parent.glob("prbench_manifest_*.json"))  # written by plain lm_eval too
    scorer = results["config"]["prbench"]["scorer"]
    assert scorer["id"] == "synthesizeme-rating"
    personas = scorer["runtime"]["scorer"]["stats"]["personas"]
    assert personas["induced"] == 0 and personas["failed"] == 6  # cut at 6 tokens: no persona
    assert scorer["runtime"]["scorer"]["stats"]["fit_modes"] == {"profile": 6}
