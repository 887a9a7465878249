"""The encoder embeds the texts of one call longest first (in tokens) and returns them in order."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _profiles_fixtures import minilm_dir

from prbench.profiles.embed import Encoder, EncoderSpec

TEXTS = [
    "I paint watercolour landscapes at dawn and sell them at the weekend market.",
    "Sleep.",
    "Our band rehearses twice a week; I play the bass and write most of the lyrics for the "
    "songs we perform at small venues around the city, usually on Friday nights.",
    "Budget travel tips for long train journeys across Europe.",
    "Sleep.",
]


def test_texts_are_embedded_longest_first_once_and_returned_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # float32: in bf16 a vector moves by ~1e-3 with its batch's padding (rankings are kept, see
    # test_embed_dtype.py), so the order-invariance check to 1e-5 is an fp32 one
    enc = Encoder(EncoderSpec(model=str(minilm_dir()), embed_dtype="float32"), device="cpu",
                  cache=False)
    model = enc._get_model()
    seen: list[list[str]] = []
    original = type(model).embed

    def spy(self, texts, batch_size, **kw):
        seen.append(list(texts))
        return original(self, texts, batch_size, **kw)

    monkeypatch.setattr(type(model), "embed", spy)
    out = enc.encode(TEXTS)
    unique = list(dict.fromkeys(TEXTS))
    tokens = dict(zip(unique, model.token_counts(unique), strict=True))
    assert seen == [sorted(unique, key=lambda t: -tokens[t])]  # the duplicate embedded once
    one_by_one = np.stack([enc.encode([t])[0] for t in TEXTS])
    assert np.allclose(out, one_by_one, atol=1e-5)
    assert np.array_equal(out[1], out[4])
