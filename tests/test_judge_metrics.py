"""Judge metrics end to end: a scripted judge through ``prbench eval``, every number by hand.

The judge is a local OpenAI-compatible server (:class:`prbench.testing.LoopbackOpenAI`) whose
verdict for each order is fixed per pair: right in both orders, split either way, one order
unreadable and the other right (never a strict win), a "tie" reply (unreadable), wrong in both.
The test recomputes every metric from that script with plain loops and compares it with the
results file's task rows and group row, and with prbench's summary (domain rows and the group
row in the manifest). The same script under ``protocol=released`` must give the released
script's accuracy (unreadable = "A") and its counts.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from prbench.records import load_records

SAMPLE = Path(__file__).resolve().parent.parent / "prbench" / "data" / "sample" / "pairs"
GROUP = "personalized_rewardbench_sample_noprofile"

#: (verdict when the chosen answer is shown first, verdict when it is shown second);
#: "?" = a reply without a verdict, "T" = a reply calling it a tie (no verdict either)
CYCLE = [
    ("A", "B"),  # right in both orders: the only strict win
    ("A", "A"),  # the first-shown answer always wins: split, a flip
    ("A", "?"),  # one right order, one unreadable: not a strict win
    ("B", "B"),  # the second-shown answer always wins: split, a flip
    ("?", "B"),  # unreadable, then right
    ("B", "A"),  # wrong in both orders
    ("T", "B"),  # a tie reply, then right
    ("A", "B"),
]


def _records() -> list:
    return load_records(str(SAMPLE))


def _plan() -> dict[str, tuple[str, str]]:
    """Verdicts per record id (cycled over the sample's records, all domains)."""
    return {r.id: CYCLE[i % len(CYCLE)] for i, r in enumerate(_records())}


def _answers() -> dict[str, tuple[str, bool]]:
    """Answer text -> (record id, is it the chosen answer)."""
    out: dict[str, tuple[str, bool]] = {}
    for r in _records():
        out[r.chosen.strip()] = (r.id, True)
        out[r.rejected.strip()] = (r.id, False)
    return out


def _verdict_text(verdict: str, marker: str) -> str:
    if verdict == "?":
        return "Both answers have their merits; I cannot decide."
    if verdict == "T":
        return f"{marker}: tie"
    return f"Some thinking first.\n{marker}: {verdict}"


def _by_hand(plan: dict[str, tuple[str, str]]) -> dict[str, dict[str, float]]:
    """Every judge metric per domain and over all pairs (key ``all``), from the plan alone."""
    rows: dict[str, list[tuple[str, str]]] = {}
    for r in _records():
        rows.setdefault(r.domain, []).append(plan[r.id])
        rows.setdefault("all", []).append(plan[r.id])
    out = {}
    for key, verdicts in rows.items():
        # an order is right when the chosen answer won: "A" with it first, "B" with it second
        first_right = [v1 == "A" for v1, _ in verdicts]
        second_right = [v2 == "B" for _, v2 in verdicts]
        readable = [v for pair in verdicts for v in pair if v in "AB"]
        first_shown_won = [v == "A" for v in readable]
        n = len(verdicts)
        acc_first = sum(first_right) / n
        acc_second = sum(second_right) / n
        out[key] = {
            "n": n,
            "acc": sum(a and b for a, b in zip(first_right, second_right, strict=True)) / n,
            "acc_single_order": (sum(first_right) + sum(second_right)) / (2 * n),
            "acc_chosen_first": acc_first,
            "acc_chosen_second": acc_second,
            "position_bias": abs(acc_first - acc_second),
            "first_shown_win_rate": sum(first_shown_won) / len(readable),
            "n_unreadable": sum(v not in "AB" for pair in verdicts for v in pair),
            "n_order_flips": sum(v1 in "AB" and v2 in "AB" and v1 == v2 for v1, v2 in verdicts),
        }
    return out


def _run(tmp_path: Path, capsys, model_args: str, out: str) -> tuple[dict, dict, str, Path]:
    """``prbench eval`` on the sample's noprofile group; up to all pairs may lack a verdict."""
    from prbench.harness import tasks
    from tests._harness_fixtures import results_and_manifest, run_eval

    tasks.reset()
    try:
        code, printed, err = run_eval(
            ["eval", "--tasks", GROUP, "--model_args", model_args,
             "--output_path", str(tmp_path / out), "--max_invalid", "1"],
            capsys,
        )
    finally:
        tasks.reset()
    assert code == 0, err
    results, manifest, path = results_and_manifest(tmp_path / out)
    return results, manifest, printed, path


def _close(got: float | None, want: float) -> None:
    assert got is not None and got == pytest.approx(want, abs=1e-12)


def test_every_judge_metric_matches_the_hand_count_per_domain_and_group(tmp_path, capsys):
    from prbench.testing import LoopbackOpenAI

    plan, answers = _plan(), _answers()

    def script(messages):
        user = messages[-1]["content"]
        shown_a = re.search(r"<answer_a>\n(.*?)\n</answer_a>", user, re.DOTALL).group(1)
        rid, chosen_first = answers[shown_a.strip()]
        return _verdict_text(plan[rid][0 if chosen_first else 1], "Verdict")

    with LoopbackOpenAI(script) as server:
        args = f"scorer=llm-judge,backend=openai,model=judge,base_url={server.base_url},cache_dir="
        results, manifest, printed, path = _run(tmp_path, capsys, args, "out")
        assert server.calls == 90  # 45 pairs, both orders

    want = _by_hand(plan)
    # the hand count really has the cases the fix is about
    assert want["all"]["acc"] < want["all"]["acc_single_order"]
    assert want["all"]["n_unreadable"] > 0
    (section,) = [s for s in manifest["summary"]["sections"] if s["title"] == GROUP]
    metrics = [*want["all"].keys() - {"n"}]
    # group row: prbench's summary (from the summed per-pair counts) and lm-eval's own
    for name in metrics:
        _close(section["order_metrics"][name], want["all"][name])
    _close(section["accuracy"]["micro"]["value"], want["all"]["acc"])
    group = results["results"][GROUP]
    _close(group["acc,none"], want["all"]["acc"])
    for name in metrics:  # every judge metric on lm-eval's group row, summed from counts
        _close(group[f"{name},none"], want["all"][name])
    # domain rows: the summary's rows and lm-eval's task rows
    assert len(section["tasks"]) == 3
    for row in section["tasks"]:
        hand = want[row["domain"]]
        assert row["n"] == hand["n"]
        assert row["correct"] == round(hand["acc"] * hand["n"])
        for name in metrics:
            _close(row["order_metrics"][name], hand[name])
            _close(results["results"][row["task"]][f"{name},none"], hand[name])
        _close(results["results"][row["task"]]["acc,none"], hand["acc"])
    # the printed summary shows both headline numbers and the group row
    assert "pairwise judge (headline: strict acc and single-order acc side by side" in printed
    line = next(x for x in printed.splitlines() if x.strip().startswith("all pairs"))
    assert f"{want['all']['acc']:6.3f}" in line
    assert f"{want['all']['acc_single_order']:6.3f}" in line
    # lm-eval's printed table leaves the per-domain count dicts to prbench's summary
    from prbench.harness.summary import table_view

    shown = table_view(results)["results"][section["tasks"][0]["task"]]
    assert "acc_single_order,none" in shown and not any(k.startswith("judge_counts") for k in shown)
    _check_report_plot_and_sweep_table(tmp_path, path, want)


def _check_report_plot_and_sweep_table(tmp_path: Path, path: Path, want: dict) -> None:
    """The leaderboard, its plot and the sweep table show single-order beside strict."""
    import json

    from prbench.analysis import plots, sweep_table
    from prbench.analysis.report import leaderboard
    from prbench.analysis.runs import load_run

    single = want["all"]["acc_single_order"]
    blocks = leaderboard([load_run(path, resamples=50)])
    (table,) = [b for b in blocks if b[0] == "table"]
    (row,) = table[2]
    cells = dict(zip(table[1], row, strict=True))
    assert cells["single-order"] == f"{single:.3f}"
    assert cells["micro"].startswith(f"{want['all']['acc']:.3f}")
    (bars,) = [b for b in blocks if b[0] == "bars"]
    kept = []
    real = plots._save
    plots._save = lambda fig, out: (kept.append(fig), real(fig, out))[1]
    try:
        plots.accuracy_bars(bars[1], tmp_path / "bars.png", title="t")
    finally:
        plots._save = real
    ax = kept[0].axes[0]
    (marker,) = [ln for ln in ax.get_lines() if ln.get_marker() == "D"]
    assert list(marker.get_xdata()) == [pytest.approx(single)]
    assert plots.SINGLE_ORDER_LABEL in [t.get_text() for t in ax.get_legend().get_texts()]
    # a one-cell sweep folder around the same results file
    folder = tmp_path / "sweep"
    folder.mkdir()
    (folder / "cell.json").write_text(json.dumps({"status": "done", "results": str(path)}))
    (folder / "sweep.json").write_text(json.dumps({
        "conditions": [{"name": "noprofile", "tasks": [GROUP]}], "scorers": ["judge"],
        "cells": [{"scorer": "judge", "condition": "noprofile", "record": "cell.json"}]}))
    built = sweep_table.build_table(folder, resamples=50)
    body = {r[0]: r[1:] for r in sweep_table.body(built)}
    head = sweep_table.header(built)[1:]
    judge_row = dict(zip(head, body[f"judge: {sweep_table.SINGLE_ORDER}"], strict=True))
    assert judge_row[f"noprofile: {sweep_table.OVERALL}"] == f"{single:.3f}"
    for domain in ("Art_and_Entertainment", "Society_and_Culture"):
        assert judge_row[f"noprofile: {domain}"] == f"{want[domain]['acc_single_order']:.3f}"
    assert dict(zip(head, body["judge"], strict=True))[f"noprofile: {sweep_table.OVERALL}"
                                                      ].startswith(f"{want['all']['acc']:.3f}")
    assert f"judge: {sweep_table.SINGLE_ORDER}" in sweep_table.to_csv(built)


RELEASED_SYSTEM = "You grade two replies written for one reader and pick the better one.\n"
RELEASED_USER = """\
The reader asked:
{question}

Reply A:
<<<{Response_A}>>>

Reply B:
<<<{Response_B}>>>

Say which reply is better, ending with Result: A or Result: B.
"""


def _released_files(tmp_path: Path) -> tuple[Path, Path]:
    system = tmp_path / "system.txt"
    user = tmp_path / "user.txt"
    system.write_text(RELEASED_SYSTEM, encoding="utf-8")
    user.write_text(RELEASED_USER, encoding="utf-8")
    return system, user


def test_protocol_released_gives_the_released_scripts_numbers(tmp_path, capsys):
    import hashlib

    from prbench.testing import LoopbackOpenAI

    plan, answers = _plan(), _answers()
    system, user = _released_files(tmp_path)
    seen: list[tuple[str, bool]] = []  # (record id, chosen shown as A) per request
    systems = set()

    def script(messages):
        systems.add(messages[0]["content"])
        shown_a = re.search(r"Reply A:\n<<<(.*?)>>>", messages[-1]["content"], re.DOTALL)
        rid, chosen_in_a = answers[shown_a.group(1).strip()]
        seen.append((rid, chosen_in_a))
        return _verdict_text(plan[rid][0 if chosen_in_a else 1], "Result")

    with LoopbackOpenAI(script) as server:
        args = (f"scorer=llm-judge,backend=openai,model=judge,base_url={server.base_url},"
                f"cache_dir=,protocol=released,system_prompt_file={system},"
                f"user_prompt_file={user}")
        results, manifest, printed, _ = _run(tmp_path, capsys, args, "released")
    assert systems == {RELEASED_SYSTEM.strip()}
    assert len(seen) == 45 and len({rid for rid, _ in seen}) == 45  # one order per pair
    in_a = [a for _, a in seen]
    assert 0 < sum(in_a) < 45  # the coin put the chosen answer on both sides

    # the released script's arithmetic, by hand: an unreadable reply ("?", "tie") is "A"
    def prediction(rid: str, chosen_in_a: bool) -> str:
        verdict = plan[rid][0 if chosen_in_a else 1]
        return verdict if verdict in "AB" else "A"

    correct = [prediction(rid, a) == ("A" if a else "B") for rid, a in seen]
    right_a = [c for c, (_, a) in zip(correct, seen, strict=True) if a]
    right_b = [c for c, (_, a) in zip(correct, seen, strict=True) if not a]
    preds = [prediction(rid, a) for rid, a in seen]
    failed = sum(plan[rid][0 if a else 1] not in "AB" for rid, a in seen)
    assert failed > 0
    want = {
        "released_acc": sum(correct) / 45,
        "released_acc_chosen_a": sum(right_a) / len(right_a),
        "released_acc_chosen_b": sum(right_b) / len(right_b),
        "released_position_bias": abs(sum(right_a) / len(right_a) - sum(right_b) / len(right_b)),
        "released_n_pred_a": preds.count("A"),
        "released_n_pred_b": preds.count("B"),
        "n_unreadable": failed,
    }
    (section,) = [s for s in manifest["summary"]["sections"] if s["title"] == GROUP]
    for name, value in want.items():
        _close(section["order_metrics"][name], value)
    # prbench's own metrics keep the unreadable replies unreadable: never a win
    strict = sum(plan[rid][0 if a else 1] == ("A" if a else "B") for rid, a in seen) / 45
    _close(section["order_metrics"]["acc"], strict)
    _close(section["order_metrics"]["acc_single_order"], strict)
    assert strict < want["released_acc"]
    # each task row carries the released outputs too (counts add up to the group's)
    tasks = [results["results"][row["task"]] for row in section["tasks"]]
    assert sum(t["released_n_pred_a,none"] for t in tasks) == want["released_n_pred_a"]
    assert sum(t["n_unreadable,none"] for t in tasks) == failed
    # the summary line and the provenance of the prompt files
    assert "released protocol (as the released pairwise.py" in printed
    assert f"accuracy {want['released_acc']:.3f}" in printed
    assert f"failed parses {failed}" in printed
    stats = manifest["scorer"]["stats"]
    assert stats["protocol"] == "released" and stats["prompt_version"].startswith("released:")
    files = stats["prompt_files"]
    assert files["user_prompt_file"]["sha256"] == hashlib.sha256(user.read_bytes()).hexdigest()
    assert files["system_prompt_file"]["sha256"] == hashlib.sha256(
        system.read_bytes()).hexdigest()
    assert files["user_prompt_file"]["path"] == str(user)


def test_protocol_released_sets_the_released_settings(tmp_path):
    from prbench.plugins import get_registry

    system, user = _released_files(tmp_path)
    judge = get_registry().build("scorer", "llm-judge", {
        "backend": "openai", "model": "judge", "base_url": "http://127.0.0.1:9/v1",
        "protocol": "released", "system_prompt_file": str(system),
        "user_prompt_file": str(user)})
    o = judge.options
    assert (o.orders, o.seed, o.temperature, o.top_p, o.max_new_tokens) == ("one", 42, 0.0,
                                                                           1.0, 512)
    chat = judge._chat(_pair("r1"), "first answer", "second answer")
    assert chat[0] == {"role": "system", "content": RELEASED_SYSTEM.strip()}
    assert "<<<first answer>>>" in chat[1]["content"]
    assert "Post 1" not in chat[1]["content"]  # no {profile} in the file: no profile shown
    with_profile = tmp_path / "user_profile.txt"
    with_profile.write_text("About the reader:\n{profile}\n" + RELEASED_USER, encoding="utf-8")
    judge = get_registry().build("scorer", "llm-judge", {
        "backend": "openai", "model": "judge", "base_url": "http://127.0.0.1:9/v1",
        "protocol": "released", "system_prompt_file": str(system),
        "user_prompt_file": str(with_profile)})
    assert "Post 1: I cook on a stove." in judge._chat(_pair("r1"), "x", "y")[1]["content"]
    # the placeholders are filled one after another, as the script does: a placeholder's text
    # inside the question or an earlier answer is filled too
    text = judge._chat(_pair("r1"), "see {Response_B}", "y")[1]["content"]
    assert "<<<see y>>>" in text
    judge = get_registry().build("scorer", "llm-judge", {
        "backend": "openai", "model": "judge", "base_url": "http://127.0.0.1:9/v1",
        "protocol": "released", "system_prompt_file": str(system),
        "user_prompt_file": str(user)})
    tricky = _pair("r2", question="Is {Response_A} better than {profile}?")
    filled = judge._chat(tricky, "first", "second")[1]["content"]
    script = RELEASED_USER.strip().replace("{question}", tricky.question)
    script = script.replace("{Response_A}", "first").replace("{Response_B}", "second")
    assert filled == script  # no {profile} in the file: the script's text, byte for byte
    assert "Is first better than {profile}?" in filled


def test_placeholder_text_in_a_record_is_filled_as_the_script_does_with_one_warning(
        tmp_path, caplog):
    """protocol=released: a record's ``{Response_B}`` is filled as the released script fills it
    (sequential ``str.replace``), with one warning per record and field; the default protocol
    never changes the record's text and says nothing; a profile's text is never filled.
    """
    import logging

    from prbench.plugins import get_registry
    from prbench.profiles.base import ProfileView
    from prbench.scoring.base import PairRequest

    system, _user = _released_files(tmp_path)
    with_profile = tmp_path / "user_profile.txt"
    with_profile.write_text("About the reader:\n{profile}\n" + RELEASED_USER, encoding="utf-8")
    base = {"backend": "openai", "model": "judge", "base_url": "http://127.0.0.1:9/v1"}
    judge = get_registry().build("scorer", "llm-judge", {
        **base, "protocol": "released", "system_prompt_file": str(system),
        "user_prompt_file": str(with_profile)})
    pair = PairRequest(record_id="r9", question="Q {Response_B}?", first="see {Response_B}",
                       second="two {question}",
                       profile=ProfileView(text="I wrote {Response_A} once"))
    with caplog.at_level(logging.WARNING, logger="prbench.judges.pairwise"):
        text = judge._chat(pair, pair.first, pair.second)[1]["content"]
        judge._chat(pair, pair.first, pair.second)  # the same record again: no second warning
    script = RELEASED_USER.strip().replace("{question}", pair.question)
    script = script.replace("{Response_A}", pair.first).replace("{Response_B}", pair.second)
    assert text == "About the reader:\nI wrote {Response_A} once\n" + script
    assert "Q two {question}?" in text and "<<<see two {question}>>>" in text
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2, warned
    assert "record 'r9', field question holds the text {Response_B}" in warned[0]
    assert "record 'r9', field chosen holds the text {Response_B}" in warned[1]
    caplog.clear()
    default = get_registry().build("scorer", "llm-judge", base)
    with caplog.at_level(logging.WARNING, logger="prbench.judges.pairwise"):
        shown = default._chat(pair, pair.first, pair.second)[1]["content"]
    assert "Q {Response_B}?" in shown and "see {Response_B}" in shown
    assert "two {question}" in shown and not caplog.records


def test_a_prompt_file_with_a_byte_order_mark_sends_no_mark_and_warns_once(tmp_path, caplog):
    """A prompt file saved with a UTF-8 BOM: the mark is dropped (one warning), not sent."""
    import logging

    from prbench.plugins import get_registry

    system, user = _released_files(tmp_path)
    plain = {"backend": "openai", "model": "judge", "base_url": "http://127.0.0.1:9/v1",
             "protocol": "released", "system_prompt_file": str(system),
             "user_prompt_file": str(user)}
    before = get_registry().build("scorer", "llm-judge", plain)
    marked = tmp_path / "system_bom.txt"
    marked.write_bytes(b"\xef\xbb\xbf" + system.read_bytes())
    with caplog.at_level(logging.WARNING, logger="prbench.options"):
        judges = [get_registry().build("scorer", "llm-judge",
                                       {**plain, "system_prompt_file": str(marked)})
                  for _ in range(2)]
    chat = judges[0]._chat(_pair("r1"), "x", "y")
    assert chat[0]["content"] == RELEASED_SYSTEM.strip()  # no \ufeff before the text
    assert chat == before._chat(_pair("r1"), "x", "y")
    assert judges[0].describe()["prompt_version"] == before.describe()["prompt_version"]
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1, warned
    assert f"system_prompt_file {marked}: the file starts with a UTF-8 byte-order mark; it is " \
           "dropped" in warned[0]


def test_released_metrics_print_zero_for_an_empty_position():
    """The script's accuracy of a position no pair had is 0.0 (prbench's own metric: nan)."""
    from prbench.judges.order_metrics import (
        add_counts,
        metrics_from_counts,
        pair_counts,
        pair_metrics,
        released_position_bias,
        released_ratio,
    )

    outcomes = [{"orders": [["second", "first"]], "fallback": "A"},
                {"orders": [["second", "second"]], "fallback": "A"}]
    m = metrics_from_counts(add_counts(pair_counts(o) for o in outcomes))
    assert math.isnan(m["acc_chosen_first"])
    assert m["released_acc_chosen_a"] == 0.0 and m["released_acc_chosen_b"] == 0.5
    assert m["released_position_bias"] == 0.5
    items = [pair_metrics(o) for o in outcomes]
    assert released_ratio([i["released_acc_chosen_a"] for i in items]) == 0.0
    assert released_position_bias([i["released_position_bias"] for i in items]) == 0.5


def _script_orders() -> dict[str, bool]:
    """The released pairwise script's order per record, re-done from its description: per
    domain, reseed with 42, one random.random() per pair in the data's order, the chosen answer
    in A when the draw is below 0.5."""
    import random

    by_domain: dict[str, list[str]] = {}
    for r in _records():
        by_domain.setdefault(r.domain, []).append(r.id)
    out = {}
    for ids in by_domain.values():
        rng = random.Random(42)
        for rid in ids:
            out[rid] = rng.random() < 0.5
    return out


def test_coin_script_gives_the_scripts_order_pair_for_pair_and_the_group_row(tmp_path, capsys):
    from prbench.testing import LoopbackOpenAI

    plan, answers = _plan(), _answers()
    system, user = _released_files(tmp_path)
    seen: dict[str, bool] = {}

    def script(messages):
        shown_a = re.search(r"Reply A:\n<<<(.*?)>>>", messages[-1]["content"], re.DOTALL)
        rid, chosen_in_a = answers[shown_a.group(1).strip()]
        seen[rid] = chosen_in_a
        return _verdict_text(plan[rid][0 if chosen_in_a else 1], "Result")

    with LoopbackOpenAI(script) as server:
        args = (f"scorer=llm-judge,backend=openai,model=judge,base_url={server.base_url},"
                f"cache_dir=,protocol=released,coin=script,system_prompt_file={system},"
                f"user_prompt_file={user}")
        results, manifest, printed, _ = _run(tmp_path, capsys, args, "script")
    want_orders = _script_orders()
    assert seen == want_orders  # every pair, line by line
    # the per-pair coin (the default) is another draw: it gives other orders for some pairs
    from prbench.hashing import seeded_unit

    records = {r.id: r for r in _records()}
    pair_coin = {rid: seeded_unit("order", 42, rid, r.chosen, r.rejected) < 0.5
                 for rid, r in records.items()}
    assert pair_coin != want_orders

    # the released script's numbers per domain and over all pairs, by hand
    def outputs(rids: list[str]) -> dict[str, float]:
        def pred(rid: str) -> str:
            v = plan[rid][0 if want_orders[rid] else 1]
            return v if v in "AB" else "A"

        right = {rid: pred(rid) == ("A" if want_orders[rid] else "B") for rid in rids}
        in_a = [right[r] for r in rids if want_orders[r]]
        in_b = [right[r] for r in rids if not want_orders[r]]
        acc_a = sum(in_a) / len(in_a) if in_a else 0.0
        acc_b = sum(in_b) / len(in_b) if in_b else 0.0
        return {"released_acc": sum(right.values()) / len(rids), "released_acc_chosen_a": acc_a,
                "released_acc_chosen_b": acc_b, "released_position_bias": abs(acc_a - acc_b),
                "released_n_pred_a": sum(pred(r) == "A" for r in rids),
                "released_n_pred_b": sum(pred(r) == "B" for r in rids)}

    (section,) = [s for s in manifest["summary"]["sections"] if s["title"] == GROUP]
    for row in section["tasks"]:
        hand = outputs([r.id for r in _records() if r.domain == row["domain"]])
        for name, value in hand.items():
            _close(results["results"][row["task"]][f"{name},none"], value)
    # the lm-eval group row carries every judge metric, from the summed counts, as the summary
    group = results["results"][GROUP]
    for name, value in outputs(list(records)).items():
        _close(group[f"{name},none"], value)
    for name in ("acc_chosen_first", "acc_chosen_second", "position_bias", "n_unreadable",
                 "first_shown_win_rate", "n_order_flips"):
        _close(group[f"{name},none"], section["order_metrics"][name])
    assert "coin=script" in printed


def _pair(rid: str, question: str = "Which pan?"):
    from prbench.profiles.base import ProfileView
    from prbench.scoring.base import PairRequest

    return PairRequest(record_id=rid, question=question, first="a", second="b",
                       profile=ProfileView(text="Post 1: I cook on a stove."))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"seed": "7"}, "protocol=released sets seed=42; drop seed=7"),
        ({"temperature": "0.7"}, "protocol=released sets temperature=0.0"),
        ({"max_new_tokens": "64"}, "protocol=released sets max_new_tokens=512"),
    ],
)
def test_protocol_released_refuses_other_settings(tmp_path, extra, message):
    from prbench.options import OptionsError
    from prbench.plugins import get_registry

    system, user = _released_files(tmp_path)
    with pytest.raises(OptionsError, match=re.escape(message)):
        get_registry().build("scorer", "llm-judge", {
            "backend": "openai", "model": "judge", "base_url": "http://127.0.0.1:9/v1",
            "protocol": "released", "system_prompt_file": str(system),
            "user_prompt_file": str(user), **extra})


def test_prompt_files_only_with_protocol_released(tmp_path):
    from prbench.options import OptionsError
    from prbench.plugins import get_registry

    system, _ = _released_files(tmp_path)
    with pytest.raises(OptionsError, match="system_prompt_file is read only with protocol"):
        get_registry().build("scorer", "llm-judge", {
            "backend": "openai", "model": "judge", "base_url": "http://127.0.0.1:9/v1",
            "system_prompt_file": str(system)})


BAD_FILES = ["missing placeholder", "a folder", "too big", "no such file", "no system file"]


@pytest.mark.parametrize("case", BAD_FILES)
def test_bad_prompt_files_are_one_error_line(tmp_path, capsys, case):
    from prbench.judges.released import MAX_PROMPT_BYTES
    from tests._harness_fixtures import run_eval

    system, user = _released_files(tmp_path)
    no_b = tmp_path / "no_b.txt"
    no_b.write_text(RELEASED_USER.replace("{Response_B}", "(second reply)"), encoding="utf-8")
    big = tmp_path / "big.txt"
    big.write_text(RELEASED_USER + "x" * MAX_PROMPT_BYTES, encoding="utf-8")
    missing = tmp_path / "missing.txt"
    files, message = {
        "missing placeholder": (f"system_prompt_file={system},user_prompt_file={no_b}",
                                f"user_prompt_file={no_b}: the placeholder {{Response_B}} is "
                                "missing"),
        "a folder": (f"system_prompt_file={tmp_path},user_prompt_file={user}",
                     f"system_prompt_file {tmp_path}: is a folder, not a regular file"),
        "too big": (f"system_prompt_file={system},user_prompt_file={big}",
                    f"user_prompt_file {big}: the file is {big.stat().st_size:,} bytes, more "
                    "than the"),
        "no such file": (f"system_prompt_file={missing},user_prompt_file={user}",
                         f"system_prompt_file {missing}: cannot read it"),
        "no system file": (f"user_prompt_file={user}",
                           "protocol=released needs system_prompt_file="),
    }[case]
    code, _, err = run_eval(
        ["eval", "--tasks", GROUP, "--limit", "1", "--model_args",
         "scorer=llm-judge,backend=openai,model=judge,base_url=http://127.0.0.1:9/v1,"
         f"cache_dir=,protocol=released,{files}",
         "--output_path", str(tmp_path / "never")],
        capsys,
    )
    assert code != 0
    errors = [x for x in err.splitlines() if x.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], err
    # no traceback of ours (an in-process run may leave lm-eval's log handler on a closed
    # stream of an earlier test; that is the test harness, not the command)
    assert "PromptFileError" not in err and "judges/released.py" not in err
    assert not (tmp_path / "never").exists()


@pytest.mark.parametrize(
    ("reply", "want"),
    [
        ("Both are fine.\nResult: B", "B"),
        ("<think>Result: B</think>\n**Result:** A", "A"),  # text before </think> is dropped
        ('result: "b" because it fits', "B"),  # any case; quotes removed
        ("Result: A\nResult: B", "A"),  # the first marker decides
        ("RESULT:   b", "B"),
        ("Result: neither", "not-a-or-b"),
        ("Result: tie", "not-a-or-b"),
        ("I prefer B.", "no-result-marker"),
        ("", "no-result-marker"),
    ],
)
def test_the_released_parse(reply, want):
    from prbench.judges.parsing import ParseFailure
    from prbench.judges.released import parse_released

    got = parse_released(reply)
    assert (got.reason if isinstance(got, ParseFailure) else got) == want


def test_released_metrics_from_counts_follow_the_script():
    """Four single orders: the unreadable one with the chosen answer in A is right as "A"."""
    from prbench.judges.order_metrics import aggregate

    outcomes = [
        {"orders": [["first", "first"]], "fallback": "A"},  # chosen in A, picked: right
        {"orders": [["first", None]], "fallback": "A"},  # chosen in A, unreadable -> "A": right
        {"orders": [["second", None]], "fallback": "A"},  # chosen in B, unreadable -> "A": wrong
        {"orders": [["second", "first"]], "fallback": "A"},  # chosen in B, picked B: right
    ]
    got = aggregate(outcomes)
    assert got["released_acc"] == 0.75
    assert got["released_acc_chosen_a"] == 1.0 and got["released_acc_chosen_b"] == 0.5
    assert got["released_position_bias"] == 0.5
    assert got["released_n_pred_a"] == 3 and got["released_n_pred_b"] == 1
    assert got["acc"] == got["acc_single_order"] == 0.5 and got["n_unreadable"] == 2
    assert "released_acc" not in aggregate([{"orders": [["first", "first"]]}])
    assert math.isnan(aggregate([{"orders": []}])["acc_chosen_first"])


def test_a_later_pointwise_scorer_in_the_same_process_gets_no_judge_metrics(tmp_path, capsys):
    """A sweep runs scorers one after another in one process: a judge's order outcomes must
    not reach the next scorer's metrics (its strict acc would be the judge's)."""
    from prbench.testing import LoopbackOpenAI
    from tests._harness_fixtures import results_and_manifest, run_eval

    with LoopbackOpenAI(lambda messages: "Verdict: A") as server:
        judge_args = (f"scorer=llm-judge,backend=openai,model=judge,base_url={server.base_url},"
                      "cache_dir=")
        for args, out in ((judge_args, "judge"), ("scorer=length", "length")):
            code, _, err = run_eval(
                ["eval", "--tasks", GROUP, "--limit", "2", "--model_args", args,
                 "--output_path", str(tmp_path / out), "--max_invalid", "1"], capsys)
            assert code == 0, err
    judged, _, _ = results_and_manifest(tmp_path / "judge")
    length, manifest, _ = results_and_manifest(tmp_path / "length")
    task = "personalized_rewardbench_sample_art_and_entertainment_noprofile"
    assert "acc_single_order,none" in judged["results"][task]
    assert judged["results"][task]["acc,none"] == 0.0  # "A" always: every pair split
    assert not any(k.startswith(("acc_single_order", "judge_counts", "n_unreadable"))
                   for k in length["results"][task])
    assert all(s["order_metrics"] is None for s in manifest["summary"]["sections"])
