"""A real CalDAV server for tests: Radicale on loopback, scratch storage, any login accepted
(or, with `users`, only those users with their passwords).

`start_radicale(directory)` runs `python -m radicale` (installed by the dev extra) on a
free port (of loopback, or of `host`) and waits until it answers;
`RadicaleServer.calendar_url(user, name)` is where a calendar lives, `make_calendar`
creates one with the independent `caldav` client;
`set_password` changes a user's password (Radicale reads its users file at each login).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2 as httpx

from butlers.db.embedded import free_port

START_TIMEOUT = 30.0


@dataclass(frozen=True)
class RadicaleServer:
    url: str
    process: subprocess.Popen[bytes]
    log: Path
    users_file: Path | None = None

    def principal_url(self, user: str) -> str:
        return f"{self.url}/{user}/"

    def calendar_url(self, user: str, name: str) -> str:
        return f"{self.url}/{user}/{name}/"

    def client(self, user: str, password: str = "x") -> object:
        """An independent CalDAV client (the `caldav` library) logged in as `user`."""
        import caldav

        return caldav.DAVClient(url=self.url, username=user, password=password)

    def make_calendar(self, user: str, name: str, password: str = "x") -> object:
        """A new event calendar `name` of `user`, made with the `caldav` library."""
        principal = self.client(user, password).principal()  # type: ignore[attr-defined]
        return principal.make_calendar(name=name, cal_id=name)

    def set_password(self, user: str, password: str) -> None:
        assert self.users_file is not None, "started without `users`"
        lines = [
            line
            for line in self.users_file.read_text().splitlines()
            if line and line.split(":", 1)[0] != user
        ]
        self.users_file.write_text("\n".join([*lines, f"{user}:{password}"]) + "\n")


@contextmanager
def start_radicale(
    directory: Path, users: Mapping[str, str] | None = None, host: str = "127.0.0.1"
) -> Iterator[RadicaleServer]:
    """`host`: the address it listens on ("0.0.0.0" for the kind backend's pods, which
    call it at this machine's address on kind's network); `url` is on loopback."""
    port = free_port()
    config = directory / "config"
    storage = directory / "collections"
    log = directory / "radicale.log"
    users_file = None
    auth = "[auth]\ntype = none\n"
    if users is not None:
        users_file = directory / "users"
        users_file.write_text("".join(f"{u}:{p}\n" for u, p in users.items()))
        auth = (
            f"[auth]\ntype = htpasswd\nhtpasswd_filename = {users_file}\n"
            "htpasswd_encryption = plain\ndelay = 0.05\n"
        )
    config.write_text(
        f"[server]\nhosts = {host}:{port}\n"
        f"{auth}"
        f"[storage]\nfilesystem_folder = {storage}\n"
        "[rights]\ntype = owner_only\n"
        "[logging]\nlevel = warning\n"
    )
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "radicale", "--config", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    url = f"http://127.0.0.1:{port}"
    server = RadicaleServer(url, process, log, users_file)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"radicale exited: {log.read_text()[-2000:]}")
            try:
                httpx.get(url + "/.web/", timeout=1.0)
                break
            except httpx.HTTPError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"radicale did not answer on {url} within {START_TIMEOUT} s"
                    ) from None
                time.sleep(0.05)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
