"""The accounts API: who you are (and your time zone), your AI consent, and your personal access tokens."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from zoneinfo import available_timezones

from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from ninja import Field, Path, Router, Schema, Status
from pydantic import ConfigDict

from accounts.consent import CONSENT_NOT_SENT, CONSENT_SENT, CONSENT_TERMS, CONSENT_TITLE, CONSENT_VERSION
from accounts.models import PersonalAccessToken, User
from accounts.selectors import access_token_list, consent_in_force
from accounts.services import (
    access_token_create,
    access_token_revoke,
    consent_grant,
    consent_revoke,
    user_set_language,
    user_set_timezone,
)
from config.auth import require_session
from config.errors import NotFoundError
from config.http import request_user
from tasks.api import VISIBLE
from tasks.services import db_text

router = Router(tags=["account"])

TIME_ZONES: list[str] = sorted(available_timezones())  # what accounts.services.timezone_valid accepts

TokenId = Annotated[int, Path(ge=1, le=2**63 - 1, description="The token's id.")]


# You ----------------------------------------------------------------------------------------------


class MeOut(Schema):
    id: int
    email: str
    name: str
    timezone: str
    language: str = Field(description="The language quick add reads dates in (and English).")
    date_order: str = Field(description="DMY: 12/05 is 12 May; MDY: 5 December.")


class MePatch(Schema):
    model_config = ConfigDict(extra="forbid")

    # The names Tasklift knows, as an enum in the document (~600 names, some 12 kB): a program can offer them,
    # and every one it picks is accepted. Only documented: the service checks it, so that a name it does not
    # know stays a 422 `invalid_timezone` rather than pydantic's `invalid_input`.
    timezone: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="An IANA time zone name, such as Europe/Paris.",
        json_schema_extra={"enum": [*TIME_ZONES]},
    )
    language: Literal["en", "de", "fr", "es", "it", "nl", "pt"] | None = Field(
        default=None, description="The language you write tasks in: quick add reads its dates (and English)."
    )
    date_order: Literal["DMY", "MDY"] | None = Field(
        default=None, description="How a date like 12/05 is read: DMY, 12 May; MDY, 5 December."
    )


@router.get("/me", response=MeOut, summary="Who you are")
def get_me(request: HttpRequest) -> User:
    return request_user(request)


@router.patch("/me", response=MeOut, summary="Set your time zone, language or date order")
def update_me(request: HttpRequest, payload: MePatch) -> User:
    """Each field given is set (all of them or none: a time zone Tasklift does not know changes nothing)."""
    user = request_user(request)
    with transaction.atomic():
        if payload.timezone is not None:
            user = user_set_timezone(user=user, timezone_name=payload.timezone)
        if payload.language is not None or payload.date_order is not None:
            user = user_set_language(user=user, language=payload.language, date_order=payload.date_order)
    return user


# Consent ------------------------------------------------------------------------------------------


class ConsentTextOut(Schema):
    version: str
    title: str
    sent: list[str]
    not_sent: list[str]
    terms: list[str]


class ConsentOut(Schema):
    given: bool = Field(
        description="Whether a consent is in force: only then is mail read. It may be to an earlier text "
        "(`given_version`), which covers reading as that text says until the current one is agreed to."
    )
    given_version: str | None = Field(description="The text version the consent in force was given to.")
    granted_at: datetime | None
    text: ConsentTextOut


class ConsentIn(Schema):
    """The version agreed to must be the current one (`text.version` of GET /consent), so that consent is
    never given to a text the person was not shown."""

    model_config = ConfigDict(extra="forbid")

    text_version: Literal[CONSENT_VERSION]  # type: ignore[valid-type]


def consent_as_dict(user: User) -> dict[str, Any]:
    current = consent_in_force(user=user)
    return {
        "given": current is not None,
        "given_version": current.text_version if current else None,
        "granted_at": current.granted_at if current else None,
        "text": {
            "version": CONSENT_VERSION,
            "title": CONSENT_TITLE,
            "sent": CONSENT_SENT,
            "not_sent": CONSENT_NOT_SENT,
            "terms": CONSENT_TERMS,
        },
    }


@router.get("/consent", response=ConsentOut, summary="Your AI consent, and the text it is given to")
def get_consent(request: HttpRequest) -> dict[str, Any]:
    return consent_as_dict(request_user(request))


@router.post("/consent", response=ConsentOut, summary="Give consent to the current text")
def grant_consent(request: HttpRequest, payload: ConsentIn) -> dict[str, Any]:
    user = request_user(request)
    consent_grant(user=user)
    return consent_as_dict(user)


@router.delete("/consent", response=ConsentOut, summary="Revoke your consent")
def revoke_consent(request: HttpRequest) -> dict[str, Any]:
    user = request_user(request)
    consent_revoke(user=user)
    return consent_as_dict(user)


# Personal access tokens ---------------------------------------------------------------------------


class TokenOut(Schema):
    id: int
    name: str
    prefix: str = Field(description="The token's first characters, to tell tokens apart.")
    created_at: datetime
    last_used_at: datetime | None


class TokenCreatedOut(TokenOut):
    token: str = Field(description="The token itself. It is shown only this once: store it now.")


class TokenIn(Schema):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=100, pattern=VISIBLE, description="What will use the token.")


@router.get("/tokens", response=list[TokenOut], summary="List your access tokens (browser session only)")
def list_tokens(request: HttpRequest) -> QuerySet[PersonalAccessToken]:
    require_session(request)
    return access_token_list(user=request_user(request))


@router.post("/tokens", response={201: TokenCreatedOut}, summary="Make an access token (browser session only)")
def create_token(request: HttpRequest, payload: TokenIn) -> Status[Any]:
    require_session(request)
    token, secret = access_token_create(user=request_user(request), name=db_text(payload.name))
    return Status(201, {**TokenOut.from_orm(token).model_dump(), "token": secret})


@router.delete("/tokens/{int:token_id}", response={204: None}, summary="Revoke an access token (browser session only)")
def revoke_token(request: HttpRequest, token_id: TokenId) -> Status[None]:
    require_session(request)
    user = request_user(request)
    if not PersonalAccessToken.objects.filter(user=user, pk=token_id).exists():
        raise NotFoundError("There is no such access token.", code="token_not_found")
    access_token_revoke(user=user, token_id=token_id)
    return Status(204, None)
