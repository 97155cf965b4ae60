"""What an answer says of the open items a prompt gave (item_1 …), checked by code as tasks are (DESIGN §7.5,
§7.8): an item id counts only for the email it was given with, at most one change per item, its sentence must
stand in that email's own text (`extraction.grounding`), and an update must name a real date. Anything else is
refused: not applied, counted on the run (`LLMResult.refused`), and never a reason to set the batch aside (the
model read the email; another attempt would not make a wrong id right).

Also whom a waiting item waits on: a recipient of the email it was asked in, never the model's words.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import date
from email.utils import parseaddr
from typing import Literal

from extraction.grounding import sentence_found
from extraction.prompt import ExtractionAnswer, Prompt
from integrations.mail.message import Email
from tasks.services import due_date_in_range

logger = logging.getLogger(__name__)

_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class ItemChange:
    """What one email does to one of the person's open items: closes it (delivered, paid, cancelled) or
    gives it a new due date, with the email's own words that say so."""

    task_id: int
    outcome: Literal["delivered", "updated"]
    sentence: str
    due_date: date | None = None


def item_changes(answer: ExtractionAnswer, prompt: Prompt) -> tuple[dict[str, list[ItemChange]], dict[str, int]]:
    """The changes the answer makes to the prompt's items, by email id, and how many it asked for that were
    refused, by email id."""
    changes: dict[str, list[ItemChange]] = {}
    refused: dict[str, int] = {}
    for entry in answer.emails:
        seen: set[str] = set()
        for item in entry.items:
            given = prompt.items.get(item.item_id)
            words = sentence_found(item.sentence, prompt.texts.get(entry.email_id, ""))
            due = _day(item.due_date) if item.outcome == "updated" else None
            if (
                given is None
                or given.email_id != entry.email_id  # an id of another email of the batch
                or item.item_id in seen
                or words is None
                or (item.outcome == "updated" and due is None)
            ):
                refused[entry.email_id] = refused.get(entry.email_id, 0) + 1
                continue
            seen.add(item.item_id)
            changes.setdefault(entry.email_id, []).append(ItemChange(given.task_id, item.outcome, words, due))
    if refused:
        logger.info("gemini named %d item changes that were refused", sum(refused.values()))
    return changes, refused


def recipient_named(named: str, email: Email) -> str:
    """The To or Cc recipient of `email` that `named` is ("Name <address>", an address, or a name; ignoring
    case), as the email's header writes it; "" when it is none of them (the model's text is not kept)."""
    name, address = parseaddr(" ".join(named.split()))
    wanted = (address or named).strip().casefold()
    if not wanted:
        return ""
    recipients = (*email.to, *email.cc)
    for recipient in recipients:
        if recipient.address.casefold() == wanted:
            return str(recipient)
    wanted_name = (name or named).strip().casefold()
    for recipient in recipients:
        display = " ".join(recipient.name.split()).casefold()
        if display and wanted_name in (display, display.split(" ", 1)[0]):
            return str(recipient)
    return ""


def _day(value: str | None) -> date | None:
    value = (value or "").strip()
    if not _ISO_DAY.fullmatch(value):
        return None
    try:
        day = date.fromisoformat(value)
    except ValueError:
        return None
    return day if due_date_in_range(day) else None
