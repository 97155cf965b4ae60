"""Graph subscriptions for Outlook mail (reference §B.5): create, list, get, renew (PATCH), delete and
reauthorize under /v1.0/subscriptions, with the endpoint validation handshake; and the control routes that send
lifecycle events and list every subscription. What a subscription hears of, and the bodies sent, are in
sandbox/graph_notifications.py.

Validation: on create, and again on renew and reauthorize (live Graph does so: renewals and reauthorizations
fail with "Subscription validation request timed out", msgraph-sdk-dotnet#2805, pnp/Microsoft365-Analytics-
Insights#273), the sandbox POSTs to the notificationUrl, then the lifecycleNotificationUrl, with
`?validationToken=` Graph's own text "Validation: Testing client application reachability for subscription
Request-Id: <guid>", encoded as Graph does (`Validation%3a+Testing+…`, seen in server logs), Content-Type
`text/plain; charset=utf-8` and no body. The endpoint must answer within 10 s (the `graph_validation_timeout_ms`
setting) with a 200, a text/plain Content-Type and the decoded token as its whole body; otherwise the call is a
400 `ValidationError` with Graph's message for what went wrong. Each handshake is in the delivery log (kind
`validation`).

Expiry: expirationDateTime is required, in the future, and at most 10,070 minutes ahead (the limit live Graph
enforces for messages, "Subscription expiration can only be 10070 minutes in the future.", code
`ExtensionError`; the documents say 10,080). A subscription past it is gone: 404 `ResourceNotFound`.

The one deviation: Graph only calls public https endpoints; the sandbox also calls plain http on a loopback
host (127.0.0.1, localhost), where tests listen.
"""

from __future__ import annotations

import http.client
import re
import uuid
from datetime import UTC, datetime, timedelta
from http import HTTPStatus
from typing import Any, Literal
from urllib.parse import quote_plus, urlsplit

from flask import Response, request
from pydantic import BaseModel, ConfigDict

from sandbox.app import json_response, sandbox_state
from sandbox.control import ControlError, control_route, parse_body
from sandbox.graph import (
    GraphError,
    OutlookMailbox,
    blueprint,
    folder_of_ref,
    mailbox_of_request,
    request_preferences,
)
from sandbox.graph_notifications import (
    CHANGE_TYPES,
    GraphSubscription,
    lifecycle_send,
    subscription_live,
    subscriptions,
)
from sandbox.microsoft import STORE as MICROSOFT_STORE
from sandbox.microsoft import account_oid, tls_base_url
from sandbox.oauth import token_store
from sandbox.push import Attempt, attempt_log, endpoint_problem

MAX_LIFETIME = timedelta(minutes=10_070)
MAX_CLIENT_STATE = 128
TLS_VERSIONS = ("v1_0", "v1_1", "v1_2", "v1_3")
_FAILED = "Subscription validation request failed."
_MUST_ANSWER_200 = "Notification endpoint must respond with 200 OK to validation request."
_RESOURCE = re.compile(
    r"^/?(?:me|users/([^/]+))/(?:mailfolders(?:/([^/()']+)|\('([^']+)'\))/)?messages/?$", re.IGNORECASE
)


def _bad_request(message: str, code: str = "InvalidRequest") -> GraphError:
    return GraphError(400, code, message)


def _not_found() -> GraphError:
    return GraphError(404, "ResourceNotFound", "The object was not found.")


def _body() -> dict[str, Any]:
    data = request.get_json(silent=True)
    if not isinstance(data, dict):
        raise _bad_request("Empty Payload. JSON content expected.", "BadRequest")
    return data


def _application_id() -> str:
    """The client id of the app whose token made the request."""
    header = request.headers.get("Authorization", "")
    access = token_store(sandbox_state(), MICROSOFT_STORE).access.get(header[7:].strip())
    return str(access.client_id) if access is not None else ""


# Fields --------------------------------------------------------------------------------------------------
def _expiration(value: Any) -> datetime:
    if value is None:
        raise _bad_request("expirationDateTime is a required property for subscription creation.")
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError as exc:
        raise _bad_request(f"Cannot convert the literal '{value}' to the expected type 'Edm.DateTimeOffset'.") from exc
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    now = datetime.now(UTC)
    if moment <= now:
        raise _bad_request("Subscription expiration can only be in the future.", "ExtensionError")
    if moment - now > MAX_LIFETIME:
        raise _bad_request(
            f"Subscription expiration can only be {MAX_LIFETIME // timedelta(minutes=1)} minutes in the future.",
            "ExtensionError",
        )
    return moment


def _change_types(value: Any) -> list[str]:
    names = [name.strip() for name in str(value or "").split(",") if name.strip()]
    unknown = [name for name in names if name not in CHANGE_TYPES]
    if not names or unknown:
        raise _bad_request(
            f"Invalid changeType '{value}': give one or more of {', '.join(CHANGE_TYPES)}, separated by commas."
        )
    return list(dict.fromkeys(names))


def _url(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise _bad_request(f"{name} is a required property for subscription creation.")
    problem = endpoint_problem(value)
    if problem:
        raise _bad_request(f"{name} {problem}.", "ValidationError")
    return value


def _resource(mailbox: OutlookMailbox, value: Any) -> tuple[str, str | None]:
    """(the resource as given, the folder it names or None for every folder)."""
    match = _RESOURCE.match(str(value or ""))
    if match is None:
        raise _bad_request(
            f"Resource '{value}' is not supported: subscribe to me/mailFolders('Inbox')/messages, "
            "me/mailFolders/{id}/messages or me/messages."
        )
    user, folder_path, folder_quoted = match.groups()
    if user is not None and user.lower() not in (mailbox.address, account_oid(mailbox.address)):
        raise GraphError(403, "ErrorAccessDenied", "Access is denied. Check credentials and try again.")
    folder_ref = folder_path or folder_quoted
    if folder_ref is None:
        return str(value), None
    folder = folder_of_ref(mailbox, folder_ref)
    if folder is None:
        raise GraphError(404, "ErrorItemNotFound", "The specified object was not found in the store.")
    return str(value), folder


# The validation handshake ------------------------------------------------------------------------------------
def _validation_target(url: str, token: str) -> str:
    # Graph's encoding, as seen in server logs: form-style, with lower-case escapes (Validation%3a+Testing+…).
    encoded = re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), quote_plus(token))
    return f"{url}{'&' if '?' in url else '?'}validationToken={encoded}"


def _validation_post(target: str, timeout: float) -> tuple[int, str, str]:
    """POST Graph's validation request; (status, Content-Type, body). With http.client, so the query goes out
    exactly as encoded (requests and urllib3 would upper-case its escapes)."""
    parts = urlsplit(target)
    connection_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = connection_class(parts.hostname or "", parts.port, timeout=timeout)  # https: verified
    try:
        connection.request(
            "POST",
            f"{parts.path or '/'}?{parts.query}",
            body=b"",
            headers={"Content-Type": "text/plain; charset=utf-8"},
        )
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type") or "", response.read().decode("utf-8", "replace")
    finally:
        connection.close()


def _validate(url: str) -> None:
    """Run Graph's handshake on `url` (outside the lock: the endpoint may call the sandbox meanwhile)."""
    st = sandbox_state()
    token = f"Validation: Testing client application reachability for subscription Request-Id: {uuid.uuid4()}"
    target = _validation_target(url, token)
    timeout = int(st.settings.get("graph_validation_timeout_ms", 10_000)) / 1000
    status: int | None = None
    error: str | None = None
    problem: str | None = None
    try:
        status, content_type, text = _validation_post(target, timeout)
        if status != 200:
            phrase = HTTPStatus(status).phrase.replace(" ", "") if status in HTTPStatus._value2member_map_ else status
            problem = f"{_FAILED} HTTP status code is '{phrase}'. {_MUST_ANSWER_200}"
        elif not content_type.lower().startswith("text/plain") or text != token:
            problem = f"{_FAILED} Response must exactly match validationToken query parameter."
    except TimeoutError as exc:
        error, problem = f"{type(exc).__name__}: {exc}", "Subscription validation request timed out."
    except (OSError, http.client.HTTPException) as exc:
        error, problem = f"{type(exc).__name__}: {exc}", f"{_FAILED} {_MUST_ANSWER_200}"
    attempt_log(st, Attempt("graph", "validation", target, "", status, error, 1, datetime.now(UTC).timestamp()))
    if problem:
        raise _bad_request(problem, "ValidationError")


def _validate_all(subscription_urls: list[str | None]) -> None:
    for url in subscription_urls:
        if url:
            _validate(url)


# Routes --------------------------------------------------------------------------------------------------
def _answer(subscription: GraphSubscription, status: int = 200) -> Response:
    context = f"{tls_base_url()}/v1.0/$metadata#subscriptions/$entity"
    return json_response({"@odata.context": context, **subscription.resource_object()}, status)


def _subscription(subscription_id: str) -> GraphSubscription:
    mailbox = mailbox_of_request()
    subscription = subscription_live(sandbox_state(), subscription_id, mailbox.address)
    if subscription is None:
        raise _not_found()
    return subscription


@blueprint.post("/subscriptions")
def subscription_create() -> Response:
    mailbox = mailbox_of_request()
    body = _body()
    change_types = _change_types(body.get("changeType"))
    notification_url = _url(body.get("notificationUrl"), "notificationUrl")
    lifecycle_url = body.get("lifecycleNotificationUrl")
    if lifecycle_url is not None:
        lifecycle_url = _url(lifecycle_url, "lifecycleNotificationUrl")
    resource, folder = _resource(mailbox, body.get("resource"))
    expiration = _expiration(body.get("expirationDateTime"))
    client_state = body.get("clientState")
    if client_state is not None and (not isinstance(client_state, str) or len(client_state) > MAX_CLIENT_STATE):
        raise _bad_request(f"clientState must be a string of at most {MAX_CLIENT_STATE} characters.")
    tls_version = body.get("latestSupportedTlsVersion") or "v1_2"
    if tls_version not in TLS_VERSIONS:
        raise _bad_request(f"Invalid latestSupportedTlsVersion '{tls_version}'.")
    immutable = request_preferences().immutable  # Prefer: IdType="ImmutableId" when creating (§B.5)
    _validate_all([notification_url, lifecycle_url])
    subscription = GraphSubscription(
        id=str(uuid.uuid4()),
        address=mailbox.address,
        resource=resource,
        folder=folder,
        change_types=change_types,
        client_state=client_state,
        notification_url=notification_url,
        lifecycle_url=lifecycle_url,
        expiration=expiration,
        application_id=_application_id(),
        tls_version=str(tls_version),
        immutable_ids=immutable,
    )
    st = sandbox_state()
    with st.lock:
        subscriptions(st)[subscription.id] = subscription
        return _answer(subscription, 201)


@blueprint.get("/subscriptions")
def subscription_list() -> Response:
    mailbox = mailbox_of_request()
    st = sandbox_state()
    with st.lock:
        ids = [s.id for s in subscriptions(st).values() if s.address == mailbox.address]
        live = [s for s in (subscription_live(st, i, mailbox.address) for i in ids) if s is not None]
        values = [s.resource_object() for s in live]
    return json_response({"@odata.context": f"{tls_base_url()}/v1.0/$metadata#subscriptions", "value": values})


@blueprint.get("/subscriptions/<subscription_id>")
def subscription_get(subscription_id: str) -> Response:
    subscription = _subscription(subscription_id)
    with sandbox_state().lock:
        return _answer(subscription)


@blueprint.patch("/subscriptions/<subscription_id>")
def subscription_update(subscription_id: str) -> Response:
    """Renew (expirationDateTime) and/or move (notificationUrl); either validates the endpoint again."""
    subscription = _subscription(subscription_id)
    body = _body()
    if body.get("expirationDateTime") is None and body.get("notificationUrl") is None:
        raise _bad_request(
            "Subscription must contain either the 'expirationDateTime' or 'notificationUrl' property and its value."
        )
    if "lifecycleNotificationUrl" in body:
        raise _bad_request("lifecycleNotificationUrl can only be set when the subscription is created.")
    expiration = _expiration(body["expirationDateTime"]) if body.get("expirationDateTime") is not None else None
    notification_url = (
        _url(body["notificationUrl"], "notificationUrl") if body.get("notificationUrl") is not None else None
    )
    _validate_all([notification_url or subscription.notification_url, subscription.lifecycle_url])
    st = sandbox_state()
    with st.lock:
        if subscriptions(st).get(subscription.id) is not subscription:
            raise _not_found()  # deleted meanwhile
        if expiration is not None:
            subscription.expiration = expiration
        if notification_url is not None:
            subscription.notification_url = notification_url
        subscription.paused = False
        return _answer(subscription)


@blueprint.delete("/subscriptions/<subscription_id>")
def subscription_delete(subscription_id: str) -> Response:
    subscription = _subscription(subscription_id)
    st = sandbox_state()
    with st.lock:
        subscriptions(st).pop(subscription.id, None)
    return Response(status=204)


@blueprint.post("/subscriptions/<subscription_id>/reauthorize")
def subscription_reauthorize(subscription_id: str) -> Response:
    """Resume a subscription paused by reauthorizationRequired (after validating its endpoint again)."""
    subscription = _subscription(subscription_id)
    _validate_all([subscription.notification_url, subscription.lifecycle_url])
    with sandbox_state().lock:
        subscription.paused = False
    return Response(status=204)


# Control routes --------------------------------------------------------------------------------------
class LifecycleIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    event: Literal["reauthorizationRequired", "subscriptionRemoved", "missed"]


@control_route("/graph/subscriptions", methods=["GET"])
def control_graph_subscription_list() -> Response:
    """Every subscription of every mailbox, expired ones included, with `address`, `expired` and `paused`."""
    st = sandbox_state()
    with st.lock:
        listed = [
            {**s.resource_object(), "address": s.address, "expired": s.expired(), "paused": s.paused}
            for s in subscriptions(st).values()
        ]
    return json_response({"subscriptions": listed})


@control_route("/graph/subscriptions/<subscription_id>/lifecycle", methods=["POST"])
def control_graph_lifecycle(subscription_id: str) -> Response:
    """Send a lifecycle event: subscriptionRemoved also deletes the subscription, reauthorizationRequired
    pauses its change notifications until PATCH or reauthorize; missed only tells."""
    spec = parse_body(LifecycleIn)
    st = sandbox_state()
    with st.lock:
        subscription = subscriptions(st).get(subscription_id.lower())
        if subscription is None:
            raise ControlError("unknown_subscription", f"subscription_id: no subscription {subscription_id}", 404)
        lifecycle_send(st, subscription, spec.event)
    return json_response({"subscriptionId": subscription.id, "lifecycleEvent": spec.event})
