"""The bundled sample benchmark: schema, the authoring rules, and its anti-shortcut properties."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from prbench.cli import main
from prbench.downstream.pools import validate_pools
from prbench.records import DOMAINS, SAMPLE_DIR, SAMPLE_POOLS, Record, load_records, validate


@pytest.fixture(scope="module")
def records() -> list[Record]:
    return load_records("sample")


def words(text: str) -> int:
    return len(text.split())


def test_sample_validates_through_the_project_validator(records: list[Record]) -> None:
    report = validate(SAMPLE_DIR)
    assert report.issues == []
    assert len(records) == 45
    pools = validate_pools(SAMPLE_POOLS, records)
    assert pools.issues == []
    assert {p.record_id for p in pools.pools} == {r.id for r in records}


def test_prbench_validate_sample_prints_statistics(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "sample"]) == 0
    out = capsys.readouterr().out
    for domain in DOMAINS:
        assert domain in out
    assert "Best-of-N pools" in out and "OK: 45 records" in out


def test_fifteen_records_per_domain_over_five_subcategories(records: list[Record]) -> None:
    by_domain = Counter(r.domain for r in records)
    assert by_domain == dict.fromkeys(DOMAINS, 15)
    for domain in DOMAINS:
        assert len({r.category for r in records if r.domain == domain}) >= 5


def test_word_count_limits(records: list[Record]) -> None:
    for r in records:
        assert 8 <= words(r.question) <= 20, r.id
        assert 80 <= words(r.narrative) <= 200, r.id
        assert 3 <= len(r.rubric_aspects) <= 6, r.id
        assert 8 <= len(r.profile) <= 15, r.id
        for post in r.profile:
            assert 20 <= words(post.text) <= 80, (r.id, post.id)
        assert words(r.chosen) <= 100 and words(r.rejected) <= 100, r.id


def test_chosen_and_rejected_lengths_match_within_15_percent(records: list[Record]) -> None:
    for r in records:
        a, b = words(r.chosen), words(r.rejected)
        assert abs(a - b) / max(a, b) <= 0.15, (r.id, a, b)


def test_length_rules_stay_near_chance(records: list[Record]) -> None:
    longer = sum(words(r.chosen) > words(r.rejected) for r in records) / len(records)
    shorter = sum(words(r.chosen) < words(r.rejected) for r in records) / len(records)
    assert 0.35 <= longer <= 0.65
    assert 0.35 <= shorter <= 0.65


def test_evidence_comes_from_the_narrative(records: list[Record]) -> None:
    def norm(text: str) -> set[str]:
        return set(re.findall(r"[a-z0-9']+", text.lower()))

    for r in records:
        narrative = norm(r.narrative)
        for aspect in r.rubric_aspects:
            ev = norm(aspect.evidence)
            assert ev and len(ev & narrative) / len(ev) >= 0.7, (r.id, aspect.aspect)


def test_no_giveaway_phrases(records: list[Record]) -> None:
    banned = ("as you requested", "you asked for", "rubric", "aspect", "per your preferences")
    for r in records:
        for text in (r.chosen, r.rejected):
            assert not any(b in text.lower() for b in banned), r.id


def test_unique_ids_and_no_profile_post_shared_across_users(records: list[Record]) -> None:
    ids = [r.id for r in records]
    assert len(set(ids)) == len(ids)
    post_ids = [p.id for r in records for p in r.profile]
    assert len(set(post_ids)) == len(post_ids)
    owners: dict[str, str] = {}
    for r in records:
        for p in r.profile:
            key = " ".join(p.text.lower().split())
            assert owners.setdefault(key, r.id) == r.id, f"post shared by {owners[key]} and {r.id}"


def test_pools_label_every_aspect_and_the_chosen_answer_covers_all(records: list[Record]) -> None:
    report = validate_pools(SAMPLE_POOLS, records)
    by_id = {r.id: r for r in records}
    for pool in report.pools:
        n = len(by_id[pool.record_id].rubric_aspects)
        assert pool.chosen_labels == (2,) * n
        assert len(pool.rejected_labels) == n
        assert sum(pool.rejected_labels) < sum(pool.chosen_labels)
        assert len(pool.candidates) == 6
        assert all(len(c.coverage) == n for c in pool.candidates)
        texts = {c.text for c in pool.candidates}
        assert by_id[pool.record_id].chosen not in texts


def test_pools_mix_quality_and_do_not_reward_length(records: list[Record]) -> None:
    report = validate_pools(SAMPLE_POOLS, records)
    assert report.stats()["best_is_longest"] <= 0.5
    for pool in report.pools:
        totals = [sum(c.coverage) for c in pool.candidates]
        assert min(totals) == 0, pool.record_id  # a generic answer that covers nothing
        assert max(totals) >= 2 * len(pool.chosen_labels) - 1, pool.record_id  # a strong one


def test_readme_statistics_match_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    readme = (SAMPLE_DIR.parent / "README.md").read_text(encoding="utf-8")
    table = readme.split("<!-- stats:start -->\n", 1)[1].split("<!-- stats:end -->", 1)[0]
    assert main(["validate", "sample", "--format", "markdown"]) == 0
    assert capsys.readouterr().out.strip() == table.strip()
