"""The AI consent text.

Sending Gemini more than this text says, or something else, means a new version, and everyone asked again
(a consent counts only for the current version). Wording that tells people less is sent, for a change that
only sends less, keeps the version: what they agreed to still covers everything that is sent, and a new
version would stop everyone's runs until they answer again. So the redaction of secrets was added to the
text under version 1. Version 2 sends more: whom each email was sent to (To and Cc) and the person's own
addresses, so that an ask of someone else is not made their task (a prompt built without them is what a
version 1 consent covers: `extraction.prompt.build_prompt` with no reader).
"""

CONSENT_VERSION = "2"

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
