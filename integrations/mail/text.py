"""Text that came from outside (mail, an LLM) as Tasklift keeps and shows it."""

from __future__ import annotations

import unicodedata

# Format characters (Unicode category Cf: bidi overrides and isolates, zero-width spaces and joiners, soft
# hyphens, ...) draw nothing or reorder what follows: a title of zero-width spaces is an invisible task, and
# U+202E makes "moc.knab@" read as another address. Everything kept from mail or an LLM is without them.
_FORMAT = {cp: None for cp in range(0x110000) if unicodedata.category(chr(cp)) == "Cf"}


def without_format_characters(text: str) -> str:
    """`text` without Unicode format characters, and without NUL (which PostgreSQL refuses)."""
    return text.translate(_FORMAT).replace("\x00", "")
