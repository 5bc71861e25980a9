"""Butler log lines into the test process's `logging`, so pytest shows them.

Butlers of the local backends write their logs to files (one per butler). The relay
follows those files and logs each line again under `butlers.e2e.<butler>` at the line's
own level: `pytest --log-cli-level=DEBUG` then shows every butler's lines on the console
as they are written (the butlers log at that level too), and a failing test's report
carries the lines written while it ran.
"""

from __future__ import annotations

import logging
import re
import threading
from pathlib import Path

LOGGER = "butlers.e2e"
POLL_SECONDS = 0.1
# butlers.logs.FORMAT: "%(asctime)s %(levelname)s [%(component)s] %(name)s: %(message)s"
_LINE = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ (?P<level>[A-Z]+) \[(?P<component>[\w.-]+)\] "
    r"(?P<rest>.*)$"
)


def parse_line(line: str, default_component: str) -> tuple[str, int, str]:
    """(component, level, text) of one log line; a line not in the log format (a
    traceback's continuation, a library's print) keeps the file's butler at INFO."""
    match = _LINE.match(line)
    if match is None:
        return default_component, logging.INFO, line
    level = logging.getLevelName(match.group("level"))
    return (
        match.group("component"),
        level if isinstance(level, int) else logging.INFO,
        match.group("rest"),
    )


class LogRelay:
    """Follows every `*.log` of `log_dir` from a background thread until `stop()`."""

    def __init__(self, log_dir: Path, *, from_start: bool = True) -> None:
        self.log_dir = log_dir
        self._offsets: dict[Path, int] = {}
        self._partial: dict[Path, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="e2e-log-relay", daemon=True)
        if not from_start:
            self._offsets = {p: p.stat().st_size for p in log_dir.glob("*.log")}

    def start(self) -> LogRelay:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.relay_new_lines()

    def _run(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            self.relay_new_lines()

    def relay_new_lines(self) -> None:
        for path in sorted(self.log_dir.glob("*.log")):
            try:
                if path.stat().st_size < self._offsets.get(path, 0):
                    self._offsets[path] = 0  # rotated: the file starts again
                    self._partial.pop(path, None)
                with path.open("rb") as fh:
                    fh.seek(self._offsets.get(path, 0))
                    data = fh.read()
            except OSError:
                continue
            if not data:
                continue
            self._offsets[path] = self._offsets.get(path, 0) + len(data)
            text = self._partial.pop(path, "") + data.decode(errors="replace")
            *lines, rest = text.split("\n")
            if rest:
                self._partial[path] = rest  # written half-way: finished on a later turn
            for line in lines:
                if line:
                    component, level, message = parse_line(line, path.stem)
                    logging.getLogger(f"{LOGGER}.{component}").log(level, "%s", message)
