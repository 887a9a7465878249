"""Per-user preferences: the record fields, the bundled preference sample, the converters."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from prbench.cli import main
from prbench.harness.record_store import record_json
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


# -- converters: PRISM and the personalised Chatbot Arena release --------------------------------


def _prism_conversation(user: str, cid: str, when: str,
                        turns: list[tuple[str, list[tuple[str, float]]]]) -> dict:
    """A row of PRISM's `conversations` config (its published fields), with our own text."""
    history = []
    for t, (prompt, responses) in enumerate(turns):
        history.append({"turn": t, "role": "user", "content": prompt, "within_turn_id": None,
                        "model_name": None, "score": None, "if_chosen": None})
        scores = [s for _, s in responses]
        for w, (text, score) in enumerate(responses):
            history.append({"turn": t, "role": "model", "content": text, "within_turn_id": w,
                            "model_name": f"model-{w}", "model_provider": "x", "score": score,
                            "if_chosen": w == scores.index(max(scores))})
    return {"conversation_id": cid, "user_id": user, "generated_datetime": when,
            "conversation_type": "unguided", "opening_prompt": turns[0][0],
            "conversation_turns": len(turns), "conversation_history": history,
            "performance_attributes": {}, "choice_attributes": {}, "open_feedback": "fine"}


def _prism_rows() -> list[dict]:
    rows = []
    for c in range(3):  # user `ann`: 3 conversations, 2 rated turns each
        rows.append(_prism_conversation("ann", f"c-ann-{c}", f"2023-11-2{5 - c} 10:00:00", [
            (f"Ann question {c}.0?", [(f"ann best {c}.0", 90), (f"ann mid {c}.0", 50),
                                     (f"ann worst {c}.0", 10), (f"ann low {c}.0", 20)]),
            (f"Ann follow-up {c}.1?", [(f"ann A {c}.1", 70), (f"ann B {c}.1", 30)]),
        ]))
    rows.append(_prism_conversation("ann", "c-ann-tie", "2023-11-30 10:00:00", [
        ("Ann tied?", [("same a", 60), ("same b", 60)]),  # all equal: a tie
        ("Ann top shared?", [("top a", 80), ("top b", 80), ("low c", 5)]),  # no single best
        ("Ann alone?", [("only one", 40)]),
    ]))
    rows.append(_prism_conversation("bo", "c-bo", "2023-11-20 09:00:00", [
        ("Bo question?", [("bo good", 75), ("bo bad", 25)]),
    ]))
    return rows


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_prism_pairs_highest_vs_lowest_and_ties_skipped(tmp_path: Path) -> None:
    from prbench.preference_data.convert import convert

    src = _write_jsonl(tmp_path / "conversations.jsonl", _prism_rows())
    records, report = convert("prism", str(src), holdout=2, min_fit=3)
    assert report.rows == 5 and report.pairs == 7  # ann 6, bo 1
    assert dict(report.skipped_pairs) == {"tie": 2, "single_response": 1}
    assert report.skipped_users == {"bo": "0 fitting pair(s) < min_fit=3 (1 pairs)"}
    assert report.users == 2 and report.users_kept == 1 and report.revision is None
    assert [r["id"] for r in records] == ["prism-ann-1", "prism-ann-2"]
    # held out: ann's latest conversation by generated_datetime (c-ann-0, 2023-11-25)
    assert records[0]["question"] == "Ann question 0.0?"
    assert (records[0]["chosen"], records[0]["rejected"]) == ("ann best 0.0", "ann worst 0.0")
    second = records[1]["question"]  # a later turn shows the turns before it
    assert second.startswith("Earlier in the conversation:\nUser: Ann question 0.0?")
    assert "Assistant: ann best 0.0" in second and second.endswith("User: Ann follow-up 0.1?")
    prefs = records[0]["preferences"]
    assert len(prefs) == 4 and prefs == records[1]["preferences"]
    assert prefs[0]["question"] == "Ann question 2.0?"  # oldest first
    assert {"ann best 0.0", "ann A 0.1"}.isdisjoint({p["chosen"] for p in prefs})


def _arena_rows() -> list[dict]:
    rows = []
    for user, n in (("u-7", 7), ("u-9", 2)):
        for i in range(n):
            rows.append({
                "user_id": user, "split": "test" if i >= n - 2 else ("val" if i == 2 else "train"),
                "context": [{"role": "user", "content": f"{user} asks thing {i}?"}],
                "chosen": {"role": "assistant", "content": f"{user} winning answer {i}"},
                "rejected": {"role": "assistant", "content": f"{user} losing answer {i}"},
                "chosen_score": 1.0, "rejected_score": 0.0, "dataset": "chatbot_arena",
                "agreement": 1.0,
            })
    return rows


def test_arena_release_with_its_own_split_and_parquet(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from prbench.preference_data.convert import convert

    folder = tmp_path / "data"
    folder.mkdir()
    rows = _arena_rows()
    pq.write_table(pa.Table.from_pylist(rows[:5]), folder / "train-00000-of-00001.parquet")
    pq.write_table(pa.Table.from_pylist(rows[5:]), folder / "test-00000-of-00001.parquet")
    records, report = convert("arena", str(folder), holdout_order="source", min_fit=4)
    assert report.pairs == 9 and report.users_kept == 1
    assert report.skipped_users == {"u-9": "0 fitting pair(s) < min_fit=4 (2 pairs)"}
    assert [r["question"] for r in records] == ["u-7 asks thing 5?", "u-7 asks thing 6?"]
    assert records[0]["chosen"] == "u-7 winning answer 5"
    assert len(records[0]["preferences"]) == 5 and records[0]["domain"] == "Chatbot_Arena"
    shuffled, _ = convert("arena", str(folder), holdout_order="shuffled", seed=3, min_fit=4)
    again, _ = convert("arena", str(folder), holdout_order="shuffled", seed=3, min_fit=4)
    assert shuffled == again and len(shuffled) == 2


def test_prefs_convert_command_output_validates_and_feeds_the_task(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from prbench.harness import task_options, task_rows

    src = _write_jsonl(tmp_path / "conversations.jsonl", _prism_rows())
    out = tmp_path / "prism_prefs.jsonl"
    assert main(["prefs", "convert", "--source", "prism", "--input", str(src), "-o", str(out),
                 "--min-fit", "3", "--report", str(tmp_path / "report.json")]) == 0
    printed = capsys.readouterr().out
    assert "7 labelled pairs of 2 users" in printed and "skipped user bo" in printed
    assert json.loads((tmp_path / "report.json").read_text())["skipped_pairs"] == {
        "single_response": 1, "tie": 2}
    assert main(["validate", str(out)]) == 0
    assert "OK: 2 records in 1 file(s); 0 warning(s)" in capsys.readouterr().out
    req = task_options.parse_request({"prbench_data": str(out), "prbench_domain": "*",
                               "prbench_condition": "noprofile",
                               "prbench_default_data": "preferences_sample"})
    rows = task_rows.build_rows(req).to_pylist()
    assert [r["id"] for r in rows] == ["prism-ann-1", "prism-ann-2"]
    assert json.loads(record_json(rows[0]["record_ref"]))["user_id"] == "ann"


def test_prefs_convert_errors_are_one_line_each(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    rows = _arena_rows()
    rows[3] = {k: v for k, v in rows[3].items() if k != "rejected"}
    rows[4]["context"] = [{"role": "user"}]
    src = _write_jsonl(tmp_path / "arena.jsonl", rows)
    assert main(["prefs", "convert", "--source", "arena", "--input", str(src), "-o",
                 str(tmp_path / "o.jsonl")]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("error: ") and "published arena fields" in err[0]
    assert f"{src}:4: field 'rejected': expected an answer" in err[1]
    assert f"{src}:5: field 'context': expected a list of {{role, content}}" in err[2]
    assert main(["prefs", "convert", "--source", "prism", "--input",
                 "HannahRoseKirk/prism-alignment", "-o", str(tmp_path / "o.jsonl")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "revision main" in err and "offline" in err
    assert main(["prefs", "convert", "--source", "prism", "--input", str(src), "-o",
                 str(tmp_path / "o.jsonl"), "--holdout-order", "source"]) == 1
    assert "needs a release with its own split column" in capsys.readouterr().err


def _arena_bad(change: Any) -> list[dict]:
    rows = _arena_rows()
    change(rows)
    return rows


def _set(index: int, key: str, value: Any) -> Any:
    def change(rows: list[dict]) -> None:
        rows[index][key] = value
    return change


def _prism_bad(change: Any) -> list[dict]:
    rows = _prism_rows()
    change(rows)
    return rows


def _utterance(row: int, utterance: int, key: str, value: Any) -> Any:
    def change(rows: list[dict]) -> None:
        rows[row]["conversation_history"][utterance][key] = value
    return change


@pytest.mark.parametrize(
    ("source", "rows", "line", "field", "says"),
    [
        ("arena", _arena_bad(_set(2, "chosen", {"role": "assistant", "content": "  "})), 3,
         "chosen", "is empty"),
        ("arena", _arena_bad(_set(1, "rejected", "")), 2, "rejected", "is empty"),
        ("arena", _arena_bad(_set(0, "user_id", "u-\n7")), 1, "user_id",
         "contains U+000A (a control character) at character 3"),
        ("arena", [*_arena_bad(_set(7, "user_id", 7)), {**_arena_rows()[0], "user_id": "7"}],
         10, "user_id",
         "'7' (str) and 7 (int, at"),
        ("arena", _arena_bad(_set(4, "context", "5")), 5, "context",
         "got a string holding JSON int 5"),
        ("arena", _arena_bad(_set(4, "context", [{"role": "user", "content": ""}])), 5,
         "context[0].content", "is empty (the question)"),
        ("prism", _prism_bad(_utterance(0, 1, "content", "")), 1,
         "conversation_history[1].content", "is empty (a model message)"),
        ("prism", _prism_bad(_utterance(1, 0, "turn", True)), 2, "conversation_history[0]",
         "expected {turn (int)"),
        ("prism", _prism_bad(_set(4, "user_id", "bo\r")), 5, "user_id",
         "contains U+000D"),
        ("arena", [*_arena_bad(_set(7, "user_id", "jos\u00e9")),
                   {**_arena_rows()[0], "user_id": "jose\u0301"}], 10, "user_id",
         "'jose\u0301' (NFD) and 'jos\u00e9' (NFC, at"),
    ],
)
def test_prefs_convert_refuses_what_validate_would_reject(
        source: str, rows: list[dict], line: int, field: str, says: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Empty answers, ids with control characters, ids that merge (1 and "1"), a boolean turn
    and a context that is JSON but no message list: each one line naming file, line and field;
    nothing is written (before, they converted and `validate` refused the output)."""
    src = _write_jsonl(tmp_path / f"{source}.jsonl", rows)
    out = tmp_path / "o.jsonl"
    code = main(["prefs", "convert", "--source", source, "--input", str(src), "-o", str(out),
                 "--min-fit", "1"])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err and not out.exists()
    lines = err.strip().splitlines()
    assert lines[0].startswith(f"error: {src}: rows that do not fit the published {source}")
    assert len(lines) == 2, lines
    assert f"{src}:{line}: field '{field}': " in lines[1] and says in lines[1], lines[1]


def test_prefs_convert_skips_answers_validate_calls_the_same(tmp_path: Path, capsys) -> None:
    """Answers that differ only by a no-break space (or another invisible difference that
    ``prbench validate`` ignores) are not a pair: skipped and counted as identical, so that
    every record written passes ``validate``."""
    rows = _arena_rows()
    rows[3]["rejected"] = {"role": "assistant",
                           "content": rows[3]["chosen"]["content"].replace(" ", "\u00a0", 1)}
    rows[4]["rejected"] = {"role": "assistant",
                           "content": rows[4]["chosen"]["content"] + "\u200b"}
    src = _write_jsonl(tmp_path / "arena.jsonl", rows)
    out, report = tmp_path / "o.jsonl", tmp_path / "report.json"
    assert main(["prefs", "convert", "--source", "arena", "--input", str(src), "-o", str(out),
                 "--min-fit", "1", "--report", str(report)]) == 0
    assert json.loads(report.read_text())["skipped_pairs"] == {"identical_answers": 2}
    capsys.readouterr()
    assert main(["validate", str(out)]) == 0, capsys.readouterr().err
