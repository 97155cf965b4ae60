"""A mail server that keeps what it is given: `python -m sandbox.smtp --port P --directory D [--delay-ms N]`.

The stand-in for the relay that sends Tasklift's own mail (the digest, sign-up and reset emails), for the
tests and benchmarks that must see every message a process handed over, even a process killed right after:
each message is written to a file of its own under the directory (whole, by a rename) before the `250`
that tells the sender it was taken, as a real relay queues a message before it answers. `--delay-ms` is how
long it thinks before that answer (a slow relay). aiosmtpd speaks the protocol."""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import time
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller

from config.ports import free_port as _free_port


class _Keep:
    def __init__(self, directory: Path, delay_s: float) -> None:
        self.directory = directory
        self.delay_s = delay_s
        self._numbers = itertools.count(1)

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        name = f"{os.getpid()}-{next(self._numbers):08d}.eml"
        partial = self.directory / f".{name}"
        partial.write_bytes(envelope.original_content or envelope.content)
        partial.rename(self.directory / name)
        return "250 OK: kept"


class SmtpSink:
    """The mail server in a thread of this process: `with SmtpSink(directory) as sink: … sink.port`."""

    def __init__(self, directory: Path, *, port: int = 0, delay_s: float = 0) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self._controller = Controller(_Keep(directory, delay_s), hostname="127.0.0.1", port=port or _free_port())
        self.port = self._controller.port

    def __enter__(self) -> SmtpSink:
        self._controller.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._controller.stop()

    def messages(self) -> list[EmailMessage]:
        return sink_messages(self.directory)


def sink_messages(directory: Path) -> list[EmailMessage]:
    """Every message kept under the directory, in the order they were taken by each server."""
    return [message_from_bytes(path.read_bytes(), policy=policy.default) for path in sorted(directory.glob("*.eml"))]


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m sandbox.smtp", description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--directory", type=Path, required=True)
    parser.add_argument("--delay-ms", type=int, default=0)
    args = parser.parse_args()
    with SmtpSink(args.directory, port=args.port, delay_s=args.delay_ms / 1000):
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    main()
