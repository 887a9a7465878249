"""A corpus of malformed inputs: each kind is reported precisely, never with a traceback.

Every kind builds its input under ``tmp_path`` and names the first issue it must produce: its
code, line (or row), record id and field, the file it names, and words its message must hold.
For each kind the validator function, ``load_records`` (the path eval takes) and the real
``prbench validate`` command are run; the command prints the issue as one ``error:`` line, with
ids and paths rendered by :func:`prbench.jsonio.shown` / :func:`~prbench.jsonio.shown_path`.
"""

from __future__ import annotations

import bz2
import dataclasses
import gzip
import json
import os
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from prbench.cli import main
from prbench.jsonio import shown, shown_path
from prbench.records import DataSourceError, RecordValidationError, load_records, validate
from tests._records_fixtures import BASE, record

#: (code, line or row, record id, field) of the first issue
Expected = tuple[str, int | None, str | None, str | None]
GOOD = json.dumps(record())


@dataclasses.dataclass(frozen=True)
class Kind:
    """One malformed input: ``build(tmp_path, monkeypatch)`` returns the source to validate."""

    build: Callable[[Path, pytest.MonkeyPatch], Path]
    expected: Expected
    #: the file the issue names, relative to ``tmp_path`` (default: the source itself)
    names: str | None = None
    #: words the issue's message must contain
    says: tuple[str, ...] = ()

    def issue_file(self, tmp_path: Path, source: Path) -> str:
        return str(source if self.names is None else tmp_path / self.names)


def raw(name: str, data: bytes, expected: Expected, says: tuple[str, ...] = ()) -> Kind:
    """A kind that is one file with these bytes."""

    def build(tmp_path: Path, _mp: pytest.MonkeyPatch) -> Path:
        path = tmp_path / name
        path.write_bytes(data)
        return path

    return Kind(build, expected, says=says)


def line(
    data: dict, expected: Expected, name: str = "d.jsonl", says: tuple[str, ...] = ()
) -> Kind:
    """A kind that is a jsonl file of one record."""
    return raw(name, json.dumps(data).encode() + b"\n", expected, says)


def with_key_twice(data: dict, key: str, value: object, at: str = "") -> bytes:
    """``data`` as one jsonl line whose object at ``at`` (``""`` or ``profile[0]``) gives ``key``
    a second time, with ``value`` (json.dumps cannot write this)."""
    text = json.dumps(data)
    target = data if not at else data["profile"][int(at[len("profile[") : -1])]
    inner = json.dumps(target)
    assert inner in text
    doubled = inner[:-1] + f", {json.dumps(key)}: {json.dumps(value)}}}"
    return text.replace(inner, doubled, 1).encode() + b"\n"


def _empty_parquet(tmp_path: Path, _mp: pytest.MonkeyPatch) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"id": pa.array([], pa.string())}), path)
    return path


def _newline_in_name(tmp_path: Path, _mp: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "two\nlines.jsonl"
    path.write_bytes(b"{oops}\n")
    return path


NFC = "Caf\u00e9 cr\u00e8me: proof it overnight in the fridge, then bake at 230 C."
LONG_ID = "x" * 100_000


def _fifo(tmp_path: Path, _mp: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "pipe.jsonl"
    os.mkfifo(path)
    return path


def _loop(tmp_path: Path, _mp: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "loop.jsonl"
    path.symlink_to(path)
    return path


def _broken_link(tmp_path: Path, _mp: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "gone.jsonl"
    path.symlink_to(tmp_path / "moved-away.jsonl")
    return path


def _permission_denied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # tests run as root, which chmod 000 does not stop: make reading this one file fail instead
    path = tmp_path / "locked.jsonl"
    path.write_text(GOOD + "\n")
    real = Path.open

    def open_(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self == path:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "open", open_)
    return path


def _folder(*entries: tuple[str, str | None]) -> Callable[[Path, pytest.MonkeyPatch], Path]:
    """A folder with a valid domain file plus entries: ``(name, text)``, ``text`` None = a link
    to a missing file, ``"<loop>"`` = a link to itself, ``"<dir>"`` = a directory."""

    def build(tmp_path: Path, _mp: pytest.MonkeyPatch) -> Path:
        folder = tmp_path / "data"
        folder.mkdir()
        (folder / "Art_and_Entertainment.jsonl").write_text(GOOD + "\n")
        for name, text in entries:
            path = folder / name
            if text is None:
                path.symlink_to(folder / "missing.jsonl")
            elif text == "<loop>":
                path.symlink_to(path)
            elif text == "<dir>":
                path.mkdir()
            else:
                path.write_text(text)
        return folder

    return build


def _bad_parquet(tmp_path: Path, _mp: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "d.parquet"
    path.write_bytes(b"PAR1 this is not really parquet")
    return path


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


CORPUS: dict[str, Kind] = {
    # --- JSON syntax and encoding
    "invalid-json": raw(
        "d.jsonl", b'{"id": "u1", "question": }\n', ("invalid-json", 1, None, None)
    ),
    "truncated-json": raw(
        "d.jsonl",
        (GOOD + "\n" + GOOD.replace('"u1"', '"u2"')[:60]).encode(),
        ("truncated-json", 2, None, None),
    ),
    "truncated-json-array": raw("d.json", ("[" + GOOD).encode(), ("truncated-json", 1, None, None)),
    "bom": raw("d.jsonl", b"\xef\xbb\xbf" + GOOD.encode() + b"\n", ("bom", 1, None, None)),
    "not-utf8": raw(
        "d.jsonl",
        GOOD.encode()
        + b"\n"
        + json.dumps(record(id="u2")).encode().replace(b"sourdough", b"sourd\xf6ugh")
        + b"\n",
        ("not-utf8", 2, None, None),
    ),
    "blank-line": raw(
        "d.jsonl",
        (GOOD + "\n\n" + json.dumps(record(id="u2")) + "\n").encode(),
        ("blank-line", 2, None, None),
    ),
    "deep-nesting-jsonl": raw(
        "d.jsonl", (_deep(100_000) + "\n").encode(), ("too-deeply-nested", 1, None, None)
    ),
    "deep-nesting-json": raw(
        "d.json", _deep(100_000).encode(), ("too-deeply-nested", None, None, None)
    ),
    "deep-nesting-in-a-field": line(
        record(meta=json.loads(_deep(100))), ("too-deeply-nested", 1, "u1", "meta")
    ),
    "5000-digit-id": raw(
        "d.jsonl", b'{"id": ' + b"7" * 5000 + b"}\n", ("number-too-long", 1, None, None)
    ),
    "cr-only-line-endings": raw(
        "d.jsonl",
        (GOOD + "\r" + json.dumps(record(id="u2")) + "\r{oops}\r").encode(),
        ("invalid-json", 3, None, None),
    ),
    "mixed-line-endings": raw(
        "d.jsonl",
        (GOOD + "\r\n" + json.dumps(record(id="u2")) + "\r" + GOOD + "\n").encode(),
        ("duplicate-id", 3, "u1", "id"),
    ),
    "ndjson-invalid-line": raw("d.ndjson", b"{nope}\n", ("invalid-json", 1, None, None)),
    # --- the record's shape
    "not-object": raw("d.jsonl", b'["u1", "a question"]\n', ("not-object", 1, None, None)),
    "missing-id": line(record(id=None), ("missing-field", 1, None, "id")),
    "bool-id": line(record(id=True), ("wrong-type", 1, None, "id")),
    "empty-id": line(record(id=" "), ("empty-field", 1, None, "id")),
    "missing-question": line(record(question=None), ("missing-field", 1, "u1", "question")),
    "question-wrong-type": line(record(question=42), ("wrong-type", 1, "u1", "question")),
    "empty-answer": line(record(chosen="   "), ("empty-answer", 1, "u1", "chosen")),
    "non-string-answer": line(
        record(rejected=["a", "b"]), ("non-string-answer", 1, "u1", "rejected")
    ),
    "null-answer": line({**BASE, "chosen": None}, ("non-string-answer", 1, "u1", "chosen")),
    "null-narrative": line({**BASE, "narrative": None}, ("wrong-type", 1, "u1", "narrative")),
    "null-rubric": line(
        {**BASE, "rubric_aspects": None}, ("wrong-type", 1, "u1", "rubric_aspects")
    ),
    "null-category": line({**BASE, "category": None}, ("wrong-type", 1, "u1", "category")),
    "null-profile": line({**BASE, "profile": None}, ("wrong-type", 1, "u1", "profile")),
    "duplicate-id": raw(
        "d.jsonl", (GOOD + "\n" + GOOD + "\n").encode(), ("duplicate-id", 2, "u1", "id")
    ),
    "identical-answers": line(
        record(rejected=BASE["chosen"]), ("identical-answers", 1, "u1", "rejected")
    ),
    "profile-not-list": line(record(profile="I like bread"), ("wrong-type", 1, "u1", "profile")),
    "profile-item-not-object": line(
        record(profile=["just text"]), ("bad-profile-item", 1, "u1", "profile[0]")
    ),
    "profile-item-without-text": line(
        record(profile=[{"id": "p", "category": "Cooking"}]),
        ("bad-profile-item", 1, "u1", "profile[0].text"),
    ),
    "profile-item-bad-id": line(
        record(profile=[{"id": [1], "text": "a"}]), ("bad-profile-item", 1, "u1", "profile[0].id")
    ),
    "profile-item-bad-category": line(
        record(profile=[{"id": "p", "text": "a", "category": 3}]),
        ("bad-profile-item", 1, "u1", "profile[0].category"),
    ),
    "profile-duplicate-post-id": line(
        record(profile=[{"id": "p", "text": "a"}, {"id": "p", "text": "b"}]),
        ("duplicate-post-id", 1, "u1", "profile[1].id"),
    ),
    "rubric-not-list": line(
        record(rubric_aspects={"aspect": "x"}), ("wrong-type", 1, "u1", "rubric_aspects")
    ),
    "rubric-item-without-aspect": line(
        record(rubric_aspects=[{"evidence": "e"}]),
        ("bad-rubric-aspect", 1, "u1", "rubric_aspects[0].aspect"),
    ),
    "rubric-item-bad-reason": line(
        record(rubric_aspects=[{"aspect": "a", "reason": 5}]),
        ("bad-rubric-aspect", 1, "u1", "rubric_aspects[0].reason"),
    ),
    # --- text that later steps cannot take
    "lone-surrogate-answer": line(
        record(chosen="Dry it \ud83d on parchment."), ("lone-surrogate", 1, "u1", "chosen")
    ),
    "lone-surrogate-profile": line(
        record(profile=[{"id": "p", "text": "rye \udc00 starter"}]),
        ("lone-surrogate", 1, "u1", "profile[0].text"),
    ),
    "lone-surrogate-extra-key": line(
        {**BASE, "note\ud800": "x"}, ("lone-surrogate", 1, "u1", "note\ud800")
    ),
    # --- misspelt schema fields
    "misspelt-chosen": line(
        {**record(chosen=None), "choosen": "x"}, ("misspelt-field", 1, "u1", "choosen")
    ),
    "misspelt-rubric": line(
        {**record(rubric_aspects=None), "rubric_aspect": [{"aspect": "a"}]},
        ("misspelt-field", 1, "u1", "rubric_aspect"),
    ),
    "misspelt-narrative": line(
        {**record(narrative=None), "narative": "I bake"}, ("misspelt-field", 1, "u1", "narative")
    ),
    "capitalised-question": line(
        {**record(question=None), "Question": "Why?"}, ("misspelt-field", 1, "u1", "Question")
    ),
    # --- files that are not files of records
    "empty-file": raw("d.jsonl", b"\n\n", ("empty-file", None, None, None)),
    "json-not-a-list": raw("d.json", b'{"id": "u1"}', ("not-a-list", None, None, None)),
    "json-row-error": raw(
        "d.json",
        json.dumps([record(), record(id="u2", chosen=3)]).encode(),
        ("non-string-answer", 2, "u2", "chosen"),
    ),
    "bad-parquet": Kind(_bad_parquet, ("bad-parquet", None, None, None)),
    "unsupported-extension": raw(
        "d.txt", GOOD.encode(), ("unsupported-file-type", None, None, None)
    ),
    "fifo": Kind(_fifo, ("not-a-file", None, None, None)),
    "symlink-loop": Kind(_loop, ("symlink-loop", None, None, None)),
    "broken-symlink": Kind(_broken_link, ("broken-symlink", None, None, None)),
    "permission-denied": Kind(_permission_denied, ("unreadable-file", None, None, None)),
    # --- folders: a data-named entry that cannot be read is an error, not a silent skip
    "folder-broken-link": Kind(
        _folder(("Society_and_Culture.jsonl", None)),
        ("broken-symlink", None, None, None),
        "data/Society_and_Culture.jsonl",
    ),
    "folder-self-loop": Kind(
        _folder(("loop.jsonl", "<loop>")), ("symlink-loop", None, None, None), "data/loop.jsonl"
    ),
    "folder-directory-named-jsonl": Kind(
        _folder(("x.jsonl", "<dir>")), ("not-a-file", None, None, None), "data/x.jsonl"
    ),
    "folder-domain-file-of-other-type": Kind(
        _folder(("Society_and_Culture.csv", "id,question\n")),
        ("unsupported-file-type", None, None, None),
        "data/Society_and_Culture.csv",
    ),
    "folder-bad-ndjson": Kind(
        _folder(("Lifestyle_and_Personal_Development.ndjson", "{\n")),
        ("invalid-json", 1, None, None),
        "data/Lifestyle_and_Personal_Development.ndjson",
    ),
    # --- a source without records is an error, not an empty table
    "empty-json-list": raw("d.json", b"[]", ("no-records", None, None, None)),
    # --- a JSON array saved under a JSON Lines name: said once, not once per line
    "json-array-as-jsonl": raw(
        "d.jsonl", json.dumps([record(), record(id="r2")], indent=2).encode(),
        ("json-array-in-jsonl", None, None, None), says=("save it as .json or one object",),
    ),
    "json-array-as-jsonl-one-line": raw(
        "d.jsonl", (json.dumps([record()]) + "\n").encode(),
        ("json-array-in-jsonl", None, None, None),
    ),
    "empty-json-data-list": raw("d.json", b'{"data": []}', ("no-records", None, None, None)),
    "empty-parquet": Kind(_empty_parquet, ("no-records", None, None, None), says=("0 rows",)),
    # --- the same key twice in one object (JSON would keep the last silently)
    "duplicate-key-id": raw(
        "d.jsonl", with_key_twice(record(), "id", "u2"), ("duplicate-key", 1, "u2", "id"),
        says=("'u1', 'u2'",),
    ),
    "duplicate-key-chosen-equal-to-rejected": raw(
        "d.jsonl",
        with_key_twice(record(), "chosen", BASE["rejected"]),
        ("duplicate-key", 1, "u1", "chosen"),
        says=("appears 2 times",),
    ),
    "duplicate-key-in-profile-post": raw(
        "d.jsonl",
        with_key_twice(record(), "text", "a second text", at="profile[0]"),
        ("duplicate-key", 1, "u1", "profile[0].text"),
    ),
    "duplicate-key-json-array": raw(
        "d.json",
        b"[" + GOOD.encode() + b"," + with_key_twice(record(id="u2"), "chosen", "x").strip() + b"]",
        ("duplicate-key", 2, "u2", "chosen"),
    ),
    "duplicate-key-in-data-wrapper": raw(
        "d.json",
        b'{"data": [' + GOOD.encode() + b'], "data": []}',
        ("duplicate-key", None, None, "data"),
    ),
    # --- text that looks different from what it is
    "answers-equal-after-nbsp": line(
        record(rejected=BASE["chosen"].replace(" ", "\u00a0", 3)),
        ("identical-after-normalisation", 1, "u1", "rejected"),
    ),
    "answers-equal-after-zero-width": line(
        record(rejected=BASE["chosen"][:8] + "\u200b\u2060" + BASE["chosen"][8:]),
        ("identical-after-normalisation", 1, "u1", "rejected"),
    ),
    "answers-equal-nfc-vs-nfd": line(
        record(chosen=NFC, rejected=unicodedata.normalize("NFD", NFC)),
        ("identical-after-normalisation", 1, "u1", "rejected"),
    ),
    "answers-equal-after-whitespace-runs": line(
        record(rejected=BASE["chosen"].replace(" ", "  \t", 2)),
        ("identical-after-normalisation", 1, "u1", "rejected"),
    ),
    "invisible-answer": line(
        record(chosen="\u200b\u200c\ufeff"), ("invisible-text", 1, "u1", "chosen"),
        says=("ZERO WIDTH SPACE",),
    ),
    "invisible-question": line(
        record(question="\u3164 \u2800\u00a0"), ("invisible-text", 1, "u1", "question")
    ),
    "invisible-profile-post": line(
        record(profile=[{"id": "p", "text": "\u2060\u200d"}]),
        ("invisible-text", 1, "u1", "profile[0].text"),
    ),
    "nul-in-answer": line(
        record(rejected="Keep it\u0000 cold."), ("nul-character", 1, "u1", "rejected"),
        says=("U+0000",),
    ),
    "nul-in-profile-post": line(
        record(profile=[{"id": "p", "text": "rye\u0000"}]),
        ("nul-character", 1, "u1", "profile[0].text"),
    ),
    "bidi-override-in-id": line(
        record(id="u1\u202etxt.exe"), ("bidi-control-in-id", 1, "u1\u202etxt.exe", "id"),
        says=("RIGHT-TO-LEFT OVERRIDE",),
    ),
    "bidi-isolate-in-post-id": line(
        record(profile=[{"id": "p\u2067", "text": "rye"}]),
        ("bidi-control-in-id", 1, "u1", "profile[0].id"),
    ),
    "newline-in-id": line(record(id="u1\nu2"), ("control-character-in-id", 1, "u1\nu2", "id")),
    "zero-width-in-id": line(
        record(id="u\u200b1"), ("control-character-in-id", 1, "u\u200b1", "id"),
        says=("ZERO WIDTH SPACE",),
    ),
    # --- encodings and compression named for what they are
    "utf16le-without-bom": raw(
        "d.jsonl", (GOOD + "\n").encode("utf-16-le"), ("wrong-encoding", None, None, None),
        says=("UTF-16LE (without a byte-order mark)",),
    ),
    "utf16be-with-bom": raw(
        "d.jsonl", (GOOD + "\n").encode("utf-16-be").join([b"\xfe\xff", b""]),
        ("wrong-encoding", None, None, None), says=("UTF-16BE (with a byte-order mark)",),
    ),
    "utf32-json-array": raw(
        "d.json", ("[" + GOOD + "]").encode("utf-32-le"), ("wrong-encoding", None, None, None),
        says=("UTF-32LE",),
    ),
    "gzip-named-jsonl": raw(
        "d.jsonl", gzip.compress((GOOD + "\n").encode()), ("compressed-file", None, None, None),
        says=("gzip", "d.jsonl.gz"),
    ),
    "bzip2-named-json": raw(
        "d.json", bz2.compress(("[" + GOOD + "]").encode()), ("compressed-file", None, None, None),
        says=("bzip2",),
    ),
    "zstd-named-jsonl": raw(
        "d.jsonl", b"\x28\xb5\x2f\xfd" + b"\x00" * 12, ("compressed-file", None, None, None),
        says=("zstd -d",),
    ),
    "plain-text-named-gz": raw(
        "d.jsonl.gz", (GOOD + "\n").encode(), ("wrong-compression", None, None, None),
        says=("not gzip data",),
    ),
    "truncated-gzip": raw(
        "d.jsonl.gz", gzip.compress((GOOD + "\n").encode())[:-12],
        ("bad-compression", None, None, None),
    ),
    "bad-record-in-jsonl-gz": raw(
        "d.jsonl.gz",
        gzip.compress((GOOD + "\n" + json.dumps(record(id="u2", chosen=3)) + "\n").encode()),
        ("non-string-answer", 2, "u2", "chosen"),
    ),
    # --- messages that name things safely and plainly
    "100000-character-id": raw(
        "d.jsonl",
        (json.dumps(record(id=LONG_ID)) + "\n" + json.dumps(record(id=LONG_ID)) + "\n").encode(),
        ("duplicate-id", 2, LONG_ID, "id"),
        says=("…(100000 chars)",),
    ),
    "newline-in-file-name": Kind(_newline_in_name, ("invalid-json", 1, None, None)),
    "unterminated-string-mid-file": raw(
        "d.jsonl",
        b'{"id": "u1", "question": "abc}\n' + GOOD.encode() + b"\n",
        ("invalid-json", 1, None, None),
        says=("Unterminated string starting at column 26",),
    ),
}


def test_the_corpus_is_large() -> None:
    assert len(CORPUS) >= 91
    assert len({k.expected[0] for k in CORPUS.values()}) >= 39  # distinct issue codes


@pytest.mark.parametrize("kind", sorted(CORPUS))
def test_malformed_input_is_reported_precisely(
    kind: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    case = CORPUS[kind]
    source = case.build(tmp_path, monkeypatch)
    code, at, rid, field = case.expected
    report = validate(source)
    first = report.issues[0]
    assert (first.code, first.line, first.record_id, first.field) == (code, at, rid, field)
    assert first.file == case.issue_file(tmp_path, source)
    with pytest.raises(RecordValidationError) as err:
        load_records(source)
    assert str(first) in str(err.value)

    assert main(["validate", str(source)]) == 1
    out, err_text = capsys.readouterr()
    assert "Traceback" not in out + err_text
    name = shown_path(case.issue_file(tmp_path, source))
    row_unit = first.unit == "row"
    if at is None:
        assert f"{name}: " in err_text
    elif row_unit:
        assert f"{name}: row {at}" in err_text
    else:
        assert f"{name}:{at}" in err_text
    if rid is not None:
        assert f"record {shown(rid)}" in err_text
    if field is not None:
        assert f"field {shown(field, limit=120)}" in err_text
    assert f"[{code}]" in err_text
    # one line per issue, prefixed: no raw newline or overlong name can break it
    assert "\n" not in str(first) and len(str(first)) < 1200
    assert f"error: {first}\n" in err_text
    for words in case.says:
        assert words in first.message or words in str(first), (words, str(first))


def test_dev_null_is_named_a_device_not_missing(capsys: pytest.CaptureFixture[str]) -> None:
    report = validate(os.devnull)
    (issue,) = report.issues
    assert (issue.file, issue.code) == (os.devnull, "not-a-file")
    assert "character device" in issue.message
    assert main(["validate", os.devnull]) == 1
    err = capsys.readouterr().err
    assert f"{os.devnull}: is a character device" in err and "Traceback" not in err


def test_fifo_message_says_what_it_is(tmp_path: Path) -> None:
    source = _fifo(tmp_path, pytest.MonkeyPatch())
    assert "named pipe (FIFO)" in validate(source).issues[0].message


def test_a_folder_without_data_files_lists_what_it_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "only-notes"
    folder.mkdir()
    (folder / "notes.txt").write_text("hi")
    with pytest.raises(DataSourceError) as err:
        validate(folder)
    assert "notes.txt: skipped: not a data file" in str(err.value)
    assert main(["validate", str(folder)]) == 1
    text = capsys.readouterr().err
    assert "notes.txt" in text and "Traceback" not in text


def test_an_empty_dataset_is_not_ok_in_json_either(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "empty.json"
    path.write_text("[]")
    assert main(["validate", str(path), "--format", "json"]) == 1
    captured = capsys.readouterr()
    payload = json.loads(captured.out)
    assert payload["ok"] is False and payload["valid"] == 0
    assert [p["code"] for p in payload["problems"]] == ["no-records"]
    errors = [x for x in captured.err.splitlines() if x.startswith("error:")]
    assert errors == [f"error: {path}: holds no records (an empty list) [no-records]"]


def test_a_duplicate_chosen_key_is_not_reported_as_identical_answers(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes(with_key_twice(record(), "chosen", BASE["rejected"]))
    assert [i.code for i in validate(path).issues] == ["duplicate-key"]


def test_messages_cut_long_ids_and_escape_names(tmp_path: Path) -> None:
    source = CORPUS["100000-character-id"].build(tmp_path, pytest.MonkeyPatch())
    text = str(validate(source).issues[0])
    assert len(text) < 400 and "x" * 61 not in text
    weird = _newline_in_name(tmp_path, pytest.MonkeyPatch())
    text = str(validate(weird).issues[0])
    assert "two\\nlines.jsonl:1" in text and "\n" not in text


def test_no_doubled_or_dangling_at_in_json_syntax_messages(tmp_path: Path) -> None:
    cases = {
        "a.json": b'[{"id": "u1", "question": "abc}]\n',
        "b.jsonl": b'{"id": "u1", "question": "abc}\n{}\n',
        "c.jsonl": GOOD.encode()[:60],  # the file ends inside a string
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        message = validate(tmp_path / name).issues[0].message
        assert " at at " not in message and " at)" not in message, message
        assert "at column" in message, message


def test_a_json_array_saved_as_jsonl_is_said_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps([record(id=f"r{i}") for i in range(20)], indent=2))
    assert main(["validate", str(path)]) == 1
    errors = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    assert errors == [
        f"error: {path}: this is a JSON array, not JSON Lines; save it as .json or one object "
        "per line [json-array-in-jsonl]"
    ]
