(function () {
"use strict";
var P = LibprofPage, root = P.root, el = P.el, human = P.human, label = P.label;
var D = JSON.parse(document.getElementById("diff-data").textContent);
function sec(x) { return x.toFixed(6); }
function runs(n) { return n + " run" + (n === 1 ? "" : "s"); }
// "+12.4% +-3.1", "new", "gone": a change with its uncertainty (95%).
function changeText(base, next, unc) {
  if (base <= 0 && next <= 0) return "0.0%";
  if (base <= 0) return "new";
  if (next <= 0) return "gone";
  var p = 100 * (next - base) / base, s = (p >= 0 ? "+" : "") + p.toFixed(1) + "%";
  return unc > 0 ? s + " +-" + (100 * unc / base).toFixed(1) : s;
}
function direction(change, unc) { return change > unc ? 1 : -change > unc ? -1 : 0; }

// ---- summary
var T = D.total;
document.getElementById("summary").textContent =
  "base: " + runs(D.base_runs) + " (" + D.base_traces.join(", ") + ") \u2022 new: " + runs(D.new_runs) +
  " (" + D.new_traces.join(", ") + ") \u2022 total time " + sec(T.base) + " s \u2192 " + sec(T.new) + " s, " +
  (T.percent === null ? "new" : (T.percent >= 0 ? "+" : "") + T.percent.toFixed(1) + "%" +
    (T.uncertainty > 0 ? " +-" + T.uncertainty.toFixed(1) : "")) +
  (T.regression ? " \u2022 regression" : T.undecided ? " \u2022 above the limit, within the noise" : "") +
  (D.spread_known ? "" : " \u2022 one run a side: only the sampling error is known");
document.getElementById("legend").textContent =
  "change: of " + D.metric + ", +- its uncertainty (95%)" +
  (D.fail_above === null ? "" : "; ! beyond " + D.fail_above + "% and the noise, ? beyond " + D.fail_above + "% within it") +
  "; click a column to sort, a row for its callers and callees on both sides";

// ---- functions: both sides, the change of the metric with its uncertainty
var metricIndex = {ncalls: 0, tottime: 1, cumtime: 2}[D.metric];
function metricChange(f) { return f.n[metricIndex] - f.b[metricIndex]; }
function mark(f) { return f.regression ? "!" : f.undecided ? "?" : ""; }
var cols = [
  {t: "", v: function (f) { return mark(f); }, s: mark},
  {t: "ncalls base", v: function (f) { return f.b[0]; }, s: function (f) { return String(f.b[0]); }},
  {t: "ncalls new", v: function (f) { return f.n[0]; }, s: function (f) { return String(f.n[0]); }},
  {t: "tottime base", v: function (f) { return f.b[1]; }, s: function (f) { return sec(f.b[1]); }},
  {t: "tottime new", v: function (f) { return f.n[1]; }, s: function (f) { return sec(f.n[1]); }},
  {t: "cumtime base", v: function (f) { return f.b[2]; }, s: function (f) { return sec(f.b[2]); }},
  {t: "cumtime new", v: function (f) { return f.n[2]; }, s: function (f) { return sec(f.n[2]); }},
  {t: "change", v: function (f) { return metricChange(f); },
   s: function (f) { return !f.in_new ? "gone" : f.percent === null ? "new" :
     (f.percent >= 0 ? "+" : "") + f.percent.toFixed(1) + "%" + (f.pu !== null && f.pu > 0 ? " +-" + f.pu.toFixed(1) : ""); }},
  {t: "filename:lineno(function)", v: function (f) { return label(f); }, s: label, name: true}
];
var selected = -1;
var ftable = P.table({
  table: document.getElementById("ftable"), filter: document.getElementById("filter"),
  rows: D.functions, cols: cols, sortCol: 7, text: label, rowAttr: "data-fn", count: "data-rows",
  rowClass: function (f, i) {
    return (i === selected ? "selected " : "") + (f.regression ? "regression" : f.undecided ? "undecided" : "");
  },
  click: function (i) { select(i); }
});
// A function's callers (or callees) on both sides: calls and cumtime of each pair, the change
// of its cumtime with its uncertainty.
function edgeTable(title, rows, other) {
  var box = el("div");
  box.appendChild(el("h3", "", title));
  if (!rows.length) { box.appendChild(el("div", "muted", "none on either side")); return box; }
  var t = el("table"), h = t.createTHead().insertRow(), b = t.createTBody();
  ["ncalls base", "ncalls new", "cumtime base", "cumtime new", "change", "function"].forEach(function (x, i) {
    h.appendChild(el("th", i === 5 ? "name" : "", x));
  });
  rows.sort(function (a, b) { return Math.abs(b.n[1] - b.b[1]) - Math.abs(a.n[1] - a.b[1]); });
  rows.forEach(function (e) {
    var tr = b.insertRow(), o = e[other];
    tr.appendChild(el("td", "", String(e.b[0])));
    tr.appendChild(el("td", "", String(e.n[0])));
    tr.appendChild(el("td", "", sec(e.b[1])));
    tr.appendChild(el("td", "", sec(e.n[1])));
    var dir = direction(e.n[1] - e.b[1], e.u);
    tr.appendChild(el("td", dir > 0 ? "slower" : dir < 0 ? "faster" : "", changeText(e.b[1], e.n[1], e.u)));
    var td = el("td", "name");
    if (o < 0) td.textContent = "<thread start>";
    else { var a = el("a", "", label(D.functions[o])); a.addEventListener("click", function () { select(o); }); td.appendChild(a); }
    tr.appendChild(td);
  });
  t.setAttribute("data-kind", other === "caller" ? "callers" : "callees");
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
  d.appendChild(el("div", "muted", !f.in_base ? "only in the new runs" : !f.in_new ? "only in the base runs" :
    "cumtime " + sec(f.b[2]) + " s \u2192 " + sec(f.n[2]) + " s"));
  var callers = D.edges.filter(function (e) { return e.callee === i; });
  var callees = D.edges.filter(function (e) { return e.caller === i; });
  d.appendChild(edgeTable("was called by...", callers, "caller"));
  d.appendChild(edgeTable("called...", callees, "callee"));
  root.setAttribute("data-detail", "callers=" + callers.length + " callees=" + callees.length);
}
ftable.render();

// ---- icicle of both sides' call paths, widths of one side, colour by change
var N = D.tree, box = document.getElementById("icicle"), widthKey = "nt";
function functionOf(name) {
  for (var i = 0; i < D.functions.length; i++) if (D.functions[i].name === name) return i;
  return -1;
}
var tree = P.icicle({
  box: box, info: document.getElementById("icicle-info"), path: document.getElementById("icicle-path"),
  nodes: N, width: function (n) { return n[widthKey]; }, name: function (n) { return n.name; },
  fill: function (n) { return n.fill; },
  title: function (n) {
    return n.name + "\nbase " + human(n.bt) + ", new " + human(n.nt) + ": " + changeText(n.bt, n.nt, n.u) +
      " (" + (n.dir > 0 ? "slower" : n.dir < 0 ? "faster" : "within the noise") + "); calls " +
      n.bc + " \u2192 " + n.nc;
  },
  mark: function (d, n) { d.setAttribute("data-dir", n.dir > 0 ? "+" : n.dir < 0 ? "-" : "0"); },
  click: function (i) { var f = i > 0 ? functionOf(N[i].name) : -1; if (f >= 0) select(f); }
});
function widths(key) {
  widthKey = key;
  tree.draw();
  document.getElementById("widths-new").className = key === "nt" ? "on" : "";
  document.getElementById("widths-base").className = key === "bt" ? "on" : "";
  root.setAttribute("data-widths", key === "nt" ? "new" : "base");
}
document.getElementById("widths-new").addEventListener("click", function () { widths("nt"); });
document.getElementById("widths-base").addEventListener("click", function () { widths("bt"); });
widths("nt");

// ---- test hook: exercise the interactions once (headless browsers cannot click)
if (location.hash === "#selftest") {
  var firstRow = ftable.body.rows[0];
  if (firstRow) firstRow.click();
  var h = ftable.header.cells;
  h[1].click(); h[1].click(); h[7].click();
  document.getElementById("widths-base").click();
  document.getElementById("widths-new").click();
  var cells = box.children;
  if (cells.length > 1) cells[1].click();
  tree.zoomTo(0);
  root.setAttribute("data-selftest", "ok");
}
root.setAttribute("data-ready", "1");
})();
