"""The reading pane: a task's email as Tasklift read it, fetched from its mailbox when the person opens it.

What it shows is what the prompt carried (`extraction.prompt.build_prompt`, the text grounding searched): the
subject and the cleaned body (quoted history and signature removed, secrets replaced by placeholders,
bounded), with the task's sentence marked; and beside it the sender, To, Cc and date of the email. The email
is read through the provider clients of integrations/providers as a run reads it (a token refreshed on the
way is kept, a refused sign-in makes the mailbox "needs reconnecting"), then forgotten: nothing of it is
stored, and the answer is not cached (the view says no-store).

It reads only while the person's AI consent is in force (DESIGN §7.3: no provider fetch without it), only
the message of that task, from a mailbox of theirs that received it, and never while the provider has asked
Tasklift to wait. Every failure is an `EmailUnavailable` whose message says what happened and what to do,
with the provider's link, which still works."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from accounts.selectors import consent_in_force
from config.errors import ApplicationError
from extraction.prompt import build_prompt, temp_id
from integrations.mail.clean import ELLIPSIS
from integrations.models import Integration
from integrations.providers.base import (
    Email,
    ProviderAuthError,
    ProviderError,
    ProviderNotFound,
    ProviderRateLimited,
    provider_close,
)
from integrations.services import (
    integration_mark_failed,
    integration_provider,
    integration_save_refreshed_credentials,
)
from integrations.weblinks import message_web_link
from tasks.models import Task


class EmailUnavailable(ApplicationError):
    """The pane cannot show the email; `link` (may be "") still opens it at the provider."""

    def __init__(self, message: str, *, code: str, link: str = "") -> None:
        super().__init__(message, code=code, extra={"link": link})
        self.link = link


@dataclass(frozen=True)
class Passage:
    text: str
    marked: bool = False  # the task's sentence


@dataclass(frozen=True)
class EmailReading:
    provider: str  # "Gmail" | "Outlook"
    address: str  # the mailbox it was read from
    link: str  # opens it at the provider (or the sandbox's copy)
    sender: str
    to: list[str]
    cc: list[str]
    received_at: datetime
    subject: list[Passage]
    body: list[Passage]
    sentence_marked: bool  # False: the sentence is not in the text as it reads now (shown apart)


@dataclass(frozen=True)
class _Source:
    integration: Integration
    message_id: str
    web_link: str

    @property
    def link(self) -> str:
        return message_web_link(
            provider=self.integration.provider,
            address=self.integration.account_address,
            message_id=self.message_id,
            web_link=self.web_link,
        )


def task_email_read(*, task: Task) -> EmailReading:
    """The email `task` came from, read now from the first of the person's mailboxes that has it. Raises
    EmailUnavailable (with a message for the person) when it cannot be shown."""
    if task.source != Task.Source.EMAIL_AI:
        raise EmailUnavailable("This task was added by hand: there is no email behind it.", code="no_email")
    sources = _sources(task)
    link = sources[0].link if sources else task.email_link
    if consent_in_force(user=task.user) is None:
        raise EmailUnavailable(
            "Tasklift reads your mail only while your AI consent is in force. Give it again on the AI consent "
            "page to see the email here, or open it in your mailbox.",
            code="consent_needed",
            link=link,
        )
    usable = [s for s in sources if s.integration.status == Integration.Status.ACTIVE]
    if not usable:
        raise EmailUnavailable(
            "The mailbox this email came to is not connected any more (or needs reconnecting on the "
            "Mailboxes page), so Tasklift cannot read it.",
            code="mailbox_not_connected",
            link=link,
        )
    problem: EmailUnavailable | None = None
    for source in usable:
        try:
            email = _fetch(source)
        except EmailUnavailable as error:
            problem = problem or error
            continue
        return _reading(task, source, email)
    assert problem is not None
    raise problem


def _sources(task: Task) -> list[_Source]:
    """Where the email is: each mailbox it reached (the task's own first), or, for a task from before
    mailbox links, its mailbox and provider message id."""
    links = sorted(task.links.all(), key=lambda link: (link.integration_id != task.integration_id, link.pk))
    sources = [_Source(link.integration, link.message_id, link.web_link or task.email_link) for link in links]
    if not sources and task.integration is not None and task.source_id:
        sources = [_Source(task.integration, task.source_id, task.email_link)]
    return sources


def _fetch(source: _Source) -> Email:
    integration = source.integration
    name = integration.get_provider_display()
    if integration.retry_after and integration.retry_after > timezone.now():
        raise EmailUnavailable(
            f"{name} asked Tasklift to wait until {timezone.localtime(integration.retry_after):%H:%M}; "
            f"open the email in {name}, or try again then.",
            code="provider_rate_limited",
            link=source.link,
        )
    provider = None
    try:
        provider = integration_provider(integration=integration)
        fetched = provider.fetch_emails([source.message_id])
        if source.message_id in fetched.failed:
            raise fetched.failed[source.message_id]
        if not fetched.emails:
            raise ProviderNotFound("The message was not returned.")
        return fetched.emails[0]
    except ProviderError as error:
        if isinstance(error, ProviderAuthError):
            integration_mark_failed(integration=integration, error=error)  # as a run would: reconnect to go on
        raise EmailUnavailable(_problem(error, integration), code=error.code, link=source.link) from error
    finally:
        if provider is not None:
            provider_close(provider)
            integration_save_refreshed_credentials(integration=integration, provider=provider)


def _problem(error: ProviderError, integration: Integration) -> str:
    """What the person reads when the provider would not give the email, and what they can do."""
    name = integration.get_provider_display()
    if isinstance(error, ProviderAuthError):
        return (
            f"{name} refused Tasklift's sign-in for {integration.account_address}. Reconnect it on the Mailboxes "
            "page to read its mail again."
        )
    if isinstance(error, ProviderNotFound):
        return f"{name} no longer has this email in {integration.account_address}: it may have been deleted."
    if isinstance(error, ProviderRateLimited):
        return f"{name} asks Tasklift to slow down just now. Try again in a minute, or open the email in {name}."
    return (
        f"{name} could not be reached to read this email ({error.message}). Try again in a moment, or open it "
        f"in {name}."
    )


def _reading(task: Task, source: _Source, email: Email) -> EmailReading:
    # The very text the prompt carried for this email, and where grounding found the sentence: its subject,
    # a line break, its cleaned body. Built with no reader: recipients are shown from the email itself.
    text = build_prompt([email], max_body_chars=settings.EXTRACTION_MAX_BODY_CHARS).texts[temp_id(0)]
    subject, _, body = text.partition("\n")
    span = _sentence_span(task.sentence, text)
    return EmailReading(
        provider=source.integration.get_provider_display(),
        address=source.integration.account_address,
        link=source.link,
        sender=email.sender,
        to=[str(recipient) for recipient in email.to],
        cc=[str(recipient) for recipient in email.cc],
        received_at=email.received_at,
        subject=_passages(subject, span, offset=0),
        body=_passages(body, span, offset=len(subject) + 1),
        sentence_marked=span is not None,
    )


def _sentence_span(sentence: str, text: str) -> tuple[int, int] | None:
    """Where the task's sentence stands in `text`. It is the text's own words at the match, on one line
    (extraction.grounding keeps them so), perhaps cut short with an ellipsis: its words, any whitespace
    between them."""
    words = sentence.removesuffix(ELLIPSIS).split()
    if not words:
        return None
    match = re.search(r"\s+".join(re.escape(word) for word in words), text)
    return match.span() if match else None


def _passages(text: str, span: tuple[int, int] | None, *, offset: int) -> list[Passage]:
    """`text` (which starts at `offset` of the whole) cut around the part of `span` it holds."""
    if span is None:
        return [Passage(text)] if text else []
    start, end = max(span[0] - offset, 0), min(span[1] - offset, len(text))
    if start >= end:
        return [Passage(text)] if text else []
    parts = [Passage(text[:start]), Passage(text[start:end], marked=True), Passage(text[end:])]
    return [part for part in parts if part.text]
