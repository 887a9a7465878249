"""Pair explorer page: one static, self-contained HTML page over the pairs of one or two runs.

:func:`explorer_html` writes the page for the data of :mod:`prbench.analysis.explorer_data`: the
data as JSON inside the page, the script and styles inline, no server, no network; every text
from the data -- questions, answers, profiles, a judge's raw replies -- is set as text (never
parsed as HTML), and the JSON is escaped so that no ``</script>`` in the data ends the block.
:func:`write_explorers` writes one page per run and a comparison page (``prbench report``).

On the page: a text search (every word in the pair's id, question, answers, profile, rubric or
a judge's replies), filters by cell, domain, outcome, flag (an unreadable judge order, an order
flip, an unscored answer), length-baseline agreement and a range (min / max) on one numeric
column; one row per pair with its score columns (score of each answer, or a judge's P(chosen),
and the margin), its input tokens and time, sorted by any column (the "sort" list or a click on
the column's header); per pair, each order a judge was asked with its raw reply (collapsed), the
parsed verdict and why an unreadable order was unreadable, how the pair counted under each
metric, the input as scored (collapsed: each answer's text as sent with a truncation's cut and
the profile marked, or a judge's messages and reply per order; "input not recorded" for a line
without it) and the samples line as JSON ("raw"). With two runs (the comparison page) both side
by side on the pairs they share, optionally only the pairs on which they disagree. Keys: ``j`` /
``k`` open the next / previous pair, ``/`` goes to the search. At a phone's width (390 pixels)
the rows and columns wrap and nothing scrolls sideways.

The page's state lives in its address: every filter, the search, the range, the sort and the
runs compared are kept in the URL fragment (``#cell=profile&outcome=wrong&q=knit``), so a reload
or a shared link shows the same pairs; each pair has a permalink (``#cell=profile&pair=ID``)
that opens it, scrolled to just below the sticky filter bar. The fragment never reaches a
server, and the page reads it only as values of its own controls. Long texts are stored once
in the page (questions, answers, and inside the input as scored and the raw line, by
:func:`_pack`). The stylesheet is :mod:`prbench.analysis.report_style`, shared with the report.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from prbench.analysis.explorer_data import FLAGS, NO_INPUT, NO_REPLY_LOGGED, run_data
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
//: a packed value (the input as scored, the raw samples line): "\u0000" + N is the long text
//: DATA.strings[N], "\u0000NaN" / "\u0000Infinity" / "\u0000-Infinity" the number, and a text
//: that began with "\u0000" has one more in front
function unpack(v) {
  if (typeof v === "string") {
    if (v[0] !== "\u0000") return v;
    const r = v.slice(1);
    if (r[0] === "\u0000") return r;
    if (r === "NaN") return NaN;
    if (r === "Infinity") return Infinity;
    if (r === "-Infinity") return -Infinity;
    return DATA.strings[Number(r)];
  }
  if (Array.isArray(v)) return v.map(unpack);
  if (v && typeof v === "object") {
    const out = {};
    for (const k of Object.keys(v)) out[k] = unpack(v[k]);
    return out;
  }
  return v;
}
for (const run of DATA.runs) {  // long texts are stored once: resolve the indices
  for (const p of run.pairs) {
    for (const f of ["question", "chosen", "rejected", "profile"]) p[f] = DATA.strings[p[f]];
    p.aspects = DATA.aspects[p.aspects];
    p.input = unpack(p.input);
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
function secs(x) { return x === null || x === undefined ? "-" : Number(x).toFixed(3); }
function count(x) {
  return x === null || x === undefined ? "-" : Number(x).toLocaleString("en-US");
}
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
               "search": "q", "range-col": "range", "range-min": "min", "range-max": "max"};
//: controls whose options are fixed in the page (the others are filled when it renders)
const FIXED = ["run-a", "run-b", "outcome", "flag", "length", "search", "range-min",
               "range-max"];
let wanted = {};  // values from the URL for selects whose options are not filled yet
const PAGE = DATA.page_size;  // rows drawn at a time
let shown = PAGE;
let linked = null;  // the pair a permalink opened: [cell, id]
let cursor = null;  // the pair j / k last moved to (its id)
function readHash() {
  const params = new URLSearchParams(location.hash.replace(/^#/, ""));
  wanted = {};
  for (const [id, name] of Object.entries(STATE)) {
    if (params.has(name)) wanted[id] = params.get(name);
  }
  $("disagree").checked = params.get("disagree") === "1";
  linked = params.has("pair") ? [params.get("cell") || "", params.get("pair")] : null;
  cursor = linked ? linked[1] : null;
  for (const id of FIXED) {
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
//: fill a select with [value, text] options, keeping the value asked for (URL) or shown
function fill(select, values, allText) {
  const keep = select.id in wanted ? wanted[select.id] : select.value;
  delete wanted[select.id];
  select.textContent = "";
  if (allText) option(select, "", allText);
  for (const v of values) {
    if (Array.isArray(v)) option(select, v[0], v[1]); else option(select, v, v);
  }
  if ([...select.options].some((o) => o.value === keep)) select.value = keep;
}
function key(p) { return p.cell + "\u0000" + p.id; }
function changed() { linked = null; shown = PAGE; render(); writeHash(); }
function setup() {
  const a = $("run-a"), b = $("run-b");
  DATA.runs.forEach((r, i) => option(a, String(i), runName(i)));
  option(b, "", "(none)");
  DATA.runs.forEach((r, i) => option(b, String(i), runName(i)));
  if (DATA.runs.length > 1) { b.value = "1"; } else { $("compare").hidden = true; }
  if (DATA.runs.length < 2) { $("pick-a").hidden = true; }
  for (const id of ["run-a", "run-b", "cell", "domain", "outcome", "flag", "length", "sort",
                    "disagree", "range-col"]) {
    $(id).addEventListener("change", changed);
  }
  for (const id of ["search", "range-min", "range-max"]) $(id).addEventListener("input", changed);
  $("more").addEventListener("click", () => { shown += PAGE; render(); });
  $("pair-head").addEventListener("click", (e) => {
    const button = e.target.closest("button[data-sort]");
    if (!button) return;
    const k = button.dataset.sort;
    $("sort").value = sortOf() === k + "-asc" ? k + "-desc" : k + "-asc";
    changed();
  });
  window.addEventListener("hashchange", () => { readHash(); shown = PAGE; render(); });
  window.addEventListener("resize", barHeight);
  document.addEventListener("keydown", keys);
  readHash();
  render();
}
//: the sticky filter bar's height, so that a pair scrolled to sits below it
function barHeight() {
  const bar = $("controls");
  const sticky = getComputedStyle(bar).position === "sticky";
  document.documentElement.style.setProperty("--bar", (sticky ? bar.offsetHeight : 0) + "px");
}
function keys(e) {
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  const t = e.target;
  const typing = t && (t.isContentEditable || /^(SELECT|TEXTAREA)$/.test(t.tagName)
    || (t.tagName === "INPUT" && !/^(checkbox|radio|button|submit|reset)$/.test(t.type)));
  if (typing) return;  // a key typed into a field is the field's
  if (e.key === "/") {
    e.preventDefault(); $("search").focus(); $("search").select();
  } else if (e.key === "j" || e.key === "k") {
    e.preventDefault(); step(e.key === "j" ? 1 : -1);
  }
}
//: j / k: open the next / previous pair, close the one left if j / k opened it
function step(by) {
  let rows = [...$("pairs").querySelectorAll("details.pair")];
  const at = rows.findIndex((d) => d.dataset.id === cursor);
  const next = at < 0 ? (by > 0 ? 0 : rows.length - 1) : at + by;
  if (next >= rows.length && !$("more").hidden) {
    shown += PAGE; render();
    rows = [...$("pairs").querySelectorAll("details.pair")];
  }
  if (next < 0 || next >= rows.length) return;
  if (at >= 0 && rows[at]) {
    rows[at].classList.remove("current");
    if (rows[at].dataset.keyed) { rows[at].open = false; delete rows[at].dataset.keyed; }
  }
  const d = rows[next];
  if (!d.open) { d.open = true; d.dataset.keyed = "1"; }
  d.classList.add("current");
  cursor = d.dataset.id;
  linked = [$("cell").value, cursor];
  writeHash();
  barHeight();
  d.scrollIntoView({block: "start"});
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
const RANK = {right: 0, wrong: 1, tie: 2, invalid: 3};
//: the summary line's columns: key (sort, range), header, CSS grid width (rem: the header
//: row and the pairs have different font sizes), cell of (pair, other run's pair), the value
//: sorted on, whether it is a number (a range filter applies), the header's tooltip
function columns(a, b) {
  const judge = a.pairs.some((p) => p.kind === "judge");
  const col = (k, head, width, cell, val, num, tip) => ({k, head, width, cell, val, num, tip});
  const titled = (text, cls) => { const x = el("span", text, cls); x.title = text; return x; };
  const cols = [col("outcome", "outcome", "4.6rem",
    (p) => el("span", p.outcome, "badge " + p.outcome), (p) => RANK[p.outcome], false)];
  if (b) cols.push(col("vs", "vs", "4.6rem", (p, q) => el("span", q.outcome, "badge "
    + q.outcome), (p, q) => RANK[q.outcome], false, "the outcome of the run compared with"));
  cols.push(col("id", "pair", "7rem", (p) => { const x = titled(p.id, "id");
                                               x.style.fontWeight = "600"; return x; },
                (p) => p.id, false),
            col("domain", "domain", "9.5rem", (p) => titled(p.domain), (p) => p.domain, false),
            col("margin", "margin", "4.8rem", (p) => el("span", fmt(p.margin), "n"),
                (p) => p.margin, true,
                "score(chosen) - score(rejected); a judge: P(chosen) - P(rejected)"));
  if (judge) {
    cols.push(col("p", "P(chosen)", "5rem", (p) => el("span", fmt(p.scores[0]), "n"),
      (p) => p.scores[0], true,
      "the share of the judge's readable orders that picked the chosen answer"));
  } else {
    cols.push(col("sc", "s(chosen)", "5.2rem", (p) => el("span", fmt(p.scores[0]), "n"),
                  (p) => p.scores[0], true, "the scorer's score of the chosen answer"),
              col("sr", "s(rejected)", "5.6rem", (p) => el("span", fmt(p.scores[1]), "n"),
                  (p) => p.scores[1], true, "the scorer's score of the rejected answer"));
  }
  if (b) cols.push(col("vsmargin", "vs margin", "5.2rem", (p, q) => el("span", fmt(q.margin),
    "n"), (p, q) => q.margin, true, "its margin"));
  cols.push(col("tokens", "tokens", "4.6rem", (p) => el("span", count(p.tokens), "n"),
                (p) => p.tokens, true, "input tokens sent to the scorer: the sum over the two "
                + "answers (a judge: over its orders); - where the input was not recorded"),
            col("time", "time s", "4.2rem", (p) => el("span", secs(p.time_s), "n"),
                (p) => p.time_s, true, "the scorer's time on this pair in seconds (its share "
                + "of the batches); - for a score from the cache or an input not recorded"));
  cols.push(col("question", "question", "minmax(0, 1fr)", (p) => {
    const span = el("span", null, "question");
    if (p.flags.length) span.appendChild(el("span", "(" + p.flags.join(", ") + ") ", "flag"));
    span.appendChild(document.createTextNode(p.question));
    return span;
  }, (p) => p.question, false));
  return cols;
}
//: the sort asked for, as "KEY-asc" / "KEY-desc" ("id", an older link's, is the pair id)
function sortOf() {
  const v = $("sort").value || "margin-asc";
  return v === "id" ? "id-asc" : v;
}
function compare(x, y) {
  if (x === y) return 0;
  if (x === null || x === undefined || Number.isNaN(x)) return 1;  // no value: last
  if (y === null || y === undefined || Number.isNaN(y)) return -1;
  return x < y ? -1 : 1;
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
  const cols = columns(a, b);
  const sorts = [];
  for (const c of cols) {
    const ranked = c.k === "outcome" || c.k === "vs";  // right, wrong, tie, invalid
    sorts.push([c.k === "id" ? "id" : c.k + "-asc", c.head + (c.num ? ", lowest first"
      : ranked ? ", right first" : ", A to Z")],
    [c.k + "-desc", c.head + (c.num ? ", highest first" : ranked ? ", invalid first"
      : ", Z to A")]);
  }
  fill($("sort"), sorts, null);
  fill($("range-col"), cols.filter((c) => c.num).map((c) => [c.k, c.head]), "(no range)");
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
  const ranged = cols.find((c) => c.k === $("range-col").value);
  const lo = parseFloat($("range-min").value), hi = parseFloat($("range-max").value);
  $("range-min").disabled = $("range-max").disabled = !ranged;
  if (ranged && (!Number.isNaN(lo) || !Number.isNaN(hi))) {
    pairs = pairs.filter((p) => {
      const v = ranged.val(p, other ? other.get(key(p)) : null);
      return v !== null && v !== undefined && !Number.isNaN(v)
        && (Number.isNaN(lo) || v >= lo) && (Number.isNaN(hi) || v <= hi);
    });
  }
  $("disagree-box").hidden = !b;
  let disagreeing = 0;
  if (b) {
    const differs = (p) => (p.outcome === "right") !== (other.get(key(p)).outcome === "right");
    disagreeing = pairs.filter(differs).length;
    if ($("disagree").checked) pairs = pairs.filter(differs);
  }
  const sort = sortOf();
  const by = cols.find((c) => sort === c.k + "-asc" || sort === c.k + "-desc")
    || cols.find((c) => c.k === "margin");
  const desc = sort.endsWith("-desc");
  const val = (p) => by.val(p, other ? other.get(key(p)) : null);
  pairs.sort((x, y) => {
    const vx = val(x), vy = val(y);
    const none = (v) => v === null || v === undefined || Number.isNaN(v);
    const order = none(vx) || none(vy) ? compare(vx, vy)  // no value: last either way
      : (desc ? -1 : 1) * compare(vx, vy);
    return order || compare(x.id, y.id);
  });
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
  const grid = cols.map((c) => c.width).join(" ");
  const head = $("pair-head");
  head.textContent = "";
  for (const c of cols) {
    const h = el("button", c.head, "sort-head" + (c.num ? " n" : ""));
    h.type = "button";
    h.dataset.sort = c.k;
    h.title = (c.tip ? c.tip + "; " : "") + "click to sort by it (again: the other way)";
    if (c === by) {
      h.setAttribute("aria-sort", desc ? "descending" : "ascending");
      h.appendChild(el("span", desc ? " \u25bc" : " \u25b2", "arrow"));
    }
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
  barHeight();
  if (linked) {
    const d = [...list.querySelectorAll("details.pair")].find((x) => x.dataset.id === linked[1]);
    if (d) {
      d.open = true; d.classList.add("linked", "current"); cursor = linked[1];
      d.scrollIntoView({block: "start"});
    }
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
// -- the input as scored -------------------------------------------------------------------
//: one line of facts about an input: tokens, characters, sha256, time
function facts(x, full) {
  const out = el("div", null, "facts muted");
  const parts = [];
  if (x.tokens === null) parts.push("tokens: not counted (the scorer has no tokenizer)");
  else parts.push("tokens sent " + count(x.tokens) + (full && x.tokens_full !== null
    ? " / before truncation " + count(x.tokens_full) : ""));
  parts.push(count(x.chars) + " characters");
  if (x.time_s !== null) parts.push("time " + secs(x.time_s) + " s");
  out.appendChild(el("span", parts.join(" \u00b7 ")));
  if (x.sha256) {
    const h = el("span", " \u00b7 sha256 " + x.sha256.slice(0, 12), "sha");
    h.title = x.sha256;
    out.appendChild(h);
  }
  return out;
}
//: the notes under an input's facts: only its head kept, a score from the cache
function notes(x, box, what) {
  if (x.clipped) {
    box.appendChild(el("div", "clipped: the samples file keeps the first " + count(
      what) + " of its " + count(x.chars) + " characters; the sha256 is of the full input",
    "note"));
  }
  if (x.cached) {
    box.appendChild(el("div", "cached: the score came from prbench's score cache; this input "
      + "was rebuilt, not sent again", "note"));
  }
}
//: the text as scored, the cut marked (the dropped part greyed, a marker where it was cut)
//: and the profile highlighted; every piece set as text
function scoredText(x) {
  const pre = el("pre", null, "box scored");
  const t = x.text, n = t.length;
  const cut = x.cut && x.cut.char !== null ? x.cut : null;  // no offsets: said in a note
  const at = cut ? Math.min(cut.char, n) : -1;
  const upto = cut && cut.side === "middle" ? Math.min(cut.end_char, n) : -1;
  const prof = x.profile ? [Math.min(x.profile[0], n), Math.min(x.profile[1], n)] : null;
  const bounds = new Set([0, n]);
  if (cut) bounds.add(at);
  if (upto >= 0) bounds.add(upto);
  if (prof) { bounds.add(prof[0]); bounds.add(prof[1]); }
  const marks = [...bounds].sort((u, v) => u - v);
  const titles = {left: "truncated on the left: the text before this mark was not sent",
    right: "truncated on the right: the text after this mark was not sent",
    middle: "cut in the middle: the greyed text after this mark was not sent"};
  for (let i = 0; i < marks.length; i++) {
    const s = marks[i];
    if (cut && s === at) {
      const m = el("span", "\u2702 " + (cut.tokens_dropped === null ? "cut" : count(
        cut.tokens_dropped) + " tokens dropped") + " (" + cut.side + ")", "cut-marker");
      m.title = titles[cut.side];
      pre.appendChild(m);
    }
    const e = marks[i + 1];
    if (e === undefined || e <= s) continue;
    const dropped = cut && (cut.side === "left" ? e <= at : cut.side === "right" ? s >= at
      : s >= at && e <= upto);
    const inProfile = prof && s >= prof[0] && e <= prof[1];
    const part = el(inProfile ? "mark" : "span", t.slice(s, e),
      (dropped ? "dropped" : "kept") + (inProfile ? " profile" : ""));
    if (dropped) part.title = "dropped: not sent to the scorer";
    if (inProfile) part.title = (dropped ? part.title + "; " : "") + "the user's profile";
    pre.appendChild(part);
  }
  return pre;
}
function messageList(messages) {
  const box = el("div", null, "messages");
  messages.forEach((m, i) => {
    const one = el("div", null, "message");
    one.appendChild(el("b", "message " + (i + 1) + ": " + m.role));
    one.appendChild(el("pre", m.content, "box"));
    box.appendChild(one);
  });
  return box;
}
function answerInput(name, x) {
  const box = el("div", null, "answer-input");
  box.dataset.answer = name;
  box.appendChild(el("h4", name + " answer, as scored"));
  box.appendChild(facts(x, true));
  notes(x, box, x.text.length);
  if (x.cut && x.cut.char === null) {
    box.appendChild(el("div", "\u2702 cut (" + x.cut.side + "): the tokenizer gives no "
      + "character offsets, so where is not marked", "note"));
  } else if (x.cut && x.cut.char > x.text.length) {
    box.appendChild(el("div", "the cut lies at character " + count(x.cut.char)
      + ", past the characters kept here", "note"));
  }
  if (x.profile === null) box.appendChild(el("div", "no profile located in this input",
    "muted"));
  box.appendChild(scoredText(x));
  if (x.cut && x.cut.text_sent !== null) {
    const m = el("details", null, "sent");
    m.appendChild(el("summary", "the text tokenised (the cut is not one span)"));
    m.appendChild(el("pre", x.cut.text_sent, "box text-sent"));
    box.appendChild(m);
  }
  if (x.reply !== null && x.reply !== undefined) {
    box.appendChild(el("b", "the judge's reply"));
    box.appendChild(el("pre", x.reply, "box reply-text"));
  }
  if (x.messages) {
    const m = el("details", null, "sent");
    m.appendChild(el("summary", "the chat messages as sent (" + x.messages.length + ")"));
    m.appendChild(messageList(x.messages));
    box.appendChild(m);
  }
  return box;
}
function orderInput(o, i) {
  const box = el("div", null, "order-input");
  box.appendChild(el("h4", "order " + (i + 1) + ": the " + o.shown_first
    + " answer shown first"));
  box.appendChild(facts(o, false));
  const longest = Math.max(0, ...o.messages.map((m) => m.content.length));
  notes(o, box, longest);
  box.appendChild(messageList(o.messages));
  box.appendChild(el("b", "the judge's reply"));
  if (o.reply === null) box.appendChild(el("div", "no reply recorded", "muted"));
  else box.appendChild(el("pre", o.reply, "box reply-text"));
  return box;
}
function inputSummary(x) {
  if (!x) return DATA.no_input;
  const parts = x.answers ? Object.keys(x.answers) : (x.orders || []).map((o, i) => "order "
    + (i + 1));
  const items = x.answers ? Object.values(x.answers) : (x.orders || []);
  const cut = items.some((y) => y.cut) ? "; \u2702 truncated" : "";
  const cached = items.some((y) => y.cached) ? "; from the score cache" : "";
  return "input as scored: " + parts.join(", ") + cut + cached;
}
function inputView(p) {
  const d = el("details", null, "input");
  d.appendChild(el("summary", inputSummary(p.input)));
  d.addEventListener("toggle", () => {
    if (!d.open || d.dataset.built) return;
    d.dataset.built = "1";
    const x = p.input;
    if (!x) { d.appendChild(el("div", DATA.no_input, "muted")); return; }
    const body = el("div", null, x.answers ? "cols" : "");
    for (const [name, y] of Object.entries(x.answers || {})) {
      body.appendChild(answerInput(name, y));
    }
    (x.orders || []).forEach((o, i) => body.appendChild(orderInput(o, i)));
    d.appendChild(body);
  });
  return d;
}
//: JSON as Python reads it back (NaN, Infinity kept), two spaces an indent level
function pretty(v, indent) {
  if (typeof v === "number") return Number.isFinite(v) ? JSON.stringify(v) : String(v);
  if (v === null || typeof v !== "object") return JSON.stringify(v);
  const inner = indent + "  ";
  if (Array.isArray(v)) {
    return v.length ? "[\n" + v.map((x) => inner + pretty(x, inner)).join(",\n") + "\n"
      + indent + "]" : "[]";
  }
  const ks = Object.keys(v);
  return ks.length ? "{\n" + ks.map((k) => inner + JSON.stringify(k) + ": "
    + pretty(v[k], inner)).join(",\n") + "\n" + indent + "}" : "{}";
}
function rawView(p) {
  const d = el("details", null, "raw");
  d.appendChild(el("summary", "raw: the samples line as JSON"));
  d.addEventListener("toggle", () => {
    if (!d.open || d.dataset.built) return;
    d.dataset.built = "1";
    d.appendChild(el("pre", pretty(unpack(p.raw), ""), "box raw-json"));
  });
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
  box.appendChild(inputView(p));
  box.appendChild(rawView(p));
  return box;
}
function card(p, a, q, b, cols) {
  const d = el("details", null, "pair" + (p.id === cursor ? " current" : ""));
  d.dataset.id = p.id;
  d.id = "pair-" + p.cell + "-" + p.id;
  const s = el("summary");
  for (const c of cols) s.appendChild(c.cell(p, q));
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
 <label>sort <select id="sort" title="or click a column's header"></select></label>
 <span id="range"><label>range <select id="range-col"
  title="keep the pairs whose value in this column lies between min and max"></select></label>
  <label>min <input type="number" step="any" id="range-min" class="bound"></label>
  <label>max <input type="number" step="any" id="range-max" class="bound"></label></span>
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
<p class="muted" id="keys">keys: <kbd>j</kbd> / <kbd>k</kbd> open the next / previous pair,
 <kbd>/</kbd> goes to the search; click a column's header to sort by it</p>
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

#: a text this long inside a packed value is stored once, in the page's strings
_PACK_MIN = 40


def _pack(value: Any, strings: dict[str, int]) -> Any:
    r"""A JSON value with its long texts moved to ``strings`` and non-finite numbers kept.

    A long text becomes ``"\0N"`` (``N`` its index in ``strings``), a NaN or an infinity
    ``"\0NaN"`` / ``"\0Infinity"`` / ``"\0-Infinity"`` (strict JSON has none), and a text
    that began with ``"\0"`` gets one more; the page's ``unpack`` reverses it.
    """
    if isinstance(value, str):
        if len(value) >= _PACK_MIN:
            return "\0" + str(strings.setdefault(value, len(strings)))
        return "\0" + value if value.startswith("\0") else value
    if isinstance(value, float) and not math.isfinite(value):
        return "\0" + ("NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity")
    if isinstance(value, Mapping):
        return {str(k): _pack(v, strings) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_pack(v, strings) for v in value]
    return value


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
            for field in ("input", "raw"):
                pair[field] = _pack(pair.get(field), strings)
            pairs.append(pair)
        out.append({**run, "pairs": pairs})
    return {"strings": list(strings), "aspects": [json.loads(a) for a in aspects], "runs": out,
            "flags": list(FLAGS), "no_reply": NO_REPLY_LOGGED, "no_input": NO_INPUT}


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
