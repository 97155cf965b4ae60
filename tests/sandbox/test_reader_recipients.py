"""The sandbox reader's rule for asks of someone else (READER.md §2): it reads the prompt's Reader line and
each email's To and Cc lines, so a test can show that Tasklift sends them."""

from __future__ import annotations

from sandbox.reader import read_prompt


def titles(body: str, *, to: str, cc: str = "", reader: str = "Reader: grace@example.com\n") -> list[str]:
    prompt = (
        f'{reader}<email id="email_1">\nFrom: Ada <ada@example.org>\nTo: {to}\n'
        + (f"Cc: {cc}\n" if cc else "")
        + f"Subject: Offsite\nDate: Mon, 02 Nov 2026 10:00 +0000\n\n{body}\n</email>\n"
    )
    [(_, tasks)] = read_prompt(prompt).emails
    return [task.title for task in tasks]


def test_an_ask_opening_on_the_name_of_someone_else_on_to_or_cc_is_theirs() -> None:
    others = "Sam Lee <sam@example.org>"
    me = "Grace Hopper <grace@example.com>"
    assert titles("Sam, can you book the room?", to=others, cc=me) == []
    assert titles("Sam Lee: please book the room.", to=me, cc=others) == []
    assert titles("sam, can you book the room?", to="sam@example.org", cc=me) == []  # the address's local part
    assert titles("Grace, can you book the room?", to=me, cc=others) == ["Grace, can you book the room"]
    assert titles("Hi Sam, can you book the room?", to=others, cc=me) == ["Book the room"]  # a greeting
    assert titles("Chris, can you book the room?", to=others, cc=me) == ["Chris, can you book the room"]


def test_a_name_the_reader_also_answers_to_stays_the_readers() -> None:
    assert titles("Sam, can you book the room?", to="Sam Person <grace@example.com>, Sam Lee <sam@example.org>") == [
        "Sam, can you book the room"
    ]


def test_without_a_reader_line_every_recipient_is_someone_else() -> None:
    assert titles("Grace, can you book the room?", to="Grace Hopper <grace@example.com>", reader="") == []
