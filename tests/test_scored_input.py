"""The input as scored (``scored_input`` in the samples file): what each scorer really sent.

Every test runs ``prbench eval --log_samples`` on the bundled sample and reads the samples file
back: the hf-classifier's texts are the strings its tokenizer was given (a spy on the
tokenizer), its token counts the ids it sent, its cuts where the offset mapping puts them; the
llm-judge's messages and replies are what the stand-in server received and answered. Then the
switches: off, the clip at the limit, a re-run from the score cache.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import re
from pathlib import Path
from typing import Any

import pytest

from tests._harness_fixtures import run_eval

GROUP = "personalized_rewardbench_sample"


def _lines(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for f in sorted(out.rglob("samples_*.jsonl"))
            for x in f.read_text(encoding="utf-8").split("\n") if x]


def _eval(tmp_path: Path, capsys: pytest.CaptureFixture[str], model_args: str, *,
          tasks: str = GROUP, name: str = "out", limit: str = "2") -> list[dict[str, Any]]:
    from prbench.harness import tasks as task_state

    task_state.reset()
    try:
        code, _, err = run_eval(["eval", "--tasks", tasks, "--limit", limit, "--model_args",
                                 model_args, "--log_samples", "-o", str(tmp_path / name)],
                                capsys)
    finally:
        task_state.reset()
    assert code == 0, err
    return _lines(tmp_path / name)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.fixture(scope="module")
def tiny_rm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests._hf_fixtures import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("rm") / "rm")


class Spy:
    """What the hf-classifier tokenised for each request and the ids it sent, by answer."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from prbench.backends import hf_classifier

        self.calls: list[Any] = []
        #: answer text -> (the text its request gave the tokenizer, the ids sent, profile shown)
        self.sent: dict[str, tuple[str, list[int], str]] = {}
        self.tokenizer: Any = None
        real_load = hf_classifier.load_tokenizer
        real_encode = hf_classifier.HFClassifierScorer._encode_inputs
        spy = self

        def load(*args: Any, **kwargs: Any) -> Any:
            tok = real_load(*args, **kwargs)
            base = type(tok)

            def call(self: Any, texts: Any, *a: Any, **kw: Any) -> Any:
                spy.calls.append(texts)
                return base.__call__(self, texts, *a, **kw)

            tok.__class__ = type("SpiedTokenizer", (base,), {"__call__": call})
            spy.tokenizer = tok
            return tok

        def encode(self: Any, requests: Any, *, count: bool = True) -> Any:
            before = len(spy.calls)
            encoded = real_encode(self, requests, count=count)
            if count:  # a scoring call: its first tokenizer call is the batch of texts
                texts = spy.calls[before]
                assert isinstance(texts, list) and len(texts) == len(requests)
                for r, text, e in zip(requests, texts, encoded, strict=True):
                    spy.sent[r.response] = (text, list(e.ids), r.profile.text)
            return encoded

        monkeypatch.setattr(hf_classifier, "load_tokenizer", load)
        monkeypatch.setattr(hf_classifier.HFClassifierScorer, "_encode_inputs", encode)


def _answers(lines: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for line in lines:
        given = line["scored_input"]
        assert given["kind"] == "text" and set(given["answers"]) == {"chosen", "rejected"}
        for label, record in given["answers"].items():
            out.append((line["doc"][label], record))
    return out


@pytest.mark.parametrize("truncation", ["left", "profile_first"])
def test_hf_classifier_records_the_texts_it_tokenised_and_the_ids_it_sent(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tiny_rm: Path, truncation: str) -> None:
    spy = Spy(monkeypatch)
    lines = _eval(tmp_path, capsys, f"scorer=hf-classifier,pretrained={tiny_rm},max_length=700,"
                  f"truncation={truncation},device=cpu,dtype=float32,cache=false")
    tok = spy.tokenizer
    answers = _answers(lines)
    assert len(answers) == 12
    cut = 0
    for answer, record in answers:
        text, ids, profile = spy.sent[answer]
        assert record["text"] == text  # the very string given to the tokenizer
        assert record["chars"] == len(text) and record["sha256"] == _sha(text)
        assert not record["clipped"] and not record["cached"]
        assert record["tokens"] == len(ids)
        raw = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        assert record["tokens_full"] == len(raw["input_ids"]) + 1  # the tokenizer's one BOS
        start, end = record["profile"]
        assert text[start:end] == profile and profile
        if record["cut"] is None:
            assert len(ids) == record["tokens_full"]
            continue
        cut += 1
        c = record["cut"]
        assert c["tokens_dropped"] == record["tokens_full"] - len(ids)
        if truncation == "left":
            assert c["side"] == "left"
            body = ids[1:]  # the BOS is kept, the first tokens after it are dropped
            first = len(raw["input_ids"]) - len(body)
            assert raw["input_ids"][first:] == body
            assert c["char"] == raw["offset_mapping"][first][0]
        else:
            assert c["side"] == "middle" and "text_sent" not in c
            kept = text[: c["char"]] + text[c["end_char"]:]
            assert [tok.bos_token_id, *tok(kept, add_special_tokens=False)["input_ids"]] == ids
            assert start <= c["char"] <= c["end_char"] <= end  # the end of the profile went
    assert cut >= 6  # max_length=700 cuts most inputs of the sample
    # the wall time of the one scorer call is shared by tokens sent
    rates = {round(r["time_s"] / r["tokens"], 12) for _, r in answers}
    assert len(rates) == 1 and all(r["time_s"] > 0 for _, r in answers)


def test_a_rerun_from_the_score_cache_rebuilds_the_same_input_marked_cached(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], tiny_rm: Path) -> None:
    args = (f"scorer=hf-classifier,pretrained={tiny_rm},max_length=700,truncation=left,"
            f"device=cpu,dtype=float32,cache_path={tmp_path / 'scores.sqlite'}")
    first = _answers(_eval(tmp_path, capsys, args, name="a"))
    again = _answers(_eval(tmp_path, capsys, args, name="b"))
    assert [a for a, _ in first] == [a for a, _ in again]
    for (_, one), (_, two) in zip(first, again, strict=True):
        assert not one["cached"] and one["time_s"] is not None
        assert two["cached"] and two["time_s"] is None
        assert {k: v for k, v in two.items() if k not in ("cached", "time_s")} == {
            k: v for k, v in one.items() if k not in ("cached", "time_s")}


def _judge_script(seen: dict[str, list[dict[str, str]]]) -> Any:
    def script(messages: list[dict[str, str]]) -> str:
        shown_a = re.search(r"<answer_a>\n(.*?)\n</answer_a>", messages[-1]["content"],
                            re.DOTALL)
        assert shown_a is not None
        reply = f"Answer A starts with {shown_a.group(1)[:12]!r}.\nVerdict: A"
        seen[json.dumps(messages, sort_keys=True)] = messages
        return reply

    return script


def test_llm_judge_records_each_order_as_the_server_got_and_answered_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from prbench.testing import LoopbackOpenAI

    seen: dict[str, list[dict[str, str]]] = {}
    script = _judge_script(seen)
    with LoopbackOpenAI(script) as server:
        base = f"scorer=llm-judge,backend=openai,model=judge,base_url={server.base_url},cache_dir="
        lines = _eval(tmp_path, capsys, base, tasks=f"{GROUP}_noprofile")
    assert len(seen) == 12
    for line in lines:
        given = line["scored_input"]
        assert given["kind"] == "messages" and "answers" not in given
        orders = given["orders"]
        assert [o["shown_first"] for o in orders] == ["chosen", "rejected"]
        for order in orders:
            key = json.dumps(order["messages"], sort_keys=True)
            assert order["messages"] == seen[key]  # the messages of a request body received
            assert order["reply"] == script(seen[key])  # what the server sent back
            text = json.dumps(seen[key], sort_keys=True, separators=(",", ":"),
                              ensure_ascii=False)
            assert order["sha256"] == _sha(text) and order["chars"] == len(text)
            assert order["tokens"] is None and order["time_s"] >= 0 and not order["cached"]
        shown = order["messages"][-1]["content"]
        assert line["doc"]["chosen"].strip()[:30] in shown


def test_a_cached_judge_verdict_gets_its_orders_rebuilt_with_the_replies_kept(
        tmp_path: Path) -> None:
    from prbench.judges.pairwise import LLMJudgeOptions, LLMPairwiseJudge
    from prbench.scoring.base import PairRequest
    from prbench.scoring.runtime import ScorerRuntime
    from prbench.testing import ScriptedBackend

    seen: dict[str, list[dict[str, str]]] = {}
    script = _judge_script(seen)
    pairs = [PairRequest(record_id=f"r{i}", question=f"question {i}", first=f"one {i}",
                         second=f"two {i}") for i in range(3)]

    def judged() -> tuple[list[Any], ScriptedBackend]:
        backend = ScriptedBackend(script)
        judge = LLMPairwiseJudge(LLMJudgeOptions(), backend=backend)
        judge.fingerprint = lambda: "scripted-judge"  # type: ignore[attr-defined]
        with ScorerRuntime(judge, pairwise=True, progress=False,
                           cache_path=str(tmp_path / "scores.sqlite")) as rt:
            rt.compare(pairs)
            return rt.inputs(pairs), backend

    first, backend = judged()
    again, idle = judged()
    assert len(backend.chats) == 6 and idle.chats == []  # the second run asked nothing
    for one, two in zip(first, again, strict=True):
        assert all(not o["cached"] and o["time_s"] is not None for o in one["orders"])
        assert all(o["cached"] and o["time_s"] is None for o in two["orders"])
        assert [{k: v for k, v in o.items() if k not in ("cached", "time_s")}
                for o in two["orders"]] == [
            {k: v for k, v in o.items() if k not in ("cached", "time_s")} for o in one["orders"]]
        assert all(o["reply"].endswith("Verdict: A") for o in two["orders"])


def test_the_switch_off_leaves_the_key_out_and_the_limit_clips_each_text(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    off = _eval(tmp_path, capsys, "scorer=length,record_input=false", name="off")
    assert off and all("scored_input" not in line for line in off)
    clipped = _eval(tmp_path, capsys, "scorer=length,record_input_chars=50", name="clip")
    for line in clipped:
        for label, record in line["scored_input"]["answers"].items():
            full = line["doc"][label]
            assert len(full) > 50 and record["text"] == full[:50] and record["clipped"]
            assert record["chars"] == len(full) and record["sha256"] == _sha(full)
            assert record["tokens"] is None and record["cut"] is None


def test_the_limit_is_an_option_with_a_range() -> None:
    from prbench.options import OptionsError
    from prbench.plugins import get_registry
    from prbench.scoring.runtime_options import split_options

    component = get_registry().get("scorer", "length")
    runtime, _ = split_options(component, {"record_input_chars": "1000", "record_input": "false"})
    assert runtime.record_input_chars == 1000 and runtime.record_input is False
    with pytest.raises(OptionsError, match="record_input_chars"):
        split_options(component, {"record_input_chars": "0"})


def test_the_input_travels_with_a_pickled_result() -> None:
    from prbench.harness.scored import Scored, annotate_sample
    from prbench.scoring.inputs import answer_record

    record = answer_record({"text": "héllo", "tokens": 3, "tokens_full": 5,
                            "cut": {"side": "left", "char": 2, "tokens_dropped": 2}}, 4,
                           cached=False)
    results = pickle.loads(pickle.dumps([Scored(1.0, {"input": record}), Scored(0.5)]))
    line = annotate_sample({"doc_id": 0, "filtered_resps": results})
    assert line["scored_input"] == {"kind": "text", "answers": {"chosen": record}}
    assert record["text"] == "héll" and record["chars"] == 5 and record["clipped"]


def test_a_rating_judge_records_the_chat_and_the_reply_of_each_answer(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from prbench.testing import LoopbackOpenAI

    seen: list[list[dict[str, str]]] = []

    def script(messages: list[dict[str, str]]) -> str:
        seen.append(messages)
        return f"Grade: {len(seen) % 9 + 1}"

    with LoopbackOpenAI(script) as server:
        lines = _eval(tmp_path, capsys, f"scorer=llm-rating,backend=openai,model=judge,"
                      f"base_url={server.base_url},cache_dir=", tasks=f"{GROUP}_noprofile",
                      limit="1")
    replies = {json.dumps(m, sort_keys=True): f"Grade: {i % 9 + 1}"
               for i, m in enumerate(seen, start=1)}
    assert len(lines) == 3
    for line in lines:
        assert line["scored_input"]["kind"] == "messages"
        for label, record in line["scored_input"]["answers"].items():
            key = json.dumps(record["messages"], sort_keys=True)
            assert record["reply"] == replies[key]
            assert line["doc"][label] in record["messages"][-1]["content"]
            assert json.loads(record["text"]) == record["messages"]
            assert record["sha256"] == _sha(record["text"])


def test_served_rm_records_the_text_whose_ids_the_server_got(tiny_rm: Path) -> None:
    from prbench.plugins import get_registry
    from prbench.scoring.runtime import ScorerRuntime
    from tests._hf_fixtures import score_requests
    from tests._served_fixtures import FakeRMServer

    requests = score_requests(3, 2, seed=4)
    with FakeRMServer(tiny_rm) as server:
        scorer = get_registry().build("scorer", "served-rm", {
            "base_url": server.base_url, "model": "tiny-rm", "tokenizer": str(tiny_rm),
            "batch_size": 2})
        with ScorerRuntime(scorer, pairwise=False, cache=False, progress=False) as rt:
            rt.score(requests)
            records = rt.inputs(requests)
        sent = sorted(tuple(x) for p in server.posts() for x in p["input"])
    tok = scorer.tokenizer
    got = sorted(tuple([tok.bos_token_id, *tok(r["text"], add_special_tokens=False)["input_ids"]])
                 for r in records)
    assert got == sent  # each recorded text is the text of ids the server received
    assert sorted(r["tokens"] for r in records) == sorted(len(x) for x in sent)
    for request, record in zip(requests, records, strict=True):
        start, end = record["profile"]
        assert record["text"][start:end] == request.profile.text and record["cut"] is None


def test_embedding_similarity_records_the_query_and_the_answer_it_compared(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from prbench.scoring.embedding import SEPARATOR

    lines = _eval(tmp_path, capsys, "scorer=embedding-similarity,cache=false", limit="1")
    for line in lines:
        given = line["scored_input"]
        assert given["kind"] == "messages"
        for label, record in given["answers"].items():
            query, answer = record["messages"]
            assert answer == {"role": "answer", "content": line["doc"][label]}
            assert query["role"] == "query"
            assert query["content"].startswith(line["doc"]["question"] + SEPARATOR)
            assert record["tokens"] is None and record["time_s"] >= 0


# -- what the explorer shows: the same bytes, read back from the page in Chromium --------------

_PAGE_INPUTS = """(() => {
  for (const d of document.querySelectorAll('details.pair')) {
    d.open = true;
    d.querySelectorAll('details.input').forEach(x => x.open = true);
  }
})()"""

_READ_INPUTS = """(() => {
  const out = [];
  for (const d of document.querySelectorAll('details.pair')) {
    for (const a of d.querySelectorAll('.answer-input')) {
      const pre = a.querySelector('pre.scored');
      const kept = [...pre.childNodes].filter(n => !(n.classList
        && n.classList.contains('cut-marker'))).map(n => n.textContent).join('');
      out.push({id: d.dataset.id, answer: a.dataset.answer, text: kept,
                facts: a.querySelector('.facts').innerText,
                dropped: [...pre.querySelectorAll('.dropped')].map(n => n.textContent).join(''),
                marker: (pre.querySelector('.cut-marker') || {}).textContent || null});
    }
    for (const [i, o] of [...d.querySelectorAll('.order-input')].entries()) {
      out.push({id: d.dataset.id, order: i, facts: o.querySelector('.facts').innerText,
                messages: [...o.querySelectorAll('.message pre')].map(n => n.textContent),
                reply: (o.querySelector('pre.reply-text') || {}).textContent || null});
    }
  }
  return out;
})()"""


@pytest.fixture(scope="module")
def browser() -> Any:
    from tests._browser import browser_or_skip

    yield from browser_or_skip(1280)


def _explorer_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                     browser: Any) -> tuple[list[dict[str, Any]], str]:
    """Report the run under ``tmp_path/out``: the inputs its explorer page shows, its panel."""
    from prbench.cli import main

    assert main(["report", str(tmp_path / "out"), "-o", str(tmp_path / "report"),
                 "--resamples", "50"]) == 0
    capsys.readouterr()
    pages = sorted((tmp_path / "report" / "explorer").glob("*.html"))
    assert len(pages) == 1, pages
    browser.errors.clear()
    browser.open(pages[0].as_uri())
    browser.evaluate(_PAGE_INPUTS)
    browser.settle()
    shown = browser.evaluate(_READ_INPUTS)
    panel = browser.evaluate("document.querySelector('.run-panel').innerText")
    assert not browser.errors, browser.errors
    return shown, panel


def test_the_explorer_shows_each_hf_classifier_input_byte_equal_with_its_tokens(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tiny_rm: Path, browser: Any) -> None:
    spy = Spy(monkeypatch)
    lines = _eval(tmp_path, capsys, f"scorer=hf-classifier,pretrained={tiny_rm},max_length=700,"
                  "device=cpu,dtype=float32,cache=false")
    shown, panel = _explorer_inputs(tmp_path, capsys, browser)
    assert len(shown) == len(lines) * 2 == 12
    by_answer = {line["doc"][label]: label for line in lines for label in ("chosen", "rejected")}
    sent = {text: (len(ids), answer) for answer, (text, ids, _) in spy.sent.items()}
    cuts = 0
    for entry in shown:
        assert entry["text"] in sent  # the page's text is the very string the tokenizer got
        tokens, answer = sent[entry["text"]]
        assert by_answer[answer] == entry["answer"]
        assert f"tokens sent {tokens:,} / before truncation" in entry["facts"]
        if entry["marker"] is not None:
            cuts += 1
            assert "tokens dropped (middle)" in entry["marker"] and entry["dropped"]
    assert cuts, "max_length=700 cuts some of the sample's profiles"
    assert "hf-classifier" in panel and "max_length" in panel


def test_the_explorer_shows_each_judge_order_as_the_server_got_and_answered_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], browser: Any) -> None:
    from prbench.testing import LoopbackOpenAI

    seen: dict[str, list[dict[str, str]]] = {}
    script = _judge_script(seen)
    with LoopbackOpenAI(script) as server:
        base = f"scorer=llm-judge,backend=openai,model=judge,base_url={server.base_url},cache_dir="
        lines = _eval(tmp_path, capsys, base, tasks=f"{GROUP}_noprofile")
    shown, panel = _explorer_inputs(tmp_path, capsys, browser)
    assert len(shown) == len(lines) * 2 == len(seen) == 12
    received = {tuple(m["content"] for m in messages): messages for messages in seen.values()}
    for entry in shown:
        messages = received[tuple(entry["messages"])]  # byte-equal to a request body received
        assert entry["reply"] == script(messages)
    assert "llm-judge" in panel
