// Menus and the things that open in place: the header's Menu (narrow screens), the list's Filter, each task's
// "More actions" menu (the WAI-ARIA menu button pattern) and its snooze date. A static file: the
// Content-Security-Policy forbids inline script. Without script, static/css/noscript.css shows all of them open.
(function () {
  "use strict";

  // ---- Disclosures: a button with aria-expanded showing what aria-controls names (CSS does the showing) ----
  function disclosures() { return document.querySelectorAll("#nav-toggle, #filter-toggle"); }
  function setExpanded(button, open) { button.setAttribute("aria-expanded", open ? "true" : "false"); }

  document.addEventListener("click", function (event) {
    var toggle = event.target.closest && event.target.closest("#nav-toggle, #filter-toggle");
    if (toggle) {
      setExpanded(toggle, toggle.getAttribute("aria-expanded") !== "true");
      return;
    }
    // A click outside the header's menu closes it (the filters stay: the person is choosing among them).
    var nav = document.getElementById("nav-toggle");
    if (nav && nav.getAttribute("aria-expanded") === "true" && !event.target.closest("#site-nav")) setExpanded(nav, false);
  });

  // ---- The row menu ----
  function items(menu) { return Array.prototype.slice.call(menu.querySelectorAll('[role="menuitem"]')); }
  function buttonOf(menu) { return document.querySelector('[aria-controls="' + menu.id + '"][aria-haspopup]'); }
  function openMenu() { return document.querySelector('#task-list [role="menu"]:not([hidden])'); }

  function showMenu(button, at) {
    var menu = document.getElementById(button.getAttribute("aria-controls"));
    if (!menu) return;
    var other = openMenu();
    if (other && other !== menu) hideMenu(other, false);
    menu.hidden = false;
    setExpanded(button, true);
    var all = items(menu);
    var item = at === "last" ? all[all.length - 1] : all[0];
    if (item) item.focus();
  }

  function hideMenu(menu, refocus) {
    menu.hidden = true;
    var button = buttonOf(menu);
    if (!button) return;
    setExpanded(button, false);
    if (refocus) button.focus();
  }

  function step(menu, from, by) {
    var all = items(menu);
    if (!all.length) return;
    var at = all.indexOf(from);
    all[(at + by + all.length) % all.length].focus();
  }

  // ---- The snooze date of a row, opened from the menu or with s (static/js/keys.js) ----
  function openSnooze(row) {
    var panel = row && row.querySelector("[data-snooze]");
    var field = panel && panel.querySelector("input[name='snoozed_until']");
    if (!field) return false;
    panel.hidden = false;
    field.focus();
    return true;
  }
  function closeSnooze(panel) {
    panel.hidden = true;
    var row = panel.closest("li.task");
    var button = row && row.querySelector('[data-action="menu"]');
    if (button) button.focus();
  }
  window.TaskliftSnooze = openSnooze;

  document.addEventListener("click", function (event) {
    var target = event.target;
    if (!target.closest) return;
    var button = target.closest('[aria-haspopup="menu"]');
    if (button) {
      var menu = document.getElementById(button.getAttribute("aria-controls"));
      if (menu && menu.hidden) showMenu(button, "first");
      else if (menu) hideMenu(menu, true);
      return;
    }
    var item = target.closest('[role="menuitem"]');
    var open = openMenu();
    if (item && open && open.contains(item)) {
      // Once the item has done what it does (a form sent, a link followed by htmx): moving the focus now would
      // make htmx forget which button sent the form.
      setTimeout(function () {
        hideMenu(open, item.getAttribute("data-action") !== "snooze");
        if (item.getAttribute("data-action") === "snooze") openSnooze(item.closest("li.task"));
      }, 0);
      return;
    }
    if (open && !open.contains(target)) hideMenu(open, false); // a click elsewhere
    var cancel = target.closest('[data-action="snooze-cancel"]');
    if (cancel) closeSnooze(cancel.closest("[data-snooze]"));
  });

  // Capture: these keys are the menu's and the open panel's, before the list's shortcuts and the pane see them.
  document.addEventListener("keydown", function (event) {
    var target = event.target;
    if (!target || !target.closest || event.ctrlKey || event.metaKey || event.altKey) return;
    var key = event.key;

    var button = target.closest('[aria-haspopup="menu"]');
    if (button && (key === "ArrowDown" || key === "ArrowUp" || key === "Enter" || key === " ")) {
      event.preventDefault();
      event.stopPropagation();
      showMenu(button, key === "ArrowUp" ? "last" : "first");
      return;
    }

    var menu = target.closest('[role="menu"]');
    if (menu && !menu.hidden) {
      var done = true;
      if (key === "ArrowDown") step(menu, target, 1);
      else if (key === "ArrowUp") step(menu, target, -1);
      else if (key === "Home") items(menu)[0].focus();
      else if (key === "End") items(menu)[items(menu).length - 1].focus();
      else if (key === "Escape") hideMenu(menu, true);
      else if (key === "Tab") { hideMenu(menu, false); done = false; }
      else if (key === "Enter" || key === " ") { target.click(); }
      else if (key.length === 1 && /\S/.test(key)) { // the next item starting with that letter
        var all = items(menu);
        var at = all.indexOf(target);
        for (var i = 1; i <= all.length; i++) {
          var next = all[(at + i) % all.length];
          if (next.textContent.trim().toLowerCase().indexOf(key.toLowerCase()) === 0) { next.focus(); break; }
        }
      } else done = false;
      if (done) {
        event.preventDefault();
        event.stopPropagation();
      }
      return;
    }

    if (key !== "Escape") return;
    var panel = target.closest("[data-snooze]");
    if (panel && !panel.hidden) {
      event.preventDefault();
      event.stopPropagation();
      closeSnooze(panel);
      return;
    }
    var nav = document.getElementById("nav-toggle");
    if (nav && nav.getAttribute("aria-expanded") === "true" && (target === nav || target.closest("#site-nav"))) {
      event.preventDefault();
      event.stopPropagation();
      setExpanded(nav, false);
      nav.focus();
    }
  }, true);

  // Focus leaving an open menu (Tab, a click elsewhere) closes it.
  document.addEventListener("focusout", function (event) {
    var menu = event.target.closest && event.target.closest('[role="menu"]');
    if (!menu || menu.hidden) return;
    var to = event.relatedTarget;
    if (to && (menu.contains(to) || to === buttonOf(menu))) return;
    setTimeout(function () {
      if (!menu.hidden && !menu.contains(document.activeElement)) hideMenu(menu, false);
    }, 0);
  });
})();
