from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpResponsePermanentRedirect
from django.templatetags.static import static
from django.urls import path, re_path

from accounts import views as account_views
from accounts.throttle import login_throttled
from config.api import api, api_not_found
from config.csp import csp_report
from config.health import healthz, readyz
from config.metrics import metrics
from extraction import views as extraction_views
from integrations import forwardviews as forward_views
from integrations import views as integration_views
from integrations import webhooks
from reminders import views as reminder_views
from tasks import pane_views
from tasks import views as task_views

urlpatterns = [
    # Browsers and feed readers ask for /favicon.ico whatever a page links: the icon, not a 404 in every log.
    # The icon's URL is asked for at request time: in production it is the manifest's hashed name, and the URLconf
    # is imported before (and whether or not) collectstatic has run.
    path("favicon.ico", lambda request: HttpResponsePermanentRedirect(static("favicon.svg")), name="favicon"),
    path("", task_views.home, name="home"),
    path("tasks/list", task_views.task_list_partial, name="task_list_partial"),
    path("tasks/earlier", task_views.task_earlier_rows, name="task_earlier"),
    path("tasks/add", task_views.task_add, name="task_add"),
    path("tasks/changes", task_views.task_changes, name="task_changes"),
    path("tasks/bulk", task_views.task_bulk, name="task_bulk"),
    path("tasks/<int:task_id>", task_views.task_row, name="task_row"),
    path("tasks/<int:task_id>/edit", task_views.task_edit, name="task_edit"),
    path("tasks/<int:task_id>/status", task_views.task_status, name="task_status"),
    path("tasks/<int:task_id>/history/<int:event_id>/undo", task_views.task_event_undo_view, name="task_event_undo"),
    path("tasks/<int:task_id>/suggestion/<int:event_id>", task_views.task_suggestion, name="task_suggestion"),
    path("tasks/quick-add", reminder_views.quick_add_preview, name="quick_add_preview"),
    path("tasks/<int:task_id>/snooze", reminder_views.snooze, name="task_snooze"),
    path("tasks/<int:task_id>/unsnooze", reminder_views.unsnooze, name="task_unsnooze"),
    path("tasks/snoozed", reminder_views.snoozed_tasks, name="snoozed_tasks"),
    path("settings/digest", reminder_views.settings_digest, name="settings_digest"),
    path("settings/calendar", reminder_views.calendar_create, name="calendar_create"),
    path("settings/forward/rotate", forward_views.forward_rotate, name="forward_rotate"),
    path("settings/forward/senders", forward_views.forward_sender_add_view, name="forward_sender_add"),
    path(
        "settings/forward/senders/<int:sender_id>/remove",
        forward_views.forward_sender_remove,
        name="forward_sender_remove",
    ),
    path(
        "settings/forward/confirm/<str:token>", forward_views.forward_sender_confirm_view, name="forward_sender_confirm"
    ),
    path("settings/push/subscribe", reminder_views.push_subscribe_view, name="push_subscribe"),
    path("settings/push/unsubscribe", reminder_views.push_unsubscribe_view, name="push_unsubscribe"),
    path("settings/push/<int:subscription_id>/remove", reminder_views.push_remove, name="push_remove"),
    path("sw.js", reminder_views.service_worker, name="service_worker"),
    path("settings/calendar/<int:feed_id>/revoke", reminder_views.calendar_revoke, name="calendar_revoke"),
    path("calendar/<str:secret>.ics", reminder_views.calendar_feed, name="calendar_feed"),
    path("digest/unsubscribe", reminder_views.digest_unsubscribe, name="digest_unsubscribe"),
    path("tasks/<int:task_id>/email", pane_views.task_email_pane, name="task_email"),
    path("extract", extraction_views.extract_now, name="extract_now"),
    path("runs/<int:run_id>", extraction_views.run_status, name="run_status"),
    path("runs/<int:run_id>/cancel", extraction_views.run_cancel, name="run_cancel"),
    path("tasks/<int:task_id>/mute-sender", extraction_views.mute_sender, name="task_mute_sender"),
    path("settings/muted/<int:muted_id>/delete", extraction_views.unmute_sender, name="muted_sender_delete"),
    path("consent/", account_views.consent, name="consent"),
    path("settings/", account_views.settings_page, name="settings"),
    path("settings/timezone", account_views.settings_timezone, name="settings_timezone"),
    path("settings/language", account_views.settings_language, name="settings_language"),
    path("settings/tokens", account_views.token_create, name="token_create"),
    path("settings/tokens/<int:token_id>/revoke", account_views.token_revoke, name="token_revoke"),
    path("mailboxes/", integration_views.mailboxes, name="mailboxes"),
    path("mailboxes/<int:integration_id>/disconnect", integration_views.disconnect, name="mailbox_disconnect"),
    path("mailboxes/<int:integration_id>/replay", integration_views.replay_quarantined, name="mailbox_replay"),
    path("mailboxes/skipped/<int:entry_id>/read", integration_views.read_skipped, name="skipped_read"),
    path("mailboxes/skipped/<int:entry_id>/always", integration_views.always_read, name="skipped_always_read"),
    path("settings/bulk-mail", account_views.settings_bulk_mail, name="settings_bulk_mail"),
    path("integrations/google/connect", integration_views.google_connect, name="google_connect"),
    path("integrations/google/callback", integration_views.google_callback, name="google_callback"),
    path("integrations/imap/connect", integration_views.imap_connect_page, name="imap_connect"),
    path("integrations/microsoft/connect", integration_views.microsoft_connect, name="microsoft_connect"),
    path("integrations/microsoft/callback", integration_views.microsoft_callback, name="microsoft_callback"),
    path("webhooks/gmail", webhooks.gmail_push, name="webhook_gmail"),
    path("webhooks/outlook", webhooks.outlook_notify, name="webhook_outlook"),
    path("webhooks/outlook/lifecycle", webhooks.outlook_lifecycle, name="webhook_outlook_lifecycle"),
    path("webhooks/inbound", webhooks.inbound_webhook, name="webhook_inbound"),
    path("signup/", account_views.signup, name="signup"),
    path("signup/check-your-inbox/", account_views.signup_done, name="signup_done"),
    path("signup/resend/", account_views.signup_resend, name="signup_resend"),
    path("signup/confirm/<str:token>/", account_views.signup_confirm, name="signup_confirm"),
    path("password-reset/", account_views.TaskliftPasswordResetView.as_view(), name="password_reset"),
    path(
        "password-reset/sent/",
        auth_views.PasswordResetDoneView.as_view(template_name="registration/password_reset_done.html"),
        name="password_reset_done",
    ),
    path(
        "password-reset/<uidb64>/<token>/",
        account_views.TaskliftPasswordResetConfirmView.as_view(),
        name="password_reset_confirm",
    ),
    path(
        "password-reset/done/",
        auth_views.PasswordResetCompleteView.as_view(template_name="registration/password_reset_complete.html"),
        name="password_reset_complete",
    ),
    path("login/", login_throttled(account_views.TaskliftLoginView.as_view()), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics, name="metrics"),
    path("readyz", readyz, name="readyz"),
    path("csp-report/", csp_report, name="csp_report"),
    path("admin/login/", login_throttled(admin.site.login)),  # before the admin's own routes
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    re_path(r"^api/", api_not_found),
]
