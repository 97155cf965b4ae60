"""Taking a message sent to a forward-to address, the same for SMTP and the webhook: decide, store, then answer.

The promise: a message is taken (SMTP 250, the webhook's 200) only once its raw bytes are committed to
PostgreSQL. A crash before that loses nothing, since the sender was not told it was taken and sends it again; a
crash after the commit, before the answer, stores nothing twice, since the retry has the same key (its
Message-ID and the digest of its bytes) and meets the row (`inbound_once`).

What is refused is refused at once, never read and never answered by mail (no backscatter): an unknown address,
a sender that is not the person (550), a From that its domain's DKIM or SPF does not vouch for (550 5.7.26), a
person without AI consent (550), too big (552), over a rate or the waiting limit (450/452: try later), and a DNS
or database failure (451: try later).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from email import message_from_bytes
from email.policy import compat32

from django.conf import settings
from django.db import transaction

from accounts.counting import Counter, CountingUnavailable, CountRefused, count_take, counter_key
from accounts.selectors import consent_allows_reading
from config.metrics import inbound_count
from config.unavailable import UNAVAILABLE
from extraction.crashpoints import crash_point
from integrations.inbound.addresses import forward_recipient, sender_addresses
from integrations.inbound.senders import from_address, sender_check
from integrations.mail.mime import message_id_key
from integrations.models import InboundMessage, Integration

logger = logging.getLogger(__name__)

HOUR_S = 3600


@dataclass(frozen=True)
class Answer:
    code: int  # the SMTP reply code: 250 taken, 4xx try later, 5xx refused
    text: str  # the enhanced status code and words, as SMTP says them
    outcome: str  # "accepted", or the reason refused (config/metrics.py INBOUND)

    @property
    def taken(self) -> bool:
        return self.code == 250

    @property
    def reply(self) -> str:
        return f"{self.code} {self.text}"


ACCEPTED = Answer(250, "2.0.0 Taken: it will be on your task list in a moment", "accepted")
UNKNOWN = Answer(550, "5.1.1 No such forward-to address", "unknown_recipient")
NOT_THE_PERSON = Answer(
    550, "5.7.1 Only the owner of this address may send to it, from an address on their account", "not_the_person"
)
NOT_ALIGNED = Answer(
    550, "5.7.26 The sender's domain does not vouch for this message (no aligned DKIM signature or SPF)", "not_aligned"
)
NO_CONSENT = Answer(550, "5.7.1 AI reading is off for this account: turn it on in Tasklift first", "no_consent")
TOO_BIG = Answer(552, "5.3.4 The message is larger than this address takes", "too_big")
RATE_PERSON = Answer(450, "4.2.1 Too many messages to this address this hour: try again later", "rate_person")
RATE_SENDER = Answer(450, "4.7.1 Too many messages from this sender this hour: try again later", "rate_sender")
QUEUE_FULL = Answer(452, "4.2.2 Too many messages wait to be read at this address: try again later", "queue_full")
DNS_TEMPORARY = Answer(451, "4.7.0 The sender could not be checked just now: try again later", "dns_temporary")
UNAVAILABLE_NOW = Answer(451, "4.3.0 Tasklift cannot store mail just now: try again later", "unavailable")
MALFORMED = Answer(554, "5.6.0 The message cannot be read", "malformed")


def message_key(raw: bytes) -> str:
    """The message's ledger id: its Message-ID and the digest of its bytes (a Message-ID alone may be reused)."""
    headers = message_from_bytes(raw[:200_000], policy=compat32)
    return f"{message_id_key(str(headers.get('Message-ID', '') or ''))}#{hashlib.sha256(raw).hexdigest()[:32]}"


def recipient_answer(address: str) -> tuple[Answer | None, Integration | None]:
    """At RCPT TO: the forward-to address named, or the refusal (an unknown address; the database out: 451)."""
    try:
        integration = forward_recipient(address)
    except UNAVAILABLE:
        return UNAVAILABLE_NOW, None
    return (UNKNOWN, None) if integration is None else (None, integration)


def inbound_accept(*, recipient: str, raw: bytes, client_ip: str, helo: str, mail_from: str, via: str) -> Answer:
    """Decide on one message for one recipient, store it if taken, and say so. Counts the outcome."""
    answer = _accept(recipient=recipient, raw=raw, client_ip=client_ip, helo=helo, mail_from=mail_from, via=via)
    inbound_count(via, answer.outcome)
    if not answer.taken:
        logger.info("inbound refused via=%s outcome=%s size=%d", via, answer.outcome, len(raw))
    return answer


def _accept(*, recipient: str, raw: bytes, client_ip: str, helo: str, mail_from: str, via: str) -> Answer:
    if len(raw) > settings.INBOUND_MAX_BYTES:
        return TOO_BIG
    refusal, integration = recipient_answer(recipient)
    if integration is None:
        return refusal or UNKNOWN
    try:
        return _accept_for(integration, raw=raw, client_ip=client_ip, helo=helo, mail_from=mail_from, via=via)
    except UNAVAILABLE as error:
        logger.warning("inbound: cannot store (%s)", type(error).__name__)
        return UNAVAILABLE_NOW


def _accept_for(integration: Integration, *, raw: bytes, client_ip: str, helo: str, mail_from: str, via: str) -> Answer:
    user = integration.user
    address = from_address(raw)
    if not address:
        return MALFORMED if not raw.strip() else NOT_THE_PERSON
    if address not in sender_addresses(user=user):
        return NOT_THE_PERSON  # before any lookup, and before anything of the person (their consent) is told
    verdict = sender_check(raw, address=address, client_ip=client_ip, helo=helo, mail_from=mail_from)
    if verdict.temporary:
        return DNS_TEMPORARY
    if not verdict.aligned:
        return NOT_ALIGNED
    if not consent_allows_reading(user_id=user.pk):
        return NO_CONSENT
    try:
        count_take(
            Counter(counter_key("inbound-person", str(user.pk)), settings.INBOUND_PER_PERSON_PER_HOUR, HOUR_S),
            Counter(counter_key("inbound-sender", address), settings.INBOUND_PER_SENDER_PER_HOUR, HOUR_S),
        )
    except CountRefused as refused:
        return RATE_PERSON if "inbound-person" in refused.counter.key else RATE_SENDER
    except CountingUnavailable:
        return UNAVAILABLE_NOW
    if InboundMessage.objects.filter(integration=integration).count() >= settings.INBOUND_MAX_WAITING:
        return QUEUE_FULL
    crash_point("inbound_received")
    with transaction.atomic():
        InboundMessage.objects.bulk_create(
            [
                InboundMessage(
                    integration=integration,
                    key=message_key(raw),
                    raw=raw,
                    size=len(raw),
                    envelope_from=mail_from[:320],
                    via=via,
                )
            ],
            ignore_conflicts=True,  # a retry of a message stored before the sender heard so: the same row
        )
        crash_point("inbound_stored_tx")
    crash_point("inbound_committed")
    _ring(integration)
    return ACCEPTED


def _ring(integration: Integration) -> None:
    """Ask for a run of the person (as a provider's doorbell would). Redis out: beat's scan finds the message."""
    from extraction.scheduling import extraction_doorbell

    try:
        extraction_doorbell(integration_ids=[integration.pk])
    except Exception as error:  # the message is stored: a run that cannot be asked for now is asked for later
        logger.warning("inbound: no run requested now (%s); the scan reads it", type(error).__name__)
