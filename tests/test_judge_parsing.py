"""The strict reply parsers on a corpus of awkward model outputs."""

from __future__ import annotations

import pytest

from prbench.judges.parsing import (
    ParseFailure,
    clean_answer,
    parse_aspect_scores,
    parse_pairwise,
    parse_plan,
    parse_rating,
    strip_reasoning,
)

# (reply, expected verdict "A"/"B", or the failure reason)
PAIRWISE_CORPUS = [
    ("Verdict: A", "A"),
    ("verdict: b", "B"),
    ("VERDICT: B", "B"),
    ("**Verdict:** **B**", "B"),
    ("### Verdict: A", "A"),
    ("`Verdict: B`", "B"),
    ("Verdict: Answer A", "A"),
    ("Verdict: Response B.", "B"),
    ("Verdict: response a", "A"),
    ("Final verdict: a", "A"),
    ("The verdict is B", "B"),
    ("Verdict - B", "B"),
    ("Verdict: [B]", "B"),
    (
        "Answer A ignores the budget while Answer B plans around it.\n\nVerdict: B, because it "
        "respects the forty dollar limit and the missing oven.",
        "B",
    ),
    ("Verdict: A. Answer B is generic and misses what they asked.", "A"),
    ("<think>A looks better... Verdict: A</think>\nVerdict: B", "B"),
    ("the user wants cheap food</think>\n\nVerdict: A", "A"),
    ("<think>\nComparing both answers, A covers more", "unterminated-reasoning"),
    ("Verdict: A or B", "both"),
    ("Verdict: A (not B)", "both"),
    ("Verdict: both answers are equally good", "tie"),
    ("Verdict: tie", "tie"),
    ("Verdict: neither", "tie"),
    ("Verdict: A\n\nOn reflection, Verdict: B", "conflicting"),
    ("I think A is better for this person.", "no-verdict"),
    ("Answer A is more personal.", "no-verdict"),
    ("Verdict: a better answer would mention the budget", "no-verdict"),
    ("Verdict: The second answer", "no-verdict"),
    ("", "empty"),
    ("   \n  ", "empty"),
    ("B", "B"),
    ("**Answer A**", "A"),
    ("Response B", "B"),
    ("<answer>[[A]]</answer>", "A"),
    ("After weighing both, the better one is [[B]].", "B"),
    ("[[A]] is good but [[B]] is better", "both"),
    ("As a result: both answers are fine. Verdict: B", "B"),
    ("I must end with Verdict: A or Verdict: B.\nThe second fits. Verdict: B", "B"),
    # the article "A" and "N/A" are not verdicts; a negated label is not a vote
    ("Verdict: A tie.", "tie"),
    ("Result: A draw between the two.", "tie"),
    ("Verdict: A toss-up", "tie"),
    ("Verdict: A close call, but B.", "B"),
    ("Verdict: A close call.", "no-verdict"),
    ("Verdict: N/A", "no-verdict"),
    ("**Verdict:** n/a", "no-verdict"),
    ("Verdict: Not A", "ambiguous"),
    ("Verdict: not answer B.", "ambiguous"),
    ("Verdict: A, not B", "both"),
]


@pytest.mark.parametrize(("reply", "expected"), PAIRWISE_CORPUS)
def test_pairwise_corpus(reply, expected):
    got = parse_pairwise(reply)
    if expected in ("A", "B"):
        assert got == expected, f"{reply!r} -> {got}"
    else:
        assert isinstance(got, ParseFailure), f"{reply!r} should fail, got {got!r}"
        assert got.reason == expected, f"{reply!r} -> {got}"


def test_corpus_is_large_and_mixed():
    failures = [e for _, e in PAIRWISE_CORPUS if e not in ("A", "B")]
    assert len(PAIRWISE_CORPUS) >= 20
    assert len(failures) >= 10


@pytest.mark.parametrize(
    "reply",
    ["I cannot decide between them.", "Verdict: unclear", "", "<think>hmm", "Verdict: A and B"],
)
def test_an_unreadable_verdict_is_never_mapped_to_a(reply):
    # The released judge code turns an unreadable verdict into "A"; prbench must not.
    got = parse_pairwise(reply)
    assert isinstance(got, ParseFailure)
    assert got not in ("A", "B")


RATING_CORPUS = [
    ("Rating: 7", 7.0),
    ("rating: 0", 0.0),
    ("Rating: 10", 10.0),
    ("Rating: 7/10", 7.0),
    ("rating: 8 out of 10", 8.0),
    ("**Final rating:** 9", 9.0),
    ("The answer fits well.\nRating: 8. It covers the budget and a 10-minute recipe.", 8.0),
    ("<think>maybe 3?</think>Rating: 6", 6.0),
    ("7", 7.0),
    ("Rating: 7.5", "not-integer"),
    ("Rating: 11", "out-of-range"),
    ("Rating: -1", "out-of-range"),
    ("Rating: 8/5", "out-of-range"),
    ("Rating: between 6 and 7", "ambiguous"),
    ("Rating: 6-7", "ambiguous"),
    ("Score: 3\nRating: 4", "conflicting"),
    ("This deserves a high mark.", "no-verdict"),
    ("Rating: excellent", "no-verdict"),
    ("<think>it is a 9", "unterminated-reasoning"),
    ("", "empty"),
]


@pytest.mark.parametrize(("reply", "expected"), RATING_CORPUS)
def test_rating_corpus(reply, expected):
    got = parse_rating(reply, low=0, high=10, integer=True)
    if isinstance(expected, float):
        assert got == expected, f"{reply!r} -> {got}"
    else:
        assert isinstance(got, ParseFailure), f"{reply!r} should fail, got {got!r}"
        assert got.reason == expected, f"{reply!r} -> {got}"


def test_rating_decimals_when_allowed():
    assert parse_rating("Rating: 7.5", integer=False) == 7.5


ASPECT_CORPUS = [
    ("Scores: [2, 0, 1]", (2, 0, 1)),
    ("scores: [2,0,1]", (2, 0, 1)),
    ("**Scores:** [1, 1, 2]", (1, 1, 2)),
    ("Aspect 1 is covered.\nAspect 2 is missing.\nScores: [2, 0, 1]\n", (2, 0, 1)),
    ("<think>Scores: [0, 0, 0]</think>\nScores: [2, 2, 2]", (2, 2, 2)),
    ("1. 2\n2. 0\n3. 1", (2, 0, 1)),
    ("Aspect 1: 2\nAspect 2 (budget): 1\nAspect 3 - 0", (2, 1, 0)),
    ("- Aspect 1: 2\n- Aspect 2: 2\n- Aspect 3: 1", (2, 2, 1)),
    ("1. Stovetop recipes: 2\n2. Kids: 0\n3. Budget: 1", (2, 0, 1)),
    ("Scores: [2, 0]", "wrong-length"),
    ("Scores: [2, 0, 1, 1]", "wrong-length"),
    ("Scores: []", "wrong-length"),
    ("Aspect 1: 2\nAspect 2: 1", "wrong-length"),
    ("Aspect 1: 2\nAspect 2: 1\nAspect 4: 0", "wrong-length"),
    ("Scores: [2, 3, 1]", "out-of-range"),
    ("Scores: [2, 1.5, 1]", "not-integer"),
    ("Scores: [2, one, 1]", "not-integer"),
    ("Scores: [2, 0, 1]\nScores: [1, 1, 1]", "conflicting"),
    ("All three points are covered well.", "no-list"),
    ("", "empty"),
    ("<think>scoring now", "unterminated-reasoning"),
]


@pytest.mark.parametrize(("reply", "expected"), ASPECT_CORPUS)
def test_aspect_score_corpus(reply, expected):
    got = parse_aspect_scores(reply, 3)
    if isinstance(expected, tuple):
        assert got == expected, f"{reply!r} -> {got}"
    else:
        assert isinstance(got, ParseFailure), f"{reply!r} should fail, got {got!r}"
        assert got.reason == expected, f"{reply!r} -> {got}"


def test_aspect_scores_need_a_positive_count():
    with pytest.raises(ValueError):
        parse_aspect_scores("Scores: []", 0)


PLAN_CORPUS = [
    ("- budget under $40\n- no oven\n- kids", ["budget under $40", "no oven", "kids"]),
    ("Here is the list:\n1. **Stovetop only**\n2) Cheap staples.\n", ["Stovetop only",
                                                                     "Cheap staples"]),
    ("* one thing\n* one thing\n* another", ["one thing", "another"]),
    ("<think>hmm</think>\n• quick meals", ["quick meals"]),
    ("They probably want cheap food.", "no-list"),
    ("", "empty"),
]


@pytest.mark.parametrize(("reply", "expected"), PLAN_CORPUS)
def test_plan_corpus(reply, expected):
    got = parse_plan(reply, max_items=5)
    if isinstance(expected, list):
        assert got == expected
    else:
        assert isinstance(got, ParseFailure) and got.reason == expected


def test_plan_is_cut_to_max_items():
    reply = "\n".join(f"- item number {i}" for i in range(10))
    assert parse_plan(reply, max_items=3) == ["item number 0", "item number 1", "item number 2"]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("Answer: Use the stove.", "Use the stove."),
        ("**Answer:** Use the stove.", "Use the stove."),
        ("Answers vary by region.", "Answers vary by region."),
        ('"Quoted answer."', "Quoted answer."),
        ("<think>plan</think>\nReal answer.", "Real answer."),
    ],
)
def test_clean_answer(reply, expected):
    assert clean_answer(reply) == expected


@pytest.mark.parametrize(
    ("reply", "reason"),
    [("", "empty"), ("<think>no end", "unterminated-reasoning"), ("Answer:", "empty")],
)
def test_clean_answer_failures(reply, reason):
    got = clean_answer(reply)
    assert isinstance(got, ParseFailure) and got.reason == reason


def test_strip_reasoning_keeps_text_after_the_last_block():
    assert strip_reasoning("<think>a</think>x<think>b</think>y") == "y"
    assert strip_reasoning("plain") == "plain"
    failure = parse_pairwise("<think>" + "long " * 100)
    assert isinstance(failure, ParseFailure) and len(failure.excerpt) <= 200


def test_a_reply_the_backend_could_not_produce_fails_every_parser():
    from prbench.backends import GenerationFailure

    missing = GenerationFailure("http-503", "request 0 failed after 6 attempts: HTTP 503")
    results = [
        parse_pairwise(missing),
        parse_rating(missing),
        parse_aspect_scores(missing, 2),
        parse_plan(missing, 5),
        clean_answer(missing),
    ]
    for result in results:
        assert isinstance(result, ParseFailure) and result.reason == "generation-failed"
        assert result.detail == "http-503: request 0 failed after 6 attempts: HTTP 503"


def test_a_truncated_reply_keeps_its_reason_other_backend_failures_do_not():
    from prbench.backends.base import GenerationFailure, truncation_failure
    from prbench.judges.parsing import generation_failed

    cut = generation_failed(truncation_failure("Verdict: A and then", 12))
    assert cut.reason == "truncated" and "max_new_tokens=12" in cut.detail
    assert generation_failed(GenerationFailure("http-503", "busy")).reason == "generation-failed"
    # every parser turns a cut reply into that failure, never a verdict
    assert parse_pairwise(truncation_failure("Verdict: A")).reason == "truncated"
