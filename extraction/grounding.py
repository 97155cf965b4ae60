"""Whether the sentence Gemini quotes for a task stands in its email (DESIGN §7.8: every item's sentence occurs
in its email).

The text searched is the one the prompt carried for that email: its subject and its cleaned body (quoted
replies and signatures removed, secrets replaced by placeholders, bounded). So a sentence only in the quoted
part the cleaner removed is not found, and no secret can come back through a sentence.

Both sides are compared after a normalisation that forgets only how a sentence was typed, never what it says:
- Unicode compatibility forms and case (NFKD, casefold): "ﬁ" and "fi", "…" and "...", "É" and "é" are one.
- Whitespace: any run of it (line breaks of wrapped mail, tabs, no-break spaces) is one space.
- Quote marks are left out (straight, curly, low-9, guillemets single and double, primes, backticks): models
  and mail clients change them freely, and French quotes come with spaces inside, which then collapse too.
- Dashes and minus signs are "-"; format characters (zero-width, bidi controls, soft hyphens) are left out.
Nothing else is: not accents (a different word may differ only by one), not digits, not other punctuation
but the ends of the quote (a final "?" left out or added). A match must start and end at word boundaries
("end the deck" is not in "send the deck"), and the quote must hold MIN_SENTENCE_ALNUM letters or digits,
so that an empty or trivial "sentence" grounds nothing.

What is kept is the email's own words at the match, on one line and bounded, never the model's text.
"""

from __future__ import annotations

import unicodedata

MAX_SENTENCE_CHARS = 300  # what is kept of a sentence, and what the answer's schema allows
MIN_SENTENCE_ALNUM = 4  # letters or digits a quote must hold to be evidence of anything

_QUOTES = frozenset("\"'`\u00ab\u00bb\u2018\u2019\u201a\u201b\u201c\u201d\u201e\u201f\u2039\u203a\u2032\u2033\u00b4")
_DASHES = frozenset("\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2043\ufe58\ufe63\uff0d")
_END_PUNCTUATION = " .,;:!?"
_FOLLOWING_STOPS = ".!?\u2026"  # kept after a match, so that the kept sentence ends as the email's does


def _normalised(text: str) -> tuple[str, list[int]]:
    """`text` normalised (see the module's docstring), and for each of its characters the index of the
    character of `text` it came from."""
    chars: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        if char.isspace():
            if chars and chars[-1] != " ":
                chars.append(" ")
                origin.append(index)
            continue
        if char in _QUOTES or unicodedata.category(char) == "Cf":
            continue
        if char in _DASHES:
            char = "-"
        for each in unicodedata.normalize("NFKD", unicodedata.normalize("NFKD", char).casefold()):
            if each.isspace():  # a compatibility space (U+2002…): one space, like any other
                if chars and chars[-1] != " ":
                    chars.append(" ")
                    origin.append(index)
            elif each not in _QUOTES:
                chars.append(each)
                origin.append(index)
    return "".join(chars), origin


def sentence_key(sentence: str) -> str:
    """`sentence` as the comparison sees it (normalised as above, its end punctuation left out): two sentences
    that differ only in how they were typed have one key."""
    return _normalised(sentence)[0].strip(_END_PUNCTUATION)


def sentence_seen(sentence: str, earlier: str) -> bool:
    """Whether `sentence` says nothing `earlier` did not: equal to it, or part of it at word boundaries
    (issue 22 point 6: a sentence of an earlier email of the conversation is never a new item)."""
    needle, haystack = sentence_key(sentence), sentence_key(earlier)
    if sum(char.isalnum() for char in needle) < MIN_SENTENCE_ALNUM:
        return False
    return needle == haystack or sentence_found(sentence, earlier) is not None


def sentence_found(sentence: str, text: str) -> str | None:
    """The words of `text` that `sentence` quotes, on one line and at most MAX_SENTENCE_CHARS long; None when
    `text` does not hold it (or it is too slight to be evidence)."""
    needle, _ = _normalised(sentence)
    needle = needle.strip(_END_PUNCTUATION)
    if sum(char.isalnum() for char in needle) < MIN_SENTENCE_ALNUM:
        return None
    haystack, origin = _normalised(text)
    start = haystack.find(needle)
    while start != -1:
        end = start + len(needle)
        starts_a_word = not _in_word(needle[0]) or start == 0 or not _in_word(haystack[start - 1])
        ends_a_word = not _in_word(needle[-1]) or end == len(haystack) or not _in_word(haystack[end])
        if starts_a_word and ends_a_word:
            return _kept(text, origin[start], origin[end - 1] + 1)
        start = haystack.find(needle, start + 1)
    return None


def _in_word(char: str) -> bool:
    # A combining mark belongs to its letter: "cafe" is not in "café" (decomposed, "cafe" and an accent).
    return char.isalnum() or unicodedata.category(char).startswith("M")


def _kept(text: str, start: int, end: int) -> str:
    """The email's words from `start` to `end`, with the quote marks around them and its final stop."""
    while start > 0 and text[start - 1] in _QUOTES:
        start -= 1
    while end < len(text) and (text[end] in _FOLLOWING_STOPS or text[end] in _QUOTES):
        end += 1
    words = " ".join(text[start:end].split())
    if len(words) <= MAX_SENTENCE_CHARS:
        return words
    cut = words[: MAX_SENTENCE_CHARS - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > 0 else cut).rstrip() + "\u2026"
