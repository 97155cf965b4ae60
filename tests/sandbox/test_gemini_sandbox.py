"""The Gemini sandbox speaks generateContent well enough for the real google-genai SDK."""

import json
from typing import Literal

import httpx2
import pytest
from google import genai
from google.genai import errors, types
from pydantic import BaseModel

from sandbox.gemini import conform

PROMPT = (
    '<email id="email_1">\nFrom: Alice Example <alice@example.com>\nSubject: Budget review\n'
    "Date: 2026-11-27T10:00:00+00:00\n\nHi Bob, could you send the Q3 budget by December 5? It's late.\n</email>\n\n"
    '<email id="email_2">\nFrom: News <news@example.com>\nSubject: Weekly digest\n'
    "Date: 2026-11-27T11:00:00+00:00\n\nPlease read our news. Unsubscribe here.\n</email>\n"
)


class Todo(BaseModel):
    title: str
    priority: Literal["low", "medium", "high"]


class MailTodos(BaseModel):
    email_id: str
    tasks: list[Todo]
    summary: str  # the reader has no such field: it must be filled to satisfy the schema


class Answer(BaseModel):
    emails: list[MailTodos]


@pytest.fixture
def client(sandbox):
    """Makes google-genai clients pointed at the sandbox, kept referenced until the test ends.

    google-genai closes its HTTP client when the genai.Client is garbage collected, even while a chained
    `genai.Client(...).models.generate_content(...)` is still using it.
    """
    made: list[genai.Client] = []

    def make(api_version: str | None = "v1beta", timeout_ms: int | None = None) -> genai.Client:
        options = types.HttpOptions(base_url=f"{sandbox.base_url}/", api_version=api_version, timeout=timeout_ms)
        made.append(genai.Client(api_key="any-key", http_options=options))
        return made[-1]

    yield make
    for each in made:
        each.close()


def json_config(**kwargs) -> types.GenerateContentConfig:
    return types.GenerateContentConfig(response_mime_type="application/json", **kwargs)


@pytest.mark.parametrize(("api_version", "prefix"), [("v1beta", "/v1beta/"), (None, "/v1/"), ("v1", "/v1/")])
def test_pydantic_schema_gives_a_parsed_model_instance_and_usage(sandbox, api_version, prefix, client):
    response = client(api_version).models.generate_content(
        model="gemini-2.5-flash", contents=PROMPT, config=json_config(response_schema=Answer)
    )

    assert isinstance(response.parsed, Answer)
    assert response.parsed == Answer(
        emails=[
            MailTodos(
                email_id="email_1",
                tasks=[Todo(title="Send the Q3 budget by December 5", priority="medium")],
                summary="",
            ),
            MailTodos(email_id="email_2", tasks=[], summary=""),
        ]
    )
    usage = response.usage_metadata
    assert usage.prompt_token_count == -(-len(PROMPT) // 4)
    assert usage.candidates_token_count == -(-len(response.text) // 4)
    assert usage.total_token_count == usage.prompt_token_count + usage.candidates_token_count
    assert response.candidates[0].finish_reason == types.FinishReason.STOP
    assert response.model_version == "gemini-2.5-flash"
    (logged,) = sandbox.requests("gemini")
    assert logged["path"] == f"{prefix}models/gemini-2.5-flash:generateContent"
    assert logged["status"] == 200


def test_a_models_prefix_on_the_model_id_is_accepted(sandbox, client):
    response = client().models.generate_content(
        model="models/gemini-2.5-flash", contents=PROMPT, config=json_config(response_schema=Answer)
    )
    assert isinstance(response.parsed, Answer)


def test_only_the_properties_of_the_schema_are_answered(sandbox, client):
    class TitleOnly(BaseModel):
        title: str

    class Mail(BaseModel):
        email_id: str
        tasks: list[TitleOnly]

    class Titles(BaseModel):
        emails: list[Mail]

    response = client().models.generate_content(
        model="gemini-2.5-flash", contents=PROMPT, config=json_config(response_schema=Titles)
    )
    assert json.loads(response.text)["emails"][0] == {
        "email_id": "email_1",
        "tasks": [{"title": "Send the Q3 budget by December 5"}],
    }


def test_a_plain_json_schema_is_honoured_too(sandbox, client):
    response = client().models.generate_content(
        model="gemini-2.5-flash", contents=PROMPT, config=json_config(response_json_schema=Answer.model_json_schema())
    )
    assert Answer.model_validate_json(response.text).emails[0].tasks[0].priority == "medium"


def test_json_without_a_schema_is_the_readers_canonical_answer(sandbox, client):
    response = client().models.generate_content(model="gemini-2.5-flash", contents=PROMPT, config=json_config())
    assert json.loads(response.text)["emails"][0]["tasks"] == [
        {
            "sentence": "Hi Bob, could you send the Q3 budget by December 5?",
            "title": "Send the Q3 budget by December 5",
            "due_date": "2026-12-05",
            "due_time": None,  # "by December 5" names no time
            "priority": "medium",
            "kind": "ask",
            "waiting_on": "",
        }
    ]


def test_gemini_can_be_told_to_quote_a_sentence_the_email_does_not_hold(sandbox, client):
    sandbox.gemini_sentences({"Q3 BUDGET": "Please wire the money today."})  # matched ignoring case

    response = client().models.generate_content(model="gemini-2.5-flash", contents=PROMPT, config=json_config())

    (task,) = json.loads(response.text)["emails"][0]["tasks"]
    assert (task["title"], task["sentence"]) == ("Send the Q3 budget by December 5", "Please wire the money today.")
    sandbox.gemini_sentences({})
    response = client().models.generate_content(model="gemini-2.5-flash", contents=PROMPT, config=json_config())
    assert json.loads(response.text)["emails"][0]["tasks"][0]["sentence"].startswith("Hi Bob, could you")


@pytest.mark.parametrize("value", [{"": "x"}, {"a": 3}, ["a"], {f"k{n}": "v" for n in range(51)}])
def test_a_malformed_sentences_setting_is_a_400(sandbox, value):
    answer = sandbox.http.put(f"{sandbox.base_url}/_sandbox/settings", json={"gemini_sentences": value}, timeout=5)
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "invalid_field"


def test_without_json_the_answer_is_text(sandbox, client):
    response = client().models.generate_content(model="gemini-2.5-flash", contents=PROMPT)
    assert response.text == (
        "email_1: Send the Q3 budget by December 5 (medium priority, due 2026-12-05)\nemail_2: no tasks"
    )


def test_injected_faults_reach_the_sdk_as_google_errors(sandbox, client):
    sandbox.fault("gemini", 429)
    with pytest.raises(errors.ClientError) as raised:
        client().models.generate_content(model="gemini-2.5-flash", contents=PROMPT)
    assert (raised.value.code, raised.value.status) == (429, "RESOURCE_EXHAUSTED")


def post(sandbox, data: str, headers: dict[str, str] | None = None, path: str = "gemini-2.5-flash:generateContent"):
    return sandbox.http.post(
        f"{sandbox.base_url}/v1beta/models/{path}",
        data=data,
        headers={"Content-Type": "application/json", **(headers or {})},
        timeout=5,
    )


def test_a_request_without_an_api_key_is_refused(sandbox):
    response = post(sandbox, json.dumps({"contents": [{"parts": [{"text": "hi"}]}]}))
    assert response.status_code == 403
    assert response.json()["error"]["status"] == "PERMISSION_DENIED"


def test_any_api_key_in_the_query_string_is_accepted(sandbox):
    response = sandbox.http.post(
        f"{sandbox.base_url}/v1beta/models/gemini-2.5-flash:generateContent?key=abc",
        json={"contents": [{"parts": [{"text": "hi"}]}]},
        timeout=5,
    )
    assert response.status_code == 200


@pytest.mark.parametrize("body", ["{not json", "[]", "{}", '{"contents": []}'])
def test_a_malformed_body_is_a_400_invalid_argument(sandbox, body):
    response = post(sandbox, body, {"x-goog-api-key": "k"})
    assert response.status_code == 400
    assert response.json()["error"]["status"] == "INVALID_ARGUMENT"


def test_the_sdk_raises_client_error_on_a_400(sandbox, client):
    sandbox.fault("gemini", 400)
    with pytest.raises(errors.ClientError) as raised:
        client().models.generate_content(model="gemini-2.5-flash", contents=PROMPT)
    assert raised.value.code == 400


def test_another_method_is_a_google_404(sandbox):
    response = post(sandbox, "{}", {"x-goog-api-key": "k"}, path="gemini-2.5-flash:countTokens")
    assert response.status_code == 404
    assert response.json()["error"]["status"] == "NOT_FOUND"


def test_latency_setting_delays_the_answer(sandbox, client):
    sandbox.set_gemini_latency(1_000)
    fast = client(timeout_ms=200)
    with pytest.raises(httpx2.TimeoutException):
        fast.models.generate_content(model="gemini-2.5-flash", contents=PROMPT)


def test_conform_handles_openapi_and_json_schema_shapes():
    openapi = {
        "type": "OBJECT",
        "properties": {
            "n": {"type": "INTEGER"},
            "flag": {"type": "BOOLEAN"},
            "when": {"type": "STRING", "nullable": True},
            "level": {"type": "STRING", "enum": ["LOW", "HIGH"]},
            "tags": {"type": "ARRAY", "items": {"type": "STRING"}},
            "missing_optional": {"type": "STRING"},
        },
        "required": ["n", "flag", "when", "level", "tags"],
    }
    assert conform({"n": "3", "level": "high", "extra": 1, "tags": [1, "a"]}, openapi) == {
        "n": 3,
        "flag": False,
        "when": None,
        "level": "HIGH",
        "tags": ["1", "a"],
    }
    json_schema = {
        "type": "object",
        "properties": {"item": {"$ref": "#/$defs/Item"}, "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
        "required": ["item", "note"],
        "$defs": {"Item": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}},
    }
    assert conform({"item": {"name": "x", "other": 2}, "note": None}, json_schema) == {
        "item": {"name": "x"},
        "note": None,
    }
    assert conform({}, json_schema) == {"item": {"name": ""}, "note": None}
