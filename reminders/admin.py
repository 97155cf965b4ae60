"""Reminders in the admin: who chose the digest, what each day's digest did (read-only), and calendar links
(their hashes never shown; revoke)."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from reminders.models import CalendarFeed, DigestDay, DigestSubscription


@admin.register(DigestSubscription)
class DigestSubscriptionAdmin(admin.ModelAdmin[DigestSubscription]):
    list_display = ("user", "enabled", "updated_at", "unsubscribed_at")
    list_filter = ("enabled",)
    search_fields = ("user__email",)
    fields = readonly_fields = ("user", "enabled", "created_at", "updated_at", "unsubscribed_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # the person's own choice, in Settings


@admin.register(DigestDay)
class DigestDayAdmin(admin.ModelAdmin[DigestDay]):
    list_display = ("user", "day", "outcome", "tasks", "created_at")
    list_filter = ("outcome", "day")
    search_fields = ("user__email",)
    fields = readonly_fields = ("user", "day", "outcome", "tasks", "created_at")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: DigestDay | None = None) -> bool:
        return False


@admin.register(CalendarFeed)
class CalendarFeedAdmin(admin.ModelAdmin[CalendarFeed]):
    list_display = ("user", "prefix", "created_at", "last_fetched_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("user__email",)
    fields = readonly_fields = ("user", "prefix", "created_at", "last_fetched_at", "revoked_at")  # never the hash
    actions = ("revoke",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Revoke the selected calendar links")
    def revoke(self, request: HttpRequest, queryset: QuerySet[CalendarFeed]) -> None:
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"{count} calendar link{'s' if count != 1 else ''} revoked.")
