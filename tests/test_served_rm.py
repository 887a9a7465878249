"""``served-rm``: reward models behind vLLM / SGLang, against loopback fakes of both servers.

The fakes (:mod:`tests._served_fixtures`) speak each server's published schema and answer with a
real tiny model's scores for the token ids they receive, so ``served-rm`` must equal a local
``hf-classifier`` run of the same model to 1e-5.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from prbench.profiles.base import ProfileView
from prbench.scoring.base import ScoreRequest
from tests._hf_fixtures import build_tiny_model, score_requests
from tests._served_fixtures import FakeRMServer

TOL = 1e-5


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("served_rms")
    return {
        # the tokenizer adds a BOS and the template writes one: one BOS must reach the server
        "bothbos": build_tiny_model(root / "bothbos", arch="llama", tokenizer_adds_bos=True,
                                    template_adds_bos=True, seed=3),
        "qwen2-2labels": build_tiny_model(root / "qwen2", arch="qwen2", tokenizer_adds_bos=False,
                                          num_labels=2, seed=5),
        # the pad token <|end|> closes every message: PAD_ENDING_TEMPLATE ends the chat with it
        "qwen2-pad-end": build_tiny_model(root / "qwen2-pad-end", arch="qwen2",
                                          tokenizer_adds_bos=False, pad_token="<|end|>", seed=4),
    }


#: A SmolLM2/ChatML-style template: every message, the last one too, ends with ``<|end|>``.
PAD_ENDING_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


@pytest.fixture(autouse=True)
def _fast_backoff(monkeypatch):
    from prbench.backends.served_rm import ServedClient

    monkeypatch.setattr(ServedClient, "backoff_base", 0.01)


def make_requests(n_questions=5, seed=0):
    return score_requests(n_questions, seed=seed, question_words=(5, 15), profile_words=(0, 25),
                          answer_words=(3, 30))


def build(kind, **options):
    from prbench.plugins import get_registry

    return get_registry().build("scorer", kind, options)


def local_scores(path, requests, **options):
    scorer = build("hf-classifier", pretrained=str(path), prefix_sharing="off", **options)
    return scorer.score(requests), scorer.encode(requests)


# -- scores, ids and batching ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("engine", "endpoint", "per_token"),
    [("vllm", "pooling", False), ("vllm", "pooling", True), ("vllm", "classify", False),
     ("sglang", "classify", False)],
)
def test_scores_equal_hf_classifier(models, engine, endpoint, per_token):
    path = models["bothbos"]
    requests = make_requests()
    expected, ids = local_scores(path, requests)
    with FakeRMServer(path, engine=engine, per_token=per_token) as server:
        scorer = build("served-rm", engine=engine, endpoint=endpoint, base_url=server.base_url,
                       model="tiny-rm", tokenizer=str(path), batch_size=3)
        got = scorer.score(requests)
        posts = server.posts()
    assert max(abs(a - b) for a, b in zip(got, expected, strict=True)) < TOL
    # batching: 10 inputs in requests of 3, 3, 3 and 1, each carrying token ids
    field = "input_ids" if engine == "sglang" else "input"
    assert sorted(len(p[field]) for p in posts) == [1, 3, 3, 3]
    sent = [x for p in posts for x in p[field]]
    assert sorted(map(tuple, sent)) == sorted(map(tuple, ids))  # hf-classifier's exact ids
    bos = scorer.tokenizer.bos_token_id
    assert all(x[0] == bos and x[1] != bos for x in sent)  # exactly one BOS
    if engine == "vllm":
        assert all(p["use_activation"] is False for p in posts)
        assert all(("encoding_format" in p) == (endpoint == "pooling") for p in posts)


def test_label_index_and_use_activation(models):
    path = models["qwen2-2labels"]
    requests = make_requests(3, seed=2)
    expected, _ = local_scores(path, requests, label_index=1)
    with FakeRMServer(path) as server:
        raw = build("served-rm", base_url=server.base_url + "/v1/", tokenizer=str(path),
                    label_index=1)  # model= defaults to the one served model; /v1 is dropped
        assert raw.model == "tiny-rm"
        assert max(abs(a - b) for a, b in zip(raw.score(requests), expected, strict=True)) < TOL
        soft = build("served-rm", base_url=server.base_url, tokenizer=str(path), label_index=1,
                     use_activation=True, pooling_task="classify")
        probs = soft.score(requests)
        assert server.posts()[-1]["task"] == "classify"
        with pytest.raises(ValueError, match=r"label_index=2 but .* returns 2 values"):
            build("served-rm", base_url=server.base_url, tokenizer=str(path),
                  label_index=2).score(requests)
    label0, _ = local_scores(path, requests, label_index=0)
    softmax = [FakeRMServer.activate([a, b])[1] for a, b in zip(label0, expected, strict=True)]
    assert max(abs(p - q) for p, q in zip(probs, softmax, strict=True)) < TOL
    assert soft.fingerprint() != raw.fingerprint()


# -- which token is read: the model's own (pad ids that end an input are not sent) ----------------


def test_a_chat_ending_with_the_pad_token_is_read_where_the_model_reads_it(models):
    """The server pools the last id it gets; the model's own forward the last that is not its
    pad. Trailing pads are not sent, so served-rm equals hf-classifier (pooling=model)."""
    path = models["qwen2-pad-end"]
    requests = make_requests()
    template = {"chat_template": PAD_ENDING_TEMPLATE}
    expected, ids = local_scores(path, requests, **template)
    pad = 7  # <|end|>
    assert all(x[-1] == pad for x in ids)  # every rendered chat ends with the pad
    at_pad, _ = local_scores(path, requests, pooling="last_token", **template)
    with FakeRMServer(path) as server:
        scorer = build("served-rm", base_url=server.base_url, tokenizer=str(path), **template)
        got = scorer.score(requests)
        sent = [x for p in server.posts() for x in p["input"]]
        raw = build("served-rm", base_url=server.base_url, tokenizer=str(path),
                    pooling="last_token", **template)
        last = raw.score(requests)
    assert max(abs(a - b) for a, b in zip(got, expected, strict=True)) < TOL
    assert max(abs(a - b) for a, b in zip(last, at_pad, strict=True)) < TOL
    assert max(abs(a - b) for a, b in zip(got, last, strict=True)) > 1e-3  # the pad's differ
    assert sorted(map(tuple, sent)) == sorted(tuple(x[:-1]) for x in ids)
    assert scorer.stats()["pad_dropped"] == len(requests) and raw.stats()["pad_dropped"] == 0
    described = scorer.describe()["resolved"]["pooling"]
    assert described.startswith("last token that is not the pad token 7 (the model's rule")
    assert raw.describe()["resolved"]["pooling"].startswith("last token sent, pad tokens included")
    assert scorer.fingerprint() != raw.fingerprint()


def test_a_pad_ending_input_without_the_models_rule_is_one_error(models, tmp_path):
    """A tokenizer folder without config.json: the model's pooling rule is unknown, so a chat
    ending with the pad token is refused, naming both fixes; other chats score as before."""
    import shutil

    from prbench.backends.served_pooling import ServedPoolingError

    path = models["qwen2-pad-end"]
    tok_only = tmp_path / "tokenizer-only"
    tok_only.mkdir()
    for f in path.iterdir():
        if f.name.startswith(("tokenizer", "chat_template", "special_tokens")):
            shutil.copy(f, tok_only / f.name)
    requests = make_requests(2)
    expected, _ = local_scores(path, requests)
    with FakeRMServer(path) as server:
        plain = build("served-rm", base_url=server.base_url, tokenizer=str(tok_only))
        assert max(abs(a - b) for a, b in zip(plain.score(requests), expected, strict=True)) < TOL
        assert "rule is unknown" in plain.describe()["resolved"]["pooling"]
        ending = build("served-rm", base_url=server.base_url, tokenizer=str(tok_only),
                       chat_template=PAD_ENDING_TEMPLATE)
        n = len(server.posts())
        with pytest.raises(ServedPoolingError, match=(
                r"the input of record 'r0' ends with the pad token 7 \('<\|end\|>'\).*has no "
                r"config.json\).*Pass tokenizer=.*or pooling=last_token")):
            ending.score(requests)
        assert len(server.posts()) == n  # nothing was sent
        build("served-rm", base_url=server.base_url, tokenizer=str(tok_only),
              chat_template=PAD_ENDING_TEMPLATE, pooling="last_token").score(requests)


@pytest.mark.parametrize(("config", "drops", "refuses", "note"), [
    ({"model_type": "qwen2", "pad_token_id": 5}, 5, None, "last token that is not the pad token 5"),
    ({"model_type": "llama"}, None, None, "the model's config has no pad token"),
    ({"model_type": "bert", "pad_token_id": 0}, None, None, "pooler for the bert encoder"),
    ({"model_type": "internlm2", "pad_token_id": 2, "auto_map": {"AutoModel": "m.M"}}, None, 9,
     "rule is unknown: model_type 'internlm2' is not a decoder transformers lists (it has code"),
])
def test_the_pooling_rule_follows_the_models_config(tmp_path, config, drops, refuses, note):
    from types import SimpleNamespace

    from prbench.backends.served_pooling import pooling_rule

    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    tokenizer = SimpleNamespace(pad_token_id=9)
    rule = pooling_rule(str(tmp_path), revision="main", pooling="model", tokenizer=tokenizer)
    assert (rule.drop_pad, rule.refuse_pad) == (drops, refuses)
    assert note in rule.note
    if drops is not None:
        assert rule.ids([3, 5, 4, 5, 5], "r", tokenizer) == [3, 5, 4]  # only the trailing pads
        assert rule.ids([5, 5], "r", tokenizer) == [5]  # never empty
    last = pooling_rule(str(tmp_path), revision="main", pooling="last_token", tokenizer=tokenizer)
    assert last.ids([3, 9, 5], "r", tokenizer) == [3, 9, 5]


# -- failures: retries, timeouts, malformed replies -----------------------------------------------


def test_non_finite_and_non_number_values_are_invalid_with_their_cause(models):
    path = models["bothbos"]
    requests = make_requests(3)  # 6 inputs, batches of 2
    with FakeRMServer(path) as server:
        scorer = build("served-rm", base_url=server.base_url, tokenizer=str(path), batch_size=2,
                       max_retries=0, max_concurrency=1)
        server.faults = ["nan", "inf", "text"]
        got = scorer.score(requests)
    stats = scorer.stats()
    # a NaN or infinite value fails its own input (never retried: the model gave it); a string
    # breaks the reply's schema, so the whole batch fails
    assert sum(math.isnan(s) for s in got) == 4
    assert stats["failure_reasons"] == {"bad-response": 2, "non-finite": 2}
    details = [(f["reason"], f["detail"]) for f in stats["failures"]]
    assert any(r == "non-finite" and "returned nan as value 0" in d for r, d in details)
    assert any(r == "non-finite" and "returned inf as value 0" in d for r, d in details)
    assert any(r == "bad-response" and "data[1].data[0] is 'n/a' (str), not a number" in d
               for r, d in details)
    # each unscored input carries its reason to the samples file (invalid_reason)
    extras = scorer.request_extras(requests)
    assert [bool(e) for e in extras] == [math.isnan(s) for s in got]
    assert sorted(e["invalid"].split(":")[0] for e in extras if e) == [
        "bad-response", "bad-response", "non-finite", "non-finite"]



def test_retries_on_503_and_timeouts(models):
    path = models["bothbos"]
    requests = make_requests(2)
    expected, _ = local_scores(path, requests)
    with FakeRMServer(path, engine="sglang", slow_seconds=3.0) as server:
        server.faults = ["503", "503", "slow"]
        scorer = build("served-rm", engine="sglang", base_url=server.base_url, model="tiny-rm",
                       tokenizer=str(path), timeout=1.0, max_retries=4)
        got = scorer.score(requests)
        assert len(server.posts()) == 4  # two 503s, one timeout, then the answer
    assert max(abs(a - b) for a, b in zip(got, expected, strict=True)) < TOL
    stats = scorer.stats()
    assert stats["http_retries"] == 3 and stats["failed"] == 0 and stats["failures"] == []


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_malformed_and_failed_replies_are_invalid_with_reason(models, engine):
    path = models["bothbos"]
    requests = make_requests(3)  # 6 inputs, batches of 2
    with FakeRMServer(path, engine=engine) as server:
        scorer = build("served-rm", engine=engine, base_url=server.base_url, model="tiny-rm",
                       tokenizer=str(path), batch_size=2, max_retries=1, max_concurrency=1)
        server.always = "malformed"
        bad = scorer.score(requests[:2])
        server.always = ""
        server.faults = ["short"]
        short = scorer.score(requests[2:4])
        server.always = "503"
        down = scorer.score(requests[4:])
    assert all(math.isnan(s) for s in bad + short + down)
    stats = scorer.stats()
    assert stats["failed"] == 6
    assert stats["failure_reasons"] == {"bad-response": 4, "http-503": 2}
    details = {f["item"]: f for f in stats["failures"]}
    assert "malformed reply" in details["r0"]["detail"]
    assert "1 results for 2 inputs" in details["r1"]["detail"]
    assert details["r2"]["reason"] == "http-503" and "2 attempts" in details["r2"]["detail"]


@pytest.mark.parametrize("endpoint", ["pooling", "classify"])
def test_reply_indexes_must_be_each_input_once(models, endpoint):
    """A vLLM reply whose indexes repeat or run past the inputs is refused, never sorted and
    used: both inputs of that batch are nan with the reason; the next batch still scores."""
    path = models["bothbos"]
    requests = make_requests(3)  # 6 inputs, batches of 2
    expected, _ = local_scores(path, requests)
    with FakeRMServer(path, engine="vllm") as server:
        scorer = build("served-rm", engine="vllm", endpoint=endpoint, base_url=server.base_url,
                       model="tiny-rm", tokenizer=str(path), batch_size=2, max_retries=0,
                       max_concurrency=1, use_activation=False)
        server.faults = ["dup-index", "extra-index", ""]
        got = scorer.score(requests)
    assert all(math.isnan(s) for s in got[:4])
    assert max(abs(a - b) for a, b in zip(got[4:], expected[4:], strict=True)) < TOL
    stats = scorer.stats()
    assert stats["failure_reasons"] == {"bad-response": 4}
    details = {f["item"]: f["detail"] for f in stats["failures"]}
    assert details["r0"].startswith("result indexes must be 0..1, each once: duplicated [0]; "
                                    "missing [1] (which score belongs to which input is unknown)")
    assert details["r1"].startswith("result indexes must be 0..1, each once: missing [1]; out "
                                    "of range [2]")


def test_the_runtime_records_failed_inputs_as_nan_and_does_not_cache_them(models):
    from prbench.scoring.spec import build_runtime

    path = models["bothbos"]
    requests = make_requests(2)
    expected, _ = local_scores(path, requests)
    with FakeRMServer(path) as server:
        opts = {"base_url": server.base_url, "tokenizer": str(path), "max_retries": 0,
                "progress": False}
        server.always = "503"
        with build_runtime("served-rm", opts) as rt:
            assert all(math.isnan(s) for s in rt.score(requests))
        server.always = ""
        with build_runtime("served-rm", opts) as rt:
            got = rt.score(requests)
        assert max(abs(a - b) for a, b in zip(got, expected, strict=True)) < TOL
        n = len(server.posts())
        with build_runtime("served-rm", opts) as rt:  # now cached: nothing is sent
            assert rt.score(requests) == got
        assert len(server.posts()) == n


# -- fingerprint, options, errors -----------------------------------------------------------------


def test_fingerprint_covers_the_served_model_not_the_port(models, tmp_path):
    path = models["bothbos"]
    prints = []
    for root in ("org/rm-a", "org/rm-a", "org/rm-b"):
        with FakeRMServer(path, root=root) as server:
            prints.append(build("served-rm", base_url=server.base_url, tokenizer=str(path))
                          .fingerprint())
    assert prints[0] == prints[1] != prints[2]
    with FakeRMServer(path, served_name="other") as server:
        other = build("served-rm", base_url=server.base_url, tokenizer=str(path)).fingerprint()
    with FakeRMServer(path, root="org/rm-a") as server:
        qwen = build("served-rm", base_url=server.base_url,
                     tokenizer=str(models["qwen2-2labels"])).fingerprint()
        card = build("served-rm", base_url=server.base_url, tokenizer=str(path)).describe()
    assert len({prints[0], other, qwen}) == 3
    assert card["resolved"]["model_card"] == {"id": "tiny-rm", "root": "org/rm-a",
                                              "parent": None, "max_model_len": 4096}


def test_max_length_follows_the_server(models):
    path = models["bothbos"]
    with FakeRMServer(path, max_model_len=64, list_models=True) as server:
        scorer = build("served-rm", base_url=server.base_url, tokenizer=str(path))
        assert scorer.encoder.max_length == 64
        long = ScoreRequest("r", "a short question?", "an answer.",
                            ProfileView(text=" ".join(["music"] * 200)))
        scorer.score([long])
        assert scorer.stats()["truncated_profile"] == 1
        assert len(server.posts()[0]["input"][0]) <= 64
    with FakeRMServer(path, list_models=False) as server:  # no model list: model= is needed
        with pytest.raises(ValueError, match="needs model="):
            build("served-rm", base_url=server.base_url, tokenizer=str(path))
        assert build("served-rm", base_url=server.base_url, model="tiny-rm",
                     tokenizer=str(path)).card is None


def test_errors(models):
    from prbench.backends.http import BackendRequestError
    from prbench.options import OptionsError

    path = models["bothbos"]
    with FakeRMServer(path) as server:
        served = r"does not serve model 'nope'; it serves \['tiny-rm'\]"
        with pytest.raises(ValueError, match=served):
            build("served-rm", base_url=server.base_url, model="nope", tokenizer=str(path))
        with pytest.raises(ValueError, match="could not load the tokenizer"):
            build("served-rm", base_url=server.base_url, tokenizer=str(path / "missing"))
        server.models_status = 503  # still starting: no card, so no fingerprint yet
        with pytest.raises(BackendRequestError, match="answered HTTP 503 without a model list"):
            build("served-rm", base_url=server.base_url, tokenizer=str(path))
        url = server.base_url
    with pytest.raises(BackendRequestError, match="cannot reach the server"):
        build("served-rm", base_url=url, tokenizer=str(path))
    with pytest.raises((OptionsError, ValueError), match="needs base_url"):
        build("served-rm", tokenizer=str(path))
    with pytest.raises((OptionsError, ValueError), match="vLLM request fields"):
        build("served-rm", engine="sglang", base_url=url, use_activation=True)
    with pytest.raises((OptionsError, ValueError), match="no endpoint=pooling"):
        build("served-rm", engine="sglang", base_url=url, endpoint="pooling")


# -- through prbench eval and plain lm_eval -------------------------------------------------------

GROUP = "personalized_rewardbench_sample"
META = json.dumps({"prbench_profile": "bm25", "prbench_profile_k": 2})


def _sample_scores(out: Path) -> dict[tuple[str, int], list[float]]:
    scores = {}
    for f in sorted(out.rglob("samples_*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            scores[(f.name.split("_20")[0], row["doc_id"])] = [float(r[0][0]) for r in row["resps"]]
    return scores


def _close(a, b):
    assert a.keys() == b.keys() and a
    for key in a:
        assert max(abs(x - y) for x, y in zip(a[key], b[key], strict=True)) < TOL, key


@pytest.mark.slow
def test_prbench_eval_and_plain_lm_eval_equal_hf_classifier(models, tmp_path, capsys):
    from tests._harness_fixtures import results_and_manifest, run, run_eval, subprocess_env

    path = models["bothbos"]
    common = ["--tasks", GROUP, "--limit", "2", "--metadata", META, "--log_samples"]
    code, _, err = run_eval(["eval", *common, "--model_args",
                             f"scorer=hf-classifier,pretrained={path},progress=false",
                             "--output_path", str(tmp_path / "local")], capsys)
    assert code == 0, err
    with FakeRMServer(path, engine="vllm") as server:
        args = (f"scorer=served-rm,engine=vllm,base_url={server.base_url},model=tiny-rm,"
                f"tokenizer={path},progress=false")
        code, _, err = run_eval(["eval", *common, "--model_args", args,
                                 "--output_path", str(tmp_path / "served")], capsys)
        assert code == 0, err
        served_posts = len(server.posts())
        cmd = [sys.executable, "-m", "lm_eval", "--model", "prbench", "--model_args",
               args + ",cache=false", *common, "--output_path", str(tmp_path / "plain")]
        run(cmd, env=subprocess_env(), cwd=tmp_path)
        assert len(server.posts()) > served_posts  # the plain run asked the server
    local = _sample_scores(tmp_path / "local")
    _close(local, _sample_scores(tmp_path / "served"))
    _close(local, _sample_scores(tmp_path / "plain"))
    results, manifest, _ = results_and_manifest(tmp_path / "served")
    local_results, _, _ = results_and_manifest(tmp_path / "local")
    assert results["results"][GROUP]["acc,none"] == local_results["results"][GROUP]["acc,none"]
    described = manifest["scorer"]["runtime"]["scorer"]
    assert described["component"] == "served-rm"
    assert described["resolved"]["model_card"]["id"] == "tiny-rm"


@pytest.mark.slow
def test_a_run_without_verdicts_names_the_cause_on_its_error_line(models, tmp_path, capsys):
    from tests._harness_fixtures import run_eval

    _rebind_log_streams()
    path = models["bothbos"]
    with FakeRMServer(path) as server:
        server.always = "dup-index"
        code, _, err = run_eval(
            ["eval", "--tasks", "personalized_rewardbench_sample_noprofile", "--limit", "2",
             "--model_args", f"scorer=served-rm,base_url={server.base_url},tokenizer={path},"
             "max_retries=0,progress=false", "--output_path", str(tmp_path / "out")], capsys)
    assert code == 1
    (line,) = [x for x in err.splitlines() if x.startswith("error:")]
    assert "got no verdict" in line
    assert "causes: bad-response x" in line and "result indexes must be 0.." in line
    assert "duplicated [0]" in line


def _rebind_log_streams() -> None:
    """Point stream log handlers at this test's stderr (an earlier in-process run's handlers
    still hold that test's closed capture stream)."""
    import logging

    loggers = [logging.getLogger(), *(lg for lg in logging.root.manager.loggerDict.values()
                                      if isinstance(lg, logging.Logger))]
    for lg in loggers:
        for h in lg.handlers:
            if type(h) is logging.StreamHandler:
                h.stream = sys.stderr  # not setStream(): it flushes the closed stream


def test_cli_mistakes_are_one_line(models, capsys):
    from tests._harness_fixtures import run_eval

    _rebind_log_streams()
    path = models["bothbos"]
    with FakeRMServer(path) as server:
        code, _, err = run_eval(
            ["eval", "--tasks", GROUP, "--limit", "1", "--model_args",
             f"scorer=served-rm,base_url={server.base_url},tokenzier={path}"], capsys)
        assert code != 0 and "Traceback" not in err
        assert err.strip().splitlines()[-1].startswith("error:") and "tokenizer" in err
        code, _, err = run_eval(
            ["eval", "--tasks", GROUP, "--limit", "1", "--model_args",
             f"scorer=served-rm,base_url={server.base_url},model=typo,tokenizer={path}"], capsys)
        assert code != 0 and "Traceback" not in err
        assert "error:" in err and "does not serve model 'typo'" in err
