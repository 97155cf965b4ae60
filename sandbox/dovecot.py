"""A real IMAP server for tests, benchmarks and `make run`: Debian's Dovecot (`dovecot-imapd`), started with a
configuration of ours on free ports, its data in a folder of its own, TLS with a certificate made at start
(sandbox/tls.py) whose PEM is written where IMAP_CA_BUNDLE says, so clients verify it as any server's.

Users have passwords (a passwd-file); mail is put in with IMAP APPEND as the user, as a mail client would. The
server offers what Debian's offers (IMAP4rev1, CONDSTORE, QRESYNC, IDLE, MOVE, SPECIAL-USE): Inbox, Sent,
Drafts, Trash and Archive exist for every user, Sent marked \\Sent.

Run as root, Dovecot's own users (dovecot, dovenull, made by the package) own its processes and the mail;
as anyone else, that user owns everything.
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from imapclient import IMAPClient
from imapclient.exceptions import LoginError

from config.ports import free_port
from config.supervise import die_with_parent
from sandbox.tls import certificate_generate

DOVECOT = "/usr/sbin/dovecot"
DOVEADM = "/usr/bin/doveadm"
TEST_CLIENT = "tasklift-test-client"
INSTALL_HINT = "Debian's dovecot-imapd is missing (`make imap`, as root, installs it)"


def dovecot_missing() -> str | None:
    """Why no Dovecot can start here, or None."""
    return None if os.path.exists(DOVECOT) else INSTALL_HINT


CONFIG = """\
base_dir = {run_dir}
state_dir = {root}/state
log_path = {root}/dovecot.log
info_log_path = {root}/dovecot.log
protocols = imap
listen = 127.0.0.1
# an IMAP process per signed-in connection: room for every mailbox of a benchmark held in IDLE
default_process_limit = 2000
default_client_limit = 8000
ssl = required
ssl_cert = <{root}/cert.pem
ssl_key = <{root}/key.pem
ssl_min_protocol = TLSv1.2
auth_mechanisms = plain login
disable_plaintext_auth = yes
default_login_user = {login_user}
default_internal_user = {internal_user}
first_valid_uid = 1
mail_location = maildir:{root}/mail/%u
mail_uid = {mail_user}
mail_gid = {mail_group}
imap_idle_notify_interval = 1 secs
service imap-login {{
  chroot =
  inet_listener imap {{
    address = 127.0.0.1
    port = {starttls_port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {tls_port}
    ssl = yes
  }}
  process_min_avail = 1
}}
service anvil {{
  chroot =
}}
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/users/%u
}}
userdb {{
  driver = static
  args = uid={mail_user} gid={mail_group} home={root}/home/%u
}}
namespace inbox {{
  inbox = yes
  separator = /
  mailbox Sent {{
    special_use = \\Sent
    auto = subscribe
  }}
  mailbox Drafts {{
    special_use = \\Drafts
    auto = subscribe
  }}
  mailbox Trash {{
    special_use = \\Trash
    auto = subscribe
  }}
  mailbox Archive {{
    special_use = \\Archive
    auto = subscribe
  }}
}}
protocol imap {{
  mail_max_userip_connections = {max_connections}
  # every command each signed-in connection sent, a file per connection (`commands`)
  rawlog_dir = {root}/rawlog/%u
}}
"""


@dataclass
class Dovecot:
    """One Dovecot. `start()` it, `stop()` it; `ca_path` is the PEM its clients trust."""

    ca_path: Path
    max_connections: int = 50
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="tasklift-dovecot-")))
    tls_port: int = 0
    starttls_port: int = 0
    passwords: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    mail_user: str = ""
    keep: bool = False  # keep its mail and users after `stop` (the demo's, under TASKLIFT_LOCAL_DIR)
    run_dir: Path = field(default_factory=Path)

    def start(self, *, timeout: float = 20) -> Dovecot:
        missing = dovecot_missing()
        if missing:
            raise RuntimeError(missing)
        root = self.root
        self.root.chmod(0o755)  # Dovecot's users reach the mail and the sockets under it
        # its sockets: a folder of a short path (a unix socket's path has at most 107 bytes), whatever the root's
        self.run_dir = Path(tempfile.mkdtemp(prefix="tl-dovecot-"))
        self.run_dir.chmod(0o755)
        for sub in ("state", "mail", "home", "rawlog"):
            (root / sub).mkdir(exist_ok=True)
        cert, key = certificate_generate(now=datetime.now(UTC))
        (root / "cert.pem").write_bytes(cert)
        (root / "key.pem").write_bytes(key)
        (root / "key.pem").chmod(0o600)
        self.ca_path.parent.mkdir(parents=True, exist_ok=True)
        self.ca_path.write_bytes(cert)
        (root / "users").mkdir(exist_ok=True)
        if os.geteuid() == 0:
            login_user, internal_user, mail_user = "dovenull", "dovecot", "dovecot"
            for sub in ("mail", "home", "rawlog"):
                shutil.chown(root / sub, mail_user, mail_user)
        else:
            login_user = internal_user = mail_user = getpass.getuser()
        self.mail_user = mail_user
        self.tls_port, self.starttls_port = self.tls_port or free_port(), self.starttls_port or free_port()
        (root / "dovecot.conf").write_text(
            CONFIG.format(
                root=root,
                run_dir=self.run_dir,
                login_user=login_user,
                internal_user=internal_user,
                mail_user=mail_user,
                mail_group=mail_user,
                tls_port=self.tls_port,
                starttls_port=self.starttls_port,
                max_connections=self.max_connections,
            )
        )
        self.process = subprocess.Popen(
            [DOVECOT, "-F", "-c", str(root / "dovecot.conf")],
            stdout=subprocess.DEVNULL,
            stderr=(root / "master.log").open("wb"),
            start_new_session=True,
            preexec_fn=die_with_parent,  # a test run or `make run` killed outright leaves no Dovecot behind
        )
        deadline = time.monotonic() + timeout
        ours = ssl.create_default_context(cafile=self.ca_path)  # a server on the port with another certificate
        while True:  # (a second checkout's, whose port this one could not bind) is not this one
            try:
                with (
                    socket.create_connection(("127.0.0.1", self.tls_port), timeout=1) as raw,
                    ours.wrap_socket(raw, server_hostname="127.0.0.1"),
                ):
                    break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"Dovecot did not start: {self.log()[-2000:]}") from None
                time.sleep(0.05)
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        shutil.rmtree(self.run_dir, ignore_errors=True)
        if not self.keep:
            shutil.rmtree(self.root, ignore_errors=True)

    def log(self) -> str:
        texts = [
            p.read_text(errors="replace") for p in (self.root / "master.log", self.root / "dovecot.log") if p.exists()
        ]
        return "\n".join(texts)

    # Users and mail ----------------------------------------------------------------------------------------
    def add_user(self, address: str, password: str) -> None:
        self.passwords[address] = password
        rawlog = self.root / "rawlog" / address
        rawlog.mkdir(exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(rawlog, self.mail_user, self.mail_user)
        # A file per user: Dovecot reads a passwd-file again only when its mtime moves (to the second), so one
        # file for all missed users added within a second of each other.
        file = self.root / "users" / address
        before = int(file.stat().st_mtime) if file.exists() else 0
        file.write_text(f"{address}:{{PLAIN}}{password}\n")
        if before:  # a new password: an mtime a second on at least, or Dovecot keeps the old one
            stamp = max(before + 1, int(time.time()))
            os.utime(file, (stamp, stamp))
            # and Dovecot looks at the file at most once a second: the change is made when it signs in
            deadline = time.monotonic() + 10
            while True:
                try:
                    self.client(address).logout()
                    break
                except LoginError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.2)

    def client(self, address: str) -> IMAPClient:
        """A signed-in connection as the user (the test's own mail client)."""
        client = IMAPClient(
            "127.0.0.1", port=self.tls_port, ssl=True, ssl_context=ssl.create_default_context(cafile=self.ca_path)
        )
        client.login(address, self.passwords[address])
        client.id_({"name": TEST_CLIENT})  # so that `commands` tells its connections from the app's
        return client

    def deliver(self, address: str, raw: str | bytes, *, folder: str = "INBOX", at: datetime | None = None) -> int:
        """Put a message into the user's folder (APPEND, unread, INTERNALDATE `at` or now); its UID."""
        data = raw.encode() if isinstance(raw, str) else raw
        with self.client(address) as client:
            answer = client.append(folder, data, msg_time=at)
        return int(answer.split(b"]")[0].split()[-1])  # [APPENDUID validity uid]

    def sessions(self, address: str) -> list[list[str]]:
        """The commands each signed-in connection of the user sent, a list per connection in the order they
        began, the test's own (`client`) left out: "TAG NAME ARGS" lines (Dovecot's rawlog, a file per
        connection; the sign-in itself comes before it)."""
        sessions = []
        for path in sorted((self.root / "rawlog" / address).glob("*.in"), key=lambda p: p.stat().st_ctime_ns):
            text = path.read_text(errors="replace")
            if TEST_CLIENT not in text:  # each line "<unix time> TAG NAME ARGS"
                sessions.append([line.split(" ", 1)[1] for line in text.splitlines() if " " in line])
        return sessions

    def commands(self, address: str) -> list[str]:
        """Every command of `sessions`, one list."""
        return [line for session in self.sessions(address) for line in session]

    def doveadm(self, *args: str) -> str:
        """A doveadm command against this server (e.g. "mailbox", "update", "--uid-validity", …)."""
        done = subprocess.run(
            [DOVEADM, "-c", str(self.root / "dovecot.conf"), *args], capture_output=True, text=True, timeout=30
        )
        if done.returncode:
            raise RuntimeError(f"doveadm {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout


DEMO_MAIL = [
    ("Sam Rivera <sam@example.org>", "Venue contract", "Hi,\n\nCould you sign the venue contract and send it back by "
     "Thursday?\n\nThanks,\nSam"),
    ("Priya Shah <priya@example.org>", "Slides for Monday", "Hello,\n\nPlease send me your three slides for "
     "Monday's review by Friday noon.\n\nPriya"),
    ("Newsletter <news@example.org>", "This week in gardening", "Ten plants that like the shade. Nothing to do."),
]  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    """`python -m sandbox.dovecot`: the demo IMAP server of `make run` (config/run.py), in the foreground until
    SIGTERM: one user with a password and a little mail, its certificate written to --ca-file."""
    import argparse
    from email.message import EmailMessage
    from email.utils import format_datetime, make_msgid

    parser = argparse.ArgumentParser(prog="python -m sandbox.dovecot")
    parser.add_argument("--root", type=Path, required=True, help="its folder (kept: the mail lasts across runs)")
    parser.add_argument("--ca-file", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True, help="the IMAPS port")
    parser.add_argument("--user", required=True)
    parser.add_argument("--password", required=True)
    args = parser.parse_args(argv)
    args.root.mkdir(parents=True, exist_ok=True)
    fresh = not (args.root / "users" / args.user).exists()
    server = Dovecot(ca_path=args.ca_file, root=args.root, tls_port=args.port, keep=True).start()
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    signal.signal(signal.SIGINT, lambda *_: stopping.set())
    try:
        server.add_user(args.user, args.password)
        if fresh:
            for sender, subject, body in DEMO_MAIL:
                message = EmailMessage()
                message["From"], message["To"], message["Subject"] = sender, args.user, subject
                message["Date"] = format_datetime(datetime.now(UTC))
                message["Message-ID"] = make_msgid(domain="example.org")
                message.set_content(body)
                server.deliver(args.user, message.as_bytes())
        print(f"Demo IMAP mailbox: {args.user} / {args.password} on 127.0.0.1:{args.port} (TLS)", flush=True)
        while not stopping.wait(1):
            if server.process is not None and server.process.poll() is not None:
                raise SystemExit(f"Dovecot stopped: {server.log()[-1000:]}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
