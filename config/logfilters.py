"""Log filters, on every handler. Whatever logs a request's URL (gunicorn's and the development server's access
logs, Django's request warnings) or a header must not keep a credential: a query parameter that can hold one
(an OAuth callback's code and state, a program's token put in a query), a personal access token anywhere, the
secret parts of a password-reset or email-confirmation link. And each record gets the ids of the run in
progress (config/logcontext.py)."""

from __future__ import annotations

import logging
import re

from config.logcontext import FIELDS, log_context_now

# A parameter whose name has one of these words (split at `_`, `-`, `.` and camelCase: auth_code, apiKey,
# X-Amz-Signature), or contains one of the longer ones (accesstoken, clientsecret, sessionid), may hold a
# credential. Wider than any one provider's names on purpose: a page token or a sort key redacted costs nothing.
# fmt: off
_SECRET_WORDS = frozenset({
    "token", "code", "state", "key", "password", "passwd", "pwd", "pass", "secret", "signature", "sig", "auth",
    "credential", "credentials", "session", "jwt", "otp", "assertion", "ticket",
})
# fmt: on
_SECRET_PARTS = ("token", "secret", "password", "passwd", "apikey", "signature", "credential", "session")

# `?` and `&` in a query, or percent-encoded once or more inside another parameter's value (`next=…%3Fcode%3D…`).
_ENCODED_SEP = r"%(?:25)*(?:3[Ff]|26)"
_PARAM = re.compile(
    rf"(?P<lead>{_ENCODED_SEP}|(?<![\w.\-%]))(?P<name>[A-Za-z][\w.\-]*)(?P<eq>=|%(?:25)*3[Dd])"
    rf"(?P<value>(?:(?!{_ENCODED_SEP})[^&\s\"'#])*)"
)
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")

# accounts' personal access tokens (accounts/services.py: "tl_" and 43 URL-safe characters), wherever they are.
_ACCESS_TOKEN = re.compile(r"tl_[A-Za-z0-9_\-]{10,}")

# The links of the account emails (config/urls.py): /password-reset/<uidb64>/<token>/, which Django redirects to
# /password-reset/<uidb64>/set-password/, and /signup/confirm/<token>/; their slashes percent-encoded too.
_SLASH = r"(?:/|%(?:25)*2[Ff])"
_SEGMENT = rf"(?:(?!{_SLASH})[^/\s?#&\"'])+"
_RESET_LINK = re.compile(
    rf"(?P<head>{_SLASH}password-reset{_SLASH}){_SEGMENT}(?P<sep>{_SLASH})(?P<token>{_SEGMENT})(?={_SLASH})"
)
_CONFIRM_LINK = re.compile(rf"(?P<head>{_SLASH}signup{_SLASH}confirm{_SLASH}){_SEGMENT}(?={_SLASH})")

REDACTED = "[redacted]"


def _secret_name(name: str) -> bool:
    lowered = name.lower()
    return any(part in lowered for part in _SECRET_PARTS) or any(
        word.lower() in _SECRET_WORDS for word in _WORD.findall(name)
    )


def _param(match: re.Match[str]) -> str:
    if not match["value"] or not _secret_name(match["name"]):
        return match[0]
    return f"{match['lead']}{match['name']}{match['eq']}{REDACTED}"


def _reset_link(match: re.Match[str]) -> str:
    token = match["token"] if match["token"] == "set-password" else REDACTED
    return f"{match['head']}{REDACTED}{match['sep']}{token}"


def redact(text: str) -> str:
    text = _ACCESS_TOKEN.sub("tl_" + REDACTED, text)
    text = _PARAM.sub(_param, text)
    text = _RESET_LINK.sub(_reset_link, text)
    return _CONFIRM_LINK.sub(lambda match: match["head"] + REDACTED, text)


class RedactOAuthParams(logging.Filter):
    """Take every credential out of a record's message (`redact`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        return True


class LogContextFilter(logging.Filter):
    """Give the record the run id, person id, mailbox id and job id set where it was logged (None when not)."""

    def filter(self, record: logging.LogRecord) -> bool:
        ids = log_context_now()
        for name in FIELDS:
            if getattr(record, name, None) is None:
                setattr(record, name, ids.get(name))
        return True
