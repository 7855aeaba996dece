// The console's live updates: each section with data-stream listens to
// that server-sent event stream and puts what it sends into the page.
(function () {
  "use strict";
  var status = document.getElementById("live-status");
  function say(text) { if (status) { status.textContent = text; } }
  // live: the page follows the devstack; stale: it lost it, and what it
  // shows may be old (drawn apart, not in the live green).
  function live(ok) {
    say(ok ? "live" : "disconnected: this page may be stale; reconnecting…");
    if (status) { status.className = ok ? "live" : "live stale"; }
    document.body.classList.toggle("stale", !ok);
  }

  function fragment(html) {
    var t = document.createElement("template");
    t.innerHTML = html.trim();
    return t.content.firstElementChild;
  }

  // put puts html into el child by child, and keeps each child that
  // is the same already: a stream sends a whole part at each change of
  // any of it, and at each (re)connection the part as the page shows it,
  // so most of what it sends is there. A kept element keeps the focus or
  // the selection in it (and the node a reader holds).
  function put(el, html) {
    var t = document.createElement("template");
    t.innerHTML = html;
    var next = Array.prototype.slice.call(t.content.childNodes);
    var old = Array.prototype.slice.call(el.childNodes);
    if (next.length !== old.length) {
      el.replaceChildren(t.content);
      return;
    }
    next.forEach(function (n, i) {
      if (!old[i].isEqualNode(n)) { old[i].replaceWith(n); }
    });
  }

  function bodyOf(table) {
    var t = document.getElementById(table);
    return t && t.tBodies[0];
  }

  // A row of the fleet, as the server orders the page (fleet.go, rowMsg):
  // put (new, changed or moved) after the row before it, removed, the
  // rows not kept removed, or a pager replaced. A row that did not
  // change keeps its element, and the focus in it.
  function place(m) {
    var old = m.key ? document.getElementById(m.key) : null;
    var body;
    switch (m.op) {
    case "remove":
      if (old) { old.remove(); }
      return;
    case "keep":
      body = bodyOf(m.table);
      if (!body) { return; }
      var keep = {};
      (m.keys || []).forEach(function (k) { keep[k] = true; });
      Array.prototype.slice.call(body.rows).forEach(function (r) { if (!keep[r.id]) { r.remove(); } });
      return;
    case "pager":
      if (old) { put(old, m.html); }
      return;
    }
    body = bodyOf(m.table);
    if (!body) { return; }
    var row = old;
    if (m.html) {
      row = fragment(m.html);
      if (!row) { return; }
      if (old) {
        // A row whose content changed while the page was open is
        // marked, so that the eye finds what moved.
        if (old.outerHTML.replace(/ class="[^"]*changed[^"]*"/, "") !== row.outerHTML) { row.classList.add("changed"); }
        old.replaceWith(row);
      }
    }
    if (!row) { return; }
    var prev = m.after ? document.getElementById(m.after) : null;
    if (prev && prev.parentNode === body) {
      if (prev.nextElementSibling !== row) { prev.after(row); }
    } else if (!m.after) {
      if (body.firstElementChild !== row) { body.insertBefore(row, body.firstElementChild); }
    } else if (row.parentNode !== body) {
      body.appendChild(row);
    }
  }

  // An event of the events view: the newest first, the latest 1,000 kept.
  function putEvent(m) {
    var row = fragment(m.html);
    var body = bodyOf(m.table);
    if (!row || !body || document.getElementById(m.key)) { return; }
    body.insertBefore(row, body.firstChild);
    while (body.rows.length > 1000) { body.deleteRow(-1); }
  }

  function listen(section) {
    var source = new EventSource(section.getAttribute("data-stream"));
    source.onopen = function () { live(true); };
    source.onerror = function () { live(false); };
    source.addEventListener("row", function (e) { place(JSON.parse(e.data)); });
    source.addEventListener("event", function (e) { putEvent(JSON.parse(e.data)); });
    source.addEventListener("live", function (e) {
      var m = JSON.parse(e.data);
      var el = document.getElementById(m.key);
      if (el) { put(el, m.html); }
    });
  }

  document.querySelectorAll("[data-stream]").forEach(listen);

  // A timeline's bar that runs until now (data-running: the pixels it
  // grows a second) is drawn on to the time now, up to the picture's
  // edge (data-until), here alone: the server reads nothing for it, and
  // draws the picture again at the next change. A bar is timed from when
  // the page got it, so that the clocks need not agree.
  function grow() {
    var now = Date.now();
    document.querySelectorAll("rect[data-running]").forEach(function (r) {
      if (!r.growFrom) {
        r.growFrom = now;
        r.growWidth = parseFloat(r.getAttribute("width"));
      }
      var until = parseFloat(r.getAttribute("data-until")) - parseFloat(r.getAttribute("x"));
      var w = r.growWidth + (now - r.growFrom) / 1000 * parseFloat(r.getAttribute("data-running"));
      r.setAttribute("width", Math.max(r.growWidth, Math.min(w, until)).toFixed(1));
    });
  }
  if (document.getElementById("timeline")) { setInterval(grow, 250); }

})();
