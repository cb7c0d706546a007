"use strict";
var svg, frames, details, matchedText, unzoomButton, W, H, PAD = 10, CHARW = 12 * 0.59;
var zoomedTo = null, searchRe = null, icicle = false, unit = "ns", countName = "calls";
function attr(e, k) { return +e.getAttribute(k); }
function nameOf(g) { return g.firstElementChild.textContent.split("\n")[0]; }
function human(ns) {
  if (unit === "bytes") {
    var units = ["B", "KiB", "MiB", "GiB", "TiB"], v = ns, u = 0;
    while (v >= 1024 && u < 4) { v /= 1024; u++; }
    return u ? v.toFixed(2) + " " + units[u] : v + " B";
  }
  if (unit !== "ns") return ns + " " + unit;
  if (ns >= 1e9) return (ns / 1e9).toFixed(3) + " s";
  if (ns >= 1e6) return (ns / 1e6).toFixed(3) + " ms";
  if (ns >= 1e3) return (ns / 1e3).toFixed(3) + " us";
  return ns + " ns";
}
function fitText(g, width) {
  var t = g.lastElementChild, name = nameOf(g), chars = Math.floor((width - 6) / CHARW);
  if (chars < 3) { t.textContent = ""; return; }
  t.textContent = name.length <= chars ? name : name.substring(0, chars - 2) + "..";
}
function init() {
  svg = document.documentElement;
  frames = document.getElementById("frames");
  details = document.getElementById("details");
  matchedText = document.getElementById("matched");
  unzoomButton = document.getElementById("unzoom");
  W = attr(svg, "width"); H = attr(svg, "height");
  icicle = svg.getAttribute("data-icicle") === "1";
  unit = svg.getAttribute("data-unit") || "ns";
  countName = svg.getAttribute("data-count") || "calls";
  frames.addEventListener("click", function (e) {
    var g = e.target.closest ? e.target.closest("g.f") : null;
    if (g) zoom(g);
  });
  frames.addEventListener("mouseover", function (e) {
    var g = e.target.closest ? e.target.closest("g.f") : null;
    if (!g) return;
    details.textContent = nameOf(g) + " (" + human(attr(g, "data-n")) + ", " +
      (100 * attr(g, "data-n") / attr(frames.firstElementChild, "data-n")).toFixed(2) + "%, " +
      attr(g, "data-c") + " " + countName + ")";
  });
  frames.addEventListener("mouseout", function () { details.textContent = " "; });
  unzoomButton.addEventListener("click", function () { zoom(null); });
  document.getElementById("search").addEventListener("click", function () { searchPrompt(); });
  window.addEventListener("keydown", function (e) {
    if ((e.ctrlKey || e.metaKey) && e.key === "f") { e.preventDefault(); searchPrompt(); }
    else if (e.key === "Escape") { zoom(null); search(null); }
  });
  svg.setAttribute("data-frames", String(frames.childElementCount));
  // Test hook: headless browsers cannot click; exercise zoom and search once.
  if (location.hash === "#selftest") {
    var second = frames.firstElementChild.nextElementSibling;
    if (second) zoom(second);
    search(/./);
    svg.setAttribute("data-selftest", matchedText.textContent + (zoomedTo ? " zoomed" : ""));
    zoom(null); search(null);
  }
  svg.setAttribute("data-ready", "1");
}
function zoom(target) {
  var root = frames.firstElementChild;
  var o0 = target ? attr(target, "data-o") : 0, n0 = target ? attr(target, "data-n") : attr(root, "data-n");
  var d0 = target ? attr(target, "data-d") : 0, scale = (W - 2 * PAD) / (n0 || 1);
  zoomedTo = target;
  unzoomButton.setAttribute("class", target ? "" : "hide");
  for (var g = root; g; g = g.nextElementSibling) {
    var o = attr(g, "data-o"), n = attr(g, "data-n"), d = attr(g, "data-d");
    var rect = g.children[1], text = g.lastElementChild, x, w;
    if (d < d0 && o <= o0 && o + n >= o0 + n0) { x = PAD; w = W - 2 * PAD; g.setAttribute("class", "f parent"); }
    else if (d >= d0 && o >= o0 && o + n <= o0 + n0) { x = PAD + (o - o0) * scale; w = n * scale; g.setAttribute("class", "f"); }
    else { g.setAttribute("class", "f hide"); continue; }
    rect.setAttribute("x", x.toFixed(2)); rect.setAttribute("width", w.toFixed(2));
    text.setAttribute("x", (x + 3).toFixed(2));
    fitText(g, w);
  }
  if (searchRe) search(searchRe);
}
function searchPrompt() {
  if (searchRe) { search(null); return; }
  var term = prompt("Search for a function (regular expression):", "");
  if (term === null || term === "") return;
  try { search(new RegExp(term)); } catch (err) { matchedText.textContent = "bad regular expression"; }
}
function search(re) {
  searchRe = re;
  var spans = [], root = zoomedTo || frames.firstElementChild;
  for (var g = frames.firstElementChild; g; g = g.nextElementSibling) {
    var rect = g.children[1];
    if (!rect.hasAttribute("data-fill")) rect.setAttribute("data-fill", rect.getAttribute("fill"));
    var hit = re !== null && re.test(nameOf(g));
    rect.setAttribute("fill", hit ? "rgb(230,0,230)" : rect.getAttribute("data-fill"));
    if (hit) spans.push([attr(g, "data-o"), attr(g, "data-o") + attr(g, "data-n")]);
  }
  document.getElementById("search").setAttribute("class", re ? "on" : "");
  if (!re) { matchedText.textContent = " "; return; }
  spans.sort(function (a, b) { return a[0] - b[0]; });
  var matched = 0, end = -1, lo = attr(root, "data-o"), hi = lo + attr(root, "data-n");
  for (var i = 0; i < spans.length; i++) {
    var s = Math.max(spans[i][0], lo, end), e = Math.min(spans[i][1], hi);
    if (e > s) matched += e - s;
    end = Math.max(end, spans[i][1]);
  }
  matchedText.textContent = "Matched: " + (100 * matched / (hi - lo || 1)).toFixed(2) + "%";
}
window.addEventListener("load", init);
