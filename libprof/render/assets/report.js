(function () {
"use strict";
var P = LibprofPage, root = P.root, el = P.el, human = P.human, label = P.label;
var D = JSON.parse(document.getElementById("profile-data").textContent);
function sec(x, p) { return x.toFixed(p === undefined ? 3 : p); }
// A trace sampled without instrumentation counted no calls: "?", never 0.
var counted = D.calls_counted !== false;
function ncalls(n, p) { return !counted ? "?" : n === p ? String(n) : n + "/" + p; }

// ---- summary
var sub = document.getElementById("summary");
sub.textContent = (counted ? D.total_calls + " function calls"
                           : "calls not counted (sampled without instrumentation)") +
  (counted && D.primitive_calls !== D.total_calls ? " (" + D.primitive_calls + " primitive calls)" : "") +
  " in " + sec(D.total_time) + " seconds \u2022 " + D.threads + " thread(s) \u2022 " + D.traces.join(", ") +
  (D.times ? " \u2022 " + D.times : "");
// The text header's further lines: the time split, what cannot be vouched for, inherited frames.
(D.notes || []).forEach(function (note) { sub.parentNode.appendChild(el("div", "sub", note)); });

// ---- functions table, sortable; callers and callees on click
var cols = [
  {k: "ncalls", t: "ncalls", v: function (f) { return f.ncalls; }, s: function (f) { return ncalls(f.ncalls, f.pcalls); }},
  {k: "tottime", t: "tottime", v: function (f) { return f.tottime; }, s: function (f) { return sec(f.tottime); }},
  {k: "totpc", t: "percall", v: function (f) { return f.ncalls ? f.tottime / f.ncalls : 0; }, s: function (f) { return counted ? sec(f.ncalls ? f.tottime / f.ncalls : 0, 6) : "?"; }},
  {k: "cumtime", t: "cumtime", v: function (f) { return f.cumtime; }, s: function (f) { return sec(f.cumtime); }},
  {k: "cumpc", t: "percall", v: function (f) { return f.pcalls ? f.cumtime / f.pcalls : 0; }, s: function (f) { return counted ? sec(f.pcalls ? f.cumtime / f.pcalls : 0, 6) : "?"; }},
  {k: "name", t: "filename:lineno(function)", v: function (f) { return label(f); }, s: function (f) { return label(f); }, name: true}
];
var selected = -1;
var ftable = P.table({
  table: document.getElementById("ftable"), filter: document.getElementById("filter"),
  rows: D.functions, cols: cols, sortCol: 3, text: label, rowAttr: "data-fn", count: "data-rows",
  rowClass: function (f, i) { return i === selected ? "selected" : ""; },
  click: function (i) { select(i); }
});
function edgeTable(title, rows, which) {
  var box = el("div");
  box.appendChild(el("h3", "", title));
  if (!rows.length) { box.appendChild(el("div", "muted", "none")); return box; }
  var t = el("table"), h = t.createTHead().insertRow(), b = t.createTBody();
  ["ncalls", "tottime", "cumtime", "function"].forEach(function (x, i) { h.appendChild(el("th", i === 3 ? "name" : "", x)); });
  rows.sort(function (a, b) { return b.cumtime - a.cumtime; });
  rows.forEach(function (e) {
    var tr = b.insertRow(), other = e[which];
    tr.appendChild(el("td", "", ncalls(e.ncalls, e.pcalls)));
    tr.appendChild(el("td", "", sec(e.tottime)));
    tr.appendChild(el("td", "", sec(e.cumtime)));
    var td = el("td", "name");
    if (other < 0) td.textContent = "<thread start>";
    else { var a = el("a", "", label(D.functions[other])); a.addEventListener("click", function () { select(other); }); td.appendChild(a); }
    tr.appendChild(td);
  });
  t.setAttribute("data-kind", which === "caller" ? "callers" : "callees");
  box.appendChild(t);
  return box;
}
function select(i) {
  selected = i;
  ftable.render();
  var d = document.getElementById("detail");
  while (d.firstChild) d.removeChild(d.firstChild);
  var f = D.functions[i];
  d.appendChild(el("h3", "", label(f)));
  d.appendChild(el("div", "muted", (f.module || "") + (f.kind !== "function" ? " \u2022 " + f.kind : "")));
  var callers = D.edges.filter(function (e) { return e.callee === i; });
  var callees = D.edges.filter(function (e) { return e.caller === i; });
  d.appendChild(edgeTable("was called by...", callers, "caller"));
  d.appendChild(edgeTable("called...", callees, "callee"));
  if (f.lat) d.appendChild(latencyBox(f.lat));
  root.setAttribute("data-detail", "callers=" + callers.length + " callees=" + callees.length);
}
// A function's per-call latency: its percentiles, and its calls per power of two of
// nanoseconds as bars (heights on a log scale of the calls, so that a tail of one call shows).
function latencyBox(L) {
  var box = el("div", "latency"), q = L.bound > 0 ? "~" : "";
  box.appendChild(el("h3", "", "per-call latency"));
  box.appendChild(el("div", "muted", L.calls + (L.calls === 1 ? " call" : " calls") +
    (L.untimed ? " timed (" + L.untimed + " not: their paths' calls last under PROF_LATENCY_MIN)" : "") +
    " \u2022 mean " + human(L.mean) + " \u2022 p50 " + q + human(L.p50) + " \u2022 p90 " + q + human(L.p90) +
    " \u2022 p99 " + q + human(L.p99) + " \u2022 p99.9 " + q + human(L.p999) + " \u2022 max " + human(L.max) +
    (q ? " (~: from buckets, within 6.25%)" : "")));
  var lo = 0, hi = L.log2.length - 1, most = 1;
  while (lo < hi && !L.log2[lo]) lo++;
  L.log2.forEach(function (c) { most = Math.max(most, c); });
  var chart = el("div", "hist");
  for (var b = lo; b <= hi; b++) {
    var c = L.log2[b], col = el("div", "hcol"), bar = el("div", "hbar");
    bar.style.height = (c ? Math.max(2, 70 * Math.log(1 + c) / Math.log(1 + most)) : 0).toFixed(1) + "px";
    col.title = human(Math.pow(2, b)) + " to " + human(Math.pow(2, b + 1)) + ": " + c + " call" + (c === 1 ? "" : "s");
    col.appendChild(el("div", "hcount", c ? String(c) : ""));
    col.appendChild(bar);
    col.appendChild(el("div", "hlab", human(Math.pow(2, b))));
    chart.appendChild(col);
  }
  chart.setAttribute("data-bars", String(hi - lo + 1));
  box.appendChild(chart);
  root.setAttribute("data-histogram", String(hi - lo + 1));
  return box;
}
ftable.render();

// ---- icicle of the call tree, click to zoom
var T = D.tree;
function hue(s) { var h = 0; for (var i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) >>> 0; return h; }
function color(n) {
  if (n.f < 0) return "rgb(205,205,205)";
  var h = hue(T.names[n.f]);
  return T.kinds[n.f] !== "function" ? "rgb(" + (60 + h % 50) + "," + (170 + (h >> 8) % 50) + "," + (170 + (h >> 16) % 50) + ")"
                                     : "rgb(" + (215 + h % 40) + "," + (90 + (h >> 8) % 120) + "," + (40 + (h >> 16) % 40) + ")";
}
function nodeName(n) { return n.f < 0 ? n.l : T.names[n.f]; }
var box = document.getElementById("icicle");
var tree = P.icicle({
  box: box, info: document.getElementById("icicle-info"), path: document.getElementById("icicle-path"),
  nodes: T.nodes, width: function (n) { return n.t; }, name: nodeName, fill: color,
  title: function (n) {
    return nodeName(n) + "\n" + human(n.t) + " (" + (100 * n.t / (T.nodes[0].t || 1)).toFixed(2) + "% of all), self " + human(n.s) + ", " + n.c + " calls";
  }
});
tree.draw();

// ---- line tables (line_profiler's layout)
var lbox = document.getElementById("lines");
if (!D.lines.length) lbox.appendChild(el("div", "muted", "No marked lines in this trace (PROF_LINE, PROF_SCOPE, PROF_FUNCTION)."));
D.lines.forEach(function (t) {
  lbox.appendChild(el("h3", "", t.function + " \u2014 " + t.file));
  lbox.appendChild(el("div", "muted", "Total time: " + sec(t.total, 6) + " s"));
  var tab = el("table"), h = tab.createTHead().insertRow(), b = tab.createTBody();
  ["Line #", "Hits", "Time (s)", "Per Hit (us)", "% Time", "", "Line Contents"].forEach(function (x, i) { h.appendChild(el("th", i === 6 ? "name" : "", x)); });
  var byLine = {};
  t.rows.forEach(function (r) { byLine[r.line] = r; });
  var first = t.first, last = t.last;
  for (var ln = first; ln <= last; ln++) {
    var r = byLine[ln], tr = b.insertRow();
    tr.appendChild(el("td", "", ln));
    tr.appendChild(el("td", "", r ? r.hits : ""));
    tr.appendChild(el("td", "", r ? sec(r.time, 6) : ""));
    tr.appendChild(
        el("td", "", r && r.hits && !r.sampled ? (1e6 * r.time / r.hits).toFixed(3) : ""));
    var pct = r && t.total > 0 ? 100 * r.time / t.total : null;
    tr.appendChild(el("td", "", pct === null ? "" : pct.toFixed(1)));
    var bar = el("td", "barcell");
    if (pct !== null) { var s = el("span", "bar"); s.style.width = Math.min(100, pct).toFixed(1) + "px"; bar.appendChild(s); }
    tr.appendChild(bar);
    var src = t.source[ln - first];
    tr.appendChild(el("td", "src", src === undefined ? "" : src));
  }
  lbox.appendChild(tab);
});
root.setAttribute("data-lines", String(D.lines.length));

// ---- memory (profrun --mem): summary, heap/RSS plot (inline SVG), sortable top sites
var M = D.memory;
function bytes(b) {
  var units = ["B", "KiB", "MiB", "GiB", "TiB"], v = b, u = 0;
  while (v >= 1024 && u < 4) { v /= 1024; u++; }
  return u ? v.toFixed(2) + " " + units[u] : b + " B";
}
function frameText(f) { return f[0] + (f[1] ? " (" + f[1] + ":" + f[2] + ")" : ""); }
var mtable = null, mopen = {};
var mcols = [
  {t: "allocations", v: function (s) { return s.a; }, s: function (s) { return String(s.a); }},
  {t: "bytes", v: function (s) { return s.b; }, s: function (s) { return bytes(s.b); }},
  {t: "temporary", v: function (s) { return s.t; }, s: function (s) { return String(s.t); }},
  {t: "at peak", v: function (s) { return s.p; }, s: function (s) { return bytes(s.p); }},
  {t: "leaked", v: function (s) { return s.l; }, s: function (s) { return bytes(s.l); }},
  {t: "blocks", v: function (s) { return s.lb; }, s: function (s) { return String(s.lb); }},
  {t: "site (innermost frame first)", v: function (s) { return s.s.length ? frameText(s.s[0]) : ""; }, name: true, cell: siteCell}
];
function siteCell(s, i) {
  var td = el("td", "name");
  if (!s.s.length) { td.textContent = "[no stack: allocated outside any traced call]"; return td; }
  var n = mopen[i] ? s.s.length : Math.min(s.s.length, 4);
  td.appendChild(el("div", "", frameText(s.s[0])));
  for (var k = 1; k < n; k++) td.appendChild(el("div", "caller", "\u2190 " + frameText(s.s[k])));
  if (n < s.s.length) td.appendChild(el("div", "caller muted", "\u2026 " + (s.s.length - n) + " more frames (click)"));
  return td;
}
if (M) {
  var ms = document.getElementById("mem-summary"), st = el("table"), h1 = st.createTHead().insertRow(), r1 = st.createTBody().insertRow();
  [["calls to allocation functions", String(M.allocations)],
   ["temporary", String(M.temporary)],
   ["calls to release functions", String(M.frees)],
   ["bytes allocated", bytes(M.bytes)],
   ["peak heap", bytes(M.peak_heap) + " at " + sec(M.peak_time) + " s"],
   ["peak RSS", M.peak_rss ? bytes(M.peak_rss) : "n/a"],
   ["leaked", bytes(M.leaked) + " in " + M.leaked_blocks + " blocks"]].forEach(function (p) {
    h1.appendChild(el("th", "", p[0]));
    r1.appendChild(el("td", "", p[1]));
  });
  ms.appendChild(st);
  var mmBox = document.getElementById("mem-mismatches");
  M.mismatches.forEach(function (m) {
    var s = m.site >= 0 ? M.sites[m.site] : null;
    mmBox.appendChild(el("div", "mismatch", "Mismatch: " + m.count + " block" + (m.count === 1 ? "" : "s") +
      " allocated with " + m.with + " and released with " + m.freed +
      (s && s.s.length ? " at " + frameText(s.s[0]) : "")));
  });
  mtable = P.table({
    table: document.getElementById("mtable"), filter: document.getElementById("mem-filter"),
    rows: M.sites, cols: mcols, sortCol: 1, rowAttr: "data-site", count: "data-mem-rows",
    text: function (s) { return s.s.map(frameText).join(" "); },
    click: function (i) { mopen[i] = !mopen[i]; mtable.render(); }
  });
  document.getElementById("mem-shown").textContent = M.sites.length === M.total_sites
    ? M.total_sites + " sites" : M.sites.length + " of " + M.total_sites + " sites (the top " + M.top + " by each column)";
  mtable.render();
}
root.setAttribute("data-memory", M ? "1" : "0");

// ---- test hook: exercise the interactions once (headless browsers cannot click)
if (location.hash === "#selftest") {
  var firstRow = ftable.body.rows[0];
  if (firstRow) firstRow.click();
  // And the first function with a latency distribution, when one has.
  for (var li = 0; li < D.functions.length; li++)
    if (D.functions[li].lat) { select(li); break; }
  var th = ftable.header.cells[1]; th.click(); th.click();
  var cells = box.children;
  if (cells.length > 1) cells[cells.length - 1].click();
  tree.zoomTo(0);
  if (M && mtable.body.rows[0]) {
    var mh = mtable.header.cells;
    mh[4].click(); mh[1].click(); mh[1].click(); mtable.body.rows[0].click();
  }
  root.setAttribute("data-selftest", "ok");
}
root.setAttribute("data-ready", "1");
})();
