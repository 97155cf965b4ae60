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
"""

CONSENT_VERSION = "2"
# Every version a consent may still be in force for; the run reads what the person's version allows.
VERSIONS_IN_FORCE = ("1", "2")
# From this version on, whom each email was sent to and the person's own addresses are sent.
RECIPIENTS_SINCE = "2"
# What changed from one version to the next, said to a person who agreed to the one before.
CHANGES = {
    "2": "Gemini is now also sent whom each email was sent to (its To and Cc lines) and the addresses of the "
    "mailboxes you connected, so that something asked of someone else is not made your task.",
}

CONSENT_TITLE = "Let Gemini read your new email to find your tasks"

CONSENT_SENT = [
    "the sender of each new email in the inboxes you connect",
    "its subject line",
    "the date it was received",
    "whom it was sent to (the names and addresses on its To and Cc lines, at most ten of each) and the addresses "
    "of the mailboxes you connected, so that something asked of someone else is not made your task",
    "a cleaned excerpt of its text: quoted earlier replies and signatures removed, at most a few thousand characters",
]

CONSENT_NOT_SENT = [
    "attachments, images and files",
    "other mail: sent mail, drafts, archive, spam and other folders",
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
