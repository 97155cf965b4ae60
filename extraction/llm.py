"""The only module that talks to Gemini.

`GeminiClient.extract(emails)` sends one batch (at most ten emails, named email_1 … email_N in the prompt),
asks for JSON in the shape of `prompt.ExtractionAnswer`, and checks the answer by code: the ids must be
exactly the batch's, titles and task counts are bounded, dates must parse. Anything else raises an
`LLMError`; the caller sees plain objects and these errors, never google-genai's types. A task whose sentence
is not in its email (`extraction.grounding`) is left out and counted (`LLMResult.ungrounded`): the rest of the
answer stands, and the email is handled. What the answer says of the open items the prompt gave is checked the
same way (`extraction.items`): a change that names an id not given to its email or a sentence not in it is
refused and counted (`LLMResult.refused`). In mail the reader sent there are no asks of the reader: a task of
kind ask there is left out, and a waiting item waits on a recipient of the email or on no one named.

Transient failures (429, 5xx, timeouts) are retried by google-genai itself (HttpRetryOptions); what is
still failing after that raises `LLMUnavailable`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import random
import re
import ssl
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from datetime import time as day_time
from typing import Any, Literal

import httpx2
from django.conf import settings
from google import genai
from google.genai import errors, types
from pydantic import ValidationError

from config.metrics import GEMINI_TOKENS, gemini_call_observed
from config.trust import certificate_missing
from extraction.crashpoints import crash_point
from extraction.grounding import sentence_found
from extraction.items import ItemChange, item_changes, recipient_named
from extraction.prompt import (
    PROMPT_VERSION,
    SYSTEM_INSTRUCTION,
    ExtractionAnswer,
    OpenItem,
    Prompt,
    build_prompt,
)
from extraction.quota import QuotaExhausted, gemini_quota_pause, gemini_quota_take
from integrations.mail.text import without_format_characters
from integrations.providers.base import Email
from tasks.services import due_date_in_range

logger = logging.getLogger(__name__)

Priority = Literal["low", "medium", "high"]

RETRY_STATUS_CODES = (408, 429, 500, 502, 503, 504)
# The REST version we speak, pinned: google-genai 3.x sends v1 by default where 1.x/2.x sent v1beta, so an
# SDK upgrade would otherwise change the API we call. v1beta is the one Google's generateContent REST
# reference uses, and where generationConfig fields such as responseSchema/responseJsonSchema land first.
API_VERSION = "v1beta"

_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_HH_MM = re.compile(r"(?:[01]\d|2[0-3]):[0-5]\d")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)s")  # a protobuf Duration in JSON
_BLOCKING_FINISH_REASONS = {
    types.FinishReason.SAFETY,
    types.FinishReason.RECITATION,
    types.FinishReason.BLOCKLIST,
    types.FinishReason.PROHIBITED_CONTENT,
    types.FinishReason.SPII,
    types.FinishReason.IMAGE_SAFETY,
    types.FinishReason.MODEL_ARMOR,
}


@dataclass(frozen=True)
class LLMUsage:
    prompt_tokens: int = 0
    output_tokens: int = 0  # the answer's tokens plus any "thinking" tokens: both are billed as output


# Errors -----------------------------------------------------------------------------------------------
class LLMError(Exception):
    """A Gemini call did not give usable tasks. `message` is written for the person reading the run record."""

    code = "llm_error"
    retryable = False

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        # Set by GeminiClient.extract: the requests made (retries included) and the tokens an answer cost.
        self.calls = 0
        self.usage = LLMUsage()

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class LLMUnavailable(LLMError):
    """Gemini is rate limiting, failing or too slow, still after the client's retries. Try again later.

    Codes: "rate_limited" (429), "unavailable" (5xx, connection), "timeout".
    """

    code = "unavailable"
    retryable = True

    def __init__(
        self, message: str, *, code: str | None = None, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message, code=code)
        self.status = status
        self.retry_after = retry_after  # seconds the server asked us to wait, when it named a time


class LLMRejected(LLMError):
    """Gemini refused the request itself (a 4xx other than 408/429): the key, the model or the request is
    wrong. Retrying the same request will not help. Code: "rejected"."""

    code = "rejected"

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


class LLMBadOutput(LLMError):
    """Gemini answered, but the answer cannot be trusted. The code names the reason:

    "blocked", "truncated", "empty_answer", "not_json", "bad_shape", "unknown_id", "duplicate_id",
    "missing_id", "too_many_tasks", "empty_title", "title_too_long", "bad_date".

    Retryable: the model may answer differently next time, and splitting the batch isolates a poison email.
    """

    code = "bad_output"
    retryable = True


# Results ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ExtractedTask:
    title: str
    due_date: date | None
    priority: Priority
    sentence: str = ""  # the email's own words the task comes from, as found in the text the prompt carried
    kind: Literal["ask", "commitment", "waiting"] = "ask"
    waiting_on: str = ""  # a waiting item's To or Cc recipient of its email ("" when none was named)
    due_time: day_time | None = None  # the time the email states for it, with its due date (in the email's words)


@dataclass(frozen=True)
class LLMResult:
    """The validated answer for one batch. Every temporary id of the batch is a key of `tasks`."""

    tasks: dict[str, list[ExtractedTask]]  # temporary id (email_1 …) -> its tasks, possibly none
    emails: dict[str, Email]  # temporary id -> the email it stood for
    usage: LLMUsage = field(default_factory=LLMUsage)
    calls: int = 1  # HTTP requests made, retries included
    cut: int = 0  # emails of the batch whose sender, subject or body was cut to fit the prompt
    redacted: dict[str, int] = field(default_factory=dict)  # secrets kept out of the prompt, by kind
    # temporary id -> tasks Gemini gave whose sentence is not in the email: left out of `tasks`
    ungrounded: dict[str, int] = field(default_factory=dict)
    # temporary id -> what the email does to the open items it was given, checked (extraction.items)
    changes: dict[str, list[ItemChange]] = field(default_factory=dict)
    refused: dict[str, int] = field(default_factory=dict)  # temporary id -> item changes refused
    model: str = ""
    prompt_version: str = PROMPT_VERSION

    def by_message_id(self) -> dict[str, list[ExtractedTask]]:
        """The tasks keyed by provider message id."""
        return {self.emails[temp].message_id: tasks for temp, tasks in self.tasks.items()}


_PROBE_EMAIL = Email(
    provider="probe",
    message_id="probe",
    thread_id="probe",
    sender="Tasklift <probe@tasklift.invalid>",
    subject="Status",
    received_at=datetime(2026, 1, 1, tzinfo=UTC),
    body_text="Hello, this is a short status note. Everything is fine and nothing needs doing.",
    web_link="",
)


# Client -----------------------------------------------------------------------------------------------
OUTPUT_TOKENS_ESTIMATE = 512  # counted against the shared tokens-per-minute before the answer is known
_shared: dict[tuple[Any, ...], GeminiClient] = {}
_shared_lock = threading.Lock()


def gemini_client() -> GeminiClient:
    """The process's GeminiClient for the current settings: made once per worker process (making one loads
    the CA bundle and builds HTTP clients: most of what an idle run used to cost), made again only when a
    setting it reads changes. Safe to share between threads (a run's parallel calls)."""
    key = (
        settings.GEMINI_API_KEY,
        settings.GEMINI_BASE_URL,
        settings.GEMINI_MODEL,
        settings.GEMINI_TIMEOUT_S,
        settings.GEMINI_MAX_ATTEMPTS,
        settings.GEMINI_RETRY_INITIAL_DELAY_S,
        settings.EXTRACTION_MAX_BODY_CHARS,
        settings.EXTRACTION_MAX_TASKS_PER_EMAIL,
        settings.EXTRACTION_MAX_TITLE_CHARS,
        settings.GEMINI_CA_BUNDLE,
        _file_version(settings.GEMINI_CA_BUNDLE),  # the sandbox wrote a new certificate: trust that one
    )
    with _shared_lock:
        client = _shared.get(key)
        if client is None:
            _shared.clear()  # settings changed (tests): the old client is not used again
            client = _shared[key] = GeminiClient()
        return client


def _file_version(path: str) -> tuple[int, int, int] | None:
    try:
        stat = os.stat(path) if path else None
    except OSError:
        return None
    # The sandbox writes a new file and renames it over the old one: a new inode, whatever the clock says.
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size) if stat else None


class GeminiClient:
    """Gemini configured from settings (GEMINI_*); keyword arguments override single settings."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        model: str | None = None,
        timeout_s: float | None = None,
        max_attempts: int | None = None,
        retry_initial_delay_s: float | None = None,
        max_body_chars: int | None = None,
        max_tasks_per_email: int | None = None,
        max_title_chars: int | None = None,
    ) -> None:
        self.model: str = model or settings.GEMINI_MODEL
        self.max_body_chars: int = max_body_chars or settings.EXTRACTION_MAX_BODY_CHARS
        self.max_tasks_per_email: int = max_tasks_per_email or settings.EXTRACTION_MAX_TASKS_PER_EMAIL
        self.max_title_chars: int = max_title_chars or settings.EXTRACTION_MAX_TITLE_CHARS
        self.max_attempts: int = max_attempts or settings.GEMINI_MAX_ATTEMPTS
        timeout = timeout_s if timeout_s is not None else settings.GEMINI_TIMEOUT_S
        initial_delay = (
            retry_initial_delay_s if retry_initial_delay_s is not None else settings.GEMINI_RETRY_INITIAL_DELAY_S
        )
        self.retry_initial_delay_s: float = initial_delay
        self._attempts = threading.local()
        client_args: dict[str, Any] = {"event_hooks": {"request": [self._count_attempt], "response": [_answered]}}
        # The sandbox's certificate in a demo (GEMINI_CA_BUNDLE), read here, once: gemini_client() makes a new
        # client when the file changes. Until the file is there, each call says what is missing.
        self._ca_missing = certificate_missing(settings.GEMINI_CA_BUNDLE, service="Gemini")
        if settings.GEMINI_CA_BUNDLE and not self._ca_missing:
            client_args["verify"] = ssl.create_default_context(cafile=settings.GEMINI_CA_BUNDLE)
        self._client = genai.Client(
            api_key=api_key or settings.GEMINI_API_KEY,
            http_options=types.HttpOptions(
                base_url=(base_url if base_url is not None else settings.GEMINI_BASE_URL) or None,
                api_version=API_VERSION,
                timeout=int(timeout * 1000),  # milliseconds
                # Retries are ours (`_generate`): the SDK's ignore Retry-After and RetryInfo.
                retry_options=types.HttpRetryOptions(attempts=1),
                client_args=client_args,
            ),
        )

    def prepare(
        self,
        emails: Sequence[Email],
        *,
        reader: Sequence[str] | None = None,
        open_items: Sequence[Sequence[OpenItem]] = (),
    ) -> Prompt:
        """The prompt of a batch (cleaned, cut, secrets replaced), to build ahead of its call. `reader`: the
        person's own addresses, so that an ask of someone else on To or Cc is not theirs (None: no
        recipients are sent, see build_prompt). `open_items`: per email, the open items of its conversation."""
        return build_prompt(emails, max_body_chars=self.max_body_chars, reader=reader, open_items=open_items)

    def extract(self, emails: Sequence[Email], *, prompt: Prompt | None = None) -> LLMResult:
        """The tasks each email of one batch (1 to 10 emails) asks of its reader, checked by code. `prompt`:
        the batch's prompt from `prepare`, if it was built already.

        Raises LLMUnavailable, LLMRejected or LLMBadOutput; `error.calls` and `error.usage` say what the
        failed attempt cost.
        """
        if self._ca_missing:
            raise LLMUnavailable(self._ca_missing, code="certificate_missing")
        prompt = prompt or self.prepare(emails)
        self._attempts.count = 0
        try:
            return dataclasses.replace(self._extract(prompt), cut=prompt.cut, redacted=prompt.redacted)
        except LLMError as error:
            error.calls = self._attempts.count
            raise

    def probe(self) -> LLMResult:
        """Read one harmless email of our own: whether Gemini answers at all now (an outage), as opposed
        to failing on one email's content (a poison). Raises like `extract`."""
        return self.extract([_PROBE_EMAIL])

    def _generate(self, contents: str) -> types.GenerateContentResponse:
        """One generateContent, retried on 408/429/5xx and transport errors. The wait before a retry is the
        server's when it names one (Retry-After, or RetryInfo's retryDelay in the error body), else an
        exponential backoff with jitter; a wait longer than GEMINI_MAX_RETRY_WAIT_S is not waited out here:
        the error goes to the caller, with the wait, so the run ends and the next one comes after it."""
        estimate = (len(SYSTEM_INSTRUCTION) + len(contents)) // 4 + OUTPUT_TOKENS_ESTIMATE
        for attempt in range(1, self.max_attempts + 1):
            try:
                gemini_quota_take(model=self.model, tokens=estimate)
            except QuotaExhausted as exhausted:
                raise LLMUnavailable(
                    f"Tasklift's share of Gemini is used up for {exhausted.wait:.0f} s. Extraction will try again.",
                    code="rate_limited",
                    status=429,
                    retry_after=exhausted.wait,
                ) from exhausted
            started = time.monotonic()
            try:
                response = self._call(contents)
                gemini_call_observed(started, status=200)
                return response
            except (errors.APIError, httpx2.TimeoutException, httpx2.RequestError) as exc:
                status = exc.code if isinstance(exc, errors.APIError) else None
                gemini_call_observed(started, status=status, timed_out=isinstance(exc, httpx2.TimeoutException))
                if status is not None and status not in RETRY_STATUS_CODES:
                    raise
                asked = server_retry_delay(exc) if isinstance(exc, errors.APIError) else None
                if status == 429 and asked:
                    gemini_quota_pause(model=self.model, seconds=asked)  # every worker slows down, not just this one
                if attempt == self.max_attempts or (asked or 0) > settings.GEMINI_MAX_RETRY_WAIT_S:
                    raise
                backoff = self.retry_initial_delay_s * 2 ** (attempt - 1)
                wait = asked if asked is not None else backoff + random.uniform(0, self.retry_initial_delay_s)
                logger.info("gemini attempt %d failed (%s); retrying in %.2f s", attempt, status or "transport", wait)
                time.sleep(wait)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _call(self, contents: str) -> types.GenerateContentResponse:
        return self._client.models.generate_content(
            model=self.model,
            contents=contents,
            config=types.GenerateContentConfig(
                system_instruction=SYSTEM_INSTRUCTION,
                response_mime_type="application/json",
                response_schema=ExtractionAnswer,
                temperature=0.0,
                # No tools are declared; this only silences the SDK's "AFC is enabled" log line.
                automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
            ),
        )

    def _extract(self, prompt: Prompt) -> LLMResult:
        mapping = prompt.mapping
        try:
            response = self._generate(prompt.contents)
        except errors.APIError as exc:
            raise _api_error(exc, attempts=self._attempts.count) from exc
        except httpx2.TimeoutException as exc:
            raise LLMUnavailable(
                f"Gemini did not answer in time ({self._attempts.count} attempts). Extraction will try again later.",
                code="timeout",
            ) from exc
        except httpx2.RequestError as exc:
            raise LLMUnavailable(
                f"Gemini could not be reached ({type(exc).__name__}, {self._attempts.count} attempts). "
                "Extraction will try again later.",
                code="unavailable",
            ) from exc

        calls = self._attempts.count
        usage = _usage(response)
        GEMINI_TOKENS.labels("prompt").inc(usage.prompt_tokens)
        GEMINI_TOKENS.labels("output").inc(usage.output_tokens)
        logger.info(
            "gemini answered",
            extra={"model": self.model, "emails": len(mapping), "calls": calls, "prompt_tokens": usage.prompt_tokens},
        )
        try:
            answer = self._answer(response)
            tasks = self._validate(answer, mapping)
        except LLMBadOutput as error:
            error.usage = usage
            raise
        grounded, ungrounded = _grounded(tasks, prompt.texts)
        changes, refused = item_changes(answer, prompt)
        return LLMResult(
            tasks=_by_direction(grounded, mapping),
            emails=mapping,
            usage=usage,
            calls=calls,
            model=self.model,
            ungrounded=ungrounded,
            changes=changes,
            refused=refused,
        )

    # Validation -------------------------------------------------------------------------------------
    @staticmethod
    def _answer(response: types.GenerateContentResponse) -> ExtractionAnswer:
        feedback = response.prompt_feedback
        if feedback is not None and feedback.block_reason is not None:
            raise LLMBadOutput(
                f"Gemini refused to read this batch (blocked: {feedback.block_reason.value}).", code="blocked"
            )
        candidate = response.candidates[0] if response.candidates else None
        if candidate is None:
            raise LLMBadOutput("Gemini gave no answer.", code="empty_answer")
        if candidate.finish_reason in _BLOCKING_FINISH_REASONS:
            reason = candidate.finish_reason.value if candidate.finish_reason else "?"
            raise LLMBadOutput(f"Gemini stopped its answer (blocked: {reason}).", code="blocked")
        if candidate.finish_reason == types.FinishReason.MAX_TOKENS:
            raise LLMBadOutput("Gemini's answer was cut off before it was complete.", code="truncated")
        if isinstance(response.parsed, ExtractionAnswer):
            return response.parsed
        text = _text(candidate)
        if not text:
            raise LLMBadOutput("Gemini gave an empty answer.", code="empty_answer")
        try:
            data: Any = json.loads(text)
        except ValueError as exc:
            raise LLMBadOutput("Gemini's answer is not JSON.", code="not_json") from exc
        try:
            return ExtractionAnswer.model_validate(data)
        except ValidationError as exc:
            raise LLMBadOutput(
                f"Gemini's answer does not have the expected shape ({len(exc.errors())} problems).", code="bad_shape"
            ) from exc

    def _validate(self, answer: ExtractionAnswer, mapping: dict[str, Email]) -> dict[str, list[ExtractedTask]]:
        tasks: dict[str, list[ExtractedTask]] = {}
        for entry in answer.emails:
            email_id = entry.email_id
            if email_id not in mapping:
                raise LLMBadOutput("Gemini's answer names an email that is not in the batch.", code="unknown_id")
            if email_id in tasks:
                raise LLMBadOutput(f"Gemini's answer lists {email_id} more than once.", code="duplicate_id")
            if len(entry.tasks) > self.max_tasks_per_email:
                raise LLMBadOutput(
                    f"Gemini gave {len(entry.tasks)} tasks for {email_id}; at most {self.max_tasks_per_email} "
                    "are accepted.",
                    code="too_many_tasks",
                )
            tasks[email_id] = [
                dataclasses.replace(
                    self._task(email_id, task.title, task.due_date, task.priority, task.sentence),
                    kind=task.kind,
                    waiting_on=task.waiting_on,
                    due_time=_due_time(email_id, task.due_time, task.due_date),
                )
                for task in entry.tasks
            ]
        missing = [email_id for email_id in mapping if email_id not in tasks]
        if missing:
            raise LLMBadOutput(f"Gemini's answer leaves out {', '.join(missing)}.", code="missing_id")
        return tasks

    def _task(
        self, email_id: str, title: str, due_date: str | None, priority: Priority | None, sentence: str
    ) -> ExtractedTask:
        title = " ".join(without_format_characters(title).split())  # a title of zero-width spaces is empty
        if not title:
            raise LLMBadOutput(f"Gemini gave a task without a title for {email_id}.", code="empty_title")
        if len(title) > self.max_title_chars:
            raise LLMBadOutput(
                f"Gemini gave a {len(title)}-character title for {email_id}; at most {self.max_title_chars} "
                "are accepted.",
                code="title_too_long",
            )
        return ExtractedTask(
            title=title, due_date=_due_date(email_id, due_date), priority=priority or "medium", sentence=sentence
        )

    def _count_attempt(self, _request: httpx2.Request) -> None:
        self._attempts.count = getattr(self._attempts, "count", 0) + 1


def _grounded(
    tasks: dict[str, list[ExtractedTask]], texts: dict[str, str]
) -> tuple[dict[str, list[ExtractedTask]], dict[str, int]]:
    """The tasks whose sentence stands in their email's text, each keeping the email's own words for it, and
    how many of each email's were left out. Checked after the shape (a malformed answer is still bad output,
    to retry or isolate); an ungrounded task is not: the model read the email and invented or recalled a
    sentence, which another attempt would not make a fact. What it quoted is not kept, nor logged."""
    grounded: dict[str, list[ExtractedTask]] = {}
    ungrounded: dict[str, int] = {}
    for email_id, found in tasks.items():
        grounded[email_id] = []
        for task in found:
            words = sentence_found(task.sentence, texts.get(email_id, ""))
            if words is None:
                ungrounded[email_id] = ungrounded.get(email_id, 0) + 1
            else:
                grounded[email_id].append(dataclasses.replace(task, sentence=words))
    if ungrounded:
        logger.info(
            "gemini quoted %d sentences not in their emails; those tasks are left out", sum(ungrounded.values())
        )
    return grounded, ungrounded


def _by_direction(tasks: dict[str, list[ExtractedTask]], emails: dict[str, Email]) -> dict[str, list[ExtractedTask]]:
    """Each task's kind as its email's direction allows: mail that reached the reader holds asks of them
    (whatever kind the model said); in mail they sent, an ask is never theirs (left out), a promise is
    their commitment, and an ask of someone else waits on the recipient it names."""
    kept: dict[str, list[ExtractedTask]] = {}
    for email_id, found in tasks.items():
        email = emails[email_id]
        if email.folder != "sent":
            kept[email_id] = [dataclasses.replace(task, kind="ask", waiting_on="") for task in found]
            continue
        kept[email_id] = [
            dataclasses.replace(
                task, waiting_on=recipient_named(task.waiting_on, email) if task.kind == "waiting" else ""
            )
            for task in found
            if task.kind != "ask"
        ]
    return kept


def server_retry_delay(exc: errors.APIError) -> float | None:
    """The wait the server asked for, in seconds: the Retry-After header, else google.rpc.RetryInfo's
    `retryDelay` ("47s", "0.5s") in the error body; None when it named none."""
    response = getattr(exc, "response", None)
    header = response.headers.get("retry-after") if response is not None else None
    if header:
        try:
            return max(float(header), 0.0)
        except ValueError:
            pass  # an HTTP date: Google sends seconds; fall back to the body
    details = (exc.details or {}).get("error", {}).get("details") if isinstance(exc.details, dict) else None
    for detail in details if isinstance(details, list) else []:
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("google.rpc.RetryInfo"):
            match = _DURATION.fullmatch(str(detail.get("retryDelay", "")).strip())
            if match:
                return float(match[1])
    return None


def _answered(_response: httpx2.Response) -> None:
    crash_point("llm_call")  # the answer is here (and paid for), not yet read or written


def _due_date(email_id: str, value: str | None) -> date | None:
    if value is None or not value.strip():
        return None
    value = value.strip()
    try:
        if not _ISO_DAY.fullmatch(value):
            raise ValueError(value)
        due = date.fromisoformat(value)
    except ValueError:
        raise LLMBadOutput(
            f"Gemini gave a due date for {email_id} that is not a YYYY-MM-DD date.", code="bad_date"
        ) from None
    if not due_date_in_range(due):  # a date no one means (1900, 2099): the task stands, without it
        logger.info("gemini gave an out-of-range due date for %s; the task keeps no date", email_id)
        return None
    return due


def _due_time(email_id: str, value: str | None, due_date: str | None) -> day_time | None:
    """The time Gemini gave, HH:MM, with a date: else none (the task stands without it, never a poison)."""
    if not value or not value.strip() or not (due_date or "").strip():
        return None
    if not _HH_MM.fullmatch(value.strip()):
        logger.info("gemini gave a due time for %s that is not HH:MM; the task keeps its day only", email_id)
        return None
    return day_time.fromisoformat(value.strip())


def _text(candidate: types.Candidate) -> str:
    if candidate.content is None or not candidate.content.parts:
        return ""
    return "".join(part.text for part in candidate.content.parts if isinstance(part.text, str) and not part.thought)


def _usage(response: types.GenerateContentResponse) -> LLMUsage:
    meta = response.usage_metadata
    if meta is None:
        return LLMUsage()
    return LLMUsage(
        prompt_tokens=_tokens(meta.prompt_token_count),
        output_tokens=_tokens(meta.candidates_token_count) + _tokens(meta.thoughts_token_count),
    )


MAX_TOKENS_PER_CALL = 2_000_000  # more than any model's window: a bigger figure is not a count


def _tokens(value: int | None) -> int:
    """A usage figure as the run record can keep it: the answer's own numbers are not trusted (a negative
    or absurd count would break the record and stall the mailbox)."""
    return min(max(int(value or 0), 0), MAX_TOKENS_PER_CALL)


def _api_error(exc: errors.APIError, *, attempts: int) -> LLMError:
    status = exc.code
    described = f"HTTP {status} {exc.status}" if exc.status else f"HTTP {status}"
    if status == 429:
        return LLMUnavailable(
            f"Gemini is rate limiting us ({described}, still after {attempts} attempts). "
            "Extraction will try again later.",
            code="rate_limited",
            status=status,
            retry_after=server_retry_delay(exc),
        )
    if status == 408 or status >= 500:
        return LLMUnavailable(
            f"Gemini is unavailable ({described}, after {attempts} attempts). Extraction will try again later.",
            code="timeout" if status in (408, 504) else "unavailable",
            status=status,
        )
    return LLMRejected(
        f"Gemini refused the request ({described}): {(exc.message or '')[:200]} Check GEMINI_API_KEY and GEMINI_MODEL.",
        status=status,
    )
