"""``cache=false`` turns off one cache (the runtime's score cache), ``embed_cache=false`` another.

Before issue 19 ``embedding-similarity`` and ``dense`` declared an option named ``cache`` too, so
``--model_args scorer=embedding-similarity,cache=false`` turned off the score cache and the
embedding cache at once.
"""

from __future__ import annotations

from prbench.plugins import get_registry
from prbench.scoring.runtime_options import RUNTIME_KEYS, split_options


def _split(raw: dict[str, str]) -> tuple[bool, bool]:
    component = get_registry().get("scorer", "embedding-similarity")
    runtime, scorer_raw = split_options(component, raw)
    return runtime.cache, component.parse_options(scorer_raw).embed_cache


def test_cache_false_is_the_score_cache_only() -> None:
    assert _split({"cache": "false"}) == (False, True)


def test_embed_cache_false_is_the_embedding_cache_only() -> None:
    assert _split({"embed_cache": "false"}) == (True, False)
    assert _split({}) == (True, True)


def test_no_encoder_option_shares_a_runtime_option_name() -> None:
    from prbench.profiles.encoder_options import ENCODER_OPTIONS

    assert not set(ENCODER_OPTIONS) & set(RUNTIME_KEYS)
    builder = get_registry().get("profile-builder", "dense")
    assert builder.parse_options({"embed_cache": "false"}).embed_cache is False
