"""The profile encoder at speed: bf16 weights, token-count batches, OOM back-off, threads.

Out-of-memory errors are simulated by a fake model that fails on batches above a size, so the
back-off runs on any machine; the vectors after backing off must equal those of a clean run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from _profiles_fixtures import minilm_dir, tiny_bert

from prbench import devices
from prbench.plugins import get_registry
from prbench.profiles import embed
from prbench.profiles.embed import Encoder, EncoderSpec
from prbench.profiles.embed_models import EmbeddingModel, EncoderOutOfMemoryError

TEXTS = [f"post {i} " + "word " * (i % 7) for i in range(23)]


class FakeModel(EmbeddingModel):
    """Vectors from each text alone (a seeded hash); batches above ``fits`` run out of memory."""

    def __init__(self, fits: int | None = None, error: str = "torch") -> None:
        self.dim = 4
        self.fits = fits
        self.error = error
        self.batches: list[list[str]] = []
        self.threads: list[int] = []

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        return [len(t.split()) for t in texts]  # words, not characters

    def forward(self, texts: Sequence[str]) -> np.ndarray:
        import torch

        self.threads.append(torch.get_num_threads())
        if self.fits is not None and len(texts) > self.fits:
            if self.error == "torch":
                raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
            if self.error == "runtime":
                raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
            raise ValueError("a bug, not memory")
        self.batches.append(list(texts))
        return np.stack([np.random.default_rng(sum(t.encode())).standard_normal(4)
                         for t in texts]).astype(np.float32)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_bert(tmp_path_factory.mktemp("tiny_bert"))


def _encoder(tiny_model: Path, model: EmbeddingModel, **kw: object) -> Encoder:
    enc = Encoder(EncoderSpec(model=str(tiny_model), embed_dtype="float32"), device="cpu",
                  cache=False, **kw)  # type: ignore[arg-type]
    enc._model = model
    return enc


@pytest.mark.parametrize("error", ["torch", "runtime"])
def test_out_of_memory_backs_off_to_the_vectors_of_a_clean_run(tiny_model: Path,
                                                                error: str) -> None:
    clean = _encoder(tiny_model, FakeModel(), batch_size=8)
    want = clean.encode(TEXTS)
    short = FakeModel(fits=3, error=error)
    enc = _encoder(tiny_model, short, batch_size=8)
    got = enc.encode(TEXTS)
    assert np.array_equal(got, want)
    assert enc.stats.oom_retries >= 2  # 8 -> 4 -> 2 (4 fails too)
    assert max(len(b) for b in short.batches) <= 3
    assert sorted(t for b in short.batches for t in b) == sorted(set(TEXTS))  # each text once
    # the learned size is kept by the encoder: a second call starts small, failing no more
    retries = enc.stats.oom_retries
    enc.encode([t + " again" for t in TEXTS[:6]])
    assert enc.stats.oom_retries == retries


def test_one_text_that_does_not_fit_alone_is_one_clear_error(tiny_model: Path) -> None:
    enc = _encoder(tiny_model, FakeModel(fits=0), batch_size=4)
    with pytest.raises(EncoderOutOfMemoryError, match=r"one text of \d+ tokens alone.*max_length"):
        enc.encode(TEXTS[:3])


def test_an_error_that_is_not_out_of_memory_is_not_retried(tiny_model: Path) -> None:
    model = FakeModel(fits=1, error="bug")
    with pytest.raises(ValueError, match="a bug"):
        _encoder(tiny_model, model, batch_size=4).encode(TEXTS[:3])
    assert model.oom_retries == 0


def test_batches_are_sorted_by_token_count_and_rows_come_back_in_order(tiny_model: Path) -> None:
    # characters and tokens disagree: the longest text in characters has the fewest words
    texts = ["x" * 80, "a b c d e f g", "a b", "a b c d", "y" * 40, "a b c d e f g"]
    model = FakeModel()
    out = _encoder(tiny_model, model, batch_size=2).encode(texts)
    flat = [t for b in model.batches for t in b]
    assert flat == ["a b c d e f g", "a b c d", "a b", "x" * 80, "y" * 40]  # duplicate once
    assert [len(b) for b in model.batches] == [2, 2, 1]
    alone = FakeModel()
    one_by_one = np.stack([_encoder(tiny_model, alone, batch_size=1).encode([t])[0]
                           for t in texts])
    assert np.array_equal(out, one_by_one)


def test_real_model_vectors_do_not_depend_on_the_sorting(tiny_model: Path) -> None:
    enc = Encoder(EncoderSpec(model=str(tiny_model), embed_dtype="float32"), device="cpu",
                  cache=False, batch_size=4)
    texts = ["short", "a much longer text about painting and music and gardens", "mid text",
             "word " * 30, "another one"]
    out = enc.encode(texts)
    alone = np.stack([enc.encode([t])[0] for t in texts])
    assert np.allclose(out, alone, atol=1e-5)


def test_the_thread_count_is_set_for_the_steps_and_put_back(tiny_model: Path) -> None:
    import torch

    before = torch.get_num_threads()
    model = FakeModel()
    enc = _encoder(tiny_model, model, batch_size=4, threads=1)
    enc.encode(TEXTS[:5])
    assert set(model.threads) == {1}
    assert enc.threads_used == (1, "asked for")
    assert torch.get_num_threads() == before


def test_auto_threads_never_exceed_the_cores_others_leave_free() -> None:
    rule = devices.resolve_threads
    assert rule("auto", "cpu", default=8, others=0.3, cpus=8)[0] == 8  # idle: torch's own
    assert rule("auto", "cpu", default=8, others=6.0, cpus=8)[0] == 2
    assert rule("auto", "cpu", default=2, others=14.0, cpus=2)[0] == 1  # oversubscribed
    assert rule("auto", "cpu", default=2, others=0.4, cpus=2)[0] == 2
    assert rule(None, "cpu", default=4, others=0.0, cpus=4)[0] == 4
    assert rule(1, "cpu", default=8, others=50.0, cpus=8) == (1, "asked for")
    assert rule("auto", "cuda:0", default=8, others=50.0, cpus=8)[0] == 8  # a GPU computes
    with pytest.raises(ValueError, match="embed_threads"):
        rule("many", "cpu", default=2)
    with pytest.raises(ValueError, match="at least 1"):
        rule(0, "cpu", default=2)
    with pytest.raises(ValueError, match=r"embed_threads' must be auto or 1\.\."):
        rule(100000, "cpu", default=2)


def test_more_threads_than_cpus_is_one_error_when_options_are_read(tmp_path: Path,
                                                                   capsys) -> None:
    """A count past the CPUs ended in "can't start new thread" and a crash inside torch."""
    import os

    from tests._harness_fixtures import run_eval

    cpus = os.cpu_count() or 1
    devices.check_thread_count(cpus)  # the machine's count itself is allowed
    with pytest.raises(ValueError, match=rf"must be auto or 1\.\.{cpus} \(this machine's CPUs\), "
                                         r"got 100000"):
        devices.check_thread_count(100000)
    with pytest.raises(Exception, match=r"embed_threads.*1\.\..*got 100000"):
        get_registry().build("profile-builder", "dense", {"embed_threads": "100000"})
    with pytest.raises(Exception, match=r"embed_threads.*got 100000"):
        get_registry().build("scorer", "embedding-similarity", {"embed_threads": 100000})
    code, _, err = run_eval(["rank", "sample", "-o", str(tmp_path / "r.jsonl"), "--profile_args",
                             "builder=dense,embed_threads=100000"], capsys)
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1, lines
    assert lines[0].startswith("error: ") and "embed_threads" in lines[0] \
        and f"1..{cpus}" in lines[0]
    assert not (tmp_path / "r.jsonl").exists()


#: a child that says it started, then keeps a core busy (runnable at every sample)
SPIN = "import sys\nsys.stdout.write('r')\nsys.stdout.flush()\nwhile True:\n    pass\n"


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux's /proc")
def test_the_run_queue_counts_a_busy_process() -> None:
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", SPIN], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.read(1) == b"r"
        # a spinning process is runnable at every sample, whether or not it has a core then
        seen = devices.runnable_elsewhere(samples=4, interval_s=0.001)
        assert seen is not None and seen >= 1.0
    finally:
        child.kill()
        child.wait()
    # the thread that reads is running: the parser of /proc/self/task/*/stat finds it
    assert devices._running_in_this_process() >= 1


def test_the_run_queue_leaves_out_this_process_and_averages_its_samples(monkeypatch) -> None:
    counts = iter([5, 3, 4, 4])
    monkeypatch.setattr(devices, "_running_in_system", lambda: next(counts))
    monkeypatch.setattr(devices, "_running_in_this_process", lambda: 2)
    assert devices.runnable_elsewhere(samples=4, interval_s=0.0) == (3 + 1 + 2 + 2) / 4

    def unreadable() -> int:
        raise OSError("no /proc")

    monkeypatch.setattr(devices, "_running_in_system", unreadable)
    assert devices.runnable_elsewhere(samples=2, interval_s=0.0) is None


def test_the_options_take_threads_and_an_unset_batch_size() -> None:
    builder = get_registry().build("profile-builder", "dense", {"embed_threads": "2"})
    assert builder.options.embed_threads == 2 and builder.encoder.threads_option == 2
    assert builder.options.batch_size is None
    assert builder.encoder.batch_size == embed.AUTO_BATCH["cpu"]
    assert builder.id == get_registry().build("profile-builder", "dense", {}).id  # run-only
    scorer = get_registry().build("scorer", "embedding-similarity", {"embed_threads": "auto"})
    assert scorer.options.embed_threads == "auto"
    with pytest.raises(Exception, match="embed_threads"):
        get_registry().build("profile-builder", "dense", {"embed_threads": "0"})


def test_bf16_weights_run_the_transformer_in_bf16_and_pool_in_fp32(tiny_model: Path) -> None:
    import torch

    texts = ["watercolour on wet paper", "a sleep schedule for toddlers", "budget for rent"]
    fp32 = Encoder(EncoderSpec(model=str(tiny_model), embed_dtype="float32"), device="cpu",
                   cache=False).encode(texts)
    enc = Encoder(EncoderSpec(model=str(tiny_model), embed_dtype="bfloat16-weights"),
                  device="cpu", cache=False)
    got = enc.encode(texts)
    model = enc._get_model()
    assert model.precision == "bfloat16-weights"
    assert next(model.model.parameters()).dtype == torch.bfloat16  # type: ignore[attr-defined]
    assert got.dtype == np.float32 and not np.array_equal(got, fp32)
    cos = (got * fp32).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(fp32, axis=1)
    assert cos.min() > 0.99


def test_a_sentence_transformer_in_bf16_weights_pools_in_fp32() -> None:
    import torch

    enc = Encoder(EncoderSpec(model=str(minilm_dir()), embed_dtype="bfloat16-weights"),
                  device="cpu", cache=False)
    st = enc._get_model().model  # type: ignore[attr-defined]
    assert next(st[0].parameters()).dtype == torch.bfloat16
    features = st[0].preprocess(["a text to embed"]) if hasattr(st[0], "preprocess") \
        else st[0].tokenize(["a text to embed"])
    with torch.inference_mode():
        assert st[0](features)["token_embeddings"].dtype == torch.float32
    vec = enc.encode(["a text to embed"])
    assert vec.dtype == np.float32 and abs(float(np.linalg.norm(vec)) - 1.0) < 1e-3


def test_each_precision_has_its_own_cache_entries(tiny_model: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    keys = {d: Encoder(EncoderSpec(model=str(tiny_model), embed_dtype=d), device="cpu",
                       cache_dir=tmp_path).key
            for d in ("float32", "bfloat16", "bfloat16-weights")}
    assert len(set(keys.values())) == 3  # autocast and bf16 weights never share vectors
    monkeypatch.setattr(devices, "cpu_bf16_flags", lambda cpuinfo=None: ["amx_bf16"])
    auto = Encoder(EncoderSpec(model=str(tiny_model)), device="cpu", cache_dir=tmp_path)
    assert auto.dtype == "bfloat16" and auto.key == keys["bfloat16"]
    texts = ["watercolour on wet paper", "budget for rent"]
    autocast = Encoder(EncoderSpec(model=str(tiny_model), embed_dtype="bfloat16"), device="cpu",
                       cache_dir=tmp_path)
    first = autocast.encode(texts)
    weights = Encoder(EncoderSpec(model=str(tiny_model), embed_dtype="bfloat16-weights"),
                      device="cpu", cache_dir=tmp_path)
    second = weights.encode(texts)
    assert (weights.stats.cached, weights.stats.computed) == (0, 2)
    assert not np.array_equal(first, second)
