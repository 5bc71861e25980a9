"""Launching butler processes quickly: forked from a pre-loaded fork server.

Importing the MCP stack costs about 1.5 s of CPU per process. A local ecosystem
starts its butlers from a `forkserver` that has imported it once, while the
supervisor is still starting the database, so each butler starts in tens of
milliseconds. Each child gets its own session (Ctrl-C reaches only the
supervisor, which stops the children in order), its own log file and its own
environment, then runs exactly what `butlers serve` runs (`butlers.daemon.serve.run`).

The fork server itself starts with the OS basics of the environment only: a forked
child's `/proc/<pid>/environ` shows the environment its fork server was started with,
and the supervisor's holds every butler's credentials.

As with any `multiprocessing` program, a script that starts an `Ecosystem` must
guard its entry point with `if __name__ == "__main__":`.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import multiprocessing.context
import multiprocessing.util
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING

from butlers.ecosystem.environment import base_environment
from butlers.errors import EcosystemError

if TYPE_CHECKING:  # imported by `butlers up` first thing, to start the fork server: lean
    from butlers.migrations import Chain
    from butlers.spec import ButlerResource

# What every butler imports, and nothing more: a child's RSS counts the shared pages too.
PRELOAD = [
    "butlers.daemon.serve",  # (no Alembic: `/ready` reads migration heads without it)
    # Imported lazily by FastMCP, anyio and uvicorn while a butler starts.
    "anyio._backends._asyncio",
    "fastmcp.server.context",
    "fastmcp.server.middleware.dereference",
    "fastmcp.server.providers.prefab_synthesis",
    "fastmcp.server.transforms.catalog",
    "uvicorn.lifespan.on",
]
_context: multiprocessing.context.ForkServerContext | None = None
_spawn_lock = threading.Lock()
# Fork servers (and resource trackers) started here; referenced so that their Popen
# objects are never collected, which would let `subprocess` reap a process that
# `multiprocessing` waits for itself.
_helpers: list[subprocess.Popen[bytes]] = []


@contextlib.contextmanager
def _helpers_with_base_environment() -> Iterator[None]:
    """While `multiprocessing` starts its helper processes, start them with the OS
    basics of the environment instead of this process's whole environment."""

    def spawnv_passfds(path: str, args: list[str], passfds: list[int]) -> int:
        helper = subprocess.Popen(
            args,
            executable=path,
            pass_fds=tuple(sorted(map(int, passfds))),
            env=base_environment(os.environ),
        )
        _helpers.append(helper)
        return helper.pid

    with _spawn_lock:
        original = multiprocessing.util.spawnv_passfds
        multiprocessing.util.spawnv_passfds = spawnv_passfds  # type: ignore[assignment]
        try:
            yield
        finally:
            multiprocessing.util.spawnv_passfds = original


def _fork_server() -> multiprocessing.context.ForkServerContext:
    global _context
    if _context is None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)
        _context = context
    return _context


def warm_up() -> None:
    """Start the fork server now, so its imports overlap with other start-up work."""
    if sys.platform.startswith("linux"):
        from multiprocessing import forkserver

        _fork_server()
        with _helpers_with_base_environment():
            forkserver.ensure_running()


@dataclass(frozen=True)
class ButlerPlan:
    """What the supervisor needs of a butler's modules: its migration chains and the
    names of the environment variables it may inherit."""

    chains: list[Chain]
    variables: frozenset[str]


PLAN_TIMEOUT = 60.0


def plan_butlers(
    resources: Sequence[ButlerResource], runtime_adapter: str | None
) -> dict[str, ButlerPlan]:
    """Each butler's plan, worked out where the module registry is loaded already.

    The registry pulls in FastMCP (~1.3 s of imports, ~80 MB): on Linux a child of
    the fork server, which preloads it for the butlers anyway, does the work, so the
    supervisor never imports it. Blocks until the fork server has preloaded.
    """
    if not sys.platform.startswith("linux"):
        return _plans(list(resources), runtime_adapter)
    receiver, sender = multiprocessing.Pipe(duplex=False)
    process = _fork_server().Process(
        target=_plan_child, args=(sender, list(resources), runtime_adapter), daemon=True
    )
    with _helpers_with_base_environment():
        process.start()
    sender.close()
    try:
        if not receiver.poll(PLAN_TIMEOUT):
            raise EcosystemError(f"could not read the butlers' modules within {PLAN_TIMEOUT:.0f} s")
        outcome, value = receiver.recv()
    except EOFError:
        raise EcosystemError(
            f"reading the butlers' modules failed (exit code {process.exitcode})"
        ) from None
    finally:
        receiver.close()
        process.join(PLAN_TIMEOUT)
        if process.is_alive():
            process.kill()
    if outcome == "error":
        raise value
    return dict(value)


def _plans(resources: list[ButlerResource], runtime_adapter: str | None) -> dict[str, ButlerPlan]:
    from butlers.ecosystem.environment import butler_variables
    from butlers.modules.loader import butler_chains

    environ = {"BUTLERS_RUNTIME_ADAPTER": runtime_adapter} if runtime_adapter else {}
    return {
        r.name: ButlerPlan(
            chains=butler_chains(r.spec.modules),
            variables=frozenset(butler_variables(r, environ)),
        )
        for r in resources
    }


def _plan_child(
    sender: Connection, resources: list[ButlerResource], runtime_adapter: str | None
) -> None:
    try:
        sender.send(("ok", _plans(resources, runtime_adapter)))
    except BaseException as exc:  # handed to the supervisor, which raises it
        sender.send(("error", exc))
    finally:
        sender.close()


def _child_main(spec_path: str, env: dict[str, str], log_path: str) -> None:
    # Everything the fork server preloaded moves to the collector's permanent
    # generation: collections never walk (and so never write to) those objects, whose
    # memory pages then stay shared with the fork server and every other butler.
    gc.freeze()
    _child_setup(env, log_path)
    from butlers.daemon.serve import run

    _child_exit(run(Path(spec_path)))


def _child_setup(env: dict[str, str], log_path: str) -> None:
    os.setsid()
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
    os.environ.clear()
    os.environ.update(env)
    # BUTLERS_PARENT_PID names the supervisor, never our parent: the fork server lives
    # as long as any of its children (each holds its liveness pipe), so a butler that
    # watched its parent would outlive a killed supervisor, ports and all.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _child_exit(code: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class ButlerChild:
    """A running butler process, whichever way it was started (Popen-like)."""

    def __init__(self, spec_path: Path, env: Mapping[str, str], log_path: Path) -> None:
        self._start(
            _child_main,
            (str(spec_path), dict(env), str(log_path)),
            ["serve", "--spec", str(spec_path)],
            env,
            log_path,
        )

    def _start(
        self,
        target: Callable[..., object],
        args: tuple[object, ...],
        command_args: list[str],
        env: Mapping[str, str],
        log_path: Path,
    ) -> None:
        if sys.platform.startswith("linux"):
            self._process: multiprocessing.process.BaseProcess | None = _fork_server().Process(
                target=target, args=args, daemon=False
            )
            with _helpers_with_base_environment():  # (re)starts the fork server if needed
                self._process.start()
            self._popen: subprocess.Popen[bytes] | None = None
        else:
            self._process = None
            command = [sys.executable, "-m", "butlers", *command_args]
            with log_path.open("ab") as log_file:
                self._popen = subprocess.Popen(
                    command,
                    env=dict(env),
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )

    @property
    def pid(self) -> int:
        if self._process is not None:
            assert self._process.pid is not None
            return self._process.pid
        assert self._popen is not None
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        if self._process is not None:
            return self._process.exitcode
        assert self._popen is not None
        return self._popen.returncode

    def poll(self) -> int | None:
        if self._process is not None:
            return None if self._process.is_alive() else self._process.exitcode
        assert self._popen is not None
        return self._popen.poll()

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout: float | None = None) -> int | None:
        if self._process is not None:
            self._process.join(timeout)
            if self._process.is_alive():
                raise subprocess.TimeoutExpired("butler", timeout or 0)
            return self._process.exitcode
        assert self._popen is not None
        return self._popen.wait(timeout)


class DashboardChild(ButlerChild):
    """The dashboard process of a local ecosystem (settings in its environment).

    A plain interpreter rather than a child of the fork server: the dashboard needs
    none of the butler runtime the fork server holds (about 60 MB it would map).
    """

    def __init__(self, env: Mapping[str, str], log_path: Path) -> None:
        self._process = None
        with log_path.open("ab") as log_file:
            self._popen = subprocess.Popen(
                [sys.executable, "-m", "butlers", "dashboard"],
                env={**env, "BUTLERS_PARENT_PID": str(os.getpid())},
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
