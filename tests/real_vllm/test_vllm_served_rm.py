"""``served-rm`` against a real vLLM server: the same rewards and verdicts as ``hf-classifier``.

The classifier's pad token ``<|end|>`` closes every chat message. With the fixture's ordinary
template the chat ends with a newline after it; with :data:`PAD_ENDING_TEMPLATE` it ends with the
pad itself, where vLLM (``LAST`` pooling) would read the pad and the model's own forward the
token before it. ``served-rm`` must equal ``hf-classifier`` (``pooling=model``) in both.
"""

from __future__ import annotations

import random

import pytest

from prbench.scoring.base import ScoreRequest
from tests._hf_fixtures import sample_text, score_requests

TOL = 1e-5

#: A ChatML-style template whose every message, the last one too, ends with the pad ``<|end|>``.
PAD_ENDING_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
TEMPLATES = {"ordinary": "", "pad-ending": PAD_ENDING_TEMPLATE}


def pair_requests(n_pairs: int = 24, seed: int = 0) -> list[ScoreRequest]:
    """Two answers (chosen first) per question, with a profile, as a benchmark pair."""
    return score_requests(n_pairs, seed=seed, question_words=(5, 15), profile_words=(0, 40),
                          answer_words=(3, 40))


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


def test_prbench_serve_backed_by_served_rm_answers_score_like_served_rm(
        rm_server, classifier, tmp_path):
    """The RL path: the ``prbench serve`` command, scorer ``served-rm``, in front of vLLM."""
    import subprocess
    import sys
    import time

    from prbench.downstream.serve_schema import native_requests
    from tests._harness_fixtures import subprocess_env
    from tests.real_vllm._server import free_port, get_json, post_json

    rng = random.Random(3)
    items = [{"record_id": f"u{i}", "question": sample_text(rng, 8),
              "response": sample_text(rng, rng.randint(4, 30)),
              "profile": sample_text(rng, 12) if i % 2 else ""} for i in range(10)]
    template = tmp_path / "pad-ending.jinja"
    template.write_text(PAD_ENDING_TEMPLATE, encoding="utf-8")
    port = free_port()
    args = (f"scorer=served-rm,base_url={rm_server.base_url},tokenizer={classifier},"
            f"chat_template={template},cache=false")
    log = (tmp_path / "serve.log").open("wb")
    proc = subprocess.Popen(  # bound to 127.0.0.1 (serve's default host), stopped by its PID
        [sys.executable, "-m", "prbench.cli", "serve", "--model_args", args, "--port", str(port),
         "--no_progress"], stdout=log, stderr=subprocess.STDOUT, env=subprocess_env(),
        cwd=tmp_path)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 300
        while get_json(url + "/health", timeout=5)[0] != 200:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            assert time.monotonic() < deadline, "prbench serve did not answer /health in 300 s"
            time.sleep(0.5)
        status, body = post_json(url + "/score", {"items": items})
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        log.close()
    assert status == 200, body
    direct = build("served-rm", base_url=rm_server.base_url, tokenizer=str(classifier),
                   chat_template=str(template)).score(native_requests({"items": items}))
    assert len(body["scores"]) == len(items)
    assert max(abs(a - b) for a, b in zip(body["scores"], direct, strict=True)) <= TOL
    # the pad-ending template ends every chat with the pad: dropped before vLLM saw it
    assert direct != pytest.approx(build(
        "served-rm", base_url=rm_server.base_url, tokenizer=str(classifier),
        chat_template=str(template), pooling="last_token").score(native_requests(
            {"items": items})), abs=1e-3)
