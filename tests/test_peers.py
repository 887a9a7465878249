"""prbench serve with the peers' released code: verl 0.9.1's loader, OpenRLHF 0.11.2's executor.

verl and OpenRLHF are optional (the ``peers`` extra plus ``pip install --no-deps``, which ``make
setup`` runs); their tests skip themselves when a peer is absent. See tests/_peers_fixtures.py
for what is imported and why.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from prbench.downstream.serve import create_app, runtime_factory, start_in_thread
from prbench.downstream.serve_batcher import ServerConfig
from prbench.downstream.serve_client import KEY_ENV, URL_ENV, RewardClient
from prbench.downstream.serve_schema import (
    MIN_KEPT_PROMPT_CHARS,
    PayloadError,
    openrlhf_batch,
    split_query,
)
from tests._peers_fixtures import (
    VERL_OVERRIDES,
    ScriptedEngine,
    compose_verl_config,
    sampling_params,
    verl_loader,
)

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "openrlhf_reward_func.py"
TOKEN = "peers-test-token-0123456789abcdef"
POSTS = [
    {"id": "p1", "category": "music", "text": "I practice piano every morning before work."},
    {"id": "p2", "category": "cooking", "text": "Simple recipes with few steps are best for me."},
]


def _has(*modules: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in modules)


needs_verl = pytest.mark.skipif(not _has("verl", "hydra", "omegaconf"),
                                reason="verl (--no-deps) and hydra-core: the peers extra")


def _openrlhf_agent() -> Any:
    if not _has("openrlhf", "aiohttp"):
        pytest.skip("OpenRLHF (--no-deps) and its agent imports: the peers extra")
    return pytest.importorskip("openrlhf.utils.agent")


@pytest.fixture(scope="module")
def tiny_rm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    from tests._hf_fixtures import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("rm") / "rm", arch="qwen2", kind="seq-cls")


@pytest.fixture(scope="module")
def policy_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A byte-level BPE tokenizer, as the policy's (OpenRLHF decodes queries with it)."""
    pytest.importorskip("transformers")
    from tests._hf_fixtures import build_tokenizer

    return build_tokenizer(tmp_path_factory.mktemp("policy") / "tok", tokenizer_adds_bos=False)


def rm_app(tiny_rm: Path, **kwargs: Any) -> Any:
    config = ServerConfig(strip=("</s>",))
    opts = {"pretrained": str(tiny_rm), "cache": "false"}
    return create_app(runtime_factory("hf-classifier", opts), config, scorer="hf-classifier",
                      **kwargs)


# -- verl 0.9.1 ----------------------------------------------------------------------------------


@needs_verl
def test_verl_main_ppo_config_with_the_docs_keys_loads_and_scores(tiny_rm: Path) -> None:
    """The docs' overrides on verl's own config; verl's loader; rewards equal to /score's."""
    info = {"question": "how do i practice piano", "profile": POSTS, "record_id": "u1"}
    answers = ["play slow scales each morning", "buy a new guitar", "listen to music daily"]
    with start_in_thread(rm_app(tiny_rm)) as server:
        cfg = compose_verl_config([o.format(url=server.url) for o in VERL_OVERRIDES])
        assert cfg.reward.reward_manager.name == "naive"  # 0.9.1's default manager
        with verl_loader() as get_custom_reward_fn:
            reward_fn = get_custom_reward_fn(cfg)
        assert reward_fn is not None
        # called the way verl's NaiveRewardManager calls it (keywords; it adds two extra_info keys)
        via_verl = [
            reward_fn(data_source="prbench", solution_str=a, ground_truth=None,
                      extra_info={**info, "num_turns": None, "rollout_reward_scores": {}})
            for a in answers
        ]
        client = RewardClient(server.url)
        direct = [client.score([{**info, "response": a}])[0] for a in answers]
    assert via_verl == direct  # the same request, the same batch: delta 0
    assert len(set(via_verl)) == 3


@needs_verl
def test_verl_top_level_reward_keys_are_not_read_by_main_ppo() -> None:
    """Why the docs changed: main_ppo (unlike fully_async_main) does not move these keys."""
    old = ["custom_reward_function.path=pkg://prbench.downstream.verl_reward",
           "custom_reward_function.name=compute_score",
           "+custom_reward_function.reward_kwargs.server_url=http://127.0.0.1:9"]
    cfg = compose_verl_config(old)
    assert cfg.reward.custom_reward_function.path is None
    with verl_loader() as get_custom_reward_fn:
        assert get_custom_reward_fn(cfg) is None  # verl would fall back to its default reward


@needs_verl
def test_verl_0_9_1_registers_no_batch_reward_manager() -> None:
    """``compute_score_batch`` needs a ``batch`` reward manager, which this verl does not have."""
    spec = importlib.util.find_spec("verl")
    assert spec is not None and spec.origin is not None
    folder = Path(spec.origin).parent / "experimental" / "reward_loop" / "reward_manager"
    names = set(re.findall(r'@register\("([^"]+)"\)',
                           "".join(p.read_text() for p in folder.glob("*.py"))))
    assert "naive" in names and "batch" not in names


def _docs_text() -> str:
    files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    return "\n".join(p.read_text() for p in files if p.exists())


def test_docs_give_the_peer_commands_these_tests_run() -> None:
    text = " ".join(_docs_text().replace("\\\n", " ").split())
    for override in VERL_OVERRIDES:
        assert override.format(url="http://HOST:8000") in text, override
    # the keys main_ppo ignores, and a reward manager 0.9.1 does not have, are not offered
    assert not re.search(r"(?<![.\w])custom_reward_function\.(path|name)=", text)
    assert "reward_manager=batch" not in text
    assert "--reward.remote_url /path/to/prbench/examples/openrlhf_reward_func.py" in text


# -- OpenRLHF 0.11.2 -----------------------------------------------------------------------------


def test_openrlhf_reward_func_sends_the_token_through_the_agent_executor(
    tiny_rm: Path, policy_tokenizer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = _openrlhf_agent()
    label = json.dumps({"question": "how do i practice piano", "profile": POSTS})
    prompt = "<|user|>\nhow do i practice piano<|end|>\n<|assistant|>\n"
    engine = ScriptedEngine(policy_tokenizer, "play slow scales each morning")
    with start_in_thread(rm_app(tiny_rm, api_key=TOKEN)) as server:
        monkeypatch.setenv(URL_ENV, server.url)
        monkeypatch.setenv(KEY_ENV, TOKEN)
        executor = agent.SingleTurnAgentExecutor(str(EXAMPLE))  # --reward.remote_url FILE.py
        assert executor.reward_func is not None

        def run() -> dict[str, Any]:
            out: dict[str, Any] = asyncio.run(executor.execute(
                prompt, label, sampling_params(16), 512, policy_tokenizer, engine))
            return out

        out = run()
        monkeypatch.delenv(KEY_ENV)
        refused = run()  # no token: the server says 401; OpenRLHF logs it, the reward is None
        monkeypatch.setenv(KEY_ENV, TOKEN)
        direct = RewardClient(server.url).score([{"question": "how do i practice piano",
                                                  "profile": POSTS, "response": engine.text}])
        metrics = RewardClient(server.url).metrics()
    assert out["reward"] == direct and out["scores"] == direct
    assert out["extra_logs"] == {"prompt_cut_left": [0.0]}
    assert refused["reward"] is None
    assert metrics["unauthorized"] == 1 and metrics["errors"] == 0


def _cut_inside_a_character(tokenizer: Any, prompt: str, least: int) -> int:
    """A token count ``k >= least`` whose last-``k`` cut starts inside a multi-byte character."""
    ids = tokenizer(text=prompt, add_special_tokens=False)["input_ids"]
    for k in range(least, len(ids)):
        if tokenizer.decode(ids[-k:]).startswith("\ufffd"):
            return k
    raise AssertionError("the prompt has no multi-byte character to cut inside")


def test_openrlhf_prompt_cut_from_the_left_is_scored_and_counted(
    tiny_rm: Path, policy_tokenizer: Any
) -> None:
    """OpenRLHF's own cut (its executor keeps the last tokens) through its own HTTP client."""
    agent = _openrlhf_agent()
    from tests._hf_fixtures import sample_text

    rng = random.Random(5)
    long_prompt = ("<|user|>\n" + sample_text(rng, 120) + " café ☕ naïve "
                   + sample_text(rng, 40) + "<|end|>\n<|assistant|>\n")
    short_prompt = "<|user|>\nhow do i practice piano<|end|>\n<|assistant|>\n"
    engine = ScriptedEngine(policy_tokenizer, "play slow scales each morning")
    n_prompt = len(policy_tokenizer(text=long_prompt, add_special_tokens=False)["input_ids"])
    max_tokens = 16
    keep_plain = 60  # a cut between whole characters
    keep_split = _cut_inside_a_character(policy_tokenizer, long_prompt, 90)
    with start_in_thread(rm_app(tiny_rm)) as server:
        executor = agent.SingleTurnAgentExecutor(server.url + "/get_reward")

        def run(prompt: str, keep: int) -> dict[str, Any]:
            out: dict[str, Any] = asyncio.run(executor.execute(
                prompt, None, sampling_params(max_tokens), keep + max_tokens, policy_tokenizer,
                engine))
            return out

        cut = run(long_prompt, keep_plain)
        split = run(long_prompt, keep_split)
        whole = run(short_prompt, 400)
        client = RewardClient(server.url)
        direct = [client.score([{"question": p, "response": engine.text}])[0]
                  for p in (long_prompt, long_prompt, short_prompt)]
        metrics = client.metrics()
    assert [len(p) for p in engine.prompts] == [keep_plain, keep_split,
                                                 len(engine.prompts[2])]
    assert keep_split < n_prompt and len(engine.prompts[2]) < 400
    # scored as the answer to the whole prompt (the reward model sees what the user asked)
    assert [cut["reward"], split["reward"], whole["reward"]] == [[d] for d in direct]
    assert [r["extra_logs"] for r in (cut, split, whole)] == [
        {"prompt_cut_left": [1.0]}, {"prompt_cut_left": [1.0]}, {"prompt_cut_left": [0.0]}]
    assert metrics["prompt_cut_left"] == 2 and metrics["bad_requests"] == 0


# -- the cut-prompt rule itself (no peer needed) -------------------------------------------------


def test_split_query_accepts_the_end_of_the_prompt_only() -> None:
    prompt = "Earlier posts: I bake bread on Sundays.\nQuestion: which flour should I buy?\n"
    whole = split_query("<s>" + prompt + "Rye flour.</s>", prompt, ("</s>",), "query[0]")
    assert (whole.response, whole.prompt_cut_left) == ("Rye flour.", False)
    for keep in (MIN_KEPT_PROMPT_CHARS, 40, len(prompt) - 1):
        got = split_query(prompt[-keep:] + "Rye flour.", prompt, (), "query[0]")
        assert (got.response, got.prompt_cut_left) == ("Rye flour.", True), keep
    # a decoder that drops the space before the first kept word still leaves a suffix
    got = split_query("flour should I buy?\nRye.", prompt, (), "q")
    assert got.response == "Rye." and got.prompt_cut_left
    # the longest suffix wins when the answer repeats the prompt's end
    tail = prompt[-20:]
    got = split_query(tail + tail + "x", prompt, (), "q")
    assert got.response == tail + "x"
    with pytest.raises(PayloadError, match=r"query\[3\]: the query does not contain its prompt"):
        split_query(prompt[-(MIN_KEPT_PROMPT_CHARS - 1):] + "Rye.", prompt, (), "query[3]")
    # OpenRLHF turns the 400 into a None reward: the body names the setting to change
    with pytest.raises(PayloadError, match=r"fewer than 16 characters; raise OpenRLHF's --max_len"):
        split_query(prompt[-(MIN_KEPT_PROMPT_CHARS - 1):] + "Rye.", prompt, (), "query[3]")
    with pytest.raises(PayloadError, match="nor start with the end of it"):
        split_query("Something else entirely, long enough.", prompt, (), "q")


def test_the_openrlhf_docs_say_which_replies_become_none_and_what_to_set() -> None:
    """OpenRLHF logs a non-200 reply at INFO and uses a None reward: docs/downstream.md says so,
    with the two settings that cause it (the prompt budget, the token)."""
    docs = (Path(__file__).resolve().parent.parent / "docs" / "downstream.md").read_text()
    section = docs[docs.index("- **OpenRLHF**"):docs.index("- **verl**")]
    flat = " ".join(section.split())
    for words in ("into a `None` reward and logs it at INFO", "fewer than 16 characters",
                  "`--data.max_len`", "**401**", "`PRBENCH_REWARD_API_KEY`"):
        assert words in flat, words


def test_openrlhf_batch_marks_each_cut_query() -> None:
    prompt = "Question: how should I plan a week of simple dinners?\n"
    batch = openrlhf_batch({"query": [prompt + "Soup.", prompt[-30:] + "Stew."],
                            "prompts": [prompt, prompt]})
    assert [r.response for r in batch.requests] == ["Soup.", "Stew."]
    assert [r.question for r in batch.requests] == [prompt, prompt]
    assert batch.extra_logs() == {"prompt_cut_left": [0.0, 1.0]}
