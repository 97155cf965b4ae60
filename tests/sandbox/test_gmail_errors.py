"""Gmail error bodies in Google's full current shape (code, message, errors, status, details), as
google-api-python-client sees them: HttpError.error_details is the `details` list when there is one."""

from __future__ import annotations

import json
from typing import Any

import pytest
from googleapiclient.errors import HttpError

from sandbox.client import SandboxClient, SandboxControlError
from tests.sandbox.test_gmail_sandbox import ADDRESS, gmail

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
RETRY_INFO = "type.googleapis.com/google.rpc.RetryInfo"


@pytest.fixture
def service(sandbox: SandboxClient) -> Any:
    sandbox.create_mailbox(ADDRESS)
    return gmail(sandbox.issue_token(ADDRESS)["access_token"])


def fail(service: Any) -> HttpError:
    with pytest.raises(HttpError) as caught:
        service.users().history().list(userId="me", startHistoryId="1").execute()
    return caught.value


def test_a_default_429_has_error_info_and_retry_info_matching_retry_after(sandbox: SandboxClient, service: Any) -> None:
    sandbox.fault("gmail", 429, route="/history", headers={"Retry-After": "7"})

    error = fail(service)

    assert error.status_code == 429 and error.resp["retry-after"] == "7"
    body = json.loads(error.content)["error"]
    assert body["code"] == 429 and body["status"] == "RESOURCE_EXHAUSTED"
    assert body["message"] == "Resource has been exhausted (e.g. check quota)."
    assert body["errors"] == [{"message": body["message"], "domain": "global", "reason": "rateLimitExceeded"}]
    info, retry, *rest = body["details"]
    assert (info["@type"], info["reason"], info["domain"]) == (ERROR_INFO, "RATE_LIMIT_EXCEEDED", "googleapis.com")
    assert info["metadata"]["service"] == "gmail.googleapis.com"
    assert {"quota_metric", "quota_limit", "consumer"} <= set(info["metadata"])
    assert retry == {"@type": RETRY_INFO, "retryDelay": "7s"}
    assert [d["@type"] for d in rest] == ["type.googleapis.com/google.rpc.Help"]
    assert error.error_details == body["details"]  # what the app's client sees first: not `errors`


@pytest.mark.parametrize(
    ("status", "reason", "domain", "info_reason", "quota_limit"),
    [
        (403, "userRateLimitExceeded", "usageLimits", "RATE_LIMIT_EXCEEDED", "QueriesPerMinutePerUser"),
        (403, "rateLimitExceeded", "usageLimits", "RATE_LIMIT_EXCEEDED", "QueriesPerMinutePerProject"),
        (403, "dailyLimitExceeded", "usageLimits", "RATE_LIMIT_EXCEEDED", "QueriesPerDay"),
        (429, "userRateLimitExceeded", "usageLimits", "RATE_LIMIT_EXCEEDED", "QueriesPerMinutePerUser"),
    ],
)
def test_a_fault_picks_the_quota_reason(
    sandbox: SandboxClient,
    service: Any,
    status: int,
    reason: str,
    domain: str,
    info_reason: str,
    quota_limit: str,
) -> None:
    sandbox.fault("gmail", status, reason=reason)

    body = json.loads(fail(service).content)["error"]

    assert body["code"] == status
    assert body["status"] == {403: "PERMISSION_DENIED", 429: "RESOURCE_EXHAUSTED"}[status]
    assert body["errors"][0]["reason"] == reason and body["errors"][0]["domain"] == domain
    assert body["message"].startswith("Quota exceeded for quota metric 'Queries'")
    info = body["details"][0]
    assert info["reason"] == info_reason and info["metadata"]["quota_limit"] == quota_limit
    assert any(d["@type"] == RETRY_INFO for d in body["details"]) == (status == 429)


def test_insufficient_permissions_has_the_captured_shape(sandbox: SandboxClient, service: Any) -> None:
    sandbox.fault("gmail", 403, reason="insufficientPermissions", route="/profile")

    with pytest.raises(HttpError) as caught:
        service.users().getProfile(userId="me").execute()

    assert json.loads(caught.value.content) == {
        "error": {
            "code": 403,
            "message": "Request had insufficient authentication scopes.",
            "errors": [{"message": "Insufficient Permission", "domain": "global", "reason": "insufficientPermissions"}],
            "status": "PERMISSION_DENIED",
            "details": [
                {
                    "@type": ERROR_INFO,
                    "reason": "ACCESS_TOKEN_SCOPE_INSUFFICIENT",
                    "domain": "googleapis.com",
                    "metadata": {
                        "service": "gmail.googleapis.com",
                        "method": "caribou.api.proto.MailboxService.GetProfile",
                    },
                }
            ],
        }
    }


@pytest.mark.parametrize(
    ("status", "reason", "google_status", "message"),
    [
        (500, None, "INTERNAL", "Backend Error"),
        (503, None, "UNAVAILABLE", "The service is currently unavailable."),
        (404, None, "NOT_FOUND", "Requested entity was not found."),
        (503, "backendError", "UNAVAILABLE", "The service is currently unavailable."),
    ],
)
def test_gmail_s_own_errors_carry_no_details(
    sandbox: SandboxClient, service: Any, status: int, reason: str | None, google_status: str, message: str
) -> None:
    spec = {"reason": reason} if reason else {}
    sandbox.fault("gmail", status, **spec)

    error = fail(service)

    body = json.loads(error.content)["error"]
    assert body == {
        "code": status,
        "message": message,
        "errors": [{"message": message, "domain": "global", "reason": "notFound" if status == 404 else "backendError"}],
        "status": google_status,
    }
    assert error.error_details == body["errors"]


def test_the_client_retries_a_403_user_rate_limit_as_it_does_at_google(sandbox: SandboxClient, service: Any) -> None:
    sandbox.fault("gmail", 403, reason="userRateLimitExceeded", route="/profile", times=1)
    request = service.users().getProfile(userId="me")
    request._sleep = lambda seconds: None  # the library's backoff, not ours

    assert request.execute(num_retries=1)["emailAddress"] == ADDRESS
    assert [r["status"] for r in sandbox.requests("gmail") if r["path"].endswith("/profile")] == [403, 200]


@pytest.mark.parametrize(
    ("spec", "text"),
    [
        ({"service": "gmail", "status": 429, "reason": "noSuchReason"}, "reason must be one of"),
        ({"service": "graph", "status": 429, "reason": "rateLimitExceeded"}, "only for gmail"),
        ({"service": "gmail", "status": 429, "reason": "rateLimitExceeded", "body": {}}, "not both"),
    ],
)
def test_a_fault_reason_is_checked(sandbox: SandboxClient, spec: dict[str, Any], text: str) -> None:
    with pytest.raises(SandboxControlError) as caught:
        sandbox.call("POST", "/faults", json=spec)
    assert caught.value.status == 400 and text in caught.value.body
