"""An IMAP server that misbehaves on request, for tests: a TLS-terminating proxy in front of the test's Dovecot.

`ImapProxy` listens on 127.0.0.1 with Dovecot's own certificate (so clients trusting IMAP_CA_BUNDLE trust it),
opens a TLS connection to Dovecot for each client, and relays the plaintext both ways. It sees every command
a client sends (`commands`, the sign-in's arguments hidden) and, by rules the test sets, stands in for a
server that fails in the ways Dovecot will not on request:

- `drop(pattern)`: the connection is cut when a command matching `pattern` comes, before it reaches Dovecot;
- `answer(pattern, "NO …", uid=…)`: the command is answered with that instead of being passed on (with `uid`,
  only a UID command whose UID set names it: one message the server will never give);
- `delay(pattern, seconds)`: the command reaches Dovecot `seconds` late, as from a slow server;
- `limit_connections(n)`: a sign-in beyond `n` connections signed in at once is refused as Dovecot refuses it
  (`NO [LIMIT] Maximum number of connections …`).

A pattern is a regular expression searched, ignoring case, in the command without its tag ("UID FETCH 3,4
(BODY.PEEK[] INTERNALDATE)"). Server data is relayed byte for byte (literals intact); a client literal
(`{n}` or `{n+}`) is relayed with its command, or swallowed with it when the command is answered here.
Each connection is one thread (select over both sockets, so each TLS socket is only ever used by one thread).
"""

from __future__ import annotations

import contextlib
import re
import select
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sandbox.dovecot import Dovecot

LITERAL = re.compile(rb"\{(\d+)(\+?)\}\r\n\Z")
LIMIT_ANSWER = "NO [LIMIT] Maximum number of connections from user+IP exceeded (mail_max_userip_connections={n})"


@dataclass
class Rule:
    pattern: re.Pattern[str]
    action: Literal["drop", "answer", "delay"]
    reply: str = ""
    uid: int | None = None
    seconds: float = 0.0
    skip: int = 0  # matching commands let through before the rule applies
    times: int | None = None  # how many times it applies (None: every time)
    seen: int = 0  # matching commands so far
    applied: int = 0

    def takes(self, command: str) -> bool:
        """Whether the rule applies to `command` (counted as seen when it matches)."""
        if not self.pattern.search(command):
            return False
        if self.uid is not None and self.uid not in uid_set(command):
            return False
        self.seen += 1
        if self.seen <= self.skip or (self.times is not None and self.applied >= self.times):
            return False
        self.applied += 1
        return True


def uid_set(command: str) -> set[int] | _Everything:
    """The UIDs a "UID FETCH|SEARCH|… <set> …" command names (a set with `*` names every UID from its start)."""
    parts = command.split()
    if len(parts) < 3 or parts[0].upper() != "UID":
        return set()
    found: set[int] = set()
    for item in parts[2].split(","):
        low, _, high = item.partition(":")
        if not low.isdigit() and low != "*":
            return set()
        if "*" in (low, high):
            return _Everything(int(low if low != "*" else high or 0))
        found.update(range(int(low), int(high or low) + 1))
    return found


@dataclass(frozen=True)
class _Everything:
    start: int

    def __contains__(self, uid: object) -> bool:
        return isinstance(uid, int) and uid >= self.start


class _Dropped(Exception):
    pass


class ImapProxy:
    def __init__(self, *, upstream_port: int, cert: Path, key: Path, ca: Path) -> None:
        self.upstream_port = upstream_port
        self._server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._server_tls.load_cert_chain(cert, key)
        self._client_tls = ssl.create_default_context(cafile=str(ca))
        self._lock = threading.Lock()
        self._rules: list[Rule] = []
        self._limit: int | None = None
        self._sessions: set[_Session] = set()
        self._commands: list[str] = []
        self.connections = 0  # connections accepted so far
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name=f"imapproxy-{self.port}").start()

    @classmethod
    def in_front_of(cls, dovecot: Dovecot) -> ImapProxy:
        return cls(
            upstream_port=dovecot.tls_port,
            cert=dovecot.root / "cert.pem",
            key=dovecot.root / "key.pem",
            ca=dovecot.ca_path,
        )

    # Rules ---------------------------------------------------------------------------------------------------
    def drop(self, pattern: str, *, skip: int = 0, times: int | None = 1) -> Rule:
        return self._add(Rule(re.compile(pattern, re.IGNORECASE), "drop", skip=skip, times=times))

    def answer(self, pattern: str, reply: str, *, uid: int | None = None, times: int | None = None) -> Rule:
        """`reply` is the answer without its tag: "NO [SERVERBUG] …", "BAD …"."""
        return self._add(Rule(re.compile(pattern, re.IGNORECASE), "answer", reply=reply, uid=uid, times=times))

    def delay(self, pattern: str, seconds: float, *, times: int | None = None) -> Rule:
        return self._add(Rule(re.compile(pattern, re.IGNORECASE), "delay", seconds=seconds, times=times))

    def limit_connections(self, n: int | None) -> None:
        """Refuse a sign-in while `n` connections are signed in (None: no limit)."""
        with self._lock:
            self._limit = n

    def clear(self) -> None:
        """No rule and no limit any more (connections open stay open)."""
        with self._lock:
            self._rules.clear()
            self._limit = None

    def _add(self, rule: Rule) -> Rule:
        with self._lock:
            self._rules.append(rule)
        return rule

    # What clients sent ---------------------------------------------------------------------------------------
    @property
    def commands(self) -> list[str]:
        """Every command clients sent, "TAG NAME ARGS", in order (LOGIN's arguments hidden)."""
        with self._lock:
            return list(self._commands)

    def signed_in(self) -> int:
        """Connections open now that passed a sign-in on."""
        with self._lock:
            return sum(1 for session in self._sessions if session.signed_in)

    def open_connections(self) -> int:
        """Connections open now: each one a server would count against its limit."""
        with self._lock:
            return len(self._sessions)

    def cut_all(self) -> None:
        """Cut every connection open now (as a server restart does); new ones are still taken."""
        with self._lock:
            sessions = list(self._sessions)
        for session in sessions:
            session.cut()

    # Running -------------------------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop listening and cut every connection."""
        with self._lock:
            self._closed = True
            sessions = list(self._sessions)
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        for session in sessions:
            session.cut()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                if self._closed:
                    conn.close()
                    return
                self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True, name=f"imapproxy-{self.port}-c").start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        try:
            client = self._server_tls.wrap_socket(conn, server_side=True)
        except OSError:
            conn.close()
            return
        try:
            upstream = self._client_tls.wrap_socket(
                socket.create_connection(("127.0.0.1", self.upstream_port), timeout=10), server_hostname="127.0.0.1"
            )
        except OSError:
            client.close()
            return
        session = _Session(self, client, upstream)
        with self._lock:
            if self._closed:
                session.cut()
                return
            self._sessions.add(session)
        try:
            session.relay()
        finally:
            session.cut()
            with self._lock:
                self._sessions.discard(session)

    def _decide(self, session: _Session, tag: str, command: str) -> tuple[Rule | None, str]:
        """The rule that applies to a client's command, or a refused sign-in's answer; records the command."""
        name = command.split(" ", 1)[0].upper()
        with self._lock:
            self._commands.append(f"{tag} {name} ***" if name == "LOGIN" else f"{tag} {command}")
            if name in {"LOGIN", "AUTHENTICATE"} and self._limit is not None:
                others = sum(1 for s in self._sessions if s.signed_in and s is not session)
                if others >= self._limit:
                    return None, LIMIT_ANSWER.format(n=self._limit)
            for rule in self._rules:
                if rule.takes(command):
                    return rule, ""
            return None, ""


class _Session:
    """One client's connection and its own connection to Dovecot."""

    def __init__(self, proxy: ImapProxy, client: ssl.SSLSocket, upstream: ssl.SSLSocket) -> None:
        self.proxy = proxy
        self.client = client
        self.upstream = upstream
        self.signed_in = False
        self._buffer = b""
        self._literal = 0  # bytes of a client literal still to come
        self._passing = True  # whether the command in progress goes on to Dovecot
        self._in_command = False  # a literal was announced: the next line continues the same command

    def cut(self) -> None:
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def relay(self) -> None:
        # A timeout on each socket so that a TLS record that is not data (a session ticket) never blocks the
        # other direction for long; select does not see what TLS holds already decrypted (pending).
        for sock in (self.client, self.upstream):
            sock.settimeout(2)
        socks = [self.client, self.upstream]
        try:
            while True:
                ready = [s for s in socks if s.pending()] or select.select(socks, [], [], 0.5)[0]
                for sock in ready:
                    try:
                        data = sock.recv(65536)
                    except TimeoutError:
                        continue
                    if not data:
                        return
                    if sock is self.upstream:
                        self.client.sendall(data)
                    else:
                        self._from_client(data)
        except (OSError, ValueError, _Dropped):
            return  # either side went away, or the proxy cut it

    def _from_client(self, data: bytes) -> None:
        self._buffer += data
        while self._buffer:
            if self._literal:
                chunk, self._buffer = self._buffer[: self._literal], self._buffer[self._literal :]
                self._literal -= len(chunk)
                if self._passing:
                    self.upstream.sendall(chunk)
                continue
            end = self._buffer.find(b"\r\n")
            if end < 0:
                return
            line, self._buffer = self._buffer[: end + 2], self._buffer[end + 2 :]
            if not self._in_command:
                self._passing = self._command(line)
            if self._passing:
                self.upstream.sendall(line)
            literal = LITERAL.search(line)
            synchronising = literal is not None and not literal[2]
            if literal is not None and (self._passing or not synchronising):
                # A literal the client sends (at once for {n+}; for {n}, after Dovecot's "+" came back).
                self._literal, self._in_command = int(literal[1]), True
            else:  # the command is complete (or answered here, and its {n} literal will never come)
                self._in_command = False

    def _command(self, line: bytes) -> bool:
        """A client command's first line: whether it goes on to Dovecot."""
        text = line.decode("utf-8", "replace").rstrip("\r\n")
        tag, _, command = text.partition(" ")
        rule, refusal = self.proxy._decide(self, tag, command)
        if refusal:
            self.client.sendall(f"{tag} {refusal}\r\n".encode())
            return False
        if rule is not None and rule.action == "drop":
            raise _Dropped(command)
        if rule is not None and rule.action == "answer":
            self.client.sendall(f"{tag} {rule.reply}\r\n".encode())
            return False
        if rule is not None and rule.action == "delay":
            time.sleep(rule.seconds)
        if command.split(" ", 1)[0].upper() in {"LOGIN", "AUTHENTICATE"}:
            self.signed_in = True  # as good as: the proxy counts a sign-in it passed on
        return True
