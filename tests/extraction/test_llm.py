"""GeminiClient against the Gemini sandbox: retries, typed errors, and answers checked by code."""

import json
from datetime import UTC, date, datetime
from typing import Any

import pytest
from django.conf import settings

from extraction.grounding import MAX_SENTENCE_CHARS
from extraction.llm import (
    ExtractedTask,
    GeminiClient,
    LLMBadOutput,
    LLMRejected,
    LLMUnavailable,
)
from integrations.providers.base import Email

SENT = datetime(2026, 11, 25, 9, 30, tzinfo=UTC)  # a Wednesday


def make_email(n: int, body: str, subject: str = "Hello") -> Email:
    return Email(
        provider="gmail",
        message_id=f"18c3fa9e0b{n:06d}",
        thread_id=f"thread-7d1e{n:04d}",
        sender=f"Sender {n} <sender{n}@example.com>",
        subject=subject,
        received_at=SENT,
        body_text=body,
        web_link=f"https://mail.google.com/mail/u/0/#all/18c3fa9e0b{n:06d}",
    )


def echo(payload: object) -> str:
    return f"SANDBOX-ECHO-JSON: {json.dumps(payload)}"


def answer(*ids: str, tasks: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"emails": [{"email_id": email_id, "tasks": tasks or []} for email_id in ids]}


def task(title: str = "Pay the invoice", due_date: str | None = None, priority: str = "medium") -> dict[str, Any]:
    return {"title": title, "due_date": due_date, "priority": priority}


def gemini_posts(sandbox) -> list[dict[str, Any]]:
    return [r for r in sandbox.requests("gemini") if r["method"] == "POST"]


def test_tasks_come_back_keyed_by_temporary_id_and_map_to_message_ids(sandbox):
    emails = [
        make_email(1, "Hi Sam,\n\nCould you send the Q3 budget by Friday? Thanks!", subject="Budget, urgent"),
        make_email(2, "Our newsletter. Please read it. Unsubscribe here.", subject="News"),
    ]
    result = GeminiClient().extract(emails)

    assert result.tasks == {
        "email_1": [
            ExtractedTask(
                title="Send the Q3 budget by Friday",
                due_date=date(2026, 11, 27),
                priority="high",
                sentence="Could you send the Q3 budget by Friday?",
            )
        ],
        "email_2": [],
    }
    assert result.by_message_id() == {
        emails[0].message_id: result.tasks["email_1"],
        emails[1].message_id: [],
    }
    assert result.calls == 1
    assert result.usage.prompt_tokens > 0
    assert result.usage.output_tokens > 0


def test_the_request_asks_for_json_in_the_answer_schema_on_v1beta(sandbox):
    GeminiClient().extract([make_email(1, "Please call me.")])

    (post,) = gemini_posts(sandbox)
    assert post["path"] == f"/v1beta/models/{settings.GEMINI_MODEL}:generateContent"
    body = json.loads(post["body"])
    config = body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    schema = config["responseSchema"]
    task_schema = schema["properties"]["emails"]["items"]["properties"]["tasks"]["items"]
    assert task_schema["properties"]["priority"]["enum"] == ["low", "medium", "high"]
    assert task_schema["properties"]["due_date"]["nullable"] is True
    # Each task quotes its sentence, bounded, written first: the model copies the evidence, then sums it up.
    assert next(iter(task_schema["properties"])) == "sentence" and "sentence" in task_schema["required"]
    sentence = task_schema["properties"]["sentence"]
    assert sentence.get("maxLength", sentence.get("max_length")) == MAX_SENTENCE_CHARS  # the SDK sends proto names
    assert "never follow" in body["systemInstruction"]["parts"][0]["text"]


def test_a_task_whose_sentence_is_not_in_its_email_is_left_out_and_counted(sandbox):
    sandbox.gemini_sentences({"the invoice": "Please pay the invoice today."})  # not what the email says
    emails = [make_email(1, "Could you pay the invoice by Friday?"), make_email(2, "Please call me tomorrow.")]

    result = GeminiClient().extract(emails)

    assert result.tasks["email_1"] == [] and result.ungrounded == {"email_1": 1}
    assert [task.title for task in result.tasks["email_2"]] == ["Call me tomorrow"]


def test_a_503_twice_then_200_is_retried_to_success(sandbox):
    sandbox.fault("gemini", 503, times=2)

    result = GeminiClient().extract([make_email(1, "Please call me tomorrow.")])

    assert result.tasks["email_1"] == [
        ExtractedTask("Call me tomorrow", date(2026, 11, 26), "medium", sentence="Please call me tomorrow.")
    ]
    assert result.calls == 3
    assert [r["status"] for r in gemini_posts(sandbox)] == [503, 503, 200]


def test_a_503_that_persists_is_unavailable_after_the_configured_attempts(sandbox):
    sandbox.fault("gemini", 503, times=None)

    with pytest.raises(LLMUnavailable) as raised:
        GeminiClient().extract([make_email(1, "Please call me.")])

    assert raised.value.code == "unavailable"
    assert raised.value.retryable
    assert raised.value.status == 503
    assert len(gemini_posts(sandbox)) == settings.GEMINI_MAX_ATTEMPTS
    assert raised.value.calls == settings.GEMINI_MAX_ATTEMPTS


def test_a_429_that_persists_is_rate_limited(sandbox):
    sandbox.fault("gemini", 429, times=None)

    with pytest.raises(LLMUnavailable) as raised:
        GeminiClient(max_attempts=2).extract([make_email(1, "Please call me.")])

    assert raised.value.code == "rate_limited"
    assert len(gemini_posts(sandbox)) == 2


def test_gemini_retry_after_is_honoured(sandbox):
    sandbox.fault("gemini", 503, headers={"Retry-After": "0.7"}, times=1)

    GeminiClient().extract([make_email(1, "Please call me.")])

    first, second = gemini_posts(sandbox)
    assert second["at"] - first["at"] >= 0.65  # the test settings' own backoff is 0.01 s


def test_gemini_retry_info_in_the_error_body_is_honoured(sandbox):
    body = {
        "error": {
            "code": 429,
            "message": "You exceeded your current quota. Please retry in 0.8s.",
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.8s"},
            ],
        }
    }
    sandbox.fault("gemini", 503, body=body, times=1)  # a 503 carries no Retry-After header here

    GeminiClient().extract([make_email(1, "Please call me.")])

    first, second = gemini_posts(sandbox)
    assert second["at"] - first["at"] >= 0.75


def test_a_retry_delay_too_long_to_wait_out_is_not_waited_out(sandbox, settings):
    settings.GEMINI_MAX_RETRY_WAIT_S = 5
    sandbox.fault("gemini", 429, headers={"Retry-After": "600"}, times=None)

    with pytest.raises(LLMUnavailable) as raised:
        GeminiClient().extract([make_email(1, "Please call me.")])

    assert raised.value.code == "rate_limited"
    assert len(gemini_posts(sandbox)) == 1


def test_a_slow_gemini_is_a_timeout(sandbox):
    sandbox.set_gemini_latency(1_500)

    with pytest.raises(LLMUnavailable) as raised:
        GeminiClient(timeout_s=0.2, max_attempts=1).extract([make_email(1, "Please call me.")])

    assert raised.value.code == "timeout"


def test_a_400_is_rejected_without_retrying(sandbox):
    sandbox.fault(
        "gemini",
        400,
        body={"error": {"code": 400, "message": "API key not valid.", "status": "INVALID_ARGUMENT"}},
        times=None,
    )

    with pytest.raises(LLMRejected) as raised:
        GeminiClient().extract([make_email(1, "Please call me.")])

    assert raised.value.code == "rejected"
    assert not raised.value.retryable
    assert "API key not valid" in raised.value.message
    assert len(gemini_posts(sandbox)) == 1


LONG_TITLE = "Review " + "x" * 4_993

BAD_OUTPUTS = {
    "unknown_id": echo(answer("email_1", "email_2", "email_3")),
    "duplicate_id": echo(answer("email_1", "email_1", "email_2")),
    "missing_id": echo(answer("email_1")),
    "too_many_tasks": echo(answer("email_1", "email_2", tasks=[task(f"Task {i}") for i in range(50)])),
    "title_too_long": echo(answer("email_1", "email_2", tasks=[task(LONG_TITLE)])),
    "not_json": "SANDBOX-ECHO-TEXT: Sure! Here are the tasks I found.",
    "bad_date": echo(answer("email_1", "email_2", tasks=[task(due_date="next Friday")])),
    "empty_title": echo(answer("email_1", "email_2", tasks=[task(title="   ")])),
    "bad_shape": echo({"emails": [{"email_id": "email_1", "tasks": "none"}]}),
}


@pytest.mark.parametrize("code", sorted(BAD_OUTPUTS))
def test_an_answer_that_cannot_be_trusted_is_bad_output_with_its_reason(sandbox, code):
    emails = [make_email(1, BAD_OUTPUTS[code]), make_email(2, "Please call me.")]

    with pytest.raises(LLMBadOutput) as raised:
        GeminiClient(max_body_chars=20_000).extract(emails)

    assert raised.value.code == code
    assert raised.value.retryable
    assert raised.value.message
    assert raised.value.calls == 1
    assert raised.value.usage.prompt_tokens > 0


def test_an_impossible_calendar_date_is_bad_output(sandbox):
    emails = [make_email(1, echo(answer("email_1", tasks=[task(due_date="2026-02-30")])))]

    with pytest.raises(LLMBadOutput) as raised:
        GeminiClient().extract(emails)

    assert raised.value.code == "bad_date"


@pytest.mark.parametrize(
    ("gemini_body", "code"),
    [
        ({"promptFeedback": {"blockReason": "SAFETY"}}, "blocked"),
        ({"candidates": [{"finishReason": "SAFETY", "index": 0}]}, "blocked"),
        (
            {
                "candidates": [
                    {
                        "content": {"parts": [{"text": '{"emails": [{"em'}], "role": "model"},
                        "finishReason": "MAX_TOKENS",
                    }
                ]
            },
            "truncated",
        ),
        ({"candidates": []}, "empty_answer"),
    ],
)
def test_a_blocked_or_cut_off_answer_is_bad_output(sandbox, gemini_body, code):
    sandbox.fault("gemini", 200, body=gemini_body)

    with pytest.raises(LLMBadOutput) as raised:
        GeminiClient().extract([make_email(1, "Please call me.")])

    assert raised.value.code == code


def test_limits_are_keywords(sandbox):
    emails = [make_email(1, "Please call Ann. Please call Bob. Please call Cy.")]

    with pytest.raises(LLMBadOutput) as raised:
        GeminiClient(max_tasks_per_email=2).extract(emails)
    assert raised.value.code == "too_many_tasks"

    with pytest.raises(LLMBadOutput) as raised:
        GeminiClient(max_title_chars=5).extract(emails)
    assert raised.value.code == "title_too_long"


def test_no_provider_id_or_link_appears_in_any_request_to_gemini(sandbox):
    sandbox.fault("gemini", 503, times=1)
    emails = [make_email(n, f"Please send report {n} by Friday.") for n in range(1, 11)]

    result = GeminiClient().extract(emails)

    assert sorted(result.tasks) == sorted(f"email_{n}" for n in range(1, 11))
    bodies = [r["body"] for r in gemini_posts(sandbox)]
    assert len(bodies) == 2
    for email in emails:
        for secret in (email.message_id, email.thread_id, email.web_link):
            assert all(secret not in body for body in bodies)
