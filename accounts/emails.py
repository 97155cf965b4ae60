"""The emails of sign-up, confirmation and password reset, written from templates under
templates/accounts/email/ (and templates/registration/ for the reset) and sent through Django's email
settings (SMTP in production, files under .local/mail/ in development).

They carry no text a person typed: anyone can sign any address up, with any name (a stranger's "Security team,
visit …" would reach the address's owner in our words), so they greet nobody by name and are given no account
to print from, only the facts they say."""

from __future__ import annotations

import logging
import smtplib
from typing import Any

from django.conf import settings
from django.core.mail import get_connection, send_mail
from django.template.loader import render_to_string
from django.urls import reverse

from accounts.models import User
from accounts.verification import verification_link_make

logger = logging.getLogger(__name__)


MAIL_UNAVAILABLE = "We could not send the email just now; nothing was changed. Try again in a few minutes."


def mail_server_ready() -> bool:
    """Whether the mail server takes a connection now, as the settings ask for it (STARTTLS or TLS, the login);
    False is logged with its cause. Asked before sign-up, a resend or a reset does anything, for every address
    alike, so that a page may say the email could not be sent without saying whether the address has an account.
    (A send that fails after this is logged only: the page answers the same for every address.)"""
    try:
        connection = get_connection(fail_silently=False)
        connection.open()
        connection.close()
    except (smtplib.SMTPException, OSError) as error:
        logger.error("the mail server could not be reached: %s: %s", type(error).__name__, error)
        return False
    return True


def account_email_send(*, to: str, subject_template: str, body_template: str, context: dict[str, Any]) -> bool:
    """Send one email; False when the mail server could not take it (logged, never the link: it is a secret).

    The page asked `mail_server_ready()` first; a failure here is not shown differently to the person (the page
    answers the same whatever happened to the email, whatever the address), and the email can be asked for again.
    """
    context = {"site_url": settings.SITE_URL, **context}
    subject = " ".join(render_to_string(subject_template, context).split())  # one line, never a header injection
    body = render_to_string(body_template, context)
    try:
        send_mail(subject, body, None, [to])
    except (smtplib.SMTPException, OSError) as error:
        logger.error("account email %r could not be sent: %s", subject_template, type(error).__name__)
        return False
    return True


def _links() -> dict[str, str]:
    return {
        "login_url": settings.SITE_URL + reverse("login"),
        "reset_url": settings.SITE_URL + reverse("password_reset"),
    }


def verification_email_send(*, user: User) -> bool:
    return account_email_send(
        to=user.email,
        subject_template="accounts/email/verify_subject.txt",
        body_template="accounts/email/verify.txt",
        context={
            "link": verification_link_make(user=user),
            "max_age_hours": settings.EMAIL_VERIFICATION_MAX_AGE_HOURS,
            **_links(),
        },
    )


def account_exists_email_send(*, user: User) -> bool:
    """To the owner of an address someone tried to sign up with again: how to log in, nothing changed."""
    return account_email_send(
        to=user.email,
        subject_template="accounts/email/account_exists_subject.txt",
        body_template="accounts/email/account_exists.txt",
        context={"email_verified": user.email_verified, **_links()},
    )
