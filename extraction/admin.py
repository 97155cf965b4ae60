"""The extraction records in the admin. Runs and the ledger grow with every poll and every email: their
lists never count the whole table (EstimatedCountPaginator, no full count), read newest first by the
primary key, and search only exact values (a person, a mailbox, a run, an email's ids), each through an
index. No date hierarchy: its list of years and months is a scan of the table."""

from typing import Any

from django.contrib import admin, messages
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.template.defaultfilters import pluralize

from accounts.admin import ReadOnlyAdminMixin
from accounts.models import User
from config.pagination import EstimatedCountPaginator
from extraction.models import ExtractionLease, ExtractionRun, FetchFailure, ProcessedEmail
from extraction.services import ledger_replay
from integrations.models import Integration
from tasks.services import db_text


class RecordAdminMixin(ReadOnlyAdminMixin):
    """A record of what happened: read-only, and kept (deleting one would rewrite history or, for the
    ledger, send mail to the AI again)."""

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


MAX_SEARCH_TERMS = 10


def _terms(text: str) -> list[str]:
    return [db_text(term)[:512] for term in text.split()[:MAX_SEARCH_TERMS]]


def _people(terms: list[str]) -> dict[str, int]:
    """The people whose email address is one of `terms` (lower-cased, as addresses are stored)."""
    addresses = [term.lower() for term in terms if "@" in term]
    return dict(User.objects.filter(email__in=addresses).values_list("email", "pk")) if addresses else {}


def _mailboxes(terms: list[str]) -> dict[str, list[int]]:
    """For each term that is an email address: the mailboxes at that address, or of the person who has it.
    The people are looked up first, so that the mailboxes are read through two indexes (a join would read
    every mailbox to test its owner's address)."""
    addresses = [term.lower() for term in terms if "@" in term]
    found: dict[str, list[int]] = {}
    if addresses:
        owners = {pk: email for email, pk in _people(terms).items()}
        rows = Integration.objects.filter(Q(account_address__in=addresses) | Q(user_id__in=owners))
        for pk, address, user_id in rows.values_list("pk", "account_address", "user_id"):
            for term in {address, owners.get(user_id, "")} & set(addresses):
                found.setdefault(term, []).append(pk)
    return found


def _email_search(queryset: QuerySet[Any], text: str, *, email_key: bool) -> QuerySet[Any]:
    """Ledger-like rows (ProcessedEmail, FetchFailure) an operator's search finds: each term is a provider
    message id, a Message-ID (the ledger's `email_key`), or a mailbox's or its owner's address."""
    terms = _terms(text)
    mailboxes = _mailboxes(terms)
    for term in terms:
        match = Q(message_id=term) | Q(integration_id__in=mailboxes.get(term.lower(), []))
        if email_key:
            match |= Q(email_key=term)
        queryset = queryset.filter(match)
    return queryset


@admin.register(ExtractionRun)
class ExtractionRunAdmin(RecordAdminMixin, admin.ModelAdmin[ExtractionRun]):
    list_display = (
        "pk", "user", "trigger", "status", "created_at", "emails_fetched", "emails_sent_to_llm", "tasks_created",
        "items_closed", "llm_calls", "prompt_version", "error_code",
    )  # fmt: skip
    list_filter = ("status", "trigger", "prompt_version", "error_code", "created_at")
    search_fields = ("=user__email", "=id")  # see get_search_results
    search_help_text = "A person's email address, or a run's number."
    list_select_related = ("user",)
    show_full_result_count = False
    paginator = EstimatedCountPaginator
    ordering = ("-pk",)  # newest first, by the primary key's index (no index leads with created_at)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[ExtractionRun], search_term: str
    ) -> tuple[QuerySet[ExtractionRun], bool]:
        terms = _terms(search_term)
        people = _people(terms)
        for term in terms:
            person = [people[term.lower()]] if term.lower() in people else []
            run = [int(term)] if term.isascii() and term.isdigit() and len(term) < 19 else []  # a bigint
            queryset = queryset.filter(Q(user_id__in=person) | Q(pk__in=run))
        return queryset, False


@admin.register(ProcessedEmail)
class ProcessedEmailAdmin(RecordAdminMixin, admin.ModelAdmin[ProcessedEmail]):
    list_display = ("message_id", "integration", "purpose", "outcome", "tasks_created", "attempts", "run", "created_at")
    list_filter = ("outcome", "purpose", "integration__provider")
    search_fields = ("=message_id", "=email_key", "=integration__account_address", "=integration__user__email")
    search_help_text = "A message id, an email's Message-ID, or a mailbox's or its owner's email address."
    list_select_related = ("integration", "run")
    show_full_result_count = False
    paginator = EstimatedCountPaginator
    actions = ("replay",)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[ProcessedEmail], search_term: str
    ) -> tuple[QuerySet[ProcessedEmail], bool]:
        return _email_search(queryset, search_term, email_key=True), False

    @admin.action(description="Replay quarantined emails in the next run")
    def replay(self, request: HttpRequest, queryset: QuerySet[ProcessedEmail]) -> None:
        count = ledger_replay(entries=list(queryset))
        text = f"{count} quarantined email{pluralize(count)} will be read again in the next run."
        self.message_user(request, text, messages.INFO)


@admin.register(FetchFailure)
class FetchFailureAdmin(RecordAdminMixin, admin.ModelAdmin[FetchFailure]):
    list_display = ("message_id", "integration", "purpose", "attempts", "last_error_code", "updated_at")
    list_filter = ("last_error_code", "purpose", "integration__provider")
    search_fields = ("=message_id", "=integration__account_address", "=integration__user__email")
    search_help_text = "A message id, or a mailbox's or its owner's email address."
    list_select_related = ("integration",)
    show_full_result_count = False
    paginator = EstimatedCountPaginator

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[FetchFailure], search_term: str
    ) -> tuple[QuerySet[FetchFailure], bool]:
        return _email_search(queryset, search_term, email_key=False), False


@admin.register(ExtractionLease)
class ExtractionLeaseAdmin(RecordAdminMixin, admin.ModelAdmin[ExtractionLease]):
    list_display = ("user", "token", "run")
    search_fields = ("user__email",)
    list_select_related = ("user", "run")
