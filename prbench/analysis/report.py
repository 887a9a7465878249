"""One-page report of finished runs: markdown plus a standalone HTML page with PNG figures.

Inputs (any mix, see :func:`prbench.analysis.runs.load_any`): lm-eval results files of
``prbench eval`` (best with ``--log_samples``, which the paired statistics need), ``prbench bon``
results and ``prbench correlate`` results. The page holds:

- the **leaderboard**: per run and benchmark group, accuracy per domain with its interval, micro
  and macro, ties, pairs without a verdict and the length baseline on the same pairs;
- the **personalization gap and sensitivity** per scorer and domain, one section: accuracy with
  the user's own profile and under each other profile source that was run (no profile, another
  user's = ``swapped``, random own posts = ``shuffled``), own minus each on the same pairs
  (paired CI, McNemar) and a plot (:mod:`prbench.analysis.sensitivity`);
- **paired tests** between scorers on the same pairs and condition (Holm-adjusted over the
  reward models; comparisons with a DIAGNOSTIC oracle in a table apart, outside that family);
- a **pair explorer** per run (:mod:`prbench.analysis.explorer`): a static page of every pair;
- **Best-of-N** tables and curves, and **correlation** tables and scatter plots.

Diagnostic scorers (that read the hidden rubric) and the bundled sample are flagged wherever they
appear. The markdown links the PNGs next to it; the HTML embeds them (base64), so it is one file.
"""

from __future__ import annotations

import base64
import html
import itertools
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from prbench.analysis.metrics import DEFAULT_RESAMPLES, DEFAULT_SEED
from prbench.analysis.summary import order_totals
from prbench.outputs import write_text
from prbench.tables import markdown_table

Block = tuple[Any, ...]
#: one bootstrap default in every command (:data:`prbench.analysis.metrics.DEFAULT_RESAMPLES`)
DEFAULT_REPORT_RESAMPLES = DEFAULT_RESAMPLES


def _ci(est: Any) -> str:
    return f"{est.value:.3f} [{est.low:.3f}, {est.high:.3f}]"


def _mean(values: Any) -> float | None:
    values = list(values)
    return sum(values) / len(values) if values else None


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _run_name(run: Any) -> str:
    return f"{run.label} (DIAGNOSTIC)" if run.diagnostic else run.label


def leaderboard(runs: Sequence[Any]) -> list[Block]:
    """The leaderboard blocks: one row per (run, benchmark group)."""
    if not runs:
        return []
    domains = sorted({d for r in runs for s in r.sections for d in s.summary.domains})
    head = ["scorer", "group", "profile", *domains, "micro", "macro", "single-order", "ties",
            "invalid", "length"]
    rows = []
    bars = []
    for run in runs:
        for sec in run.sections:
            conds = {r.cell for r in sec.rows}
            length = None
            if len(conds) == 1:
                cond = next(iter(conds))
                ids = set(run.outcomes.get(cond, {}))
                length = _mean(v for k, v in run.length.get(cond, {}).items() if k in ids)
            total = sum(r.n for r in sec.rows)
            single = (order_totals(sec.rows) or {}).get("acc_single_order")
            cells = [_run_name(run), sec.title, sec.profile]
            cells += [_ci(sec.summary.domains[d]) if d in sec.summary.domains else "-"
                      for d in domains]
            cells += [
                _ci(sec.summary.micro), _ci(sec.summary.macro), _fmt(single),
                f"{sum(r.ties for r in sec.rows) / max(1, total):.3f}",
                str(sum(r.invalid for r in sec.rows)), _fmt(length),
            ]
            rows.append(cells)
            micro = sec.summary.micro
            bars.append({"label": f"{run.label} / {sec.title}", "value": micro.value,
                         "low": micro.low, "high": micro.high, "diagnostic": run.diagnostic,
                         "single_order": single})
    conf = round(100 * runs[0].sections[0].summary.micro.confidence) if runs[0].sections else 95
    return [
        ("h2", "Leaderboard"),
        ("table", head, rows),
        ("p", f"Strict pairwise accuracy (a tie is wrong) with {conf}% percentile-bootstrap "
              "intervals; micro pools the pairs, macro averages the domains; length = accuracy "
              "of 'the longer answer wins' on the same pairs (needs --log_samples). Headline: "
              "strict accuracy for every scorer; for a pairwise judge, single-order = the mean "
              "over all its single-order verdicts (unreadable = 0), the number RM-R1, "
              "SynthesizeMe and the released pairwise script report, shown beside strict (a "
              "pair counts for strict only if every order picked the chosen answer)."),
        ("bars", bars, "leaderboard.png", "accuracy (micro) per run",
         {"level": conf, "sample": any(r.data == "sample" for run in runs
                                        for sec in run.sections for r in sec.rows)}),
    ]


def paired_tests(runs: Sequence[Any], resamples: int, seed: int) -> list[Block]:
    """Every two scorers on the same pairs and condition: difference, CI, McNemar.

    Comparisons between reward models form one family, Holm-adjusted together. A comparison
    with a DIAGNOSTIC scorer (an oracle that reads the hidden rubric) is no test of a reward
    model: those are shown in their own table, unadjusted, and kept out of the Holm family.
    """
    from prbench.analysis.paired import compare, holm

    found = []
    for cond in ("profile", "noprofile"):
        have = [r for r in runs if cond in r.outcomes]
        for a, b in itertools.combinations(have, 2):
            if not set(a.outcomes[cond]) & set(b.outcomes[cond]):
                continue
            found.append((cond, a, b, compare(a.outcomes[cond], b.outcomes[cond],
                                              resamples=resamples, seed=seed)))
    head: list[Block] = [("h2", "Paired tests between scorers")]
    if not found:
        return [*head, ("p", "Fewer than two runs with per-pair samples on the same pairs.")]
    real = [f for f in found if not (f[1].diagnostic or f[2].diagnostic)]
    diag = [f for f in found if f[1].diagnostic or f[2].diagnostic]
    cols = ["condition", "A", "B", "pairs", "acc A", "acc B", "A - B [CI]",
            "only A / only B right", "McNemar p"]

    def cells(cond: str, a: Any, b: Any, c: Any) -> list[str]:
        return [cond, _run_name(a), _run_name(b), str(c.n), f"{c.a:.3f}", f"{c.b:.3f}",
                _ci(c.diff), f"{c.only_a}/{c.only_b}", f"{c.p_mcnemar:.3g}"]

    out = list(head)
    if real:
        adjusted = holm([c.p_mcnemar for *_, c in real])
        rows = [[*cells(*f), f"{p:.3g}"] for f, p in zip(real, adjusted, strict=True)]
        out += [
            ("table", [*cols, "Holm p"], rows),
            ("p", "Same pairs for both scorers: paired bootstrap of the difference; exact "
                  f"McNemar test; Holm adjustment over the {len(real)} comparisons between "
                  "reward models (the DIAGNOSTIC oracle's are not among them)."),
        ]
    else:
        out.append(("p", "No two non-diagnostic scorers share pairs: no comparison between "
                         "reward models."))
    if diag:
        out += [
            ("h3", "Against the DIAGNOSTIC oracle (reads the hidden rubric; not adjusted)"),
            ("table", cols, [cells(*f) for f in diag]),
            ("p", "An oracle that reads the rubric is an upper bound, not a reward model: these "
                  "rows show how far each scorer is from it, are not corrected for multiple "
                  "comparisons, and are outside the Holm family above."),
        ]
    return out


def best_of_n(results: Sequence[tuple[Path, dict[str, Any]]]) -> list[Block]:
    """Best-of-N tables and curves."""
    from prbench.downstream.bestofn import notes, table

    blocks: list[Block] = []
    for i, (path, bon) in enumerate(results):
        blocks.append(("h2", f"Best-of-N ({path.name})"))
        blocks.append(("table", *table(bon)))
        blocks += [("p", line) for line in notes(bon)]
        blocks.append(("bon", bon, f"best_of_n_{i}.png", "Best-of-N curves"))
    return blocks


def correlations(results: Sequence[tuple[Path, dict[str, Any]]]) -> list[Block]:
    """Correlation tables and scatter plots."""
    from prbench.analysis.correlation import note, tables

    blocks: list[Block] = []
    for i, (path, corr) in enumerate(results):
        blocks.append(("h2", f"Benchmark vs downstream rank correlation ({path.name})"))
        blocks += [("table", head, rows) for head, rows in tables(corr)]
        blocks.append(("p", note(corr)))
        blocks.append(("scatter", corr, f"correlation_{i}.png"))
    return blocks


def _sweeps_and_aspects(paths: Sequence[Any], runs: Sequence[Any], resamples: int, seed: int
                        ) -> list[Block]:
    """The table of every sweep folder given, then accuracy by record property."""
    from prbench.analysis import aspects, sweep_table

    blocks = sweep_table.report_blocks(list(paths), resamples, seed)
    return blocks + (aspects.report_blocks(runs, resamples, seed) if runs else [])


def _render_figures(blocks: list[Block], out: Path) -> list[Block]:
    """Draw the figure blocks as PNGs in ``out``; they become image blocks."""
    from prbench.analysis import plots

    drawn: list[Block] = []
    for block in blocks:
        kind = block[0]
        try:
            if kind == "bars":
                path = plots.accuracy_bars(block[1], out / block[2], title=block[3], **block[4])
            elif kind == "bon":
                path = plots.bon_curves(block[1], out / block[2])
            elif kind == "figure":  # a block that draws itself: (kind, draw(path), file name)
                path = block[1](out / block[2])
            elif kind == "lines":
                meta = block[3]
                path = plots.condition_lines(block[1], out / block[2], level=meta["level"],
                                             sample=meta["sample"],
                                             diagnostic=meta["diagnostic"])
            elif kind == "scatter":
                path = plots.correlation_figure(block[1], out / block[2])
            else:
                drawn.append(block)
                continue
        except RuntimeError as exc:  # matplotlib missing
            drawn.append(("p", f"(figure left out: {exc})"))
            continue
        drawn.append(("img", path))
    return drawn


def to_markdown(blocks: Sequence[Block], title: str) -> str:
    """The report as markdown (images linked by file name)."""
    lines = [f"# {title}", ""]
    for block in blocks:
        kind = block[0]
        if kind == "h2":
            lines += [f"## {block[1]}", ""]
        elif kind == "h3":
            lines += [f"### {block[1]}", ""]
        elif kind == "links":
            lines += [f"- [{text}]({target})" for text, target in block[1]] + [""]
        elif kind == "p":
            lines += [block[1], ""]
        elif kind == "table":
            lines += [markdown_table(block[1], block[2]), ""]
        elif kind == "img":
            lines += [f"![{block[1].stem}]({block[1].name})", ""]
    return "\n".join(lines)


def _html_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows
    )
    return f"<table><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>"


def to_html(blocks: Sequence[Block], title: str) -> str:
    """The report as one standalone HTML page (PNGs embedded as base64)."""
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title><style>",
        "body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em}",
        "table{border-collapse:collapse;font-size:13px;margin:.5em 0}",
        "td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}th{background:#f3f3f3}",
        "img{max-width:100%}</style></head><body>",
        f"<h1>{html.escape(title)}</h1>",
    ]
    for block in blocks:
        kind = block[0]
        if kind == "h2":
            parts.append(f"<h2>{html.escape(block[1])}</h2>")
        elif kind == "h3":
            parts.append(f"<h3>{html.escape(block[1])}</h3>")
        elif kind == "links":
            items = "".join(f"<li><a href='{html.escape(target, quote=True)}'>"
                            f"{html.escape(text)}</a></li>" for text, target in block[1])
            parts.append(f"<ul>{items}</ul>")
        elif kind == "p":
            parts.append(f"<p>{html.escape(block[1])}</p>")
        elif kind == "table":
            parts.append(_html_table(block[1], block[2]))
        elif kind == "img":
            data = base64.b64encode(block[1].read_bytes()).decode("ascii")
            parts.append(f"<p><img alt='{html.escape(block[1].stem)}' "
                         f"src='data:image/png;base64,{data}'></p>")
    parts.append("</body></html>")
    return "\n".join(parts)


def build_report(
    paths: Sequence[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str],
    *,
    resamples: int = DEFAULT_REPORT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    title: str = "prbench report",
    on_text: Callable[[str], None] | None = None,
    keep_reruns: bool = False,
) -> tuple[Path, Path]:
    """Read the results, draw the figures, write ``report.md``, ``report.html`` and explorers.

    ``on_text`` receives what is meant for the terminal: which reruns replaced which runs, and
    the personalization table. A run is identified by its scorer, tasks and profile settings
    (:func:`prbench.analysis.runs.run_identity`): of several results files with one identity
    (a command run twice into one folder) the newest is used, unless ``keep_reruns``.

    Raises:
        prbench.analysis.runs.RunFileError: a file that is not a results file.
        ValueError: no input.
    """
    from prbench.analysis.explorer import write_explorers
    from prbench.analysis.runs import expand, latest_runs, load_any, unique_labels
    from prbench.analysis.sensitivity import blocks as sensitivity_blocks

    files = expand(paths)
    if not files:
        raise ValueError("no results files given")
    runs, bons, corrs = [], [], []
    for file in files:
        kind, data = load_any(file)
        if kind == "lm-eval":
            runs.append(data)
        elif kind == "prbench-best-of-n":
            bons.append((file, data))
        else:
            corrs.append((file, data))
    replaced: list[str] = []
    if not keep_reruns:
        runs, replaced = latest_runs(runs)
        if replaced and on_text is not None:
            on_text("\n".join(f"note: {n}" for n in replaced))
    unique_labels(runs)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    notes = []
    data_names = {r.data for run in runs for sec in run.sections for r in sec.rows}
    if "sample" in data_names or any(b.get("sample") for _, b in bons):
        notes.append("Data: the bundled SAMPLE (45 hand-written records), not the benchmark; "
                     "its intervals are wide.")
    diagnostic = sorted({r.label for r in runs if r.diagnostic} | {
        lab for _, b in bons for lab, blk in b["scorers"].items() if blk.get("diagnostic")})
    if diagnostic:
        notes.append(f"DIAGNOSTIC scorers (read the hidden rubric; upper bounds, not reward "
                     f"models): {', '.join(diagnostic)}.")
    no_samples = [r.label for r in runs if not r.samples_found]
    if no_samples:
        notes.append(f"No per-pair samples for {', '.join(no_samples)} (run with --log_samples): "
                     "left out of the paired statistics and the pair explorer.")
    notes += [f"Rerun: {n}." for n in replaced]
    used = {r.path for r in runs}
    notes.append("Inputs: " + ", ".join(str(f) for f in files
                                        if f in used or not f.name.startswith("results_")))
    blocks: list[Block] = [("p", n) for n in notes]
    blocks += leaderboard(runs)
    if runs:
        section, text = sensitivity_blocks(runs, resamples, seed)
        blocks += section
        if text and on_text is not None:
            on_text(text)
        blocks += paired_tests(runs, resamples, seed)
    pages = write_explorers(runs, out)
    if pages:
        blocks += [
            ("h2", "Pair explorer"),
            ("p", "Every scored pair of a run on one static page (open it in a browser; no "
                  "server): question, profile as the scorer saw it, both answers and scores or "
                  "verdicts, rubric aspects (DIAGNOSTIC); filters by domain, outcome and "
                  "length-baseline agreement, sort by margin; the comparison page puts two runs "
                  "side by side on the pairs they disagree on."),
            ("links", [(text, path.relative_to(out).as_posix()) for text, path in pages]),
        ]
    blocks += _sweeps_and_aspects(paths, runs, resamples, seed)
    blocks += best_of_n(bons)
    blocks += correlations(corrs)
    blocks = _render_figures(blocks, out)
    md_path = out / "report.md"
    write_text(md_path, to_markdown(blocks, title) + "\n")
    html_path = out / "report.html"
    write_text(html_path, to_html(blocks, title) + "\n")
    return md_path, html_path


__all__ = [
    "DEFAULT_REPORT_RESAMPLES",
    "best_of_n",
    "build_report",
    "correlations",
    "leaderboard",
    "paired_tests",
    "to_html",
    "to_markdown",
]
