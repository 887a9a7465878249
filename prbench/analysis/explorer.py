"""Pair explorer page: one static, self-contained HTML page over the pairs of one or two runs.

:func:`explorer_html` writes the page for the data of :mod:`prbench.analysis.explorer_data`: the
data as JSON inside the page, the script and styles inline, no server, no network; every text
from the data -- questions, answers, profiles, a judge's raw replies -- is set as text (never
parsed as HTML), and the JSON is escaped so that no ``</script>`` in the data ends the block.
:func:`write_explorers` writes one page per run and a comparison page (``prbench report``).

On the page: a text search (every word in the pair's id, question, answers, profile, rubric or
a judge's replies), filters by cell, domain, outcome, flag (an unreadable judge order, an order
flip, an unscored answer) and length-baseline agreement, sort by margin; one row per pair with
its score columns (score of each answer, or a judge's P(chosen), and the margin); per pair, each
order a judge was asked with its raw reply (collapsed), the parsed verdict and why an unreadable
order was unreadable, and how the pair counted under each metric. With two runs (the comparison
page) both side by side on the pairs they share, optionally only the pairs on which they
disagree.

The page's state lives in its address: every filter, the search and the runs compared are kept
in the URL fragment (``#cell=profile&outcome=wrong&q=knit``), so a reload or a shared link shows
the same pairs; each pair has a permalink (``#cell=profile&pair=ID``) that opens it. The
fragment never reaches a server, and the page reads it only as values of its own controls.
The stylesheet is :mod:`prbench.analysis.report_style`, shared with the report.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from prbench.analysis.explorer_data import FLAGS, NO_REPLY_LOGGED, run_data
from prbench.analysis.report_style import BASE, EXPLORER
from prbench.outputs import write_text


def _script_json(data: Any) -> str:
    """JSON safe inside ``<script>``: no ``<``, ``>``, ``&`` or line separators left raw."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                         ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(raw, escaped)
    return text


_SCRIPT = r"""
"use strict";
const DATA = JSON.parse(document.getElementById("explorer-data").textContent);
for (const run of DATA.runs) {  // long texts are stored once: resolve the indices
  for (const p of run.pairs) {
    for (const f of ["question", "chosen", "rejected", "profile"]) p[f] = DATA.strings[p[f]];
    p.aspects = DATA.aspects[p.aspects];
  }
}
const $ = (id) => document.getElementById(id);
function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}
function fmt(x) { return x === null || x === undefined ? "-" : Number(x).toFixed(4); }
function runName(i) {
  const r = DATA.runs[i];
  return r.label + (r.diagnostic ? " (DIAGNOSTIC)" : "");
}
function option(select, value, text) {
  const o = el("option", text); o.value = value; select.appendChild(o);
}
//: the controls whose values the URL keeps (#run=0&cell=profile&q=...), and their defaults
const STATE = {"run-a": "run", "run-b": "vs", "cell": "cell", "domain": "domain",
               "outcome": "outcome", "flag": "flag", "length": "length", "sort": "sort",
               "search": "q"};
let wanted = {};  // values from the URL for selects whose options are not filled yet
const PAGE = DATA.page_size;  // rows drawn at a time
let shown = PAGE;
let linked = null;  // the pair a permalink opened: [cell, id]
function readHash() {
  const params = new URLSearchParams(location.hash.replace(/^#/, ""));
  wanted = {};
  for (const [id, name] of Object.entries(STATE)) {
    if (params.has(name)) wanted[id] = params.get(name);
  }
  $("disagree").checked = params.get("disagree") === "1";
  linked = params.has("pair") ? [params.get("cell") || "", params.get("pair")] : null;
  for (const id of ["run-a", "run-b", "outcome", "flag", "length", "sort", "search"]) {
    if (id in wanted) { $(id).value = wanted[id]; delete wanted[id]; }
  }
}
function stateParams(extra) {
  const params = new URLSearchParams();
  for (const [id, name] of Object.entries(STATE)) {
    const v = $(id).value;
    if (v !== "" && !(id === "sort" && v === "margin-asc") && !(id === "run-a" && v === "0")
        && !(id === "run-b" && DATA.runs.length > 1 && v === "1")) params.set(name, v);
  }
  if (DATA.runs.length > 1 && $("run-b").value === "") params.set("vs", "");
  if ($("disagree").checked) params.set("disagree", "1");
  for (const [k, v] of Object.entries(extra || {})) params.set(k, v);
  return params.toString();
}
function writeHash() {
  const hash = stateParams(linked ? {pair: linked[1]} : null);
  history.replaceState(null, "", hash ? "#" + hash : location.pathname + location.search);
}
function fill(select, values, allText) {
  const keep = select.id in wanted ? wanted[select.id] : select.value;
  delete wanted[select.id];
  select.textContent = "";
  if (allText) option(select, "", allText);
  for (const v of values) option(select, v, v);
  if ([...select.options].some((o) => o.value === keep)) select.value = keep;
}
function key(p) { return p.cell + "\u0000" + p.id; }
function setup() {
  const a = $("run-a"), b = $("run-b");
  DATA.runs.forEach((r, i) => option(a, String(i), runName(i)));
  option(b, "", "(none)");
  DATA.runs.forEach((r, i) => option(b, String(i), runName(i)));
  if (DATA.runs.length > 1) { b.value = "1"; } else { $("compare").hidden = true; }
  if (DATA.runs.length < 2) { $("pick-a").hidden = true; }
  for (const id of ["run-a", "run-b", "cell", "domain", "outcome", "flag", "length", "sort",
                    "disagree"]) {
    $(id).addEventListener("change", () => {
      linked = null; shown = PAGE; render(); writeHash();
    });
  }
  $("search").addEventListener("input", () => {
    linked = null; shown = PAGE; render(); writeHash();
  });
  $("more").addEventListener("click", () => { shown += PAGE; render(); });
  window.addEventListener("hashchange", () => { readHash(); shown = PAGE; render(); });
  readHash();
  render();
}
//: the texts a search looks in, per pair (lower case, built once)
const haystack = new WeakMap();
function textOf(p) {
  let t = haystack.get(p);
  if (t === undefined) {
    const parts = [p.id, p.domain, p.question, p.chosen, p.rejected, p.profile];
    for (const x of p.aspects) parts.push(x.aspect, x.evidence, x.reason);
    for (const o of p.orders || []) if (o.reply) parts.push(o.reply);
    t = parts.join("\n").toLowerCase();
    haystack.set(p, t);
  }
  return t;
}
function matches(p, terms) { const t = textOf(p); return terms.every((w) => t.includes(w)); }
//: the summary line's columns: [header, CSS grid width (rem: the header row and the
//: pairs have different font sizes), cell of (pair, other run's pair)]
function columns(a, b) {
  const judge = a.pairs.some((p) => p.kind === "judge");
  const cols = [["outcome", "4.6rem", (p) => el("span", p.outcome, "badge " + p.outcome)]];
  if (b) cols.push(["vs", "4.6rem", (p, q) => el("span", q.outcome, "badge " + q.outcome)]);
  const titled = (text, cls) => { const x = el("span", text, cls); x.title = text; return x; };
  cols.push(["pair", "7rem", (p) => { const x = titled(p.id); x.style.fontWeight = "600";
                                      return x; }],
            ["domain", "9.5rem", (p) => titled(p.domain)],
            ["margin", "4.8rem", (p) => el("span", fmt(p.margin), "n")]);
  if (judge) {
    cols.push(["P(chosen)", "5rem", (p) => el("span", fmt(p.scores[0]), "n")]);
  } else {
    cols.push(["s(chosen)", "5.2rem", (p) => el("span", fmt(p.scores[0]), "n")],
              ["s(rejected)", "5.6rem", (p) => el("span", fmt(p.scores[1]), "n")]);
  }
  if (b) cols.push(["vs margin", "5.2rem", (p, q) => el("span", fmt(q.margin), "n")]);
  cols.push(["question", "minmax(0, 1fr)", (p) => {
    const span = el("span");
    if (p.flags.length) span.appendChild(el("span", "(" + p.flags.join(", ") + ") ", "flag"));
    span.appendChild(document.createTextNode(p.question));
    return span;
  }]);
  return cols;
}
function render() {
  const a = DATA.runs[Number($("run-a").value)] || DATA.runs[0];
  const bi = $("run-b").value;
  const b = bi === "" || bi === $("run-a").value || !DATA.runs[Number(bi)] ? null
    : DATA.runs[Number(bi)];
  const flags = [];
  if (a.sample || (b && b.sample)) flags.push("bundled SAMPLE data, not the benchmark");
  for (const r of [a, b]) {
    if (r && r.diagnostic) flags.push(r.label + " is DIAGNOSTIC (reads the hidden rubric)");
  }
  $("flags").textContent = flags.join("; ");
  $("source").textContent = "results: " + a.file + (b ? "  |  " + b.file : "");
  const rank = (c) => (c === "profile" ? 0 : c === "noprofile" ? 2 : 1);
  if (linked && linked[0]) wanted["cell"] = linked[0];
  fill($("cell"), [...new Set(a.pairs.map((p) => p.cell))].sort(
    (x, y) => rank(x) - rank(y) || (x < y ? -1 : x > y ? 1 : 0)), null);
  const cell = $("cell").value;
  let pairs = a.pairs.filter((p) => p.cell === cell);
  fill($("domain"), [...new Set(pairs.map((p) => p.domain))].sort(), "all domains");
  let other = null;
  if (b) {
    other = new Map(b.pairs.filter((p) => p.cell === cell).map((p) => [key(p), p]));
    pairs = pairs.filter((p) => other.has(key(p)));
  }
  const total = pairs.length;
  const domain = $("domain").value, outcome = $("outcome").value, length = $("length").value;
  if (domain) pairs = pairs.filter((p) => p.domain === domain);
  if (outcome) pairs = pairs.filter((p) => p.outcome === outcome);
  const flag = $("flag").value;
  if (flag) pairs = pairs.filter((p) => p.flags.includes(flag));
  if (length) pairs = pairs.filter((p) => p.length_agrees === (length === "agrees"));
  const terms = $("search").value.toLowerCase().split(/\s+/).filter((w) => w);
  if (terms.length) pairs = pairs.filter((p) => matches(p, terms));
  $("disagree-box").hidden = !b;
  let disagreeing = 0;
  if (b) {
    const differs = (p) => (p.outcome === "right") !== (other.get(key(p)).outcome === "right");
    disagreeing = pairs.filter(differs).length;
    if ($("disagree").checked) pairs = pairs.filter(differs);
  }
  const sort = $("sort").value;
  const m = (p) => (p.margin === null ? Infinity : p.margin);
  if (sort === "margin-asc") pairs.sort((x, y) => m(x) - m(y));
  else if (sort === "margin-desc") pairs.sort((x, y) => m(y) - m(x));
  else pairs.sort((x, y) => (x.id < y.id ? -1 : x.id > y.id ? 1 : 0));
  const counts = {right: 0, wrong: 0, tie: 0, invalid: 0};
  for (const p of pairs) counts[p.outcome] += 1;
  $("n-shown").textContent = String(pairs.length);
  $("n-total").textContent = String(total);
  for (const o of Object.keys(counts)) $("n-" + o).textContent = String(counts[o]);
  for (const f of DATA.flags) {
    $("n-flag-" + f).textContent = String(pairs.filter((p) => p.flags.includes(f)).length);
  }
  $("n-disagree").textContent = b ? String(disagreeing) : "-";
  $("disagree-note").hidden = !b;
  const cols = columns(a, b);
  const grid = cols.map((c) => c[1]).join(" ");
  const head = $("pair-head");
  head.textContent = "";
  const tips = {"margin": "score(chosen) - score(rejected); a judge: P(chosen) - P(rejected)",
    "s(chosen)": "the scorer's score of the chosen answer",
    "s(rejected)": "the scorer's score of the rejected answer",
    "P(chosen)": "the share of the judge's readable orders that picked the chosen answer",
    "vs": "the outcome of the run compared with", "vs margin": "its margin"};
  for (const c of cols) {
    const h = el("span", c[0], ["margin", "P(chosen)", "s(chosen)", "s(rejected)",
                                "vs margin"].includes(c[0]) ? "n" : "");
    if (tips[c[0]]) h.title = tips[c[0]];
    head.appendChild(h);
  }
  head.style.setProperty("--cols", grid);
  const list = $("pairs");
  list.style.setProperty("--cols", grid);
  list.textContent = "";
  // rows are drawn a page at a time (a run of the full benchmark has thousands of pairs); the
  // counts above are over all of them, and a linked pair is always drawn
  const at = linked ? pairs.findIndex((p) => p.id === linked[1]) : -1;
  shown = Math.max(shown, at + 1);
  for (const p of pairs.slice(0, shown)) {
    list.appendChild(card(p, a, b ? other.get(key(p)) : null, b, cols));
  }
  const rest = pairs.length - Math.min(shown, pairs.length);
  $("more").hidden = rest <= 0;
  $("more").textContent = "show " + Math.min(PAGE, rest) + " more of the " + rest
    + " pairs not drawn";
  if (linked) {
    const d = [...list.querySelectorAll("details.pair")].find((x) => x.dataset.id === linked[1]);
    if (d) { d.open = true; d.classList.add("linked"); d.scrollIntoView({block: "start"}); }
  }
}
function permalink(p) {
  return "#" + stateParams({cell: p.cell, pair: p.id}).split("&").filter((kv) =>
    /^(run|vs|cell|pair)=/.test(kv)).join("&");
}
function value(x) {
  if (Array.isArray(x)) return x.join(" of ");
  return Number.isInteger(x) ? String(x) : Number(x).toFixed(4);
}
function orderBox(o) {
  const d = el("div", null, "order");
  d.appendChild(el("b", o.order === "chosen first" ? "chosen answer shown first (as A)"
    : "chosen answer shown second (as B)"));
  const said = o.verdict === "unreadable"
    ? "no verdict (unreadable reply)" + (o.failure ? ": " + o.failure : "")
      + (o.detail ? " - " + o.detail : "")
    : (o.parsed ? "parsed verdict " + o.parsed + ": " : "") + o.verdict + " answer preferred";
  d.appendChild(el("div", said, o.verdict === "unreadable" ? "flag" : ""));
  if (!o.logged) {
    d.appendChild(el("div", DATA.no_reply, "muted"));
  } else if (o.reply === null) {
    d.appendChild(el("div", "no text came back from the judge", "muted"));
  } else {
    const r = el("details", null, "reply");
    r.appendChild(el("summary", "raw reply (" + o.reply.length + " characters as logged)"));
    r.appendChild(el("pre", o.reply, "box"));
    d.appendChild(r);
  }
  return d;
}
function side(p, run) {
  const box = el("div");
  box.appendChild(el("h4", runName(DATA.runs.indexOf(run))));
  const line = el("div");
  line.appendChild(el("span", p.outcome, "badge " + p.outcome));
  line.appendChild(el("span", "margin " + fmt(p.margin) + (p.kind === "judge"
    ? " (P(chosen) - P(rejected))" : " (score(chosen) - score(rejected))")));
  box.appendChild(line);
  for (const n of p.notes) box.appendChild(el("div", "warning: " + n, "flag"));
  if (p.kind === "judge") {
    box.appendChild(el("div", "pairwise judge: P(chosen) = " + fmt(p.scores[0])
      + " (the share of its readable orders that picked the chosen answer); orders asked:",
      "muted"));
    for (const o of p.orders) box.appendChild(orderBox(o));
  } else {
    box.appendChild(el("div", "score(chosen) = " + fmt(p.scores[0])
      + ", score(rejected) = " + fmt(p.scores[1]), "muted"));
    for (const k of Object.keys(p.unscored)) {
      box.appendChild(el("div", k + " answer left unscored: " + p.unscored[k], "flag"));
    }
  }
  box.appendChild(el("div", "how this pair counted:", "muted"));
  const ul = el("ul", null, "reasons");
  for (const r of p.reasons) {
    ul.appendChild(el("li", r.metric + " = " + value(r.value) + ": " + r.why));
  }
  box.appendChild(ul);
  box.appendChild(el("div", "length baseline (longer answer wins) "
    + (p.length_agrees ? "agrees" : "disagrees") + " with this outcome", "muted"));
  return box;
}
function card(p, a, q, b, cols) {
  const d = el("details", null, "pair");
  d.dataset.id = p.id;
  d.id = "pair-" + p.cell + "-" + p.id;
  const s = el("summary");
  for (const c of cols) s.appendChild(c[2](p, q));
  d.appendChild(s);
  const link = el("a", "permalink: open this pair", "permalink");
  link.href = permalink(p);
  link.title = "a link that opens this pair (copy it)";
  d.appendChild(link);
  d.appendChild(el("h4", "Question"));
  d.appendChild(el("div", p.question, "box"));
  d.appendChild(el("h4", "Profile as the scorer saw it (profile source: " + p.profile_source
    + ")"));
  d.appendChild(el("div", p.profile || "(no profile text" + (p.profile_status ? "; "
    + p.profile_status : "") + ")", "box"));
  const answers = el("div", null, "cols");
  for (const [name, text] of [["Chosen answer", p.chosen], ["Rejected answer", p.rejected]]) {
    const col = el("div");
    col.appendChild(el("h4", name));
    col.appendChild(el("div", text, "box"));
    answers.appendChild(col);
  }
  d.appendChild(answers);
  const verdicts = el("div", null, q ? "cols" : "");
  verdicts.appendChild(side(p, a));
  if (q) verdicts.appendChild(side(q, b));
  d.appendChild(verdicts);
  const diag = el("div", null, "diag");
  diag.appendChild(el("h4", "Rubric aspects (DIAGNOSTIC: hidden from the scorer)"));
  if (!p.aspects.length) diag.appendChild(el("div", "(none in the record)", "muted"));
  const ul = el("ul");
  for (const x of p.aspects) {
    const li = el("li");
    li.appendChild(el("b", x.aspect));
    if (x.evidence) li.appendChild(el("div", "evidence: " + x.evidence, "muted"));
    if (x.reason) li.appendChild(el("div", "reason: " + x.reason, "muted"));
    ul.appendChild(li);
  }
  diag.appendChild(ul);
  d.appendChild(diag);
  return d;
}
setup();
"""

_BODY = """
<h1>{title}</h1>
<p>{intro}</p>
<p id="flags" class="flag"></p>
<p id="source" class="muted"></p>
<div id="controls">
 <label id="pick-a">run <select id="run-a"></select></label>
 <label id="compare">compare with <select id="run-b"></select></label>
 <label>search <input type="search" id="search" placeholder="words in the pair's texts"
  title="pairs whose id, question, answers, profile, rubric or judge replies hold every word">
  </label>
 <label>condition <select id="cell"></select></label>
 <label>domain <select id="domain"></select></label>
 <label>outcome <select id="outcome"><option value="">all</option>
  <option value="right">right</option><option value="wrong">wrong</option>
  <option value="tie">tie</option><option value="invalid">invalid</option></select></label>
 <label>flag <select id="flag"><option value="">all</option>
  <option value="unreadable">an unreadable order (judge)</option>
  <option value="order-flip">an order flip (judge)</option>
  <option value="unscored">an unscored answer</option></select></label>
 <label>length baseline <select id="length"><option value="">all</option>
  <option value="agrees">agrees</option><option value="disagrees">disagrees</option>
  </select></label>
 <label>sort <select id="sort"><option value="margin-asc">margin, lowest first</option>
  <option value="margin-desc">margin, highest first</option><option value="id">pair id</option>
  </select></label>
 <label id="disagree-box"><input type="checkbox" id="disagree"> only pairs the two runs
  disagree on</label>
</div>
<p id="counts">showing <b id="n-shown">0</b> of <span id="n-total">0</span> pairs:
 right <span id="n-right">0</span>, wrong <span id="n-wrong">0</span>,
 tie <span id="n-tie">0</span>, invalid <span id="n-invalid">0</span>; flagged: an unreadable
 order <span id="n-flag-unreadable">0</span>, an order flip <span id="n-flag-order-flip">0</span>,
 an unscored answer <span id="n-flag-unscored">0</span><span id="disagree-note">;
 the two runs disagree (one right, the other not) on <span id="n-disagree">-</span> of them
 </span></p>
<div id="pair-head"></div>
<div id="pairs"></div>
<p><button type="button" id="more" hidden></button></p>
"""

_INTRO = (
    "Every pair the scorer scored, as logged by prbench eval --log_samples. Right: the chosen "
    "answer scored higher (a pairwise judge: strict acc, every order it was asked picked the "
    "chosen answer); a tie or a missing verdict (invalid) is not right. margin = "
    "score(chosen) minus score(rejected); for a judge P(chosen) minus P(rejected). A judge's "
    "raw replies are shown as the samples file keeps them: at most {keep:,} characters each, a "
    "longer one cut in the middle at a visible [cut: N more characters] marker. "
    "The length baseline picks the longer answer; "
    "'agrees' means it is right exactly where this run is. Rubric aspects are the user's hidden "
    "rubric: DIAGNOSTIC, never shown to the scorer. Click a pair to open it; its permalink "
    "opens it again, and the page's address keeps the filters."
)


#: the long text fields of a pair, stored once per page (runs and conditions share questions,
#: answers and rubric aspects)
_SHARED_TEXT = ("question", "chosen", "rejected", "profile")


def _interned(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The page's data: each distinct long text once, pairs pointing at it by index."""
    strings: dict[str, int] = {}
    aspects: dict[str, int] = {}
    out = []
    for run in runs:
        pairs = []
        for pair in run["pairs"]:
            pair = dict(pair)
            for field in _SHARED_TEXT:
                pair[field] = strings.setdefault(str(pair[field]), len(strings))
            pair["aspects"] = aspects.setdefault(json.dumps(pair["aspects"]), len(aspects))
            pairs.append(pair)
        out.append({**run, "pairs": pairs})
    return {"strings": list(strings), "aspects": [json.loads(a) for a in aspects], "runs": out,
            "flags": list(FLAGS), "no_reply": NO_REPLY_LOGGED}


#: pairs drawn at a time (the rest behind a "show more" button; counts cover them all)
PAGE_SIZE = 500


def explorer_html(runs: Sequence[Mapping[str, Any]], title: str, *,
                  page_size: int = PAGE_SIZE, panel: str = "") -> str:
    """One self-contained page over ``runs`` (each from :func:`run_data`).

    One run: its pairs. Two or more: pick two, side by side on the pairs both scored. The page
    draws ``page_size`` pairs at a time. ``panel``: static HTML shown first, already escaped
    (the run panels of :mod:`prbench.analysis.run_panel`).
    """
    from prbench.judges.order_tally import REPLY_KEEP_CHARS

    intro = _INTRO.format(keep=REPLY_KEEP_CHARS)
    body = _BODY.format(title=html.escape(title), intro=html.escape(intro))
    return "\n".join([
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>{html.escape(title)}</title>",
        f"<style>{BASE}{EXPLORER}</style></head><body><main>",
        panel,
        body,
        f"<script type='application/json' id='explorer-data'>"
        f"{_script_json({**_interned(runs), 'page_size': max(1, int(page_size))})}</script>",
        f"<script>{_SCRIPT}</script>",
        "</main></body></html>",
    ])


def _slug(label: str, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-.") or "run"
    slug, i = base, 2
    while slug in taken:
        slug, i = f"{base}-{i}", i + 1
    taken.add(slug)
    return slug


def write_explorers(runs: Sequence[Any], out_dir: Path,
                    pages: dict[Path, Path] | None = None) -> list[tuple[str, Path]]:
    """One page per run with samples, and a comparison page when two or more have them.

    ``pages``, when given, receives each run's results file -> its page.

    Returns:
        ``(what, path)`` per page written, in ``out_dir / "explorer"``.
    """
    from prbench.analysis.run_panel import panel_html

    found = [(r, run_data(r)) for r in runs if r.samples_found]
    panels = {id(d): panel_html(r) for r, d in found if d["pairs"]}
    paths = {id(d): r.path for r, d in found}
    datas = [d for _, d in found if d["pairs"]]
    if not datas:
        return []
    folder = out_dir / "explorer"
    folder.mkdir(parents=True, exist_ok=True)
    taken: set[str] = set()
    written = []
    for data in datas:
        path = folder / f"{_slug(data['label'], taken)}.html"
        write_text(path, explorer_html([data], f"Pairs of {data['label']}",
                                       panel=panels[id(data)]) + "\n")
        if pages is not None:
            pages[paths[id(data)]] = path
        name = data["label"] + (" (DIAGNOSTIC)" if data["diagnostic"] else "")
        written.append((f"{name}: {len(data['pairs'])} scored pairs", path))
    if len(datas) > 1:
        path = folder / f"{_slug('compare', taken)}.html"
        write_text(path, explorer_html(datas, "Pairs of two runs side by side",
                                       panel="".join(panels.values())) + "\n")
        written.append(("two runs side by side (pick them; the pairs they disagree on)", path))
    return written


__all__ = ["PAGE_SIZE", "explorer_html", "write_explorers"]
