"""The encoders' runtime option ``embed_backend``: OpenVINO beside torch, ``auto``'s choice.

The OpenVINO path runs on a tiny random BERT (mean pooling) and on the bundled MiniLM (its own
pooling and normalisation); ``auto``'s rule runs with the CPU flags and the probe's timings
monkeypatched, so no test depends on this machine's CPU or load; the package's absence is made
by hiding ``openvino`` from imports.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from _profiles_fixtures import SLEEP, WATERCOLOR, minilm_dir, tiny_bert

from prbench.errors import PrbenchUserError
from prbench.options import OptionsError
from prbench.plugins import get_registry
from prbench.profiles import embed_backend, embed_openvino
from prbench.profiles.embed import Encoder, EncoderSpec
from prbench.profiles.embed_backend import resolve_embed_backend
from prbench.profiles.embed_openvino import OpenVINOMissingError, bucket_length
from prbench.profiles.ranked import RankedOptions, RankingError, check_backend

#: the tests that run OpenVINO itself (the rest run without the package as well)
needs_openvino = pytest.mark.skipif(embed_openvino.openvino_version() is None,
                                    reason="the openvino package is not installed")

POSTS = [text for record in (SLEEP, WATERCOLOR) for text in
         [record.question, *(p.text for p in record.profile)]]


def _synthetic_posts(n: int, seed: int = 0) -> list[str]:
    """Posts of ~100-200 tokens from a few topics (real post lengths)."""
    rng = np.random.default_rng(seed)
    topics = [
        "toddler sleep night crying nap bedtime routine parents tired",
        "graphics card gaming frames monitor driver budget upgrade",
        "watercolor paper paint brush wash pigment canvas buckling",
        "pizza oven crust dough flour cheese baking recipe",
        "hiking mountains trail boots weather summer tent",
    ]
    words = [t.split() for t in topics]
    out = []
    for i in range(n):
        main = words[i % len(words)]
        other = words[int(rng.integers(len(words)))]
        length = int(rng.integers(70, 140))
        out.append(" ".join(str(rng.choice(main if rng.random() < 0.7 else other))
                            for _ in range(length)) + f" (post {i})")
    return out


def _cos_gap(a: np.ndarray, b: np.ndarray) -> float:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return float((1.0 - (a * b).sum(axis=1)).max())


def _top_overlap(queries: np.ndarray, posts: np.ndarray, ref_q: np.ndarray, ref_p: np.ndarray,
                 k: int = 10) -> float:
    got = np.argsort(-(queries @ posts.T), axis=1)[:, :k]
    want = np.argsort(-(ref_q @ ref_p.T), axis=1)[:, :k]
    return float(np.mean([len(set(g) & set(w)) / k for g, w in zip(got, want, strict=True)]))


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_bert(tmp_path_factory.mktemp("tiny_bert_ov"))


def _forget_openvino_models() -> None:
    """Drop the OpenVINO models kept on the process's loaded torch models (a new process)."""
    from prbench.profiles import embed_models

    for model in embed_models._LOADED.values():
        model.__dict__.pop(embed_openvino._KEPT_AS, None)


@pytest.fixture(autouse=True)
def _fresh_openvino_models() -> None:
    _forget_openvino_models()  # each test converts or reads its own cache dir's IR


def _encoder(model: str, backend: str, dtype: str = "float32", **kw: object) -> Encoder:
    return Encoder(EncoderSpec(model=model, embed_backend=backend, embed_dtype=dtype),
                   device="cpu", cache=False, threads=1, **kw)  # type: ignore[arg-type]


def test_bucket_lengths_are_few_and_never_shorter_than_the_batch() -> None:
    assert bucket_length(3, 256) == 16
    assert bucket_length(17, 256) == 32
    assert bucket_length(150, 256) == 160
    assert bucket_length(250, 256) == 256
    assert bucket_length(300, 512) == 320
    assert bucket_length(600, 1024) == 640
    assert bucket_length(120, 128) == 128  # never past the truncation
    assert all(bucket_length(n, 256) >= n for n in range(1, 257))
    assert len({bucket_length(n, 256) for n in range(1, 257)}) == 9


@needs_openvino
def test_openvino_on_a_tiny_bert_matches_torch(tiny_model: Path) -> None:
    texts = [*POSTS, "a", "short", " ".join(["word"] * 90)]
    want = _encoder(str(tiny_model), "torch").encode(texts)
    enc = _encoder(str(tiny_model), "openvino", batch_size=4)
    got = enc.encode(texts)
    assert enc.describe()["embed_backend"] == "openvino"
    assert got.shape == want.shape
    assert np.abs(got - want).max() < 1e-4  # mean pooled, not normalised: compare values
    model = enc._model
    assert isinstance(model, embed_openvino.OpenVINOModel)
    # every shape is the batch size by a bucket length: a handful, compiled once each
    assert model.shapes and all(b == 4 for b, _ in model.shapes)
    assert {length for _, length in model.shapes} <= {16, 32, 64, 96, 128}
    assert len(model.shapes) == len(set(model.shapes))


@needs_openvino
def test_openvino_on_minilm_keeps_vectors_and_rankings() -> None:
    posts = _synthetic_posts(60)
    queries = [SLEEP.question, WATERCOLOR.question, "Which pizza dough recipe bakes best?",
               "What boots do I need for a mountain trail?", "Is this graphics card fast?"]
    ref = _encoder(str(minilm_dir()), "torch")
    ref_p, ref_q = ref.encode(posts), ref.encode(queries)
    for dtype, gap in (("float32", 1e-5), ("bfloat16", 2e-3)):
        enc = _encoder(str(minilm_dir()), "openvino", dtype)
        got_p, got_q = enc.encode(posts), enc.encode(queries)
        assert _cos_gap(got_p, ref_p) < gap, dtype
        assert np.allclose(np.linalg.norm(got_p, axis=1), 1.0, atol=1e-3)  # normalised
        assert _top_overlap(got_q, got_p, ref_q, ref_p) >= 0.99, dtype
        assert enc.describe()["embed_dtype"] == dtype


@needs_openvino
def test_openvino_follows_the_thread_count_of_each_step(tiny_model: Path) -> None:
    import os

    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs 2 CPUs")
    one = _encoder(str(tiny_model), "openvino")  # embed_threads=1
    one.encode(POSTS[:2])
    model = one._model
    assert isinstance(model, embed_openvino.OpenVINOModel) and model.threads == 1
    two = Encoder(EncoderSpec(model=str(tiny_model), embed_backend="openvino",
                              embed_dtype="float32"), device="cpu", cache=False, threads=2)
    two.encode(POSTS[2:4])
    assert two._model is model and model.threads == 2  # one model, compiled per count
    assert {key[2] for key in model._requests} == {1, 2}


@needs_openvino
def test_a_second_load_converts_nothing(tiny_model: Path, monkeypatch: pytest.MonkeyPatch,
                                        tmp_path: Path) -> None:
    import openvino

    monkeypatch.setenv("PRBENCH_CACHE_DIR", str(tmp_path))
    first = _encoder(str(tiny_model), "openvino")
    want = first.encode(POSTS)
    assert first._model.converted  # type: ignore[union-attr]
    assert list((tmp_path / "openvino").glob("*/model.xml"))
    compiled = list((tmp_path / "openvino" / "compiled").iterdir())
    assert compiled  # OpenVINO's own cache of the compiled shapes

    def no_convert(*args: object, **kwargs: object) -> None:
        raise AssertionError("converted again")

    monkeypatch.setattr(openvino, "convert_model", no_convert)
    _forget_openvino_models()  # as a new process would
    second = _encoder(str(tiny_model), "openvino")
    got = second.encode(POSTS)
    assert not second._model.converted  # type: ignore[union-attr]
    assert np.array_equal(got, want)
    assert sorted((tmp_path / "openvino" / "compiled").iterdir()) == sorted(compiled)


@needs_openvino
def test_openvino_vectors_are_cached_apart_from_torch(tiny_model: Path) -> None:
    torch_enc = _encoder(str(tiny_model), "torch")
    ov_enc = _encoder(str(tiny_model), "openvino")
    assert torch_enc.key != ov_enc.key
    described = ov_enc.describe()
    assert described["embed_backend_option"] == "openvino"
    assert described["embed_backend_reason"] == "asked for"
    assert described["embed_backend_version"] == embed_openvino.openvino_version()


# -- auto ------------------------------------------------------------------------------------------


def _probe(torch_s: float, ov_s: float, calls: list[int]):
    def probe() -> dict[str, float]:
        calls.append(1)
        return {"torch": torch_s, "openvino": ov_s}
    return probe


def test_auto_is_openvino_bf16_on_a_cpu_with_amx(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embed_backend, "cpu_bf16_flags",
                        lambda cpuinfo=None: ["amx_bf16", "avx512_bf16"])
    calls: list[int] = []
    got = resolve_embed_backend("auto", "cpu", "bfloat16", ov_version="2026.4.1",
                                probe=_probe(1.0, 2.0, calls), probe_id="k")
    assert got.backend == "openvino" and "AMX" in got.reason and not calls


def test_auto_without_amx_takes_the_faster_measured_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embed_backend, "cpu_bf16_flags", lambda cpuinfo=None: ["avx512_bf16"])
    monkeypatch.delenv("PRBENCH_EMBED_PROBE")
    calls: list[int] = []
    got = resolve_embed_backend("auto", "cpu", "float32", ov_version="2026.4.1",
                                probe=_probe(0.5, 0.8, calls), probe_id="torch-wins")
    assert got.backend == "torch" and "OpenVINO 0.62x" in got.reason
    again = resolve_embed_backend("auto", "cpu", "float32", ov_version="2026.4.1",
                                  probe=_probe(0.5, 0.8, calls), probe_id="torch-wins")
    assert again == got and len(calls) == 1  # remembered: measured once per machine
    faster = resolve_embed_backend("auto", "cpu", "float32", ov_version="2026.4.1",
                                   probe=_probe(0.9, 0.5, calls), probe_id="ov-wins")
    assert faster.backend == "openvino" and "1.80x" in faster.reason
    # a draw stays with torch: the choice is never slower than torch
    draw = resolve_embed_backend("auto", "cpu", "float32", ov_version="2026.4.1",
                                 probe=_probe(0.52, 0.5, calls), probe_id="draw")
    assert draw.backend == "torch"


def test_auto_measures_nothing_where_told_not_to(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embed_backend, "cpu_bf16_flags", lambda cpuinfo=None: [])
    calls: list[int] = []
    got = resolve_embed_backend("auto", "cpu", "float32", ov_version="2026.4.1",
                                probe=_probe(1.0, 0.1, calls), probe_id="off")
    assert got.backend == "torch" and not got.settled and not calls


def test_auto_is_torch_on_a_gpu_and_in_bf16_weights() -> None:
    assert resolve_embed_backend("auto", "cuda:0", "float32",
                                 ov_version="2026.4.1").backend == "torch"
    assert resolve_embed_backend("auto", "cpu", "bfloat16-weights",
                                 ov_version="2026.4.1").backend == "torch"


@needs_openvino
def test_an_encoder_runs_the_backend_auto_chose(tiny_model: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embed_backend, "cpu_bf16_flags", lambda cpuinfo=None: [])
    monkeypatch.delenv("PRBENCH_EMBED_PROBE")
    monkeypatch.setattr(Encoder, "_probe", lambda self: {"torch": 2.0, "openvino": 1.0})
    enc = _encoder(str(tiny_model), "auto")
    enc.encode(POSTS[:3])
    assert isinstance(enc._model, embed_openvino.OpenVINOModel)
    assert enc.describe()["embed_backend"] == "openvino"
    monkeypatch.setattr(Encoder, "_probe", lambda self: {"torch": 1.0, "openvino": 2.0})
    monkeypatch.setenv("PRBENCH_CACHE_DIR", str(tiny_model.parent / "other_cache"))
    enc = _encoder(str(tiny_model), "auto")
    enc.encode(POSTS[:3])
    assert not isinstance(enc._model, embed_openvino.OpenVINOModel)


# -- without the package ---------------------------------------------------------------------------


@pytest.fixture
def no_openvino(monkeypatch: pytest.MonkeyPatch) -> None:
    # as without the package (every use asks openvino_version first); sys.modules is left
    # alone: dropping a loaded openvino from it re-imports its native parts later in the process
    monkeypatch.setattr(embed_openvino, "openvino_version", lambda: None)
    monkeypatch.setattr(embed_backend, "_WARNED", set())


@pytest.mark.usefixtures("no_openvino")
def test_auto_without_openvino_is_torch_with_one_line(
        tiny_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert embed_openvino.openvino_version() is None
    for _ in range(2):
        enc = _encoder(str(tiny_model), "auto")
        enc.encode(POSTS[:2])
        assert enc.describe()["embed_backend"] == "torch"
    lines = [x for x in capsys.readouterr().err.splitlines() if "openvino" in x]
    assert len(lines) == 1 and "prbench[openvino]" in lines[0]


@pytest.mark.usefixtures("no_openvino")
def test_openvino_asked_for_without_the_package_is_one_error(tiny_model: Path) -> None:
    enc = _encoder(str(tiny_model), "openvino")
    with pytest.raises(OpenVINOMissingError, match=r"pip install 'prbench\[openvino\]'") as got:
        enc.encode(POSTS[:2])
    assert isinstance(got.value, PrbenchUserError)


def test_openvino_errors_name_the_way_out() -> None:
    with pytest.raises(PrbenchUserError, match="device=cpu"):
        resolve_embed_backend("openvino", "cuda:0", "float32", ov_version="2026.4.1")
    with pytest.raises(PrbenchUserError, match="embed_dtype=bfloat16"):
        resolve_embed_backend("openvino", "cpu", "bfloat16-weights", ov_version="2026.4.1")


def test_the_option_is_checked_and_listed() -> None:
    with pytest.raises(OptionsError, match=r"embed_backend.*openvino"):
        get_registry().build("scorer", "embedding-similarity", {"embed_backend": "tensorrt"})
    with pytest.raises(ValueError, match="embed_backend"):
        RankedOptions(path="r.jsonl", embed_backend="onnx")
    from prbench.profiles.dense import DenseOptions
    from prbench.scoring.embedding import EmbeddingSimilarityOptions

    for cls in (DenseOptions, EmbeddingSimilarityOptions):
        field = cls.__dataclass_fields__["embed_backend"]
        assert field.default == "auto" and "openvino" in field.metadata["help"]


# -- rankings --------------------------------------------------------------------------------------


def _ranking(backend: str | None) -> SimpleNamespace:
    identity = {"embed_dtype": "float32"}
    if backend is not None:
        identity["embed_backend"] = backend
    return SimpleNamespace(path=Path("ranking.jsonl"), header={"identity": identity})


def test_a_ranking_records_its_backend_and_a_resume_on_another_is_refused(
        tiny_model: Path) -> None:
    from prbench.profiles.dense import DenseOptions
    from prbench.profiles.ranked import dense_identity, identity_problems

    options = DenseOptions(model=str(tiny_model), embed_backend="torch")
    identity = dense_identity(options, encoder=options.make_encoder())
    assert identity["embed_backend"] == "torch"
    problems = identity_problems(identity, {**identity, "embed_backend": "openvino"})
    assert problems == ["embed_backend: ranked with 'torch', asked for 'openvino'"]
    # a ranking written before the option existed ran on torch
    old = {k: v for k, v in identity.items() if k != "embed_backend"}
    assert identity_problems(old, identity) == []
    assert identity_problems(old, {**identity, "embed_backend": "openvino"})


def test_a_ranking_from_another_backend_is_refused_when_explicit() -> None:
    with pytest.raises(RankingError, match=r"ranked on openvino.*embed_backend=torch"):
        check_backend(_ranking("openvino"), "torch", "float32")  # type: ignore[arg-type]
    check_backend(_ranking("openvino"), "openvino", "float32")  # type: ignore[arg-type]
    # a ranking written before the option existed ran on torch
    check_backend(_ranking(None), "torch", "float32")  # type: ignore[arg-type]
    with pytest.raises(RankingError, match="ranked on torch"):
        check_backend(_ranking(None), "openvino", "float32")  # type: ignore[arg-type]


@pytest.mark.usefixtures("no_openvino")
def test_a_ranking_from_another_backend_is_warned_under_auto(
        capsys: pytest.CaptureFixture[str]) -> None:
    check_backend(_ranking("openvino"), "auto", "float32")  # type: ignore[arg-type]
    err = capsys.readouterr().err
    assert "warning: ranking.jsonl was ranked on openvino" in err
    assert "embed_backend=openvino to say so" in err
    check_backend(_ranking("torch"), "auto", "float32")  # type: ignore[arg-type]
    assert "warning" not in capsys.readouterr().err


_SIGNAL_AFTER_MODELS = """
import faulthandler, gc, signal, sys, time
faulthandler.enable()  # as pytest does: the main thread has an alternate signal stack
from prbench.profiles import embed_models, embed_openvino
from prbench.profiles.embed import Encoder, EncoderSpec
encoders = [Encoder(EncoderSpec(model=sys.argv[1], embed_backend="openvino", embed_dtype=dtype),
                    device="cpu", cache=False, threads=1) for dtype in ("float32", "bfloat16")]
for enc in encoders:  # two OpenVINO models at once
    enc.encode(["one post", "another post"])
kept = [m.__dict__.pop(embed_openvino._KEPT_AS) for m in embed_models._LOADED.values()
        if embed_openvino._KEPT_AS in m.__dict__]
models = [model for table in kept for model in table.values()]
del enc, encoders, kept
while models:  # dropped in the order they were made
    del models[0]
    gc.collect()
class Alarm(BaseException):
    pass
def ring(signum, frame):
    raise Alarm()
signal.signal(signal.SIGALRM, ring)  # call_timeout's way of bounding a scorer call
signal.setitimer(signal.ITIMER_REAL, 0.2)
try:
    time.sleep(5)
except Alarm:
    print("the alarm was handled")
"""


@needs_openvino
def test_a_signal_after_openvino_models_were_dropped_is_handled(tiny_model: Path,
                                                                tmp_path: Path) -> None:
    """OpenVINO's CPU plugin frees the alternate signal stack it gave the thread when it is
    destroyed; prbench keeps one core (one plugin) for the process, so a later signal is handled
    instead of ending the process with a segmentation fault."""
    import os
    import subprocess
    import sys

    script = tmp_path / "signal_after_models.py"
    script.write_text(_SIGNAL_AFTER_MODELS, encoding="utf-8")
    env = {**os.environ, "PRBENCH_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, str(script), str(tiny_model)], capture_output=True,
                          text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert "the alarm was handled" in done.stdout


@pytest.mark.usefixtures("no_openvino")
def test_the_description_holds_plain_values_only(tiny_model: Path) -> None:
    """A description is saved in checkpoints read back with ``torch.load(weights_only=True)``
    (GPO's): torch's version object would make such a file refuse to load."""
    import torch

    enc = _encoder(str(tiny_model), "auto")
    enc.encode(POSTS[:2])
    described = enc.describe()
    assert described["embed_backend"] == "torch"
    assert type(described["embed_backend_version"]) is str
    plain = (str, int, float, bool, type(None))
    assert all(type(v) in plain for v in described.values()), described
    path = tiny_model.parent / "described.pt"
    torch.save(described, path)
    assert torch.load(path, weights_only=True) == described


@pytest.mark.parametrize(("gpus", "pinned"), [(0, "openvino"), (1, None)])
def test_ray_shards_on_cpus_run_on_the_backend_the_rank_file_records(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, gpus: int, pinned: str | None) -> None:
    """A node's own ``auto`` could measure otherwise than the driver did; CPU shards are given
    the driver's resolution, which the rank file's identity records."""
    import argparse

    from prbench import cluster
    from prbench.commands import rank
    from prbench.profiles import rank_shards

    seen: dict[str, object] = {}

    def embed_on_ray(steps: list, **kw: object) -> tuple[list, dict]:
        seen.update(kw["options"])  # type: ignore[arg-type]
        return [[] for _ in steps], {"reused": 0, "embedded": 0, "computed": 0}

    monkeypatch.setattr(cluster, "connect", lambda *a, **k: None)
    monkeypatch.setattr(cluster, "alive_nodes", lambda ray: [{"Resources": {}}])
    monkeypatch.setattr(rank_shards, "embed_on_ray", embed_on_ray)
    args = argparse.Namespace(max_retries=None, shards=None, ray_address=None, step_posts=1000,
                              shard_resources=f"gpus={gpus}")
    out = tmp_path / "ranks.jsonl"
    rank._rank_on_ray(args, "dense", {"model": "minilm", "embed_backend": "auto"},
                      {"embed_backend": "openvino"}, {}, [], out, "check")
    assert seen["embed_backend"] == (pinned or "auto")
