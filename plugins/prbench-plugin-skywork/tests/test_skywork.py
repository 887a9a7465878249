from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _skywork_models import build_rm

from prbench.api import OptionsError, ProfileView, ScoreRequest
from prbench.testing import PluginRegistry

REQUESTS = [
    ScoreRequest("r1", "Which lens should I buy for night photography?", "A fast prime lens."),
    ScoreRequest("r1", "Which lens should I buy for night photography?", "Any zoom lens works."),
    ScoreRequest(
        "r2", "How do I keep a morning habit?", "Plan it the night before.",
        profile=ProfileView(text="Post 1 (Category: Lifestyle): I walk every morning."),
    ),
]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("skywork_models")
    return {arch: build_rm(root / arch, arch) for arch in ("qwen3", "llama", "gemma2")}


def _build(options: dict[str, str]):
    return PluginRegistry().build("scorer", "skywork", dict(options))


def test_registered_through_the_entry_point() -> None:
    registry = PluginRegistry()
    info = registry.plugins["skywork"]
    assert info.origin == "entry-point" and info.dist == "prbench-plugin-skywork"
    assert info.components == ["scorer:skywork"]
    names = [row["name"] for row in registry.get("scorer", "skywork").describe_options()]
    assert {"variant", "pretrained", "dtype", "max_length", "profile_position"} <= set(names)


def test_variants_fill_in_the_recommended_settings() -> None:
    comp = PluginRegistry().get("scorer", "skywork")
    v2 = comp.parse_options({"variant": "v2-qwen3-0.6b"}).resolved()
    assert (v2.pretrained, v2.revision, v2.dtype, v2.max_length) == (
        "Skywork/Skywork-Reward-V2-Qwen3-0.6B", "main", "bfloat16", 16384
    )
    gemma = comp.parse_options({"variant": "v0.2-gemma-2-27b"}).resolved()
    assert gemma.attn_implementation == "eager" and gemma.max_length == 8192
    assert gemma.pretrained == "Skywork/Skywork-Reward-Gemma-2-27B-v0.2"
    explicit = comp.parse_options(
        {"variant": "v0.2-gemma-2-27b", "pretrained": "/models/copy", "dtype": "float32",
         "attn_implementation": "flash_attention_2", "max_length": "4096", "revision": "abc"}
    ).resolved()
    assert (explicit.pretrained, explicit.dtype, explicit.attn_implementation) == (
        "/models/copy", "float32", "flash_attention_2"
    )
    assert (explicit.max_length, explicit.revision) == (4096, "abc")


def test_v01_variants_and_the_attention_kernel_rule() -> None:
    from prbench_plugin_skywork.variants import flash_attention_available

    comp = PluginRegistry().get("scorer", "skywork")
    llama01 = comp.parse_options({"variant": "v0.1-llama-3.1-8b"})
    gemma01 = comp.parse_options({"variant": "v0.1-gemma-2-27b"})
    assert llama01.resolved().pretrained == "Skywork/Skywork-Reward-Llama-3.1-8B"
    assert gemma01.resolved().pretrained == "Skywork/Skywork-Reward-Gemma-2-27B"
    assert llama01.spec.generation == gemma01.spec.generation == "v0.1"
    v2 = comp.parse_options({"variant": "v2-qwen3-0.6b"})
    # the cards' kernel where it runs; otherwise sdpa, and eager for Gemma-2 (soft-capping)
    for opts in (llama01, gemma01, v2):
        assert opts.resolved(flash_attention=True).attn_implementation == "flash_attention_2"
    assert v2.resolved().attn_implementation == "sdpa"
    assert llama01.resolved().attn_implementation == "sdpa"
    assert gemma01.resolved().attn_implementation == "eager"
    explicit = comp.parse_options({"variant": "v2-qwen3-0.6b", "attn_implementation": "eager"})
    assert explicit.resolved(flash_attention=True).attn_implementation == "eager"
    import torch

    assert flash_attention_available(torch.device("cpu")) is False


def test_bad_options_fail_clearly() -> None:
    comp = PluginRegistry().get("scorer", "skywork")
    with pytest.raises(OptionsError, match=r"variant=<one of v0\.1-llama-3\.1-8b"):
        comp.parse_options({})
    with pytest.raises(OptionsError, match=r"v2-qwen3-0\.6b"):
        comp.parse_options({"variant": "v2-qwen3-0.5b"})
    with pytest.raises(OptionsError, match="without a system prompt"):
        comp.parse_options({"variant": "v2-llama-3.2-1b", "profile_position": "system"})
    assert comp.parse_options({"variant": "v0.2-llama-3.1-8b", "profile_position": "system"})


@pytest.mark.parametrize(
    ("arch", "variant"),
    [("qwen3", "v2-qwen3-0.6b"), ("llama", "v2-llama-3.2-1b"), ("gemma2", "v0.2-gemma-2-27b")],
)
def test_scores_are_the_models_own_reward_with_one_bos(models, arch, variant) -> None:
    import torch
    from transformers import AutoModelForSequenceClassification

    scorer = _build({"variant": variant, "pretrained": str(models[arch]), "dtype": "float32"})
    ids = scorer.encode(REQUESTS)
    bos = scorer.tokenizer.bos_token_id
    for seq in ids:
        leading = next(i for i, t in enumerate(seq) if t != bos) if bos is not None else 0
        assert leading == (0 if arch == "qwen3" else 1)  # Qwen3: none; others: exactly one
    scores = scorer.score(REQUESTS)
    model = AutoModelForSequenceClassification.from_pretrained(
        models[arch], dtype=torch.float32, attn_implementation="eager", trust_remote_code=False
    ).eval()
    with torch.no_grad():
        own = [model(input_ids=torch.tensor([s])).logits[0][0].item() for s in ids]
    assert scores == pytest.approx(own, rel=1e-4, abs=1e-4)
    assert len(set(scores)) == 3
    described = scorer.describe()
    assert described["component"] == "skywork"
    assert described["variant"]["name"] == variant
    assert "pretrained" not in described["variant"]["from_variant"]
    assert described["resolved"]["dtype"] == "float32"
    if arch == "gemma2":
        assert described["options"]["attn_implementation"] == "eager"
        assert scorer.model.config._attn_implementation == "eager"


@pytest.mark.parametrize(("arch", "variant"), [("qwen3", "v2-qwen3-0.6b"),
                                               ("llama", "v2-llama-3.2-1b")])
def test_exact_mode_matches_the_v2_card_recipe(models, arch, variant) -> None:
    """profile_position=none is the card's input; ids and reward equal the card's recipe."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    scorer = _build({"variant": variant, "pretrained": str(models[arch]), "dtype": "float32",
                     "profile_position": "none", "max_batch_size": "1", "prefix_sharing": "off"})
    tok = AutoTokenizer.from_pretrained(models[arch], trust_remote_code=False)
    model = AutoModelForSequenceClassification.from_pretrained(
        models[arch], dtype=torch.float32, trust_remote_code=False
    ).eval()
    card_ids, card_scores = [], []
    for r in REQUESTS:  # the V2 card: render, drop a leading BOS text, tokenise, logits[0][0]
        chat = [{"role": "user", "content": r.question},
                {"role": "assistant", "content": r.response}]
        text = tok.apply_chat_template(chat, tokenize=False)
        if tok.bos_token is not None and text.startswith(tok.bos_token):
            text = text[len(tok.bos_token):]
        ids = tok(text, return_tensors="pt")["input_ids"]
        card_ids.append(ids[0].tolist())
        with torch.no_grad():
            card_scores.append(model(input_ids=ids).logits[0][0].item())
    assert scorer.encode(REQUESTS) == card_ids
    assert scorer.score(REQUESTS) == pytest.approx(card_scores, rel=1e-4, abs=1e-4)


def test_released_profile_is_the_released_bon_input_through_the_card_recipe(models) -> None:
    """input_format=released_profile: the user turn is the question, then the posts, as the
    released Best-of-N / PPO reward code builds it; the ids are the V2 card's recipe of it."""
    from transformers import AutoTokenizer

    from prbench.api import ProfileItem, render_posts

    posts = (ProfileItem("p1", "Lifestyle", "I walk every morning."),
             ProfileItem("p2", "Arts", "I sketch birds."))
    view = ProfileView(text=render_posts(posts), items=posts)
    req = ScoreRequest("r2", "How do I keep a morning habit?", "Plan it.", profile=view)
    scorer = _build({"variant": "v2-qwen3-0.6b", "pretrained": str(models["qwen3"]),
                     "dtype": "float32", "input_format": "released_profile"})
    user = ("How do I keep a morning habit?Post 1 (Category: Lifestyle):\nI walk every morning."
            "\nPost 2 (Category: Arts):\nI sketch birds.")
    tok = AutoTokenizer.from_pretrained(models["qwen3"], trust_remote_code=False)
    text = tok.apply_chat_template(
        [{"role": "user", "content": user}, {"role": "assistant", "content": "Plan it."}],
        tokenize=False,
    )
    assert scorer.encode([req]) == [tok(text)["input_ids"]]
    assert scorer.describe()["options"]["input_format"] == "released_profile"


def test_variant_dtype_is_bf16_unless_overridden(models) -> None:
    scorer = _build({"variant": "v2-qwen3-0.6b", "pretrained": str(models["qwen3"])})
    scores = scorer.score(REQUESTS[:2])
    import torch

    assert scorer.model.dtype == torch.bfloat16
    assert all(isinstance(s, float) for s in scores)
    assert "dtype" in scorer.describe()["variant"]["from_variant"]


def _results_and_manifest(output: Path) -> tuple[dict, dict]:
    found = sorted(output.rglob("results_*.json"))
    assert len(found) == 1, found
    manifest = found[0].with_name(found[0].name.replace("results_", "prbench_manifest_"))
    return json.loads(found[0].read_text()), json.loads(manifest.read_text())


def _accuracy(results: dict) -> float:
    return results["results"]["personalized_rewardbench_sample_noprofile"]["acc_macro,none"]


def test_prbench_eval_end_to_end(models, tmp_path, capsys) -> None:
    from prbench.testing import run_cli

    args = f"scorer=skywork,variant=v2-qwen3-0.6b,pretrained={models['qwen3']},dtype=float32"
    code = run_cli(["eval", "--tasks", "personalized_rewardbench_sample_noprofile",
                 "--model_args", args, "--output_path", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert code == 0, out[-2000:]
    results, manifest = _results_and_manifest(tmp_path / "out")
    assert 0.0 <= _accuracy(results) <= 1.0
    print("skywork tiny qwen3 sample acc_macro:", _accuracy(results))
    assert "skywork" in json.dumps(manifest)


@pytest.mark.slow
def test_plain_lm_eval_end_to_end(models, tmp_path) -> None:
    args = f"scorer=skywork,variant=v0.2-gemma-2-27b,pretrained={models['gemma2']},dtype=float32"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "lm_eval", "--tasks", "personalized_rewardbench_sample_noprofile",
         "--model", "prbench", "--model_args", args, "--output_path", str(tmp_path / "out")],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    found = sorted((tmp_path / "out").rglob("results_*.json"))
    assert len(found) == 1, found
    results = json.loads(found[0].read_text())
    assert 0.0 <= _accuracy(results) <= 1.0
    # plain lm_eval keeps prbench's provenance (scorer, options, plugins) in results["config"]
    scorer = results["config"]["prbench"]["scorer"]
    assert scorer["id"] == "skywork" and scorer["plugin"] == "skywork"
    assert scorer["options"]["variant"] == "v0.2-gemma-2-27b"


def test_runtime_caches_by_fingerprint_and_records_the_variant(models) -> None:
    from prbench.api import build_runtime

    options = {"variant": "v2-llama-3.2-1b", "pretrained": str(models["llama"]),
               "dtype": "float32", "progress": "false"}
    with build_runtime("skywork", options) as rt:
        first = rt.score(REQUESTS)
        described = rt.describe()
    assert described["scorer"]["variant"]["hub_id"] == "Skywork/Skywork-Reward-V2-Llama-3.2-1B"
    assert described["scorer"]["options"]["max_length"] == 16384
    assert described["fingerprint"] == described["scorer"]["fingerprint"]
    with build_runtime("skywork", options) as rt:
        assert rt.score(REQUESTS) == first
        assert rt.stats()["computed"] == 0 and rt.stats()["cache_hits"] == 3


def test_an_uncached_variant_offline_is_one_line(tmp_path) -> None:
    """Offline, a variant whose weights are not in the local cache is one line naming the hub id
    and the variable (it was a 120-line traceback)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    proc = subprocess.run(
        [sys.executable, "-m", "prbench.cli", "eval", "--tasks",
         "personalized_rewardbench_sample_noprofile", "--limit", "1", "--model_args",
         "scorer=skywork,variant=v2-qwen3-0.6b", "--no-progress"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: skywork pretrained: 'Skywork/Skywork-Reward-V2-Qwen3-0.6B' is not in the local "
        "Hugging Face cache and HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is set, so it cannot be "
        "downloaded; fetch it on a machine with internet (`hf download "
        "Skywork/Skywork-Reward-V2-Qwen3-0.6B`) and copy the cache here, or pass a local folder"
    ]
