"""Tests of the GPO plugin: folds, no training on evaluated pairs, the scorer, the CLI, lm-eval."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from prbench_plugin_gpo.context import assign_folds, user_key
from prbench_plugin_gpo.train import TrainConfig, main, train_gpo

from prbench.api import OptionsError, ProfileView, ScoreRequest, load_records
from prbench.testing import PluginRegistry


def fake_embed(texts):
    """Deterministic 16-d vectors from each text's hash (no model needed)."""
    rows = []
    for t in texts:
        seed = int(hashlib.sha256(t.encode()).hexdigest()[:8], 16)
        rows.append(np.random.default_rng(seed).standard_normal(16).astype(np.float32))
    return np.stack(rows)


SMALL = TrainConfig(folds=3, steps=6, batch_users=4, context_posts=3, negatives=3, d_model=16,
                    layers=1, heads=2, seed=3)


@pytest.fixture(scope="module")
def records():
    return load_records("sample")


def test_folds_split_users_disjointly(records) -> None:
    keys = [user_key(r) for r in records]
    folds = assign_folds(keys, 3, seed=0)
    assert sorted(set(folds.values())) == [0, 1, 2]
    assert assign_folds(reversed(keys), 3, seed=0) == folds  # order of the data is irrelevant
    assert assign_folds(keys, 3, seed=1) != folds
    with pytest.raises(ValueError, match="at least 2"):
        assign_folds(keys, 1, seed=0)
    with pytest.raises(ValueError, match="cannot be split"):
        assign_folds(keys[:2], 3, seed=0)


def test_user_id_field_groups_records(records) -> None:
    a = dataclasses.replace(records[0], extra={"user_id": "u1"})
    b = dataclasses.replace(records[1], extra={"user_id": "u1"})
    assert user_key(a) == user_key(b) == "u1"
    assert user_key(records[2]) == records[2].id
    # prbench's rule (prbench.api.Record.user): a number is its text, a blank is no user
    assert user_key(dataclasses.replace(records[0], extra={"user_id": 3})) == "3"
    assert user_key(dataclasses.replace(records[0], extra={"user_id": " "})) == records[0].id


def test_checkpoint_never_trains_on_the_pairs_it_evaluates(records) -> None:
    ckpt = train_gpo(records, SMALL, fake_embed, progress=False)
    all_ids = {r.id for r in records}
    evaluated: set[str] = set()
    for fold in ckpt["folds"]:
        train, held_out = set(fold["train_ids"]), set(fold["eval_ids"])
        assert train.isdisjoint(held_out)
        assert train | held_out == all_ids
        assert held_out.isdisjoint(fold["train_users"])  # one record per user here
        evaluated |= held_out
    assert evaluated == all_ids  # every record is scored by exactly one held-out network


def _weights(ckpt, fold):
    return next(f["state_dict"] for f in ckpt["folds"] if f["fold"] == fold)


def _same(a, b) -> bool:
    import torch

    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_poisoning_evaluated_pairs_does_not_change_the_weights(records) -> None:
    base = train_gpo(records, SMALL, fake_embed, progress=False, only_folds=[0])
    held_out = set(base["folds"][0]["eval_ids"])
    # swap the labels (and rewrite the posts) of every record fold 0 evaluates
    poisoned = [
        dataclasses.replace(r, chosen=r.rejected, rejected=r.chosen,
                            profile=tuple(dataclasses.replace(p, text="poison " + p.text)
                                          for p in r.profile))
        if r.id in held_out else r
        for r in records
    ]
    again = train_gpo(poisoned, SMALL, fake_embed, progress=False, only_folds=[0])
    assert _same(_weights(base, 0), _weights(again, 0))
    # the control: poisoning one TRAINING record does change fold 0's weights
    victim = next(r.id for r in records if r.id not in held_out)
    control = [dataclasses.replace(r, chosen=r.rejected, rejected=r.chosen)
               if r.id == victim else r for r in records]
    changed = train_gpo(control, SMALL, fake_embed, progress=False, only_folds=[0])
    assert not _same(_weights(base, 0), _weights(changed, 0))


def test_training_is_seeded(records) -> None:
    a = train_gpo(records, SMALL, fake_embed, progress=False, only_folds=[1])
    b = train_gpo(records, SMALL, fake_embed, progress=False, only_folds=[1])
    c = train_gpo(records, dataclasses.replace(SMALL, seed=4), fake_embed, progress=False,
                  only_folds=[1])
    assert _same(_weights(a, 1), _weights(b, 1))
    assert not _same(_weights(a, 1), _weights(c, 1))


def test_bad_configs_and_options_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="multiple of heads"):
        TrainConfig(d_model=10, heads=4)
    with pytest.raises(OptionsError, match="checkpoint="):
        PluginRegistry().build("scorer", "gpo", {})
    with pytest.raises(OptionsError, match="does not exist"):
        PluginRegistry().build("scorer", "gpo", {"checkpoint": str(tmp_path / "none.pt")})
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="cannot read checkpoint"):
        PluginRegistry().build("scorer", "gpo", {"checkpoint": str(junk)})


# -- end to end with the bundled MiniLM embedder -------------------------------------------------


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("gpo")
    out, emb = root / "gpo.pt", root / "emb"
    code = main(["train", "--data", "sample", "--out", str(out), "--folds", "3", "--steps", "40",
                 "--device", "cpu", "--embed-cache-dir", str(emb), "--no-progress"])
    assert code == 0 and out.is_file()
    return out, emb


@pytest.mark.slow
def test_scorer_uses_the_fold_that_held_the_record_out(trained, records) -> None:
    ckpt_path, emb = trained
    options = {"checkpoint": str(ckpt_path), "embed_cache_dir": str(emb), "device": "cpu"}
    rm = PluginRegistry().build("scorer", "gpo", options)
    rec = records[0]
    req = ScoreRequest(rec.id, rec.question, rec.chosen)
    others = [ScoreRequest(r.id, r.question, r.rejected) for r in records[1:4]]
    alone = rm.score([req])
    batched = rm.score([*others, req])
    assert math.isclose(alone[0], batched[-1], rel_tol=1e-4, abs_tol=1e-5)
    assert rm.describe()["counts"]["by_fold_network"] == 5
    # the view's posts are the preferred context; a view with text but no posts gives its text
    with_posts = ScoreRequest(rec.id, rec.question, rec.chosen,
                              ProfileView(text="posts", items=rec.profile[:3]))
    text_only = ScoreRequest(rec.id, rec.question, rec.chosen, ProfileView(text="I knit socks."))
    scores = rm.score([with_posts, text_only])
    assert len({alone[0], *scores}) == 3
    # a record id the checkpoint never saw: the fold ensemble, or an error when asked
    unseen = ScoreRequest("not-in-data", rec.question, rec.chosen)
    assert math.isfinite(rm.score([unseen])[0])
    assert rm.describe()["counts"]["unseen_ensemble"] == 1
    strict = PluginRegistry().build("scorer", "gpo", {**options, "unseen": "error"})
    with pytest.raises(ValueError, match="not in the checkpoint's training data"):
        strict.score([unseen])
    assert len(rm.fingerprint()) >= 32 and rm.fingerprint() != strict.fingerprint()


@pytest.mark.slow
def test_prbench_eval_and_info(trained, tmp_path: Path, capsys) -> None:
    from prbench.testing import run_cli

    ckpt_path, emb = trained
    assert main(["info", str(ckpt_path)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["format"] == "prbench-gpo/3" and len(info["folds"]) == 3
    assert info["mode"] == "kfold" and info["trained_on"].startswith("trained on benchmark pairs")
    code = run_cli([
        "eval", "--tasks", "personalized_rewardbench_sample", "--device", "cpu", "--model_args",
        f"scorer=gpo,checkpoint={ckpt_path},embed_cache_dir={emb}",
        "--output_path", str(tmp_path / "out"),
    ])
    out = capsys.readouterr().out
    assert code == 0, out[-2000:]
    # the summary says how the checkpoint was trained and how much the user's context matters
    assert "\n  gpo: trained on benchmark pairs, k-fold (3 folds over users;" in out
    swap_line = next(x for x in out.splitlines() if "gpo context-swap [profile " in x)
    assert "(45 pairs, 45 users, seeded derangement)" in swap_line
    results_file = next((tmp_path / "out").rglob("results_*.json"))
    manifest = results_file.with_name(results_file.name.replace("results_", "prbench_manifest_"))
    assert manifest.exists()
    results = json.loads(results_file.read_text())
    group = results["results"]["personalized_rewardbench_sample"]
    print("gpo sample acc (MiniLM, 3 folds x 40 steps):", group["acc,none"])
    assert 0.0 <= group["acc,none"] <= 1.0
    scorer = results["config"]["prbench"]["scorer"]
    assert scorer["id"] == "gpo"
    described = scorer["runtime"]["scorer"]
    assert described["counts"]["by_fold_network"] == 90  # every answer, by its held-out network
    assert described["checkpoint_sha256"] and described["config"]["folds"] == 3
    assert described["trained_on"].startswith("trained on benchmark pairs, k-fold")
    (swap,) = scorer["stats"]["context_swap"]
    assert swap["n_pairs"] == 45 and math.isclose(swap["acc_own"], group["acc,none"])


@pytest.mark.slow
def test_plain_lm_eval(trained, tmp_path: Path) -> None:
    ckpt_path, emb = trained
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "lm_eval", "--tasks", "personalized_rewardbench_sample_noprofile",
         "--model", "prbench", "--device", "cpu", "--model_args",
         f"scorer=gpo,checkpoint={ckpt_path},embed_cache_dir={emb}",
         "--output_path", str(tmp_path / "out")],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    results_file = next((tmp_path / "out").rglob("results_*.json"))
    results = json.loads(results_file.read_text())
    assert list(results_file.parent.glob("prbench_manifest_*.json"))  # written by plain lm_eval too
    scorer = results["config"]["prbench"]["scorer"]
    assert scorer["id"] == "gpo" and scorer["runtime"]["scorer"]["checkpoint_sha256"]
    assert "personalized_rewardbench_sample_noprofile" in results["results"]


def test_train_command_reports_bad_input(tmp_path: Path, capsys) -> None:
    out = tmp_path / "gpo.pt"
    assert main(["train", "--data", str(tmp_path / "missing"), "--out", str(out)]) == 2
    assert "prbench-gpo:" in capsys.readouterr().err and not out.exists()
    assert main(["train", "--data", "sample", "--out", str(out), "--folds", "3",
                 "--d-model", "10"]) == 2
    assert "multiple of heads" in capsys.readouterr().err
    # k-fold on the evaluated data must be asked for explicitly; --folds is not for --train
    assert main(["train", "--data", "sample", "--out", str(out)]) == 2
    assert "add --folds K" in capsys.readouterr().err
    assert main(["train", "--train", "sample", "--folds", "3", "--out", str(out)]) == 2
    assert "--folds is for --data" in capsys.readouterr().err
    # config=paper fixes its settings
    assert main(["train", "--data", "sample", "--folds", "3", "--config", "paper",
                 "--layers", "2", "--out", str(out)]) == 2
    assert "config=paper fixes the published settings; drop layers=2" in capsys.readouterr().err
    # a train file whose records carry no labelled preferences
    assert main(["train", "--train", "sample", "--out", str(out), "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: prbench-gpo: sample: 45 record(s) have no labelled")
    # an embedding model that is not there: one line, no traceback
    assert main(["train", "--train", "preferences_sample", "--out", str(out), "--embedder",
                 "causal-lm-mean", "--model", str(tmp_path / "no_model")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: prbench-gpo: model folder") and len(err.splitlines()) == 1
    assert not out.exists()
