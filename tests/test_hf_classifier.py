"""The ``hf-classifier`` scorer: invariance, BOS, truncation, prefix sharing, options."""

from __future__ import annotations

import math
import random
import subprocess
import sys

import pytest

from prbench.profiles.base import ProfileView
from prbench.scoring.base import ScoreRequest
from tests._hf_fixtures import build_tiny_model, sample_text, score_requests

TOL = 1e-5


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Tiny RMs: (arch, tokenizer adds BOS, template adds BOS) -> folder."""
    root = tmp_path_factory.mktemp("rms")
    specs = {
        "llama-tokbos": ("llama", True, False),
        "qwen2-nobos": ("qwen2", False, False),
        "llama-bothbos": ("llama", True, True),
        "qwen2-tplbos": ("qwen2", False, True),
    }
    built = {
        name: build_tiny_model(
            root / name, arch=arch, tokenizer_adds_bos=tok, template_adds_bos=tpl, seed=i
        )
        for i, (name, (arch, tok, tpl)) in enumerate(specs.items())
    }
    # Two labels, and BOS from both the tokenizer and the template: the three places where the
    # released script's numbers differ from prbench's default format.
    built["llama-bothbos-2labels"] = build_tiny_model(
        root / "llama-bothbos-2labels", arch="llama", tokenizer_adds_bos=True,
        template_adds_bos=True, num_labels=2, seed=7,
    )
    return built


def make_requests(n_questions=8, answers=2, seed=0, profile_words=(0, 30), answer_words=(3, 40)):
    return score_requests(n_questions, answers, seed, profile_words=profile_words,
                          answer_words=answer_words)


def build(path, **options):
    from prbench.plugins import get_registry

    opts = {"pretrained": str(path), **options}
    return get_registry().build("scorer", "hf-classifier", opts)


def max_diff(a, b):
    assert len(a) == len(b)
    return max(abs(x - y) for x, y in zip(a, b, strict=True))


# -- exactness ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["llama-tokbos", "qwen2-nobos"])
def test_scores_do_not_depend_on_batch_size(models, name):
    requests = make_requests(n_questions=10, seed=1)
    ref_scorer = build(models[name], max_batch_size=1, prefix_sharing="off")
    ref = ref_scorer.score(requests)
    assert len(set(ref)) == len(ref), "distinct answers get distinct scores"
    for batch_size in (3, 16):
        scorer = build(
            models[name], max_batch_size=batch_size, prefix_sharing="off", batch_tokens=100_000,
        )
        out = scorer.score(requests)
        assert max_diff(out, ref) <= TOL, batch_size
        stats = scorer.stats
        assert stats["padded_tokens"] > stats["real_tokens"], "batches were padded"
    for batch_size in (1, 3, 16):  # the default path: prefix sharing where verified
        scorer = build(models[name], max_batch_size=batch_size, prefix_min_tokens=4)
        assert max_diff(scorer.score(requests), ref) <= TOL, batch_size
        assert scorer.stats["shared_groups"] > 0


def test_batch_one_matches_the_models_own_forward(models):
    import torch
    from transformers import AutoModelForSequenceClassification

    requests = make_requests(n_questions=3, seed=2)
    scorer = build(models["llama-tokbos"], max_batch_size=1, prefix_sharing="off")
    ours = scorer.score(requests)
    model = AutoModelForSequenceClassification.from_pretrained(models["llama-tokbos"]).eval()
    with torch.inference_mode():
        theirs = [
            model(input_ids=torch.as_tensor([ids])).logits[0, 0].item()
            for ids in scorer.encode(requests)
        ]
    assert max_diff(ours, theirs) <= TOL
    assert scorer.describe()["resolved"]["pooling"].startswith("last token that is not the pad")


@pytest.mark.parametrize("name", ["llama-tokbos", "qwen2-tplbos"])
@pytest.mark.parametrize("position", ["user", "system"])
@pytest.mark.slow
def test_prefix_sharing_gives_the_plain_scores(models, name, position):
    pairs = make_requests(n_questions=6, answers=2, seed=3)
    best_of_n = make_requests(n_questions=2, answers=16, seed=4)
    requests = pairs + best_of_n
    plain = build(models[name], prefix_sharing="off", profile_position=position).score(requests)
    shared_scorer = build(
        models[name], prefix_sharing="on", profile_position=position, prefix_min_tokens=4,
        batch_tokens=600,
    )
    shared = shared_scorer.score(requests)
    assert max_diff(shared, plain) <= TOL
    assert shared_scorer.stats["shared_groups"] == 8
    assert shared_scorer.stats["shared_tokens_saved"] > 0
    auto = build(models[name], profile_position=position, prefix_min_tokens=4)
    assert max_diff(auto.score(requests), plain) <= TOL
    assert auto.describe()["resolved"]["prefix_sharing"].startswith("verified")


def test_resumed_scores_equal_uninterrupted_ones_bit_for_bit(models):
    """A run cut after some groups and resumed by a fresh scorer stores exactly the same scores.

    The resumed run verifies prefix sharing on a different group than the uninterrupted run did
    (its smallest missing one); that check must not change what is stored for that group.
    """
    requests = make_requests(n_questions=9, answers=2, seed=21)
    # Two groups per batch: 9 groups give four full batches and the smallest group alone last,
    # so both runs batch every other group identically.
    opts = {"max_batch_size": 2, "batch_tokens": 1_000_000, "prefix_min_tokens": 4}
    whole = build(models["llama-tokbos"], **opts)
    uninterrupted = whole.score(requests)
    assert whole.stats["shared_groups"] == 9
    size: dict[str, int] = {}
    for req, ids in zip(requests, whole.encode(requests), strict=True):
        size[req.record_id] = size.get(req.record_id, 0) + len(ids)
    smallest = min(size, key=size.__getitem__)  # what the first run verified and stored first
    first = [i for i, r in enumerate(requests) if r.record_id == smallest]
    rest = [i for i, r in enumerate(requests) if r.record_id != smallest]
    done = build(models["llama-tokbos"], **opts).score([requests[i] for i in first])
    resumed = build(models["llama-tokbos"], **opts).score([requests[i] for i in rest])
    by_index = dict(zip(first + rest, done + resumed, strict=True))
    assert [by_index[i] for i in range(len(requests))] == uninterrupted  # exact, not approximate


def test_reduced_precision_and_eager_attention(models):
    requests = make_requests(n_questions=4, seed=5)
    ref = build(models["qwen2-nobos"]).score(requests)
    eager = build(models["qwen2-nobos"], attn_implementation="eager").score(requests)
    assert max_diff(eager, ref) <= TOL
    bf16 = build(models["qwen2-nobos"], dtype="bfloat16")
    low = bf16.score(requests)
    assert bf16.describe()["resolved"]["dtype"] == "bfloat16"
    assert max_diff(low, ref) < 0.5  # same model, coarser arithmetic


# -- BOS ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "source"),
    [
        ("llama-tokbos", "tokenizer"),
        ("llama-bothbos", "tokenizer+template"),
        ("qwen2-tplbos", "template"),
        ("qwen2-nobos", "absent"),
    ],
)
def test_exactly_one_bos_whatever_adds_it(models, name, source):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(models[name])
    scorer = build(models[name])
    requests = make_requests(n_questions=2, seed=6)
    expected = 0 if source == "absent" else 1
    assert scorer.encoder.bos.source == source
    for req, ids in zip(requests, scorer.encode(requests), strict=True):
        leading = next((i for i, t in enumerate(ids) if t != tok.bos_token_id), len(ids))
        assert leading == expected
        assert ids.count(tok.bos_token_id) == expected
        rendered = scorer.encoder.render(req.question, req.response, req.profile.text)
        naive = tok(rendered)["input_ids"]  # what a harness that tokenises the text naively gets
        if source == "tokenizer+template":
            assert naive[:2] == [tok.bos_token_id] * 2  # the double-BOS trap ...
        plain = tok(rendered, add_special_tokens=False)["input_ids"]
        body = [t for t in plain if t != tok.bos_token_id]
        assert ids[expected:] == body  # ... and ours is the same text with one BOS


def test_bos_option_forces_or_disables(models):
    tok_bos = models["llama-bothbos"]
    never = build(tok_bos, bos="never")
    ids = never.encode(make_requests(1, 1, seed=7))[0]
    assert ids[0] != never.tokenizer.bos_token_id
    always = build(models["qwen2-nobos"], bos="always")
    assert always.encode(make_requests(1, 1, seed=7))[0][0] == always.tokenizer.bos_token_id


def released_ids(tok, question, response, chat_template=None, max_length=8192):
    """The released pointwise script's input: the chat as text, then the tokenizer's defaults."""
    messages = [{"role": "user", "content": question}, {"role": "assistant", "content": response}]
    text = tok.apply_chat_template(messages, tokenize=False, chat_template=chat_template)
    return tok(text, truncation=True, max_length=max_length)["input_ids"]


def released_reference(path, requests, chat_template=None):
    """Scores computed the released way, one input at a time, by the model's own forward."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForSequenceClassification.from_pretrained(path).eval()
    out = []
    with torch.inference_mode():
        for r in requests:
            ids = released_ids(tok, r.question, r.response, chat_template)
            logits = model(input_ids=torch.as_tensor([ids])).logits[0]
            out.append(
                logits[0].item() if logits.numel() == 1 else torch.softmax(logits, -1)[-1].item()
            )
    return out


def test_question_only_input_is_the_released_input(models):
    from transformers import AutoTokenizer

    path = models["llama-bothbos"]  # the tokenizer adds a BOS and the template writes one
    tok = AutoTokenizer.from_pretrained(path)
    req = make_requests(1, 1, seed=8, profile_words=(0, 0))[0]
    released = released_ids(tok, req.question, req.response)
    assert released[:2] == [tok.bos_token_id] * 2  # the released input starts with two BOS
    assert build(path, input_format="released").encode([req])[0] == released
    for position in ("none", "system", "user"):  # prbench's format: the same, with one BOS
        assert build(path, profile_position=position).encode([req])[0] == released[1:]


def sample_requests():
    """The bundled sample's pairs as question-only requests (chosen, rejected per record)."""
    from prbench.records import load_records

    records = load_records("sample")
    return [
        ScoreRequest(record_id=r.id, question=r.question, response=answer)
        for r in records
        for answer in (r.chosen, r.rejected)
    ]


def accuracy(scores):
    return sum(c > r for c, r in zip(scores[::2], scores[1::2], strict=True)) / (len(scores) // 2)


@pytest.mark.parametrize("name", ["llama-bothbos-2labels", "llama-tokbos"])
@pytest.mark.slow
def test_released_format_reproduces_the_released_script(models, name):
    requests = sample_requests()
    reference = released_reference(models[name], requests)
    scorer = build(models[name], input_format="released", batch_tokens=4096)
    released = scorer.score(requests)
    delta = max_diff(released, reference)
    print(f"{name}: {len(requests) // 2} pairs, released vs input_format=released "
          f"max|d|={delta:.2e}, accuracy {accuracy(reference):.4f} / {accuracy(released):.4f}")
    assert delta <= TOL
    assert accuracy(released) == accuracy(reference)
    assert scorer.describe()["resolved"]["pooling"] == "the model's own forward, right padding"
    assert scorer.describe()["resolved"]["prefix_sharing"] == "off (input_format=released)"
    default = build(models[name]).score(requests)
    print(f"{name}: input_format=prbench max|d|={max_diff(default, reference):.2e}, "
          f"accuracy {accuracy(default):.4f}")
    if name == "llama-bothbos-2labels":  # prbench: one BOS and the raw logit of label 0
        assert max_diff(default, reference) > 1e-3
        assert all(0.0 < s < 1.0 for s in released)  # softmax[-1], not a logit
    else:  # one BOS, one label, no trailing pad: both formats give the released numbers
        assert max_diff(default, reference) <= TOL


def test_released_pooling_skips_a_trailing_pad_token(models):
    path = models["llama-tokbos"]
    ends_in_pad = (
        "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}<pad>"
    )
    requests = make_requests(n_questions=3, seed=13, profile_words=(0, 0))
    reference = released_reference(path, requests, ends_in_pad)
    released = build(path, input_format="released", chat_template=ends_in_pad)
    assert max_diff(released.score(requests), reference) <= TOL
    assert released.stats["padded_tokens"] > released.stats["real_tokens"], "right-padded batch"
    ids = released.encode(requests)
    assert all(seq[-1] == released.tokenizer.pad_token_id for seq in ids)
    plain = build(path, input_format="released")  # the same text without the final <pad> ...
    assert max_diff(plain.score(requests), reference) <= TOL  # ... is read at the same token
    ours = build(path, chat_template=ends_in_pad).score(requests)  # pooling=model: same token
    assert max_diff(ours, reference) <= TOL
    at_pad = build(path, chat_template=ends_in_pad, pooling="last_token").score(requests)
    assert max_diff(at_pad, reference) > 1e-3  # the pad position is another token


def test_released_truncation_keeps_the_first_tokens(models):
    from transformers import AutoTokenizer

    path = models["llama-bothbos"]
    tok = AutoTokenizer.from_pretrained(path)
    req = make_requests(1, 1, seed=14, profile_words=(0, 0), answer_words=(80, 80))[0]
    full = released_ids(tok, req.question, req.response)
    scorer = build(path, input_format="released", max_length=len(full) // 2)
    assert scorer.encode([req])[0] == full[: len(full) // 2]  # the end of the answer is cut
    assert scorer.stats["truncated_end"] == 1
    assert len(scorer.score([req])) == 1


def test_released_format_shows_no_profile(models):
    path = models["llama-tokbos"]
    req = make_requests(1, 1, seed=15, profile_words=(20, 20))[0]
    with pytest.raises(ValueError, match=r"record 'r0'.*_noprofile task.*profile_position=none"):
        build(path, input_format="released").encode([req])
    dropped = build(path, input_format="released", profile_position="none")
    empty = ScoreRequest(record_id=req.record_id, question=req.question, response=req.response)
    assert dropped.encode([req]) == build(path, input_format="released").encode([empty])
    for clash in ({"bos": "never"}, {"label_index": 1}, {"prefix_sharing": "on"}):
        with pytest.raises(ValueError, match="input_format=released cannot be combined"):
            build(path, input_format="released", **clash)
    assert build(path).fingerprint() != build(path, input_format="released").fingerprint()


def test_profile_positions(models):
    scorer_user = build(models["llama-tokbos"], profile_position="user")
    req = make_requests(1, 1, seed=9, profile_words=(20, 20))[0]
    text_user = scorer_user.encoder.render(req.question, req.response, req.profile.text)
    assert "<|system|>" not in text_user
    assert text_user.index(req.profile.text) < text_user.index(req.question)
    scorer_sys = build(models["llama-tokbos"], profile_position="system")
    text_sys = scorer_sys.encoder.render(req.question, req.response, req.profile.text)
    where = [text_sys.index(s) for s in ("<|system|>", req.profile.text, "<|user|>")]
    assert where == sorted(where)
    scorer_none = build(models["llama-tokbos"], profile_position="none")
    empty = ScoreRequest(record_id=req.record_id, question=req.question, response=req.response)
    assert scorer_none.encode([req]) == scorer_user.encode([empty])
    assert scorer_sys.describe()["options"]["profile_position"] == "system"
    prints = {s.fingerprint() for s in (scorer_user, scorer_sys, scorer_none)}
    assert len(prints) == 3


# -- truncation -----------------------------------------------------------------------------------


def _assistant_tail(scorer, ids):
    marker = scorer.tokenizer.convert_tokens_to_ids("<|assistant|>")
    return ids[ids.index(marker) :]


@pytest.mark.parametrize("position", ["user", "system"])
def test_truncation_cuts_the_profile_and_keeps_the_answer(models, position):
    req = make_requests(1, 1, seed=10, profile_words=(400, 400), answer_words=(30, 30))[0]
    full = build(models["llama-tokbos"], profile_position=position)
    full_ids = full.encode([req])[0]
    limit = len(full_ids) // 2
    scorer = build(models["llama-tokbos"], profile_position=position, max_length=limit)
    ids = scorer.encode([req])[0]
    assert len(ids) <= limit
    assert _assistant_tail(scorer, ids) == _assistant_tail(full, full_ids)
    assert scorer.stats["truncated_profile"] == 1
    assert len(ids) > limit - 40, "the cut keeps as much profile as fits"
    text = scorer.tokenizer.decode(ids)
    assert req.question in text
    kept = text.split("earlier posts")[-1]
    assert req.profile.text.split()[0] in kept


def test_truncation_then_cuts_the_question_and_never_the_answer(models):
    rng = random.Random(11)
    req = ScoreRequest(
        record_id="long-q", question=sample_text(rng, 300), response=sample_text(rng, 20),
        profile=ProfileView(text=sample_text(rng, 50)),
    )
    full = build(models["qwen2-nobos"]).encode([req])[0]
    scorer = build(models["qwen2-nobos"], max_length=len(full) // 3)
    ids = scorer.encode([req])[0]
    assert len(ids) <= len(full) // 3
    assert scorer.stats["truncated_question"] == 1
    assert _assistant_tail(scorer, ids) == _assistant_tail(scorer, full)
    tiny = build(models["qwen2-nobos"], max_length=10)
    assert tiny.encode([req]) == [[]]  # the answer alone does not fit: an invalid input
    assert math.isnan(tiny.score([req])[0])
    assert "record 'long-q'" in tiny.failures()[0]["detail"]


# -- options, loading, provenance -----------------------------------------------------------------


def test_fingerprint_tracks_what_changes_scores(models):
    path = models["llama-tokbos"]
    base = build(path).fingerprint()
    assert build(path).fingerprint() == base
    for same in ({"batch_tokens": 123}, {"max_batch_size": 2},
                 {"prefix_sharing": "off"}, {"device": "cpu"}):
        assert build(path, **same).fingerprint() == base, same
    for other in ({"dtype": "bfloat16"}, {"max_length": 100}, {"profile_position": "system"},
                  {"label_index": 0, "user_format": "{profile}\n{question}"},
                  {"chat_template": "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"}):
        assert build(path, **other).fingerprint() != base, other


def test_chat_template_override_from_file(models, tmp_path):
    template = tmp_path / "t.jinja"
    template.write_text("{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}")
    scorer = build(models["qwen2-nobos"], chat_template=str(template))
    req = make_requests(1, 1, seed=12)[0]
    assert scorer.encoder.render(req.question, req.response, "").startswith("[user] ")
    assert len(scorer.score([req])) == 1
    with pytest.raises(ValueError, match="neither an existing file nor a Jinja template"):
        build(models["qwen2-nobos"], chat_template="no-such-file.jinja")


def test_a_cuda_request_without_cuda_is_an_error(models):
    import torch

    from prbench.devices import DeviceError

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(DeviceError, match=r"device='cuda:0' asks for CUDA"):
        build(models["qwen2-nobos"], device="cuda:0")
    scorer = build(models["qwen2-nobos"], device="auto")
    assert str(scorer.device) == "cpu" and len(scorer.score(make_requests(1, 1))) == 1


def test_bad_options_fail_clearly(models):
    from prbench.options import OptionsError

    with pytest.raises(OptionsError, match="did you mean 'max_length'"):
        build(models["qwen2-nobos"], max_lenght=10)
    with pytest.raises(OptionsError, match="missing required option 'pretrained'"):
        from prbench.plugins import get_registry

        get_registry().build("scorer", "hf-classifier", {})
    scorer = build(models["qwen2-nobos"], label_index=3)
    with pytest.raises(ValueError, match="label_index=3"):
        scorer.score(make_requests(1, 1))
    with pytest.raises(ValueError, match="user_format"):
        build(models["qwen2-nobos"], user_format="{question} only")


def test_remote_code_runs_only_when_asked(models, tmp_path):
    import json
    import shutil

    folder = tmp_path / "remote"
    shutil.copytree(models["llama-tokbos"], folder)
    (folder / "custom_rm.py").write_text(
        "from transformers import LlamaForSequenceClassification\n"
        "class CustomRM(LlamaForSequenceClassification):\n    pass\n"
    )
    config = json.loads((folder / "config.json").read_text())
    config["auto_map"] = {"AutoModelForSequenceClassification": "custom_rm.CustomRM"}
    (folder / "config.json").write_text(json.dumps(config))
    scorer = build(folder)
    assert scorer.options.trust_remote_code is False
    scorer.score(make_requests(1, 1))
    assert type(scorer.model).__name__ == "LlamaForSequenceClassification"  # custom code ignored
    trusted = build(folder, trust_remote_code=True)
    trusted.score(make_requests(1, 1))
    assert type(trusted.model).__name__ == "CustomRM"


def test_registering_does_not_import_torch():
    code = (
        "import sys\n"
        "from prbench.plugins import PluginRegistry\n"
        "reg = PluginRegistry(load_entry_points=False)\n"
        "assert 'hf-classifier' in reg.components['scorer']\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
        "assert 'transformers' not in sys.modules, 'transformers imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
