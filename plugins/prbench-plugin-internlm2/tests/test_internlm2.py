from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _internlm2_models import build_reward_folder

from prbench.api import OptionsError, ProfileView, ScoreRequest
from prbench.testing import PluginRegistry

PROFILE = ProfileView(text="Post 1 (Category: Art): I paint at night with a small lamp. " * 3)
REQUESTS = [
    ScoreRequest("r1", "Which lens suits night photography?", "A fast prime lens.", PROFILE),
    ScoreRequest("r1", "Which lens suits night photography?", "Any zoom lens will do.", PROFILE),
    ScoreRequest("r2", "How do I keep a morning habit?", "Plan it the night before and walk."),
    ScoreRequest("r3", "Best way to learn piano?", "Practice a little every day."),
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_reward_folder(tmp_path_factory.mktemp("internlm2") / "rm")


def _build(folder: Path, **options: str):
    raw = {"pretrained": str(folder), "trust_remote_code": "true", **options}
    return PluginRegistry().build("scorer", "internlm2-reward", raw)


def test_registered_and_options_listed() -> None:
    registry = PluginRegistry()
    assert registry.plugins["internlm2"].components == ["scorer:internlm2-reward"]
    names = {r["name"] for r in registry.get("scorer", "internlm2-reward").describe_options()}
    assert {"pretrained", "trust_remote_code", "batch_size", "profile_position"} <= names


def test_refuses_to_load_without_trust_remote_code(folder: Path) -> None:
    with pytest.raises(OptionsError, match="trust_remote_code=true") as err:
        PluginRegistry().build("scorer", "internlm2-reward", {"pretrained": str(folder)})
    assert "never runs downloaded code" in str(err.value)
    with pytest.raises(OptionsError, match="trust_remote_code"):
        PluginRegistry().build(
            "scorer", "internlm2-reward", {"pretrained": str(folder), "trust_remote_code": "no"}
        )


def _get_score_ids(scorer, chat) -> list[int]:
    """The ids the checkpoint's get_score builds for a chat (its recipe, restated)."""
    text = scorer.tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=False)
    ids = scorer.tokenizer.encode(text, add_special_tokens=False)
    return [*ids, scorer.model.config.reward_token_id]


def test_scores_equal_the_checkpoints_get_score(folder: Path) -> None:
    scorer = _build(folder, batch_size="3")
    scores = scorer.score(REQUESTS)
    chats, _ = scorer.chats(REQUESTS)
    own = [scorer.model.get_score(scorer.tokenizer, chat, use_cache=False) for chat in chats]
    assert scores == pytest.approx(own, abs=1e-5)
    assert len(set(scores)) == len(scores)
    assert chats[0][0]["content"].startswith("Some of my earlier posts:")  # profile in user turn
    assert scorer.stats()["forward_calls"] == 2  # 4 chats, at most 3 per call
    # a row keeps the positions it has alone: the batch it lands in does not move its score
    assert _build(folder, batch_size="1").score(REQUESTS[::-1]) == pytest.approx(
        scores[::-1], abs=1e-5
    )


def test_input_ids_follow_get_score_with_one_bos(folder: Path) -> None:
    scorer = _build(folder)
    scorer.score(REQUESTS[:1])
    chats, _ = scorer.chats(REQUESTS)
    reward_id = scorer.model.config.reward_token_id
    for chat in chats:
        ids = scorer.input_ids(chat, reward_id)
        assert ids == _get_score_ids(scorer, chat)
        assert ids[-1] == reward_id and ids.count(reward_id) == 1
        assert ids[0] == scorer.tokenizer.bos_token_id  # the template writes it ...
        assert ids.count(scorer.tokenizer.bos_token_id) == 1  # ... and nothing adds another


def test_exact_mode_calls_the_checkpoints_get_score(folder: Path) -> None:
    exact = _build(folder, call="get_score")
    scores = exact.score(REQUESTS)
    assert exact.stats()["get_score_calls"] == len(REQUESTS)
    assert "forward_calls" not in exact.stats()
    assert scores == pytest.approx(_build(folder).score(REQUESTS), abs=1e-5)
    assert exact.describe()["settings"]["call"] == "get_score"
    assert exact.fingerprint() != _build(folder).fingerprint()
    with pytest.raises(OptionsError, match="call"):
        _build(folder, call="get_scores")


def test_paths_that_transformers_5_broke_are_not_taken(folder: Path) -> None:
    """The checkpoint API's batched get_scores and its cached forward fail under transformers 5."""
    from transformers import DynamicCache

    scorer = _build(folder)
    assert len(scorer.score(REQUESTS)) == len(REQUESTS)
    chats, _ = scorer.chats(REQUESTS[:2])
    if not hasattr(scorer.tokenizer, "batch_encode_plus"):
        with pytest.raises(AttributeError, match="batch_encode_plus"):
            scorer.model.get_scores(scorer.tokenizer, chats)
    if not hasattr(DynamicCache, "from_legacy_cache"):
        with pytest.raises(AttributeError, match="from_legacy_cache"):
            scorer.model.get_score(scorer.tokenizer, chats[0])  # config.use_cache is true


def test_profile_positions_and_truncation(folder: Path) -> None:
    none = _build(folder, profile_position="none")
    chats, _ = none.chats(REQUESTS[:1])
    assert chats[0] == [
        {"role": "user", "content": REQUESTS[0].question},
        {"role": "assistant", "content": REQUESTS[0].response},
    ]
    system = _build(folder, profile_position="system")
    assert system.chats(REQUESTS[:1])[0][0][0]["role"] == "system"
    short = _build(folder, max_length="60")
    chats, lengths = short.chats(REQUESTS[:1])
    assert max(lengths) <= 60
    assert chats[0][1]["content"] == REQUESTS[0].response  # the answer is never cut
    assert short.stats()["truncated_profile"] == 1
    assert len(chats[0][0]["content"]) < len(REQUESTS[0].profile.text)


def test_released_profile_and_an_answer_too_long_to_score(folder: Path) -> None:
    import math

    from prbench.api import ProfileItem, render_posts

    posts = (ProfileItem("p1", "Art", "I paint at night."), ProfileItem("p2", "Travel", "Trains."))
    view = ProfileView(text=render_posts(posts), items=posts)
    req = ScoreRequest("r9", "Which lamp?", "A warm one.", view)
    released = _build(folder, input_format="released_profile")
    chats, _ = released.chats([req])
    assert chats[0][0] == {"role": "user", "content": (
        "Which lamp?Post 1 (Category: Art):\nI paint at night.\nPost 2 (Category: Travel):\nTrains."
    )}
    assert released.fingerprint() != _build(folder).fingerprint()
    too_long = ScoreRequest("long", "Q?", "many words here " * 40)
    short = _build(folder, max_length="40")
    scores = short.score([REQUESTS[3], too_long])
    assert math.isfinite(scores[0]) and math.isnan(scores[1])
    assert short.failures()[0]["item"] == "long"
    assert short.request_extras([REQUESTS[3], too_long])[1]["invalid"].startswith("request 1")
    assert short.stats()["invalid_too_long"] == 1


def test_describe_and_fingerprint(folder: Path) -> None:
    scorer = _build(folder)
    described = scorer.describe()
    assert described["component"] == "internlm2-reward"
    assert set(described["settings"]["remote_code"]) == {
        "configuration_internlm2.py", "modeling_internlm2.py"
    }
    assert described["resolved"]["dtype"] == "float32"  # auto on a CPU; float16 on a GPU
    assert described["fingerprint"] == scorer.fingerprint() == _build(folder).fingerprint()
    assert _build(folder, profile_position="none").fingerprint() != scorer.fingerprint()


def test_prbench_eval_end_to_end(folder: Path, tmp_path: Path, capsys) -> None:
    from prbench.testing import run_cli

    args = f"scorer=internlm2-reward,pretrained={folder},trust_remote_code=true"
    code = run_cli(["eval", "--tasks", "personalized_rewardbench_sample_noprofile",
                 "--model_args", args, "--output_path", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert code == 0, out[-2000:]
    found = sorted((tmp_path / "out").rglob("results_*.json"))
    manifest = found[0].with_name(found[0].name.replace("results_", "prbench_manifest_"))
    assert manifest.exists()
    results = json.loads(found[0].read_text())
    acc = results["results"]["personalized_rewardbench_sample_noprofile"]["acc_macro,none"]
    print("internlm2 tiny remote-code sample acc_macro:", acc)
    assert 0.0 <= acc <= 1.0


@pytest.mark.slow
def test_plain_lm_eval_end_to_end(folder: Path, tmp_path: Path) -> None:
    args = f"scorer=internlm2-reward,pretrained={folder},trust_remote_code=true"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "lm_eval", "--tasks", "personalized_rewardbench_sample_noprofile",
         "--model", "prbench", "--model_args", args, "--output_path", str(tmp_path / "out")],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    found = sorted((tmp_path / "out").rglob("results_*.json"))
    results = json.loads(found[0].read_text())
    assert results["config"]["prbench"]["scorer"]["id"] == "internlm2-reward"
    assert 0.0 <= results["results"]["personalized_rewardbench_sample_noprofile"][
        "acc_macro,none"] <= 1.0


def test_runtime_caches_by_fingerprint(folder: Path) -> None:
    from prbench.api import build_runtime

    options = {"pretrained": str(folder), "trust_remote_code": "true", "progress": "false"}
    with build_runtime("internlm2-reward", options) as rt:
        first = rt.score(REQUESTS + REQUESTS[:1])  # a duplicate runs once
        assert rt.stats()["computed"] == 4
        assert rt.describe()["scorer"]["settings"]["remote_code"]
    with build_runtime("internlm2-reward", options) as rt:
        assert rt.score(REQUESTS) == first[:4]
        assert rt.stats()["computed"] == 0


def _kept(record: dict) -> str:
    """The text a record says was tokenised: the whole text, or what its cut kept."""
    cut = record["cut"]
    if cut is None:
        return record["text"]
    assert cut["side"] == "middle"
    return cut.get("text_sent") or record["text"][:cut["char"]] + record["text"][cut["end_char"]:]


@pytest.mark.parametrize("max_length", ["512", "60"])
def test_request_inputs_are_the_chats_it_scores(folder: Path, max_length: str) -> None:
    scorer = _build(folder, max_length=max_length)
    reward_token = 7
    chats, lengths = scorer.chats(REQUESTS)
    records = scorer.request_inputs(REQUESTS, sent=True)
    for request, chat, length, record in zip(REQUESTS, chats, lengths, records, strict=True):
        rendered = scorer.tokenizer.apply_chat_template(
            chat, chat_template=scorer.encoder.template, tokenize=False,
            add_generation_prompt=False)
        assert _kept(record) == rendered  # the very text get_score's ids come from
        assert record["tokens"] == length == len(scorer.input_ids(chat, reward_token))
        assert (record["cut"] is None) == (record["tokens"] == record["tokens_full"])
        if request.profile.text:
            start, end = record["profile"]
            assert record["text"][start:end] == request.profile.text
    if max_length == "60":
        assert any(r["cut"] for r in records)
    before = dict(scorer.stats())
    assert scorer.request_inputs(REQUESTS, sent=False) == records  # rebuilt, nothing counted
    assert scorer.stats() == before
