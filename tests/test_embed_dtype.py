"""The encoders' precision option ``embed_dtype``: detection, cache separation, ranking kept.

``auto`` runs bf16 autocast only where the device computes bf16 natively; the detection is
monkeypatched here so both branches run on any CPU. bf16 vectors are cached apart from fp32 ones.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _profiles_fixtures import minilm_dir, tiny_bert

from prbench import devices
from prbench.commands.rank import embedding_rate
from prbench.options import OptionsError
from prbench.plugins import get_registry
from prbench.profiles.embed import Encoder, EncoderSpec, EncodeStats

CPUINFO_ZEN4 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni\n"
CPUINFO_AVX2 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 fma\n"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_bert(tmp_path_factory.mktemp("tiny_bert"))


def test_cpu_flags_are_read_from_cpuinfo() -> None:
    assert devices.cpu_bf16_flags(CPUINFO_ZEN4) == ["avx512_bf16"]
    assert devices.cpu_bf16_flags(CPUINFO_AVX2) == []
    assert devices.cpu_bf16_flags("flags : amx_bf16 amx_tile avx512_bf16\n") == [
        "amx_bf16", "avx512_bf16"]


def test_auto_is_float32_where_bf16_is_not_native(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(devices, "cpu_bf16_flags", lambda cpuinfo=None: [])
    dtype, why = devices.resolve_embed_dtype("auto", "cpu")
    assert dtype == "float32" and "no native bf16" in why
    # an explicit choice is kept whatever the CPU has
    assert devices.resolve_embed_dtype("bfloat16", "cpu")[0] == "bfloat16"


def test_auto_is_bf16_where_the_cpu_has_amx(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(devices, "cpu_bf16_flags",
                        lambda cpuinfo=None: ["amx_bf16", "avx512_bf16"])
    dtype, why = devices.resolve_embed_dtype("auto", "cpu")
    assert dtype == "bfloat16" and "amx_bf16" in why
    assert devices.resolve_embed_dtype("float32", "cpu")[0] == "float32"


def test_auto_is_float32_with_avx512_bf16_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without AMX, bf16 was measured slower than fp32 for the encoders: auto says so."""
    monkeypatch.setattr(devices, "cpu_bf16_flags", lambda cpuinfo=None: ["avx512_bf16"])
    dtype, why = devices.resolve_embed_dtype("auto", "cpu")
    assert dtype == "float32" and "no AMX" in why and "bfloat16-weights" in why
    assert devices.resolve_embed_dtype("bfloat16-weights", "cpu") == ("bfloat16-weights",
                                                                      "asked for")


def test_auto_is_float32_on_a_gpu_even_with_bf16(monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU with bf16 still gets fp32 from ``auto`` (bf16 measured slower there), with why."""
    monkeypatch.setattr(devices, "native_bf16", lambda device: (True, "GPU X supports bf16"))
    monkeypatch.setattr(devices, "cpu_bf16_flags", lambda cpuinfo=None: ["amx_bf16"])
    dtype, why = devices.resolve_embed_dtype("auto", "cuda:0")
    assert dtype == "float32" and "GPU X supports bf16" in why and "slower" in why
    assert devices.resolve_embed_dtype("bfloat16", "cuda:0") == ("bfloat16", "asked for")
    assert devices.resolve_embed_dtype("auto", "cpu")[0] == "bfloat16"  # the CPU rule


def test_unknown_dtype_is_an_option_error_naming_the_choices() -> None:
    with pytest.raises(OptionsError, match=r"embed_dtype.*float32"):
        get_registry().build("scorer", "embedding-similarity", {"embed_dtype": "float16"})
    with pytest.raises(ValueError, match="embed_dtype"):
        devices.resolve_embed_dtype("half", "cpu")


def test_fingerprint_and_manifest_name_the_dtype(tiny_model: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    fp32 = Encoder(EncoderSpec(model=str(tiny_model), embed_dtype="float32"), device="cpu")
    bf16 = Encoder(EncoderSpec(model=str(tiny_model), embed_dtype="bfloat16"), device="cpu")
    assert fp32.key != bf16.key
    assert fp32.describe()["embed_dtype"] == "float32"
    assert bf16.describe()["embed_dtype"] == "bfloat16"
    # auto on a CPU without native bf16 is the very fp32 entry (caches written before the option
    # existed stay valid)
    monkeypatch.setattr(devices, "cpu_bf16_flags", lambda cpuinfo=None: [])
    auto = Encoder(EncoderSpec(model=str(tiny_model)), device="cpu")
    assert auto.key == fp32.key and auto.describe()["embed_dtype_option"] == "auto"


def test_bf16_never_reads_fp32_vectors_from_the_cache(tiny_model: Path, tmp_path: Path) -> None:
    texts = ["watercolour on wet paper", "a sleep schedule for toddlers", "budget for rent"]
    fp32 = Encoder(EncoderSpec(model=str(tiny_model), embed_dtype="float32"), device="cpu",
                   cache_dir=tmp_path)
    first = fp32.encode(texts)
    bf16 = Encoder(EncoderSpec(model=str(tiny_model), embed_dtype="bfloat16"), device="cpu",
                   cache_dir=tmp_path)
    second = bf16.encode(texts)
    assert (bf16.stats.cached, bf16.stats.computed) == (0, 3)
    assert not np.array_equal(first, second)  # computed again, in bf16
    again = Encoder(EncoderSpec(model=str(tiny_model), embed_dtype="float32"), device="cpu",
                    cache_dir=tmp_path)
    assert np.array_equal(again.encode(texts), first) and again.stats.computed == 0


@pytest.mark.slow
@pytest.mark.parametrize("bf16", ["bfloat16", "bfloat16-weights"])
def test_bf16_minilm_keeps_the_sample_rankings(bf16: str) -> None:
    """bf16 (autocast or weights) keeps each sample user's top-5 posts of fp32 (real MiniLM)."""
    minilm_dir()  # skips when the MiniLM package is missing
    from prbench.records import load_records

    records = [r for r in load_records("sample") if len(r.profile) > 5]
    vectors = {}
    for dtype in ("float32", bf16):
        enc = Encoder(EncoderSpec(embed_dtype=dtype), device="cpu", cache=False)
        posts = enc.encode([p.text for r in records for p in r.profile])
        vectors[dtype] = (enc.encode([r.question for r in records]), posts)
    kept, start = [], 0
    for i, r in enumerate(records):
        n = len(r.profile)
        top = {}
        for dtype, (q, p) in vectors.items():
            top[dtype] = set(np.argsort(-(p[start : start + n] @ q[i]), kind="stable")[:5])
        kept.append(len(top["float32"] & top[bf16]) / 5)
        start += n
    assert np.mean(kept) >= 0.95, kept


def test_rank_rate_counts_only_texts_embedded_now() -> None:
    before = EncodeStats(requested=10, unique=10, cached=0, computed=10, model_calls=1)
    after = EncodeStats(requested=40, unique=40, cached=18, computed=22, model_calls=2)
    line = embedding_rate(before, after, 2.0)
    assert "12 texts embedded now (18 from the embedding cache)" in line
    assert "6.0 texts/s embedded" in line  # 12 new texts in 2 s, not (12 + 18) / 2
    assert embedding_rate(after, after, 1.0) == ""
    cached_only = EncodeStats(requested=45, unique=45, cached=23, computed=22, model_calls=2)
    assert "texts/s" not in embedding_rate(after, cached_only, 1.0)
