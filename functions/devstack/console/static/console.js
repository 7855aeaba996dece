// The console's live updates: each section with data-stream listens to
// that server-sent event stream and puts what it sends into the page.
(function () {
  "use strict";
  var status = document.getElementById("live-status");
  function say(text) { if (status) { status.textContent = text; } }

  function fragment(html) {
    var t = document.createElement("template");
    t.innerHTML = html.trim();
    return t.content.firstElementChild;
  }

  function putRow(section, m) {
    var old = document.getElementById(m.key);
    if (!m.html) {
      if (old) { old.remove(); }
      return;
    }
    var row = fragment(m.html);
    if (!row) { return; }
    if (old) {
      old.replaceWith(row);
      return;
    }
    // New rows appear on the first page only: the others keep their place.
    var page = section.getAttribute("data-page");
    if (page && page !== "1") { return; }
    var table = document.getElementById(m.table);
    var body = table && table.tBodies[0];
    if (body) {
      body.insertBefore(row, body.firstChild);
      // The events view keeps its latest rows only.
      while (body.rows.length > 1000) { body.deleteRow(-1); }
    }
  }

  function listen(section) {
    var source = new EventSource(section.getAttribute("data-stream"));
    source.onopen = function () { say("live"); };
    source.onerror = function () { say("reconnecting…"); };
    source.addEventListener("row", function (e) { putRow(section, JSON.parse(e.data)); });
    source.addEventListener("event", function (e) { putRow(section, JSON.parse(e.data)); });
    source.addEventListener("live", function (e) {
      var m = JSON.parse(e.data);
      var el = document.getElementById(m.key);
      if (el) { el.innerHTML = m.html; }
    });
  }

  document.querySelectorAll("[data-stream]").forEach(listen);

})();
