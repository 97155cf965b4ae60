"""A small client for the sandbox control API, used by tests, benchmarks and the demo seeding."""

from __future__ import annotations

import base64
import ipaddress
import time
from collections.abc import Sequence
from datetime import datetime
from types import EllipsisType
from typing import Any

import requests


class SandboxClient:
    def __init__(self, base_url: str, *, timeout: float = 10) -> None:
        self.base_url = base_url.rstrip("/")
        self.http = requests.Session()
        self.http.trust_env = False  # loopback only; never a proxy
        self.timeout = timeout

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.http.request(method, f"{self.base_url}/_sandbox{path}", timeout=self.timeout, **kwargs)
        if response.status_code >= 400:
            raise SandboxControlError(response.status_code, response.text)
        return response.json()

    def reset(self) -> None:
        self.call("POST", "/reset")

    def fault(self, service: str, status: int, **spec: Any) -> dict[str, Any]:
        """Script a failure (spec: body, headers, delay_ms, times, route, match; for gmail also `reason`, e.g.
        "userRateLimitExceeded", which picks the Google error body)."""
        result: dict[str, Any] = self.call("POST", "/faults", json={"service": service, "status": status, **spec})
        return result

    def remove_fault(self, fault_id: int) -> None:
        self.call("DELETE", f"/faults/{fault_id}")

    def clear_faults(self, service: str | None = None) -> None:
        self.call("DELETE", "/faults", params={"service": service} if service else None)

    def requests(self, service: str | None = None) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.call("GET", "/requests", params={"service": service} if service else None)[
            "requests"
        ]
        return result

    def clear_requests(self) -> None:
        self.call("DELETE", "/requests")

    def set_gemini_latency(self, ms: int) -> None:
        self.call("PUT", "/settings", json={"gemini_latency_ms": ms})

    def gemini_sentences(self, sentences: dict[str, str]) -> None:
        """Gemini quotes `sentences[key]` as the sentence of each task whose own sentence holds `key` (any case),
        whether or not the email holds it; `{}` stops it."""
        self.call("PUT", "/settings", json={"gemini_sentences": sentences})

    def push_settings(
        self,
        *,
        gmail_rate_limit: bool | None = None,
        retry_delays_ms: list[int] | None = None,
        graph_validation_timeout_ms: int | None = None,
        gmail_watch_pushes_every_change: bool | None = None,
    ) -> dict[str, Any]:
        """Gmail's one push per second per user (on by default), the delays before each redelivery of a push
        not acknowledged (their number bounds the attempts), how long Graph waits for a validation answer,
        and whether a Gmail watch pushes for every change whatever its labelIds (off by default; on, as
        developers report of live Gmail, an INBOX watch also pushes for sent mail)."""
        changes = {
            "gmail_push_rate_limit": gmail_rate_limit,
            "push_retry_delays_ms": retry_delays_ms,
            "graph_validation_timeout_ms": graph_validation_timeout_ms,
            "gmail_watch_pushes_every_change": gmail_watch_pushes_every_change,
        }
        result: dict[str, Any] = self.call("PUT", "/settings", json={k: v for k, v in changes.items() if v is not None})
        return result

    # Gmail and Google OAuth -------------------------------------------------------------------------
    def create_mailbox(self, address: str, history_id_start: int | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"address": address}
        if history_id_start is not None:
            body["history_id_start"] = history_id_start
        result: dict[str, Any] = self.call("POST", "/gmail/mailboxes", json=body)
        return result

    def deliver(
        self,
        address: str,
        raw: str | bytes,
        *,
        labels: list[str] | None = None,
        internal_date: datetime | None = None,
    ) -> dict[str, Any]:
        """Deliver an RFC 822 message (labels default INBOX, UNREAD; internalDate default now, never the Date
        header); returns {"id", "threadId", "historyId"}."""
        body: dict[str, Any] = {"address": address}
        if isinstance(raw, bytes):
            body["raw_base64"] = base64.b64encode(raw).decode()
        else:
            body["raw"] = raw
        if labels is not None:
            body["labels"] = labels
        if internal_date is not None:
            body["internal_date"] = internal_date.isoformat()
        result: dict[str, Any] = self.call("POST", "/gmail/messages", json=body)
        return result

    def mailbox_messages(self, address: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.call("GET", "/gmail/messages", params={"address": address})["messages"]
        return result

    def modify_labels(
        self, address: str, message_id: str, *, add: list[str] | None = None, remove: list[str] | None = None
    ) -> dict[str, Any]:
        """Add/remove labels of one message (as messages.modify; one labelsAdded/labelsRemoved history record);
        returns {id, threadId, labelIds, historyId}."""
        body = {"address": address, "id": message_id, "add": add or [], "remove": remove or []}
        result: dict[str, Any] = self.call("POST", "/gmail/messages/labels", json=body)
        return result

    def archive(self, address: str, message_id: str) -> dict[str, Any]:
        """Remove INBOX, as Gmail's Archive does."""
        return self.modify_labels(address, message_id, remove=["INBOX"])

    def delete_gmail(self, address: str, ids: list[str]) -> int:
        """Delete for good (not to Trash): one messagesDeleted history record each."""
        return int(self.call("POST", "/gmail/messages/delete", json={"address": address, "ids": ids})["deleted"])

    def _send(
        self,
        service: str,
        address: str,
        to: list[str],
        body: str,
        cc: list[str] | None,
        subject: str | None,
        in_reply_to: str | None,
        deliver_to: list[str] | None,
        sent_at: datetime | None,
    ) -> dict[str, Any]:
        """What send_gmail and send_outlook ask of the sandbox: the same fields, each service's route."""
        payload = _drop_none(
            address=address,
            to=to,
            cc=cc,
            subject=subject,
            body=body,
            in_reply_to=in_reply_to,
            deliver_to=deliver_to,
            sent_at=sent_at.isoformat() if sent_at else None,
        )
        result: dict[str, Any] = self.call("POST", f"/{service}/messages/send", json=payload)
        return result

    def send_gmail(
        self,
        address: str,
        *,
        to: list[str],
        body: str,
        cc: list[str] | None = None,
        subject: str | None = None,
        in_reply_to: str | None = None,
        deliver_to: list[str] | None = None,
        sent_at: datetime | None = None,
    ) -> dict[str, Any]:
        """The owner of `address` sends mail: labelled SENT (only), a messagesAdded history record; sent to
        themselves (`address` in `to`, `cc` or `deliver_to`), that one message is labelled UNREAD, SENT and
        INBOX, as Gmail keeps it. With `in_reply_to` (a message id of this mailbox) it is a reply:
        In-Reply-To, References, "Re: " subject (unless `subject` is given) and that message's threadId.
        `deliver_to` names other sandbox mailboxes (Gmail and/or Outlook) that receive it as incoming mail.
        Returns {id, threadId, historyId, messageId (the Message-ID header), labelIds, delivered: [{address,
        provider, id, threadId | conversationId, ...}], the owner's own mailbox first when sent to oneself}."""
        return self._send("gmail", address, to, body, cc, subject, in_reply_to, deliver_to, sent_at)

    def deliver_gmail_reply(
        self,
        address: str,
        message_id: str,
        *,
        sender: str,
        body: str,
        to: list[str] | None = None,
        cc: list[str] | None = None,
        internal_date: datetime | None = None,
    ) -> dict[str, Any]:
        """`sender` (an address, or "Name <address>") replies to message `message_id` of `address`: it arrives
        in the inbox (INBOX, UNREAD) in that message's thread, To the owner unless `to` says otherwise.
        Returns {id, threadId, historyId, messageId}."""
        payload = _drop_none(
            address=address,
            id=message_id,
            body=body,
            to=to,
            cc=cc,
            received_at=internal_date.isoformat() if internal_date else None,
        )
        result: dict[str, Any] = self.call("POST", "/gmail/messages/reply", json={**payload, "from": sender})
        return result

    def expire_history(self, address: str) -> dict[str, Any]:
        result: dict[str, Any] = self.call("POST", "/gmail/expire-history", json={"address": address})
        return result

    def issue_token(self, address: str, *, expires_in: int = 3600, scope: str | None = None) -> dict[str, Any]:
        """Google tokens for `address` without the consent page: access_token, refresh_token, expiry, ..."""
        body: dict[str, Any] = {"address": address, "expires_in": expires_in}
        if scope is not None:
            body["scope"] = scope
        result: dict[str, Any] = self.call("POST", "/google/tokens", json=body)
        return result

    def expire_token(self, *, access_token: str | None = None, address: str | None = None) -> None:
        body = {k: v for k, v in {"access_token": access_token, "address": address}.items() if v}
        self.call("POST", "/google/tokens/expire", json=body)

    def revoke(
        self, *, access_token: str | None = None, refresh_token: str | None = None, address: str | None = None
    ) -> None:
        targets = {"access_token": access_token, "refresh_token": refresh_token, "address": address}
        self.call("POST", "/google/tokens/revoke", json={k: v for k, v in targets.items() if v})

    def gmail_watch(self, address: str) -> dict[str, Any] | None:
        """The mailbox's watch as the app set it ({topicName, labelIds, labelFilterBehavior, expiration,
        active}), or None."""
        result: dict[str, Any] | None = self.call("GET", "/gmail/watch", params={"address": address})["watch"]
        return result

    def expire_gmail_watch(self, address: str) -> dict[str, Any] | None:
        """Let the watch expire now: no more pushes until the app calls watch again. Returns the watch."""
        result: dict[str, Any] | None = self.call("POST", "/gmail/watch/expire", json={"address": address})["watch"]
        return result

    # Pub/Sub push ---------------------------------------------------------------------------------------
    @property
    def pubsub_certs_url(self) -> str:
        """Google's v1 certificates map of the key that signs push tokens (verify_token's certs_url)."""
        return f"{self.base_url}/oauth2/v1/certs"

    def pubsub_subscribe(
        self, topic: str, push_endpoint: str, service_account_email: str, audience: str | None = None
    ) -> dict[str, Any]:
        """A push subscription on `topic` (audience: the push endpoint unless given). Returns {name, topic,
        push_endpoint, audience, service_account_email}."""
        body: dict[str, Any] = {
            "topic": topic,
            "push_endpoint": push_endpoint,
            "service_account_email": service_account_email,
        }
        if audience is not None:
            body["audience"] = audience
        result: dict[str, Any] = self.call("POST", "/pubsub/subscriptions", json=body)
        return result

    def pubsub_subscriptions(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.call("GET", "/pubsub/subscriptions")["subscriptions"]
        return result

    def pubsub_unsubscribe_all(self) -> None:
        self.call("DELETE", "/pubsub/subscriptions")

    def pubsub_token(
        self, claims: dict[str, Any] | None = None, signer: str = "sandbox", kid: str | EllipsisType | None = ...
    ) -> str:
        """A push token with a real push's claims overridden by `claims` (must name "aud"; a None value drops
        the claim), signed by the sandbox key or, with signer="stranger", by another key under the same kid.
        `kid="..."` puts another key id in the header (one Google never published); `kid=None` leaves it out."""
        body: dict[str, Any] = {"claims": claims or {}, "signer": signer}
        if kid is not ...:
            body["kid"] = kid
        return str(self.call("POST", "/pubsub/token", json=body)["token"])

    # Push delivery (Pub/Sub and Graph) ------------------------------------------------------------------
    def webpush_subscribe(self, application_server_key: str | None = None) -> dict[str, Any]:
        """A browser's subscription to the sandbox's push service: {"id", "endpoint", "keys": {"p256dh", "auth"}}."""
        body = {"application_server_key": application_server_key}
        return dict(self.call("POST", "/webpush/subscriptions", json=body))

    def webpush_gone(self, subscription_id: str, status: int = 410) -> None:
        self.call("POST", f"/webpush/subscriptions/{subscription_id}/gone", json={"status": status})

    def webpush_messages(self) -> list[dict[str, Any]]:
        """What the push service delivered, decrypted, oldest first."""
        return list(self.call("GET", "/webpush/messages")["messages"])

    def push_behaviour(self, service: str, **spec: Any) -> dict[str, Any]:
        """Replace how "pubsub" or "graph" delivers: drop, drop_rate (0..1, seeded), duplicate (extra
        copies), delay_ms, jitter_ms (a random extra delay, which reorders), hold, seed. Left out: defaults."""
        result: dict[str, Any] = self.call("PUT", "/notifications/behaviour", json={"service": service, **spec})
        return result

    def push_release(self, service: str | None = None) -> int:
        """Send every held delivery now, newest first. Returns how many."""
        return int(
            self.call("POST", "/notifications/release", json={"service": service} if service else {})["released"]
        )

    def notifications(self, service: str | None = None) -> list[dict[str, Any]]:
        """The delivery log: {service, kind, url, body, status, error, attempt, at, dropped, gave_up} for every
        attempt (and every delivery dropped unsent)."""
        params = {"service": service} if service else None
        result: list[dict[str, Any]] = self.call("GET", "/notifications", params=params)["notifications"]
        return result

    def clear_notifications(self) -> None:
        self.call("DELETE", "/notifications")

    def notifications_pending(self) -> dict[str, int]:
        """{pending: queued, waiting for a retry or on the wire; held: kept until release}."""
        result: dict[str, int] = self.call("GET", "/notifications/pending")
        return result

    def wait_notifications_idle(self, timeout: float = 10.0) -> None:
        """Wait until no delivery is queued, waiting for a retry or on the wire (held ones do not count)."""
        deadline = time.monotonic() + timeout
        while self.notifications_pending()["pending"]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"push deliveries still pending after {timeout} s")
            time.sleep(0.02)

    # Outlook (Graph) and Microsoft identity ---------------------------------------------------------
    def create_outlook_mailbox(self, address: str, *, display_name: str | None = None) -> dict[str, Any]:
        """{address, id, displayName, inboxId}."""
        body: dict[str, Any] = {"address": address}
        if display_name is not None:
            body["display_name"] = display_name
        result: dict[str, Any] = self.call("POST", "/graph/mailboxes", json=body)
        return result

    def deliver_outlook(
        self,
        address: str,
        raw: str | bytes | None = None,
        *,
        subject: str | None = None,
        sender: str | None = None,
        body: str | None = None,
        html: str | None = None,
        received_at: datetime | None = None,
        is_read: bool = False,
        folder: str | None = None,
        inference: str | None = None,
    ) -> dict[str, Any]:
        """Deliver an RFC 822 message, or a simple one from fields (`sender` is the From value), into the inbox
        or `folder`; receivedDateTime is `received_at`, else now (never the Date header); `inference` is its
        inferenceClassification ("focused", the default, or "other").
        Returns {id (immutable), rest_id, conversationId, internetMessageId, receivedDateTime, folder}."""
        payload: dict[str, Any] = {"address": address, "is_read": is_read}
        if inference is not None:
            payload["inference_classification"] = inference
        if folder is not None:
            payload["folder"] = folder
        if isinstance(raw, bytes):
            payload["raw_base64"] = base64.b64encode(raw).decode()
        elif raw is not None:
            payload["raw"] = raw
        fields = {"subject": subject, "from": sender, "body": body, "html": html}
        payload.update({k: v for k, v in fields.items() if v is not None})
        if received_at is not None:
            payload["received_at"] = received_at.isoformat()
        result: dict[str, Any] = self.call("POST", "/graph/messages", json=payload)
        return result

    def send_outlook(
        self,
        address: str,
        *,
        to: list[str],
        body: str,
        cc: list[str] | None = None,
        subject: str | None = None,
        in_reply_to: str | None = None,
        deliver_to: list[str] | None = None,
        sent_at: datetime | None = None,
    ) -> dict[str, Any]:
        """The owner of `address` sends mail: it lands, read, in `sentitems` (its own delta; From the owner);
        sent to themselves, a second item arrives, unread, in their inbox (as Exchange keeps it; first in
        `delivered`). With `in_reply_to` (either id form of a message of this mailbox) it is a reply in that
        message's conversation (In-Reply-To, References, "Re: " subject unless `subject` is given).
        `deliver_to` as for send_gmail. Returns the delivery answer ({id (immutable), rest_id, conversationId,
        internetMessageId, receivedDateTime, folder}) plus delivered."""
        return self._send("graph", address, to, body, cc, subject, in_reply_to, deliver_to, sent_at)

    def deliver_outlook_reply(
        self,
        address: str,
        message_id: str,
        *,
        sender: str,
        body: str,
        to: list[str] | None = None,
        cc: list[str] | None = None,
        received_at: datetime | None = None,
    ) -> dict[str, Any]:
        """`sender` replies to message `message_id` (either id form) of `address`: it arrives in the inbox,
        unread, in that message's conversation, To the owner unless `to` says otherwise. Returns the delivery
        answer, as deliver_outlook's."""
        payload = _drop_none(
            address=address,
            id=message_id,
            body=body,
            to=to,
            cc=cc,
            received_at=received_at.isoformat() if received_at else None,
        )
        result: dict[str, Any] = self.call("POST", "/graph/messages/reply", json={**payload, "from": sender})
        return result

    def outlook_messages(self, address: str) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.call("GET", "/graph/messages", params={"address": address})["messages"]
        return result

    def mark_outlook_read(
        self, address: str, ids: list[str], *, is_read: bool | None = None, flag: str | None = None
    ) -> int:
        """Set isRead (true when neither is given) and/or flag ("notFlagged", "flagged", "complete")."""
        payload: dict[str, Any] = {"address": address, "ids": ids}
        if is_read is not None:
            payload["is_read"] = is_read
        if flag is not None:
            payload["flag"] = flag
        return int(self.call("POST", "/graph/messages/read", json=payload)["updated"])

    def delete_outlook(self, address: str, ids: list[str]) -> int:
        """Delete for good: the next delta of their folder lists them as @removed (reason deleted)."""
        return int(self.call("POST", "/graph/messages/delete", json={"address": address, "ids": ids})["deleted"])

    def move_outlook(
        self, address: str, ids: list[str], folder: str, *, removed_reason: str | None = None
    ) -> list[dict[str, Any]]:
        """Move to `folder` ("inbox", "archive", "junkemail", "deleteditems" or any name): @removed in the next
        delta of the folder left (`removed_reason`: "deleted", the default, or "changed"), a new item in the
        next delta of the folder entered. Returns each message as the delivery does, with its new rest_id."""
        payload: dict[str, Any] = {"address": address, "ids": ids, "folder": folder}
        if removed_reason is not None:
            payload["removed_reason"] = removed_reason
        result: list[dict[str, Any]] = self.call("POST", "/graph/messages/move", json=payload)["moved"]
        return result

    def graph_subscriptions(self) -> list[dict[str, Any]]:
        """Every Graph subscription of every mailbox (as Graph shows it, plus address, expired, paused)."""
        result: list[dict[str, Any]] = self.call("GET", "/graph/subscriptions")["subscriptions"]
        return result

    def graph_lifecycle(self, subscription_id: str, event: str) -> dict[str, Any]:
        """Send a lifecycle event ("reauthorizationRequired": pauses notifications until PATCH or
        reauthorize; "subscriptionRemoved": deletes the subscription; "missed")."""
        result: dict[str, Any] = self.call(
            "POST", f"/graph/subscriptions/{subscription_id}/lifecycle", json={"event": event}
        )
        return result

    def expire_outlook_delta(self, address: str) -> dict[str, Any]:
        """Every earlier Graph skip/delta token now answers 410 SyncStateNotFound."""
        result: dict[str, Any] = self.call("POST", "/graph/expire-delta", json={"address": address})
        return result

    def issue_microsoft_token(
        self, address: str, *, expires_in: int = 3600, scope: str | None = None
    ) -> dict[str, Any]:
        """AAD's token response for `address` without the consent page (access_token, refresh_token, id_token,
        client_info, expires_in, ...) plus expiry and address."""
        payload: dict[str, Any] = {"address": address, "expires_in": expires_in}
        if scope is not None:
            payload["scope"] = scope
        result: dict[str, Any] = self.call("POST", "/microsoft/tokens", json=payload)
        return result

    def expire_microsoft_token(self, *, access_token: str | None = None, address: str | None = None) -> int:
        payload = {k: v for k, v in {"access_token": access_token, "address": address}.items() if v}
        return int(self.call("POST", "/microsoft/tokens/expire", json=payload)["expired"])

    def revoke_microsoft(
        self, *, refresh_token: str | None = None, address: str | None = None, access_token: str | None = None
    ) -> int:
        """Revoke one refresh token, every refresh token of an address, or one access token."""
        targets = {"refresh_token": refresh_token, "address": address, "access_token": access_token}
        payload = {k: v for k, v in targets.items() if v}
        return int(self.call("POST", "/microsoft/tokens/revoke", json=payload)["revoked"])

    # DNS and DKIM (inbound mail checks) ------------------------------------------------------------------
    def dns_set(self, name: str, rtype: str, values: list[str]) -> None:
        """Replace the records of `name` and `rtype` (TXT, A, AAAA, MX as "10 mx.example.org"); [] removes them."""
        self.call("PUT", "/dns/records", json={"name": name, "type": rtype, "values": values})

    def dns_records(self) -> list[dict[str, Any]]:
        """Every record set: [{name, type, values}], by name."""
        result: list[dict[str, Any]] = self.call("GET", "/dns/records")["records"]
        return result

    def dns_clear(self) -> None:
        self.call("DELETE", "/dns/records")

    def dkim_sign(self, raw: bytes, domain: str, selector: str = "sandbox") -> bytes:
        """`raw` signed by the sandbox's key of (domain, selector), whose record its DNS publishes."""
        body = {"raw_base64": base64.b64encode(raw).decode(), "domain": domain, "selector": selector}
        return base64.b64decode(self.call("POST", "/dkim/sign", json=body)["raw_base64"])

    def mail_domain(
        self, domain: str, *, spf_ips: Sequence[str] = ("127.0.0.1",), dmarc: str = "v=DMARC1; p=reject"
    ) -> None:
        """Publish `domain`'s SPF record (mail from `spf_ips` only) and its DMARC record."""
        mechanisms = " ".join(f"ip{ipaddress.ip_address(ip).version}:{ip}" for ip in spf_ips)
        self.dns_set(domain, "TXT", [f"v=spf1 {mechanisms} -all"])
        self.dns_set(f"_dmarc.{domain}", "TXT", [dmarc])


def _drop_none(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


class SandboxControlError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"sandbox control API answered {status}: {body}")
        self.status = status
        self.body = body
