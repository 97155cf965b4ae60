"""What the prompts cost, and what cleaning, bulk skipping and redaction keep, over a labelled mixed inbox.

    uv run python benchmarks/tokens.py

The inbox is `benchmarks/data/inbox.py`: replies in twelve languages with quotes and signatures, the shapes
that used to cut asks, HTML mail, newsletters, notifications, receipts, bills and forms to sign, and mail
carrying secrets, each with its asks and secrets marked by hand, and the bulk headers and provider sorting
its provider would give. Mail the bulk rule skips (`integrations.mail.bulk.bulk_reason`) is not sent; the rest
goes into prompts as the app builds them: HTML mail turned into text by `integrations.mail.mime.html_to_text`,
then `extraction.prompt.build_prompt` (which redacts secrets and cleans each body) in batches of
`MAX_EMAILS_PER_PROMPT`, with `settings.EXTRACTION_MAX_BODY_CHARS`. Nothing is sent anywhere.

Tokens are estimated as characters / 4 (as the sandbox counts them), system instruction included in every
call. The naive prompt sends one email per call: its headers (From, To, Subject, Date, Message-ID) and its
whole body as delivered (the HTML source for HTML mail), after the same system instruction.

An ask is lost by cleaning when the prompt does not hold it (cleaning, or a redaction, changed it), and lost
by skipping when its email was skipped as bulk. A secret is sent when the prompt still holds it.

Human-readable figures first; the last line printed is one JSON object with every figure. The exit status is
1 when an ask is lost or a secret sent.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the project is one level up
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django

django.setup()

from django.conf import settings  # noqa: E402

from benchmarks.data.inbox import LabelledEmail, labelled_inbox  # noqa: E402
from extraction.prompt import MAX_EMAILS_PER_PROMPT, PROMPT_VERSION, SYSTEM_INSTRUCTION, build_prompt  # noqa: E402
from integrations.mail.bulk import bulk_headers, bulk_reason  # noqa: E402
from integrations.mail.conversation import Recipient  # noqa: E402
from integrations.mail.mime import html_to_text  # noqa: E402
from integrations.providers.base import Email  # noqa: E402

CHARS_PER_TOKEN = 4
FIRST_DATE = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)
READER = "reader@example.com"


def tokens(text: str) -> float:
    return len(text) / CHARS_PER_TOKEN


def as_app_email(index: int, labelled: LabelledEmail) -> Email:
    return Email(
        provider=labelled.provider,
        message_id=f"m{index}",
        thread_id=f"t{index}",
        sender=labelled.sender,
        subject=labelled.subject,
        received_at=FIRST_DATE + timedelta(minutes=index),
        body_text=html_to_text(labelled.html) if labelled.html else labelled.text,
        web_link="",
        list_headers=bulk_headers(labelled.headers.items()),
        provider_category=labelled.category,
        to=(Recipient("Reader", READER),),  # as the naive prompt's To line: what a real prompt carries too
    )


def naive_prompt(index: int, labelled: LabelledEmail) -> str:
    headers = (
        f"From: {labelled.sender}\nTo: {READER}\nSubject: {labelled.subject}\n"
        f"Date: {(FIRST_DATE + timedelta(minutes=index)).isoformat()}\nMessage-ID: <m{index}@example.com>\n\n"
    )
    return SYSTEM_INSTRUCTION + headers + (labelled.html or labelled.text)


def blocks_of(content: str) -> dict[str, str]:
    """Each email's block in a prompt, by temporary id."""
    blocks = {}
    for part in content.split('<email id="')[1:]:
        email_id, _, rest = part.partition('">')
        blocks[email_id] = rest.split("</email>")[0]
    return blocks


def squeeze(text: str) -> str:
    return " ".join(text.split())


def run() -> dict[str, object]:
    inbox = labelled_inbox()
    emails = [as_app_email(index, labelled) for index, labelled in enumerate(inbox)]
    reasons = {index: bulk_reason(email.list_headers, email.provider_category) for index, email in enumerate(emails)}
    sent = [(index, inbox[index]) for index, reason in reasons.items() if reason is None]
    skipped = [index for index, reason in reasons.items() if reason is not None]
    prompt_chars = 0
    lost_by_cleaning: list[tuple[int, str]] = []
    secrets_sent: list[tuple[int, str]] = []
    redacted: Counter[str] = Counter()
    for start in range(0, len(sent), MAX_EMAILS_PER_PROMPT):
        batch = sent[start : start + MAX_EMAILS_PER_PROMPT]
        prompt = build_prompt(
            [emails[index] for index, _ in batch], max_body_chars=settings.EXTRACTION_MAX_BODY_CHARS, reader=[READER]
        )
        prompt_chars += len(SYSTEM_INSTRUCTION) + len(prompt.contents)
        redacted.update(prompt.redacted)
        blocks = blocks_of(prompt.contents)
        for email_id, (index, labelled) in zip(prompt.mapping, batch, strict=True):
            block = squeeze(blocks[email_id])
            lost_by_cleaning += [(index, ask) for ask in labelled.asks if squeeze(ask) not in block]
            secrets_sent += [(index, secret) for secret in labelled.secrets if squeeze(secret) in block]
    lost_by_skip = [(index, ask) for index in skipped for ask in inbox[index].asks]
    naive_tokens = sum(tokens(naive_prompt(index, labelled)) for index, labelled in enumerate(inbox))
    prompt_tokens = prompt_chars / CHARS_PER_TOKEN
    return {
        "emails": len(inbox),
        "kinds": dict(Counter(labelled.kind for labelled in inbox)),
        "providers": dict(Counter(labelled.provider for labelled in inbox)),
        "languages": sorted({labelled.language for labelled in inbox}),
        "prompt_version": PROMPT_VERSION,
        "sent_to_llm": len(sent),
        "skipped_bulk": len(skipped),
        "skipped_by_reason": dict(Counter(reason for reason in reasons.values() if reason)),
        "bulk_labelled": sum(labelled.bulk for labelled in inbox),
        "bulk_sent": sum(labelled.bulk for _, labelled in sent),  # read though it asks nothing: tokens only
        "llm_calls": -(-len(sent) // MAX_EMAILS_PER_PROMPT),
        "token_estimate": f"characters / {CHARS_PER_TOKEN}, system instruction included in every call",
        "instruction_tokens": round(tokens(SYSTEM_INSTRUCTION)),
        "prompt_tokens": round(prompt_tokens),
        "prompt_tokens_per_email": round(prompt_tokens / len(inbox), 1),
        "prompt_tokens_per_email_sent": round(prompt_tokens / len(sent), 1),
        "naive_tokens": round(naive_tokens),
        "naive_tokens_per_email": round(naive_tokens / len(inbox), 1),
        "ratio": round(prompt_tokens / naive_tokens, 3),
        "asks_labelled": sum(len(labelled.asks) for labelled in inbox),
        "asks_lost_by_cleaning": len(lost_by_cleaning),
        "asks_lost_by_skip": len(lost_by_skip),
        "secrets_labelled": sum(len(labelled.secrets) for labelled in inbox),
        "secrets_in_skipped_mail": sum(len(inbox[index].secrets) for index in skipped),
        "secrets_sent": len(secrets_sent),
        "secrets_redacted": dict(redacted),
        "lost_asks": [f"email {index}: {ask}" for index, ask in [*lost_by_cleaning, *lost_by_skip]],
        "sent_secrets": [f"email {index}: {secret}" for index, secret in secrets_sent],
    }


def main() -> int:
    figures = run()
    print(f"Labelled inbox: {figures['emails']} emails {figures['kinds']} {figures['providers']}")
    print(f"  languages {figures['languages']}; prompt version {figures['prompt_version']}")
    print(f"Sent to the LLM: {figures['sent_to_llm']} in {figures['llm_calls']} calls")
    print(f"Skipped as bulk: {figures['skipped_bulk']} {figures['skipped_by_reason']}")
    print(f"  labelled bulk: {figures['bulk_labelled']}, of which read anyway: {figures['bulk_sent']}")
    print(f"Tokens ({figures['token_estimate']}; the instruction is {figures['instruction_tokens']}):")
    print(f"  the app's prompts: {figures['prompt_tokens_per_email']} per email ({figures['prompt_tokens']} in all)")
    print(f"  naive, whole email one per call: {figures['naive_tokens_per_email']} per email")
    print(f"  ratio: {figures['ratio']}")
    print(
        f"Asks: {figures['asks_labelled']} labelled, {figures['asks_lost_by_cleaning']} lost by cleaning, "
        f"{figures['asks_lost_by_skip']} by skip"
    )
    for lost in figures["lost_asks"]:  # type: ignore[attr-defined]
        print(f"  lost: {lost}")
    print(
        f"Secrets: {figures['secrets_labelled']} labelled ({figures['secrets_in_skipped_mail']} in skipped mail), "
        f"{figures['secrets_sent']} sent to the LLM; redacted {figures['secrets_redacted']}"
    )
    for secret in figures["sent_secrets"]:  # type: ignore[attr-defined]
        print(f"  sent: {secret}")
    print(json.dumps(figures, ensure_ascii=False))
    return 1 if figures["asks_lost_by_cleaning"] or figures["asks_lost_by_skip"] or figures["secrets_sent"] else 0


if __name__ == "__main__":
    sys.exit(main())
