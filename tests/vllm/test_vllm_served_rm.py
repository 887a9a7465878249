"""``served-rm`` against a real vLLM server: the same rewards and verdicts as ``hf-classifier``.

The classifier's pad token ``<|end|>`` closes every chat message. With the fixture's ordinary
template the chat ends with a newline after it; with :data:`PAD_ENDING_TEMPLATE` it ends with the
pad itself, where vLLM (``LAST`` pooling) would read the pad and the model's own forward the
token before it. ``served-rm`` must equal ``hf-classifier`` (``pooling=model``) in both.
"""

from __future__ import annotations

import random

import pytest

from prbench.profiles.base import ProfileView
from prbench.scoring.base import ScoreRequest
from tests._hf_fixtures import sample_text

TOL = 1e-5

#: A ChatML-style template whose every message, the last one too, ends with the pad ``<|end|>``.
PAD_ENDING_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
TEMPLATES = {"ordinary": "", "pad-ending": PAD_ENDING_TEMPLATE}


def pair_requests(n_pairs: int = 24, seed: int = 0) -> list[ScoreRequest]:
    """Two answers (chosen first) per question, with a profile, as a benchmark pair."""
    rng = random.Random(seed)
    out = []
    for i in range(n_pairs):
        question = sample_text(rng, rng.randint(5, 15))
        profile = ProfileView(text=sample_text(rng, rng.randint(0, 40)))
        for _ in range(2):
            out.append(ScoreRequest(record_id=f"r{i}", question=question, profile=profile,
                                    response=sample_text(rng, rng.randint(3, 40))))
    return out


def build(kind: str, **options):
    from prbench.plugins import get_registry

    return get_registry().build("scorer", kind, options)


def verdicts(scores: list[float]) -> list[bool]:
    """Per pair: the chosen (first) answer got the higher reward."""
    return [a > b for a, b in zip(scores[::2], scores[1::2], strict=True)]


@pytest.mark.parametrize("endpoint", ["auto", "classify"])
@pytest.mark.parametrize("template", ["ordinary", "pad-ending"])
def test_served_rm_equals_hf_classifier(rm_server, classifier, template, endpoint):
    requests = pair_requests()
    chat = {"chat_template": TEMPLATES[template]} if TEMPLATES[template] else {}
    local = build("hf-classifier", pretrained=str(classifier), **chat)
    expected = local.score(requests)
    ids = local.encode(requests)
    served = build("served-rm", base_url=rm_server.base_url, tokenizer=str(classifier),
                   endpoint=endpoint, batch_size=7, **chat)
    got = served.score(requests)
    assert max(abs(a - b) for a, b in zip(got, expected, strict=True)) <= TOL
    assert verdicts(got) == verdicts(expected)
    stats = served.stats()
    assert stats["failed"] == 0 and stats["inputs_sent"] == len(requests)
    ends_with_pad = sum(x[-1] == served.tokenizer.pad_token_id for x in ids)
    assert ends_with_pad == (len(requests) if template == "pad-ending" else 0)
    assert stats["pad_dropped"] == ends_with_pad
    assert served.describe()["resolved"]["pooling"].startswith(
        f"last token that is not the pad token {served.tokenizer.pad_token_id}")
    assert served.describe()["resolved"]["model_card"]["max_model_len"] == 512
    if template == "pad-ending":
        # what vLLM reads when the pads are sent: the pad's own value, as hf-classifier's
        # pooling=last_token; a third of the verdicts or more change
        at_pad = build("served-rm", base_url=rm_server.base_url, tokenizer=str(classifier),
                       endpoint=endpoint, pooling="last_token", **chat).score(requests)
        local_last = build("hf-classifier", pretrained=str(classifier), pooling="last_token",
                           **chat).score(requests)
        assert max(abs(a - b) for a, b in zip(at_pad, local_last, strict=True)) <= TOL
        assert max(abs(a - b) for a, b in zip(at_pad, expected, strict=True)) > 0.1


def test_prbench_serve_backed_by_served_rm_answers_score_like_served_rm(rm_server, classifier):
    """The RL path: ``prbench serve --model_args scorer=served-rm,...`` in front of vLLM."""
    pytest.importorskip("fastapi")
    from prbench.downstream.serve import create_app, runtime_factory, start_in_thread
    from prbench.downstream.serve_schema import native_requests
    from tests.vllm._server import post_json

    rng = random.Random(3)
    items = [{"record_id": f"u{i}", "question": sample_text(rng, 8),
              "response": sample_text(rng, rng.randint(4, 30)),
              "profile": sample_text(rng, 12) if i % 2 else ""} for i in range(10)]
    options = {"base_url": rm_server.base_url, "tokenizer": str(classifier),
               "chat_template": PAD_ENDING_TEMPLATE, "cache": "false"}
    app = create_app(runtime_factory("served-rm", options), scorer="served-rm")
    with start_in_thread(app) as server:
        status, body = post_json(server.url + "/score", {"items": items})
    assert status == 200, body
    direct = build("served-rm", base_url=rm_server.base_url, tokenizer=str(classifier),
                   chat_template=PAD_ENDING_TEMPLATE).score(native_requests({"items": items}))
    assert len(body["scores"]) == len(items)
    assert max(abs(a - b) for a, b in zip(body["scores"], direct, strict=True)) <= TOL
