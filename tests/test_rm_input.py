"""Reward-model inputs: the released with-profile format, pooling, truncation and invalid inputs."""

from __future__ import annotations

import logging
import math
import random

import pytest

from prbench.profiles.base import ProfileView, render_posts
from prbench.record_schema import ProfileItem
from prbench.scoring.base import ScoreRequest
from tests._hf_fixtures import build_tiny_model, sample_text

TOL = 1e-5

#: A SmolLM2-style template: every message, the last one too, ends with ``<|end|>`` (the pad).
PAD_ENDING_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("rm-input")
    return {
        "llama": build_tiny_model(root / "llama", arch="llama", seed=3),
        "qwen2-pad-end": build_tiny_model(
            root / "qwen2-pad-end", arch="qwen2", tokenizer_adds_bos=False, seed=4,
            pad_token="<|end|>", template=PAD_ENDING_TEMPLATE,
        ),
    }


def build(path, **options):
    from prbench.plugins import get_registry

    return get_registry().build("scorer", "hf-classifier", {"pretrained": str(path), **options})


POSTS = (
    ProfileItem(id="p1", category="Arts", text="I play the piano every morning."),
    ProfileItem(id="p2", category="Lifestyle", text="Short recipes, please.\nNo long lists."),
)


def posts_request(response="Try a simple song first.", question="How do I start?"):
    view = ProfileView(text=render_posts(POSTS), items=POSTS, builder="all")
    return ScoreRequest(record_id="r1", question=question, profile=view, response=response)


def requests(n=6, seed=0, answer_words=(3, 30)):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        question = sample_text(rng, rng.randint(4, 12))
        profile = ProfileView(text=sample_text(rng, rng.randint(0, 20)))
        for _ in range(2):
            out.append(ScoreRequest(
                record_id=f"q{i}", question=question, profile=profile,
                response=sample_text(rng, rng.randint(*answer_words)),
            ))
    return out


# -- input_format=released_profile ---------------------------------------------------------------

RELEASED_USER_TURN = (
    "How do I start?"
    "Post 1 (Category: Arts):\nI play the piano every morning.\n"
    "Post 2 (Category: Lifestyle):\nShort recipes, please.\nNo long lists."
)


def test_released_profile_renders_the_released_bon_and_ppo_string(models):
    scorer = build(models["llama"], input_format="released_profile")
    ids = scorer.encode([posts_request()])[0]
    text = scorer.tokenizer.decode(ids)
    assert text == (
        "<s><|user|>\n" + RELEASED_USER_TURN + "<|end|>\n"
        "<|assistant|>\nTry a simple song first.<|end|>\n"
    )
    default = scorer.tokenizer.decode(build(models["llama"]).encode([posts_request()])[0])
    assert "Post 1 (Category: Arts): I play" in default and RELEASED_USER_TURN not in default
    assert scorer.describe()["options"]["input_format"] == "released_profile"
    assert scorer.fingerprint() != build(models["llama"]).fingerprint()


def test_released_profile_refuses_what_it_fixes(models):
    from prbench.options import OptionsError

    for clash in ({"profile_position": "system"}, {"profile_position": "none"},
                  {"user_format": "{question}\n{profile}"}):
        with pytest.raises(OptionsError, match="released_profile fixes the user turn"):
            build(models["llama"], input_format="released_profile", **clash)


def test_released_profile_keeps_a_view_that_is_not_plain_posts_and_says_so(models, caplog):
    scorer = build(models["llama"], input_format="released_profile")
    plan = "The user wants:\n- brevity\n\n" + render_posts(POSTS)
    planned = ProfileView(text=plan, items=POSTS, builder="planner")
    req = ScoreRequest(record_id="r2", question="How do I start?", profile=planned, response="Hi")
    with caplog.at_level(logging.WARNING, logger="prbench"):
        text = scorer.tokenizer.decode(scorer.encode([req])[0])
    assert "<|user|>\nHow do I start?" + plan + "<|end|>" in text
    assert "1 profile view(s) are not plain posts" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="prbench"):
        scorer.encode([posts_request()])
    assert "not plain posts" not in caplog.text


# -- pooling --------------------------------------------------------------------------------------


def test_pad_ending_template_scores_like_the_models_own_forward(models):
    import torch
    from transformers import AutoModelForSequenceClassification

    path = models["qwen2-pad-end"]
    reqs = requests(n=5, seed=1)
    scorer = build(path, prefix_sharing="off")
    ours = scorer.score(reqs)
    pad = scorer.tokenizer.pad_token_id
    inputs = scorer.encode(reqs)
    assert all(ids[-1] == pad for ids in inputs), "every chat ends with the pad token"
    model = AutoModelForSequenceClassification.from_pretrained(path).eval()
    with torch.inference_mode():
        theirs = [model(input_ids=torch.as_tensor([ids])).logits[0, 0].item() for ids in inputs]
    assert max(abs(a - b) for a, b in zip(ours, theirs, strict=True)) <= TOL
    assert "not the pad token" in scorer.describe()["resolved"]["pooling"]
    # the other rule reads the pad position: other scores, another fingerprint
    at_pad = build(path, prefix_sharing="off", pooling="last_token")
    other = at_pad.score(reqs)
    assert min(abs(a - b) for a, b in zip(other, theirs, strict=True)) > 1e-3
    assert at_pad.fingerprint() != scorer.fingerprint()
    assert at_pad.describe()["resolved"]["pooling"].startswith("last token, pad tokens included")


def test_prefix_sharing_reads_the_same_token_as_plain_scoring(models):
    path = models["qwen2-pad-end"]
    reqs = requests(n=4, seed=2, answer_words=(10, 30))
    for pooling in ("model", "last_token"):
        plain = build(path, prefix_sharing="off", pooling=pooling).score(reqs)
        shared_scorer = build(path, prefix_sharing="on", prefix_min_tokens=2, pooling=pooling)
        shared = shared_scorer.score(reqs)
        assert shared_scorer.stats["shared_groups"] > 0
        assert max(abs(a - b) for a, b in zip(plain, shared, strict=True)) <= 1e-4, pooling


def test_released_format_pads_on_the_tokenizers_side(models, tmp_path):
    import json
    import shutil

    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    path = tmp_path / "left"
    shutil.copytree(models["qwen2-pad-end"], path)
    config = json.loads((path / "tokenizer_config.json").read_text())
    (path / "tokenizer_config.json").write_text(json.dumps({**config, "padding_side": "left"}))
    tokenizer = AutoTokenizer.from_pretrained(path)
    assert tokenizer.padding_side == "left"
    reqs = [ScoreRequest(record_id=r.record_id, question=r.question, response=r.response)
            for r in requests(n=3, seed=5)]
    scorer = build(path, input_format="released", profile_position="none", max_batch_size=8)
    ours = scorer.score(reqs)
    assert scorer.describe()["resolved"]["pooling"] == "the model's own forward, left padding"
    texts = [scorer.encoder.render(r.question, r.response, "") for r in reqs]
    batch = tokenizer(texts, return_tensors="pt", padding=True)
    model = AutoModelForSequenceClassification.from_pretrained(path).eval()
    with torch.inference_mode():
        theirs = model(**batch).logits[:, 0].tolist()
    assert max(abs(a - b) for a, b in zip(ours, theirs, strict=True)) <= TOL


# -- truncation and answers too long to score ---------------------------------------------------


def test_truncation_left_keeps_the_bos_and_the_last_tokens(models):
    reqs = requests(n=2, seed=6, answer_words=(40, 40))
    full = build(models["llama"]).encode(reqs)
    limit = min(len(ids) for ids in full) - 5
    scorer = build(models["llama"], max_length=limit, truncation="left")
    cut = scorer.encode(reqs)
    bos = scorer.tokenizer.bos_token_id
    for ids, whole in zip(cut, full, strict=True):
        assert len(ids) == limit
        assert ids == [bos, *whole[len(whole) - (limit - 1):]]
    assert scorer.stats["truncated_left"] == len(reqs)
    assert all(math.isfinite(s) for s in scorer.score(reqs))
    assert scorer.fingerprint() != build(models["llama"], max_length=limit).fingerprint()


def test_an_answer_too_long_alone_is_one_invalid_input_not_the_end_of_the_run(models, caplog):
    reqs = requests(n=3, seed=7, answer_words=(5, 8))
    rng = random.Random(8)
    long_answer = ScoreRequest(record_id="long", question="Q?", response=sample_text(rng, 120))
    batch = [*reqs[:3], long_answer, *reqs[3:]]
    limit = max(len(ids) for ids in build(models["llama"]).encode(reqs)) + 2
    alone = build(models["llama"], max_length=limit).score(reqs)
    scorer = build(models["llama"], max_length=limit)
    with caplog.at_level(logging.WARNING, logger="prbench"):
        scores = scorer.score(batch)
    assert math.isnan(scores[3])
    assert scores[:3] + scores[4:] == pytest.approx(alone, abs=TOL)
    assert scorer.encode([long_answer]) == [[]]
    assert scorer.stats["invalid_too_long"] == 1
    (failure,) = scorer.failures()
    assert failure["item"] == "long" and failure["reason"] == "too-long"
    assert f"more than max_length={limit}" in failure["detail"]
    extras = scorer.request_extras(batch)
    assert extras[3] == {"invalid": failure["detail"]}
    assert extras[:3] == [None] * 3
    assert "1 input(s) not scored" in caplog.text
    # truncation=left scores it instead (reward-bench's rule)
    assert math.isfinite(build(models["llama"], max_length=limit, truncation="left").score(
        [long_answer])[0])


@pytest.mark.slow
def test_invalid_pairs_are_counted_and_explained_in_a_run(models, tmp_path, capsys):
    """An eval where some answers are too long: the run finishes, the others are scored, the
    pairs count as invalid in the results and summary, the samples say why."""
    import json

    from prbench.api import SAMPLE_DIR, load_records
    from tests._harness_fixtures import results_and_manifest, run_eval

    encoder = build(models["llama"]).encoder
    records = load_records(SAMPLE_DIR)
    alone = sorted(len(encoder.encode(["x"], [a], [""])[0].ids)
                   for r in records for a in (r.chosen, r.rejected))
    limit = alone[len(alone) * 9 // 10]  # about nine answers in ten fit
    out = tmp_path / "out"
    code, stdout, err = run_eval(
        ["eval", "--tasks", "personalized_rewardbench_sample_noprofile", "--model_args",
         f"scorer=hf-classifier,pretrained={models['llama']},max_length={limit}",
         "--output_path", str(out), "--log_samples", "--max_invalid", "1"], capsys)
    assert code == 0, err
    results, manifest, path = results_and_manifest(out)
    invalid = sum(v.get("invalid,none", 0) * results["n-samples"][t]["effective"]
                  for t, v in results["results"].items() if t in results["n-samples"])
    assert 0 < round(invalid) < len(records)
    assert "pair(s) without a verdict" in stdout
    assert manifest["scorer"]["stats"]["invalid_too_long"] >= round(invalid)  # answers unscored
    explained = 0
    for file in path.parent.glob("samples_*.jsonl"):
        for line in file.read_text(encoding="utf-8").splitlines():
            sample = json.loads(line)
            if sample["invalid"]:
                why = sample["invalid_reason"]
                assert set(why) <= {"chosen", "rejected"} and why
                assert all(f"more than max_length={limit}" in w for w in why.values())
                explained += 1
            else:
                assert "invalid_reason" not in sample
    assert explained == round(invalid)


def test_served_rm_renders_released_profile_and_skips_answers_too_long(models):
    """served-rm shares the rendering options: the same ids as hf-classifier for
    input_format=released_profile, and an answer too long alone is not sent (invalid, reason)."""
    from prbench.plugins import get_registry
    from tests._served_fixtures import FakeRMServer

    path = models["llama"]
    rng = random.Random(9)
    too_long = ScoreRequest(record_id="long", question="Q?", response=sample_text(rng, 120))
    batch = [posts_request(), posts_request(response="Scales, then songs."), too_long]
    local = build(path, input_format="released_profile", max_length=120, prefix_sharing="off")
    expected = local.score(batch)
    with FakeRMServer(path, engine="vllm") as server:
        scorer = get_registry().build("scorer", "served-rm", {
            "base_url": server.base_url, "model": "tiny-rm", "tokenizer": str(path),
            "input_format": "released_profile", "max_length": 120})
        got = scorer.score(batch)
        sent = [x for p in server.posts() for x in p["input"]]
    assert sorted(map(tuple, sent)) == sorted(map(tuple, local.encode(batch[:2])))
    assert got[:2] == pytest.approx(expected[:2], abs=TOL)
    assert math.isnan(got[2]) and math.isnan(expected[2])
    stats = scorer.stats()
    assert stats["failure_reasons"] == {"too-long": 1} and stats["inputs_sent"] == 2
    assert scorer.request_extras(batch)[2]["invalid"] == local.failures()[0]["detail"]


# -- input_format=released_bon: the released BoN/score.py, re-implemented from docs/scorers.md ----

#: A ChatML template (Qwen-style: no BOS anywhere).
CHATML_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="module")
def bon_models(tmp_path_factory):
    """A Llama-3-style model (the template writes the BOS and the tokenizer adds another), a
    ChatML model (no BOS) and a two-label head."""
    root = tmp_path_factory.mktemp("released-bon")
    return {
        "llama3-style": build_tiny_model(root / "l3", arch="llama", template_adds_bos=True,
                                         tokenizer_adds_bos=True, seed=11),
        "chatml": build_tiny_model(root / "chatml", arch="qwen2", tokenizer_adds_bos=False,
                                   template=CHATML_TEMPLATE, seed=12),
        "two-label": build_tiny_model(root / "two", arch="llama", template_adds_bos=True,
                                      num_labels=2, seed=13),
    }


def bon_requests(n=8, seed=21):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        posts = tuple(
            ProfileItem(id=f"p{i}{k}", category=rng.choice(["Arts", "Lifestyle"]),
                        text=sample_text(rng, rng.randint(3, 15)))
            for k in range(rng.randint(1, 3))
        )
        view = ProfileView(text=render_posts(posts), items=posts, builder="all")
        question = sample_text(rng, rng.randint(4, 10)) + "?"
        for _ in range(2):
            out.append(ScoreRequest(record_id=f"b{i}", question=question, profile=view,
                                    response=sample_text(rng, rng.randint(3, 25))))
    return out


def described_bon_scores(path, reqs, *, batch_size=4, max_length=8192):
    """docs/scorers.md's description of the released BoN scorer, written out: the user turn is
    the question immediately followed by the posts ('Post i (Category: c):' + newline + text,
    joined by newlines); the chat goes through the template as text, is tokenised with the
    tokenizer's default special tokens, padded (pad = eos when there is none) and cut to the
    first max_length tokens; the reward is the logit of a one-label head, else the last entry of
    the softmax."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForSequenceClassification.from_pretrained(path).eval()
    scores = []
    for start in range(0, len(reqs), batch_size):
        texts = []
        for r in reqs[start:start + batch_size]:
            posts = "\n".join(f"Post {k} (Category: {p.category}):\n{p.text}"
                              for k, p in enumerate(r.profile.items, 1))
            chat = [{"role": "user", "content": r.question + posts},
                    {"role": "assistant", "content": r.response}]
            texts.append(tok.apply_chat_template(chat, tokenize=False))
        inputs = tok(texts, return_tensors="pt", padding=True, truncation=True,
                     max_length=max_length)
        with torch.no_grad():
            logits = model(**inputs).logits
        if logits.shape[-1] == 1:
            scores += logits[:, 0].tolist()
        else:
            scores += torch.softmax(logits, dim=-1)[:, -1].tolist()
    return scores


@pytest.mark.parametrize("name", ["llama3-style", "chatml", "two-label"])
def test_released_bon_scores_as_the_described_released_bon_scorer(bon_models, name):
    path = bon_models[name]
    reqs = bon_requests()
    expected = described_bon_scores(path, reqs)
    scorer = build(path, input_format="released_bon")
    assert scorer.score(reqs) == pytest.approx(expected, abs=TOL)
    one_bos = build(path, input_format="released_profile", prefix_sharing="off").score(reqs)
    if name == "chatml":  # no BOS and one label: the text preset already gives these scores
        assert one_bos == pytest.approx(expected, abs=TOL)
    else:  # two BOS, or softmax[-1] of two labels: only released_bon gives them
        assert max(abs(a - b) for a, b in zip(one_bos, expected, strict=True)) > 1e-3
    assert scorer.describe()["resolved"]["prefix_sharing"] == "off (input_format=released_bon)"


def test_released_bon_keeps_the_two_bos_and_cuts_the_end(bon_models):
    scorer = build(bon_models["llama3-style"], input_format="released_bon", max_length=24)
    bos = scorer.tokenizer.bos_token_id
    ids = scorer.encode(bon_requests(n=2))
    assert all(x[:2] == [bos, bos] and len(x) <= 24 for x in ids)
    assert scorer.stats["truncated_end"] == len(ids)


def test_released_bon_refuses_what_it_fixes(bon_models):
    from prbench.options import OptionsError

    for clash, words in (({"profile_position": "system"}, "fixes the user turn"),
                         ({"bos": "always"}, "cannot be combined with bos=always"),
                         ({"label_index": 1}, "cannot be combined with label_index=1")):
        with pytest.raises((OptionsError, ValueError), match=f"input_format=released_bon {words}"):
            build(bon_models["two-label"], input_format="released_bon", **clash)
