// The task list from the keyboard: a skip link, focus that stays where the person works, and the shortcuts people
// know from Gmail and Todoist (the list of keys: press ?). A static file: the Content-Security-Policy forbids
// inline script. Every shortcut acts by clicking the very button a mouse would, so it goes through the same
// htmx requests, and none acts while the person types in a field or while a dialog is open.
(function () {
  "use strict";

  var KEYS = [
    ["j", "Next task"],
    ["k", "Previous task"],
    ["x", "Select the task"],
    ["e or Enter", "Edit the task"],
    ["d", "Done"],
    ["#", "Dismiss"],
    ["z", "Undo"],
    ["o", "Read the task's email"],
    ["s", "Snooze the task to a date"],
    ["/", "Search"],
    ["n", "New task"],
    ["Escape", "Cancel an edit, close a menu, the snooze date, the email or this list"],
    ["?", "This list of keys"],
  ];

  function list() { return document.getElementById("task-list"); }
  // The tasks shown, in order (those of a collapsed group are not).
  function rows() {
    var l = list();
    if (!l) return [];
    return Array.prototype.filter.call(l.querySelectorAll("li.task"), function (row) {
      return !row.closest("details:not([open])");
    });
  }
  function rowOf(node) { return node && node.closest ? node.closest("#task-list li.task") : null; }

  var current = null; // the id of the task the keys act on: the one focused last

  // `quiet`: focus given back after a refresh, without scrolling (the task is where it was, and the person may
  // have scrolled on to point at another: a jump there moves what is under the pointer).
  function focusRow(row, action, quiet) {
    if (!row) return false;
    current = row.id;
    var target = action ? row.querySelector('[data-action="' + action + '"]') : null;
    if (target && target.checkVisibility && !target.checkVisibility()) target = null; // in the row's closed menu
    if (!target) {
      row.setAttribute("tabindex", "-1");
      target = row;
    }
    target.focus({ preventScroll: Boolean(quiet) });
    if (!quiet && row.scrollIntoView) row.scrollIntoView({ block: "nearest" });
    return true;
  }

  function currentRow() {
    var focused = rowOf(document.activeElement);
    if (focused) return focused;
    var remembered = current && document.getElementById(current);
    return remembered && rowOf(remembered) ? remembered : null;
  }

  // htmx puts swapped-in content (a list, a row, a notice with Undo) on the page at once but makes its forms and
  // links its own only once the swap has settled, 20 ms later or more on a loaded machine: a key pressed in
  // between would send a bare form or follow a bare link (the whole page again, focus lost). Until then the
  // content carries htmx's added class; its htmx:load says it is ready. (htmx.process instead would wire it
  // twice: the settle wires it again once the request has changed its class, and drops the first.)
  function clickOnceSettled(button) {
    var added = (window.htmx && window.htmx.config.addedClass) || "htmx-added";
    var fresh = button.closest("." + added);
    if (!fresh) {
      button.click();
      return;
    }
    fresh.addEventListener("htmx:load", function ready(event) {
      if (event.target !== fresh) return; // a swap inside it
      fresh.removeEventListener("htmx:load", ready);
      if (button.isConnected) button.click();
    });
  }

  function typing(target) {
    if (!target || !target.closest) return false;
    if (target.isContentEditable) return true;
    var field = target.closest("input, textarea, select");
    if (!field) return false;
    // A checkbox or a button-like input takes no text: the keys still work there.
    return !/^(checkbox|radio|button|submit|reset)$/.test(field.type || "");
  }

  function click(row, action) {
    var button = row && row.querySelector('[data-action="' + action + '"]');
    if (!button) return false;
    clickOnceSettled(button);
    return true;
  }

  // The list of keys, made once, in a dialog (Escape closes it, focus comes back where it was).
  function helpDialog() {
    var dialog = document.getElementById("keys-help");
    if (dialog) return dialog;
    dialog = document.createElement("dialog");
    dialog.id = "keys-help";
    dialog.className = "keys-help";
    dialog.setAttribute("aria-labelledby", "keys-help-title");
    var title = document.createElement("h2");
    title.id = "keys-help-title";
    title.textContent = "Keyboard shortcuts";
    dialog.appendChild(title);
    var table = document.createElement("dl");
    KEYS.forEach(function (pair) {
      var key = document.createElement("dt");
      var kbd = document.createElement("kbd");
      kbd.textContent = pair[0];
      key.appendChild(kbd);
      var what = document.createElement("dd");
      what.textContent = pair[1];
      table.appendChild(key);
      table.appendChild(what);
    });
    dialog.appendChild(table);
    var note = document.createElement("p");
    note.className = "meta";
    note.textContent = "The keys do nothing while you type in a field.";
    dialog.appendChild(note);
    var form = document.createElement("form");
    form.method = "dialog";
    var close = document.createElement("button");
    close.type = "submit";
    close.className = "secondary";
    close.textContent = "Close";
    form.appendChild(close);
    dialog.appendChild(form);
    document.body.appendChild(dialog);
    return dialog;
  }

  function move(step) {
    var all = rows();
    if (!all.length) return;
    var at = all.indexOf(currentRow());
    var next = at === -1 ? (step > 0 ? 0 : all.length - 1) : Math.min(Math.max(at + step, 0), all.length - 1);
    focusRow(all[next]);
    // The reading pane beside the list follows the task the keys are on (static/js/pane.js).
    document.dispatchEvent(new CustomEvent("tasklift:moved", { detail: { row: all[next] } }));
  }

  function focusField(selector) {
    var field = document.querySelector(selector);
    if (!field) return false;
    field.focus();
    if (field.select) field.select();
    return true;
  }

  // Snooze has no button to click: its date field opens in place (static/js/menus.js), and Enter there snoozes.
  function openSnooze(row) { return Boolean(window.TaskliftSnooze && window.TaskliftSnooze(row)); }

  document.addEventListener("keydown", function (event) {
    if (!list()) return;
    var target = event.target;

    // Escape in an edit form cancels it, from any of its fields.
    if (event.key === "Escape" && target && target.closest && target.closest("#task-list .task-edit")) {
      var editing = target.closest("li.task");
      if (click(editing, "cancel")) event.preventDefault();
      return;
    }
    if (event.ctrlKey || event.metaKey || event.altKey || event.defaultPrevented) return;
    if (typing(target) || document.querySelector("dialog[open]")) return;

    var row = currentRow();
    var key = event.key;
    var done = true;
    if (key === "j") move(1);
    else if (key === "k") move(-1);
    else if (key === "/") done = focusField("#search");
    else if (key === "n") done = focusField("#add-task input[name='title']");
    else if (key === "?") helpDialog().showModal();
    else if (key === "z") {
      var undo = document.getElementById("undo-button");
      if (undo) clickOnceSettled(undo);
      else done = false;
    } else if (!row) done = false;
    else if (key === "x") {
      var box = row.querySelector(".select-task");
      if (box) box.checked = !box.checked;
    } else if (key === "e") done = click(row, "edit");
    else if (key === "Enter") done = target === row && click(row, "edit"); // on a button, Enter is the button's
    else if (key === "d") done = click(row, "done");
    else if (key === "#") done = click(row, "dismiss");
    else if (key === "o") done = click(row, "read");
    else if (key === "s") done = openSnooze(row);
    else done = false;
    if (done) event.preventDefault();
  });

  // The skip link puts focus on what it names (also where Chrome would only move the starting point).
  document.addEventListener("click", function (event) {
    var link = event.target && event.target.closest ? event.target.closest("a.skip-link") : null;
    if (!link) return;
    var destination = document.getElementById((link.getAttribute("href") || "").slice(1));
    if (!destination) return;
    event.preventDefault();
    var first = destination.id === "task-list" ? rows()[0] : null;
    if (first) {
      focusRow(first);
      return;
    }
    destination.setAttribute("tabindex", "-1");
    destination.focus();
  });

  // Focus after an action. Done and Dismiss take the row away: focus goes to the same button of the task that
  // took its place (the next one, or the one before at the end). An edit focuses its title; its end (Save or
  // Cancel) focuses the row's Edit again. A refresh of the whole list keeps focus on the task it was on, and
  // Undo brings it back to the task undone.
  var after = null; // {kind: "next" | "same" | "task", id, action}

  document.addEventListener("click", function (event) {
    var control = event.target && event.target.closest ? event.target.closest("[data-action], #undo-button") : null;
    if (!control) return;
    var row = rowOf(control);
    var action = control.getAttribute("data-action");
    if (row && (action === "done" || action === "dismiss")) {
      var all = rows();
      var at = all.indexOf(row);
      var next = all[at + 1] || all[at - 1] || null;
      after = { kind: "next", id: next ? next.id : null, action: action };
    } else if (row && (action === "save" || action === "cancel")) {
      after = { kind: "same", id: row.id, action: "edit" };
    } else if (control.id === "undo-button") {
      var ids = control.form ? control.form.querySelectorAll("input[name='task_ids']") : [];
      after = ids.length ? { kind: "task", id: "task-" + ids[0].value, action: null } : null;
    }
  });

  // The task and control focused when the whole list was replaced, and whether "From before you connected"
  // was open: a refresh keeps both, and a search that hid the group gives it back as it was once cleared.
  var refocus = null;
  var earlierOpen = false;
  document.addEventListener("htmx:beforeSwap", function (event) {
    var target = event.detail && event.detail.target;
    if (target && target.id === "task-list" && event.detail.shouldSwap !== false) {
      var focused = document.activeElement;
      var row = rowOf(focused);
      refocus = row ? { id: row.id, action: focused.getAttribute("data-action") } : null;
      // A list without the group (a search none of its tasks matches) keeps what the person chose for it.
      var group = document.querySelector("#task-list details.earlier-group");
      if (group) earlierOpen = group.open;
    }
  });
  // Opened once the swap has settled: htmx wires the new group's "toggle once" fetch of its rows only then, and
  // a toggle before it would leave the group open on "Loading…" for good.
  document.addEventListener("htmx:afterSettle", function (event) {
    var target = event.detail && event.detail.target;
    var earlier = document.querySelector("#task-list details.earlier-group");
    if (target && target.id === "task-list" && earlier && earlierOpen && !earlier.open) earlier.open = true;
  });

  // Called once a swap is done (afterOnLoad, which htmx sends again from a parent when the row went away) and
  // once it has settled: whichever comes when the wanted element is there.
  function settleFocus(target) {
    if (!focusLost() && !rowOf(document.activeElement)) {
      after = null; // the person has moved on (to the search, a field, a dialog): focus stays there
      refocus = null;
      return;
    }
    var edit = document.querySelector("#task-list li.task.editing");
    // An edit form that just came (not one already open when something else was swapped) takes the focus.
    if (edit && target && target.id === edit.id && !edit.contains(document.activeElement)) {
      current = edit.id;
      var title = edit.querySelector('[data-field="title"] input') || edit.querySelector("input, textarea");
      if (title) title.focus();
      return;
    }
    if (after && after.kind === "next") {
      var wanted = after.id && document.getElementById(after.id);
      if (wanted) {
        focusRow(wanted, after.action);
        after = null;
        refocus = null;
      } else if (!rows().length) {
        after = null;
        focusField("#add-task input[name='title']");
      }
      return;
    }
    if (after && after.kind === "same") {
      var same = document.getElementById(after.id);
      if (same && !same.classList.contains("editing")) {
        focusRow(same, after.action);
        after = null;
        refocus = null;
      }
      return;
    }
    if (after && after.kind === "task") {
      var undone = document.getElementById(after.id); // once the list has come back with it
      if (undone) {
        focusRow(undone);
        after = null;
        refocus = null;
      }
      return;
    }
    if (refocus && target && target.id === "task-list") {
      var again = document.getElementById(refocus.id);
      if (again && focusLost()) focusRow(again, refocus.action, true);
      refocus = null;
    }
  }

  // Focus the swap took away (it was on what was replaced), not focus the person has since moved elsewhere: a
  // refresh that settles just after "/" must not pull the search's keystrokes back to the list.
  function focusLost() {
    var focused = document.activeElement;
    return !focused || focused === document.body || !focused.isConnected;
  }
  document.addEventListener("htmx:afterOnLoad", function (event) { settleFocus(event.detail && event.detail.target); });
  document.addEventListener("htmx:afterSettle", function (event) { settleFocus(event.detail && event.detail.target); });

  // Focus tells the keys which task they act on, whatever moved it (Tab, a click, the keys).
  document.addEventListener("focusin", function (event) {
    var row = rowOf(event.target);
    if (row) current = row.id;
  });
})();
