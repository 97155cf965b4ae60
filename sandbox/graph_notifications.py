"""Graph change notifications for Outlook mail (reference §B.5): the subscriptions, which mailbox changes each
one hears of, the notification and lifecycle bodies, and their queueing for delivery (sandbox/push.py sends).

sandbox/graph.py reports every message change here (`message_changed`); the routes that create and renew
subscriptions live in sandbox/graph_subscriptions.py. A subscription hears of changes in its folder
(`me/mailFolders('Inbox')/messages`) or in every folder (`me/messages`), as the change types it asked for:
`created` when a message is delivered into the folder or moved into it, `updated` when its isRead or flag
changes, `deleted` when it is deleted or moved out. Under `me/messages` a move is an `updated` (the message
stays in the mailbox; Graph's documents do not say, so this is inferred). Ids are immutable ones when the
subscription was created with `Prefer: IdType="ImmutableId"`, REST ids otherwise (a move gives a new REST id;
the `deleted` of a move out names the old one).

A subscription past its expirationDateTime (on the real clock, checked at each change) or paused by a
`reauthorizationRequired` lifecycle event (until PATCH or reauthorize) hears nothing.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sandbox.microsoft import TENANT_ID, account_oid
from sandbox.push import Delivery, deliveries_queue
from sandbox.state import SandboxState

CHANGE_TYPES = ("created", "updated", "deleted")
LIFECYCLE_EVENTS = ("reauthorizationRequired", "subscriptionRemoved", "missed")
_STORE = "graph_subscriptions"


@dataclass
class GraphSubscription:
    id: str
    address: str
    resource: str  # as the app wrote it
    folder: str | None  # the folder it watches; None: every folder (me/messages)
    change_types: list[str]
    client_state: str | None
    notification_url: str
    lifecycle_url: str | None
    expiration: datetime
    application_id: str
    tls_version: str
    immutable_ids: bool
    paused: bool = False  # reauthorizationRequired was sent: nothing until PATCH or reauthorize

    def expired(self) -> bool:
        return self.expiration <= datetime.now(UTC)

    def resource_object(self) -> dict[str, Any]:
        """The subscription as Graph answers it."""
        return {
            "id": self.id,
            "resource": self.resource,
            "applicationId": self.application_id,
            "changeType": ",".join(self.change_types),
            "clientState": self.client_state,
            "notificationUrl": self.notification_url,
            "notificationQueryOptions": None,
            "lifecycleNotificationUrl": self.lifecycle_url,
            "expirationDateTime": expiration_text(self.expiration),
            "creatorId": account_oid(self.address),
            "includeResourceData": False,
            "latestSupportedTlsVersion": self.tls_version,
            "encryptionCertificate": None,
            "encryptionCertificateId": None,
            "notificationUrlAppId": None,
            "notificationContentType": "application/json",
        }


def expiration_text(moment: datetime) -> str:
    """Graph's form of a subscription's expirationDateTime: seven fractional digits, Z."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "0Z"


def _notification_time(moment: datetime) -> str:
    # The form of the reference's notification example ("2016-03-19T22:11:09.952Z"); a capture from live
    # Graph shows "2019-08-02T07:58:15+00:00" instead, so a receiver should parse either.
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def subscriptions(state: SandboxState) -> dict[str, GraphSubscription]:
    """Every subscription by id, expired ones included (lock held by the caller)."""
    found: dict[str, GraphSubscription] = state.data.setdefault(_STORE, {})
    return found


def subscription_live(state: SandboxState, subscription_id: str, address: str) -> GraphSubscription | None:
    """The subscription of that id made for `address`, unless it expired (Graph then forgets it: a 404)."""
    with state.lock:
        subscription = subscriptions(state).get(subscription_id.lower())
        if subscription is None or subscription.address != address.lower():
            return None
        if subscription.expired():
            del subscriptions(state)[subscription.id]
            return None
        return subscription


# Changes ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MessageChange:
    """One change to one message, as sandbox/graph.py reports it."""

    address: str
    kind: str  # "created" | "updated" | "deleted" | "moved"
    folder: str  # where the message is now (for a deletion: where it was)
    immutable_id: str
    rest_id: str  # its REST id now (for a deletion: its last one)
    change_key: str
    left: str | None = None  # a move: the folder it left
    left_rest_id: str | None = None  # a move: its REST id there


def _as_seen_by(subscription: GraphSubscription, change: MessageChange) -> tuple[str, str] | None:
    """(changeType, REST id) of `change` for a subscription, or None if it watches elsewhere."""
    if change.kind == "moved":
        if subscription.folder is None:
            return "updated", change.rest_id
        if subscription.folder == change.folder:
            return "created", change.rest_id
        if subscription.folder == change.left:
            return "deleted", change.left_rest_id or change.rest_id
        return None
    if subscription.folder not in (None, change.folder):
        return None
    return change.kind, change.rest_id


def message_changed(state: SandboxState, change: MessageChange) -> None:
    """Queue a notification for every live subscription that hears of `change` (called with the lock held)."""
    with state.lock:
        deliveries = []
        for subscription in subscriptions(state).values():
            if subscription.address != change.address.lower() or subscription.paused or subscription.expired():
                continue
            seen = _as_seen_by(subscription, change)
            if seen is None or seen[0] not in subscription.change_types:
                continue
            change_type, rest_id = seen
            item_id = change.immutable_id if subscription.immutable_ids else rest_id
            owner = f"{account_oid(subscription.address)}@{TENANT_ID}"
            notification = {
                "id": secrets.token_urlsafe(10),
                "subscriptionId": subscription.id,
                "subscriptionExpirationDateTime": _notification_time(subscription.expiration),
                "clientState": subscription.client_state,
                "changeType": change_type,
                "resource": f"users/{owner}/messages/{item_id}",
                "tenantId": TENANT_ID,
                "resourceData": {
                    "@odata.type": "#Microsoft.Graph.Message",
                    "@odata.id": f"Users/{owner}/Messages/{item_id}",
                    "@odata.etag": f'W/"{change.change_key}"',
                    "id": item_id,
                },
            }
            deliveries.append(Delivery("graph", "notification", subscription.notification_url, notification))
        deliveries_queue(state, deliveries)


def lifecycle_send(state: SandboxState, subscription: GraphSubscription, event: str) -> None:
    """Queue a lifecycle notification to the lifecycleNotificationUrl (the notificationUrl if none) and apply
    it: subscriptionRemoved deletes the subscription, reauthorizationRequired pauses it."""
    with state.lock:
        item = {
            "subscriptionId": subscription.id,
            "subscriptionExpirationDateTime": _notification_time(subscription.expiration),
            "tenantId": TENANT_ID,
            "clientState": subscription.client_state,
            "lifecycleEvent": event,
        }
        url = subscription.lifecycle_url or subscription.notification_url
        deliveries_queue(state, [Delivery("graph", "lifecycle", url, item)])
        if event == "subscriptionRemoved":
            subscriptions(state).pop(subscription.id, None)
        elif event == "reauthorizationRequired":
            subscription.paused = True
