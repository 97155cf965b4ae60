"""Connecting Gmail: Google OAuth with `state` and PKCE, offline access, only `gmail.readonly`."""

from __future__ import annotations

import logging
from typing import Any

import requests
from django.conf import settings
from django.contrib.sessions.backends.base import SessionBase
from google.oauth2.credentials import Credentials
from google_auth_oauthlib.flow import Flow

from config.errors import ApplicationError
from config.trust import trusting_session

logger = logging.getLogger(__name__)

SESSION_KEY = "google_oauth"
GOOGLE_SCOPE_PREFIX = "https://www.googleapis.com/auth/"


class OAuthError(ApplicationError):
    """The provider's consent screen or token exchange did not give us a mailbox."""


def _client_config() -> dict[str, Any]:
    return {
        "web": {
            "client_id": settings.GOOGLE_CLIENT_ID,
            "client_secret": settings.GOOGLE_CLIENT_SECRET,
            "auth_uri": settings.GOOGLE_AUTH_URI,
            "token_uri": settings.GOOGLE_TOKEN_URI,
        }
    }


def redirect_uri() -> str:
    return f"{settings.SITE_URL}/integrations/google/callback"


class GoogleOAuthFlow:
    """Two named steps of one connect: the consent URL, then the tokens from the callback."""

    def __init__(self, session: SessionBase) -> None:
        self.session = session

    def get_authorization_url(self, *, login_hint: str = "") -> str:
        flow = Flow.from_client_config(_client_config(), scopes=settings.GMAIL_SCOPES, redirect_uri=redirect_uri())
        extra = {"login_hint": login_hint} if login_hint else {}
        url, state = flow.authorization_url(prompt="consent", access_type="offline", **extra)
        self.session[SESSION_KEY] = {"state": state, "code_verifier": flow.code_verifier}
        return str(url)

    def get_credentials(self, *, params: dict[str, str]) -> Credentials:
        saved = self.session.get(SESSION_KEY)
        if not saved:
            raise OAuthError("This sign-in link has expired. Start connecting Gmail again.", code="oauth_no_session")
        # The state first: an answer that is not to our request (forged, or a stale tab) changes nothing,
        # and the connect in progress can still finish.
        if params.get("state") != saved["state"]:
            raise OAuthError("This sign-in answer does not match your request. Try again.", code="oauth_state")
        self.session.pop(SESSION_KEY, None)
        if params.get("error"):
            raise OAuthError("Gmail was not connected: access was not granted.", code="oauth_denied")
        if not params.get("code"):
            raise OAuthError("Google did not return an authorisation code. Try again.", code="oauth_no_code")
        flow = Flow.from_client_config(
            _client_config(), scopes=settings.GMAIL_SCOPES, redirect_uri=redirect_uri(), state=saved["state"]
        )
        flow.code_verifier = saved["code_verifier"]
        try:
            flow.fetch_token(code=params["code"], verify=settings.GOOGLE_CA_BUNDLE or True)
        except Warning as changed:
            # oauthlib raises a Warning ("Scope has changed ...") when the grant's scope set is not the one we
            # asked for (unless OAUTHLIB_RELAX_TOKEN_SCOPE is set; then the check below refuses it). The tokens
            # it carries are a grant all the same: give it back.
            new_scope = getattr(changed, "new_scope", None)
            if new_scope is None:
                raise OAuthError(
                    "Google refused the sign-in. Try connecting Gmail again.", code="oauth_token_refused"
                ) from changed
            raise _refuse_grant(granted=list(new_scope), token=dict(getattr(changed, "token", {}))) from None
        except Exception as exc:  # oauthlib raises many types; none must reach the person as a 500
            raise OAuthError(
                "Google refused the sign-in. Try connecting Gmail again.", code="oauth_token_refused"
            ) from exc
        credentials: Credentials = flow.credentials
        granted = list(credentials.granted_scopes or credentials.scopes or [])
        if set(granted) != set(settings.GMAIL_SCOPES):
            token = {"access_token": credentials.token, "refresh_token": credentials.refresh_token}
            raise _refuse_grant(granted=granted, token=token)
        return credentials


def _refuse_grant(*, granted: list[str], token: dict[str, Any]) -> OAuthError:
    """A grant whose scopes are not exactly ours (more, fewer or others): revoke it at Google and say why."""
    names = ", ".join(sorted(scope.removeprefix(GOOGLE_SCOPE_PREFIX) for scope in granted)) or "no permission"
    revoked = google_revoke(str(token.get("refresh_token") or token.get("access_token") or ""))
    logger.warning("google grant refused: scopes %s, not %s; revoked: %s", granted, settings.GMAIL_SCOPES, revoked)
    if revoked:
        fix = "Tasklift refused the sign-in and gave that access back to Google. Connect again and allow only that."
    else:
        fix = (
            "Tasklift refused the sign-in but could not give that access back to Google just now: remove Tasklift "
            "at myaccount.google.com/permissions, then connect again and allow only that."
        )
    return OAuthError(
        f"Gmail was not connected: Google granted Tasklift {names} instead of the one permission it asks for, "
        f"read-only access to Gmail (gmail.readonly). {fix}",
        code="oauth_scope",
        extra={"granted": sorted(granted), "revoked": revoked},
    )


def google_revoke(token: str) -> bool:
    """Revoke a token at Google (the refresh token revokes the whole grant). True when Google agreed."""
    if not token:
        return True
    session = trusting_session(settings.GOOGLE_CA_BUNDLE)
    session.trust_env = not settings.GOOGLE_SIMULATED  # the sandbox is on loopback: never through a proxy
    try:
        response = session.post(
            settings.GOOGLE_REVOKE_URI,
            data={"token": token},
            headers={"Content-Type": "application/x-www-form-urlencoded"},
            timeout=10,
        )
    except requests.RequestException:
        return False
    # 400 invalid_token: already revoked or expired, which is what we wanted.
    return response.status_code in (200, 400)
