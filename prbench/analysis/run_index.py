"""An index of runs: one static page listing every ``prbench eval`` run found under some folders.

:func:`find_runs` walks the folders given to ``prbench report`` (a run's folder, a tree of them, or
several) for the files runs leave: lm-eval's results files (with prbench's manifest) of runs that
ended with results, and the status files ``prbench eval`` keeps from the start of a run
(:mod:`prbench.harness.run_files`), which are all there is of a run that failed, was interrupted
or was killed. :func:`index_html` writes ``index.html``: one row per run and benchmark group with
the task, scorer, profile condition, status (finished; partial: a ``--limit`` run that left pairs
out; failed, with the error's line; interrupted; unfinished: no end recorded, the process still
running or killed), when it started, the headline accuracy with its interval, and a relative link
to the run's pair-explorer page. The page is one file, no network, no external asset: a column
sorts by a click on its header, a text box keeps the rows holding every word typed; every text
is set escaped, and the small script only reorders and hides rows.
"""

from __future__ import annotations

import dataclasses
import html
import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from prbench.analysis.run_panel import NOT_RECORDED, status_of, when_text
from prbench.analysis.runs import (
    MANIFEST_PREFIX,
    STATUS_PREFIX,
    Run,
    RunFileError,
    expand,
    load_run,
    read_json,
)


@dataclasses.dataclass
class FoundRuns:
    """The runs under the inputs.

    Attributes:
        inputs: the inputs that hold results files (what the report reads).
        runs: the runs that ended with a results file.
        unfinished: status files of runs without results, with their content.
    """

    inputs: list[str]
    runs: list[Run]
    unfinished: list[tuple[Path, dict[str, Any]]]

    @property
    def count(self) -> int:
        """How many runs were found."""
        return len(self.runs) + len(self.unfinished)


def _has_results(folder: Path) -> bool:
    return any(True for pattern in ("results_*.json", "*_results.json", f"{MANIFEST_PREFIX}*.json")
               for _ in folder.rglob(pattern))


def find_runs(paths: Iterable[str | os.PathLike[str]], *, resamples: int, seed: int
              ) -> FoundRuns:
    """Every ``prbench eval`` run in ``paths`` (folders searched through, files as given).

    Results files of ``prbench bon`` and ``prbench correlate`` are not runs of the index (the
    report shows them). A status file that names a results file beside it is that run's.

    Raises:
        RunFileError: a path that does not exist; a folder with no run in it; a damaged file.
    """
    inputs: list[str] = []
    results: list[Path] = []
    statuses: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(path.rglob(f"{STATUS_PREFIX}*.json"))
            if _has_results(path):
                results += expand([path])
                inputs.append(str(raw))
            elif not found:
                raise RunFileError(
                    f"{path}: no prbench run in it (no results_*.json, {MANIFEST_PREFIX}*.json "
                    f"or {STATUS_PREFIX}*.json file under it); give the folder prbench eval "
                    "--output_path wrote to")
            statuses += found
        elif path.is_file() and path.name.startswith(STATUS_PREFIX):
            statuses.append(path)
        elif path.is_file():
            results.append(path)
            inputs.append(str(raw))
        else:
            raise RunFileError(f"{path}: no such file or folder")
    runs = []
    for file in dict.fromkeys(results):
        if read_json(file).get("kind") not in ("prbench-best-of-n", "prbench-correlation"):
            runs.append(load_run(file, resamples=resamples, seed=seed))
    finished = {r.path.resolve() for r in runs}
    unfinished = []
    for status in dict.fromkeys(statuses):
        doc = read_json(status, what="prbench status file")
        named = doc.get("results_file")
        if named and (status.parent / str(named)).resolve() in finished:
            continue
        unfinished.append((status, doc))
    return FoundRuns(inputs, runs, unfinished)


@dataclasses.dataclass
class IndexRow:
    """One row of the index: a run and benchmark group.

    Attributes:
        folder: the run's folder, relative to the index page where it can be.
        task: the benchmark group (or the tasks asked for, for a run without results).
        scorer: the scorer (its label where it has one).
        condition: the profile condition.
        status: ``finished``, ``partial``, ``failed``, ``interrupted`` or ``unfinished``.
        detail: what more the status says (the error, the limit).
        started: when the run started (Unix time; ``None`` when not recorded).
        accuracy: the headline accuracy, its interval's ends and the interval's level.
        explorer: the run's pair-explorer page, relative to the index page.
    """

    folder: str
    task: str
    scorer: str
    condition: str
    status: str
    detail: str = ""
    started: float | None = None
    accuracy: tuple[float, float, float, float] | None = None
    explorer: str | None = None


def _relative(path: Path, base: Path) -> str:
    try:
        return Path(os.path.relpath(path.resolve(), base.resolve())).as_posix()
    except ValueError:  # another drive
        return path.resolve().as_posix()


def _epoch(stamp: Any) -> float | None:
    if isinstance(stamp, int | float) and not isinstance(stamp, bool):
        return float(stamp)
    if isinstance(stamp, str) and stamp:
        try:
            moment = datetime.fromisoformat(stamp)
        except ValueError:
            return None
        return moment.timestamp() if moment.tzinfo is not None else None
    return None


def _partial(results: Mapping[str, Any]) -> str | None:
    """``--limit N`` when the run left pairs out of some task (``None``: every pair)."""
    limit = (results.get("config") or {}).get("limit")
    if limit is None:
        return None
    counts = [n for n in (results.get("n-samples") or {}).values() if isinstance(n, Mapping)]
    cut = any(isinstance(n.get("effective"), int) and isinstance(n.get("original"), int)
              and n["effective"] < n["original"] for n in counts)
    return f"--limit {limit:g}" if cut or not counts else None


def run_rows(run: Run, out_dir: Path, explorer_pages: Mapping[Path, Path]) -> list[IndexRow]:
    """The rows of a run that ended with results: one per benchmark group."""
    from prbench.analysis.report import _short_profile

    found = status_of(run.path)
    status, detail = "finished", ""
    if found and found[1].get("status") not in (None, "finished"):
        status = str(found[1]["status"])  # e.g. a status file from a later, failed rewrite
        detail = str(found[1].get("error") or "")
    partial = _partial(run.results)
    if status == "finished" and partial:
        status, detail = "partial", f"{partial}: not every pair"
    page = explorer_pages.get(run.path)
    scorer = run.label + (" (DIAGNOSTIC)" if run.diagnostic else "")
    rows = []
    for sec in run.sections:
        micro = sec.summary.micro
        rows.append(IndexRow(
            folder=_relative(run.path.parent, out_dir), task=sec.title, scorer=scorer,
            condition=_short_profile(sec.profile), status=status, detail=detail,
            started=_epoch(run.results.get("date")),
            accuracy=(micro.value, micro.low, micro.high, micro.confidence),
            explorer=_relative(page, out_dir) if page else None))
    return rows


def status_row(path: Path, doc: Mapping[str, Any], out_dir: Path) -> IndexRow:
    """The row of a run known only by its status file (it ended without results)."""
    scorer = doc.get("scorer") if isinstance(doc.get("scorer"), Mapping) else {}
    name = str(scorer.get("label") or scorer.get("id")
               or (doc.get("model_args") or {}).get("scorer") or NOT_RECORDED)
    status = str(doc.get("status") or NOT_RECORDED)
    detail = str(doc.get("error") or "")
    if status == "running":
        status = "unfinished"
        detail = ("no end recorded: still running, or the process was killed "
                  f"(pid {doc.get('pid', NOT_RECORDED)})")
    tasks = doc.get("tasks")
    return IndexRow(
        folder=_relative(path.parent, out_dir),
        task=", ".join(str(t) for t in tasks) if isinstance(tasks, list) else NOT_RECORDED,
        scorer=name, condition=f"{NOT_RECORDED} (no results)", status=status, detail=detail,
        started=_epoch(doc.get("started")))


def index_rows(found: FoundRuns, out_dir: Path,
               explorer_pages: Mapping[Path, Path]) -> list[IndexRow]:
    """Every row of the index, newest run first."""
    rows = [row for run in found.runs for row in run_rows(run, out_dir, explorer_pages)]
    rows += [status_row(path, doc, out_dir) for path, doc in found.unfinished]
    return sorted(rows, key=lambda r: -(r.started or 0.0))


_STYLE = """
#controls{margin:10px 0;display:flex;gap:12px;align-items:center;flex-wrap:wrap}
#search{font:inherit;padding:4px 8px;min-width:22rem;border:1px solid var(--line);
 border-radius:var(--radius)}
th button{font:inherit;font-weight:600;background:none;border:0;padding:0;cursor:pointer;
 color:inherit;text-align:left}
th[aria-sort=ascending] button::after{content:" \\25B2"}
th[aria-sort=descending] button::after{content:" \\25BC"}
td.status-finished{color:var(--right)}
td.status-partial{color:var(--tie)}
td.status-failed,td.status-interrupted,td.status-unfinished{color:var(--wrong)}
td .detail{display:block;color:var(--muted);font-size:11px;max-width:40ch}
"""

_SCRIPT = r"""
"use strict";
const table = document.getElementById("runs");
const body = table.tBodies[0];
const rows = Array.from(body.rows);
const search = document.getElementById("search");
let sortCol = -1;
let sortDir = 1;
function key(row, col, numeric) {
  const cell = row.cells[col];
  const raw = cell.dataset.sort !== undefined ? cell.dataset.sort : cell.textContent;
  if (numeric) return raw === "" ? null : Number(raw);
  return raw.trim().toLowerCase();
}
function sortBy(col, numeric) {
  sortDir = col === sortCol ? -sortDir : 1;
  sortCol = col;
  const sorted = rows.slice().sort((a, b) => {
    const x = key(a, col, numeric), y = key(b, col, numeric);
    if (x === null || y === null) return (x === null) - (y === null);  // no value: last
    return (x < y ? -1 : x > y ? 1 : 0) * sortDir;
  });
  for (const row of sorted) body.appendChild(row);
  for (const th of table.tHead.rows[0].cells) th.removeAttribute("aria-sort");
  const order = sortDir > 0 ? "ascending" : "descending";
  table.tHead.rows[0].cells[col].setAttribute("aria-sort", order);
}
function filter() {
  const words = search.value.toLowerCase().split(/\s+/).filter(Boolean);
  let shown = 0;
  for (const row of rows) {
    const text = Array.from(row.cells, (c) => c.textContent).join(" ").toLowerCase();
    row.hidden = !words.every((w) => text.includes(w));
    if (!row.hidden) shown += 1;
  }
  document.getElementById("n-shown").textContent = String(shown);
}
table.tHead.querySelectorAll("button").forEach((button, col) => {
  button.addEventListener("click", () => sortBy(col, button.dataset.type === "num"));
});
search.addEventListener("input", filter);
filter();
"""

#: the columns: header, whether it sorts as a number
_COLUMNS = (("folder", False), ("task", False), ("scorer", False), ("profile condition", False),
            ("status", False), ("started", True), ("strict accuracy (micro)", True),
            ("explorer", False))


def _td(text: str, *, sort: str | None = None, cls: str = "", extra: str = "") -> str:
    attrs = f" data-sort='{html.escape(sort, quote=True)}'" if sort is not None else ""
    attrs += f" class='{cls}'" if cls else ""
    return f"<td{attrs}>{html.escape(text)}{extra}</td>"


def _row_html(row: IndexRow) -> str:
    detail = f" <span class='detail'>{html.escape(row.detail)}</span>" if row.detail else ""
    if row.accuracy is not None:
        value, low, high, _ = row.accuracy
        acc = _td(f"{value:.3f}", sort=repr(value),
                  extra=f" <span class='ci'>[{low:.3f}, {high:.3f}]</span>")
    else:
        acc = _td("-", sort="")
    explorer = (f"<td><a href='{html.escape(row.explorer, quote=True)}'>pairs</a></td>"
                if row.explorer else _td("-"))
    return "<tr>" + "".join([
        _td(row.folder), _td(row.task), _td(row.scorer), _td(row.condition),
        _td(row.status, sort=row.status, cls=f"status-{row.status}", extra=detail),
        _td(when_text(row.started) if row.started is not None else NOT_RECORDED,
            sort="" if row.started is None else repr(row.started)),
        acc, explorer]) + "</tr>"


def index_html(rows: Sequence[IndexRow], *, title: str, searched: Sequence[str],
               report: str | None = None) -> str:
    """The index page (one file: the styles and the script inline; every text escaped)."""
    from prbench.analysis.report_style import BASE

    levels = {round(100 * r.accuracy[3]) for r in rows if r.accuracy is not None}
    level = f"{levels.pop()}%" if len(levels) == 1 else "the stated"
    head = "".join(
        f"<th><button type='button' data-type='{'num' if num else 'text'}'>"
        f"{html.escape(name)}</button></th>" for name, num in _COLUMNS)
    n_runs = len({(r.folder, r.started, r.scorer) for r in rows})
    link = (f" The report over the runs with results: <a href='{html.escape(report, quote=True)}'>"
            f"{html.escape(report)}</a>." if report else "")
    return "\n".join([
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>{html.escape(title)}</title><style>{BASE}{_STYLE}</style></head><body><main>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p>{n_runs} run(s) found under {html.escape(', '.join(searched))}; one row per run "
        f"and benchmark group, newest first.{link}</p>",
        "<p class='muted'>strict accuracy: pairwise accuracy (a pair is right only when the "
        "chosen answer scores strictly higher; a tie is wrong), micro over all pairs of the "
        f"group, with its {level} percentile-bootstrap interval. partial: a --limit run that "
        "left pairs out (not a benchmark result). unfinished: no end recorded (still running, "
        "or the process was killed). Click a column's header to sort by it.</p>",
        "<div id='controls'><label>search <input type='search' id='search' "
        "placeholder='words in any column'></label><span>showing <b id='n-shown'>"
        f"{len(rows)}</b> of {len(rows)} rows</span></div>",
        f"<div class='table-wrap'><table id='runs'><thead><tr>{head}</tr></thead><tbody>",
        *[_row_html(r) for r in rows],
        "</tbody></table></div>",
        f"<script>{_SCRIPT}</script>",
        "</main></body></html>",
    ])


def write_index(found: FoundRuns, out_dir: Path, *, searched: Sequence[str],
                explorer_pages: Mapping[Path, Path], report: Path | None = None,
                title: str = "prbench runs") -> Path:
    """Write ``out_dir/index.html`` over the runs found; returns its path."""
    from prbench.outputs import write_text

    rows = index_rows(found, out_dir, explorer_pages)
    page = index_html(rows, title=title, searched=searched,
                      report=_relative(report, out_dir) if report else None)
    return write_text(out_dir / "index.html", page + "\n")


__all__ = [
    "FoundRuns",
    "IndexRow",
    "find_runs",
    "index_html",
    "index_rows",
    "run_rows",
    "status_row",
    "write_index",
]
