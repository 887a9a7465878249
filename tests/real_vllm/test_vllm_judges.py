"""The LLM judges against a real vLLM generation server: chat completions, ``/tokenize``, the card.

The served model (:func:`tests.real_vllm._server.build_verdict_lm`) answers every chat with
``Result: A`` (greedy), so each order's verdict is readable and known: the answer shown first
wins.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from prbench.profiles.base import ProfileView
from prbench.scoring.base import PairRequest
from tests._harness_fixtures import results_and_manifest, run_eval
from tests.real_vllm._server import JUDGE_MODEL_LEN, get_json

TASK = "personalized_rewardbench_sample_noprofile"


def _served_requests(base_url: str) -> float:
    """vLLM's count of requests it finished (its Prometheus ``/metrics``)."""
    import urllib.request

    with urllib.request.urlopen(base_url + "/metrics", timeout=30) as resp:
        text = resp.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("vllm:request_success_total"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _samples(out: Path) -> dict[tuple[str, int], object]:
    found = {}
    for f in sorted(out.rglob("samples_*.jsonl")):
        for line in f.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            found[(f.name.split("_20")[0], row["doc_id"])] = row["resps"]
    return found


@pytest.mark.parametrize("protocol", ["prbench", "released"])
def test_llm_judge_end_to_end_twice_the_second_from_the_reply_cache(
        judge_server, tmp_path, capsys, protocol):
    from prbench.harness import tasks

    args = (f"scorer=llm-judge,backend=openai,model=tiny-judge,"
            f"base_url={judge_server.base_url}/v1,max_retries=0,progress=false")
    if protocol == "released":
        system = tmp_path / "system.txt"
        system.write_text("You compare two answers to a question.", encoding="utf-8")
        user = tmp_path / "user.txt"
        user.write_text("Question: {question}\nAnswer A: {Response_A}\nAnswer B: {Response_B}\n"
                        "Reply with Result: A or Result: B.", encoding="utf-8")
        args += f",protocol=released,system_prompt_file={system},user_prompt_file={user}"
    runs = []
    for name in ("first", "second"):
        before = _served_requests(judge_server.base_url)
        tasks.reset()
        try:
            code, _, err = run_eval(["eval", "--tasks", TASK, "--limit", "2", "--log_samples",
                                     "--model_args", args, "--output_path",
                                     str(tmp_path / name)], capsys)
        finally:
            tasks.reset()
        assert code == 0, err
        results, manifest, _ = results_and_manifest(tmp_path / name)
        runs.append((results, manifest, _samples(tmp_path / name),
                     _served_requests(judge_server.base_url) - before))
    (first, first_manifest, first_samples, asked), (second, manifest, samples, asked_again) = runs
    stats = first_manifest["scorer"]["stats"]
    orders = 2 if protocol == "prbench" else 1
    n_pairs = 6  # 2 pairs in each of the 3 domains
    assert asked == n_pairs * orders  # every order went to the server once
    assert stats["failures"] == []  # no HTTP error, no 400, every reply read
    assert stats["first_shown_win_rate"] == 1.0  # "Result: A": the answer shown first
    # greedy: the second run's verdicts are the first's, every reply from the judge's reply
    # cache (llm-judge keeps the server's replies; the server is not asked again)
    assert samples == first_samples and samples
    assert second["results"] == first["results"]
    assert asked_again == 0
    assert manifest["scorer"]["stats"]["failures"] == []


def test_rm_r1_fits_each_budget_to_the_served_context(judge_server):
    """RM-R1's budget: max_model_len from the real /v1/models card, prompts counted by the real
    /tokenize; a prompt that fills the context is never sent; nothing is refused (no 400)."""
    from prbench_plugin_rm_r1.judge import RMR1Judge
    from prbench_plugin_rm_r1.plugin import RMR1Options

    status, card = get_json(judge_server.base_url + "/v1/models")
    assert status == 200 and card["data"][0]["max_model_len"] == JUDGE_MODEL_LEN
    judge = RMR1Judge(RMR1Options(backend="openai", model="tiny-judge",
                                  base_url=judge_server.base_url + "/v1", cache_dir="",
                                  max_retries=0))
    profile = ProfileView(text="I practice piano every morning.")
    long_answer = " ".join(["the music of the piano is a good habit"] * 400)  # > 2048 tokens
    pairs = [
        PairRequest("short", "How do I start piano?", "Play slow scales daily.",
                    "Buy a guitar.", profile=profile),
        PairRequest("long", "How do I start piano?", long_answer, "Buy a guitar.",
                    profile=profile),
    ]
    before = _served_requests(judge_server.base_url)
    judge.compare(pairs)
    sent = _served_requests(judge_server.base_url) - before
    stats = judge.stats()
    budget = stats["budget"]
    assert budget["source"] == "served context"
    assert budget["max_model_len"] == JUDGE_MODEL_LEN
    assert budget["n_no_room"] == 2  # both orders of the long pair: not sent
    assert budget["n_fitted"] == 4  # every budget cut below RM-R1's 8192 to fit the context
    assert 1 <= budget["smallest"] < JUDGE_MODEL_LEN
    assert sent == 2  # the short pair's two orders only
    reasons = {(f["item"], f["reason"]) for f in stats["failures"]}
    assert ("long", "prompt-too-long") in reasons
    assert not any(r.startswith("http") for _, r in reasons)  # the server refused nothing
