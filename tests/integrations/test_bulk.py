"""Bulk mail is not sent to Gemini; transactional mail that asks something is.

The fixtures are the headers and provider sorting of real kinds of mail: those that must be skipped
(newsletters, social and forum mail, list notifications, out-of-office replies) and those that must be read
(a bill to pay and a form to sign, though a machine sent them). Then the same rule over mail delivered by the
sandbox Gmail and Graph, read through the providers.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from integrations.mail.bulk import bulk_headers, bulk_reason
from integrations.providers.gmail import GmailProvider, gmail_credentials
from integrations.providers.outlook import OutlookProvider
from sandbox.client import SandboxClient

MAILCHIMP = {
    "List-Unsubscribe": "<https://shop.list-manage.example/unsubscribe?u=4f2&id=9a1>, <mailto:unsub-9a1@mc.example>",
    "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
    "List-Id": "<4f2a9b1c.shop.us1.list-id.mcsv.net>",
    "Precedence": "bulk",
}
GITHUB = {
    "List-ID": "acme/app <app.acme.github.com>",
    "List-Unsubscribe": "<mailto:unsub+abc@reply.github.example>, <https://github.example/notifications/unsubscribe/1>",
    "X-GitHub-Reason": "mention",
}
JIRA = {"Auto-Submitted": "auto-generated", "Precedence": "bulk"}
SENDGRID_BILL = {"List-Unsubscribe": "<https://u123.ct.sendgrid.example/asm/unsubscribe/?user_id=123>"}

SKIPPED = {
    "newsletter_in_promotions": (MAILCHIMP, "promotions", "category_promotions"),
    "network_update_in_social": ({"List-Unsubscribe": "<https://social.example/unsub>"}, "social", "category_social"),
    "group_digest_in_forums": ({"List-Id": "<team.groups.example>"}, "forums", "category_forums"),
    "pull_request_comment_in_updates": (GITHUB, "updates", "list"),
    "issue_tracker_change_in_updates": (JIRA, "updates", "precedence"),
    "newsletter_in_focused_with_a_list_id": (MAILCHIMP | {"Precedence": ""}, "focused", "list"),
    "out_of_office_reply_in_primary": ({"Auto-Submitted": "auto-replied"}, "personal", "auto_submitted"),
    "mailing_list_post_in_primary": (
        {"Precedence": "list", "List-Id": "<dev.lists.example>"},
        "personal",
        "precedence",
    ),
    "newsletter_in_outlook_other": (SENDGRID_BILL, "other", "outlook_other"),
    "alert_in_outlook_other": ({"Auto-Submitted": "auto-notified"}, "other", "outlook_other"),
    "alert_with_no_category": ({"Auto-Submitted": "auto-generated; type=alert"}, "", "auto_submitted"),
    "newsletter_with_no_category": (SENDGRID_BILL, "", "list"),
}

KEPT = {
    # A bill whose mailing service adds List-Unsubscribe to every message, filed under Updates / Focused.
    "bill_to_pay_in_updates": (SENDGRID_BILL, "updates"),
    "bill_to_pay_in_focused": (SENDGRID_BILL, "focused"),
    # Signing and ticketing systems mark their mail auto-generated (no out-of-office replies back).
    "form_to_sign_in_primary": ({"Auto-Submitted": "auto-generated"}, "personal"),
    "approval_request_in_updates": ({"Auto-Submitted": "auto-generated"}, "updates"),
    "receipt_in_updates": (SENDGRID_BILL, "updates"),  # read; Gemini finds no task in it
    "colleague_in_primary": ({}, "personal"),
    "new_client_in_outlook_other": ({}, "other"),  # Other holds people Outlook has not seen you write to
    "reply_marked_not_automatic": ({"Auto-Submitted": "no", "Precedence": "first-class"}, ""),
}


@pytest.mark.parametrize(("headers", "category", "reason"), SKIPPED.values(), ids=SKIPPED.keys())
def test_bulk_mail_is_skipped_with_its_reason(headers: dict[str, str], category: str, reason: str) -> None:
    assert bulk_reason(headers, category) == reason


@pytest.mark.parametrize(("headers", "category"), KEPT.values(), ids=KEPT.keys())
def test_mail_that_may_ask_something_is_read(headers: dict[str, str], category: str) -> None:
    assert bulk_reason(headers, category) is None


def test_header_names_and_values_are_read_in_any_case() -> None:
    assert bulk_reason({"PRECEDENCE": " Bulk "}) == "precedence"
    assert bulk_reason({"auto-submitted": "Auto-Replied"}, "focused") == "auto_submitted"
    assert bulk_reason({}, "PROMOTIONS") == "category_promotions"


def test_only_the_bulk_headers_are_kept_bounded_and_the_first_of_each() -> None:
    headers = [
        ("Received", "from mx.example"),
        ("List-Unsubscribe", "<https://a.example/u>"),
        ("list-unsubscribe", "<https://b.example/u>"),
        ("Precedence", "bulk"),
        ("List-Id", "x" * 5_000),
        ("Subject", "Hello"),
    ]

    kept = bulk_headers(headers)

    assert set(kept) == {"list-unsubscribe", "precedence", "list-id"}
    assert kept["list-unsubscribe"] == "<https://a.example/u>"
    assert len(kept["list-id"]) == 1_000


# Through the providers ---------------------------------------------------------------------------------
ADDRESS = "linus@example.com"


def raw(subject: str, body: str, headers: dict[str, str]) -> str:
    lines = [
        "From: Sender <sender@example.org>",
        f"To: {ADDRESS}",
        f"Subject: {subject}",
        "Date: Mon, 02 Nov 2026 10:00:00 +0000",
        f"Message-ID: <{subject.replace(' ', '.')}@example.org>",
        *(f"{name}: {value}" for name, value in headers.items()),
        "Content-Type: text/plain; charset=utf-8",
    ]
    return "\r\n".join(lines) + f"\r\n\r\n{body}\r\n"


NEWSLETTER = raw("Winter sale", "Up to 40% off this week.", MAILCHIMP)
BILL = raw("Your invoice 12345", "Please pay invoice 12345 by December 5.", SENDGRID_BILL)
COLLEAGUE = raw("Budget", "Could you send me the budget by Friday?", {})


def test_gmail_mail_carries_its_bulk_headers_and_category(sandbox: SandboxClient) -> None:
    sandbox.create_mailbox(ADDRESS)
    tokens = sandbox.issue_token(ADDRESS)
    provider = GmailProvider(
        gmail_credentials(
            access_token=tokens["access_token"],
            refresh_token=tokens["refresh_token"],
            expiry=datetime.fromisoformat(tokens["expiry"]),
        ),
        address=ADDRESS,
    )
    ids = [
        sandbox.deliver(ADDRESS, NEWSLETTER, labels=["INBOX", "UNREAD", "CATEGORY_PROMOTIONS"])["id"],
        sandbox.deliver(ADDRESS, BILL, labels=["INBOX", "UNREAD", "CATEGORY_UPDATES"])["id"],
        sandbox.deliver(ADDRESS, COLLEAGUE, labels=["INBOX", "CATEGORY_PERSONAL"])["id"],
        sandbox.deliver(ADDRESS, COLLEAGUE.replace("Budget", "Budget 2"))["id"],  # no category label
    ]

    newsletter, bill, colleague, uncategorised = provider.fetch_emails(ids).emails

    assert newsletter.list_headers == {
        key.lower(): value for key, value in MAILCHIMP.items() if key != "List-Unsubscribe-Post"
    }
    assert newsletter.provider_category == "promotions"
    assert bulk_reason(newsletter.list_headers, newsletter.provider_category) == "category_promotions"
    assert bill.list_headers == {"list-unsubscribe": SENDGRID_BILL["List-Unsubscribe"]}
    assert (bill.provider_category, bulk_reason(bill.list_headers, bill.provider_category)) == ("updates", None)
    assert (colleague.list_headers, colleague.provider_category) == ({}, "personal")
    assert bulk_reason(colleague.list_headers, colleague.provider_category) is None
    assert uncategorised.provider_category == ""


def test_outlook_mail_carries_its_bulk_headers_and_inference(sandbox: SandboxClient) -> None:
    sandbox.create_outlook_mailbox(ADDRESS)
    token = sandbox.issue_microsoft_token(ADDRESS)["access_token"]
    provider = OutlookProvider(lambda force_refresh=False: token, address=ADDRESS)
    received = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
    ids = [
        sandbox.deliver_outlook(ADDRESS, NEWSLETTER, inference="other", received_at=received)["id"],
        sandbox.deliver_outlook(ADDRESS, BILL, received_at=received)["id"],
        sandbox.deliver_outlook(ADDRESS, COLLEAGUE, inference="other", received_at=received)["id"],
        sandbox.deliver_outlook(ADDRESS, subject="Lunch", body="Could you book a table?", received_at=received)["id"],
    ]

    newsletter, bill, new_contact, from_fields = provider.fetch_emails(ids).emails

    assert newsletter.provider_category == "other"
    assert newsletter.list_headers["list-id"] == MAILCHIMP["List-Id"]
    assert bulk_reason(newsletter.list_headers, newsletter.provider_category) == "precedence"
    assert (bill.provider_category, bill.list_headers) == (
        "focused",
        {"list-unsubscribe": SENDGRID_BILL["List-Unsubscribe"]},
    )
    assert bulk_reason(bill.list_headers, bill.provider_category) is None
    assert (new_contact.provider_category, new_contact.list_headers) == ("other", {})
    assert bulk_reason(new_contact.list_headers, new_contact.provider_category) is None
    assert (from_fields.provider_category, from_fields.list_headers) == ("focused", {})
    part = next(r for r in sandbox.requests("graph") if r["batch_part"])
    assert "internetMessageHeaders" in part["query"] and "inferenceClassification" in part["query"]
