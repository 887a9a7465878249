"""The batched reward server: load test on loopback, schemas, coalescing, back-pressure, verl."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from prbench.downstream.serve import create_app, runtime_factory, start_in_thread
from prbench.downstream.serve_batcher import QueueFullError, RewardBatcher, ServerConfig
from prbench.downstream.serve_client import RewardClient, RewardServerError
from prbench.downstream.serve_schema import (
    PayloadError,
    native_requests,
    openrlhf_requests,
)
from prbench.profiles.base import ProfileView
from prbench.scoring.base import ScoreRequest
from prbench.scoring.runtime import ScorerRuntime
from prbench.scoring.spec import build_runtime

POSTS = [
    {"id": "p1", "category": "music", "text": "I practice piano every morning before work."},
    {"id": "p2", "category": "cooking", "text": "Simple recipes with few steps are best for me."},
]


class GatedScorer:
    """A scorer that blocks until released, records its batches, and scores len(response)."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.batches: list[int] = []
        self.fail = False

    def score(self, requests):
        self.entered.set()
        self.gate.wait(30)
        self.batches.append(len(requests))
        if self.fail or any("BOOM" in r.response for r in requests):
            raise RuntimeError("model exploded")
        return [float(len(r.response)) for r in requests]


def gated_runtime(scorer: GatedScorer):
    return lambda: ScorerRuntime(scorer, cache=False, progress=False)


def post(url: str, payload: dict) -> tuple[int, dict, dict]:
    req = urllib.request.Request(url, data=json.dumps(payload).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, dict(resp.headers), json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read())


def item(i: int, j: int) -> dict:
    return {"record_id": f"r{i}", "question": f"question {i % 7}", "response": f"answer {i}-{j}",
            "profile": POSTS if i % 2 else "", "category": "c", "domain": "d"}


def test_loopback_load_many_clients_no_errors_lost_or_misordered(tmp_path: Path) -> None:
    """32 concurrent clients x 20 requests: every reward matches direct runtime scoring."""
    clients, per_client = 32, 20
    app = create_app(runtime_factory("random", {"seed": "3", "cache": "false"}),
                     ServerConfig(max_wait_ms=2.0), scorer="random")
    plans = {(c, k): [item(c * 1000 + k, j) for j in range(1 + (c + k) % 3)]
             for c in range(clients) for k in range(per_client)}
    with start_in_thread(app) as server:
        def worker(c: int) -> list[tuple[tuple[int, int], list[float | None]]]:
            client = RewardClient(server.url, timeout=60)
            return [((c, k), client.score(plans[(c, k)])) for k in range(per_client)]

        start = time.perf_counter()
        with ThreadPoolExecutor(clients) as pool:
            got = dict(pair for part in pool.map(worker, range(clients)) for pair in part)
        seconds = time.perf_counter() - start
        metrics = RewardClient(server.url).metrics()
    assert len(got) == clients * per_client
    all_items = [it for key in sorted(plans) for it in plans[key]]
    with build_runtime("random", {"seed": "3", "cache": "false", "progress": "false"}) as rt:
        direct = rt.score(native_requests({"items": all_items}))
    served = [s for key in sorted(plans) for s in got[key]]
    assert served == direct
    assert metrics["errors"] == 0 and metrics["rejected"] == 0 and metrics["bad_requests"] == 0
    assert metrics["requests"] == clients * per_client
    assert metrics["items"] == len(all_items)
    assert metrics["batches"] >= 1 and metrics["latency_ms"]["p95"] is not None
    # load figures for the record (never asserted: timings vary with the machine)
    print("\nload:", json.dumps({"requests_per_s": metrics["requests"] / seconds, **{
        k: metrics[k] for k in ("requests", "items", "batches", "mean_batch_items",
                                "mean_batch_requests", "latency_ms")}}))


@pytest.fixture(scope="module")
def tiny_rm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    from tests._hf_fixtures import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("rm") / "rm", arch="qwen2", kind="seq-cls")


def test_openrlhf_schema_with_profile_context_matches_direct_scoring(tiny_rm: Path) -> None:
    opts = {"pretrained": str(tiny_rm), "cache": "false"}
    app = create_app(runtime_factory("hf-classifier", opts), scorer="hf-classifier")
    prompt = "<|user|>\nhow do i practice piano<|end|>\n<|assistant|>\n"
    answers = ["play slow scales each morning", "buy a new guitar", "listen to music daily"]
    label = json.dumps({"question": "how do i practice piano", "profile": POSTS,
                        "record_id": "u1"})
    with start_in_thread(app) as server:
        client = RewardClient(server.url)
        rewards = client.get_reward([prompt + a + "</s>" for a in answers], [prompt] * 3,
                                    [label] * 3)
        # context through the extra per-item lists instead of the label; "</s>" stripped by hand
        again = client.get_reward([prompt + a for a in answers], [prompt] * 3,
                                  questions=["how do i practice piano"] * 3,
                                  profiles=[POSTS] * 3, record_ids=["u1"] * 3)
        status, _, body = post(server.url + "/get_reward", {"query": [prompt + answers[0]],
                                                            "prompts": [prompt]})
    assert status == 200 and set(body) >= {"rewards", "scores", "extra_logs"}
    with build_runtime("hf-classifier", {**opts, "progress": "false"}) as rt:
        view = native_requests({"items": [{"question": "q", "response": "r",
                                           "profile": POSTS}]})[0].profile
        direct = rt.score([ScoreRequest("u1", "how do i practice piano", a, view)
                           for a in answers])
        bare = rt.score([ScoreRequest("", prompt, answers[0])])
    # same answers, same batch: equal up to the scorer's batch-invariance tolerance (fp32)
    assert again == pytest.approx(direct, abs=1e-5)
    # the label's "</s>" was not stripped (no --strip): the first reward scores "answer</s>"
    assert rewards != pytest.approx(direct, abs=1e-5)
    assert body["rewards"] == pytest.approx(bare, abs=1e-6)
    assert len(set(direct)) == 3


def test_strip_option_removes_trailing_tokens() -> None:
    reqs = openrlhf_requests({"query": ["<pad>PROMPT answer</s><pad>"], "prompts": ["PROMPT"]},
                             strip=("</s>", "<pad>"))
    assert reqs[0].response == " answer" and reqs[0].question == "PROMPT"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"items": [{"question": "q", "response": "a"}, {"question": "q"}]},
         "items[1].response: expected a string"),
        ({"items": [{"question": "q", "response": "a", "profile": [{"id": "x"}]}]},
         "items[0].profile[0].text"),
        ({"rows": []}, "body: expected"),
        ({"items": [{"questoin": "q", "response": "a"}]},
         "items[0]: unknown key 'questoin' (did you mean 'question'?); allowed: record_id, id, "
         "question, response, profile"),
        ({"items": [], "options": {}}, "body: unknown key 'options'; allowed: items"),
        ({"items": [{"question": "q", "response": "a", "profile": 3}]},
         "items[0].profile: expected a string or a list of posts, got int"),
        ({"items": [{"question": "q", "response": "a", "profile": [{"text": "t", "id": 4}]}]},
         "items[0].profile[0].id: expected a string, got int"),
        ({"items": ["q"]}, "items[0]: expected an object"),
        # a hidden field is checked also where the served scorer does not read it
        ({"items": [{"question": "q", "response": "a", "rubric_aspects": "x"}]},
         "items[0].rubric_aspects: expected a list"),
    ],
)
def test_native_payload_errors_name_the_field(body: dict, message: str) -> None:
    with pytest.raises(PayloadError, match=re.escape(message)):
        native_requests(body)


def test_openrlhf_payload_errors() -> None:
    with pytest.raises(PayloadError, match="prompts: expected a list of 2"):
        openrlhf_requests({"query": ["a", "b"], "prompts": ["a"]})
    with pytest.raises(PayloadError, match=r"query\[0\]: the query does not contain its prompt"):
        openrlhf_requests({"query": ["hello"], "prompts": ["other"]})
    with pytest.raises(PayloadError, match=r"labels\[0\]: looks like JSON"):
        openrlhf_requests({"query": ["x"], "prompts": [""], "labels": ["{bad"]})


def test_openrlhf_profiles_are_checked_by_the_same_model() -> None:
    """A profile from a label or a context list: the /score profile model, the item named."""
    body = {"query": ["PROMPT x"], "prompts": ["PROMPT"]}
    with pytest.raises(PayloadError, match=re.escape(
            "item 0: profile: expected a string or a list of posts, got int")):
        openrlhf_requests({**body, "profiles": [7]})
    with pytest.raises(PayloadError, match=re.escape(
            "item 0: profile[0].text: expected a string, got int")):
        openrlhf_requests({**body, "labels": ['{"profile": [{"text": 1}]}']})
    req = openrlhf_requests({**body, "profiles": [[{"text": "a", "id": "p"}, "b"]]})[0]
    assert [p.id for p in req.profile.items] == ["p", "1"]


def test_get_reward_with_query_only_is_a_400_naming_prompts() -> None:
    """An old OpenRLHF client sends no prompts: refuse it rather than score the whole chat."""
    app = create_app(runtime_factory("length", {"cache": "false"}), scorer="length")
    with start_in_thread(app) as server:
        status, _, body = post(server.url + "/get_reward", {"query": ["PROMPT one two"]})
        labelled, _, _ = post(server.url + "/get_reward",
                              {"query": ["PROMPT one two"], "labels": ['{"question": "q"}']})
        ok, _, scored = post(server.url + "/get_reward",
                             {"query": ["PROMPT one two"], "prompts": ["PROMPT"]})
        empty, _, _ = post(server.url + "/get_reward", {"query": []})
        metrics = server.metrics()
    assert status == 400 and body["error"].startswith("prompts: missing")
    assert "/score" in body["error"]
    assert labelled == 400
    assert ok == 200 and scored["rewards"] == [2.0]
    assert empty == 200
    assert metrics["bad_requests"] == 2


def test_bad_request_is_400_and_counted() -> None:
    app = create_app(runtime_factory("length", {"cache": "false"}), scorer="length")
    with start_in_thread(app) as server:
        status, _, body = post(server.url + "/score", {"items": [{"question": "q"}]})
        ok, _, scored = post(server.url + "/score", {"items": [
            {"question": "q", "response": "one two three"}]})
        metrics = server.metrics()
    assert status == 400 and "items[0].response" in body["error"]
    assert ok == 200 and scored == {"scores": [3.0]}
    assert metrics["bad_requests"] == 1 and metrics["errors"] == 0


def test_requests_waiting_behind_a_batch_are_coalesced_within_limits() -> None:
    """While a batch runs, waiting requests join the next batch up to max_batch_items."""
    scorer = GatedScorer()

    async def main() -> list[list[float]]:
        batcher = RewardBatcher(gated_runtime(scorer),
                                ServerConfig(max_batch_items=5, max_wait_ms=0))
        await batcher.start()
        first = asyncio.create_task(batcher.submit([ScoreRequest("a", "q", "x")]))
        await asyncio.get_running_loop().run_in_executor(None, scorer.entered.wait, 10)
        rest = [asyncio.create_task(batcher.submit(
            [ScoreRequest(f"r{i}", "q", "y" * (i + 1)), ScoreRequest(f"r{i}", "q", "z")]))
            for i in range(4)]
        await asyncio.sleep(0.05)
        assert batcher.queue_depth == 4
        scorer.gate.set()
        out = [await first] + [await t for t in rest]
        snap = batcher.snapshot()
        await batcher.stop()
        assert snap["batches"] == 3 and snap["max_batch_items"] == 4
        return out

    results = asyncio.run(main())
    assert scorer.batches == [1, 4, 4]  # 2 + 2 items per batch: a third request would make 6 > 5
    assert results == [[1.0], [1.0, 1.0], [2.0, 1.0], [3.0, 1.0], [4.0, 1.0]]


def test_token_budget_splits_batches() -> None:
    scorer = GatedScorer()
    scorer.gate.set()

    async def main() -> None:
        batcher = RewardBatcher(gated_runtime(scorer),
                                ServerConfig(batch_tokens=30, max_wait_ms=50))
        await batcher.start()
        big = "w " * 100  # ~50 tokens: over the budget on its own, so it runs alone
        await asyncio.gather(*(batcher.submit([ScoreRequest("a", "q", t)])
                               for t in ("short", "tiny", big, "small")))
        await batcher.stop()

    asyncio.run(main())
    # the two small ones share a batch; the oversized one runs alone; the last one follows it
    assert scorer.batches == [2, 1, 1]


def test_full_queue_answers_503_and_the_client_retries() -> None:
    scorer = GatedScorer()
    app = create_app(gated_runtime(scorer), ServerConfig(max_queue=1, max_wait_ms=0))
    with start_in_thread(app) as server:
        one = {"items": [{"question": "q", "response": "abc"}]}
        with ThreadPoolExecutor(3) as pool:
            running = pool.submit(post, server.url + "/score", one)
            assert scorer.entered.wait(10)
            queued = pool.submit(post, server.url + "/score", one)
            while server.metrics()["queue_depth"] < 1:
                threading.Event().wait(0.01)
            status, headers, body = post(server.url + "/score", one)
            client = RewardClient(server.url, backoff=0.01)
            retried = pool.submit(client.score, one["items"])
            while server.metrics()["rejected"] < 2:
                threading.Event().wait(0.01)
            scorer.gate.set()
            results = [running.result(), queued.result()]
            assert retried.result(timeout=30) == [3.0]
        metrics = server.metrics()
    assert status == 503 and headers.get("retry-after") == "1" and "queue full" in body["error"]
    assert [r[0] for r in results] == [200, 200]
    assert client.busy_retries >= 1
    assert metrics["rejected"] >= 2 and metrics["errors"] == 0


def test_scorer_failure_is_500_and_the_server_keeps_serving() -> None:
    scorer = GatedScorer()
    scorer.gate.set()
    scorer.fail = True
    app = create_app(gated_runtime(scorer))
    with start_in_thread(app) as server:
        client = RewardClient(server.url)
        with pytest.raises(RewardServerError, match=r"HTTP 500.*model exploded"):
            client.score([{"question": "q", "response": "a"}])
        scorer.fail = False
        assert client.score([{"question": "q", "response": "ab"}]) == [2.0]
        assert client.health()["status"] == "ok"
        assert client.metrics()["errors"] == 1


def test_a_failing_request_does_not_fail_those_batched_with_it() -> None:
    scorer = GatedScorer()

    async def main() -> list:
        batcher = RewardBatcher(gated_runtime(scorer), ServerConfig(max_wait_ms=0))
        await batcher.start()
        first = asyncio.create_task(batcher.submit([ScoreRequest("a", "q", "x")]))
        await asyncio.get_running_loop().run_in_executor(None, scorer.entered.wait, 10)
        good = asyncio.create_task(batcher.submit([ScoreRequest("b", "q", "fine")]))
        bad = asyncio.create_task(batcher.submit([ScoreRequest("c", "q", "BOOM")]))
        await asyncio.sleep(0.02)
        scorer.gate.set()
        out = await asyncio.gather(first, good, bad, return_exceptions=True)
        errors = batcher.snapshot()["errors"]
        await batcher.stop()
        return [*out, errors]

    first, good, bad, errors = asyncio.run(main())
    assert first == [1.0] and good == [4.0]
    assert isinstance(bad, RuntimeError) and errors == 1
    assert scorer.batches == [1, 2, 1, 1]  # the failed pair was retried one request at a time


def test_pairwise_scorer_is_refused() -> None:
    class Judge:
        def compare(self, pairs):
            return [0.5 for _ in pairs]

    async def main() -> None:
        batcher = RewardBatcher(lambda: ScorerRuntime(Judge(), cache=False, progress=False),
                                ServerConfig())
        with pytest.raises(ValueError, match="pointwise"):
            await batcher.start()

    asyncio.run(main())


def test_queue_full_error_without_http() -> None:
    scorer = GatedScorer()

    async def main() -> None:
        batcher = RewardBatcher(gated_runtime(scorer), ServerConfig(max_queue=1, max_wait_ms=0))
        await batcher.start()
        a = asyncio.create_task(batcher.submit([ScoreRequest("a", "q", "x")]))
        await asyncio.get_running_loop().run_in_executor(None, scorer.entered.wait, 10)
        b = asyncio.create_task(batcher.submit([ScoreRequest("b", "q", "x")]))
        await asyncio.sleep(0.02)
        with pytest.raises(QueueFullError):
            await batcher.submit([ScoreRequest("c", "q", "x")])
        scorer.gate.set()
        assert await a == [1.0] and await b == [1.0]
        await batcher.stop()

    asyncio.run(main())


def test_verl_reward_functions_call_the_server() -> None:
    from prbench.downstream import verl_reward

    app = create_app(runtime_factory("length", {"cache": "false"}), scorer="length")
    with start_in_thread(app) as server:
        info = {"question": "how do i cook", "profile": POSTS, "record_id": "u9"}
        one = verl_reward.compute_score("prbench", "a b c d", None, info, server_url=server.url)
        many = verl_reward.compute_score_batch(
            ["prbench"] * 2, ["a", "a b"], [None, None],
            [{"prbench": info}, info], server_url=server.url)
        with pytest.raises(ValueError, match="extra_info has no 'question'"):
            verl_reward.compute_score("prbench", "x", None, {}, server_url=server.url)
    assert one == 4.0 and many == [1.0, 2.0]


def test_a_posts_own_extra_keys_are_ignored() -> None:
    """Posts of the benchmark's records carry more than {id, category, text}: sent as they are."""
    posts = [{**POSTS[0], "title": "Morning", "date": "2024-01-02"}, "a bare post"]
    req = native_requests({"items": [{"question": "q", "response": "r", "profile": posts}]})[0]
    assert [(p.id, p.category) for p in req.profile.items] == [("p1", "music"), ("1", "")]
    assert req.profile.text.endswith("Post 2 (Category: ): a bare post")


def test_openapi_documents_the_score_body() -> None:
    """/openapi.json describes /score's body: its fields, which are required, no others."""
    app = create_app(runtime_factory("length", {"cache": "false"}), scorer="length")
    with start_in_thread(app) as server, \
            urllib.request.urlopen(server.url + "/openapi.json", timeout=60) as resp:
        spec = json.loads(resp.read())
    body = spec["paths"]["/score"]["post"]["requestBody"]
    assert body["required"] is True
    assert body["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ScoreBody"}
    schemas = spec["components"]["schemas"]
    assert schemas["ScoreBody"]["required"] == ["items"]
    assert schemas["ScoreBody"]["properties"]["items"]["items"] == {
        "$ref": "#/components/schemas/ScoreItem"}
    item = schemas["ScoreItem"]
    assert set(item["properties"]) == {"record_id", "id", "question", "response", "profile",
                                       "category", "domain", "narrative", "rubric_aspects"}
    assert item["required"] == ["question", "response"]
    assert item["additionalProperties"] is False
    assert all(field.get("description") for field in item["properties"].values())
    assert "#/components/schemas/Post" in json.dumps(item["properties"]["profile"])
    assert schemas["Post"]["required"] == ["text"]
    # every $ref points at a schema the document has
    refs = {ref.rsplit("/", 1)[1] for ref in _refs(spec)}
    assert refs <= set(schemas)


def _refs(node: object) -> list[str]:
    if isinstance(node, dict):
        own = [node["$ref"]] if "$ref" in node else []
        return own + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def test_profile_posts_render_in_benchmark_format() -> None:
    req = native_requests({"items": [{"question": "q", "response": "r", "profile": POSTS}]})[0]
    assert isinstance(req.profile, ProfileView)
    assert req.profile.text.startswith("Post 1 (Category: music):")
    assert [p.id for p in req.profile.items] == ["p1", "p2"]


def test_diagnostic_items_carry_hidden_fields() -> None:
    body = {"items": [{"question": "q", "response": "r", "narrative": "n",
                       "rubric_aspects": [{"aspect": "a"}]}]}
    assert native_requests(body)[0].hidden is None
    assert native_requests(body, diagnostic=True)[0].hidden == {
        "narrative": "n", "rubric_aspects": [{"aspect": "a"}]}


def test_cli_serve_help_and_bad_option(capsys: pytest.CaptureFixture[str]) -> None:
    from prbench.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["serve", "--help"])
    assert exc.value.code == 0
    assert "--max_queue" in capsys.readouterr().out
    assert main(["serve", "--model_args", "scorer=length,bogus=1"]) == 1
    assert "bogus" in capsys.readouterr().err
