"""Profile-source control conditions: swapped (seeded derangement), shuffled, none."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import pytest

from prbench.harness import profile_rows, task_options, task_rows, tasks
from prbench.options import OptionsError
from prbench.profiles.sources import (
    DEFAULT_SWAP_SEED,
    ProfileSourceError,
    apply_source,
    derangement,
    resolve_source,
    user_key,
)
from prbench.records import Record, load_records
from tests._harness_fixtures import (
    PYTHON,
    results_and_manifest,
    run_eval,
    subprocess_env,
    write_plugin,
)
from tests._records_fixtures import record, write_jsonl

SWAPPED = "personalized_rewardbench_sample_swapped"
ART_SWAPPED = "personalized_rewardbench_sample_art_and_entertainment_swapped"


@pytest.fixture(autouse=True)
def _fresh_task_state() -> None:
    tasks.reset()
    yield
    tasks.reset()


@pytest.mark.parametrize("n", [2, 3, 5, 17])
@pytest.mark.parametrize("seed", [0, 1, DEFAULT_SWAP_SEED])
def test_derangement_has_no_fixed_point_and_is_stable(n: int, seed: int) -> None:
    users = [f"u{i}" for i in range(n)]
    plan = derangement(users, seed, "D")
    assert all(plan[u] != u for u in users)
    assert sorted(plan.values()) == sorted(users)  # a permutation: every profile used once
    # the plan depends on the set of users, not on the order they come in
    assert derangement(list(reversed(users)), seed, "D") == plan


def test_derangement_of_one_user_is_a_clear_error() -> None:
    with pytest.raises(ProfileSourceError, match=r"domain 'Solo' has 1 user\(s\)"):
        derangement(["u1", "u1"], 0, "Solo")


def test_swapped_sample_never_gives_a_record_its_own_user() -> None:
    records = load_records("sample")
    first = apply_source(records, "swapped", k=5)
    again = apply_source(records, "swapped", k=5)
    assert [s.donor_id for s in first] == [s.donor_id for s in again]
    by_id = {r.id: r for r in records}
    for rec, src in zip(records, first, strict=True):
        donor = by_id[src.donor_id]
        assert user_key(donor) != user_key(rec) and donor.id != rec.id
        assert donor.domain == rec.domain
        assert src.record.profile == donor.profile
        # everything but the posts is the record's own (question, answers, hidden rubric)
        assert dataclasses.replace(src.record, profile=rec.profile) == rec
    other_seed = apply_source(records, "swapped", seed=7, k=5)
    assert [s.donor_id for s in other_seed] != [s.donor_id for s in first]


def _record(rid: str, domain: str, user: str | None, posts: int = 3) -> Record:
    base = load_records("sample")[0]
    return dataclasses.replace(base, id=rid, domain=domain, profile=base.profile[:posts],
                               extra={"user_id": user} if user else {})


def test_users_are_grouped_by_user_id() -> None:
    # two records of one user (same user_id, different posts) never get each other's posts
    recs = [_record(f"r{i}", "D", user, posts=1 + i) for i, user in enumerate("aabc")]
    out = apply_source(recs, "swapped", k=5)
    for rec, src in zip(recs, out, strict=True):
        assert src.profile_user != f"user:{rec.extra['user_id']}"
    # without user_id, records with the same posts are one user
    solo = [_record("s1", "Solo", None), _record("s2", "Solo", None)]
    with pytest.raises(ProfileSourceError, match="'Solo'"):
        apply_source(solo, "swapped", k=5)


def test_swap_depends_on_the_whole_domain_not_on_the_rows_scored() -> None:
    # build_rows draws the derangement from every record of the domain; --limit cuts later
    req = task_options.parse_request({
        "prbench_domain": "Art_and_Entertainment", "prbench_condition": "profile",
        "prbench_default_data": "sample", "prbench_default_profile_source": "swapped",
        "prbench_profile": "bm25",
    })
    assert (req.profile_source, req.swap_seed) == ("swapped", DEFAULT_SWAP_SEED)
    rows = task_rows.build_rows(req).to_pylist()
    expected = {s.record.id: s.donor_id for s in apply_source(load_records("sample"), "swapped",
                                                              k=5)}
    assert {r["id"]: r["profile_donor"] for r in rows} == {r["id"]: expected[r["id"]]
                                                          for r in rows}
    assert all(r["profile_source"] == "swapped" for r in rows)
    entry = profile_rows.PROVENANCE[-1]
    assert entry["profile_source"] == "swapped"
    assert entry["profile_swap_seed"] == DEFAULT_SWAP_SEED


def test_shuffled_keeps_k_random_own_posts() -> None:
    records = load_records("sample")
    first = apply_source(records, "shuffled", k=3)
    assert [s.record.profile for s in first] == [
        s.record.profile for s in apply_source(records, "shuffled", k=3)
    ]
    for rec, src in zip(records, first, strict=True):
        assert len(src.record.profile) == min(3, len(rec.profile))
        assert all(post in rec.profile for post in src.record.profile)
    # random draws, not always the first posts
    assert any(s.record.profile != r.profile[:3] for r, s in zip(records, first, strict=True))


def test_resolve_source() -> None:
    base = {"prbench_condition": "profile"}
    assert resolve_source(base) == "own"
    assert resolve_source({**base, "prbench_default_profile_source": "swapped"}) == "swapped"
    # the user's --metadata wins over the task variant's default
    assert resolve_source({**base, "prbench_default_profile_source": "swapped",
                           "prbench_profile_source": "shuffled"}) == "shuffled"
    # a question-only task is `none` whatever is asked
    assert resolve_source({"prbench_condition": "noprofile",
                           "prbench_profile_source": "swapped"}) == "none"
    with pytest.raises(OptionsError, match="did you mean 'swapped'"):
        resolve_source({**base, "prbench_profile_source": "swaped"})
    none = task_options.parse_request({"prbench_domain": "D", "prbench_condition": "profile",
                                "prbench_default_data": "sample",
                                "prbench_profile_source": "none"})
    assert (none.builder, none.profile_source) == ("none", "none")


def _samples(path: Path, task: str) -> list[dict]:
    (file,) = path.parent.glob(f"samples_{task}_*.jsonl")
    return [json.loads(line) for line in file.read_text().splitlines() if line]


def test_swapped_eval_is_stable_across_limit_and_reads_the_other_users_posts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plugin = write_plugin(tmp_path)
    donors = {}
    for limit in ("2", "4"):
        tasks.reset()
        code, out, err = run_eval(
            ["--plugin", str(plugin), "eval", "--tasks", ART_SWAPPED, "--limit", limit,
             "--model_args", "scorer=counting", "--metadata", '{"prbench_profile": "bm25"}',
             "--log_samples", "--output_path", str(tmp_path / limit)],
            capsys,
        )
        assert code == 0, err
        _, manifest, path = results_and_manifest(tmp_path / limit)
        rows = _samples(path, ART_SWAPPED)
        assert len(rows) == int(limit)
        by_id = {r.id: r for r in load_records("sample")}
        for row in rows:
            doc = row["doc"]
            assert doc["profile_source"] == "swapped" and doc["profile_status"] == "built"
            donor = by_id[doc["profile_donor"]]
            assert donor.id != doc["id"]
            # the view was retrieved from the other user's posts
            assert set(doc["profile_post_ids"]) <= {p.id for p in donor.profile}
            assert doc["profile_post_ids"]
            donors[doc["id"]] = donors.setdefault(doc["id"], doc["profile_donor"])
            assert donors[doc["id"]] == doc["profile_donor"]
        task = manifest["tasks"][ART_SWAPPED]
        assert (task["profile_source"], task["profile_swap_seed"]) == ("swapped",
                                                                       DEFAULT_SWAP_SEED)
        assert manifest["data"][0]["profile_source"] == "swapped"
        assert "[swapped profile: another user's posts, same domain]" in out
    assert len(donors) == 4


def test_single_user_domain_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "solo.jsonl"
    write_jsonl(data, [record(id="s1", domain="Solo"), record(id="s2", domain="Solo")])
    code, _, err = run_eval(
        ["eval", "--tasks", "personalized_rewardbench_custom", "--model_args", "scorer=length",
         "--metadata", json.dumps({"prbench_data": str(data),
                                   "prbench_profile_source": "swapped"})],
        capsys,
    )
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert code != 0 and len(lines) == 1, err
    assert "'Solo' has 1 user(s)" in lines[0]


@pytest.mark.slow
def test_plain_lm_eval_runs_the_shuffled_and_swapped_tasks(tmp_path: Path) -> None:
    """Plain ``lm_eval --model prbench`` with a scorer that reads the profile."""
    out = tmp_path / "out"
    shuffled = "personalized_rewardbench_sample_society_and_culture_shuffled"
    swapped = "personalized_rewardbench_sample_society_and_culture_swapped"
    proc = subprocess.run(
        [PYTHON, "-m", "lm_eval", "--model", "prbench",
         "--model_args", "scorer=embedding-similarity", "--tasks", f"{shuffled},{swapped}",
         "--metadata", '{"prbench_profile": "bm25", "prbench_profile_k": 2}',
         "--limit", "2", "--log_samples", "--output_path", str(out)],
        env=subprocess_env(), cwd=tmp_path, capture_output=True, text=True, timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (path,) = sorted(out.rglob("results_*.json"))
    by_id = {r.id: r for r in load_records("sample")}
    for row in _samples(path, shuffled):
        doc = row["doc"]
        assert doc["profile_source"] == "shuffled" and doc["profile_status"] == "built"
        assert len(doc["profile_post_ids"]) == 2
        assert set(doc["profile_post_ids"]) <= {p.id for p in by_id[doc["id"]].profile}
    for row in _samples(path, swapped):
        doc = row["doc"]
        assert doc["profile_source"] == "swapped" and doc["profile_status"] == "built"
        donor = by_id[doc["profile_donor"]]
        assert donor.id != doc["id"]
        assert set(doc["profile_post_ids"]) <= {p.id for p in donor.profile}
