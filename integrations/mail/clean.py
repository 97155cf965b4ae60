"""Cleaning an email's plain-text body before it goes into a prompt.

Quoted history and signatures are removed by mail-parser-reply, which knows the reply headers
("On ... wrote:", "Le ... a écrit :", "Am ... schrieb", Outlook "From:/Sent:" blocks) and the sign-offs of
several languages. What is left is the newest part of the conversation, which is where the ask is.
"""

from __future__ import annotations

import re

from mailparser_reply.constants import MAIL_LANGUAGES
from mailparser_reply.parser import EmailMessage

# Every language the library knows; "david" is a mail product's header format, not a language, and its
# German header rules are already covered by "de".
_LANGUAGES = tuple(name for name in MAIL_LANGUAGES if name != "david")

# The reply parser runs many regular expressions over the text; bounding its input bounds its time.
_PARSE_LIMIT_FACTOR = 4
_PARSE_LIMIT_MIN = 20_000

ELLIPSIS = "…"

_SPACES = re.compile(r"[ \t\f\v\u00a0\u200b]+")
_BLANK_LINES = re.compile(r"\n{3,}")


def clean_body(text: str, *, max_chars: int) -> str:
    """The newest part of an email body: no quoted replies or signature, tidy whitespace, at most `max_chars`."""
    if max_chars < 1:
        raise ValueError("max_chars must be at least 1")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = text[: max(max_chars * _PARSE_LIMIT_FACTOR, _PARSE_LIMIT_MIN)]
    text = _latest_reply(text)
    text = "\n".join(line for line in text.split("\n") if not line.lstrip().startswith(">"))
    text = _collapse_whitespace(text)
    return _bound(text, max_chars)


def _latest_reply(text: str) -> str:
    # keep_hyphen_lists: the library's default treats any line starting with "- " as a signature, which
    # would cut a bulleted list of asks and everything after it.
    message = EmailMessage(text=text, languages=list(_LANGUAGES), keep_hyphen_lists=True).read()
    for reply in message.replies:
        if reply.body:
            return reply.body
    # Nothing but headers and quotes (a bare forward): keep the text rather than send an empty email.
    return text


def _collapse_whitespace(text: str) -> str:
    lines = [_SPACES.sub(" ", line).strip() for line in text.split("\n")]
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()


def _bound(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    cut = text[: max_chars - len(ELLIPSIS)]
    space = max(cut.rfind(" "), cut.rfind("\n"))
    if space > 0:
        cut = cut[:space]
    return cut.rstrip() + ELLIPSIS
