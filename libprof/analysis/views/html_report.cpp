// The HTML report: one file with the data as JSON in a <script type="application/json">
// element (json_escape writes <, > and & as \u escapes, so no name can end the element) and an
// inline script that builds the page with textContent only (never innerHTML from data). No
// network access: no external script, style, font or image.
#include "analysis/memory_report.hpp"
#include "analysis/report.hpp"
#include "analysis/views/render.hpp"

#include "reader/trace_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sys/stat.h>
#include <map>

namespace prof::analysis::views {
namespace {

std::string js(std::string_view s) {
    return "\"" + json_escape(reader::printable(s)) + "\"";
}

std::string base_name(const std::string& path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::vector<std::string> read_lines(const std::string& file, const std::vector<std::string>& dirs) {
    std::vector<std::string> candidates{file};
    for (const std::string& d : dirs) {
        candidates.push_back(d + "/" + file);
        candidates.push_back(d + "/" + base_name(file));
    }
    for (const std::string& c : candidates) {
        // Paths come from the trace: regular files of a sane size only (no device, no FIFO).
        struct stat st;
        if (stat(c.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (off_t(64) << 20)) continue;
        std::ifstream in(c);
        if (!in) continue;
        std::vector<std::string> lines;
        std::string l;
        while (std::getline(in, l) && lines.size() < 1'000'000) lines.push_back(l);
        return lines;
    }
    return {};
}

constexpr const char* kStyle = R"CSS(
body { font: 13px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #222; background: #fafafa; }
header { background: #2b3a4a; color: #fff; padding: 10px 16px; }
header h1 { font-size: 17px; margin: 0 0 2px 0; }
header .sub { color: #c8d3de; font-size: 12px; }
section { margin: 12px 16px; background: #fff; border: 1px solid #ddd; border-radius: 4px; padding: 8px 12px; }
h2 { font-size: 15px; margin: 4px 0 8px 0; }
table { border-collapse: collapse; width: 100%; font: 12px/1.35 ui-monospace, "DejaVu Sans Mono", monospace; }
th { text-align: right; background: #eef1f4; position: sticky; top: 0; cursor: pointer; user-select: none; padding: 3px 6px; white-space: nowrap; }
th.name, td.name { text-align: left; }
th.sorted-desc::after { content: " \25BE"; } th.sorted-asc::after { content: " \25B4"; }
td { text-align: right; padding: 2px 6px; border-top: 1px solid #f0f0f0; white-space: nowrap; }
td.name { white-space: normal; word-break: break-all; }
#functions tbody tr { cursor: pointer; } #functions tbody tr:hover { background: #f3f7ff; }
tr.selected { background: #dde8ff !important; }
.scroll { max-height: 420px; overflow: auto; }
#toolbar { display: flex; gap: 8px; align-items: center; margin-bottom: 6px; }
#filter { flex: 1; max-width: 360px; padding: 3px 6px; }
#detail h3 { font-size: 13px; margin: 10px 0 4px 0; }
#detail a, #icicle-path a { color: #1a55b0; cursor: pointer; text-decoration: underline; }
#icicle { position: relative; overflow: hidden; border: 1px solid #eee; background: #fff; }
#icicle div { position: absolute; height: 17px; box-sizing: border-box; border: 1px solid #fff; border-radius: 2px;
  font: 11px/15px system-ui, sans-serif; padding: 0 3px; overflow: hidden; white-space: nowrap; text-overflow: ellipsis; cursor: pointer; }
#icicle div:hover { border-color: #333; }
#icicle-info { min-height: 18px; font-size: 12px; color: #444; margin: 4px 0; }
.src { text-align: left; white-space: pre; color: #333; }
.muted { color: #888; }
.bar { display: inline-block; height: 9px; background: #e8743b; vertical-align: middle; }
td.barcell { width: 104px; text-align: left; }
#lines h3 { font-size: 13px; margin: 12px 0 2px 0; }
#mem-summary table { width: auto; margin-bottom: 8px; }
#mem-summary td, #mem-summary th { text-align: left; cursor: default; padding: 3px 12px 3px 6px; }
#mem-plot svg { max-width: 100%; height: auto; display: block; margin: 4px 0 8px 0; }
#mtable tbody tr { cursor: pointer; } #mtable tbody tr:hover { background: #f3f7ff; }
#mtable td.name div.caller { color: #777; padding-left: 12px; }
#mem-toolbar { display: flex; gap: 8px; align-items: center; margin-bottom: 6px; }
#mem-filter { flex: 1; max-width: 360px; padding: 3px 6px; }
#mem-mismatches { color: #a33; margin: 4px 0; }
)CSS";

constexpr const char* kScript = R"JS(
(function () {
"use strict";
var root = document.documentElement;
window.addEventListener("error", function (e) { root.setAttribute("data-error", String(e.message)); });
var D = JSON.parse(document.getElementById("profile-data").textContent);
function el(tag, cls, text) {
  var e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
function sec(x, p) { return x.toFixed(p === undefined ? 3 : p); }
function human(ns) {
  if (ns >= 1e9) return (ns / 1e9).toFixed(3) + " s";
  if (ns >= 1e6) return (ns / 1e6).toFixed(3) + " ms";
  if (ns >= 1e3) return (ns / 1e3).toFixed(3) + " us";
  return ns + " ns";
}
function label(f) { return f.file + ":" + f.line + "(" + f.name + ")"; }
function ncalls(n, p) { return n === p ? String(n) : n + "/" + p; }

// ---- summary
var sub = document.getElementById("summary");
sub.textContent = D.total_calls + " function calls" +
  (D.primitive_calls !== D.total_calls ? " (" + D.primitive_calls + " primitive calls)" : "") +
  " in " + sec(D.total_time) + " seconds \u2022 " + D.threads + " thread(s) \u2022 " + D.traces.join(", ");

// ---- functions table, sortable; callers and callees on click
var cols = [
  {k: "ncalls", t: "ncalls", v: function (f) { return f.ncalls; }, s: function (f) { return ncalls(f.ncalls, f.pcalls); }},
  {k: "tottime", t: "tottime", v: function (f) { return f.tottime; }, s: function (f) { return sec(f.tottime); }},
  {k: "totpc", t: "percall", v: function (f) { return f.ncalls ? f.tottime / f.ncalls : 0; }, s: function (f) { return sec(f.ncalls ? f.tottime / f.ncalls : 0, 6); }},
  {k: "cumtime", t: "cumtime", v: function (f) { return f.cumtime; }, s: function (f) { return sec(f.cumtime); }},
  {k: "cumpc", t: "percall", v: function (f) { return f.pcalls ? f.cumtime / f.pcalls : 0; }, s: function (f) { return sec(f.pcalls ? f.cumtime / f.pcalls : 0, 6); }},
  {k: "name", t: "filename:lineno(function)", v: function (f) { return label(f); }, s: function (f) { return label(f); }, name: true}
];
var sortCol = 3, sortDesc = true, selected = -1;
var table = document.getElementById("ftable"), thead = table.tHead, tbody = table.tBodies[0];
var hr = thead.insertRow();
cols.forEach(function (c, i) {
  var th = el("th", c.name ? "name" : "", c.t);
  th.setAttribute("data-col", c.k);
  th.addEventListener("click", function () {
    if (sortCol === i) sortDesc = !sortDesc; else { sortCol = i; sortDesc = !c.name; }
    renderTable();
  });
  hr.appendChild(th);
});
var filterBox = document.getElementById("filter");
filterBox.addEventListener("input", renderTable);
function renderTable() {
  var q = filterBox.value.toLowerCase();
  var idx = [];
  for (var i = 0; i < D.functions.length; i++)
    if (!q || label(D.functions[i]).toLowerCase().indexOf(q) >= 0) idx.push(i);
  var c = cols[sortCol];
  idx.sort(function (a, b) {
    var x = c.v(D.functions[a]), y = c.v(D.functions[b]);
    if (x === y) return a - b;
    return (x < y ? -1 : 1) * (sortDesc ? -1 : 1);
  });
  Array.prototype.forEach.call(hr.cells, function (th, i) {
    th.className = (cols[i].name ? "name " : "") + (i === sortCol ? (sortDesc ? "sorted-desc" : "sorted-asc") : "");
  });
  while (tbody.firstChild) tbody.removeChild(tbody.firstChild);
  idx.forEach(function (i) {
    var f = D.functions[i], tr = tbody.insertRow();
    tr.setAttribute("data-fn", i);
    if (i === selected) tr.className = "selected";
    cols.forEach(function (c) { tr.appendChild(el("td", c.name ? "name" : "", c.s(f))); });
    tr.addEventListener("click", function () { select(i); });
  });
  root.setAttribute("data-rows", String(idx.length));
}
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
  renderTable();
  var d = document.getElementById("detail");
  while (d.firstChild) d.removeChild(d.firstChild);
  var f = D.functions[i];
  d.appendChild(el("h3", "", label(f)));
  d.appendChild(el("div", "muted", (f.module || "") + (f.kind !== "function" ? " \u2022 " + f.kind : "")));
  var callers = D.edges.filter(function (e) { return e.callee === i; });
  var callees = D.edges.filter(function (e) { return e.caller === i; });
  d.appendChild(edgeTable("was called by...", callers, "caller"));
  d.appendChild(edgeTable("called...", callees, "callee"));
  root.setAttribute("data-detail", "callers=" + callers.length + " callees=" + callees.length);
}
renderTable();

// ---- icicle of the call tree, click to zoom
var T = D.tree, box = document.getElementById("icicle"), info = document.getElementById("icicle-info");
var pathBox = document.getElementById("icicle-path");
var kids = T.nodes.map(function () { return []; });
T.nodes.forEach(function (n, i) { if (i > 0) kids[n.p].push(i); });
function hue(s) { var h = 0; for (var i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) >>> 0; return h; }
function color(n) {
  if (n.f < 0) return "rgb(205,205,205)";
  var h = hue(T.names[n.f]);
  return T.kinds[n.f] !== "function" ? "rgb(" + (60 + h % 50) + "," + (170 + (h >> 8) % 50) + "," + (170 + (h >> 16) % 50) + ")"
                                     : "rgb(" + (215 + h % 40) + "," + (90 + (h >> 8) % 120) + "," + (40 + (h >> 16) % 40) + ")";
}
function nodeName(n) { return n.f < 0 ? n.l : T.names[n.f]; }
var zoom = 0;
function drawIcicle() {
  while (box.firstChild) box.removeChild(box.firstChild);
  var z = T.nodes[zoom], total = z.t || 1, W = box.clientWidth || 1000, maxDepth = 0, drawn = 0;
  // The zoomed node's ancestors on top, full width.
  var chain = [];
  for (var a = zoom; a > 0; a = T.nodes[a].p) chain.unshift(a);
  chain.unshift(0);
  function cell(i, depth, x, w, faded) {
    var n = T.nodes[i], d = el("div", "", w * W > 30 ? nodeName(n) : "");
    d.style.left = (x * 100).toFixed(4) + "%";
    d.style.width = (w * 100).toFixed(4) + "%";
    d.style.top = (depth * 18) + "px";
    d.style.background = color(n);
    if (faded) d.style.opacity = "0.55";
    d.title = nodeName(n) + "\n" + human(n.t) + " (" + (100 * n.t / (T.nodes[0].t || 1)).toFixed(2) + "% of all), self " + human(n.s) + ", " + n.c + " calls";
    d.addEventListener("click", function () { zoom = i; drawIcicle(); });
    d.addEventListener("mouseenter", function () { info.textContent = d.title.replace("\n", " \u2014 "); });
    box.appendChild(d);
    drawn++;
    maxDepth = Math.max(maxDepth, depth);
  }
  chain.forEach(function (i, depth) { if (i !== zoom) cell(i, depth, 0, 1, true); });
  var base = chain.length - 1;
  (function walk(i, depth, x) {
    var n = T.nodes[i], w = n.t / total;
    if (w * W < 0.5 && i !== zoom) return;
    cell(i, depth, x, w, false);
    var off = x;
    kids[i].slice().sort(function (a, b) { return T.nodes[b].t - T.nodes[a].t; }).forEach(function (c) {
      walk(c, depth + 1, off);
      off += T.nodes[c].t / total;
    });
  })(zoom, base, 0);
  box.style.height = ((maxDepth + 1) * 18 + 2) + "px";
  while (pathBox.firstChild) pathBox.removeChild(pathBox.firstChild);
  chain.forEach(function (i, k) {
    var a = el("a", "", k === 0 ? "all" : nodeName(T.nodes[i]));
    a.addEventListener("click", function () { zoom = i; drawIcicle(); });
    if (k) pathBox.appendChild(document.createTextNode(" \u203A "));
    pathBox.appendChild(a);
  });
  root.setAttribute("data-icicle", String(drawn));
}
drawIcicle();
window.addEventListener("resize", drawIcicle);

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
    tr.appendChild(el("td", "", r && r.hits ? (1e6 * r.time / r.hits).toFixed(3) : ""));
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
var mtbody = null, mhr = null, msort = 1, mdesc = true, mopen = {};
var mcols = [
  {t: "allocations", v: function (s) { return s.a; }, s: function (s) { return String(s.a); }},
  {t: "bytes", v: function (s) { return s.b; }, s: function (s) { return bytes(s.b); }},
  {t: "temporary", v: function (s) { return s.t; }, s: function (s) { return String(s.t); }},
  {t: "at peak", v: function (s) { return s.p; }, s: function (s) { return bytes(s.p); }},
  {t: "leaked", v: function (s) { return s.l; }, s: function (s) { return bytes(s.l); }},
  {t: "blocks", v: function (s) { return s.lb; }, s: function (s) { return String(s.lb); }},
  {t: "site (innermost frame first)", v: function (s) { return s.s.length ? frameText(s.s[0]) : ""; }, name: true}
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
function renderMemory() {
  var q = document.getElementById("mem-filter").value.toLowerCase(), idx = [];
  for (var i = 0; i < M.sites.length; i++) {
    var text = M.sites[i].s.map(frameText).join(" ").toLowerCase();
    if (!q || text.indexOf(q) >= 0) idx.push(i);
  }
  var c = mcols[msort];
  idx.sort(function (a, b) {
    var x = c.v(M.sites[a]), y = c.v(M.sites[b]);
    if (x === y) return a - b;
    return (x < y ? -1 : 1) * (mdesc ? -1 : 1);
  });
  Array.prototype.forEach.call(mhr.cells, function (th, i) {
    th.className = (mcols[i].name ? "name " : "") + (i === msort ? (mdesc ? "sorted-desc" : "sorted-asc") : "");
  });
  while (mtbody.firstChild) mtbody.removeChild(mtbody.firstChild);
  idx.forEach(function (i) {
    var s = M.sites[i], tr = mtbody.insertRow();
    tr.setAttribute("data-site", i);
    mcols.forEach(function (c) { tr.appendChild(c.name ? siteCell(s, i) : el("td", "", c.s(s))); });
    tr.addEventListener("click", function () { mopen[i] = !mopen[i]; renderMemory(); });
  });
  root.setAttribute("data-mem-rows", String(idx.length));
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
  var mt = document.getElementById("mtable");
  mhr = mt.tHead.insertRow(); mtbody = mt.tBodies[0];
  mcols.forEach(function (c, i) {
    var th = el("th", c.name ? "name" : "", c.t);
    th.addEventListener("click", function () {
      if (msort === i) mdesc = !mdesc; else { msort = i; mdesc = !c.name; }
      renderMemory();
    });
    mhr.appendChild(th);
  });
  document.getElementById("mem-filter").addEventListener("input", renderMemory);
  document.getElementById("mem-shown").textContent = M.sites.length === M.total_sites
    ? M.total_sites + " sites" : M.sites.length + " of " + M.total_sites + " sites (the top " + M.top + " by each column)";
  renderMemory();
}
root.setAttribute("data-memory", M ? "1" : "0");

// ---- test hook: exercise the interactions once (headless browsers cannot click)
if (location.hash === "#selftest") {
  var firstRow = tbody.rows[0];
  if (firstRow) firstRow.click();
  var th = hr.cells[1]; th.click(); th.click();
  var cells = box.children;
  if (cells.length > 1) cells[cells.length - 1].click();
  drawIcicle();
  if (M && mtbody.rows[0]) { mhr.cells[4].click(); mhr.cells[1].click(); mhr.cells[1].click(); mtbody.rows[0].click(); }
  root.setAttribute("data-selftest", "ok");
}
root.setAttribute("data-ready", "1");
})();
)JS";

// ---- memory section ------------------------------------------------------------------------

constexpr size_t kTopSites = 500; // per column: the page lists the union of the tops

// The markup, with the heap/RSS plot drawn by write_memory_plot (its XML declaration and
// namespace dropped: the SVG sits inline in the page). Numbers and fixed text only; names come with the data.
void write_memory_section(std::FILE* out, const MemoryReport& m) {
    std::string plot;
    char* buf = nullptr;
    size_t len = 0;
    if (std::FILE* mem = open_memstream(&buf, &len)) {
        write_memory_plot(mem, m, "Heap and resident set size over time");
        std::fclose(mem);
        plot.assign(buf, len);
        std::free(buf);
    }
    if (plot.rfind("<?xml", 0) == 0) plot.erase(0, plot.find('\n') + 1);
    // Inline SVG takes its namespace from the HTML parser; keep the page free of URLs.
    const std::string ns = " xmlns=\"http://www.w3.org/2000/svg\"";
    if (size_t at = plot.find(ns); at != std::string::npos) plot.erase(at, ns.size());
    fmt::print(out,
               "<section id=\"memory\"><h2>Memory</h2><div id=\"mem-summary\"></div>"
               "<div id=\"mem-mismatches\"></div>\n<div id=\"mem-plot\">{}</div>\n"
               "<div id=\"mem-toolbar\"><input id=\"mem-filter\" type=\"search\" "
               "placeholder=\"filter sites by function or file\"><span class=\"muted\" "
               "id=\"mem-shown\"></span><span class=\"muted\">click a column to sort, a row for "
               "its whole stack</span></div>\n"
               "<div class=\"scroll\"><table id=\"mtable\"><thead></thead><tbody></tbody></table>"
               "</div></section>\n",
               plot);
}

void write_memory_data(std::FILE* out, const MemoryReport& m) {
    // The sites: the top kTopSites by each column, in the report's order.
    std::vector<bool> keep(m.sites.size(), false);
    for (auto key : {&MemorySite::allocations, &MemorySite::bytes, &MemorySite::temporary,
                     &MemorySite::peak_bytes, &MemorySite::leaked_bytes}) {
        std::vector<size_t> idx;
        for (size_t i = 0; i < m.sites.size(); ++i)
            if (m.sites[i].*key) idx.push_back(i);
        std::stable_sort(idx.begin(), idx.end(),
                         [&](size_t a, size_t b) { return m.sites[a].*key > m.sites[b].*key; });
        for (size_t k = 0; k < idx.size() && k < kTopSites; ++k) keep[idx[k]] = true;
    }
    std::vector<int64_t> shown(m.sites.size(), -1);
    int64_t count = 0;
    for (size_t i = 0; i < m.sites.size(); ++i)
        if (keep[i]) shown[i] = count++;
    fmt::print(out,
               "{{\"allocations\":{},\"frees\":{},\"temporary\":{},\"bytes\":{},\"peak_heap\":{},"
               "\"peak_time\":{:.6f},\"peak_rss\":{},\"leaked\":{},\"leaked_blocks\":{},"
               "\"total_sites\":{},\"top\":{},\"mismatches\":[",
               m.allocations, m.frees, m.temporary, m.bytes_allocated, m.peak_heap,
               m.peak_heap_time, m.peak_rss, m.leaked_bytes, m.leaked_blocks, m.sites.size(),
               kTopSites);
    for (size_t i = 0; i < m.mismatches.size(); ++i) {
        const Mismatch& mm = m.mismatches[i];
        fmt::print(out, "{}{{\"with\":{},\"freed\":{},\"count\":{},\"site\":{}}}", i ? "," : "",
                   js(mm.allocated_with), js(mm.freed_with), mm.count,
                   mm.site < shown.size() ? shown[mm.site] : -1);
    }
    fmt::print(out, "],\"sites\":[");
    for (size_t i = 0; i < m.sites.size(); ++i) {
        if (shown[i] < 0) continue;
        const MemorySite& s = m.sites[i];
        fmt::print(out, "{}\n{{\"a\":{},\"b\":{},\"t\":{},\"p\":{},\"l\":{},\"lb\":{},\"s\":[",
                   shown[i] ? "," : "", s.allocations, s.bytes, s.temporary, s.peak_bytes,
                   s.leaked_bytes, s.leaked_blocks);
        for (size_t k = 0; k < s.stack.size() && k < 64; ++k)
            fmt::print(out, "{}[{},{},{}]", k ? "," : "", js(memory_frame_name(s.stack[k])),
                       js(base_name(s.stack[k].file)), s.stack[k].line);
        fmt::print(out, "]}}");
    }
    fmt::print(out, "]}}");
}

} // namespace

void write_html(std::FILE* out, const Profile& p, const CallTree& t,
                const std::vector<LineTable>& lines, const HtmlOptions& o) {
    std::vector<std::string> trace_names;
    for (const reader::TraceInfo& ti : p.traces) trace_names.push_back(base_name(ti.path));
    std::string title = o.title;
    if (title.empty() && !p.traces.empty()) {
        auto exe = p.traces.front().meta.find("exe");
        title = exe != p.traces.front().meta.end() ? base_name(exe->second) : trace_names.front();
    }
    const MemoryReport* memory = o.memory && o.memory->present ? o.memory : nullptr;
    fmt::print(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "script-src 'unsafe-inline'; style-src 'unsafe-inline'\">\n"
        "<title>libprof: {}</title>\n<style>{}</style>\n</head>\n<body>\n"
        "<header><h1>libprof report: {}</h1><div class=\"sub\" id=\"summary\"></div></header>\n",
        xml_escape(title), kStyle, xml_escape(title));
    // Memory first when it is all the trace has (an unmodified program under profrun --mem).
    const bool memory_first = memory && p.total_calls == 0;
    if (memory_first) write_memory_section(out, *memory);
    fmt::print(
        out,
        "<section><h2>Call tree</h2><div id=\"icicle-path\"></div><div id=\"icicle-info\">"
        "Click a frame to zoom; hover for times.</div><div id=\"icicle\"></div></section>\n"
        "<section><h2>Functions</h2><div id=\"toolbar\"><input id=\"filter\" type=\"search\" "
        "placeholder=\"filter by file:line(function)\"><span class=\"muted\">click a column "
        "to sort, a row for its callers and callees</span></div>\n"
        "<div class=\"scroll\"><table id=\"ftable\"><thead></thead><tbody></tbody></table></div>"
        "<div id=\"detail\"></div></section>\n"
        "<section><h2>Lines</h2><div id=\"lines\"></div></section>\n");
    if (memory && !memory_first) write_memory_section(out, *memory);

    // The data. Numbers are plain JSON numbers; every string goes through json_escape.
    fmt::print(out,
               "<script id=\"profile-data\" type=\"application/json\">{{\"total_calls\":{},"
               "\"primitive_calls\":{},\"total_time\":{:.9f},\"threads\":{},\"traces\":[",
               p.total_calls, p.primitive_calls, p.total_time, p.threads.size());
    for (size_t i = 0; i < trace_names.size(); ++i)
        fmt::print(out, "{}{}", i ? "," : "", js(trace_names[i]));
    fmt::print(out, "],\n\"functions\":[");
    for (size_t i = 0; i < p.functions.size(); ++i) {
        const Function& f = p.functions[i];
        std::string file =
            f.file.empty() ? (f.module.empty() ? "~" : base_name(f.module)) : base_name(f.file);
        fmt::print(out,
                   "{}\n{{\"name\":{},\"file\":{},\"line\":{},\"module\":{},\"kind\":{},"
                   "\"ncalls\":{},\"pcalls\":{},\"tottime\":{:.9f},\"cumtime\":{:.9f}}}",
                   i ? "," : "", js(f.name), js(file), f.line, js(f.module), js(f.kind),
                   f.stats.ncalls, f.stats.pcalls, f.stats.tottime, f.stats.cumtime);
    }
    fmt::print(out, "],\n\"edges\":[");
    for (size_t i = 0; i < p.edges.size(); ++i) {
        const Edge& e = p.edges[i];
        fmt::print(
            out,
            "{}\n{{\"caller\":{},\"callee\":{},\"ncalls\":{},\"pcalls\":{},\"tottime\":{:.9f},"
            "\"cumtime\":{:.9f}}}",
            i ? "," : "", e.caller == kRoot ? -1 : int64_t(e.caller), e.callee, e.stats.ncalls,
            e.stats.pcalls, e.stats.tottime, e.stats.cumtime);
    }
    // The tree, pruned to paths of at least 1/20000 of the total: the page stays light, and
    // anything narrower is under a pixel anyway.
    const uint64_t cut = t.root().total_ns / 20000;
    std::vector<int64_t> kept(t.nodes.size(), -1);
    fmt::print(out, "],\n\"tree\":{{\"names\":[");
    for (size_t i = 0; i < t.functions.size(); ++i)
        fmt::print(out, "{}{}", i ? "," : "", js(t.functions[i].name));
    fmt::print(out, "],\"kinds\":[");
    for (size_t i = 0; i < t.functions.size(); ++i)
        fmt::print(out, "{}{}", i ? "," : "", js(t.functions[i].kind));
    fmt::print(out, "],\"nodes\":[");
    int64_t count = 0;
    for (size_t i = 0; i < t.nodes.size(); ++i) { // parents precede children
        const CallTreeNode& n = t.nodes[i];
        if (i && (kept[n.parent] < 0 || n.total_ns < cut || n.total_ns == 0)) continue;
        kept[i] = count++;
        fmt::print(out, "{}\n{{\"p\":{},\"f\":{},\"c\":{},\"t\":{},\"s\":{}{}}}", i ? "," : "",
                   i ? kept[n.parent] : -1, n.function == kNoFunction ? -1 : int64_t(n.function),
                   n.calls, n.total_ns, n.self_ns,
                   n.function == kNoFunction ? ",\"l\":" + js(n.label) : std::string());
    }
    fmt::print(out, "]}},\n\"lines\":[");
    for (size_t i = 0; i < lines.size(); ++i) {
        const LineTable& lt = lines[i];
        uint32_t first = UINT32_MAX, last = 0;
        for (const LineRow& r : lt.rows)
            first = std::min(first, r.line), last = std::max(last, r.line);
        if (first == UINT32_MAX) first = last = 0;
        if (last - first > 400) last = first + 400;
        std::vector<std::string> src = read_lines(lt.file, o.source_dirs);
        // line_profiler shows the function from its first marked line down to the last one.
        fmt::print(out,
                   "{}\n{{\"file\":{},\"function\":{},\"total\":{:.9f},\"first\":{},\"last\":{},"
                   "\"rows\":[",
                   i ? "," : "", js(lt.file), js(lt.function), lt.total_time, first, last);
        for (size_t r = 0; r < lt.rows.size(); ++r)
            fmt::print(out, "{}{{\"line\":{},\"hits\":{},\"time\":{:.9f}}}", r ? "," : "",
                       lt.rows[r].line, lt.rows[r].hits, lt.rows[r].time);
        fmt::print(out, "],\"source\":[");
        for (uint32_t l = first; l <= last && l >= 1; ++l)
            fmt::print(out, "{}{}", l > first ? "," : "",
                       l - 1 < src.size() ? js(src[l - 1]) : "\"\"");
        fmt::print(out, "]}}");
    }
    fmt::print(out, "],\n\"memory\":");
    if (memory) write_memory_data(out, *memory);
    else fmt::print(out, "null");
    fmt::print(out, "}}</script>\n<script>{}</script>\n</body>\n</html>\n", kScript);
}

} // namespace prof::analysis::views
