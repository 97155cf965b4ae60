"""Every reply shape of tests/fixtures/mail/ reaches the prompt as the person's own text, and nothing else.

A fixture is `<shape>/<language>.txt` (a plain-text body as delivered) or `.html` (an HTML body as delivered),
with `<language>.reply.txt` beside it: what must reach the prompt, exactly. The README there lists the shapes.
An HTML body goes through `html_to_text` first, as the providers do.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from integrations.mail.clean import clean_body
from integrations.mail.mime import html_to_text

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "mail"
BODIES = sorted(
    path for path in FIXTURES.glob("*/*") if path.suffix in (".txt", ".html") and not path.name.endswith(".reply.txt")
)


def _delivered_and_reply(path: Path) -> tuple[str, str]:
    reply = path.with_name(f"{path.stem}.reply.txt").read_text(encoding="utf-8").strip()
    return path.read_text(encoding="utf-8"), reply


def _cleaned(path: Path, delivered: str) -> str:
    text = html_to_text(delivered) if path.suffix == ".html" else delivered
    return clean_body(text, max_chars=4_000)


def test_every_shape_and_language_has_fixtures():
    shapes = {path.parent.name for path in BODIES}
    languages = {path.stem for path in BODIES}
    assert {"en", "de", "fr", "es", "it", "pt", "nl", "pl", "sv", "fi", "hu", "ja"} <= languages
    assert all(path.with_name(f"{path.stem}.reply.txt").exists() for path in BODIES)
    assert len(shapes) >= 8


@pytest.mark.parametrize("path", BODIES, ids=lambda path: f"{path.parent.name}/{path.name}")
def test_the_reply_survives_and_no_quoted_line_or_quote_header_remains(path):
    delivered, reply = _delivered_and_reply(path)
    cleaned = _cleaned(path, delivered)
    reply_lines = [line for line in reply.splitlines() if line]
    cleaned_lines = [line for line in cleaned.splitlines() if line]
    missing = [line for line in reply_lines if line not in cleaned_lines]
    left_over = [line for line in cleaned_lines if line not in reply_lines]
    assert not missing, f"the reply lost {missing}"
    assert not left_over, f"quoted lines or quote headers remain: {left_over}"
    assert cleaned == reply
