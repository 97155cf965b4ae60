// Tasklift's service worker (served at /sw.js: reminders/views.py service_worker). It shows a reminder pushed by
// the server (reminders/push.py: {title, body, url, tag}) as a notification, and opens its task when clicked.
"use strict";

self.addEventListener("install", function () {
  self.skipWaiting();
});

self.addEventListener("activate", function (event) {
  event.waitUntil(self.clients.claim());
});

self.addEventListener("push", function (event) {
  var message = {};
  try {
    message = event.data ? event.data.json() : {};
  } catch (error) {
    message = { title: "Tasklift", body: event.data ? event.data.text() : "" };
  }
  var shown = self.registration.showNotification(message.title || "Tasklift reminder", {
    body: message.body || "",
    tag: message.tag || undefined,
    data: { url: message.url || "/" },
    renotify: Boolean(message.tag),
  });
  event.waitUntil(shown);
});

self.addEventListener("notificationclick", function (event) {
  event.notification.close();
  var url = (event.notification.data && event.notification.data.url) || "/";
  event.waitUntil(
    self.clients.matchAll({ type: "window", includeUncontrolled: true }).then(function (windows) {
      for (var i = 0; i < windows.length; i++) {
        if (windows[i].url === url && "focus" in windows[i]) return windows[i].focus();
      }
      return self.clients.openWindow(url);
    })
  );
});
