// Every form that acts carries the page's token (guard.go): the server
// refuses a form that was not sent from one of the console's pages. Added
// at the submit, so that forms a stream puts in the page carry it too.
(function () {
  "use strict";
  var meta = document.querySelector('meta[name="form-token"]');
  if (!meta) { return; }
  document.addEventListener("submit", function (e) {
    var f = e.target;
    if (!(f instanceof HTMLFormElement) || f.method !== "post" || f.elements["form-token"]) { return; }
    var input = document.createElement("input");
    input.type = "hidden";
    input.name = "form-token";
    input.value = meta.getAttribute("content");
    f.appendChild(input);
  }, true);
})();
