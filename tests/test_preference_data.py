"""Per-user preferences: the record fields, the bundled preference sample, the converters."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from prbench.cli import main
from prbench.preference_data import parse_preferences, user_preferences
from prbench.records import PREFERENCES_SAMPLE_DIR, Record, load_records, validate

# -- the bundled preference sample -------------------------------------------------------------


@pytest.fixture(scope="module")
def sample() -> list[Record]:
    return load_records("preferences_sample")


def test_preference_sample_validates_and_is_read_by_name(sample: list[Record],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    report = validate(PREFERENCES_SAMPLE_DIR)
    assert report.issues == [] and report.warnings == []  # user_id, preferences are known fields
    assert main(["validate", "preferences_sample"]) == 0
    assert "OK: 18 records in 3 file(s); 0 warning(s)" in capsys.readouterr().out
    assert len(sample) == 18 and len({r.domain for r in sample}) == 3


def test_preference_sample_users_and_held_out_pairs(sample: list[Record]) -> None:
    prefs = user_preferences(sample)
    assert len(prefs.by_user) == 6
    held = Counter(prefs.user_of_record[r.id] for r in sample)
    for user, pairs in prefs.by_user.items():
        assert len(pairs) >= 8 and len(pairs) + held[user] >= 10, user
        assert held[user] >= 2
    for r in sample:
        user, pairs = prefs.for_record(r.id)
        assert r.extra["user_id"] == user
        questions = {p.question for p in pairs}
        answers = {p.chosen for p in pairs} | {p.rejected for p in pairs}
        assert r.question not in questions and not {r.chosen, r.rejected} & answers, r.id
    # no question twice over the whole sample (held out or fitting)
    every = [p.question for ps in prefs.by_user.values() for p in ps] + [r.question for r in sample]
    assert len(every) == len(set(every))


def test_preference_sample_tastes_are_distinct_and_consistent(sample: list[Record]) -> None:
    """Each user's taste has a surface mark in every chosen answer and in no rejected one."""
    marks = {
        "pu01": lambda t: t.lstrip().startswith("- "),
        "pu02": lambda t: re.search(r"\d ?(g|ml|°C|minutes?|litres?|mm|cm)\b", t) is not None,
        "pu05": lambda t: "```" in t,
        "pu06": lambda t: any(str(y) in t for y in range(2000, 2020)),
    }
    prefs = user_preferences(sample)
    for user, mark in marks.items():
        pairs = [(p.chosen, p.rejected) for p in prefs.by_user[user]]
        pairs += [(r.chosen, r.rejected) for r in sample if r.extra["user_id"] == user]
        assert all(mark(c) for c, _ in pairs), user
        assert not any(mark(r) for _, r in pairs), user
    # the longer answer wins for some users and loses for others: length alone is near chance
    longer = [len(p.chosen) > len(p.rejected) for ps in prefs.by_user.values() for p in ps]
    assert 0.3 <= sum(longer) / len(longer) <= 0.7


# -- the record fields ---------------------------------------------------------------------------


def _row(**over: object) -> dict:
    row = {"id": "r1", "question": "Q?", "chosen": "yes", "rejected": "no", "profile": [],
           "user_id": "u1",
           "preferences": [{"question": "Earlier?", "chosen": "a", "rejected": "b"}]}
    row.update(over)
    return row


def _validate(tmp_path: Path, rows: list[dict]) -> list[str]:
    path = tmp_path / "Custom.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return [str(i) for i in validate(path).issues]


def test_bad_preference_fields_are_named(tmp_path: Path) -> None:
    assert _validate(tmp_path, [_row()]) == []
    issues = _validate(tmp_path, [
        _row(id="r1", preferences={"question": "x"}),
        _row(id="r2", preferences=[{"question": "Q", "chosen": "a"}]),
        _row(id="r3", preferences=[{"prompt": "Q", "chosen": "a", "rejected": "a"}]),
        _row(id="r4", user_id=""),
        _row(id="r5", preferences=[{"question": "Q?", "chosen": "no", "rejected": "yes"}]),
        {k if k != "preferences" else "preferencs": v for k, v in _row(id="r6").items()},
    ])
    assert len(issues) == 6, issues
    assert "Custom.jsonl:1:" in issues[0] and "'r1'" in issues[0] and "preferences" in issues[0]
    assert "preferences[0].rejected" in issues[1] and "missing" in issues[1]
    assert "preferences[0].rejected" in issues[2] and "identical" in issues[2]
    assert "user_id" in issues[3] and "empty" in issues[3]
    assert "record's own pair" in issues[4]
    assert "misspelling" in issues[5] and "preferences" in issues[5]


def test_records_of_one_user_must_share_their_preferences(tmp_path: Path) -> None:
    other = [{"question": "Other?", "chosen": "c", "rejected": "d"}]
    path = tmp_path / "Custom.jsonl"
    path.write_text(json.dumps(_row()) + "\n" + json.dumps(_row(id="r2", preferences=other)) + "\n")
    with pytest.raises(ValueError, match=r"Custom.jsonl:2 record 'r2'.*user 'u1'"):
        user_preferences(load_records(path))
    with pytest.raises(ValueError, match=r"where: preferences\[0\]\.chosen is missing"):
        parse_preferences([{"prompt": "Q"}], "where")
    assert parse_preferences([{"prompt": "Q", "chosen": "a", "rejected": "b"}], "w")[0].question \
        == "Q"
