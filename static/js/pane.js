// The reading pane (templates/tasks/_email_pane.html): "Read email" fetches the pane into the page's dialog,
// which opens at once saying it is reading, then shows the email. Escape or Close closes it, and focus goes
// back to the task it was opened from. A static file: the Content-Security-Policy forbids inline script.
(function () {
  "use strict";

  var opener = null; // {row: id of the task row, action: "read"}

  function pane() { return document.getElementById("email-pane"); }

  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail && event.detail.elt;
    var dialog = pane();
    if (!dialog || !elt || !elt.matches || !elt.matches('[data-action="read"]')) return;
    var row = elt.closest("li.task");
    opener = row ? row.id : null;
    var waiting = document.createElement("p");
    waiting.className = "meta pane-waiting";
    waiting.setAttribute("role", "status");
    waiting.textContent = "Reading the email from your mailbox…";
    dialog.replaceChildren(waiting);
    if (!dialog.open) dialog.showModal();
  });

  document.addEventListener("htmx:afterSwap", function (event) {
    var dialog = pane();
    if (!dialog || !event.detail || event.detail.target !== dialog) return;
    if (!dialog.open) dialog.showModal();
    var title = document.getElementById("email-pane-title");
    if (title) title.focus();
  });

  // A pane that could not be fetched (the task is gone, the session ended) says so instead of staying empty.
  document.addEventListener("htmx:responseError", function (event) {
    var dialog = pane();
    if (!dialog || !dialog.open || !event.detail || event.detail.target !== dialog) return;
    var problem = document.createElement("p");
    problem.className = "pane-problem";
    problem.setAttribute("role", "alert");
    problem.textContent = "This email cannot be shown: the task may be gone, or you were logged out. Reload the page.";
    dialog.replaceChildren(problem);
  });

  document.addEventListener("close", function (event) {
    if (event.target !== pane()) return;
    var row = opener && document.getElementById(opener);
    var back = row && (row.querySelector('[data-action="read"]') || row);
    if (back && back.focus) {
      if (back === row) row.setAttribute("tabindex", "-1");
      back.focus();
    }
    pane().replaceChildren(); // the email's text does not stay in the page once closed
  }, true);
})();
