// What the HTML report's and the HTML diff's scripts share: elements made with textContent
// only (never markup from data), times, function labels, a sortable and filterable table, and
// an icicle that zooms on click. Written before each page's own script, in the same element.
var LibprofPage = (function () {
"use strict";
var root = document.documentElement;
window.addEventListener("error", function (e) { root.setAttribute("data-error", String(e.message)); });
function el(tag, cls, text) {
  var e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
function human(ns) {
  var a = Math.abs(ns);
  if (a >= 1e9) return (ns / 1e9).toFixed(3) + " s";
  if (a >= 1e6) return (ns / 1e6).toFixed(3) + " ms";
  if (a >= 1e3) return (ns / 1e3).toFixed(3) + " us";
  return Math.round(ns) + " ns";
}
function label(f) { return f.file + ":" + f.line + "(" + f.name + ")"; }
function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); }

// o.table (thead and tbody), o.filter (an input, or null), o.rows, o.cols ({t: header, v: sort
// value, s: text, name: left-aligned name column, cell: a td of its own}), o.sortCol,
// o.text(row) what the filter matches, o.rowAttr ("data-fn"), o.rowClass(row, i), o.click(i),
// o.count (the root's attribute that says how many rows are shown).
function table(o) {
  var hr = o.table.tHead.insertRow(), tbody = o.table.tBodies[0];
  var state = {col: o.sortCol, desc: true};
  o.cols.forEach(function (c, i) {
    var th = el("th", c.name ? "name" : "", c.t);
    th.addEventListener("click", function () {
      if (state.col === i) state.desc = !state.desc; else { state.col = i; state.desc = !c.name; }
      render();
    });
    hr.appendChild(th);
  });
  if (o.filter) o.filter.addEventListener("input", render);
  function render() {
    var q = o.filter ? o.filter.value.toLowerCase() : "", idx = [];
    for (var i = 0; i < o.rows.length; i++)
      if (!q || o.text(o.rows[i]).toLowerCase().indexOf(q) >= 0) idx.push(i);
    var c = o.cols[state.col];
    idx.sort(function (a, b) {
      var x = c.v(o.rows[a]), y = c.v(o.rows[b]);
      if (x === y) return a - b;
      return (x < y ? -1 : 1) * (state.desc ? -1 : 1);
    });
    Array.prototype.forEach.call(hr.cells, function (th, i) {
      th.className = (o.cols[i].name ? "name " : "") + (i === state.col ? (state.desc ? "sorted-desc" : "sorted-asc") : "");
    });
    clear(tbody);
    idx.forEach(function (i) {
      var r = o.rows[i], tr = tbody.insertRow();
      tr.setAttribute(o.rowAttr, i);
      tr.className = o.rowClass ? o.rowClass(r, i) : "";
      o.cols.forEach(function (c) { tr.appendChild(c.cell ? c.cell(r, i) : el("td", c.name ? "name" : "", c.s(r))); });
      tr.addEventListener("click", function () { o.click(i); });
    });
    root.setAttribute(o.count, String(idx.length));
  }
  return {render: render, header: hr, body: tbody};
}

// o.box, o.info (hover text), o.path (the zoomed frame's ancestors as links), o.nodes (parents
// first, each with .p), o.width(n) (its width: 0 leaves it out), o.name(n), o.fill(n),
// o.title(n), o.mark(div, n) (optional), o.click(i) (optional, after the zoom).
function icicle(o) {
  var kids = o.nodes.map(function () { return []; });
  o.nodes.forEach(function (n, i) { if (i > 0) kids[n.p].push(i); });
  var zoom = 0;
  function draw() {
    clear(o.box);
    var total = o.width(o.nodes[zoom]) || 1, W = o.box.clientWidth || 1000, maxDepth = 0, drawn = 0;
    // The zoomed frame's ancestors on top, full width.
    var chain = [];
    for (var a = zoom; a > 0; a = o.nodes[a].p) chain.unshift(a);
    chain.unshift(0);
    function cell(i, depth, x, w, faded) {
      var n = o.nodes[i], d = el("div", "", w * W > 30 ? o.name(n) : "");
      d.style.left = (x * 100).toFixed(4) + "%";
      d.style.width = (w * 100).toFixed(4) + "%";
      d.style.top = (depth * 18) + "px";
      d.style.background = o.fill(n);
      if (o.mark) o.mark(d, n);
      if (faded) d.style.opacity = "0.55";
      d.title = o.title(n);
      d.addEventListener("click", function () { zoom = i; draw(); if (o.click) o.click(i); });
      d.addEventListener("mouseenter", function () { o.info.textContent = d.title.replace("\n", " \u2014 "); });
      o.box.appendChild(d);
      drawn++;
      maxDepth = Math.max(maxDepth, depth);
    }
    chain.forEach(function (i, depth) { if (i !== zoom) cell(i, depth, 0, 1, true); });
    (function walk(i, depth, x) {
      var n = o.nodes[i], w = o.width(n) / total;
      if ((w * W < 0.5 || o.width(n) <= 0) && i !== zoom) return;
      cell(i, depth, x, Math.min(w, 1), false);
      var off = x;
      kids[i].slice().sort(function (a, b) { return o.width(o.nodes[b]) - o.width(o.nodes[a]); }).forEach(function (c) {
        walk(c, depth + 1, off);
        off += o.width(o.nodes[c]) / total;
      });
    })(zoom, chain.length - 1, 0);
    o.box.style.height = ((maxDepth + 1) * 18 + 2) + "px";
    clear(o.path);
    chain.forEach(function (i, k) {
      var a = el("a", "", k === 0 ? "all" : o.name(o.nodes[i]));
      a.addEventListener("click", function () { zoom = i; draw(); });
      if (k) o.path.appendChild(document.createTextNode(" \u203A "));
      o.path.appendChild(a);
    });
    root.setAttribute("data-icicle", String(drawn));
  }
  window.addEventListener("resize", draw);
  return {draw: draw, zoomTo: function (i) { zoom = i; draw(); }};
}

return {root: root, el: el, human: human, label: label, clear: clear, table: table, icicle: icicle};
})();
