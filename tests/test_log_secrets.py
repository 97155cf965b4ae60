"""No credential reaches a log line: not a query parameter that can hold one (whatever its case, and also
URL-encoded inside another parameter such as `next=`), not a personal access token (`tl_…`) anywhere in a line,
not the secret parts of a password-reset or email-confirmation link. Held through the real gunicorn access log
and through Django's own request records, both written by the handler of config/logconfig.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest
import requests
from django.contrib.auth.tokens import default_token_generator
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from accounts.services import access_token_create
from accounts.verification import verification_link_make
from config.logfilters import redact
from tests.factories import UserFactory
from tests.processes import ROOT, process_env
from tests.test_logging import gunicorn_web, json_lines

TOKEN = "tl_" + "Zq8HEK1zl2Wus_SdtThVMJdv8daB5jbrsm1gtESw4j-v0"[:43]  # the shape of access_token_create's


def reset_path(uid: str = "MTIz", token: str = "cxyz12-0123456789abcdef0123456789abcdef") -> str:
    return reverse("password_reset_confirm", kwargs={"uidb64": uid, "token": token})


def confirm_path(token: str = "123.aGVsbG8:1vXyZa:Q1w2E3r4T5y6U7i8O9p0aSdFgHjKlZxCvBnM") -> str:
    return reverse("signup_confirm", kwargs={"token": token})


@pytest.mark.parametrize(
    ("line", "secrets", "kept"),
    [
        # the case: a token in the query of a refused request
        (f'"GET /api/tasks?token={TOKEN} HTTP/1.1" 401', [TOKEN[3:]], "/api/tasks?token=[redacted] HTTP/1.1"),
        # any parameter that can hold a credential, in any case, among ordinary ones that stay
        (
            '"GET /x?q=invoice&Token=t0k3n-A&ACCESS_TOKEN=t0k3n-B&api_key=k3y-C&apiKey=k3y-D&password=pw-E'
            "&client_secret=s3c-F&X-Amz-Signature=s1g-G&sig=s1g-H&id_token=jwt-I&refresh_token=r3f-J"
            "&session_state=ss-K&SessionId=ss-L&auth=au-M&secret=s3c-N&key=k3y-O&code=c0d-P&state=st-Q"
            '&status=open&limit=5 HTTP/1.1"',
            ["t0k3n", "k3y-", "pw-E", "s3c-", "s1g-", "jwt-I", "r3f-J", "ss-K", "ss-L", "au-M", "c0d-P", "st-Q"],
            "/x?q=invoice&Token=[redacted]&ACCESS_TOKEN=[redacted]&api_key=[redacted]&apiKey=[redacted]",
        ),
        ("GET /x?status=open&limit=5&q=code+review", [], "GET /x?status=open&limit=5&q=code+review"),
        # URL-encoded inside another parameter (a signed-out OAuth callback's `next=`), once or twice
        (
            "GET /login/?next=" + quote("/integrations/google/callback?state=st4te-S3CRET&code=4/0AbC-c0de", safe=""),
            ["S3CRET", "0AbC-c0de"],
            "next=%2Fintegrations%2Fgoogle%2Fcallback%3Fstate%3D[redacted]%26code%3D[redacted]",
        ),
        (
            "GET /login/?next=" + quote(quote("/cb?token=tw1ce-enc0ded&x=1", safe=""), safe=""),
            ["tw1ce-enc0ded"],
            "token%253D[redacted]%2526x%253D1",
        ),
        # a personal access token anywhere: a header, a path, JSON
        (f'"GET /api/tasks HTTP/1.1" 401 "-" "curl Bearer {TOKEN}"', [TOKEN[3:]], "Bearer tl_[redacted]"),
        (f"GET /api/tasks/{TOKEN}", [TOKEN[3:]], "/api/tasks/tl_[redacted]"),
        (f'{{"authorization": "Bearer%20{TOKEN}"}}', [TOKEN[3:]], "Bearer%20tl_[redacted]"),
        # the links of the reset and confirmation emails, and what Django redirects the first to
        (f"GET {reset_path()} HTTP/1.1", ["MTIz", "cxyz12-0123"], "GET /password-reset/[redacted]/[redacted]/ HTTP"),
        (
            f"GET {reset_path(token='set-password')} HTTP/1.1",
            ["MTIz"],
            "GET /password-reset/[redacted]/set-password/ HTTP",
        ),
        (f"Bad Request: {confirm_path()}", ["aGVsbG8", "Q1w2E3r4"], "Bad Request: /signup/confirm/[redacted]/"),
        (
            "GET /login/?next=" + quote(confirm_path(), safe=""),
            ["aGVsbG8", "Q1w2E3r4"],
            "next=%2Fsignup%2Fconfirm%2F[redacted]%2F",
        ),
        # the pages around them keep their paths
        ("GET /password-reset/sent/ HTTP/1.1", [], "GET /password-reset/sent/ HTTP/1.1"),
        ("GET /password-reset/done/ HTTP/1.1", [], "GET /password-reset/done/ HTTP/1.1"),
        ("GET /signup/confirm/ HTTP/1.1", [], "GET /signup/confirm/ HTTP/1.1"),
    ],
)
def test_a_line_keeps_no_credential(line: str, secrets: list[str], kept: str) -> None:
    cleaned = redact(line)
    assert [secret for secret in secrets if secret in cleaned] == [], cleaned
    assert kept in cleaned


def test_a_real_access_token_is_taken_out_of_a_line(db: None) -> None:
    _, secret = access_token_create(user=UserFactory(), name="a script")
    assert secret[3:] not in redact(f"GET /api/tasks?q={secret}") and "tl_[redacted]" in redact(secret)


# Through Django's own records: django.request's 4xx warnings, the development server's access log -------------


@pytest.mark.slow  # it starts a process (tests/slow.py)
@pytest.mark.django_db(transaction=True)  # the child process reads the account this test commits
def test_djangos_own_request_records_keep_no_reset_or_confirmation_secret() -> None:
    """Development as `make run` has it (DEBUG on, so Django's own console handler is live too): a wrong reset
    link and a mangled confirmation link (each a 400, which Django logs with its path) and a runserver access
    line with a token: what the process writes keeps none of their secrets."""
    user = UserFactory(email_verified_at=None)
    wrong_reset = reset_path(urlsafe_base64_encode(force_bytes(user.pk)), "cxyz12-0123456789abcdef0123456789abcdef")
    mangled_confirm = urlsplit(verification_link_make(user=user)).path.replace(":", ":x", 1)
    script = (
        "import django, logging; django.setup(); from django.test import Client; c = Client();"
        f"print(c.get({wrong_reset!r}).status_code, c.get({mangled_confirm!r}).status_code);"
        f"logging.getLogger('django.server').info('\"GET %s?token=%s HTTP/1.1\" 401 47', '/api/tasks', {TOKEN!r})"
    )
    child = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=process_env(DEBUG="true", LOG_FORMAT="plain"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    assert child.stdout.split() == ["400", "400"]
    written = child.stderr
    assert "Bad Request: /password-reset/[redacted]/[redacted]/" in written
    assert "Bad Request: /signup/confirm/[redacted]/" in written
    assert "/api/tasks?token=[redacted]" in written
    for secret in ("cxyz12", mangled_confirm.split("/")[3], TOKEN[3:]):
        assert secret not in written


# Through the real gunicorn access log ---------------------------------------------------------------------


@pytest.mark.slow  # it starts a process (tests/slow.py)
@pytest.mark.django_db(transaction=True)  # gunicorn's process reads the accounts this test commits
def test_gunicorns_access_log_keeps_no_token_reset_or_confirmation_secret(tmp_path: Path) -> None:
    """gunicorn as the Procfile starts it: a program's token in a query (refused, 401), a signed-out OAuth
    callback's `next=`, a real password-reset link (and the set-password page it redirects to) and a real
    confirmation link, each logged by gunicorn and, for the 4xx, by Django: none of their secrets is in the log."""
    user = UserFactory(email_verified_at=None)
    _, secret = access_token_create(user=user, name="a script")
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    reset_token = default_token_generator.make_token(user)
    confirm = urlsplit(verification_link_make(user=user)).path
    next_ = quote("/integrations/google/callback?state=st4te-S3CRET&code=4/0AbC-auth-c0de", safe="")
    asked = [
        (f"/api/tasks?token={secret}", {}, 401),
        (f"/api/tasks?ACCESS_TOKEN={secret}&limit=5", {}, 401),
        ("/api/tasks", {"Referer": f"https://tasklift.test/api/docs?token={secret}"}, 401),
        (f"/login/?next={next_}", {}, 200),
        (reset_path(uid, reset_token), {}, 302),
        (reset_path(uid, reset_token + "0"), {}, 400),
        (confirm, {}, 200),
        (confirm.replace(":", ":x", 1), {}, 400),
    ]

    log = tmp_path / "web.log"
    with gunicorn_web(log) as base_url:
        http = requests.Session()
        answers = [
            http.get(f"{base_url}{path}", headers=headers, allow_redirects=False, timeout=30)
            for path, headers, _ in asked
        ]
        assert [a.status_code for a in answers] == [status for _, _, status in asked]
        form = answers[4].headers["Location"]
        assert form == reset_path(uid, "set-password")
        http.get(f"{base_url}{form}", timeout=30)  # the form the link leads to

    text = log.read_text()
    lines = json_lines(text)
    access = [line["message"] for line in lines if line["logger"] == "gunicorn.access"]
    assert len(access) == len(asked) + 3, access  # /healthz first and last, and the set-password form too
    for secret_part in (secret[3:], reset_token, uid, confirm.split("/")[3], "S3CRET", "auth-c0de"):
        assert secret_part not in text
    assert any("GET /api/tasks?token=[redacted] HTTP/1.1" in line for line in access)
    assert any("GET /api/tasks?ACCESS_TOKEN=[redacted]&limit=5 HTTP/1.1" in line for line in access)
    assert any("docs?token=[redacted]" in line for line in access)  # the Referer the access log writes
    assert any("state%3D[redacted]%26code%3D[redacted]" in line for line in access)
    assert sum("/password-reset/[redacted]/[redacted]/" in line for line in access) == 2
    assert any("/password-reset/[redacted]/set-password/" in line for line in access)
    assert sum("/signup/confirm/[redacted]/" in line for line in access) == 2
    django_warnings = [line["message"] for line in lines if line["logger"] == "django.request"]
    assert "Bad Request: /password-reset/[redacted]/[redacted]/" in django_warnings
    assert "Bad Request: /signup/confirm/[redacted]/" in django_warnings
