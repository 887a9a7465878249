"""GPO's exact mode: config=paper, the causal-LM embedder, --train files, the context swap."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
from prbench_plugin_gpo.checkpoint import load_checkpoint
from prbench_plugin_gpo.config import PRESETS, TrainConfig, make_config
from prbench_plugin_gpo.errors import GPOError
from prbench_plugin_gpo.network import (
    Episode,
    NetConfig,
    attention_allowed,
    build_network,
    collate,
    parameter_count,
)
from prbench_plugin_gpo.optimise import optimiser, pair_loss
from prbench_plugin_gpo.swap import derangement
from prbench_plugin_gpo.train import main
from prbench_plugin_gpo.train_prefs import train_on_preferences

from prbench.api import PrbenchUserError, ScoreRequest, load_records
from prbench.testing import PluginRegistry

TOPICS = ["tea", "bikes", "chess", "bread", "maps", "birds", "clay", "jazz"]


def write_preferences(path: Path, users: list[str], *, pairs: int = 10, held: int = 2) -> Path:
    """A preference file: per user ``held`` records, each with the user's ``pairs`` labelled pairs.

    Each user prefers answers about their own topic; the held-out pairs follow the same taste.
    """
    rows = []
    for u_i, user in enumerate(users):
        topic, other = TOPICS[u_i % len(TOPICS)], TOPICS[(u_i + 3) % len(TOPICS)]
        prefs = [{"question": f"What should {user} try next, idea {k}?",
                  "chosen": f"Something with {topic}, variant {k}.",
                  "rejected": f"Something with {other}, variant {k}."} for k in range(pairs)]
        for h in range(held):
            rows.append({
                "id": f"{user}-held-{h}", "user_id": user,
                "question": f"A new plan {h} for {user}?", "profile": [],
                "chosen": f"A plan about {topic} number {h}.",
                "rejected": f"A plan about {other} number {h}.", "category": "hobby",
                "domain": "Prefs", "preferences": prefs,
            })
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def fake_embed(texts):
    import hashlib

    return np.stack([np.random.default_rng(int(hashlib.sha256(t.encode()).hexdigest()[:8], 16))
                     .standard_normal(16).astype(np.float32) for t in texts])


# -- config=paper --------------------------------------------------------------------------------


def test_paper_config_fixes_the_published_settings() -> None:
    paper = make_config("paper", steps=10)
    assert (paper.d_model, paper.layers, paper.heads) == (128, 6, 4)
    assert (paper.mask, paper.optimizer, paper.lr, paper.schedule) == (
        "context-only", "adam", 3e-4, "cosine")
    assert TrainConfig() == make_config("small")  # the default is the small config
    assert TrainConfig(**dataclasses.asdict(paper)) == paper  # a checkpoint's config reloads
    with pytest.raises(ValueError, match=r"drop d_model=64 \(paper: 128\)"):
        make_config("paper", d_model=64)
    with pytest.raises(ValueError, match="config=paper fixes"):
        TrainConfig(config="paper")  # the small values under the paper's name
    assert make_config("small", layers=3).layers == 3  # the small config may be tuned


def _paper_net(dim_in: int):
    keys = ("d_model", "layers", "heads", "mask", "arch", "dim_feedforward")
    return build_network(NetConfig(dim_in, **{k: PRESETS["paper"][k] for k in keys}))


def test_paper_network_is_the_one_of_gpo_yaml() -> None:
    from torch import nn

    d, dim_in, ff = 128, 384, 128  # gpo.yaml: d_model 128, dim_feedforward 128, emb_depth 4
    net = _paper_net(dim_in)
    # the input MLP over [x; y]: 4 linear layers, ReLU between them
    linears = [m for m in net.embedder if isinstance(m, nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(dim_in + 1, d)] + [(d, d)] * 3
    assert sum(isinstance(m, nn.ReLU) for m in net.embedder) == 3
    # 6 encoder layers, 4 heads, feed-forward 128, ReLU, no dropout
    layer = net.encoder.layers[0]
    assert len(net.encoder.layers) == 6 and layer.self_attn.num_heads == 4
    assert (layer.linear1.out_features, layer.dropout.p) == (ff, 0.0)
    # the head: linear, ReLU, linear to a mean and a standard deviation
    head = list(net.predictor)
    assert isinstance(head[1], nn.ReLU) and (head[0].out_features, head[2].out_features) == (ff, 2)
    per_layer = (3 * d * d + 3 * d) + (d * d + d) + (d * ff + ff) + (ff * d + d) + 4 * d
    expected = ((dim_in + 1) * d + d) + 3 * (d * d + d) + 6 * per_layer + (d * ff + ff) \
        + (ff * 2 + 2)
    assert parameter_count(net) == expected == 713218
    assert make_config("paper").max_length is None  # options embedded without prbench's limit


def test_paper_loss_is_gpos_gaussian_objective() -> None:
    import torch

    torch.manual_seed(0)
    config = make_config("paper", steps=1)
    net = build_network(NetConfig(6, 16, 1, 2, "context-only", arch="tnp",
                                  dim_feedforward=8)).eval()
    vectors = np.random.default_rng(1).standard_normal((9, 6)).astype(np.float32)
    episodes = [Episode([0, 1], [1, 0], [2, 3, 4, 5]), Episode([6], [1], [7, 8])]
    batch = collate(episodes, vectors, "cpu")
    mean, std = (t.detach().numpy() for t in net.mean_std(*batch))
    assert np.allclose(net(*batch).detach().numpy(), mean) and (std > 0).all()
    expected = []
    for e, n_pairs in enumerate([2, 1]):
        total = 0.0
        for k in range(n_pairs):
            m = mean[e, 2 * k : 2 * k + 2]
            value = np.exp(m) / np.exp(m).sum()  # softmax over the pair's two means
            for label, v, s in zip((1.0, 0.0), value, std[e, 2 * k : 2 * k + 2], strict=True):
                total += -0.5 * ((label - v) / s) ** 2 - np.log(s) - 0.5 * np.log(2 * np.pi)
        expected.append(total)
    got = pair_loss(net, batch, torch.tensor([2, 1]), config)
    assert math.isclose(float(got), -float(np.mean(expected)), rel_tol=1e-5)
    small = pair_loss(net, batch, torch.tensor([2, 1]), make_config("small"))
    bt = [np.logaddexp(0, mean[0, 1] - mean[0, 0]), np.logaddexp(0, mean[0, 3] - mean[0, 2]),
          np.logaddexp(0, mean[1, 1] - mean[1, 0])]
    assert math.isclose(float(small), float(np.mean(bt)), rel_tol=1e-5)  # Bradley-Terry


def test_paper_optimiser_is_adam_with_cosine_decay() -> None:
    import torch

    config = make_config("paper", steps=10)
    net = _paper_net(8)
    opt, schedule = optimiser(net, config)
    assert type(opt) is torch.optim.Adam and opt.defaults["lr"] == 3e-4
    rates = []
    for _ in range(10):
        opt.step()
        schedule.step()
        rates.append(opt.param_groups[0]["lr"])
    assert math.isclose(rates[4], 1.5e-4, rel_tol=1e-6) and rates[-1] < 1e-12
    small_opt, small_schedule = optimiser(net, make_config("small"))
    assert type(small_opt) is torch.optim.AdamW and small_schedule is None


@pytest.mark.parametrize("mask", ["context-only", "target-self"])
def test_targets_attend_to_the_context_only(mask: str) -> None:
    import torch

    torch.manual_seed(0)
    net = build_network(NetConfig(8, 16, 2, 2, mask)).eval()
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((12, 8)).astype(np.float32)
    episode = Episode(ctx=[0, 1, 2, 3], ctx_labels=[1, 0, 1, 0], targets=[4, 5, 6])
    base = net(*collate([episode], vectors, "cpu"))[0]
    changed = vectors.copy()
    changed[5] = rng.standard_normal(8)  # a new input for target 1 only
    after = net(*collate([episode], changed, "cpu"))[0]
    assert torch.allclose(base[[0, 2]], after[[0, 2]], atol=1e-6)  # the others do not move
    assert not torch.allclose(base[1], after[1])
    ctx_changed = vectors.copy()
    ctx_changed[2] = rng.standard_normal(8)  # a context point moves every target
    moved = net(*collate([episode], ctx_changed, "cpu"))[0]
    assert not torch.isclose(base, moved).any()
    # the mask itself: targets see the valid context (and themselves only under target-self)
    valid = torch.tensor([[True, True, False]])
    allowed = attention_allowed(valid, 2, mask)[0].tolist()
    own = mask == "target-self"
    assert allowed[3] == [True, True, False, own, False]
    assert allowed[4] == [True, True, False, False, own]
    assert allowed[0] == [True, True, False, False, False]  # context sees the context only
    # an episode without any context still gives finite scores
    empty = net(*collate([Episode(ctx=[], ctx_labels=[], targets=[4])], vectors, "cpu"))
    assert torch.isfinite(empty).all()


# -- the causal-LM embedder ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from prbench.testing import build_tiny_causal_lm

    return build_tiny_causal_lm(tmp_path_factory.mktemp("lm") / "tiny", arch="llama")


def test_causal_lm_mean_pools_the_last_hidden_state(tiny_lm: Path, tmp_path: Path) -> None:
    import torch
    from prbench_plugin_gpo.config import make_encoder
    from transformers import AutoModelForCausalLM, AutoTokenizer

    config = make_config(embedder="causal-lm-mean", model=str(tiny_lm))
    enc = make_encoder(config, device="cpu", batch_size=4, cache_dir=str(tmp_path))
    short, long = "tea and bikes", "a much longer text about chess, bread, maps and birds " * 3
    alone = enc.embed([short])
    batched = enc.embed([long, short])  # padded to the long text: the short one must not move
    assert np.allclose(alone[0], batched[1], atol=1e-5)
    tok = AutoTokenizer.from_pretrained(tiny_lm, trust_remote_code=False)
    model = AutoModelForCausalLM.from_pretrained(tiny_lm, trust_remote_code=False)
    with torch.inference_mode():
        hidden = model(**tok([short], return_tensors="pt"), output_hidden_states=True)
    assert np.allclose(alone[0], hidden.hidden_states[-1][0].mean(0).numpy(), atol=1e-5)
    # through the cache: the second call runs no model
    first = enc.encode([short, long])
    enc.embed = lambda texts: pytest.fail("recomputed a cached text")  # type: ignore[method-assign]
    assert np.array_equal(enc.encode([long, short]), first[::-1])
    info = enc.describe()
    assert info["encoder"] == "causal-lm-mean" and info["fingerprint"].startswith("dir:")
    assert info["trust_remote_code"] is False


# -- --train files --------------------------------------------------------------------------------


def test_train_file_training_uses_every_user_and_is_seeded(tmp_path: Path) -> None:
    users = [f"u{i}" for i in range(6)]
    records = load_records(str(write_preferences(tmp_path / "train.jsonl", users)))
    config = make_config(steps=3, batch_users=4, d_model=16, layers=1, heads=2, context_pairs=4)
    ckpt = train_on_preferences(records, config, fake_embed, progress=False)
    assert ckpt["mode"] == "train-file" and ckpt["train_users"] == users
    assert ckpt["n_train_pairs"] == 6 * (10 + 2)  # preferences and held-out pairs alike
    again = train_on_preferences(records, config, fake_embed, progress=False)
    state, same = ckpt["folds"][0]["state_dict"], again["folds"][0]["state_dict"]
    assert all(np.array_equal(state[k].numpy(), same[k].numpy()) for k in state)  # seeded
    solo = write_preferences(tmp_path / "solo.jsonl", ["solo"], pairs=3, held=1)
    with pytest.raises(ValueError, match=r"solo\.jsonl: 1 user; meta-training needs at least 2"):
        train_on_preferences(load_records(str(solo)), config, fake_embed, source=str(solo),
                             progress=False)


@pytest.fixture(scope="module")
def train_file_checkpoint(tiny_lm: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("gpo_train_file")
    train = write_preferences(root / "train.jsonl", [f"t{i}" for i in range(6)])
    evaluated = write_preferences(root / "eval" / "prefs.jsonl", [f"e{i}" for i in range(6)])
    out, emb = root / "gpo.pt", root / "emb"
    code = main(["train", "--train", str(train), "--out", str(out), "--config", "paper",
                 "--steps", "4", "--batch-users", "3", "--embedder", "causal-lm-mean",
                 "--model", str(tiny_lm), "--device", "cpu", "--embed-cache-dir", str(emb),
                 "--no-progress"])
    assert code == 0
    return out, emb, train, evaluated


def _scorer(ckpt: Path, emb: Path, data: Path, **extra):
    return PluginRegistry().build("scorer", "gpo", {
        "checkpoint": str(ckpt), "embed_cache_dir": str(emb), "device": "cpu",
        "preferences_data": str(data), "swap_resamples": 200, **extra})


def test_train_file_checkpoint_scores_other_users_and_refuses_overlap(train_file_checkpoint,
                                                                      capsys) -> None:
    ckpt, emb, train, evaluated = train_file_checkpoint
    assert main(["info", str(ckpt)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["mode"] == "train-file" and info["config"]["config"] == "paper"
    assert info["trained_on"].startswith("trained on train file sha256:")
    assert info["net"]["mask"] == "context-only" and info["embedder"]["encoder"] == "causal-lm-mean"
    rm = _scorer(ckpt, emb, evaluated, config="paper")  # the checkpoint's config, checked
    with pytest.raises(ValueError, match="config=small asked for, but the checkpoint was trained "
                                         "with config=paper"):
        _scorer(ckpt, emb, evaluated, config="small")
    rec = load_records(str(evaluated))[0]
    req = ScoreRequest(rec.id, rec.question, rec.chosen)
    assert math.isclose(rm.score([req])[0], rm.score([ScoreRequest(rec.id, rec.question,
                                                                   rec.rejected), req])[1],
                        rel_tol=1e-5, abs_tol=1e-6)  # independent of the batch
    assert rm.describe()["mode"] == "train-file" and rm.describe()["user_overlap"] == []
    # the training users themselves are refused, named, unless asked for
    with pytest.raises(GPOError, match=r"6 user\(s\) of .*train.jsonl are among the "
                                       r"checkpoint's training users .*: 't0', 't1'"):
        _scorer(ckpt, emb, train)
    overlap = _scorer(ckpt, emb, train, allow_user_overlap=True)
    assert overlap.describe()["user_overlap"] == [f"t{i}" for i in range(6)]
    assert any("WARNING 6 evaluated user(s) were training users, 72 evaluated pair(s) were "
               "training pairs (allow_user_overlap=true); 12 evaluated record(s) were training "
               "records, their pairs trained on" in line
               for line in overlap.stats()["diagnostics"])
    assert len(overlap.describe()["trained_records"]) == 12
    # a --train checkpoint needs the evaluated users' preferences; a record outside them fails
    with pytest.raises(ValueError, match="pass preferences_data="):
        PluginRegistry().build("scorer", "gpo", {"checkpoint": str(ckpt), "device": "cpu",
                                                 "embed_cache_dir": str(emb)})
    with pytest.raises(ValueError, match="'nobody' is not in preferences_data"):
        rm.score([ScoreRequest("nobody", "q", "a")])
    # a context holding the very pair being scored is a leak, refused
    pref = rec.extra["preferences"][0]
    with pytest.raises(ValueError, match="contain the pair being scored"):
        rm.score([ScoreRequest(rec.id, pref["question"], pref["chosen"])])


def _rewrite(src: Path, dst: Path, edit) -> Path:
    rows = [json.loads(line) for line in src.read_text().splitlines()]
    dst.write_text("".join(json.dumps(edit(r)) + "\n" for r in rows))
    return dst


def test_overlap_check_normalises_ids_and_hashes_pairs(train_file_checkpoint, tmp_path) -> None:
    ckpt, emb, train, _ = train_file_checkpoint
    # the training users under upper-cased, padded ids: the same users
    upper = _rewrite(train, tmp_path / "upper.jsonl",
                     lambda r: {**r, "id": r["id"] + "-u", "user_id": f" {r['user_id'].upper()} "})
    with pytest.raises(GPOError, match=r"6 user\(s\) .* are among the checkpoint's training "
                                       r"users .*' T0 '") as err:
        _scorer(ckpt, emb, upper)
    assert isinstance(err.value, PrbenchUserError) and "\n" not in str(err.value)
    # new user ids, but the training pairs themselves: refused by content
    renamed = _rewrite(train, tmp_path / "renamed.jsonl",
                       lambda r: {**r, "id": r["id"] + "-r", "user_id": "new-" + r["user_id"]})
    with pytest.raises(GPOError, match=r"^gpo: \d+ pair\(s\) of .*renamed.jsonl are training "
                                       r"pairs \(same question and answers\)"):
        _scorer(ckpt, emb, renamed)
    forced = _scorer(ckpt, emb, renamed, allow_user_overlap=True)
    assert forced.describe()["shared_training_pairs"] == 72  # 6 users x (10 + 2 held out)
    assert any("72 evaluated pair(s) were training pairs" in line
               for line in forced.stats()["diagnostics"])


class Unsafe:
    """An object a checkpoint must not carry: unpickling it would import and build it."""


def test_unsafe_or_foreign_checkpoints_are_one_error_line(tmp_path: Path) -> None:
    import torch

    unsafe = tmp_path / "unsafe.pt"
    torch.save({"format": "prbench-gpo/3", "folds": [Unsafe()]}, unsafe)
    with pytest.raises(GPOError, match="objects that would run code when loaded") as err:
        load_checkpoint(unsafe)
    assert isinstance(err.value, PrbenchUserError) and "\n" not in str(err.value)
    old = tmp_path / "old.pt"
    torch.save({"format": "prbench-gpo/2", "folds": [{}]}, old)
    with pytest.raises(GPOError, match=r"not a prbench-gpo/3 checkpoint .*it is prbench-gpo/2"):
        load_checkpoint(old)
    with pytest.raises(PrbenchUserError, match="cannot read checkpoint"):
        PluginRegistry().build("scorer", "gpo", {"checkpoint": str(unsafe), "device": "cpu"})


def test_derangement_never_keeps_a_user() -> None:
    users = [f"u{i}" for i in range(7)]
    partner = derangement(users, 0, "g")
    assert sorted(partner) == users and sorted(partner.values()) == users
    assert all(partner[u] != u for u in users)
    assert derangement(list(reversed(users)), 0, "g") == partner  # seeded, order-free
    assert derangement(users, 1, "g") != partner
    with pytest.raises(ValueError, match="at least 2 users"):
        derangement(["solo"], 0, "g")


def test_context_swap_rescores_each_pair_with_its_partners_context(train_file_checkpoint) -> None:
    from prbench.api import pair_outcome

    ckpt, emb, _, evaluated = train_file_checkpoint
    rm = _scorer(ckpt, emb, evaluated)
    records = load_records(str(evaluated))
    requests = [ScoreRequest(r.id, r.question, a) for r in records for a in (r.chosen, r.rejected)]
    scores = rm.score(requests)
    own = [pair_outcome(c, r).correct for c, r in zip(scores[::2], scores[1::2], strict=True)]
    stats = rm.stats()
    (swap,) = stats["context_swap"]
    assert swap["group"] == "preferences" and swap["n_pairs"] == 12 and swap["n_users"] == 6
    assert swap["acc_own"] == sum(own) / 12
    # the swapped score of a pair is its answers scored under the partner's first record
    partner = derangement(sorted({r.extra["user_id"] for r in records}), 0, "preferences")
    first = {}
    for r in sorted(records, key=lambda r: r.id):
        first.setdefault(r.extra["user_id"], r.id)
    swapped = []
    for r in records:
        donor = first[partner[r.extra["user_id"]]]
        c, j = rm.score([ScoreRequest(donor, r.question, r.chosen),
                         ScoreRequest(donor, r.question, r.rejected)])
        swapped.append(pair_outcome(c, j).correct)
    assert math.isclose(swap["acc_swapped"], sum(swapped) / 12)
    assert math.isclose(swap["drop"]["value"], swap["acc_own"] - swap["acc_swapped"])
    assert swap["drop"]["low"] <= swap["drop"]["value"] <= swap["drop"]["high"]
    assert swap["drop"]["resamples"] == 200
    lines = stats["diagnostics"]
    assert lines[0].startswith("gpo: trained on train file sha256:")
    assert lines[1].startswith("gpo context-swap [preferences]: acc ")
    assert "(paired bootstrap, 200 resamples, seed 0)" in lines[1]
    off = _scorer(ckpt, emb, evaluated, context_swap=False)
    off.score(requests[:2])
    assert off.stats()["context_swap"] == []


def test_scores_never_read_the_evaluated_labels(train_file_checkpoint, tmp_path: Path) -> None:
    # the evaluated file carries each held-out pair's label; swapping every label leaves every
    # score as it was (labels reach only the context-swap diagnostic's accuracy)
    ckpt, emb, _, evaluated = train_file_checkpoint
    rows = [json.loads(line) for line in evaluated.read_text().splitlines()]
    for row in rows:
        row["chosen"], row["rejected"] = row["rejected"], row["chosen"]
    swapped = tmp_path / "swapped.jsonl"
    swapped.write_text("".join(json.dumps(r) + "\n" for r in rows))
    records = load_records(str(evaluated))
    requests = [ScoreRequest(r.id, r.question, a) for r in records for a in (r.chosen, r.rejected)]
    a = _scorer(ckpt, emb, evaluated)
    b = _scorer(ckpt, emb, swapped)
    assert a.score(requests) == b.score(requests)
    assert a.fingerprint() == b.fingerprint()


@pytest.mark.slow
def test_preference_fixture_end_to_end(tiny_lm: Path, tmp_path: Path, capsys) -> None:
    """Train on two domain files of the bundled fixture, evaluate the third one's users."""
    import os
    import shutil
    import subprocess
    import sys

    from prbench.api import PREFERENCES_SAMPLE_DIR
    from prbench.testing import run_cli

    train_dir = tmp_path / "train"
    train_dir.mkdir()
    for name in ("Home_and_Cooking.jsonl", "Wellbeing_and_Travel.jsonl"):
        shutil.copy(PREFERENCES_SAMPLE_DIR / name, train_dir / name)
    evaluated = PREFERENCES_SAMPLE_DIR / "Technology_and_Study.jsonl"
    ckpt, emb = tmp_path / "gpo.pt", tmp_path / "emb"
    assert main(["train", "--train", str(train_dir), "--out", str(ckpt), "--config", "paper",
                 "--steps", "5", "--batch-users", "4", "--embedder", "causal-lm-mean",
                 "--model", str(tiny_lm), "--device", "cpu", "--embed-cache-dir", str(emb),
                 "--no-progress"]) == 0
    capsys.readouterr()
    model_args = (f"scorer=gpo,checkpoint={ckpt},preferences_data={evaluated},"
                  f"embed_cache_dir={emb},swap_resamples=300")
    metadata = json.dumps({"prbench_data": str(evaluated)})
    code = run_cli(["eval", "--tasks", "personalized_rewardbench_custom", "--device", "cpu",
                         "--metadata", metadata, "--model_args", model_args,
                         "--output_path", str(tmp_path / "out")])
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    summary = out[out.index("prbench summary: scorer gpo"):]
    assert "\n  gpo: trained on train file sha256:" in summary
    assert "(4 users, 48 labelled pairs)" in summary  # pu01-pu04: 9 + 3 pairs each
    line = next(x for x in summary.splitlines() if "gpo context-swap [preferences]" in x)
    assert "(6 pairs, 2 users, seeded derangement)" in line and "paired bootstrap, 300" in line
    results = json.loads(next((tmp_path / "out").rglob("results_*.json")).read_text())
    stats = results["config"]["prbench"]["scorer"]["stats"]
    assert stats["context_swap"][0]["n_pairs"] == 6 and stats["diagnostics"][1] == line.strip()
    acc = results["results"]["personalized_rewardbench_custom"]["acc,none"]
    assert math.isclose(stats["context_swap"][0]["acc_own"], acc)  # the same pairs, same scores
    # plain lm_eval: the same run, the diagnostic in the results (and manifest) it writes
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "lm_eval", "--tasks", "personalized_rewardbench_custom",
         "--model", "prbench", "--device", "cpu", "--metadata", metadata, "--model_args",
         model_args + ",cache=false", "--output_path", str(tmp_path / "plain")],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    plain = json.loads(next((tmp_path / "plain").rglob("results_*.json")).read_text())
    plain_stats = plain["config"]["prbench"]["scorer"]["stats"]
    assert plain_stats["diagnostics"][1] == line.strip()  # seeded: the very same line
    manifest = next((tmp_path / "plain").rglob("prbench_manifest_*.json")).read_text()
    assert "gpo context-swap [preferences]" in manifest


def test_context_swap_keeps_each_folds_own_points_and_averages_folds() -> None:
    from prbench_plugin_gpo.swap import ContextSwap, Unit

    def run(fold, episodes, vectors):  # a stand-in network: context mean . target + fold
        out = []
        for e in episodes:
            ctx = vectors[e.ctx].mean(axis=0)
            out.append([float(ctx @ vectors[t]) + fold for t in e.targets])
        return out

    swap = ContextSwap(seed=0, resamples=100)
    dim = 2
    users = {"a": [1.0, 0.0], "b": [0.0, 1.0], "c": [-1.0, 0.0]}
    answers = {"good": np.array([1.0, 0.0]), "bad": np.array([0.0, 1.0])}
    for user, own in users.items():
        # fold 0's own point pulls towards "good", fold 1's towards "bad": only their mean is right
        fixed = {0: (np.array([[6.0, 0.0]]), [0]), 1: (np.array([[0.0, 2.0]]), [0])}
        unit = Unit(user=user, folds=[0, 1], own_x=np.array([own]), own_y=[1], fixed=fixed)
        for name, vec in answers.items():
            score = float(np.mean([np.vstack([own, fixed[f][0][0]]).mean(0) @ vec + f
                                   for f in (0, 1)]))
            swap.add("g", f"r-{user}", unit, name, vec.reshape(dim), score)
    labels = {f"r-{u}": ("good", "bad") for u in users}
    (result,) = swap.compute(labels, run)
    partner = derangement(list(users), 0, "g")

    def expected(user: str) -> float:
        donor = np.array(users[partner[user]])
        diff = [np.vstack([donor, f]).mean(0) @ (answers["good"] - answers["bad"])
                for f in ([6.0, 0.0], [0.0, 2.0])]
        return float(np.mean(diff) > 0)

    assert result["acc_own"] == 1.0
    assert result["acc_swapped"] == sum(expected(u) for u in users) / 3 == 1.0  # fold 1 alone: 0
    assert result["n_pairs"] == 3 and result["n_users"] == 3
    lonely = ContextSwap()
    lonely.add("g", "r1", Unit("a", [0], np.zeros((1, 2)), [1], {0: (np.zeros((0, 2)), [])}),
               "good", answers["good"], 1.0)
    assert lonely.compute({"r1": ("good", "bad")}, run)[0]["skipped"]
