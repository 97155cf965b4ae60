"""The demo mailboxes: about forty realistic raw emails received, and a few the demo person sent.

`demo_messages(now)` builds the inbox as RFC 822 bytes dated over the six days before `now`, oldest first, so a
seven-day backfill sees every one. The mix is what a real inbox holds: asks from colleagues, clients and
vendors, invoices, a contract, an urgent approval, newsletters, receipts, automated notifications, reply
threads with quoted history and signatures, HTML-only mail, multipart/alternative mail, an attachment,
quoted-printable and ISO-8859-1 bodies, French, Spanish and German mail, and one very long update.

`demo_mail(now, owner=...)` is the whole mailbox, inbox and Sent mail, oldest first. The Sent mail (Gmail's
SENT label, Outlook's sentitems, From the mailbox's owner) is what a first read of Sent mail finds: a promise
("You promised"), an ask of someone nobody has answered ("Waiting for"), and a reply in the thread of an
inbox ask that delivers it, so that ask is "Done by your reply".

`EXPECTED_ASKS` maps each inbox Subject to the number of tasks the sandbox reader (sandbox/reader.py, after the
body has been cleaned by integrations/mail/clean.py) finds in it. Each ask is written as one sentence with
one ask phrase; mail that should yield nothing avoids ask phrases, or is a newsletter, receipt or automated
notification, which the reader skips whatever it says. Asks that appear only in quoted history (">" lines)
do not count. `EXPECTED_PROMISES` and `EXPECTED_WAITING` do the same for the Sent mail (READER.md §8.1),
`CLOSED_BY_REPLY` names the inbox asks the Sent mail closes (§8.2), and `EXPECTED_TASKS` and `EXPECTED_OPEN`
are what the first run makes of it all: every item, and the Open list by Subject.

Message-IDs are stable (they do not depend on `now`), so seeding the demo twice does not duplicate mail.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email import policy
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime
from typing import Literal

DEMO_ADDRESS = "demo@tasklift.test"
DEMO_NAME = "Demo User"

_SPAN = timedelta(days=5, hours=21)  # from the oldest message to `now`, inside the six-day window
_NEWEST = timedelta(minutes=25)  # the newest message is this long before `now`


@dataclass(frozen=True)
class _Ctx:
    """What a message body may depend on: the time it was sent."""

    sent: datetime


_Fill = Callable[[EmailMessage, _Ctx], None]


@dataclass(frozen=True)
class _Demo:
    slug: str
    sender_name: str
    sender_address: str
    subject: str
    asks: int
    fill: _Fill
    in_reply_to: str | None = None  # Message-ID (without brackets) of the message this one answers


# --------------------------------------------------------------------------------------------------------
# Small helpers for dates written inside bodies


def _month_day(moment: datetime) -> str:
    return f"{moment:%B} {moment.day}"


def _gmail_wrote(moment: datetime, who: str) -> str:
    """A Gmail-style attribution line: 'On Tue, Dec 2, 2025 at 9:14 AM Jane Doe <jane@example.com> wrote:'."""
    hour = moment.hour % 12 or 12
    half = "AM" if moment.hour < 12 else "PM"
    return f"On {moment:%a}, {moment:%b} {moment.day}, {moment.year} at {hour}:{moment:%M} {half} {who} wrote:"


def _quote(text: str, depth: int = 1) -> str:
    prefix = ">" * depth
    return "\n".join(f"{prefix} {line}".rstrip() for line in text.split("\n"))


def _text(msg: EmailMessage, body: str) -> None:
    msg.set_content(body)


def _demo_who() -> str:
    return f"{DEMO_NAME} <{DEMO_ADDRESS}>"


_FAKE_PDF = (
    b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n"
    b"1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n"
    b"2 0 obj\n<< /Type /Pages /Kids [3 0 R] /Count 1 >>\nendobj\n"
    b"3 0 obj\n<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>\nendobj\n"
    b"4 0 obj\n<< /Length 58 >>\nstream\nBT /F1 12 Tf 72 720 Td (Master Services Agreement) Tj ET\n"
    b"endstream\nendobj\n"
    b"trailer\n<< /Root 1 0 R >>\n%%EOF\n"
)

_JANE_SIGNATURE = "-- \nJane Doe\nHead of Finance\nExample Corp | +1 555 0100 | example.com"


# --------------------------------------------------------------------------------------------------------
# Bodies, in the order the messages arrive


def _weekly_digest(msg: EmailMessage, ctx: _Ctx) -> None:
    msg["List-Unsubscribe"] = "<https://productwise.example.org/unsubscribe?list=digest&u=demo>"
    _text(
        msg,
        "THE WEEKLY PRODUCT DIGEST | Issue 142\n"
        "\n"
        "1. Why roadmaps fail in the second quarter\n"
        "Most roadmaps are written for the first quarter and then left to drift. We talked to twelve product "
        "leaders about how they keep theirs honest.\n"
        "\n"
        "2. Pricing pages that convert\n"
        "A teardown of six pricing pages, from the anchoring tricks that work to the comparison tables that "
        "nobody reads.\n"
        "\n"
        "3. Tool of the week: Loopboard\n"
        "A lightweight way to collect customer feedback straight from your support inbox.\n"
        "\n"
        "Don't forget to register for our live webinar on discovery interviews this Thursday.\n"
        "\n"
        "You are receiving this email because you subscribed at productwise.example.org.\n"
        "Unsubscribe: https://productwise.example.org/unsubscribe?list=digest&u=demo\n"
        "Productwise Media, 500 Market Street, San Francisco, CA 94105\n",
    )


def _budget_deck(msg: EmailMessage, ctx: _Ctx) -> None:
    _text(
        msg,
        "Hi Demo,\n"
        "\n"
        "The draft Q4 budget deck is in the Finance shared drive under Planning/2025-Q4. "
        "Could you review the Q4 budget deck by Friday?\n"
        "\n"
        "The main changes since Q3 are the marketing reallocation and the new hiring plan for the platform "
        "team. Slides 4 to 9 carry the numbers; the rest is narrative for the leadership meeting.\n"
        "\n" + _JANE_SIGNATURE + "\n",
    )


def _coffee_receipt(msg: EmailMessage, ctx: _Ctx) -> None:
    _text(
        msg,
        "Coffee Collective, 18 Harbour Street\n"
        "\n"
        "Order #C-20931\n"
        "1 x Flat white (oat)        4.20\n"
        "1 x Almond croissant        3.60\n"
        "Total                       7.80\n"
        "Paid with Visa ending 4242\n"
        "\n"
        "Please keep this email for your records. See you again soon!\n",
    )


def _invoice_4471(msg: EmailMessage, ctx: _Ctx) -> None:
    due = ctx.sent + timedelta(days=12)
    _text(
        msg,
        "Hello,\n"
        "\n"
        "Your invoice #4471 for October office supplies is below.\n"
        "\n"
        "Invoice number: 4471\n"
        "Invoice total: USD 2,340.00\n"
        "Terms: Net 30\n"
        "\n"
        f"Payment for invoice #4471 is due by {_month_day(due)}.\n"
        "\n"
        "Bank transfer details are on the invoice portal at https://billing.northwind.example.com/invoices/4471.\n"
        "\n"
        "Kind regards,\n"
        "Accounts Receivable\n"
        "Northwind Supplies\n",
    )


def _sprint_planning(msg: EmailMessage, ctx: _Ctx) -> None:
    _text(
        msg,
        "Hi Demo,\n"
        "\n"
        "Because of the release freeze, sprint planning moves from Wednesday to Thursday at 10:00 in the Orion "
        "room. Can you confirm you can attend the sprint planning on Thursday?\n"
        "\n"
        "We will go through the carry-over tickets first, then the new platform epics.\n"
        "\n"
        "Thanks,\n"
        "Priya\n",
    )


def _ci_build(msg: EmailMessage, ctx: _Ctx) -> None:
    _text(
        msg,
        "Build #1842 passed on main.\n"
        "\n"
        "Commit: 9f3c2ab  Merge pull request #611 from feature/retry-backoff\n"
        "Duration: 6m 41s\n"
        "Tests: 1,204 passed, 0 failed, 12 skipped\n"
        "\n"
        "View the build: https://builds.example.com/tasklift/api/builds/1842\n"
        "\n"
        "This is an automated message from the build server.\n",
    )


def _interview_notes(msg: EmailMessage, ctx: _Ctx) -> None:
    _text(
        msg,
        "Hi Demo,\n"
        "\n"
        "I'm pulling together the research synthesis for the Acme account. "
        "Would you share your notes from Tuesday's Acme interview by the end of the week?\n"
        "\n"
        "Even rough bullet points are fine; I'll clean them up before the readout.\n"
        "\n"
        "Sofia\n",
    )


def _thanks_only(msg: EmailMessage, ctx: _Ctx) -> None:
    _text(
        msg,
        "Hi Demo,\n"
        "\n"
        "Thanks for turning the contract redlines around so quickly yesterday. "
        "Thank you for jumping on the call with Acme at such short notice, too.\n"
        "\n"
        "Laura\n",
    )


def _contract(msg: EmailMessage, ctx: _Ctx) -> None:
    _text(
        msg,
        "Hi Demo,\n"
        "\n"
        "Attached is the final master services agreement with Brightline Media, including the redlines we "
        "agreed on Monday's call. Please sign the agreement through the e-signature link by Wednesday.\n"
        "\n"
        "Legal has already approved the liability and termination clauses, so this is the last step before the "
        "campaign starts on the 1st.\n"
        "\n"
        "Regards,\n"
        "Nadia Okafor\n"
        "Legal Counsel, Example Corp\n",
    )
    msg.add_attachment(_FAKE_PDF, maintype="application", subtype="pdf", filename="Brightline_MSA_final.pdf")


def _password_changed(msg: EmailMessage, ctx: _Ctx) -> None:
    _text(
        msg,
        "Hi Demo,\n"
        "\n"
        f"The password for your Example Corp account was changed on {_month_day(ctx.sent)} at "
        f"{ctx.sent:%H:%M} UTC from a Chrome browser on macOS.\n"
        "\n"
        "If you made this change, no action is required. If you did not, please contact the IT service desk "
        "immediately.\n"
        "\n"
        "Example Corp Accounts\n",
    )


def _audit_documents(msg: EmailMessage, ctx: _Ctx) -> None:
    body = (
        "Guten Tag,\n"
        "\n"
        "für die Jahresabschlussprüfung fehlen uns noch einige Unterlagen aus Ihrer Abteilung. "
        "Bitte senden Sie uns die unterschriebene Vollständigkeitserklärung bis Freitag zurück.\n"
        "\n"
        "Die übrigen Nachweise (Kontoauszüge, Inventurlisten und Verträge) liegen uns bereits vollständig vor. "
        "Für Rückfragen stehe ich Ihnen gerne zur Verfügung.\n"
        "\n"
        "Mit freundlichen Grüßen\n"
        "Jürgen Köhler\n"
        "Prüfungsleiter, Schäfer & Groß Wirtschaftsprüfung\n"
    )
    # Raw ISO-8859-1 bytes on the wire, as many older German mail servers still send them.
    msg.set_content(body, charset="iso-8859-1", cte="8bit")


def _crm_shortlist(msg: EmailMessage, ctx: _Ctx) -> None:
    earlier = ctx.sent - timedelta(hours=20)
    earliest = ctx.sent - timedelta(days=2, hours=3)
    history = (
        "Hi Marcus,\n"
        "\n"
        "Here is the shortlist: Relay CRM (Option A), Northstar (Option B) and Pipewell (Option C). "
        "I lean towards Option B because of the migration tooling.\n"
        "\n"
        + _gmail_wrote(earliest, "Marcus Webb <marcus.webb@example.com>")
        + "\n"
        + _quote("Hi Demo,\n\nWould you send me the vendor shortlist by Monday?\n\nMarcus")
    )
    _text(
        msg,
        "Option B looks strongest to me as well. "
        "Can you set up a call with their solutions engineer early next week?\n"
        "\n"
        "Marcus\n"
        "\n" + _gmail_wrote(earlier, _demo_who()) + "\n" + _quote(history) + "\n",
    )


def _design_review(msg: EmailMessage, ctx: _Ctx) -> None:
    _text(
        msg,
        "Hi Demo,\n"
        "\n"
        "The onboarding flow mockups are ready in Figma: https://figma.example.com/file/onboarding-v3\n"
        "\n"
        "Could you leave comments on the onboarding mockups before Tuesday's review?\n"
        "\n"
        "Make sure to check the mobile breakpoints as well, since that is where most of the drop-off happens.\n"
        "\n"
        "Best,\n"
        "Tom\n",
    )
    msg.add_alternative(
        "<html><body>\n"
        "<p>Hi Demo,</p>\n"
        '<p>The onboarding flow mockups are ready in <a href="https://figma.example.com/file/onboarding-v3">'
        "Figma</a>.</p>\n"
        "<p>Could you leave comments on the onboarding mockups before Tuesday's review?</p>\n"
        "<p>Make sure to check the mobile breakpoints as well, since that is where most of the drop-off "
        "happens.</p>\n"
        "<p>Best,<br>Tom</p>\n"
        "</body></html>\n",
        subtype="html",
    )


def _calendar_accepted(msg: EmailMessage, ctx: _Ctx) -> None:
    _text(
        msg,
        "Tom Becker has accepted this invitation.\n"
        "\n"
        "Onboarding flow design review\n"
        "Tuesday, 14:00 to 15:00 (UTC), Orion room\n"
        "\n"
        "This is an automated message from Example Calendar.\n",
    )


_ATLAS_STREAMS = (
    (
        "Data platform",
        "Ana Costa",
        "the event ingestion pipeline",
        "ingestion throughput",
        "events per second",
        (1800, 2350, 2900, 3400),
        "the schema registry rollout",
    ),
    (
        "Billing",
        "Kwame Mensah",
        "the usage-based billing engine",
        "invoice accuracy in the shadow run",
        "percent",
        (97, 98, 99, 99),
        "the proration rules for mid-cycle upgrades",
    ),
    (
        "Mobile",
        "Leah Goldberg",
        "the offline mode for the field app",
        "crash-free sessions",
        "percent",
        (96, 97, 98, 99),
        "background sync on older Android devices",
    ),
    (
        "Identity",
        "Omar Haddad",
        "single sign-on for enterprise tenants",
        "tenants migrated to the new login service",
        "tenants",
        (14, 31, 52, 77),
        "SCIM provisioning for the two largest customers",
    ),
    (
        "Search",
        "Mei Lin",
        "the relevance overhaul",
        "median query latency",
        "milliseconds",
        (420, 310, 260, 190),
        "the synonym dictionary for the retail vertical",
    ),
    (
        "Infrastructure",
        "Erik Johansson",
        "the move to the new Kubernetes clusters",
        "services running on the new clusters",
        "services",
        (22, 41, 63, 88),
        "the network policy audit",
    ),
)

_ATLAS_WEEK_NOTES = (
    "The first week was mostly about settling the plan and removing the blockers left over from the pilot.",
    "In the second week the teams moved from planning into steady delivery, with fewer surprises than expected.",
    "The third week brought the first real load from customers, which told us more than any rehearsal had.",
    "The fourth week closed the month with a round of hardening, documentation and handover to support.",
)

_ATLAS_STATUS = ("on track", "on track with minor risk", "slightly behind plan", "on track")


def _atlas_stream_paragraph(week: int, stream: tuple[str, str, str, str, str, tuple[int, ...], str]) -> str:
    name, lead, focus, metric, unit, values, open_item = stream
    value = values[week]
    previous = values[week - 1] if week else None
    trend = (
        f"up from {previous} {unit} the week before"
        if previous is not None and value > previous
        else (f"down from {previous} {unit} the week before" if previous is not None else "our starting baseline")
    )
    status = _ATLAS_STATUS[(week + len(name)) % len(_ATLAS_STATUS)]
    return (
        f"{name} (lead: {lead}). Work this week centred on {focus}. The headline number is {metric}, which "
        f"stood at {value} {unit}, {trend}. The team closed {8 + 3 * week + len(lead) % 5} tickets and opened "
        f"{4 + week + len(name) % 3} new ones, most of them follow-ups found during testing rather than new "
        f"scope. Code review turnaround averaged {11 - week} hours, and the on-call rotation reported "
        f"{(len(focus) + week) % 4} incidents, none of them customer-facing for more than a few minutes. "
        f"The main open item is {open_item}; {lead.split()[0]} expects to have a recommendation ready for the "
        f"steering group within two weeks. Overall the workstream is {status}, and the forecast for the "
        f"quarter has not changed."
    )


def _atlas_body(ctx: _Ctx) -> str:
    month_start = ctx.sent - timedelta(days=30)
    parts = [
        "Hi Demo,",
        "",
        "Could you approve the revised Atlas timeline in the planning tool by Thursday? The details follow.",
        "",
        "What follows is the full monthly status report for Project Atlas, covering the four weeks since "
        f"{_month_day(month_start)}. It is long on purpose: the steering group asked for one document that "
        "holds every workstream's numbers, risks and decisions, so that nobody has to chase six separate "
        "updates. The summary comes first, then a week-by-week account per workstream, then risks, budget, "
        "hiring and the decisions log.",
        "",
        "SUMMARY",
        "",
        "Atlas remains on course for the general availability launch at the end of the quarter. Four of the six "
        "workstreams are on track, one carries a minor risk and one is slightly behind plan but has a credible "
        "recovery path. Spend is at 47 percent of the annual budget, in line with the phasing agreed in the "
        "spring. The revised timeline moves the billing cut-over by two weeks to give the shadow run more "
        "time, and pulls the search relevance launch forward by one week because the latency work finished "
        "early. No other milestone moves.",
        "",
    ]
    for week, note in enumerate(_ATLAS_WEEK_NOTES):
        parts += [f"WEEK {week + 1}", "", note, ""]
        for stream in _ATLAS_STREAMS:
            parts += [_atlas_stream_paragraph(week, stream), ""]
        parts += [
            f"Across the programme, week {week + 1} ended with {61 + 7 * week} percent of the planned scope "
            f"delivered and {3 + week % 2} open cross-team dependencies. The weekly demo drew "
            f"{40 + 6 * week} attendees from sales, support and customer success, and the recording is in the "
            "Atlas folder on the shared drive.",
            "",
        ]
    parts += [
        "RISKS",
        "",
        "The largest risk is still the billing shadow run. Invoice accuracy has climbed steadily, yet the last "
        "percent is made of edge cases that each take real effort: credits applied across billing periods, "
        "currency rounding for the three markets that invoice in whole units, and accounts that changed plans "
        "twice in one month. The revised timeline gives the team two more weeks for exactly these cases.",
        "",
        "The second risk is hiring. Two of the five open roles have accepted offers, and the remaining three "
        "are in final rounds. If the senior mobile engineer role stays open past next month, the offline mode "
        "will ship with background sync limited to newer devices, which product has agreed is acceptable for "
        "the launch.",
        "",
        "The third risk is vendor capacity on the infrastructure side. Our cloud provider has confirmed the "
        "reserved capacity for the new clusters, and the contract amendment is with procurement.",
        "",
        "BUDGET",
        "",
        "Spend to date is 1.41 million against a plan of 1.46 million. The underspend comes from the delayed "
        "hires and from lower than forecast compute costs during the cluster migration. We expect the gap to "
        "close by the end of the quarter as the new hires start and the old clusters are switched off.",
        "",
        "HIRING",
        "",
        "Two engineers joined this month: one on the data platform team and one on identity. Both finished "
        "onboarding in their first week and shipped code in their second. Interviews continue for a senior "
        "mobile engineer, a search relevance engineer and an engineering manager for infrastructure.",
        "",
        "DECISIONS LOG",
        "",
        "1. The steering group approved the split of the billing cut-over into two waves, small accounts first.",
        "2. Search relevance launches to all tenants at once rather than in waves, given the latency results.",
        "3. The old login service stays available in read-only mode for thirty days after the last tenant moves.",
        "4. The offline mode launches behind a setting that each customer administrator controls.",
        "",
        "The next monthly report goes out four weeks from now. The weekly demos continue every Wednesday.",
        "",
        "Hiroshi Tanaka",
        "Programme Lead, Project Atlas",
    ]
    return "\n".join(parts) + "\n"


def _atlas_update(msg: EmailMessage, ctx: _Ctx) -> None:
    _text(msg, _atlas_body(ctx))


def _cloudway_invoice(msg: EmailMessage, ctx: _Ctx) -> None:
    due = ctx.sent + timedelta(days=14)
    _text(
        msg,
        "Hello,\n"
        "\n"
        "Your Cloudway Hosting invoice for last month is ready.\n"
        "\n"
        "Plan: Business VPS x3\n"
        "Amount: EUR 480.00\n"
        "Invoice number: INV-2025-0932\n"
        "\n"
        f"The amount of EUR 480.00 is due by {_month_day(due)}.\n"
        "\n"
        "A PDF copy of the invoice is in your Cloudway dashboard under Billing.\n"
        "\n"
        "The Cloudway Billing Team\n",
    )


def _board_minutes(msg: EmailMessage, ctx: _Ctx) -> None:
    _text(
        msg,
        "Hi all,\n"
        "\n"
        "The approved minutes from the Q3 board meeting are now in the Board folder of the shared drive. "
        "The next board meeting is scheduled for late January, and the agenda will follow in the usual way.\n"
        "\n"
        "Amelia\n"
        "Executive Office\n",
    )


def _offsite_venues(msg: EmailMessage, ctx: _Ctx) -> None:
    msg.set_content(
        "Hi team,\n"
        "\n"
        "I have narrowed the offsite venues down to three options. "
        "Could you pick your top two venues by Monday?\n"
        "\n"
        "1. Château Lavande: a converted farmhouse near Lyon that sleeps 24, with a café on site.\n"
        "2. Seeblick Lodge: lakeside near Zürich, with two meeting rooms and a sauna.\n"
        "3. Casa Albero: a restored villa outside Málaga, the cheapest of the three.\n"
        "\n"
        "All three fit the budget we agreed in October and are free on our dates.\n"
        "\n"
        "Cheers,\n"
        "Elena\n",
        cte="quoted-printable",
    )


def _cloud_native_monthly(msg: EmailMessage, ctx: _Ctx) -> None:
    msg["List-Unsubscribe"] = "<https://cloudnative.example.org/u/demo>"
    _text(
        msg,
        "CLOUD NATIVE MONTHLY\n"
        "\n"
        "This month: autoscaling without tears, a look at the new gateway API, and five talks worth watching.\n"
        "\n"
        "Read online: https://cloudnative.example.org/issues/latest\n"
        "\n"
        "Unsubscribe: https://cloudnative.example.org/u/demo\n",
    )
    msg.add_alternative(
        "<html><body>\n"
        "<h1>Cloud Native Monthly</h1>\n"
        "<p>This month: autoscaling without tears, a look at the new gateway API, and five talks worth "
        "watching.</p>\n"
        "<p>Make sure you catch the talk on cost-aware scheduling.</p>\n"
        '<p><a href="https://cloudnative.example.org/issues/latest">Read online</a></p>\n'
        '<p style="font-size:11px"><a href="https://cloudnative.example.org/u/demo">Unsubscribe</a></p>\n'
        "</body></html>\n",
        subtype="html",
    )


def _french_minutes(msg: EmailMessage, ctx: _Ctx) -> None:
    _text(
        msg,
        "Bonjour,\n"
        "\n"
        "Vous trouverez ci-dessous le compte rendu de notre réunion de mardi avec l'équipe de Lumière Conseil. "
        "Pourriez-vous valider le compte rendu avant jeudi midi ?\n"
        "\n"
        "Points principaux :\n"
        "1. Le calendrier du déploiement est confirmé pour le premier trimestre.\n"
        "2. Le client souhaite une formation sur site pour ses équipes régionales.\n"
        "3. Le budget reste inchangé.\n"
        "\n"
        "Bonne journée,\n"
        "Claire Martin\n"
        "Cheffe de projet, Lumière Conseil\n",
    )


_BUDGET_COMMENTS_BEFORE_REPLY = timedelta(hours=18)  # the person's comments, this long before Jane's answer


def _budget_comments_body(mine: datetime) -> str:
    """The person's reply to Jane's ask (Sent mail, sent at `mine`), which Jane's answer quotes: its "Here are"
    delivers the review she asked for, so the reader closes that task (READER.md §8.2)."""
    original = mine - timedelta(days=1, hours=11)
    return (
        "Hi Jane,\n"
        "\n"
        "Here are my comments on the Q4 budget deck: slides 4 and 9 need updated numbers; "
        "everything else looks good to me.\n"
        "\n"
        "Demo\n"
        "\n"
        + _gmail_wrote(original, "Jane Doe <jane.doe@example.com>")
        + "\n"
        + _quote(
            "Hi Demo,\n\nThe draft Q4 budget deck is in the Finance shared drive. "
            "Could you review the Q4 budget deck by Friday?\n\n" + _JANE_SIGNATURE
        )
    )


def _budget_reply(msg: EmailMessage, ctx: _Ctx) -> None:
    mine = ctx.sent - _BUDGET_COMMENTS_BEFORE_REPLY
    _text(
        msg,
        "Hi Demo,\n"
        "\n"
        "I have folded your comments into version 3 of the deck. "
        "Could you also sign off on the headcount slide before Thursday's leadership meeting?\n"
        "\n" + _JANE_SIGNATURE + "\n"
        "\n" + _gmail_wrote(mine, _demo_who()) + "\n" + _quote(_budget_comments_body(mine)) + "\n",
    )


def _analytics_access(msg: EmailMessage, ctx: _Ctx) -> None:
    _text(
        msg,
        "Hi Demo,\n"
        "\n"
        "Priya starts on the churn model next week and the dashboard is her main source. "
        "Can you grant Priya read access to the analytics workspace?\n"
        "\n"
        "Daniel\n",
    )


def _lunch_reply(msg: EmailMessage, ctx: _Ctx) -> None:
    mine = ctx.sent - timedelta(hours=2)
    original = ctx.sent - timedelta(days=1, hours=1)
    history = (
        "Done: I booked a table for four at Bistro Verde at noon.\n"
        "\n"
        + _gmail_wrote(original, "Ben Carter <ben.carter@example.com>")
        + "\n"
        + _quote("Could you book a table for four at Bistro Verde on Friday?\n\nBen")
    )
    _text(
        msg,
        "Sounds great, see you there at noon.\n"
        "\n"
        "Ben\n"
        "\n" + _gmail_wrote(mine, _demo_who()) + "\n" + _quote(history) + "\n",
    )


def _overdue_invoice(msg: EmailMessage, ctx: _Ctx) -> None:
    issued = ctx.sent - timedelta(days=40)
    _text(
        msg,
        "Hello,\n"
        "\n"
        f"Invoice 88213 for USD 312.50 was issued on {_month_day(issued)} and is now overdue. "
        "We need you to settle the balance as soon as possible.\n"
        "\n"
        "If the payment crossed with this email, our team will match it to your account within two working days.\n"
        "\n"
        "Regards,\n"
        "Collections Team\n"
        "Lumen Office Supplies\n",
    )


def _design_systems_weekly(msg: EmailMessage, ctx: _Ctx) -> None:
    msg["List-Unsubscribe"] = "<https://designsystems.example.org/unsubscribe>"
    _text(
        msg,
        "DESIGN SYSTEMS WEEKLY #87\n"
        "\n"
        "Tokens at scale: how a bank with forty products keeps one colour palette.\n"
        "Accessible focus states that designers actually like.\n"
        "Remember to vote in our annual tooling survey before it closes.\n"
        "\n"
        "Sent to demo@tasklift.test. Unsubscribe at https://designsystems.example.org/unsubscribe\n",
    )


def _onboarding_buddy(msg: EmailMessage, ctx: _Ctx) -> None:
    _text(
        msg,
        "Hi Demo,\n"
        "\n"
        "Sam Rivera joins the platform team on Monday as a backend engineer. "
        "Could you be Sam's onboarding buddy for the first two weeks?\n"
        "\n"
        "Make sure Sam is added to the platform team channel and the on-call calendar before Monday.\n"
        "\n"
        "The full onboarding checklist is in the team wiki.\n"
        "\n"
        "Grace\n",
    )


def _parcel_shipped(msg: EmailMessage, ctx: _Ctx) -> None:
    arrival = ctx.sent + timedelta(days=3)
    _text(
        msg,
        "Good news: your order #PX-55102 has shipped.\n"
        "\n"
        "Items: USB-C docking station, 2 x 27-inch monitor arm\n"
        f"Estimated delivery: {arrival:%A}, {_month_day(arrival)}\n"
        "Track your parcel: https://parcelio.example.com/track/PX-55102\n"
        "\n"
        "Do not reply to this email; this mailbox is not monitored.\n",
    )


def _spanish_budget(msg: EmailMessage, ctx: _Ctx) -> None:
    _text(
        msg,
        "Hola,\n"
        "\n"
        "Ya tenemos la versión final del presupuesto para el evento de lanzamiento en Madrid. "
        "Por favor, revisa las partidas de catering y audiovisuales antes del viernes.\n"
        "\n"
        "El total asciende a 18.400 euros, un 6 % menos que la estimación inicial.\n"
        "\n"
        "Un saludo,\n"
        "Lucía Fernández\n"
        "Marketing de eventos\n",
    )


def _renewal_quote(msg: EmailMessage, ctx: _Ctx) -> None:
    renews = ctx.sent + timedelta(days=30)
    _text(
        msg,
        "Hello Demo,\n"
        "\n"
        f"Your Pixelforge Team plan (25 seats) renews on {_month_day(renews)}. We have prepared a renewal "
        "quote with a 10% discount for a two-year term.\n"
        "\n"
        "Would you confirm the seat count for the renewal by the end of the week?\n"
        "\n"
        "Best regards,\n"
        "Mia Thompson\n"
        "Account Manager, Pixelforge\n",
    )


def _out_of_office(msg: EmailMessage, ctx: _Ctx) -> None:
    _text(
        msg,
        "Hello,\n"
        "\n"
        "I am out of the office until Monday with limited access to email. For anything time-sensitive, "
        "contact my colleague Aiko Sato at aiko.sato@partner.example.org.\n"
        "\n"
        "Kenji Watanabe\n",
    )


def _office_move_reply(msg: EmailMessage, ctx: _Ctx) -> None:
    original = ctx.sent - timedelta(days=3, hours=2)
    _text(
        msg,
        "Hi all,\n"
        "\n"
        "Quick update now that the movers are confirmed for Saturday. "
        "Please label each of your boxes with your new desk number.\n"
        "\n"
        "Remember to return your old locker key to the front desk by Friday.\n"
        "\n"
        "Hannah\n"
        "Facilities\n"
        "\n"
        + _gmail_wrote(original, "Hannah Lee <hannah.lee@example.com>")
        + "\n"
        + _quote(
            "Hi all,\n\nThe move to the fourth floor happens next weekend. "
            "Could you pack your personal items by Thursday?\n\nHannah\nFacilities"
        )
        + "\n",
    )


def _cloudway_receipt(msg: EmailMessage, ctx: _Ctx) -> None:
    _text(
        msg,
        "Thank you for your payment.\n"
        "\n"
        "Invoice: INV-2025-0932\n"
        "Amount paid: EUR 480.00\n"
        "Payment method: SEPA transfer\n"
        "\n"
        "Please keep this receipt for your records.\n"
        "\n"
        "The Cloudway Billing Team\n",
    )


def _benefits_enrollment(msg: EmailMessage, ctx: _Ctx) -> None:
    closes = ctx.sent + timedelta(days=9)
    _text(
        msg,
        "Hi Demo,\n"
        "\n"
        "Open enrollment for next year's benefits is now live in the HR portal. "
        f"Don't forget to choose your health plan in the HR portal by {_month_day(closes)}.\n"
        "\n"
        "New this year: a higher dental allowance and an extra wellness day.\n"
        "\n"
        "People Team\n",
    )


def _holiday_schedule(msg: EmailMessage, ctx: _Ctx) -> None:
    _text(
        msg,
        "Hi everyone,\n"
        "\n"
        "The office will be closed from December 24 to December 26 and on January 1. "
        "These are company holidays, so you don't need to submit a leave request, please just block the days "
        "in your calendar.\n"
        "\n"
        "Support rotations for the closure are in the on-call calendar.\n"
        "\n"
        "People Team\n",
    )


def _one_on_one(msg: EmailMessage, ctx: _Ctx) -> None:
    _text(
        msg,
        "Hi Demo,\n"
        "\n"
        "For Thursday's 1:1, I would like to spend most of the time on Q1 planning. "
        "Can you add your Q1 goals to our shared 1:1 doc before we meet?\n"
        "\n"
        "See you then,\n"
        "Michael\n",
    )


def _expense_report(msg: EmailMessage, ctx: _Ctx) -> None:
    msg.set_content(
        "<!DOCTYPE html>\n"
        '<html><head><meta charset="utf-8"><title>Expense report EXP-2025-0412</title></head>\n'
        '<body style="font-family:Arial,sans-serif">\n'
        "<p>Hi Demo,</p>\n"
        "<p>Your expense report <strong>EXP-2025-0412</strong> (Berlin customer visit) is on hold.</p>\n"
        '<table border="1" cellpadding="4" cellspacing="0">\n'
        "<tr><th>Item</th><th>Amount</th><th>Status</th></tr>\n"
        "<tr><td>Flight</td><td>EUR 412.80</td><td>Approved</td></tr>\n"
        "<tr><td>Hotel (3 nights)</td><td>EUR 587.00</td><td>Missing invoice</td></tr>\n"
        "<tr><td>Meals</td><td>EUR 96.40</td><td>Approved</td></tr>\n"
        "</table>\n"
        "<p>Please upload the hotel invoice by Friday.</p>\n"
        '<p><a href="https://expenses.example.com/reports/EXP-2025-0412">Open the report</a></p>\n'
        "<p>Finance Operations<br>Example Corp</p>\n"
        "</body></html>\n",
        subtype="html",
    )


def _trip_receipt(msg: EmailMessage, ctx: _Ctx) -> None:
    _text(
        msg,
        "Thanks for riding with Metro Rides.\n"
        "\n"
        "Trip: Central Station to Example Corp HQ\n"
        "Distance: 6.4 km\n"
        "Fare: EUR 14.90 (incl. VAT)\n"
        "\n"
        "Could you rate your driver? Tap the stars in the app.\n",
    )


def _talk_reply(msg: EmailMessage, ctx: _Ctx) -> None:
    mine = ctx.sent - timedelta(days=1, hours=4)
    original = ctx.sent - timedelta(days=2, hours=6)
    history = (
        "Here is the updated proposal with the new title and a shorter abstract.\n"
        "\n"
        + _gmail_wrote(original, "Olivia Chen <olivia.chen@devdays.example.org>")
        + "\n"
        + _quote("Hi Demo,\n\nWould you shorten the abstract to under 200 words?\n\nOlivia")
    )
    _text(
        msg,
        "Hi Demo,\n"
        "\n"
        "Great news: the committee accepted your talk for the main track. "
        "Kindly send the final abstract and a short speaker bio by tomorrow.\n"
        "\n"
        "Olivia Chen\n"
        "DevDays Programme Committee\n"
        "\n" + _gmail_wrote(mine, _demo_who()) + "\n" + _quote(history) + "\n",
    )


def _all_hands_slides(msg: EmailMessage, ctx: _Ctx) -> None:
    _text(
        msg,
        "Hi everyone,\n"
        "\n"
        "The slides and the recording from today's all-hands are in the Company folder. "
        "Thank you for all the great questions during the Q&A; we will publish written answers for the ones we "
        "did not get to.\n"
        "\n"
        "Amelia\n",
    )


def _laptop_refresh(msg: EmailMessage, ctx: _Ctx) -> None:
    _text(
        msg,
        "Hi Demo,\n"
        "\n"
        "Your laptop is part of this quarter's hardware refresh, and your new MacBook Pro is ready. "
        "Please choose a delivery slot in the IT portal by Wednesday.\n"
        "\n"
        "On delivery day the technician moves your files across in about an hour.\n"
        "\n"
        "IT Service Desk\n"
        "Example Corp\n",
    )


def _acme_feedback(msg: EmailMessage, ctx: _Ctx) -> None:
    _text(
        msg,
        "Hi Demo,\n"
        "\n"
        "Our leadership team reviewed your proposal on Monday and we are keen to move forward. "
        "Could you send us a revised quote that includes the premium support tier?\n"
        "\n"
        "We would also like to start the pilot in January rather than February if your team has capacity.\n"
        "\n"
        "Kind regards,\n"
        "Robert Hughes\n"
        "Director of Operations, Acme Corp\n",
    )


def _security_training(msg: EmailMessage, ctx: _Ctx) -> None:
    _text(
        msg,
        "Hi Demo,\n"
        "\n"
        "Our records show you have not yet completed this year's security awareness training. "
        "Make sure you complete the training in the learning portal before Friday.\n"
        "\n"
        "The course takes about 25 minutes and covers phishing, password hygiene and data handling.\n"
        "\n"
        "Security Team\n",
    )


def _urgent_po(msg: EmailMessage, ctx: _Ctx) -> None:
    _text(
        msg,
        "Hi Demo,\n"
        "\n"
        "Please approve purchase order PO-7781 in the procurement system today. "
        "The order covers 24 standing desks (USD 11,880.00), and the supplier's discount expires tonight.\n"
        "\n"
        "The quote and the delivery schedule are attached to the PO.\n"
        "\n"
        "Thanks,\n"
        "Raj Patel\n"
        "Procurement\n",
    )


# --------------------------------------------------------------------------------------------------------
# Bodies of the person's own Sent mail


def _fit_out_quote(msg: EmailMessage, ctx: _Ctx) -> None:
    _text(
        msg,
        "Hi Ingrid,\n"
        "\n"
        "Thank you for walking me through the studio this morning; the extra meeting room changes the numbers.\n"
        "I'll send you the revised quote by Friday.\n"
        "\n"
        "Best regards,\n"
        "Demo\n",
    )


def _customer_day_venue(msg: EmailMessage, ctx: _Ctx) -> None:
    _text(
        msg,
        "Hi Tiago,\n"
        "\n"
        "The customer day in Lisbon is set for the second week of next month, with about sixty guests.\n"
        "Could you confirm the venue by Tuesday?\n"
        "\n"
        "Thanks,\n"
        "Demo\n",
    )


def _budget_comments(msg: EmailMessage, ctx: _Ctx) -> None:
    _text(msg, _budget_comments_body(ctx.sent))


# --------------------------------------------------------------------------------------------------------
# The inbox, oldest first

_DEMOS: tuple[_Demo, ...] = (
    _Demo(
        "weekly-digest-142",
        "Productwise",
        "digest@productwise.example.org",
        "The Weekly Product Digest: Issue 142",
        0,
        _weekly_digest,
    ),
    _Demo("q4-budget-deck", "Jane Doe", "jane.doe@example.com", "Q4 budget deck review", 1, _budget_deck),
    _Demo(
        "coffee-receipt-c20931",
        "Coffee Collective",
        "hello@coffeecollective.example.com",
        "Your receipt from Coffee Collective",
        0,
        _coffee_receipt,
    ),
    _Demo(
        "invoice-4471",
        "Northwind Supplies",
        "billing@northwind.example.com",
        "Invoice #4471 from Northwind Supplies",
        1,
        _invoice_4471,
    ),
    _Demo(
        "sprint-planning-moved",
        "Priya Raman",
        "priya.raman@example.com",
        "Sprint planning moved to Thursday",
        1,
        _sprint_planning,
    ),
    _Demo("ci-build-1842", "CI", "ci@builds.example.com", "[tasklift/api] Build #1842 passed on main", 0, _ci_build),
    _Demo(
        "acme-interview-notes",
        "Sofia Alvarez",
        "sofia.alvarez@example.com",
        "Notes from the Acme customer interview",
        1,
        _interview_notes,
    ),
    _Demo(
        "thanks-quick-turnaround",
        "Laura Schmidt",
        "laura.schmidt@example.com",
        "Thanks for the quick turnaround",
        0,
        _thanks_only,
    ),
    _Demo(
        "brightline-msa",
        "Nadia Okafor",
        "nadia.okafor@example.com",
        "Contract for signature: Brightline Media MSA",
        1,
        _contract,
    ),
    _Demo(
        "password-changed",
        "Example Corp Accounts",
        "accounts@example.com",
        "Your password was changed",
        0,
        _password_changed,
    ),
    _Demo(
        "audit-unterlagen",
        "Jürgen Köhler",
        "j.koehler@schaefer-gross.example.de",
        "Unterlagen für die Jahresabschlussprüfung",
        1,
        _audit_documents,
    ),
    _Demo(
        "crm-shortlist-reply",
        "Marcus Webb",
        "marcus.webb@example.com",
        "Re: Vendor shortlist for the CRM migration",
        1,
        _crm_shortlist,
        in_reply_to="demo.crm-shortlist@tasklift.test",
    ),
    _Demo(
        "onboarding-design-review",
        "Tom Becker",
        "tom.becker@example.com",
        "Design review for the onboarding flow",
        2,
        _design_review,
    ),
    _Demo(
        "calendar-accepted",
        "Example Calendar",
        "calendar@example.com",
        "Accepted: Onboarding flow design review",
        0,
        _calendar_accepted,
    ),
    _Demo(
        "atlas-monthly-status",
        "Hiroshi Tanaka",
        "hiroshi.tanaka@example.com",
        "Project Atlas: monthly status update",
        1,
        _atlas_update,
    ),
    _Demo(
        "cloudway-inv-2025-0932",
        "Cloudway Hosting",
        "billing@cloudway.example.net",
        "Invoice INV-2025-0932 from Cloudway Hosting",
        1,
        _cloudway_invoice,
    ),
    _Demo(
        "q3-board-minutes",
        "Amelia Brooks",
        "amelia.brooks@example.com",
        "FYI: Q3 board minutes are in the shared drive",
        0,
        _board_minutes,
    ),
    _Demo(
        "offsite-venues",
        "Elena Rossi",
        "elena.rossi@example.com",
        "Venue options for the team offsite",
        1,
        _offsite_venues,
    ),
    _Demo(
        "cloud-native-monthly",
        "Cloud Native Monthly",
        "newsletter@cloudnative.example.org",
        "Cloud Native Monthly: autoscaling, gateways and five talks",
        0,
        _cloud_native_monthly,
    ),
    _Demo(
        "lumiere-compte-rendu",
        "Claire Martin",
        "claire.martin@lumiere-conseil.example.fr",
        "Compte rendu de la réunion avec Lumière Conseil",
        1,
        _french_minutes,
    ),
    _Demo(
        "q4-budget-deck-reply",
        "Jane Doe",
        "jane.doe@example.com",
        "Re: Re: Q4 budget deck review",  # Jane answers the person's "Re:" (Sent mail below), as mail clients write it
        1,
        _budget_reply,
        in_reply_to="demo.q4-budget-deck-mine@tasklift.test",
    ),
    _Demo(
        "analytics-access",
        "Daniel Kim",
        "daniel.kim@example.com",
        "Access to the analytics workspace",
        1,
        _analytics_access,
    ),
    _Demo(
        "lunch-friday-reply",
        "Ben Carter",
        "ben.carter@example.com",
        "Re: Lunch on Friday",
        0,
        _lunch_reply,
        in_reply_to="demo.lunch-friday-mine@tasklift.test",
    ),
    _Demo(
        "lumen-overdue-88213",
        "Lumen Office Supplies",
        "collections@lumen.example.com",
        "Overdue: invoice 88213 from Lumen Office Supplies",
        1,
        _overdue_invoice,
    ),
    _Demo(
        "design-systems-weekly-87",
        "Design Systems Weekly",
        "hello@designsystems.example.org",
        "Design Systems Weekly #87",
        0,
        _design_systems_weekly,
    ),
    _Demo(
        "onboarding-sam-rivera",
        "Grace Liu",
        "grace.liu@example.com",
        "Onboarding plan for Sam Rivera",
        2,
        _onboarding_buddy,
    ),
    _Demo(
        "parcel-px-55102",
        "Parcelio",
        "updates@parcelio.example.com",
        "Your order #PX-55102 has shipped",
        0,
        _parcel_shipped,
    ),
    _Demo(
        "presupuesto-lanzamiento",
        "Lucía Fernández",
        "lucia.fernandez@eventos.example.es",
        "Presupuesto del evento de lanzamiento",
        1,
        _spanish_budget,
    ),
    _Demo(
        "pixelforge-renewal",
        "Mia Thompson",
        "renewals@pixelforge.example.org",
        "Renewal quote for your Pixelforge licences",
        1,
        _renewal_quote,
    ),
    _Demo(
        "out-of-office-kenji",
        "Kenji Watanabe",
        "kenji.watanabe@partner.example.org",
        "Automatic reply: Partnership introduction",
        0,
        _out_of_office,
    ),
    _Demo(
        "office-move-reply",
        "Hannah Lee",
        "hannah.lee@example.com",
        "Re: Office move logistics",
        2,
        _office_move_reply,
        in_reply_to="demo.office-move@example.com",
    ),
    _Demo(
        "cloudway-payment-receipt",
        "Cloudway Hosting",
        "billing@cloudway.example.net",
        "Receipt for your Cloudway Hosting payment",
        0,
        _cloudway_receipt,
    ),
    _Demo(
        "benefits-enrollment",
        "People Team",
        "people@example.com",
        "Open enrollment for next year's benefits",
        1,
        _benefits_enrollment,
    ),
    _Demo(
        "holiday-schedule",
        "People Team",
        "people@example.com",
        "Office holiday schedule",
        0,
        _holiday_schedule,
    ),
    _Demo(
        "one-on-one-agenda",
        "Michael Osei",
        "michael.osei@example.com",
        "Agenda for our Thursday 1:1",
        1,
        _one_on_one,
    ),
    _Demo(
        "expense-exp-2025-0412",
        "Example Corp Expenses",
        "expenses@example.com",
        "Expense report EXP-2025-0412 is on hold",
        1,
        _expense_report,
    ),
    _Demo(
        "metro-rides-trip",
        "Metro Rides",
        "trips@metrorides.example.com",
        "Your Metro Rides trip receipt",
        0,
        _trip_receipt,
    ),
    _Demo(
        "devdays-talk-reply",
        "Olivia Chen",
        "olivia.chen@devdays.example.org",
        "Re: Re: DevDays talk proposal",
        1,
        _talk_reply,
        in_reply_to="demo.devdays-talk-mine@tasklift.test",
    ),
    _Demo(
        "all-hands-slides",
        "Amelia Brooks",
        "amelia.brooks@example.com",
        "Slides from today's all-hands",
        0,
        _all_hands_slides,
    ),
    _Demo(
        "laptop-refresh",
        "IT Service Desk",
        "servicedesk@example.com",
        "Laptop refresh: choose a delivery slot",
        1,
        _laptop_refresh,
    ),
    _Demo(
        "acme-proposal-feedback",
        "Robert Hughes",
        "robert.hughes@acme.example.net",
        "Acme Corp: feedback on your proposal",
        1,
        _acme_feedback,
    ),
    _Demo(
        "security-training",
        "Security Team",
        "security@example.com",
        "Annual security awareness training",
        1,
        _security_training,
    ),
    _Demo(
        "po-7781-approval",
        "Raj Patel",
        "raj.patel@example.com",
        "URGENT: purchase order PO-7781 waiting on your approval",
        1,
        _urgent_po,
    ),
)

EXPECTED_ASKS: dict[str, int] = {demo.subject: demo.asks for demo in _DEMOS}


# --------------------------------------------------------------------------------------------------------
# The person's Sent mail: Gmail's SENT label, Outlook's sentitems. Its first read (the Sent mail of the two
# weeks before a mailbox was connected) shows the three things only Sent mail gives: a promise, an ask of
# someone still unanswered, and an ask of the inbox that the person's reply delivered.


@dataclass(frozen=True)
class _Sent:
    slug: str  # its Message-ID is <demo.SLUG@tasklift.test>, whoever owns the mailbox
    to_name: str
    to_address: str
    subject: str
    fill: _Fill
    before: timedelta  # sent this long before `anchor`'s message (before `now`, without one)
    anchor: str | None = None  # slug of the inbox message it is dated from
    in_reply_to: str | None = None  # Message-ID (without brackets) of the message it answers
    promises: int = 0  # commitments the reader finds in it (sandbox/READER.md §8.1)
    waits_for: int = 0  # waiting items the reader finds in it
    closes: int = 0  # asks of the message it answers that it delivers (§8.2), so the run closes them


_SENT: tuple[_Sent, ...] = (
    _Sent(
        "q4-budget-deck-mine",
        "Jane Doe",
        "jane.doe@example.com",
        "Re: Q4 budget deck review",
        _budget_comments,
        before=_BUDGET_COMMENTS_BEFORE_REPLY,
        anchor="q4-budget-deck-reply",
        in_reply_to="demo.q4-budget-deck@example.com",
        closes=1,
    ),
    _Sent(
        "customer-day-venue",
        "Tiago Costa",
        "tiago.costa@example.com",
        "Customer day in Lisbon: venue",
        _customer_day_venue,
        before=timedelta(days=1, hours=2, minutes=40),
        waits_for=1,
    ),
    _Sent(
        "nordlys-fit-out",
        "Ingrid Larsen",
        "ingrid.larsen@nordlys.example.no",
        "Nordlys studio fit-out",
        _fit_out_quote,
        before=timedelta(hours=3, minutes=50),  # recent: read the day the demo is loaded, "by Friday" is ahead
        promises=1,
    ),
)


def _message_id(demo: _Demo) -> str:
    domain = demo.sender_address.rpartition("@")[2]
    return f"<demo.{demo.slug}@{domain}>"


def _sent_message_id(sent: _Sent) -> str:
    return f"<demo.{sent.slug}@{DEMO_ADDRESS.rpartition('@')[2]}>"


_BY_ID: dict[str, _Demo | _Sent] = {_message_id(d): d for d in _DEMOS} | {_sent_message_id(s): s for s in _SENT}

# What the first read of the demo mailboxes gives, by Subject (Sent mail's subjects are unique too).
EXPECTED_PROMISES: dict[str, int] = {sent.subject: sent.promises for sent in _SENT if sent.promises}
EXPECTED_WAITING: dict[str, int] = {sent.subject: sent.waits_for for sent in _SENT if sent.waits_for}
# Asks of the inbox that the person's Sent reply delivers: "Done by your reply", in the Done view.
CLOSED_BY_REPLY: dict[str, int] = {
    _BY_ID[f"<{sent.in_reply_to}>"].subject: sent.closes for sent in _SENT if sent.closes and sent.in_reply_to
}
# Every item the first run makes ("N tasks created"), and the Open list it leaves (asks and promises; the
# waiting items are in "Waiting for"), by Subject.
EXPECTED_TASKS: int = sum(EXPECTED_ASKS.values()) + sum(EXPECTED_PROMISES.values()) + sum(EXPECTED_WAITING.values())
EXPECTED_OPEN: dict[str, int] = {
    subject: count
    for subject, count in (
        *((s, n - CLOSED_BY_REPLY.get(s, 0)) for s, n in EXPECTED_ASKS.items()),
        *EXPECTED_PROMISES.items(),
    )
    if count
}


def _references(in_reply_to: str) -> str:
    """The References of a reply to `in_reply_to` (RFC 5322 §3.6.4): that message's own References, when it is
    a demo message, then its Message-ID."""
    chain = [f"<{in_reply_to}>"]
    parent = _BY_ID.get(chain[0])
    while parent is not None and parent.in_reply_to:
        chain.insert(0, f"<{parent.in_reply_to}>")
        parent = _BY_ID.get(chain[0])
    return " ".join(chain)


def _sent_times(now: datetime, count: int) -> list[datetime]:
    """`count` strictly increasing whole-minute times, from `now - _SPAN` to `now - _NEWEST`."""
    span_minutes = int((_SPAN - _NEWEST).total_seconds() // 60)
    latest = now.replace(second=0, microsecond=0) - _NEWEST
    step = span_minutes / max(count - 1, 1)
    times = []
    for index in range(count):
        jitter = (index * 37) % 29 - 14 if 0 < index < count - 1 else 0  # irregular, but keeps the order
        minutes_before = round(step * (count - 1 - index)) + jitter
        times.append(latest - timedelta(minutes=minutes_before))
    return times


def _build(demo: _Demo, sent: datetime) -> bytes:
    msg = EmailMessage(policy=policy.SMTP)
    msg["From"] = Address(demo.sender_name, addr_spec=demo.sender_address)
    msg["To"] = Address(DEMO_NAME, addr_spec=DEMO_ADDRESS)
    msg["Subject"] = demo.subject
    msg["Date"] = format_datetime(sent)
    msg["Message-ID"] = _message_id(demo)
    if demo.in_reply_to:
        msg["In-Reply-To"] = f"<{demo.in_reply_to}>"
        msg["References"] = _references(demo.in_reply_to)
    demo.fill(msg, _Ctx(sent=sent))
    return msg.as_bytes()


def _build_sent(sent: _Sent, at: datetime, owner: str) -> bytes:
    msg = EmailMessage(policy=policy.SMTP)
    msg["From"] = Address(DEMO_NAME, addr_spec=owner)
    msg["To"] = Address(sent.to_name, addr_spec=sent.to_address)
    msg["Subject"] = sent.subject
    msg["Date"] = format_datetime(at)
    msg["Message-ID"] = _sent_message_id(sent)
    if sent.in_reply_to:
        msg["In-Reply-To"] = f"<{sent.in_reply_to}>"
        msg["References"] = _references(sent.in_reply_to)
    sent.fill(msg, _Ctx(sent=at))
    return msg.as_bytes()


def _aware(now: datetime) -> datetime:
    return now if now.tzinfo is not None else now.replace(tzinfo=UTC)


def _inbox_times(now: datetime) -> dict[str, datetime]:
    return dict(zip((demo.slug for demo in _DEMOS), _sent_times(now, len(_DEMOS)), strict=True))


def demo_messages(now: datetime) -> list[bytes]:
    """The demo inbox as raw RFC 822 messages, oldest first, all sent within the six days before `now`.

    A naive `now` is taken as UTC.
    """
    times = _inbox_times(_aware(now))
    return [_build(demo, times[demo.slug]) for demo in _DEMOS]


@dataclass(frozen=True)
class DemoMail:
    """One message of a demo mailbox: `folder` "inbox" (received) or "sent" (sent by the mailbox's owner)."""

    folder: Literal["inbox", "sent"]
    raw: bytes
    at: datetime  # its Date header: when it was received, or sent


def demo_mail(now: datetime, *, owner: str = DEMO_ADDRESS) -> list[DemoMail]:
    """The whole demo mailbox of `owner`, oldest first: the inbox of `demo_messages` and the Sent mail `owner`
    wrote (From `owner`), each dated relative to `now` within the six days before it. Delivered in this
    order, each reply finds the message it answers already there, in whichever folder, as a conversation needs.
    """
    now = _aware(now)
    times = _inbox_times(now)
    latest = now.replace(second=0, microsecond=0)
    mail = [DemoMail("inbox", _build(demo, times[demo.slug]), times[demo.slug]) for demo in _DEMOS]
    for sent in _SENT:
        at = (times[sent.anchor] if sent.anchor else latest) - sent.before
        mail.append(DemoMail("sent", _build_sent(sent, at, owner), at))
    return sorted(mail, key=lambda m: m.at)
