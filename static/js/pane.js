// The reading pane (templates/tasks/_email_pane.html): "Read email" (or o) fetches a task's email into the
// page's #email-pane. From 1100 px it is a column beside the list: the list keeps its scroll and its focus, and
// the pane follows the task j and k move to. Narrower it covers the screen, takes the focus, and Back (or
// Escape) gives the list back, with focus on the task it was opened from. A static file: the
// Content-Security-Policy forbids inline script.
(function () {
  "use strict";

  var WIDE = window.matchMedia("(min-width: 1100px)");
  var opener = null; // the id of the task row the pane shows

  function pane() { return document.getElementById("email-pane"); }
  function isOpen() { var p = pane(); return Boolean(p && !p.hidden); }

  // Full-screen, the rest of the page cannot be reached behind the pane (the keys and the screen reader alike).
  function behind() { return document.querySelectorAll("body > .skip-link, body > header, body > .simulated, main > :not(.workspace), .workspace > :not(#email-pane)"); }
  function setInert() {
    var cover = isOpen() && !WIDE.matches;
    behind().forEach(function (el) { el.toggleAttribute("inert", cover); });
  }

  function say(className, role, text) {
    var p = document.createElement("p");
    p.className = className;
    p.setAttribute("role", role);
    p.textContent = text;
    pane().replaceChildren(p);
  }

  function show() {
    var p = pane();
    p.hidden = false;
    document.documentElement.classList.add("pane-open");
    setInert();
  }

  function close() {
    var p = pane();
    if (!p || p.hidden) return;
    p.hidden = true;
    p.replaceChildren(); // the email's text does not stay in the page once closed
    document.documentElement.classList.remove("pane-open");
    setInert();
    var row = opener && document.getElementById(opener);
    var back = row && (row.querySelector('[data-action="menu"]') || row);
    if (back && !row.contains(document.activeElement)) {
      if (back === row) row.setAttribute("tabindex", "-1");
      back.focus();
    }
  }
  WIDE.addEventListener("change", setInert);

  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail && event.detail.elt;
    if (!pane() || !elt || !elt.matches || !elt.matches('[data-action="read"]')) return;
    var row = elt.closest("li.task");
    opener = row ? row.id : null;
    say("meta pane-waiting", "status", "Reading the email from your mailbox…");
    show();
  });

  document.addEventListener("htmx:afterSwap", function (event) {
    var p = pane();
    if (!p || !event.detail || event.detail.target !== p) return;
    show();
    if (!WIDE.matches) {
      var title = document.getElementById("email-pane-title");
      if (title) title.focus();
    }
  });

  // A pane that could not be fetched (the task is gone, the session ended) says so instead of staying empty.
  document.addEventListener("htmx:responseError", function (event) {
    if (!isOpen() || !event.detail || event.detail.target !== pane()) return;
    say("pane-problem", "alert", "This email cannot be shown: the task may be gone, or you were logged out. Reload the page.");
  });

  // Beside the list, the pane follows the task the keys moved to.
  document.addEventListener("tasklift:moved", function (event) {
    var row = event.detail && event.detail.row;
    if (!isOpen() || !WIDE.matches || !row || row.id === opener) return;
    var read = row.querySelector('[data-action="read"]');
    if (read) {
      if (window.htmx) window.htmx.process(read);
      read.click();
      return;
    }
    opener = row.id;
    say("meta pane-none", "status", "This task was added by hand: it has no email.");
  });

  document.addEventListener("click", function (event) {
    if (event.target.closest && event.target.closest('[data-action="close-pane"]')) close();
  });

  // Escape closes the pane: from inside it, or from the list beside it (after a menu, a snooze date or an edit
  // has had the key: they are earlier listeners).
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape" || event.defaultPrevented || !isOpen()) return;
    var target = event.target;
    var inPane = target && target.closest && target.closest("#email-pane");
    var field = target && target.closest && target.closest("input, textarea, select");
    var typing = field && !/^(checkbox|radio|button|submit|reset)$/.test(field.type || "");
    if (!inPane && (typing || document.querySelector("dialog[open]"))) return;
    event.preventDefault();
    close();
  });
})();
