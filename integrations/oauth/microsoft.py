"""Connecting Outlook: Microsoft identity through MSAL's auth-code flow (PKCE, nonce, state), only the
Mail.Read and User.Read scopes, and one MSAL token cache per mailbox, encrypted at rest."""

from __future__ import annotations

import logging
import warnings
from typing import Any

import msal
import requests
from django.conf import settings
from django.contrib.sessions.backends.base import SessionBase

from integrations.oauth.google import OAuthError
from integrations.providers.base import ProviderAuthError, ProviderUnavailable
from integrations.providers.outlook import graph_session

logger = logging.getLogger(__name__)

SESSION_KEY = "microsoft_oauth"
# Errors of a refresh that only the person can fix, by signing in again. (invalid_client and the like are
# the operator's to fix, e.g. an expired client secret: they must not send every person to reconnect.)
REAUTH_ERRORS = {"invalid_grant", "interaction_required", "consent_required"}
# Scopes MSAL adds to every sign-in (and "email"): about the sign-in itself, not permissions on Graph.
SIGN_IN_SCOPES = {"openid", "profile", "offline_access", "email"}


def redirect_uri() -> str:
    return f"{settings.SITE_URL}/integrations/microsoft/callback"


# MSAL keeps the authority's OpenID configuration here for 24 hours, for every app object of the process,
# instead of asking for it again each time an app is built (once per run and mailbox).
_HTTP_CACHE: dict[Any, Any] = {}


def msal_app(cache: msal.SerializableTokenCache | None = None) -> msal.ConfidentialClientApplication:
    return msal.ConfidentialClientApplication(
        settings.MICROSOFT_CLIENT_ID,
        http_cache=_HTTP_CACHE,
        client_credential=settings.MICROSOFT_CLIENT_SECRET,
        authority=settings.MICROSOFT_AUTHORITY,
        token_cache=cache,
        http_client=graph_session(),  # our session: it trusts exactly the configured CA bundle
        # Authority validation asks login.microsoftonline.com about the host; for the sandbox that host
        # is ours, and for the real authority the answer is known in advance.
        instance_discovery=False if settings.MICROSOFT_SIMULATED else None,
        timeout=settings.GRAPH_HTTP_TIMEOUT_S,
    )


class MicrosoftOAuthFlow:
    """Two named steps of one connect: the consent URL, then the token cache from the callback."""

    def __init__(self, session: SessionBase) -> None:
        self.session = session

    def get_authorization_url(self, *, login_hint: str = "") -> str:
        with warnings.catch_warnings():
            # MSAL recommends form_post; we choose a plain redirect on purpose: a cross-site form_post would
            # arrive without our SameSite=Lax session cookie, which holds the flow (state, PKCE, nonce).
            warnings.filterwarnings("ignore", message="response_mode='form_post' is recommended")
            flow = msal_app().initiate_auth_code_flow(
                scopes=settings.MICROSOFT_SCOPES,
                redirect_uri=redirect_uri(),
                login_hint=login_hint or None,
                response_mode="query",
            )
        self.session[SESSION_KEY] = flow
        return str(flow["auth_uri"])

    def get_token_cache(self, *, params: dict[str, str]) -> tuple[str, str, str]:
        """(serialised MSAL cache, home account id, access token) for the account that just signed in."""
        flow = self.session.get(SESSION_KEY)
        if not flow:
            raise OAuthError("This sign-in link has expired. Start connecting Outlook again.", code="oauth_no_session")
        # The state first: an answer that is not to our request (forged, or a stale tab) changes nothing,
        # and the connect in progress can still finish.
        if params.get("state") != flow.get("state"):
            raise OAuthError("This sign-in answer does not match your request. Try again.", code="oauth_state")
        self.session.pop(SESSION_KEY, None)
        if params.get("error"):
            raise OAuthError("Outlook was not connected: access was not granted.", code="oauth_denied")
        cache = msal.SerializableTokenCache()
        app = msal_app(cache)
        try:
            result = app.acquire_token_by_auth_code_flow(flow, params, scopes=settings.MICROSOFT_SCOPES)
        except ValueError as exc:  # state mismatch or missing code: not the answer to our request
            raise OAuthError("This sign-in answer does not match your request. Try again.", code="oauth_state") from exc
        except (RuntimeError, requests.RequestException) as exc:
            raise OAuthError(
                "Microsoft refused the sign-in. Try connecting Outlook again.", code="oauth_token_refused"
            ) from exc
        if "access_token" not in result:
            raise OAuthError("Microsoft refused the sign-in. Try connecting Outlook again.", code="oauth_token_refused")
        _check_granted_scopes(str(result.get("scope", "")))
        accounts = app.get_accounts()
        if not accounts:
            raise OAuthError("Microsoft did not say which account signed in. Try again.", code="oauth_no_account")
        return cache.serialize(), str(accounts[0]["home_account_id"]), str(result["access_token"])


def _check_granted_scopes(scope: str) -> None:
    """Refuse a grant whose resource scopes are not exactly ours, and say why.

    AAD's token response lists every permission the account has consented to for Graph, so one consented
    earlier or by an administrator for the whole organisation (Mail.ReadWrite, Mail.Send) comes along with
    ours; Tasklift keeps no token that could do more than read mail. MSAL's own openid, profile and
    offline_access (and email) are sign-in scopes, not Graph permissions, and are left out of the comparison.
    Microsoft offers an app no way to revoke a delegated grant: the tokens are dropped, never stored.
    """
    # lower-case name -> the name as written ("https://graph.microsoft.com/Mail.Read" -> "Mail.Read")
    granted: dict[str, str] = {}
    for item in scope.split():
        name = item.rsplit("/", 1)[-1]
        if name.lower() not in SIGN_IN_SCOPES:
            granted[name.lower()] = name
    wanted = {name.lower(): name for name in settings.MICROSOFT_SCOPES}
    extra = sorted(name for key, name in granted.items() if key not in wanted)
    missing = sorted(name for key, name in wanted.items() if key not in granted)
    if not extra and not missing:
        return
    logger.warning("microsoft grant refused: scopes %s, not %s", sorted(granted.values()), sorted(wanted.values()))
    if extra:
        message = (
            f"Outlook was not connected: Microsoft granted Tasklift more than it asks for ({', '.join(extra)}), "
            f"and Tasklift only reads mail ({', '.join(sorted(wanted.values()))}), so it refused the sign-in and kept "
            "nothing. Remove Tasklift at account.microsoft.com (Privacy, Apps and services), or for a work account "
            "ask your administrator to grant it only those permissions, then connect again."
        )
    else:
        message = (
            f"Outlook was not connected: Tasklift needs {', '.join(sorted(wanted.values()))}, and Microsoft did not "
            f"grant {', '.join(missing)}. Connect again and accept every permission asked for."
        )
    raise OAuthError(message, code="oauth_scope", extra={"granted": sorted(granted.values()), "extra": extra})


class MicrosoftTokenSource:
    """Access tokens for one mailbox from its MSAL cache: cached while valid, refreshed silently.

    A refresh only the person can fix raises ProviderAuthError (the mailbox then needs reconnecting);
    a network failure raises ProviderUnavailable.
    """

    def __init__(self, credentials: dict[str, Any]) -> None:
        self.cache = msal.SerializableTokenCache()
        self.cache.deserialize(credentials.get("msal_cache"))
        self.home_account_id = credentials.get("home_account_id", "")
        self._app: msal.ConfidentialClientApplication | None = None

    def __call__(self, *, force_refresh: bool = False) -> str:
        if self._app is None:
            try:
                self._app = msal_app(self.cache)
            except (ValueError, requests.RequestException) as exc:
                raise ProviderUnavailable("Microsoft sign-in cannot be reached right now.") from exc
        account = next((a for a in self._app.get_accounts() if a.get("home_account_id") == self.home_account_id), None)
        if account is None:
            raise ProviderAuthError("Tasklift has no sign-in for this Outlook mailbox any more. Connect it again.")
        try:
            result = self._app.acquire_token_silent_with_error(
                settings.MICROSOFT_SCOPES, account=account, force_refresh=force_refresh
            )
        except requests.RequestException as exc:
            raise ProviderUnavailable("Microsoft sign-in cannot be reached right now.") from exc
        if result and "access_token" in result:
            return str(result["access_token"])
        error = (result or {}).get("error", "no_token")
        if error in REAUTH_ERRORS or result is None:
            raise ProviderAuthError("Microsoft refused to renew Tasklift's access to Outlook. Connect it again.")
        logger.error("microsoft token refresh failed with %s: check the app registration and its secret", error)
        raise ProviderUnavailable(f"Microsoft sign-in failed for now ({error}).")

    @property
    def changed(self) -> bool:
        return bool(self.cache.has_state_changed)

    def dump(self) -> dict[str, Any]:
        return {"msal_cache": self.cache.serialize(), "home_account_id": self.home_account_id}
