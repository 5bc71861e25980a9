"""Build the butler and operator images: `python3 -m images.build [options] [IMAGE ...]`.

Uses the legacy builder (`DOCKER_BUILDKIT=0`): no BuildKit frontend to pull, and no
provenance attestation, whose image index `kind load` cannot import (Docker >= 29).
The bases come from `images.base` (a Debian root filesystem made here, or a public
Python image with `--base`); the build itself needs no network.

    python3 -m images.build                          # both, as ghcr.io/butlers-dev/*:0.1.0
    python3 -m images.build --registry R --tag T     # R/butler:T and R/operator:T
    python3 -m images.build --base docker.io/library/python:3.11-slim-bookworm
    python3 -m images.build --push                   # and push both tags
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from images.base import Bases, ensure_bases
from images.engine import EngineUnavailable, docker, ensure_engine

ROOT = Path(__file__).resolve().parent.parent
NAMES = ("butler", "operator")
REGISTRY = "ghcr.io/butlers-dev"
TAG = "0.1.0"
# What the Dockerfiles copy (.dockerignore lets only these in): a change rebuilds.
CONTEXT = ("pyproject.toml", "README.md", "src", "operator", "images/install.py", "frontend")
BUILD_TIMEOUT = 1800.0


@dataclass(frozen=True)
class Built:
    name: str
    tag: str
    seconds: float
    size_bytes: int

    @property
    def size_mb(self) -> float:
        """Megabytes as `docker images` counts them (10^6 bytes)."""
        return self.size_bytes / 1e6


def dockerfile(name: str, root: Path = ROOT) -> Path:
    return root / "images" / name / "Dockerfile"


def _context_files(root: Path) -> Iterable[Path]:
    for entry in CONTEXT:
        path = root / entry
        if path.is_file():
            yield path
        else:
            yield from sorted(
                p
                for p in path.rglob("*")
                if p.is_file() and "__pycache__" not in p.parts and not _left_out(root, p)
            )


def _left_out(root: Path, path: Path) -> bool:
    parts = path.relative_to(root).parts
    return parts[:2] == ("frontend", "node_modules") or parts[:4] == (
        "src",
        "butlers",
        "dashboard",
        "static",
    )


def content_key(name: str, bases: Bases, root: Path = ROOT) -> str:
    """A digest of everything an image is built from: its sources, Dockerfile and bases."""
    digest = hashlib.sha256()
    for path in [dockerfile(name, root), *_context_files(root)]:
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(f"{bases.runtime}\0{bases.build}".encode())
    return digest.hexdigest()[:16]


def build_command(
    name: str, tag: str, bases: Bases, root: Path = ROOT, labels: Sequence[str] = ()
) -> list[str]:
    """The `docker build` of one image (run with DOCKER_BUILDKIT=0)."""
    return [
        "docker", "build", "--network", "none", "--force-rm",
        "-f", str(dockerfile(name, root)), "-t", tag,
        "--build-arg", f"BASE_IMAGE={bases.runtime}",
        "--build-arg", f"BUILD_IMAGE={bases.build}",
        *(arg for label in labels for arg in ("--label", label)),
        str(root),
    ]  # fmt: skip


def image_size(tag: str) -> int:
    return int(docker("image", "inspect", "--format", "{{.Size}}", tag, timeout=30).stdout)


def build_image(
    name: str, tag: str, bases: Bases, root: Path = ROOT, labels: Sequence[str] = ()
) -> Built:
    started = time.monotonic()
    argv = build_command(name, tag, bases, root, labels)
    result = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        env={**os.environ, "DOCKER_BUILDKIT": "0"},
        check=False,
    )
    if result.returncode != 0:
        output = (result.stdout + result.stderr).strip()[-3000:]
        raise RuntimeError(f"{' '.join(argv)} exited with {result.returncode}:\n{output}")
    return Built(name, tag, time.monotonic() - started, image_size(tag))


def build_all(
    tags: dict[str, str], bases: Bases, root: Path = ROOT, labels: Sequence[str] = ()
) -> list[Built]:
    return [build_image(name, tag, bases, root, labels) for name, tag in tags.items()]


def prune(repository: str, keep: Iterable[str], older_than_seconds: float = 3600.0) -> list[str]:
    """Remove the tags of `repository` other than `keep` made more than an hour ago (tests
    tag every checkout's images by content): their layers go with them. Tags still in use
    by a container, or made recently (another session may be about to run them), stay."""
    listing = docker(
        "image", "ls", repository, "--format", "{{.Repository}}:{{.Tag}}\t{{.CreatedAt}}"
    ).stdout
    removed = []
    now = time.time()
    for row in listing.splitlines():
        tag, created = row.split("\t", 1)
        if tag in keep or now - _parse_created(created) < older_than_seconds:
            continue
        if docker("image", "rm", tag, check=False, timeout=120).returncode == 0:
            removed.append(tag)
    return removed


def _parse_created(text: str) -> float:
    """`docker image ls`'s CreatedAt (`2026-11-23 21:50:01 +0000 UTC`) as a timestamp."""
    from datetime import datetime

    return datetime.strptime(" ".join(text.split()[:3]), "%Y-%m-%d %H:%M:%S %z").timestamp()


def report(built: Iterable[Built], bases: Bases, prepared_seconds: float) -> list[str]:
    lines = [f"bases ({bases.kind}) ready in {prepared_seconds:.1f} s: {bases.runtime}"]
    goals = {"butler": 250, "operator": 200}
    for image in built:
        goal = goals.get(image.name)
        verdict = (
            ""
            if goal is None
            else f" (goal <= {goal} MB: " + ("met)" if image.size_mb <= goal else "NOT met)")
        )
        lines.append(
            f"{image.name:<9} {image.tag}  {image.size_mb:.0f} MB{verdict}, "
            f"built in {image.seconds:.1f} s"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m images.build", description=__doc__)
    parser.add_argument("images", nargs="*", metavar="IMAGE", help=f"{' and '.join(NAMES)}")
    parser.add_argument("--registry", default=REGISTRY)
    parser.add_argument("--tag", default=TAG)
    parser.add_argument(
        "--base", default="auto", help="auto (default), debian, or a public Python 3.11 image"
    )
    parser.add_argument("--label", action="append", default=[], help="KEY=VALUE, repeatable")
    parser.add_argument("--refresh", action="store_true", help="remake the bases and wheels")
    parser.add_argument("--push", action="store_true", help="push the tags after building")
    args = parser.parse_args(argv)
    names = args.images or list(NAMES)
    unknown = sorted(set(names) - set(NAMES))
    if unknown:
        parser.error(f"unknown image {', '.join(unknown)} (images: {', '.join(NAMES)})")
    try:
        ensure_engine()
        started = time.monotonic()
        bases = ensure_bases(args.base, ROOT, refresh=args.refresh)
        prepared = time.monotonic() - started
    except EngineUnavailable as exc:
        print(f"images: {exc}", file=sys.stderr)
        return 2
    tags = {name: f"{args.registry}/{name}:{args.tag}" for name in names}
    built = build_all(tags, bases, ROOT, args.label)
    for line in report(built, bases, prepared):
        print(line)
    if args.push:
        for image in built:
            docker("push", image.tag, timeout=BUILD_TIMEOUT)
            print(f"pushed {image.tag}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
