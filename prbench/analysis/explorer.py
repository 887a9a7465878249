"""Pair explorer page: one static, self-contained HTML page over the pairs of one or two runs.

:func:`explorer_html` writes the page for the data of :mod:`prbench.analysis.explorer_data`: the
data as JSON inside the page, the script and styles inline, no server, no network; every text
from the data -- questions, answers, profiles, a judge's raw replies -- is set as text (never
parsed as HTML), and the JSON is escaped so that no ``</script>`` in the data ends the block.
:func:`write_explorers` writes one page per run and a comparison page (``prbench report``).

On the page: filters by cell, domain, outcome, flag (an unreadable judge order, an order flip,
an unscored answer) and length-baseline agreement, sort by margin; per pair, each order a judge
was asked with its raw reply (collapsed), the parsed verdict and why an unreadable order was
unreadable, and how the pair counted under each metric. With two runs (the comparison page)
both side by side on the pairs they share, optionally only the pairs on which they disagree.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from prbench.analysis.explorer_data import FLAGS, NO_REPLY_LOGGED, run_data
from prbench.outputs import write_text


def _script_json(data: Any) -> str:
    """JSON safe inside ``<script>``: no ``<``, ``>``, ``&`` or line separators left raw."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                         ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(raw, escaped)
    return text


_STYLE = """
body{font-family:sans-serif;max-width:1200px;margin:1.5em auto;padding:0 1em;color:#222}
#controls{display:flex;flex-wrap:wrap;gap:.6em 1.2em;align-items:center;padding:.6em;
 background:#f4f4f4;border:1px solid #ddd;position:sticky;top:0}
#controls label{font-size:13px}
#counts{font-size:14px;margin:.7em 0}
.pair{border:1px solid #ccc;margin:.35em 0;padding:.3em .6em;border-radius:3px}
.pair>summary{cursor:pointer;font-size:13px}
.badge{display:inline-block;min-width:4.5em;text-align:center;border-radius:3px;padding:0 .3em;
 margin-right:.4em;color:#fff;font-size:12px}
.right{background:#2e7d32}.wrong{background:#c62828}.tie{background:#8d6e00}
.invalid{background:#555}
.flag{color:#b71c1c;font-weight:bold}
.cols{display:grid;grid-template-columns:1fr 1fr;gap:.8em}
.box{background:#fafafa;border:1px solid #e3e3e3;padding:.4em;white-space:pre-wrap;
 font-size:13px}
h4{margin:.6em 0 .2em}
.diag{border-left:4px solid #f2a541;padding-left:.5em}
.muted{color:#666;font-size:12px}
.order{border-left:3px solid #90a4ae;padding-left:.5em;margin:.4em 0}
.reply>summary{cursor:pointer;font-size:12px;color:#37474f}
pre.box{max-height:24em;overflow:auto;font-family:monospace}
.reasons{font-size:13px;margin:.2em 0}
"""

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
function fill(select, values, allText) {
  const keep = select.value;
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
    $(id).addEventListener("change", render);
  }
  render();
}
function render() {
  const a = DATA.runs[Number($("run-a").value)];
  const bi = $("run-b").value;
  const b = bi === "" || bi === $("run-a").value ? null : DATA.runs[Number(bi)];
  const flags = [];
  if (a.sample || (b && b.sample)) flags.push("bundled SAMPLE data, not the benchmark");
  for (const r of [a, b]) {
    if (r && r.diagnostic) flags.push(r.label + " is DIAGNOSTIC (reads the hidden rubric)");
  }
  $("flags").textContent = flags.join("; ");
  $("source").textContent = "results: " + a.file + (b ? "  |  " + b.file : "");
  const rank = (c) => (c === "profile" ? 0 : c === "noprofile" ? 2 : 1);
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
  const list = $("pairs");
  list.textContent = "";
  for (const p of pairs) list.appendChild(card(p, a, b ? other.get(key(p)) : null, b));
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
function card(p, a, q, b) {
  const d = el("details", null, "pair");
  d.dataset.id = p.id;
  const s = el("summary");
  s.appendChild(el("span", p.outcome, "badge " + p.outcome));
  if (q) s.appendChild(el("span", q.outcome, "badge " + q.outcome));
  s.appendChild(el("b", p.id + " "));
  s.appendChild(el("span", "[" + p.domain + "] margin " + fmt(p.margin) + " - "));
  if (p.flags.length) s.appendChild(el("span", "(" + p.flags.join(", ") + ") ", "flag"));
  s.appendChild(el("span", p.question));
  d.appendChild(s);
  d.appendChild(el("h4", "Question"));
  d.appendChild(el("div", p.question, "box"));
  d.appendChild(el("h4", "Profile as the scorer saw it (profile source: " + p.profile_source
    + ")"));
  d.appendChild(el("div", p.profile || "(no profile text" + (p.profile_status ? "; "
    + p.profile_status : "") + ")", "box"));
  const cols = el("div", null, "cols");
  for (const [name, text] of [["Chosen answer", p.chosen], ["Rejected answer", p.rejected]]) {
    const col = el("div");
    col.appendChild(el("h4", name));
    col.appendChild(el("div", text, "box"));
    cols.appendChild(col);
  }
  d.appendChild(cols);
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
<div id="pairs"></div>
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
    "rubric: DIAGNOSTIC, never shown to the scorer. Click a pair to open it."
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


def explorer_html(runs: Sequence[Mapping[str, Any]], title: str) -> str:
    """One self-contained page over ``runs`` (each from :func:`run_data`).

    One run: its pairs. Two or more: pick two, side by side on the pairs both scored.
    """
    from prbench.judges.order_tally import REPLY_KEEP_CHARS

    intro = _INTRO.format(keep=REPLY_KEEP_CHARS)
    body = _BODY.format(title=html.escape(title), intro=html.escape(intro))
    return "\n".join([
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>{html.escape(title)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        body,
        f"<script type='application/json' id='explorer-data'>"
        f"{_script_json(_interned(runs))}</script>",
        f"<script>{_SCRIPT}</script>",
        "</body></html>",
    ])


def _slug(label: str, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-.") or "run"
    slug, i = base, 2
    while slug in taken:
        slug, i = f"{base}-{i}", i + 1
    taken.add(slug)
    return slug


def write_explorers(runs: Sequence[Any], out_dir: Path) -> list[tuple[str, Path]]:
    """One page per run with samples, and a comparison page when two or more have them.

    Returns:
        ``(what, path)`` per page written, in ``out_dir / "explorer"``.
    """
    datas = [run_data(r) for r in runs if r.samples_found]
    datas = [d for d in datas if d["pairs"]]
    if not datas:
        return []
    folder = out_dir / "explorer"
    folder.mkdir(parents=True, exist_ok=True)
    taken: set[str] = set()
    written = []
    for data in datas:
        path = folder / f"{_slug(data['label'], taken)}.html"
        write_text(path, explorer_html([data], f"Pairs of {data['label']}") + "\n")
        name = data["label"] + (" (DIAGNOSTIC)" if data["diagnostic"] else "")
        written.append((f"{name}: {len(data['pairs'])} scored pairs", path))
    if len(datas) > 1:
        path = folder / f"{_slug('compare', taken)}.html"
        write_text(path, explorer_html(datas, "Pairs of two runs side by side") + "\n")
        written.append(("two runs side by side (pick them; the pairs they disagree on)", path))
    return written


__all__ = ["explorer_html", "write_explorers"]
