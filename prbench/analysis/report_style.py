"""The one stylesheet of prbench's HTML pages: the report and the pair explorer.

Written here rather than taken from a CSS framework: the pages must open offline from a file
(no CDN, no web font), and the rules they need -- readable tables of intervals that fit a
1,280-pixel window and a 390-pixel phone without sideways scrolling, flags that stand out, a
sticky filter bar -- are a few dozen lines. Colours
and sizes are custom properties at the top, so a page needs no rule of its own for them.

:data:`BASE` styles both pages (type, headings, tables, flags, figures); :data:`REPORT` and
:data:`EXPLORER` add what only one of them has. Neither names a font file or an URL: system
fonts only.
"""

from __future__ import annotations

#: rules shared by the report and the explorer pages
BASE = """
:root{--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--soft:#f6f8fa;--accent:#0969da;
 --right:#1a7f37;--wrong:#cf222e;--tie:#9a6700;--invalid:#59636e;--diag:#bc4c00;
 --diag-bg:#fff5e8;--sample-bg:#fff8c5;--radius:6px}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0;color:var(--fg);background:#fff;
 font:14px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1200px;margin:0 auto;padding:20px 20px 64px}
h1{font-size:24px;line-height:1.25;margin:0 0 6px}
h2{font-size:19px;line-height:1.3;margin:32px 0 8px;padding-bottom:4px;
 border-bottom:1px solid var(--line)}
h3{font-size:15px;margin:20px 0 6px}
h4{font-size:13px;margin:10px 0 4px}
p{margin:6px 0 10px;max-width:88ch}
a{color:var(--accent);text-decoration:none}
a:hover{text-decoration:underline}
code{font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:var(--soft);
 padding:1px 4px;border-radius:4px}
.muted{color:var(--muted);font-size:12px}
.flag{color:var(--wrong);font-weight:600}
[title]{cursor:help}
.table-wrap{max-width:100%;overflow-x:auto;margin:8px 0 12px}
table{border-collapse:collapse;font-size:13px;font-variant-numeric:tabular-nums}
th,td{padding:4px 7px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
thead th{background:var(--soft);border-bottom:2px solid var(--line);font-weight:600;
 line-height:1.3}
th.num{text-align:right}
td.num{text-align:right;white-space:nowrap}
td .ci{display:block;color:var(--muted);font-size:11px;line-height:1.2}
tbody tr:hover td{background:#f3f8ff}
.short{text-decoration:underline dotted var(--muted);text-underline-offset:2px}
tr.diagnostic td{background:var(--diag-bg)}
.tag{display:inline-block;font-size:11px;font-weight:600;padding:0 6px;border-radius:10px;
 color:#fff;background:var(--diag);vertical-align:1px;white-space:nowrap}
.tag.sample{background:var(--tie)}
img{max-width:100%;height:auto}
kbd{font:11px ui-monospace,Menlo,Consolas,monospace;border:1px solid var(--line);
 border-bottom-width:2px;border-radius:4px;padding:0 4px;background:#fff}
.run-panel th{white-space:nowrap}
@media (max-width:640px){
 main{padding:12px 10px 48px}
 h1,h2,h3,h4,p,li,td,th,a,code,.box{overflow-wrap:anywhere}
 td.num{white-space:normal}
 .run-panel tr{display:block;border-bottom:1px solid var(--line)}
 .run-panel th,.run-panel td{display:block;border:0;padding:2px 4px}
 .run-panel th{overflow-wrap:normal}
}
"""

#: rules of the report page only
REPORT = """
header.page{border-bottom:1px solid var(--line);padding-bottom:10px;margin-bottom:8px}
nav.toc{font-size:13px;margin:8px 0 0;display:flex;flex-wrap:wrap;gap:2px 14px}
.notes p{margin:4px 0;font-size:13px}
.notes p.diagnostic{border-left:4px solid var(--diag);padding-left:8px}
.notes p.sample{border-left:4px solid var(--tie);padding-left:8px;background:var(--sample-bg)}
figure{margin:10px 0 18px}
figure img{display:block;border:1px solid var(--line);border-radius:var(--radius)}
figure.wide img{width:100%}
figure a.zoom{display:inline-block;max-width:100%;cursor:zoom-in}
table.leaderboard{width:100%}
table.leaderboard td.text{white-space:nowrap}
table.leaderboard td:first-child{font-weight:600;white-space:normal;min-width:8em}
section.diagnostic{border-left:4px solid var(--diag);padding-left:12px;background:var(--diag-bg);
 border-radius:0 var(--radius) var(--radius) 0;margin:12px 0}
ul.links{padding-left:20px}
"""

#: rules of the pair explorer only
EXPLORER = """
#controls{display:flex;flex-wrap:wrap;gap:6px 14px;align-items:center;padding:8px 10px;
 background:var(--soft);border:1px solid var(--line);border-radius:var(--radius);position:sticky;
 top:0;z-index:1}
#controls label{font-size:13px}
#controls input[type=search]{width:16em;padding:3px 6px;border:1px solid var(--line);
 border-radius:4px;font:inherit}
#counts{font-size:13px;margin:8px 0}
.pair{border:1px solid var(--line);margin:4px 0;padding:3px 8px;border-radius:var(--radius)}
.pair:target,.pair.linked{outline:2px solid var(--accent)}
.pair>summary{cursor:pointer;font-size:13px;display:grid;align-items:baseline;gap:0 8px;
 grid-template-columns:var(--cols)}
.pair>summary>*{overflow:hidden;text-overflow:ellipsis;white-space:nowrap;min-width:0}
#pair-head{display:grid;gap:0 8px;grid-template-columns:var(--cols);font-size:12px;
 font-weight:600;color:var(--muted);padding:2px 9px}
#pair-head span{white-space:nowrap;overflow:hidden}
.n{text-align:right;font-variant-numeric:tabular-nums}
a.permalink{font-size:12px}
.badge{display:inline-block;min-width:4.5em;text-align:center;border-radius:4px;padding:0 4px;
 color:#fff;font-size:12px}
.right{background:var(--right)}.wrong{background:var(--wrong)}.tie{background:var(--tie)}
.invalid{background:var(--invalid)}
.cols{display:grid;grid-template-columns:1fr 1fr;gap:10px}
.box{background:var(--soft);border:1px solid var(--line);border-radius:4px;padding:6px;
 white-space:pre-wrap;font-size:13px;overflow-wrap:anywhere}
.diag{border-left:4px solid var(--diag);padding-left:8px}
.order{border-left:3px solid #8c959f;padding-left:8px;margin:6px 0}
.reply>summary{cursor:pointer;font-size:12px;color:var(--muted)}
pre.box{max-height:24em;overflow:auto;font-family:ui-monospace,Menlo,Consolas,monospace}
.reasons{font-size:13px;margin:4px 0}
.pair{scroll-margin-top:calc(var(--bar, 0px) + 6px)}
.pair.current{box-shadow:-3px 0 0 var(--accent)}
#controls input.bound{width:6em;padding:3px 6px;border:1px solid var(--line);border-radius:4px;
 font:inherit}
#range{display:inline-flex;flex-wrap:wrap;gap:6px 10px}
#keys{margin:2px 0 6px}
button.sort-head{background:none;border:0;padding:0;font:inherit;color:inherit;text-align:left;
 cursor:pointer;white-space:nowrap;overflow:hidden;text-overflow:ellipsis;min-width:0}
button.sort-head.n{text-align:right}
button.sort-head[aria-sort]{color:var(--fg)}
details.input,details.raw{margin:6px 0}
details.input>summary,details.raw>summary,details.sent>summary{cursor:pointer;font-size:12px;
 color:var(--accent)}
.answer-input,.order-input{min-width:0}
.facts{overflow-wrap:anywhere}
.note{font-size:12px;color:var(--tie);font-weight:600}
pre.scored .dropped{color:#8c959f;background:#eaeef2}
pre.scored mark.profile{background:#ddf4ff;color:inherit;border-radius:2px}
pre.scored mark.profile.dropped{color:#8c959f}
.cut-marker{display:inline-block;margin:0 2px;padding:0 5px;border-radius:4px;color:#fff;
 background:var(--wrong);font:600 11px/1.6 system-ui,sans-serif;white-space:nowrap}
.message>b{font-size:12px}
pre.raw-json{max-height:32em}
@media (max-width:640px){
 #controls{position:static}
 #controls label{max-width:100%}
 #controls select{max-width:100%}
 #controls input[type=search]{width:100%;max-width:16em}
 .pair>summary,#pair-head{display:flex;flex-wrap:wrap;gap:2px 10px}
 .pair>summary>*{white-space:normal;overflow-wrap:anywhere}
 .pair>summary>.question{flex:1 1 100%}
 button.sort-head{white-space:normal}
 .cols{grid-template-columns:minmax(0, 1fr)}
}
"""

__all__ = ["BASE", "EXPLORER", "REPORT"]
