"""The AI consent text.

Sending Gemini more than this text says, or something else, means a new version, which everyone is asked to
agree to. Wording that tells people less is sent, for a change that only sends less, keeps the version: what
they agreed to still covers everything that is sent. So the redaction of secrets was added to the text under
version 1. Version 2 sends more: whom each email was sent to (To and Cc) and the person's own addresses, so
that an ask of someone else is not made their task.

A consent to an earlier text stays in force for what that text said (VERSIONS_IN_FORCE): a person who agreed
to version 1 keeps their runs, read as version 1 says (a prompt without recipients or the Reader line:
`extraction.prompt.build_prompt` with no reader), and is asked, by a notice on the task list and the consent
page, to agree to the new text. Nobody's reading stops, or widens, for a change they have not seen.

Version 3 reads the person's Sent mail too, to find what they promised and what they wait for from others. A
consent to version 1 or 2 keeps inbox-only runs: no Sent cursor is made or read for it (SENT_SINCE;
`accounts.selectors.reading_choices`, `integrations.services.sent_cursors_open`) until version 3 is agreed to.
"""

CONSENT_VERSION = "3"
# Every version a consent may still be in force for; the run reads what the person's version allows.
VERSIONS_IN_FORCE = ("1", "2", "3")
# From this version on, whom each email was sent to and the person's own addresses are sent.
RECIPIENTS_SINCE = "2"
# From this version on, the person's Sent mail is read as well as their inboxes.
SENT_SINCE = "3"
# What changed from one version to the next, said to a person who agreed to the one before.
CHANGES = {
    "2": "Gemini is now also sent whom each email was sent to (its To and Cc lines) and the addresses of the "
    "mailboxes you connected, so that something asked of someone else is not made your task.",
    "3": "Tasklift now also reads the mail you send (your Sent folder, from two weeks before you agree on), so that "
    "what you promise becomes your task and what you ask of others is listed as waiting for their answer.",
}

CONSENT_TITLE = "Let Gemini read your new email to find your tasks"

CONSENT_SENT = [
    "the sender of each new email in the inboxes you connect",
    "each email you send from those mailboxes (their Sent folder), from two weeks before you agree on, so that what "
    "you promise becomes your task and what you ask of others is listed as waiting for their answer",
    "its subject line",
    "the date it was received",
    "whom it was sent to (the names and addresses on its To and Cc lines, at most ten of each) and the addresses "
    "of the mailboxes you connected, so that something asked of someone else is not made your task",
    "a cleaned excerpt of its text: quoted earlier replies and signatures removed, at most a few thousand characters",
]

CONSENT_NOT_SENT = [
    "attachments, images and files",
    "other mail: drafts, archive, spam and other folders",
    "Bcc recipients, and the recipients of an email beyond the first ten on its To and Cc lines (only how many)",
    "your mailbox passwords or sign-in tokens",
    "one-time codes, passwords, card numbers, IBANs, API keys and access tokens that Tasklift recognises in "
    "an email: they are replaced by placeholders such as [password] before anything is sent",
    "your mailbox's internal message identifiers",
    "newsletters, notifications and mailing-list mail, unless you choose to have them read (Settings)",
]

CONSENT_TERMS = [
    "Emails are sent to Google's Gemini API in batches of up to ten, only while this consent is in force.",
    "You can revoke consent at any time. Revoking stops any run in progress before its next batch, and no "
    "email is sent to Gemini afterwards.",
    "Tasks already created stay in your list until you dismiss or delete them.",
]
