// evalkit's one script: sortable, filterable tables. Inlined in every page and allowed by its hash in the
// page's Content-Security-Policy, which allows nothing else. It reads cells' text and writes only text
// (textContent) and its own controls: text from documents or models never becomes markup.
(function () {
  "use strict";
  var FINE = { match: 1, matched: 1, ignored: 1, excluded: 1, PASS: 1 };
  var STATUS = ["outcome", "verdict"];

  function cellText(row, i) {
    var c = row.cells[i];
    return c ? c.textContent.trim() : "";
  }
  function number(s) {
    var t = s.replace(/[%,\s]/g, "");
    return t !== "" && isFinite(t) ? parseFloat(t) : NaN;
  }
  function blank(s) { return s === "" || s === "\u2014" || s === "n/a"; }
  function compare(a, b) {
    if (blank(a) || blank(b)) return blank(a) - blank(b);  // empty cells last either way
    var x = number(a), y = number(b);
    if (!isNaN(x) && !isNaN(y)) return x - y;
    return a.localeCompare(b, undefined, { numeric: true });
  }
  function headers(table) {
    var head = table.tHead && table.tHead.rows[table.tHead.rows.length - 1];
    return head ? Array.prototype.slice.call(head.cells) : [];
  }
  function rows(table) {
    return table.tBodies.length ? Array.prototype.slice.call(table.tBodies[0].rows) : [];
  }

  function sort(table, i, th) {
    var dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
    headers(table).forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir > 0 ? "ascending" : "descending");
    var body = table.tBodies[0];
    rows(table).map(function (r, k) { return [r, k]; })
      .sort(function (a, b) {
        var ta = cellText(a[0], i), tb = cellText(b[0], i);
        var c = blank(ta) || blank(tb) ? compare(ta, tb) : dir * compare(ta, tb);
        return c || a[1] - b[1];
      })
      .forEach(function (p) { body.appendChild(p[0]); });
  }

  function select(label, values) {
    var s = document.createElement("select");
    s.setAttribute("aria-label", label);
    [""].concat(values).forEach(function (v) {
      var o = document.createElement("option");
      o.value = v;
      o.textContent = v === "" ? "every " + label : v;
      s.appendChild(o);
    });
    return s;
  }

  function filters(table, names) {
    var all = rows(table), bar = document.createElement("div"), controls = [];
    bar.className = "ek-filter";
    var search = document.createElement("input");
    search.type = "search";
    search.placeholder = "filter rows";
    search.setAttribute("aria-label", "filter rows");
    bar.appendChild(search);
    var status = -1, failures = null;
    STATUS.forEach(function (n) { if (status < 0 && names.indexOf(n) >= 0) status = names.indexOf(n); });
    if (status >= 0) {
      var label = document.createElement("label");
      failures = document.createElement("input");
      failures.type = "checkbox";
      label.appendChild(failures);
      label.appendChild(document.createTextNode(" failures only"));
      bar.appendChild(label);
    }
    ["field", "outcome", "backend", "axis", "family"].forEach(function (n) {
      var i = names.indexOf(n);
      if (i < 0) return;
      var seen = {};
      all.forEach(function (r) { seen[cellText(r, i)] = 1; });
      var values = Object.keys(seen).sort();
      if (values.length < 2) return;
      var s = select(n, values);
      controls.push([i, s]);
      bar.appendChild(s);
    });
    var count = document.createElement("span");
    count.className = "ek-count";
    bar.appendChild(count);
    function apply() {
      var q = search.value.trim().toLowerCase(), shown = 0;
      all.forEach(function (r) {
        var ok = !q || r.textContent.toLowerCase().indexOf(q) >= 0;
        if (ok && failures && failures.checked) ok = !FINE[cellText(r, status).split(" ")[0]];
        controls.forEach(function (c) { if (ok && c[1].value !== "") ok = cellText(r, c[0]) === c[1].value; });
        r.hidden = !ok;
        shown += ok ? 1 : 0;
      });
      count.textContent = shown + " of " + all.length + " rows";
    }
    bar.addEventListener("input", apply);
    bar.addEventListener("change", apply);
    apply();
    table.parentNode.insertBefore(bar, table);
  }

  function enhance(table) {
    var ths = headers(table), body = rows(table);
    if (!ths.length || body.length < 2 || table.classList.contains("ek-kv")) return;  // key/value listings stay put
    var names = ths.map(function (th) { return th.textContent.trim(); });
    ths.forEach(function (th, i) {
      th.classList.add("ek-sortable");
      th.tabIndex = 0;
      th.title = "sort by " + names[i];
      th.addEventListener("click", function () { sort(table, i, th); });
      th.addEventListener("keydown", function (e) { if (e.key === "Enter") sort(table, i, th); });
    });
    if (body.length >= 10 || STATUS.some(function (n) { return names.indexOf(n) >= 0; })) filters(table, names);
  }

  Array.prototype.forEach.call(document.querySelectorAll("table"), enhance);
})();
