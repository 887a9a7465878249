"""The run panel: what produced a run's numbers, read off its manifest, results and status files.

One panel per ``prbench eval`` run, at the top of its pair-explorer page and in the report's
"Runs" section: the scorer with its options as resolved, the profile builder of each condition
with its options, the data source with its revision (or the hashes of the local files read), the
versions of prbench, lm-eval, torch, transformers and the plugins, the seeds, ``--limit``, when
the run started and how long it took, its status and its command line. Everything comes from the
files the run wrote (:mod:`prbench.harness.manifest`, :mod:`prbench.harness.run_files`): the
manifest first, else the results file's ``config.prbench``; a field neither records is shown as
``not recorded``, never guessed. The HTML sets every text escaped.
"""

from __future__ import annotations

import html
import json
import shlex
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from prbench.analysis.runs import STATUS_PREFIX, Run, manifest_path, read_json

#: what a field neither the manifest nor the results file records is shown as
NOT_RECORDED = "not recorded"
#: the versions the panel shows, in order (the manifest's names; ``lm_eval`` shown as lm-eval)
_VERSIONS = ("prbench", "lm_eval", "torch", "transformers", "python")


def run_manifest(run: Run) -> dict[str, Any]:
    """The run's prbench manifest (``{}`` when the folder has none, e.g. an older run)."""
    path = manifest_path(run.path)
    return read_json(path, what="prbench manifest") if path.is_file() else {}


def status_of(results_path: Path) -> tuple[Path, dict[str, Any]] | None:
    """The status file that names ``results_path`` as its run's results, with its content.

    Raises:
        RunFileError: a status file in the folder that is not a JSON object.
    """
    for path in sorted(results_path.parent.glob(f"{STATUS_PREFIX}*.json")):
        doc = read_json(path, what="prbench status file")
        if doc.get("results_file") == results_path.name:
            return path, doc
    return None


def when_text(stamp: Any) -> str:
    """A time as ``YYYY-MM-DD HH:MM:SS UTC``: a Unix time, or an ISO text with its offset."""
    try:
        if isinstance(stamp, int | float) and not isinstance(stamp, bool):
            moment = datetime.fromtimestamp(float(stamp), UTC)
        elif isinstance(stamp, str) and stamp:
            moment = datetime.fromisoformat(stamp)
            if moment.tzinfo is None:
                return moment.strftime("%Y-%m-%d %H:%M:%S") + " (time zone not recorded)"
            moment = moment.astimezone(UTC)
        else:
            return NOT_RECORDED
    except (ValueError, OverflowError, OSError):
        return f"{stamp} (unreadable)"
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def duration_text(seconds: Any) -> str:
    """``4.9 s``, ``12 min 5 s`` or ``2 h 3 min``; ``not recorded`` when not a number."""
    try:
        value = float(seconds)
    except (TypeError, ValueError):
        return NOT_RECORDED
    if value != value or value < 0:
        return NOT_RECORDED
    if value < 60:
        return f"{value:.1f} s"
    minutes, secs = divmod(round(value), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def _value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def options_text(options: Any) -> str:
    """``k=v, k=v`` sorted by key (``none`` for no option, ``not recorded`` for a missing one)."""
    if not isinstance(options, Mapping):
        return NOT_RECORDED
    if not options:
        return "none"
    return ", ".join(f"{k}={_value(v)}" for k, v in sorted(options.items()))


def _scorer(scorer: Mapping[str, Any]) -> str:
    if not scorer:
        return NOT_RECORDED
    name = str(scorer.get("qualified_id") or scorer.get("id") or NOT_RECORDED)
    parts = [name]
    if scorer.get("plugin"):
        parts.append(f"(plugin {scorer['plugin']})")
    if scorer.get("label"):
        parts.append(f"label {scorer['label']}")
    if scorer.get("diagnostic"):
        parts.append("DIAGNOSTIC: reads the hidden rubric")
    return " ".join(parts)


def _cell(entry: Mapping[str, Any]) -> str:
    condition = str(entry.get("condition") or NOT_RECORDED)
    source = entry.get("profile_source")
    if condition == "noprofile":
        return "question only"
    return f"{condition} ({source} posts)" if source else condition


def _profiles(data: Sequence[Any]) -> str:
    lines: list[str] = []
    for entry in data:
        if not isinstance(entry, Mapping):
            continue
        builder = entry.get("profile_builder")
        if entry.get("condition") == "noprofile" and (
                not isinstance(builder, Mapping) or builder.get("id") in (None, "none")):
            line = "question only: no profile"
        elif not isinstance(builder, Mapping):
            line = f"{_cell(entry)}: builder {NOT_RECORDED}"
        else:
            line = (f"{_cell(entry)}: {builder.get('id') or NOT_RECORDED} "
                    f"({options_text(builder.get('options'))})")
            if builder.get("status"):
                line += f"; {builder['status']}"
        if entry.get("profile_swap_seed") is not None:
            line += f"; swap seed {entry['profile_swap_seed']}"
        if line not in lines:
            lines.append(line)
    return "\n".join(lines) or NOT_RECORDED


def _data(data: Sequence[Any]) -> str:
    lines: list[str] = []
    for entry in data:
        if not isinstance(entry, Mapping):
            continue
        source = str(entry.get("data") or NOT_RECORDED)
        hashes = entry.get("file_hashes") or {}
        if entry.get("revision"):
            revision = f"revision {entry['revision']}"
        elif hashes:
            revision = f"local files, SHA-256 of {len(hashes)} recorded"
        else:
            revision = f"revision {NOT_RECORDED}"
        line = f"{source}: {revision}"
        if entry.get("split"):
            line += f"; split {entry['split']}"
        if line not in lines:
            lines.append(line)
    return "\n".join(lines) or NOT_RECORDED


def _versions(versions: Any) -> str:
    if not isinstance(versions, Mapping) or not versions:
        return NOT_RECORDED
    return ", ".join(
        f"{name.replace('_', '-')} "
        + (NOT_RECORDED if name not in versions else str(versions[name] or "not installed"))
        for name in _VERSIONS)


def _plugins(plugins: Any) -> str:
    if not isinstance(plugins, Sequence) or isinstance(plugins, str) or not plugins:
        return NOT_RECORDED
    listed = [p for p in plugins if isinstance(p, Mapping) and p.get("origin") != "builtin"]
    off = sum(1 for p in listed if p.get("disabled"))
    others = [p for p in listed if not p.get("disabled")]
    text = ", ".join(
        f"{p.get('name')} {p.get('version') or '(version ' + NOT_RECORDED + ')'}"
        + (f" [{p['status']}]" if p.get("status") not in (None, "ok") else "")
        for p in others) or "the built-ins only"
    return text + (f" ({off} installed plugin(s) disabled)" if off else "")


def _seeds(seeds: Any) -> str:
    if not isinstance(seeds, Mapping) or not seeds:
        return NOT_RECORDED
    names = {"random_seed": "python", "numpy_seed": "numpy", "torch_seed": "torch",
             "fewshot_seed": "few-shot"}
    return ", ".join(f"{names.get(k, k)} {NOT_RECORDED if v is None else v}"
                     for k, v in seeds.items())


def limit_text(limit: Any) -> str:
    """``--limit`` as recorded: ``none: every pair`` or ``3: partial, ...``."""
    if limit is None:
        return "none: every pair"
    return f"{limit:g}: a partial run, not a benchmark result" if isinstance(
        limit, int | float) else f"{limit}: a partial run"


def panel_rows(run: Run) -> list[tuple[str, str]]:
    """The panel of one run as ``(field, value)`` rows; a value may hold several lines.

    Raises:
        RunFileError: the run's manifest or a status file beside it is damaged.
    """
    manifest = run_manifest(run)
    config = run.results.get("config") or {}
    recorded = config.get("prbench") or {}
    scorer = manifest.get("scorer") or run.scorer or {}
    data = manifest.get("data") or recorded.get("data") or []
    seeds = manifest.get("seeds") or {
        k: config[k] for k in ("random_seed", "numpy_seed", "torch_seed", "fewshot_seed")
        if k in config}
    found = status_of(run.path)
    status = found[1] if found else {}
    command = manifest.get("command") or status.get("command")
    return [
        ("scorer", _scorer(scorer)),
        ("scorer options (resolved)", options_text(scorer.get("options")) if scorer
         else NOT_RECORDED),
        ("profile builder", _profiles(data)),
        ("data", _data(data)),
        ("versions", _versions(manifest.get("versions") or recorded.get("versions"))),
        ("plugins", _plugins(manifest.get("plugins") or recorded.get("plugins"))),
        ("seeds", _seeds(seeds)),
        ("--limit", limit_text(config.get("limit")) if "limit" in config else NOT_RECORDED),
        ("started", when_text(run.results.get("date"))),
        ("duration", duration_text(run.results.get("total_evaluation_time_seconds")
                                   or status.get("duration_s"))),
        ("status", str(status.get("status") or "finished (no status file: an older run, or "
                       "plain lm_eval)")),
        ("command", shlex.join(str(a) for a in command) if isinstance(command, list)
         else NOT_RECORDED),
        ("files", f"{run.path.name}; "
         + (manifest_path(run.path).name if manifest else f"manifest {NOT_RECORDED}")),
    ]


def panel_html(run: Run, *, heading: str | None = None) -> str:
    """The panel as an HTML section (every text escaped; a value's lines kept as lines)."""
    title = heading or f"Run: {run.label}" + (" (DIAGNOSTIC)" if run.diagnostic else "")
    rows = "".join(
        f"<tr><th>{html.escape(field)}</th><td>"
        + "<br>".join(html.escape(line) for line in value.split("\n")) + "</td></tr>"
        for field, value in panel_rows(run))
    return (f"<section class='run-panel'><details open><summary><b>{html.escape(title)}</b>"
            # whole-pixel lines: a permalink's pair below scrolls to an exact top
            "</summary><div class='table-wrap'><table style='line-height:20px'>"
            f"<tbody>{rows}</tbody></table></div></details></section>")


def panel_blocks(runs: Sequence[Run]) -> list[tuple[Any, ...]]:
    """The report's "Runs" section: one field/value table per run (:mod:`.report`'s blocks)."""
    if not runs:
        return []
    out: list[tuple[Any, ...]] = [
        ("h2", "Runs"),
        ("p", "What produced each run's numbers, as its manifest and results file record it "
              f"('{NOT_RECORDED}' where they do not)."),
    ]
    for run in runs:
        out.append(("h3", run.label + (" (DIAGNOSTIC)" if run.diagnostic else "")))
        out.append(("table", ["field", "value"],
                    [[field, value.replace("\n", "; ")] for field, value in panel_rows(run)]))
    return out


__all__ = [
    "NOT_RECORDED",
    "duration_text",
    "limit_text",
    "options_text",
    "panel_blocks",
    "panel_html",
    "panel_rows",
    "run_manifest",
    "status_of",
    "when_text",
]
