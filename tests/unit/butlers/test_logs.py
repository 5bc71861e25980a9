"""Log files: one line per record, private, rotated, with stdout/stderr following."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path


def _run(script: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True, text=True, timeout=60, cwd=tmp_path,
    )  # fmt: skip


def test_the_log_file_rotates_is_private_and_keeps_stderr(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "health.log"
    done = _run(
        f"""
        import logging, sys
        from pathlib import Path
        from butlers.logs import configure_logging
        configure_logging("health", log_file=Path({str(log)!r}), max_bytes=2000, backups=2)
        for i in range(200):
            logging.getLogger("butlers.x").info("line %d of the log", i)
        print("printed after rotation", file=sys.stderr, flush=True)
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    files = sorted(p.name for p in log.parent.iterdir())
    assert files == ["health.log", "health.log.1", "health.log.2"]
    assert all((log.parent / f).stat().st_mode & 0o777 == 0o600 for f in files)
    assert all((log.parent / f).stat().st_size <= 2200 for f in files)
    current = log.read_text()
    assert "line 199 of the log" in current and "printed after rotation" in current


def test_a_library_traceback_becomes_one_line(tmp_path: Path) -> None:
    done = _run(
        """
        import logging
        from butlers.logs import configure_logging
        configure_logging("health")
        try:
            raise ValueError("secret detail of a caller")
        except ValueError:
            logger = logging.getLogger("fastmcp.server.server")
            logger.error("Error calling tool 'x'", exc_info=True)
        """,
        tmp_path,
    )
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith("Error calling tool 'x' (ValueError)"), lines


def test_records_on_the_loop_are_written_a_turn_later_in_order_and_at_exit(
    tmp_path: Path,
) -> None:
    log = tmp_path / "logs" / "health.log"
    done = _run(
        f"""
        import asyncio, logging
        from pathlib import Path
        from butlers.logs import configure_logging
        path = Path({str(log)!r})
        configure_logging("health", log_file=path)
        logger = logging.getLogger("butlers.x")

        async def main():
            values = ["as logged"]
            logger.info("first %s", values)
            values[0] = "changed later"
            assert "first" not in path.read_text(), "written before the loop's next turn"
            await asyncio.sleep(0)
            assert "first ['as logged']" in path.read_text()
            logger.info("second")
            logger.warning("third")  # at once, after what is pending
            assert "third" in path.read_text(), "a warning waits for the loop"
            logger.info("fourth")
            raise SystemExit(0)  # the loop never turns again: written at exit

        loop = asyncio.new_event_loop()
        loop.run_until_complete(main())
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr + log.read_text()
    lines = [line.split(": ", 1)[1] for line in log.read_text().splitlines()]
    assert lines == ["first ['as logged']", "second", "third", "fourth"]


def test_secrets_are_masked_in_records_written_a_turn_later(tmp_path: Path) -> None:
    log = tmp_path / "health.log"
    done = _run(
        f"""
        import asyncio, logging
        from pathlib import Path
        from butlers.logs import configure_logging
        from butlers.redaction import Redactor, install_log_redaction
        configure_logging("health", log_file=Path({str(log)!r}))
        install_log_redaction(Redactor(["sk-secret-123"]))

        async def main():
            logging.getLogger("butlers.x").info("deferred %s", "sk-secret-123")
            await asyncio.sleep(0)
            logging.getLogger("butlers.x").warning("at once sk-secret-123")

        asyncio.run(main())
        """,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    text = log.read_text()
    assert "sk-secret-123" not in text and text.count("deferred") == 1, text
    assert "at once" in text


def test_a_turn_that_logs_without_end_holds_a_bounded_number_of_records(tmp_path: Path) -> None:
    log = tmp_path / "health.log"
    done = _run(
        f"""
        import asyncio, logging
        from pathlib import Path
        from butlers.logs import MAX_DEFERRED, configure_logging
        path = Path({str(log)!r})
        configure_logging("health", log_file=path)

        async def main():
            for i in range(3 * MAX_DEFERRED + 10):
                logging.getLogger("butlers.x").info("line %d", i)
            held = 3 * MAX_DEFERRED + 10 - len(path.read_text().splitlines())
            assert 0 < held < MAX_DEFERRED, held

        asyncio.run(main())
        """,
        tmp_path,
    )
    assert done.returncode == 0, log.read_text()[-2000:]
    assert len(log.read_text().splitlines()) == 3010
