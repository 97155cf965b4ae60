"""Connecting a mailbox by IMAP: the form (a provider's preset, or a server of one's own), its checks, and the
test that signs in before anything is saved.

The server is one the person names, so Tasklift connects where a stranger tells it to: only over TLS (IMAPS or
STARTTLS, certificates verified), only to a public address unless IMAP_ALLOW_PRIVATE_HOSTS (a self-hosted
Tasklift beside its own mail server, the tests' Dovecot), and a person's tries are counted
(IMAP_CONNECT_TRIES_PER_HOUR), so the form is no tool to knock on other machines' ports.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass

from django import forms
from django.conf import settings

from accounts.counting import Counter, CountRefused, count_take, counter_key
from config.errors import RateLimitedError
from integrations.providers.base import ProviderAuthError, ProviderError
from integrations.providers.imap import ImapAccount, ImapProvider


@dataclass(frozen=True)
class Preset:
    label: str
    host: str
    port: int
    security: str
    note: str  # where the person makes the app password


PRESETS: dict[str, Preset] = {
    "fastmail": Preset("Fastmail", "imap.fastmail.com", 993, "tls", "Settings → Privacy & Security → App passwords"),
    "icloud": Preset(
        "iCloud Mail",
        "imap.mail.me.com",
        993,
        "tls",
        "account.apple.com → Sign-In and Security → App-Specific",
    ),
    "yahoo": Preset("Yahoo Mail", "imap.mail.yahoo.com", 993, "tls", "Account security → Generate app password"),
    "gmx": Preset("GMX", "imap.gmx.net", 993, "tls", "Settings → POP3 & IMAP: allow access (your GMX password)"),
    "mailbox_org": Preset("mailbox.org", "imap.mailbox.org", 993, "tls", "Settings → Security → App passwords"),
    "zoho": Preset("Zoho Mail", "imap.zoho.com", 993, "tls", "Security → App Passwords (IMAP on in Mail settings)"),
    "proton_bridge": Preset(
        "Proton Mail Bridge", "127.0.0.1", 1143, "starttls", "the password Proton Mail Bridge shows for this address"
    ),
}
OTHER = "other"


class ImapConnectForm(forms.Form):
    preset = forms.ChoiceField(
        label="Mail service",
        choices=[*((key, p.label) for key, p in PRESETS.items()), (OTHER, "Another server")],
        initial="fastmail",
    )
    address = forms.EmailField(label="Email address", max_length=254)
    username = forms.CharField(
        label="User name", max_length=254, required=False, help_text="Leave empty when it is the email address."
    )
    password = forms.CharField(
        label="App password", max_length=256, strip=False, widget=forms.PasswordInput(render_value=True)
    )
    host = forms.CharField(label="IMAP server", max_length=253, required=False)
    port = forms.IntegerField(label="Port", min_value=1, max_value=65535, required=False)
    security = forms.ChoiceField(
        label="Security", choices=[("tls", "TLS (IMAPS)"), ("starttls", "STARTTLS")], initial="tls", required=False
    )

    def clean_address(self) -> str:
        return str(self.cleaned_data["address"]).strip().lower()

    def clean_host(self) -> str:
        host = str(self.cleaned_data.get("host") or "").strip().lower().rstrip(".")
        if host and ("/" in host or (":" in host and not _is_ip(host)) or " " in host):
            raise forms.ValidationError("Enter the server's name only, like imap.example.com (no https:// or port).")
        return host

    def account(self) -> ImapAccount:
        """The account to sign in to (the form is valid)."""
        data = self.cleaned_data
        preset = PRESETS.get(data["preset"])
        host = preset.host if preset else data["host"]
        port = preset.port if preset else (data["port"] or (993 if data["security"] != "starttls" else 143))
        security = preset.security if preset else (data["security"] or "tls")
        return ImapAccount(
            host=host,
            port=port,
            security="starttls" if security == "starttls" else "tls",
            username=data["username"].strip() or data["address"],
            password=data["password"],
        )

    def clean(self) -> dict[str, object]:
        data = super().clean() or {}
        if data.get("preset") == OTHER and not data.get("host"):
            self.add_error("host", "Enter the IMAP server of your mail service (its help pages name it).")
        return data


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class ConnectRefused(Exception):
    """The connection test failed; `message` says why, for the person."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def imap_host_check(host: str, port: int) -> None:
    """Refuse a server whose every address is private (loopback, the local network, link-local) unless the
    operator allows them, and one whose name does not resolve."""
    try:
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)}
    except (socket.gaierror, UnicodeError):
        raise ConnectRefused(f"No server named {host} was found. Check the name.", code="host_unknown") from None
    if settings.IMAP_ALLOW_PRIVATE_HOSTS:
        return
    if all(not ipaddress.ip_address(a.split("%")[0]).is_global for a in addresses):
        raise ConnectRefused(
            f"{host} is an address on a private network, which this Tasklift does not connect to.",
            code="host_private",
        )


def imap_connect_count(*, user_id: int) -> None:
    """Count one try of the form's test or save; RateLimitedError past IMAP_CONNECT_TRIES_PER_HOUR."""
    tries = Counter(
        key=counter_key("imap-connect", str(user_id)), limit=settings.IMAP_CONNECT_TRIES_PER_HOUR, window_s=3600
    )
    try:
        count_take(tries)
    except CountRefused as refusal:
        wait = max(1, int(refusal.retry_after))
        raise RateLimitedError(
            f"Too many connection tries in the last hour. Try again in about {-(-wait // 60)} minutes.",
            retry_after=wait,
        ) from None


@dataclass(frozen=True)
class Tested:
    sent_folder: str | None  # the Sent folder found; None: the Inbox alone is read

    def sentence(self, address: str) -> str:
        if self.sent_folder:
            return f"Connected to {address}: Tasklift can read its Inbox and its sent mail (“{self.sent_folder}”)."
        return (
            f"Connected to {address}, but it has no Sent folder Tasklift can find: only its Inbox will be read, so "
            "your replies will not close tasks."
        )


def imap_connection_test(account: ImapAccount) -> Tested:
    """Sign in and find the folders, as a run would. Raises ConnectRefused with the reason in plain words."""
    imap_host_check(account.host, account.port)
    provider = ImapProvider(account)
    try:
        return Tested(sent_folder=provider.check_folders())
    except ProviderAuthError:
        raise ConnectRefused(
            "The server refused this user name and password. Many services need an app password here, not "
            "your usual one.",
            code="auth",
        ) from None
    except ProviderError as error:
        raise ConnectRefused(error.message, code=error.code) from None
    finally:
        provider.close()
