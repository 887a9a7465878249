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
- the **runs**: per run, what produced its numbers (scorer and options, profile builder, data and
  revision, versions, seeds, when and how long; :mod:`prbench.analysis.run_panel`);
- **Best-of-N** tables and curves, and **correlation** tables and scatter plots.

Diagnostic scorers (that read the hidden rubric) and the bundled sample are flagged wherever they
appear. The markdown links the PNGs next to it; the HTML embeds them (base64), so it is one file.
"""

from __future__ import annotations

import base64
import html
import itertools
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from prbench.analysis.summary import order_totals
from prbench.metrics import DEFAULT_RESAMPLES, DEFAULT_SEED
from prbench.outputs import write_text
from prbench.progress import progress_bar
from prbench.tables import markdown_table

Block = tuple[Any, ...]
#: one bootstrap default in every command (:data:`prbench.metrics.DEFAULT_RESAMPLES`)
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


#: what a leaderboard column means, shown on hover in the HTML page
_LEADERBOARD_HOVER = {
    "micro": "accuracy over all pairs pooled",
    "macro": "mean of the domains' accuracies",
    "single-order": "a pairwise judge: mean over all its single-order verdicts (unreadable = 0)",
    "ties": "share of pairs scored equal (a tie is never right)",
    "invalid": "pairs without a verdict or a score",
    "length": "accuracy of 'the longer answer wins' on the same pairs",
}


def _short_domain(domain: str, domains: Sequence[str]) -> str:
    """``Art_and_Entertainment`` -> ``Art``: its first word where that names it alone."""
    first = domain.split("_")[0]
    if first and sum(d.split("_")[0] == first for d in domains) == 1:
        return first
    return domain.replace("_", " ")


def _short_group(title: str) -> str:
    """A benchmark group without the benchmark's own prefix: ``sample_noprofile``."""
    short = re.sub(r"^personalized_rewardbench_?", "", title)
    return short or title


def _short_profile(label: str) -> str:
    """A profile label without the builder's options: ``dense (swapped)``, ``none``.

    The full label (options, what a control source is, why a profile was not built) is on
    hover.
    """
    if label.startswith("question only"):
        return "none"
    short = re.sub(r" \[(\w+) profile: [^\]]*\]", r" (\1)", label)
    short = re.sub(r"\([^()]*=[^()]*\)", "", short)
    short = re.sub(r"\((not built)[^()]*\)", r"(\1)", short)
    return re.sub(r"\s+", " ", short).strip() or label


def leaderboard(runs: Sequence[Any]) -> list[Block]:
    """The leaderboard blocks: one row per (run, benchmark group).

    Reward models first; DIAGNOSTIC scorers (oracles that read the hidden rubric) in a table of
    their own below, never ranked among them. The HTML page shows short labels (domain, group,
    profile builder) with the full text on hover, so the table fits a 1,280-pixel window.
    """
    if not runs:
        return []
    domains = sorted({d for r in runs for s in r.sections for d in s.summary.domains})
    head = ["scorer", "group", "profile", *domains, "micro", "macro", "single-order", "ties",
            "invalid", "length"]
    rows, diag_rows = [], []
    bars = []
    short: dict[str, str] = {d: _short_domain(d, domains) for d in domains}
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
            short.setdefault(sec.title, _short_group(sec.title))
            short.setdefault(sec.profile, _short_profile(sec.profile))
            cells += [_ci(sec.summary.domains[d]) if d in sec.summary.domains else "-"
                      for d in domains]
            cells += [
                _ci(sec.summary.micro), _ci(sec.summary.macro), _fmt(single),
                f"{sum(r.ties for r in sec.rows) / max(1, total):.3f}",
                str(sum(r.invalid for r in sec.rows)), _fmt(length),
            ]
            (diag_rows if run.diagnostic else rows).append(cells)
            micro = sec.summary.micro
            bars.append({"label": f"{run.label} / {sec.title}", "value": micro.value,
                         "low": micro.low, "high": micro.high, "diagnostic": run.diagnostic,
                         "single_order": single})
    conf = round(100 * runs[0].sections[0].summary.micro.confidence) if runs[0].sections else 95
    meta = {"class": "leaderboard", "short": short, "hover": _LEADERBOARD_HOVER}
    out: list[Block] = [("h2", "Leaderboard")]
    if rows:
        out.append(("table", head, rows, meta))
    else:
        out.append(("p", "No reward model among the runs: only DIAGNOSTIC scorers, below."))
    if diag_rows:
        out += [
            ("section", "diagnostic"),
            ("h3", "DIAGNOSTIC scorers (read the hidden rubric: upper bounds, not ranked)"),
            ("table", head, diag_rows, {**meta, "class": "leaderboard diagnostic"}),
            ("end",),
        ]
    return [
        *out,
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
    from prbench.analysis.correlation import diagnostic_note, note, tables

    blocks: list[Block] = []
    for i, (path, corr) in enumerate(results):
        blocks.append(("h2", f"Benchmark vs downstream rank correlation ({path.name})"))
        blocks += [("table", head, rows) for head, rows in tables(corr)]
        blocks.append(("p", note(corr)))
        extra = diagnostic_note(corr).strip()
        if extra:
            blocks += [("p", line) for line in extra.splitlines()]
        blocks.append(("scatter", corr, f"correlation_{i}.png"))
    return blocks


def _sweeps_and_aspects(paths: Sequence[Any], runs: Sequence[Any], resamples: int, seed: int
                        ) -> list[Block]:
    """The table of every sweep folder given, then accuracy by record property."""
    from prbench.analysis import aspects, sweep_table

    blocks = sweep_table.report_blocks(list(paths), resamples, seed)
    return blocks + (aspects.report_blocks(runs, resamples, seed) if runs else [])


#: the steps of :func:`build_report`, as its progress names them
_STEPS = ("leaderboard", "sensitivity and paired tests", "pair explorer",
          "sweeps and record properties", "downstream and figures")


def _render_figures(blocks: list[Block], out: Path,
                    on_text: Callable[[str], None] | None = None) -> list[Block]:
    """Draw the figure blocks as PNGs in ``out``; they become image blocks.

    A figure that cannot be drawn (matplotlib missing) is a line in the page saying so, and
    ``on_text`` hears once how many were left out and why, so the terminal says it too.
    """
    from prbench.analysis import plots

    left_out: dict[str, int] = {}
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
            left_out[str(exc)] = left_out.get(str(exc), 0) + 1
            continue
        drawn.append(("img", path))
    if on_text is not None:
        for why, count in left_out.items():
            on_text(f"note: {count} figure(s) left out of the report: {why}")
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


#: a cell holding an estimate and its interval, as :func:`_ci` and the tables' writers print it
_CI_CELL = re.compile(r"^([-+]?\d+(?:\.\d+)?) \[([-+]?\d+(?:\.\d+)?), ([-+]?\d+(?:\.\d+)?)\]$")
#: a cell holding one number (a count, a rate, a p-value, ``8/0``), right-aligned in HTML
_NUMBER_CELL = re.compile(r"^[-+]?(\d[\d,]*(\.\d+)?(e[-+]?\d+)?%?|\d+/\d+)$")


def _numeric_columns(rows: Sequence[Sequence[str]], width: int) -> list[bool]:
    """Per column: every filled cell a number or an estimate with its interval."""
    out = []
    for j in range(width):
        cells = [str(r[j]).strip() for r in rows if j < len(r)]
        filled = [c for c in cells if c not in ("-", "")]
        out.append(bool(filled) and all(_NUMBER_CELL.match(c) or _CI_CELL.match(c)
                                        for c in filled))
    return out


def _cell_html(text: str, meta: Mapping[str, Any], numeric: bool, tag: str) -> str:
    """One cell: a short label with the full text on hover, or a value over its interval."""
    text = str(text)
    short = (meta.get("short") or {}).get(text)
    hover = (meta.get("hover") or {}).get(text) if tag == "th" else None
    attrs = " class='num'" if numeric else " class='text'" if tag == "td" else ""
    match = _CI_CELL.match(text.strip()) if tag == "td" else None
    if match:
        value, low, high = match.groups()
        body = (f"{html.escape(value)}<span class='ci'>[{html.escape(low)}, "
                f"{html.escape(high)}]</span>")
    elif short and short != text:
        title = text if not hover else f"{text}: {hover}"
        body = f"<span class='short' title='{html.escape(title, quote=True)}'>" \
               f"{html.escape(short)}</span>"
    elif hover:
        body = f"<span class='short' title='{html.escape(hover, quote=True)}'>" \
               f"{html.escape(text)}</span>"
    else:  # a long snake_case name (a domain, a task) may wrap after its underscores
        body = html.escape(text).replace("_", "_<wbr>")
    return f"<{tag}{attrs}>{body}</{tag}>"


def _html_table(head: Sequence[str], rows: Sequence[Sequence[str]],
                meta: Mapping[str, Any] | None = None) -> str:
    """A table in its scrolling wrapper: numbers right-aligned, intervals under their value.

    ``meta`` (a table block's optional fourth element): ``class`` (the table's CSS class),
    ``short`` (cell text -> the shorter label shown, the full text on hover) and ``hover``
    (column header -> an explanation on hover).
    """
    meta = meta or {}
    numeric = _numeric_columns(rows, len(head))
    cells = "".join(_cell_html(h, meta, numeric[j], "th") for j, h in enumerate(head))
    body = "".join(
        "<tr>" + "".join(_cell_html(c, meta, j < len(numeric) and numeric[j], "td")
                         for j, c in enumerate(r)) + "</tr>" for r in rows
    )
    cls = f" class='{html.escape(meta['class'], quote=True)}'" if meta.get("class") else ""
    return (f"<div class='table-wrap'><table{cls}><thead><tr>{cells}</tr></thead>"
            f"<tbody>{body}</tbody></table></div>")


def _anchor(text: str, taken: set[str]) -> str:
    """A unique ``id`` for a heading (the table of contents links to it)."""
    base = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "section"
    slug, i = base, 2
    while slug in taken:
        slug, i = f"{base}-{i}", i + 1
    taken.add(slug)
    return slug


def _note_class(text: str) -> str:
    """The CSS class of a note above the report: DIAGNOSTIC and SAMPLE notes stand out."""
    if text.startswith("DIAGNOSTIC"):
        return " class='diagnostic'"
    if "SAMPLE" in text:
        return " class='sample'"
    return ""


def to_html(blocks: Sequence[Block], title: str) -> str:
    """The report as one standalone HTML page (PNGs embedded as base64, the stylesheet inline).

    The notes before the first section sit under the title, with a table of contents of the
    sections; each section (``h2``) is a ``<section>`` with an ``id`` to link to; a ``section``
    block (``("section", css_class)`` ... ``("end",)``) sets a part apart (the DIAGNOSTIC rows).
    """
    from prbench.analysis.report_style import BASE, REPORT

    taken: set[str] = set()
    toc: list[tuple[str, str]] = []
    notes: list[str] = []
    parts: list[str] = []
    in_section = False
    for block in blocks:
        kind = block[0]
        if kind == "h2":
            anchor = _anchor(block[1], taken)
            toc.append((anchor, block[1]))
            parts.append("</section>" if in_section else "")
            parts.append(f"<section id='{anchor}'><h2>{html.escape(block[1])}</h2>")
            in_section = True
        elif kind == "p" and not in_section:
            notes.append(f"<p{_note_class(block[1])}>{html.escape(block[1])}</p>")
        elif kind == "h3":
            parts.append(f"<h3>{html.escape(block[1])}</h3>")
        elif kind == "section":
            parts.append(f"<section class='{html.escape(block[1], quote=True)}'>")
        elif kind == "end":
            parts.append("</section>")
        elif kind == "links":
            items = "".join(f"<li><a href='{html.escape(target, quote=True)}'>"
                            f"{html.escape(text)}</a></li>" for text, target in block[1])
            parts.append(f"<ul class='links'>{items}</ul>")
        elif kind == "p":
            parts.append(f"<p>{html.escape(block[1])}</p>")
        elif kind == "table":
            parts.append(_html_table(block[1], block[2], block[3] if len(block) > 3 else None))
        elif kind == "img":
            data = base64.b64encode(block[1].read_bytes()).decode("ascii")
            # the figure links to its PNG beside the page: a tap opens it full size
            name = html.escape(block[1].name, quote=True)
            parts.append(f"<figure><a class='zoom' href='{name}' title='open full size'>"
                         f"<img alt='{html.escape(block[1].stem, quote=True)}' "
                         f"src='data:image/png;base64,{data}'></a></figure>")
    if in_section:
        parts.append("</section>")
    nav = "".join(f"<a href='#{a}'>{html.escape(t)}</a>" for a, t in toc)
    return "\n".join([
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>{html.escape(title)}</title><style>{BASE}{REPORT}</style></head><body><main>",
        f"<header class='page'><h1>{html.escape(title)}</h1>",
        f"<nav class='toc'>{nav}</nav></header>" if nav else "</header>",
        f"<div class='notes'>{''.join(notes)}</div>" if notes else "",
        *[p for p in parts if p],
        "</main></body></html>",
    ])


def build_report(
    paths: Sequence[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str],
    *,
    resamples: int = DEFAULT_REPORT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    title: str = "prbench report",
    on_text: Callable[[str], None] | None = None,
    keep_reruns: bool = False,
    explorer_pages: dict[Path, Path] | None = None,
) -> tuple[Path, Path]:
    """Read the results, draw the figures, write ``report.md``, ``report.html`` and explorers.

    ``on_text`` receives what is meant for the terminal: which reruns replaced which runs, and
    the personalization table. A run is identified by its scorer, tasks and profile settings
    (:func:`prbench.analysis.runs.run_identity`): of several results files with one identity
    (a command run twice into one folder) the newest is used, unless ``keep_reruns``.
    ``explorer_pages``, when given, receives each run's results file -> its pair-explorer page.

    Raises:
        prbench.analysis.runs.RunFileError: a file that is not a results file.
        ValueError: no input.
    """
    from prbench.analysis.explorer import write_explorers
    from prbench.analysis.run_panel import panel_blocks
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
        if on_text is not None:
            on_text(f"note: no per-pair samples for {', '.join(no_samples)}: no pair explorer "
                    "and no paired statistics for them (rerun prbench eval with --log_samples)")
    notes += [f"Rerun: {n}." for n in replaced]
    used = {r.path for r in runs}
    notes.append("Inputs: " + ", ".join(str(f) for f in files
                                        if f in used or not f.name.startswith("results_")))
    blocks: list[Block] = [("p", n) for n in notes]
    with progress_bar(len(_STEPS), desc="report", unit="step") as bar:
        done = 0

        def next_step() -> None:  # the line printed names the step that starts now
            nonlocal done
            done += 1
            if done < len(_STEPS):
                bar.set_postfix(now=_STEPS[done])
            else:
                bar.set_postfix()
            bar.update()

        bar.set_postfix(now=_STEPS[0])
        blocks += leaderboard(runs)
        next_step()
        if runs:
            section, text = sensitivity_blocks(runs, resamples, seed)
            blocks += section
            if text and on_text is not None:
                on_text(text)
            blocks += paired_tests(runs, resamples, seed)
        next_step()
        pages = write_explorers(runs, out, explorer_pages)
        if pages:
            blocks += [
                ("h2", "Pair explorer"),
                ("p", "Every scored pair of a run on one static page (open it in a browser; no "
                      "server), under the run's panel: question, profile as the scorer saw it, "
                      "both answers and scores or verdicts, rubric aspects (DIAGNOSTIC), the "
                      "input as scored (when the run recorded it: the text or messages sent, "
                      "the cut marked, tokens and time) and the raw samples line; text search, "
                      "filters by domain, outcome and length-baseline agreement, a range on "
                      "any numeric column, sort by any column, keys j/k and /, a permalink per "
                      "pair, the state kept in the page's address; the comparison page puts "
                      "two runs side by side on the pairs they disagree on."),
                ("links", [(text, path.relative_to(out).as_posix()) for text, path in pages]),
            ]
        blocks += panel_blocks(runs)  # what produced each run (prbench.analysis.run_panel)
        next_step()
        blocks += _sweeps_and_aspects(paths, runs, resamples, seed)
        next_step()
        blocks += best_of_n(bons)
        blocks += correlations(corrs)
        blocks = _render_figures(blocks, out, on_text)
        next_step()
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
