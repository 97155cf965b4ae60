"""A local Gemini: the generateContent method of the Generative Language API, as google-genai calls it.

POST /v1/models/<model>:generateContent and /v1beta/models/<model>:generateContent. The answer comes from
sandbox/reader.py (rules in sandbox/READER.md). With responseMimeType application/json and a response
schema, the reader's answer is conformed to the schema given, as the real model's output would be.
Faults, the request log and latency come from the shared sandbox state (see sandbox/app.py), and so does
`gemini_sentences`, which makes the answer quote a sentence of the test's choosing (`misquoted`), for a
task or for a change to an open item alike.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from typing import Any

from flask import Blueprint, Response, request

from sandbox.app import GOOGLE_STATUS, json_response, sandbox_state
from sandbox.reader import ReaderAnswer, read_prompt

blueprint = Blueprint("gemini", __name__)

_UNREGISTERED = (
    "Method doesn't allow unregistered callers (callers without established identity). "
    "Please use API Key or other form of API consumer identity to call this API."
)


def google_error(status: int, message: str) -> Response:
    return json_response(
        {"error": {"code": status, "message": message, "status": GOOGLE_STATUS.get(status, "UNKNOWN")}}, status
    )


@blueprint.post("/<any(v1, v1beta):version>/models/<path:target>")
def generate_content(version: str, target: str) -> Response:
    model, _, method = target.rpartition(":")
    model = model.removeprefix("models/")
    if method != "generateContent" or not model:
        return google_error(
            404,
            f"models/{model or target} is not found for API version {version}, or is not supported for "
            f"{method or 'this method'}. Call ListModels to see the list of available models and their supported "
            "methods.",
        )
    if not (request.headers.get("x-goog-api-key") or request.args.get("key")):
        return google_error(403, _UNREGISTERED)

    try:
        body = json.loads(request.get_data(as_text=True) or "null")
    except ValueError:
        return google_error(400, "Invalid JSON payload received. Unexpected token.")
    if not isinstance(body, dict):
        return google_error(400, "Invalid JSON payload received. Expected an object.")
    contents = body.get("contents")
    if not isinstance(contents, list) or not contents:
        return google_error(400, "* GenerateContentRequest.contents: contents is not specified\n")
    config = body.get("generationConfig") or body.get("generation_config") or {}
    if not isinstance(config, dict):
        return google_error(400, "Invalid JSON payload received. generationConfig must be an object.")

    state = sandbox_state()
    with state.lock:
        latency_ms = int(state.settings.get("gemini_latency_ms", 0))
        sentences = dict(state.settings.get("gemini_sentences") or {})
        response_id = f"sandbox-{state.next_id()}"
    if latency_ms:
        time.sleep(latency_ms / 1000)

    prompt = _texts(contents)
    instruction = body.get("systemInstruction") or body.get("system_instruction")
    instruction_text = _texts([instruction]) if isinstance(instruction, dict) else ""
    text = answer_text(prompt, config, sentences=sentences)
    prompt_tokens = math.ceil((len(prompt) + len(instruction_text)) / 4)
    output_tokens = math.ceil(len(text) / 4)
    return json_response(
        {
            "candidates": [
                {"content": {"parts": [{"text": text}], "role": "model"}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {
                "promptTokenCount": prompt_tokens,
                "candidatesTokenCount": output_tokens,
                "totalTokenCount": prompt_tokens + output_tokens,
            },
            "modelVersion": model,
            "responseId": response_id,
        }
    )


def answer_text(prompt: str, config: dict[str, Any], *, sentences: dict[str, str] | None = None) -> str:
    """The model's text for `prompt` under `config` (a generationConfig); `sentences` as in `misquoted`."""
    answer = misquoted(read_prompt(prompt), sentences or {})
    if answer.echo is not None:
        return answer.echo
    mime = config.get("responseMimeType") or config.get("response_mime_type")
    if mime != "application/json":
        return answer.as_text()
    schema = _first(config, "responseSchema", "response_schema", "responseJsonSchema", "response_json_schema")
    canonical = answer.as_dict()
    if isinstance(schema, dict):
        return json.dumps(conform(canonical, schema), ensure_ascii=False)
    return json.dumps(canonical, ensure_ascii=False)


def misquoted(answer: ReaderAnswer, sentences: dict[str, str]) -> ReaderAnswer:
    """The answer with each task whose sentence holds a key of `sentences` (ignoring case) quoting that key's
    value instead: a sentence the email may not hold (invented, or recalled from the quoted part the prompt
    left out), as a real model may answer, so that a test shows such a task is refused. The first key found
    wins."""
    if not sentences:
        return answer
    lowered = [(key.lower(), value) for key, value in sentences.items()]

    def quoted(sentence: str) -> str:
        return next((value for key, value in lowered if key in sentence.lower()), sentence)

    return dataclasses.replace(
        answer,
        emails=[
            (email_id, [dataclasses.replace(task, sentence=quoted(task.sentence)) for task in tasks])
            for email_id, tasks in answer.emails
        ],
        changes={
            email_id: [dataclasses.replace(change, sentence=quoted(change.sentence)) for change in changes]
            for email_id, changes in answer.changes.items()
        },
    )


def _first(mapping: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if mapping.get(key) is not None:
            return mapping[key]
    return None


def _texts(contents: list[Any]) -> str:
    parts = []
    for content in contents:
        if isinstance(content, dict):
            for part in content.get("parts") or []:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    parts.append(part["text"])
    return "\n".join(parts)


# Schema conformance -----------------------------------------------------------------------------------
# Handles the OpenAPI subset google-genai sends (UPPERCASE types, nullable, propertyOrdering) and plain
# JSON Schema (lowercase types, type lists with "null", $ref into $defs).


def conform(value: Any, schema: dict[str, Any]) -> Any:
    """`value` reshaped to `schema`: only the schema's properties, missing required ones filled, types coerced."""
    return _conform(value, schema, schema)


def _conform(value: Any, schema: dict[str, Any], root: dict[str, Any]) -> Any:
    schema = _resolve(schema, root)
    options = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(options, list) and options:
        return _conform(value, _pick_option(value, [_resolve(o, root) for o in options]), root)
    types = _types(schema)
    if value is None and ("null" in types or not types):
        return None
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return _conform_enum(value, enum, nullable="null" in types)
    kind = next((t for t in ("object", "array", "string", "integer", "number", "boolean") if t in types), None)
    if kind == "object":
        return _conform_object(value, schema, root)
    if kind == "array":
        items = value if isinstance(value, list) else [] if value is None else [value]
        item_schema = schema.get("items")
        if isinstance(item_schema, dict):
            items = [_conform(item, item_schema, root) for item in items]
        max_items = schema.get("maxItems", schema.get("max_items"))
        return items[: int(max_items)] if max_items is not None else items
    if kind == "string":
        if value is None:
            return ""
        return value if isinstance(value, str) else json.dumps(value) if isinstance(value, dict | list) else str(value)
    if kind in ("integer", "number"):
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = 0.0
        return int(number) if kind == "integer" else number
    if kind == "boolean":
        return bool(value)
    return value


def _conform_object(value: Any, schema: dict[str, Any], root: dict[str, Any]) -> Any:
    properties = schema.get("properties")
    source = value if isinstance(value, dict) else {}
    if not isinstance(properties, dict):
        return source  # a free-form object
    required = set(schema.get("required") or [])
    order = schema.get("propertyOrdering") or schema.get("property_ordering") or []
    names = [n for n in order if n in properties] + [n for n in properties if n not in order]
    result = {}
    for name in names:
        if name in source:
            result[name] = _conform(source[name], properties[name], root)
        elif name in required:
            result[name] = _conform(None, properties[name], root)
    return result


def _conform_enum(value: Any, enum: list[Any], *, nullable: bool) -> Any:
    if value in enum:
        return value
    lowered = {str(option).lower(): option for option in enum}
    if str(value).lower() in lowered:
        return lowered[str(value).lower()]
    return None if nullable else enum[0]


def _types(schema: dict[str, Any]) -> set[str]:
    declared = schema.get("type")
    names = declared if isinstance(declared, list) else [declared] if declared else []
    types = {str(name).lower() for name in names}
    if schema.get("nullable"):
        types.add("null")
    if not types and isinstance(schema.get("properties"), dict):
        types.add("object")
    if not types and isinstance(schema.get("items"), dict):
        types.add("array")
    return types


def _pick_option(value: Any, options: list[dict[str, Any]]) -> dict[str, Any]:
    wanted = {
        type(None): "null",
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        list: "array",
        dict: "object",
    }.get(type(value))
    for option in options:
        types = _types(option)
        if wanted in types or (wanted == "integer" and "number" in types):
            return option
    non_null = [o for o in options if _types(o) != {"null"}]
    return non_null[0] if non_null else options[0]


def _resolve(schema: Any, root: dict[str, Any]) -> dict[str, Any]:
    seen = 0
    while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and seen < 32:
        target: Any = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target.get(part) if isinstance(target, dict) else None
        schema = target
        seen += 1
    return schema if isinstance(schema, dict) else {}
