"""Bulk mail: mail that asks nothing of the person, so it is not sent to Gemini.

`bulk_reason(headers, category)` decides from what the sender declared in a few headers (`BULK_HEADERS`)
and from how the provider sorted the mail (`Email.provider_category`). The first rule that applies:

1. The provider filed it away from the person's own mail: Gmail's Promotions, Social or Forums
   ("category_promotions", "category_social", "category_forums").
2. The sender declares list or bulk mail, or an automatic reply: `Precedence: bulk | junk | list`
   ("precedence"), a `List-Id` ("list"), `Auto-Submitted: auto-replied` ("auto_submitted"). Transactional
   mail (a bill, a signing request, an order) is sent one to one and does not carry these.
3. A machine sent it: a `List-Unsubscribe`, or `Auto-Submitted` other than `no` (auto-generated,
   auto-notified). Skipped ("list", "auto_submitted"; "outlook_other" in Outlook's Other) **unless the
   provider filed it with the person's mail**: Gmail's Primary or Updates, Outlook's Focused.

Everything else is read, Outlook's Other included when nothing says a machine sent it: Other is where
Outlook puts mail from people it has not seen the person write to, and a first request from a new client
lands there.

What rule 3's exception keeps: transactional mail that asks something. Bill and statement senders add
List-Unsubscribe (their mailing service adds it to every message) and billing, signing and ticketing
systems mark their mail Auto-Submitted: auto-generated (so that out-of-office replies are not sent back),
yet Gmail files bills, statements and signing requests under Primary or Updates and Outlook under Focused
when the person deals with the sender. So "Your invoice is due, please pay by December 5" with a
List-Unsubscribe in Updates, or "Please review and sign the lease" marked auto-generated in Primary, are
read; receipts and notifications filed there are read too (Gemini finds no task in them: tokens, not a
lost ask). The cost the rule accepts: an ask posted to a mailing list (a List-Id, or Gmail's Forums) is
not read; the person still sees it in their mail.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

# The headers the rule reads, lower-cased; providers carry only these (bounded) on `Email.list_headers`.
BULK_HEADERS = ("list-unsubscribe", "list-id", "precedence", "auto-submitted")
MAX_HEADER_CHARS = 1_000

# Provider categories (`Email.provider_category`): Gmail's CATEGORY_* labels lower-cased without the
# prefix, Outlook's inferenceClassification.
BULK_CATEGORIES = {"promotions": "category_promotions", "social": "category_social", "forums": "category_forums"}
PERSONS_MAIL = {"personal", "updates", "focused"}

_BULK_PRECEDENCE = {"bulk", "junk", "list"}


def bulk_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The first value of each of BULK_HEADERS among `headers` (name, value), by lower-cased name."""
    found: dict[str, str] = {}
    for name, value in headers:
        key = name.strip().lower()
        if key in BULK_HEADERS and key not in found:
            found[key] = " ".join(str(value)[: MAX_HEADER_CHARS * 2].split())[:MAX_HEADER_CHARS]
    return found


def bulk_reason(headers: Mapping[str, str], category: str = "") -> str | None:
    """Why this mail is bulk and not sent to Gemini (see the module docstring), or None to read it.

    `headers`: header name -> value, any case (only BULK_HEADERS are read); `category`: the provider's
    sorting ("personal", "updates", "promotions", "social", "forums"; "focused", "other"; "" unknown)."""
    values = {name.lower(): value for name, value in headers.items()}
    category = category.lower()
    if category in BULK_CATEGORIES:
        return BULK_CATEGORIES[category]
    precedence = values.get("precedence", "").strip().lower()
    auto_submitted = values.get("auto-submitted", "").split(";")[0].strip().lower()
    if precedence in _BULK_PRECEDENCE:
        return "precedence"
    if values.get("list-id", "").strip():
        return "list"
    if auto_submitted == "auto-replied":
        return "auto_submitted"
    if values.get("list-unsubscribe", "").strip():
        machine = "list"
    elif auto_submitted not in ("", "no"):
        machine = "auto_submitted"
    else:
        return None
    if category in PERSONS_MAIL:
        return None
    return "outlook_other" if category == "other" else machine
