"""A real IMAP server for tests: Debian's Dovecot from a private config on loopback.

Each server has its own directory (config, sockets, state, maildirs, log) and port;
users are in a passwd-file and own their maildir as `nobody` (Dovecot refuses uid 0
for mail). `deliver` drops a message into a user's maildir as an MTA would (Dovecot
sees it at once, IDLE included); `smtp_into` is an SMTP server that delivers so.
Dovecot runs as root (it switches to the mail user): elsewhere the tests skip.
"""

from __future__ import annotations

import contextlib
import mailbox
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.message import EmailMessage
from pathlib import Path
from typing import Any

DOVECOT = "/usr/sbin/dovecot"
MAIL_UID = 65534  # nobody: Dovecot serves no mail as root

CONFIG = """\
base_dir = {root}/run
state_dir = {root}/state
instance_name = butlers-test-{port}
protocols = imap
listen = 127.0.0.1
log_path = {root}/dovecot.log
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
mail_location = maildir:{root}/mail/%u
mail_uid = {uid}
mail_gid = {uid}
first_valid_uid = {uid}
last_valid_uid = {uid}
default_internal_user = dovecot
default_login_user = dovenull
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/passwd
}}
userdb {{
  driver = passwd-file
  args = username_format=%u {root}/passwd
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service stats {{
  inet_listener http {{
    port = 0
  }}
}}
"""


def unavailable() -> str | None:
    """Why no Dovecot can run here, or None."""
    if not os.path.exists(DOVECOT):
        return "dovecot-imapd is not installed (python3 dev.py setup installs it as root)"
    if os.geteuid() != 0:
        return "Dovecot serves mail as another user: the IMAP tests need root"
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Dovecot:
    root: Path
    port: int
    users: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    delivered: list[str] = field(default_factory=list)

    @property
    def host(self) -> str:
        return "127.0.0.1"

    def maildir(self, user: str, folder: str = "INBOX") -> mailbox.Maildir:
        path = self.root / "mail" / user
        if folder != "INBOX":
            path = path / f".{folder}"
        return mailbox.Maildir(path, create=False)

    def set_password(self, user: str, password: str) -> None:
        """`user`'s password from now on (Dovecot reads its passwd-file again when it
        changes; open sessions stay logged in)."""
        self.users[user] = password
        write_passwd(self.root, self.users)

    def deliver(self, user: str, message: EmailMessage | bytes, folder: str = "INBOX") -> None:
        """Drop `message` into the maildir (tmp/, then renamed into new/), owned by the user."""
        box = self.maildir(user, folder)
        key = box.add(message if isinstance(message, bytes) else message.as_bytes())
        base = self.root / "mail" / user
        path = (base if folder == "INBOX" else base / f".{folder}") / "new" / key
        os.chown(path, MAIL_UID, MAIL_UID)

    def recreate_folder(self, user: str) -> None:
        """Rebuild the user's INBOX index with a new UIDVALIDITY, the mail kept (what a
        restored or migrated mailbox looks like to a client)."""
        base = self.root / "mail" / user
        for name in (
            "dovecot-uidlist",
            "dovecot.index",
            "dovecot.index.cache",
            "dovecot.index.log",
        ):
            with contextlib.suppress(FileNotFoundError):
                (base / name).unlink()
        subprocess.run(
            ["doveadm", "-c", str(self.root / "dovecot.conf"), "force-resync", "-u", user, "INBOX"],
            check=False,
            capture_output=True,
            timeout=30,
        )

    def log(self) -> str:
        path = self.root / "dovecot.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if self.process.stderr is not None:
            self.process.stderr.close()


def _start(users: dict[str, str]) -> Dovecot:
    # Not under pytest's tmp_path: that is mode 700 and the mail user must reach its maildir.
    root = Path(tempfile.mkdtemp(prefix="butlers-dovecot-"))
    root.chmod(0o755)
    port = _free_port()
    server = Dovecot(root, port, users)
    (root / "dovecot.conf").write_text(CONFIG.format(root=root, port=port, uid=MAIL_UID))
    for user in users:
        home = root / "mail" / user
        for sub in ("cur", "new", "tmp"):
            (home / sub).mkdir(parents=True, exist_ok=True)
        for path in [root / "mail", home, *(home / s for s in ("cur", "new", "tmp"))]:
            os.chown(path, MAIL_UID, MAIL_UID)
    write_passwd(root, users)
    server.process = subprocess.Popen(
        [DOVECOT, "-F", "-c", str(root / "dovecot.conf")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            error = server.process.stderr.read().decode() if server.process.stderr else ""
            raise RuntimeError(f"dovecot exited: {error}{server.log()}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return server
        time.sleep(0.05)
    server.stop()
    raise RuntimeError(f"dovecot did not listen on {port} within 15 s: {server.log()}")


def write_passwd(root: Path, users: dict[str, str]) -> None:
    lines = [
        f"{user}:{{PLAIN}}{password}:{MAIL_UID}:{MAIL_UID}::{root / 'mail' / user}::"
        for user, password in users.items()
    ]
    staged = root / "passwd.new"
    staged.write_text("\n".join(lines) + "\n")
    staged.replace(root / "passwd")


@contextlib.contextmanager
def dovecot(users: dict[str, str]) -> Iterator[Dovecot]:
    server = _start(users)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)


def smtp_into(server: Dovecot, username: str, password: str) -> Any:
    """An SMTP server (AUTH PLAIN, no TLS) that delivers each message into the maildirs
    of its recipients `server` knows (others are dropped): `async with` it, `.port`."""
    from tests.integration.modules.fakes.smtp import fake_smtp

    def deliver(recipients: list[str], data: bytes) -> None:
        for rcpt in recipients:
            if rcpt in server.users:
                server.deliver(rcpt, data)

    return fake_smtp(username, password, deliver)
