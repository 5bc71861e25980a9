"""The official MCP Inspector CLI (`@modelcontextprotocol/inspector`, the release the
README pins), installed once per machine with npm into
`~/.cache/butlers/inspector-<version>` (built in a temporary directory, then renamed, so
concurrent sessions never see half an install)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

PACKAGE = "@modelcontextprotocol/inspector"
README = Path(__file__).resolve().parents[2] / "README.md"


def readme_version() -> str:
    """The release the README pins (the one users run, and so the one tested)."""
    found = re.search(re.escape(PACKAGE) + r"@(\d+\.\d+\.\d+)", README.read_text())
    if found is None:
        raise RuntimeError(f"README.md names no pinned {PACKAGE}@X.Y.Z")
    return found.group(1)


VERSION = readme_version()
INSTALL_TIMEOUT = 300.0


def cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "butlers" / f"inspector-{VERSION}"


def inspector_cli() -> tuple[Path | None, str | None]:
    """(the inspector's executable, None), or (None, why it cannot run here)."""
    target = cache_dir()
    executable = target / "node_modules" / ".bin" / "mcp-inspector"
    if executable.exists():
        return executable, None
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        return None, "the MCP Inspector needs node and npm, which this machine lacks"
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".inspector-") as tmp:
        try:
            subprocess.run(
                [
                    npm,
                    "install",
                    "--no-audit",
                    "--no-fund",
                    "--prefix",
                    tmp,
                    f"{PACKAGE}@{VERSION}",
                ],
                check=True,
                capture_output=True,
                timeout=INSTALL_TIMEOUT,
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            output = getattr(exc, "stderr", b"") or b""
            return None, f"npm could not install {PACKAGE}@{VERSION}: {output.decode()[-300:]}"
        try:
            Path(tmp).rename(target)
        except OSError:
            if not executable.exists():  # another session won the race: use theirs
                raise
    return executable, None


def run_inspector(executable: Path, url: str, *args: str, token: str | None) -> tuple[int, object]:
    """Run the CLI against `url`; (exit code, its JSON output or raw text)."""
    command = [str(executable), "--cli", url, *args]
    if token:
        command += ["--header", f"Authorization: Bearer {token}"]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )
    try:
        return done.returncode, json.loads(done.stdout)
    except ValueError:
        return done.returncode, done.stdout + done.stderr
