"""Profile builders (none, all, bm25, dense) and the shared embedding encoder and cache."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _profiles_fixtures import SLEEP, WATERCOLOR, make_record, minilm_dir, tiny_bert

from prbench.model_ref import ModelUnavailableError
from prbench.options import OptionsError
from prbench.plugins import get_registry
from prbench.profiles import embed, embed_models
from prbench.profiles.base import POST_FORMAT, ProfileView, render_posts
from prbench.profiles.bm25 import simple_stem
from prbench.profiles.embed import Encoder, EncoderSpec
from prbench.profiles.embed_cache import EmbeddingCache


def build(builder: str, records: list, **options: object) -> list[ProfileView]:
    return get_registry().build("profile-builder", builder, options).build(records)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_bert(tmp_path_factory.mktemp("tiny_bert"))


# -- registry and options ------------------------------------------------------------------------


def test_builders_are_registered_with_options() -> None:
    reg = get_registry()
    assert {"none", "all", "dense", "bm25"} <= {c.name for c in reg.list("profile-builder")}
    rows = reg.get("profile-builder", "dense").describe_options()
    dense_opts = {row["name"]: row for row in rows}
    assert dense_opts["k"]["default"] == "10"
    assert dense_opts["similarity"]["default"] == "'dot'"
    assert {"model", "encoder", "revision", "format", "max_tokens", "batch_size"} <= set(dense_opts)


@pytest.mark.parametrize(
    ("builder", "options", "needle"),
    [
        ("dense", {"format": "Post {nope}: {text}"}, "unknown field {nope}"),
        ("dense", {"k": 0}, "'k' must be >= 1"),
        ("dense", {"similarity": "euclid"}, "is not one of"),
        ("bm25", {"query_format": "{narrative}"}, "unknown field {narrative}"),
        ("bm25", {"b": 2}, "'b' must be >= 0, <= 1"),
        ("all", {"max_tokens": -5}, "'max_tokens' must be >= 1"),
        ("all", {"max_token": 5}, "did you mean 'max_tokens'"),
    ],
)
def test_bad_options_are_rejected_with_the_option_named(
    builder: str, options: dict, needle: str
) -> None:
    with pytest.raises(OptionsError, match=f"profile-builder '{builder}'") as info:
        get_registry().build("profile-builder", builder, options)
    assert needle in str(info.value)


# -- none / all ----------------------------------------------------------------------------------


def test_none_gives_an_empty_view_per_record() -> None:
    views = build("none", [SLEEP, WATERCOLOR])
    assert [v.builder for v in views] == ["none", "none"]
    assert all(v.empty and v.items == () and v.n_tokens == 0 for v in views)
    assert views[0].extra["n_posts"] == 4


def test_all_keeps_the_given_order_and_cuts_at_the_budget() -> None:
    rec = make_record("r", "q?", [("A", "one two three"), ("B", "four five"), ("C", "six seven")])
    # "Post 1 (Category: A): one two three" is 7 words, post 2 is 6, post 3 is 6.
    views = build("all", [rec], max_tokens=13)
    v = views[0]
    assert [i.id for i in v.items] == ["r-p1", "r-p2"]
    assert v.text == render_posts(rec.profile[:2], POST_FORMAT)
    assert v.n_tokens == 13
    assert v.extra["n_cut"] == 1 and v.extra["n_posts"] == 3
    assert v.builder == "all(max_tokens=13)"
    # One word less and the second post no longer fits; the shorter third is not pulled forward.
    v12 = build("all", [rec], max_tokens=12)[0]
    assert [i.id for i in v12.items] == ["r-p1"] and v12.extra["n_cut"] == 2


def test_all_without_budget_and_with_a_budget_below_the_first_post() -> None:
    views = build("all", [SLEEP], max_tokens=None)
    assert len(views[0].items) == 4 and views[0].extra["n_cut"] == 0
    assert views[0].text.startswith("Post 1 (Category: Tech): Which budget")
    tiny = build("all", [SLEEP], max_tokens=2)[0]
    assert tiny.text == "" and tiny.items == () and tiny.extra["n_cut"] == 4


def test_all_counts_tokens_with_a_tokenizer_and_a_custom_format() -> None:
    from transformers import AutoTokenizer

    fmt = "[{category}] {text}"
    view = build("all", [SLEEP], max_tokens=40, tokenizer="minilm", format=fmt)[0]
    tok = AutoTokenizer.from_pretrained(str(minilm_dir()))
    n_real = len(tok(view.text, add_special_tokens=False)["input_ids"])
    assert view.n_tokens == n_real <= 40
    assert 0 < len(view.items) < 4
    assert view.text.startswith("[Tech] Which budget")
    assert view.extra["token_unit"] == "minilm" and view.extra["format"] == fmt
    assert "tokenizer=minilm" in view.builder


# -- bm25 ----------------------------------------------------------------------------------------


def test_bm25_ranks_the_clearly_relevant_post_first() -> None:
    views = build("bm25", [WATERCOLOR, SLEEP], k=2)
    v = views[0]
    assert v.items[0].id == "paint-p3"
    assert len(v.items) == 2 and v.builder == "bm25(k=2)"
    assert v.extra["post_ids"][0] == "paint-p3"
    scores = v.extra["scores"]
    assert scores[0] > 0 and scores == sorted(scores, reverse=True)
    assert v.text.startswith("Post 1 (Category: Art): My watercolor paper buckles")
    # the sleep question shares no content word with the parenting post: BM25 cannot find it
    assert views[1].items[0].id != "sleep-p2"


def test_bm25_ties_keep_the_post_order_and_empty_profiles_work() -> None:
    rec = make_record("t", "zebra quantum?", [("A", "alpha"), ("B", "beta"), ("C", "gamma")])
    empty = make_record("e", "anything?", [])
    views = build("bm25", [rec, empty], k=2)
    assert [i.id for i in views[0].items] == ["t-p1", "t-p2"]
    assert views[0].extra["scores"] == [0.0, 0.0]
    assert views[1].text == "" and views[1].extra["n_posts"] == 0


def test_bm25_is_deterministic_and_respects_a_budget() -> None:
    first = build("bm25", [WATERCOLOR, SLEEP], k=3, max_tokens=30)
    second = build("bm25", [WATERCOLOR, SLEEP], k=3, max_tokens=30)
    assert first == second
    assert all(v.n_tokens <= 30 for v in first)
    assert first[0].extra["n_cut"] >= 1


@pytest.mark.parametrize(
    ("word", "stem"),
    [
        ("painting", "paint"), ("paintings", "paint"), ("buckles", "buckle"),
        ("boxes", "box"), ("running", "run"), ("stopped", "stop"), ("falling", "fall"),
        ("class", "class"), ("babies", "baby"), ("quickly", "quick"), ("cat", "cat"),
    ],
)
def test_simple_stem(word: str, stem: str) -> None:
    assert simple_stem(word) == stem


# -- encoder, cache and dense with a tiny random model ------------------------------------------


def test_transformers_mean_matches_manual_mean_pooling(tiny_model: Path) -> None:
    import torch
    from transformers import AutoModel, AutoTokenizer

    texts = ["a short one", "a somewhat longer sentence about watercolor paper and paint", ""]
    # float32: the check is of the pooling, exact to 1e-5 (bf16 autocast is its own test file)
    spec = EncoderSpec(model=str(tiny_model), embed_dtype="float32")
    enc = Encoder(spec, device="cpu", batch_size=2, cache=False)
    assert enc.kind == "transformers-mean"  # auto: the folder has no modules.json
    got = enc.encode(texts)
    tok = AutoTokenizer.from_pretrained(tiny_model)
    model = AutoModel.from_pretrained(tiny_model).eval()
    for i, text in enumerate(texts):
        batch = tok([text], return_tensors="pt")
        with torch.no_grad():
            hidden = model(**batch).last_hidden_state[0]
        np.testing.assert_allclose(got[i], hidden.mean(0).numpy(), atol=1e-5)
    one_by_one = Encoder(spec, device="cpu", batch_size=1, cache=False)
    np.testing.assert_allclose(one_by_one.encode(texts), got, atol=1e-5)


def test_second_build_computes_nothing(
    tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg = get_registry()
    opts = {"model": str(tiny_model), "k": 2, "device": "cpu"}
    first_builder = reg.build("profile-builder", "dense", opts)
    first = first_builder.build([SLEEP, WATERCOLOR])
    assert first_builder.encoder.stats.computed == 10  # 2 questions + 8 posts
    assert first_builder.encoder.stats.model_calls >= 1

    def no_loading(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model was loaded although every embedding is cached")

    monkeypatch.setattr(embed_models, "load_model", no_loading)
    second_builder = reg.build("profile-builder", "dense", {**opts, "batch_size": 3})
    second = second_builder.build([SLEEP, WATERCOLOR])
    assert second == first
    stats = second_builder.encoder.stats
    assert (stats.computed, stats.model_calls, stats.cached) == (0, 0, 10)
    assert not second_builder.encoder.loaded
    # without the cache the (patched-out) model is needed again
    with pytest.raises(AssertionError, match="was loaded"):
        reg.build("profile-builder", "dense", {**opts, "embed_cache": False}).build([SLEEP])


def test_cache_key_follows_model_files_encoder_and_truncation(
    tiny_model: Path, tmp_path: Path
) -> None:
    base = Encoder(EncoderSpec(model=str(tiny_model)), cache_dir=tmp_path)
    same = Encoder(EncoderSpec(model=str(tiny_model)), cache_dir=tmp_path, batch_size=7)
    shorter = Encoder(EncoderSpec(model=str(tiny_model), max_length=16), cache_dir=tmp_path)
    other = tiny_bert(tmp_path / "other", seed=1)
    retrained = Encoder(EncoderSpec(model=str(other)), cache_dir=tmp_path)
    as_st = Encoder(EncoderSpec(model=str(tiny_model), encoder="sentence-transformers"),
                    cache_dir=tmp_path)
    keys = [base.key, shorter.key, retrained.key, as_st.key]
    assert base.key == same.key
    assert len(set(keys)) == 4


def test_dense_with_tiny_model_ties_cosine_and_budget(tiny_model: Path) -> None:
    dup = make_record("d", "same?", [("A", "identical text"), ("B", "identical text"),
                                     ("C", "something else entirely")])
    views = build("dense", [dup], model=str(tiny_model), k=3, device="cpu", embed_cache=False,
                  similarity="cosine")
    v = views[0]
    s = v.extra["scores"]
    assert all(-1.0 - 1e-6 <= x <= 1.0 + 1e-6 for x in s)
    # the two identical posts score the same and keep their post order
    ids = [i.id for i in v.items]
    assert ids.index("d-p1") < ids.index("d-p2")
    assert s[ids.index("d-p1")] == s[ids.index("d-p2")]
    assert v.builder.startswith("dense(k=3,model=") and "similarity=cosine" in v.builder
    assert v.extra["encoder"]["encoder"] == "transformers-mean"
    budget = build("dense", [SLEEP], model=str(tiny_model), k=4, max_tokens=25, device="cpu")[0]
    assert budget.n_tokens <= 25 and budget.extra["n_cut"] == 4 - len(budget.items)
    assert budget.extra["n_cut"] > 0


def test_cache_is_shared_between_processes(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    code = (
        "import numpy as np, sys\n"
        "from prbench.profiles.embed_cache import EmbeddingCache\n"
        "c = EmbeddingCache(sys.argv[1], meta={'model': 'test'})\n"
        "c.put({'h1': np.arange(4, dtype=np.float32), 'h2': np.ones(4, dtype=np.float32)})\n"
    )
    mine = EmbeddingCache(path, meta={"model": "test"})
    mine.put({"h0": np.zeros(4, dtype=np.float32)})
    subprocess.run([sys.executable, "-c", code, str(path)], check=True)
    got = mine.get(["h0", "h1", "h2", "h3"])
    assert sorted(got) == ["h0", "h1", "h2"]
    np.testing.assert_array_equal(got["h1"], np.arange(4, dtype=np.float32))
    with pytest.raises(Exception, match="sizes"):
        mine.put({"h9": np.zeros(3, dtype=np.float32)})


def test_unknown_hub_model_offline_says_what_to_do() -> None:
    with pytest.raises(ModelUnavailableError) as info:
        get_registry().build("profile-builder", "dense", {"model": "nobody/no-such-embedder"})
    msg = str(info.value)
    assert "nobody/no-such-embedder" in msg and "offline" in msg
    assert "model=minilm" in msg and "local model folder" in msg


def test_hub_model_in_the_local_cache_loads_offline(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    import huggingface_hub.constants

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--acme--tiny-embedder"
    shutil.copytree(tiny_model, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    enc = Encoder(EncoderSpec(model="acme/tiny-embedder"), device="cpu", cache=False)
    assert enc.ref.fingerprint == f"hub:acme/tiny-embedder@{commit}"
    assert enc.kind == "transformers-mean"
    local = Encoder(EncoderSpec(model=str(tiny_model)), device="cpu", cache=False)
    np.testing.assert_allclose(enc.encode(["hello there"]), local.encode(["hello there"]),
                               atol=1e-6)
    with pytest.raises(ModelUnavailableError, match="at revision 'v2'"):
        Encoder(EncoderSpec(model="acme/tiny-embedder", revision="v2"))

    # The released configuration, with the tiny model standing in for contriever's weights: the
    # alias resolves to facebook/contriever-msmarco, mean pooling, dot product.
    fake = tmp_path / "hub" / "models--facebook--contriever-msmarco"
    shutil.copytree(tiny_model, fake / "snapshots" / commit)
    (fake / "snapshots" / commit / "modules.json").write_text("[]")  # auto must not follow it
    (fake / "refs").mkdir()
    (fake / "refs" / "main").write_text(commit)
    view = build("dense", [SLEEP], model="contriever", k=10, device="cpu")[0]
    assert view.builder == "dense(k=10,model=contriever,similarity=dot)"
    assert view.extra["encoder"]["encoder"] == "transformers-mean"
    assert view.extra["encoder"]["resolved"] == f"facebook/contriever-msmarco@{commit}"
    assert len(view.items) == 4


def test_missing_local_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailableError, match="does not exist"):
        Encoder(EncoderSpec(model=str(tmp_path / "nowhere")))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelUnavailableError, match="not a model folder"):
        Encoder(EncoderSpec(model=str(tmp_path / "empty")))


def test_cuda_request_without_cuda_is_an_error() -> None:
    import torch

    from prbench.devices import DeviceError

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(DeviceError, match=r"use device=auto .* or device=cpu"):
        embed.resolve_device("cuda:0")
    assert embed.resolve_device("auto") == "cpu"


@pytest.mark.parametrize("flags", [["--device", "cuda"],
                                   ["--profile_args", "builder=dense,device=cuda:0"]])
def test_rank_on_cuda_without_cuda_is_one_line(
    flags: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    from prbench.cli import main

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert main(["rank", "sample", "-o", str(tmp_path / "r.jsonl"), *flags]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: device=") and "not available on this machine" in err, err
    assert not (tmp_path / "r.jsonl").exists()


# -- dense with the real MiniLM weights ----------------------------------------------------------


@pytest.mark.slow
def test_dense_minilm_ranks_the_relevant_post_first() -> None:
    views = build("dense", [SLEEP, WATERCOLOR], k=2, device="cpu")
    assert views[0].items[0].id == "sleep-p2"  # no shared content word: meaning, not overlap
    assert views[1].items[0].id == "paint-p3"
    assert views[0].builder == "dense(k=2,model=minilm,similarity=dot)"
    assert views[0].extra["encoder"]["encoder"] == "sentence-transformers"
    assert views[0].text.startswith("Post 1 (Category: Parenting): Our two-year-old")
    s = views[0].extra["scores"]
    assert s[0] > s[1]


@pytest.mark.slow
def test_minilm_sentence_transformers_and_mean_pooling_paths_agree() -> None:
    st = build("dense", [SLEEP], k=4, device="cpu", embed_cache=False)[0]
    # MiniLM's own modules mean-pool and normalise: plain mean pooling + cosine is the same.
    mean = build("dense", [SLEEP], k=4, device="cpu", embed_cache=False,
                 encoder="transformers-mean", similarity="cosine")[0]
    assert [i.id for i in st.items] == [i.id for i in mean.items]
    np.testing.assert_allclose(st.extra["scores"], mean.extra["scores"], atol=1e-5)


# -- remote code ---------------------------------------------------------------------------------


def _load_remote(component: str, folder: Path, **extra: object) -> object:
    from prbench.scoring.base import ScoreRequest

    reg = get_registry()
    if component == "encoder-mean":
        spec = EncoderSpec(model=str(folder), encoder="transformers-mean", **extra)
        return Encoder(spec, device="cpu", cache=False).encode(["a text"])
    if component == "encoder-sentence-transformers":
        spec = EncoderSpec(model=str(folder), encoder="sentence-transformers", **extra)
        return Encoder(spec, device="cpu", cache=False).encode(["a text"])
    if component == "embedding-similarity":
        options = {"model": str(folder), "embed_cache": False, **extra}
        scorer = reg.build("scorer", component, options)
        return scorer.score([ScoreRequest(record_id="r", question="q?", response="an answer")])
    if component == "dense":
        options = {"model": str(folder), "encoder": "transformers-mean", "embed_cache": False}
        return reg.build("profile-builder", "dense", {**options, **extra}).build([SLEEP])
    # the all and bm25 builders load only a tokenizer (to count budget tokens)
    return reg.build("profile-builder", component, {"tokenizer": str(folder), **extra}).build(
        [SLEEP]
    )


@pytest.mark.parametrize(
    "component",
    ["encoder-mean", "encoder-sentence-transformers", "embedding-similarity", "dense", "all",
     "bm25"],
)
def test_model_code_never_runs_unless_asked(
    component: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder whose config needs its own code: nothing runs, and the error names the option.

    transformers asks on standard input when ``trust_remote_code`` is left unset; the answer
    "y" (as from a pipe) is what an attacker would feed it, so it is what ``input`` returns here.
    """
    from _profiles_fixtures import remote_code_model

    monkeypatch.setattr("builtins.input", lambda *args, **kwargs: "y")
    folder, marker = remote_code_model(tmp_path / f"rc_{component.replace('-', '_')}")
    with pytest.raises(ModelUnavailableError) as info:
        _load_remote(component, folder)
    assert not marker.exists(), "the folder's code ran"
    assert str(folder) in str(info.value)
    assert "trust_remote_code=true" in str(info.value)


def test_model_code_runs_when_the_option_is_set(tmp_path: Path) -> None:
    from _profiles_fixtures import remote_code_model

    folder, marker = remote_code_model(tmp_path / "rc_trusted_dense")
    views = _load_remote("dense", folder, trust_remote_code=True)
    assert marker.exists()
    assert len(views) == 1 and views[0].text
    rows = {r["name"] for r in get_registry().get("profile-builder", "all").describe_options()}
    assert "trust_remote_code" in rows


# -- progress ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("builder", "bars"),
    [("dense", ("profiles: dense", "embedding")), ("bm25", ("profiles: bm25",)),
     ("all", ("profiles: all",))],
)
def test_profile_building_and_embedding_show_progress_bars(
    builder: str, bars: tuple[str, ...], tiny_model: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    options = {"model": str(tiny_model), "embed_cache": False} if builder == "dense" else {}
    records = [SLEEP, WATERCOLOR]
    monkeypatch.setenv("PRBENCH_PROGRESS", "1")
    build(builder, records, **options)
    err = capsys.readouterr().err
    for label in bars:
        assert label in err
    assert "/2 [" in err and "record/s" in err  # the count of records and a rate
    if builder == "dense":
        assert "/8 [" in err and "text/s" in err  # the embedding bar of the 8 posts
    monkeypatch.setenv("PRBENCH_PROGRESS", "0")  # what --no-progress sets
    build(builder, records, **options)
    err = capsys.readouterr().err
    assert not any(label in err for label in bars)
