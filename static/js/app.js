// Tasklift's few behaviours in the browser. A static file, not inline script: the Content-Security-Policy
// forbids inline script and eval (htmx runs with allowEval off).
(function () {
  "use strict";

  function browserTimeZone() {
    try {
      return Intl.DateTimeFormat().resolvedOptions().timeZone || "";
    } catch (e) {
      return "";
    }
  }

  // Sign-up: the hidden time zone field takes the browser's zone.
  function fillTimeZones(root) {
    var zone = browserTimeZone();
    root.querySelectorAll("input[data-browser-tz]").forEach(function (input) {
      if (!input.value && zone) input.value = zone;
    });
    // Settings: a button that picks this device's zone, shown only when the list has it.
    root.querySelectorAll("button[data-browser-tz-target]").forEach(function (button) {
      var select = document.getElementById(button.getAttribute("data-browser-tz-target"));
      if (!select || !zone || !select.querySelector('option[value="' + zone + '"]')) return;
      button.hidden = false;
      button.textContent = "Use this device’s time zone (" + zone + ")";
      button.addEventListener("click", function () { select.value = zone; });
    });
  }

  // The "Extract now" refusal counts down the seconds to wait.
  function startCountdowns(root) {
    root.querySelectorAll("[data-countdown]").forEach(function (el) {
      if (el.dataset.counting) return;
      el.dataset.counting = "1";
      var left = parseInt(el.getAttribute("data-countdown"), 10) || 0;
      var timer = setInterval(function () {
        if (!document.body.contains(el)) { clearInterval(timer); return; }
        left -= 1;
        if (left > 0) {
          el.textContent = String(left);
          return;
        }
        clearInterval(timer);
        var sentence = el.closest(".countdown-text") || el;
        sentence.textContent = "You can start another extraction now.";
        var box = el.closest("[data-status='limited']");
        if (box) box.setAttribute("data-status", "ready");
      }, 1000);
    });
  }

  function selectOnFocus(root) {
    root.querySelectorAll("[data-select-on-focus]").forEach(function (input) {
      input.addEventListener("focus", function () { input.select(); });
    });
  }

  // A Copy button beside a read-only field (data-copy: the field's id), shown only where the clipboard is there.
  function copyButtons(root) {
    root.querySelectorAll("[data-copy]").forEach(function (button) {
      var field = document.getElementById(button.getAttribute("data-copy"));
      if (!field || !navigator.clipboard) return;
      button.hidden = false;
      button.addEventListener("click", function () {
        var said = document.getElementById(button.getAttribute("data-copy-status") || "");
        navigator.clipboard.writeText(field.value).then(function () {
          if (said) said.textContent = "Copied.";
        }, function () {
          field.select();
          if (said) said.textContent = "Press Ctrl+C (or ⌘C) to copy it.";
        });
      });
    });
  }

  function init(root) {
    fillTimeZones(root);
    startCountdowns(root);
    selectOnFocus(root);
    copyButtons(root);
  }

  document.addEventListener("DOMContentLoaded", function () { init(document); });
  document.addEventListener("htmx:load", function (event) { if (event.detail && event.detail.elt) init(event.detail.elt); });

  // Bulk select: "Select all" ticks every task shown (not those of a collapsed group).
  document.addEventListener("change", function (event) {
    if (event.target && event.target.id === "select-all") {
      document.querySelectorAll("#task-list .select-task").forEach(function (box) {
        if (!box.closest("details:not([open])")) box.checked = event.target.checked;
      });
    }
  });

  // The list fetches itself again when tasks change (a run, another tab), and a search or a filter redraws it.
  // Neither answer replaces the list while the person works in a row: while they edit a task or type its snooze
  // date (their typing would be lost), nor while a task's own request (Done, Dismiss, Snooze, a save) is on
  // its way (its answer goes to the row, and its notice with Undo, out of band, would go nowhere), nor while a
  // row's menu is open. The list is
  // then asked again once the row is free: by the search form when a search was held back, else by the list.
  // Ticked boxes stay ticked across a refresh.
  var waiting = null; // what asks again: the list, or the search form whose answer was held back
  var ticked = [];
  var rowRequests = 0; // requests of a task's row on their way
  var rowAnswers = 0; // requests of a task's row answered so far: a list asked before the last of them may not show it
  function editing() { return document.querySelector("#task-list .editing") !== null; }
  function typingSnooze() {
    var focused = document.activeElement;
    return Boolean(focused && focused.closest && focused.closest("#task-list [data-snooze]:not([hidden])"));
  }
  function menuOpen() { return document.querySelector('#task-list [role="menu"]:not([hidden])') !== null; }
  function rowBusy() { return editing() || typingSnooze() || menuOpen() || rowRequests > 0; }
  function holdBack(source) {
    if (!waiting || (source && source.id === "task-filters")) waiting = source || list();
  }
  function list() { return document.getElementById("task-list"); }
  function askAgain() {
    if (!waiting || rowBusy() || !window.htmx) return;
    var source = waiting;
    waiting = null;
    if (source.id === "task-filters" && source.isConnected) window.htmx.trigger(source, "change");
    else window.htmx.trigger(document.body, "tasksChanged");
  }

  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail && event.detail.elt;
    if (elt && elt.id === "task-list" && rowBusy()) {
      event.preventDefault();
      holdBack(elt);
    }
  });
  document.addEventListener("htmx:beforeSend", function (event) { // a request not cancelled: it will end
    var elt = event.detail && event.detail.elt;
    var xhr = event.detail && event.detail.xhr;
    if (elt && elt.closest && elt.closest("#task-list li.task") && xhr) {
      rowRequests += 1;
      xhr.addEventListener("loadend", function () {
        rowRequests -= 1;
        rowAnswers += 1;
        setTimeout(askAgain, 0); // after htmx has swapped the row's answer
      });
    }
    var target = event.detail && event.detail.target;
    if (target && target.id === "task-list" && xhr) xhr.tasksliftRowAnswers = rowAnswers;
  });
  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail && event.detail.target;
    if (target && target.id === "task-list" && rowBusy()) {
      event.detail.shouldSwap = false;
      holdBack(event.detail.elt);
      return;
    }
    // Asked before a task's own request was answered, the server may have read the list before that change:
    // put in, it would undo on the screen what the person has just done (a snoozed task back). Asked again.
    var xhr = event.detail && event.detail.xhr;
    if (target && target.id === "task-list" && xhr && xhr.tasksliftRowAnswers !== undefined &&
        xhr.tasksliftRowAnswers < rowAnswers) {
      event.detail.shouldSwap = false;
      holdBack(event.detail.elt);
      setTimeout(askAgain, 0);
      return;
    }
    if (target && target.id === "task-list") {
      ticked = Array.prototype.map.call(document.querySelectorAll("#task-list .select-task:checked"), function (box) {
        return box.value;
      });
    }
  });
  document.addEventListener("htmx:afterSettle", function (event) {
    var target = event.detail && event.detail.target;
    if (target && target.id === "task-list") {
      ticked.forEach(function (id) {
        var box = document.querySelector('#task-list .select-task[value="' + id + '"]');
        if (box) box.checked = true;
      });
      ticked = [];
    }
    askAgain();
  });
  // The snooze date left (focus elsewhere, or its field closed) without a request: the list may ask again.
  document.addEventListener("focusout", function () { setTimeout(askAgain, 0); });
  document.addEventListener("toggle", function () { setTimeout(askAgain, 0); }, true);
  document.addEventListener("click", function () { setTimeout(askAgain, 0); }); // a row's menu closed
  document.addEventListener("keyup", function (event) { if (event.key === "Escape") setTimeout(askAgain, 0); });
})();

// The IMAP connect form (templates/integrations/imap_connect.html): a preset names the server, so its fields are
// shown only for "Another server". Without JavaScript they show always, and the server ignores them for a preset.
(function () {
  var preset = document.getElementById("id_preset");
  if (!preset) return;
  function show() {
    ["host", "port", "security"].forEach(function (name) {
      var field = document.querySelector('#imap-form [data-field="' + name + '"]');
      if (field) field.hidden = preset.value !== "other";
    });
  }
  preset.addEventListener("change", show);
  show();
})();
