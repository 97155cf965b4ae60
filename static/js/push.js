// Settings' "Reminders on this device" (templates/accounts/_reminders_settings.html): turn notifications on in
// this browser (the service worker at /sw.js, the browser's push subscription sent to the server) or off.
(function () {
  "use strict";
  var section = document.getElementById("push-settings");
  if (!section) return;
  var on = document.getElementById("push-on");
  var off = document.getElementById("push-off");
  var status = document.getElementById("push-status");
  var csrf = document.querySelector("input[name=csrfmiddlewaretoken]");

  function say(text) {
    status.textContent = text;
  }

  function key(base64url) {
    var padded = (base64url + "===".slice((base64url.length + 3) % 4)).replace(/-/g, "+").replace(/_/g, "/");
    var raw = atob(padded);
    var bytes = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
    return bytes;
  }

  function label() {
    var agent = navigator.userAgent;
    var browser = /Edg\//.test(agent) ? "Edge" : /Firefox\//.test(agent) ? "Firefox" : /Chrome\//.test(agent) ? "Chrome" : /Safari\//.test(agent) ? "Safari" : "A browser";
    var system = /Android/.test(agent) ? "Android" : /iPhone|iPad/.test(agent) ? "iOS" : /Mac OS X/.test(agent) ? "macOS" : /Windows/.test(agent) ? "Windows" : /Linux/.test(agent) ? "Linux" : "";
    return system ? browser + " on " + system : browser;
  }

  function post(url, body) {
    return fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf ? csrf.value : "" },
      body: JSON.stringify(body),
    }).then(function (response) {
      return response.json().then(function (answer) {
        if (!response.ok) throw new Error(answer.message || "The server refused it.");
        return answer;
      });
    });
  }

  function show(subscribed) {
    on.hidden = subscribed;
    off.hidden = !subscribed;
  }

  if (!("serviceWorker" in navigator) || !("PushManager" in window) || !("Notification" in window)) {
    say("This browser cannot show notifications: reminders come by email.");
    return;
  }

  var registration = navigator.serviceWorker.register("/sw.js");
  registration
    .then(function (reg) { return reg.pushManager.getSubscription(); })
    .then(function (subscription) {
      show(Boolean(subscription));
      say(subscription ? "Notifications are on in this browser." : "");
    })
    .catch(function () { show(false); });

  on.addEventListener("click", function () {
    say("Asking this browser…");
    Notification.requestPermission()
      .then(function (permission) {
        if (permission !== "granted") throw new Error("This browser did not allow notifications: allow them for this site in its settings.");
        return registration;
      })
      .then(function (reg) {
        return reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: key(section.dataset.vapidKey) });
      })
      .then(function (subscription) {
        var body = subscription.toJSON();
        body.label = label();
        return post(section.dataset.subscribeUrl, body);
      })
      .then(function () {
        show(true);
        say("Notifications are on in this browser.");
      })
      .catch(function (error) {
        say("Notifications could not be turned on: " + error.message);
      });
  });

  off.addEventListener("click", function () {
    registration
      .then(function (reg) { return reg.pushManager.getSubscription(); })
      .then(function (subscription) {
        if (!subscription) return null;
        return post(section.dataset.unsubscribeUrl, { endpoint: subscription.endpoint }).then(function () {
          return subscription.unsubscribe();
        });
      })
      .then(function () {
        show(false);
        say("Notifications are off in this browser.");
      })
      .catch(function (error) {
        say("Notifications could not be turned off: " + error.message);
      });
  });
})();
