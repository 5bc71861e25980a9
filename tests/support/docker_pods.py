"""A rendered Deployment's pod on the Docker engine: init containers to completion, then
the main container, which the caller probes. The images lane and its benchmark use it.

Each container's files (ConfigMap and Secret volumes) and environment file are written
under a work folder; every container this object starts is removed by `remove()`.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2 as httpx

from butlers.db.provision import provision
from butlers.spec import ButlerResource, schema_name
from butlers_operator import render
from butlers_operator.settings import OperatorSettings
from images.engine import docker
from tests.e2e.harness.localrun import ContainerLaunch, build_pod_launches
from tests.support.podrun import build_docker_run, build_env_file

INIT_TIMEOUT = 120.0
NAMESPACE = "butlers-images"


class PodFailed(RuntimeError):
    """A container exited badly or never became ready; the message holds its log."""


@dataclass(frozen=True)
class RenderedPod:
    """What the operator renders for one Butler: its Deployment, Secrets and ConfigMaps."""

    port: int
    schema: str
    deployment: dict[str, Any]
    secrets: dict[str, dict[str, Any]]
    config_maps: dict[str, dict[str, Any]]

    def pod(self, workdir: Path, extra_env: Mapping[str, str] | None = None) -> DockerPod:
        return DockerPod(self.deployment, self.secrets, self.config_maps, workdir, extra_env or {})


async def render_butler_pod(
    resource: ButlerResource, image: str, admin_dsn: str, schema_prefix: str, port: int
) -> RenderedPod:
    """Provision the Butler (on `port`) and render its objects with the operator's code."""
    target = render.ButlerTarget(
        name=resource.name,
        namespace=NAMESPACE,
        uid=f"uid-{resource.name}",
        spec=resource.spec.model_copy(update={"port": port}),
    )
    settings = OperatorSettings(
        namespaces=(NAMESPACE,), butler_image=image, schema_prefix=schema_prefix
    )
    schema = schema_name(resource.name, schema_prefix)
    credentials = await provision(admin_dsn, schema)
    dsn = render.build_butler_dsn(credentials, admin_dsn, None)
    database_port = urlsplit(admin_dsn).port or 5432
    by_kind: dict[str, dict[str, dict[str, Any]]] = {}
    for manifest in render.render_all(target, settings, credentials, dsn, database_port):
        by_kind.setdefault(manifest["kind"], {})[manifest["metadata"]["name"]] = manifest
    return RenderedPod(
        port=port,
        schema=schema,
        deployment=by_kind["Deployment"][target.name],
        secrets=by_kind["Secret"],
        config_maps=by_kind["ConfigMap"],
    )


@dataclass
class DockerPod:
    """One pod of `deployment`, its objects given by name (as the API returns them)."""

    deployment: Mapping[str, Any]
    secrets: Mapping[str, Mapping[str, Any]]
    config_maps: Mapping[str, Mapping[str, Any]]
    workdir: Path
    extra_env: Mapping[str, str] = field(default_factory=dict)
    started: list[str] = field(default_factory=list)

    def launches(self) -> list[ContainerLaunch]:
        return build_pod_launches(self.deployment, self.secrets, self.config_maps)

    def _image(self, launch: ContainerLaunch) -> str:
        pod = self.deployment["spec"]["template"]["spec"]
        containers = [*(pod.get("initContainers") or []), *pod["containers"]]
        return str(next(c["image"] for c in containers if c["name"] == launch.name))

    def run_argv(self, launch: ContainerLaunch) -> list[str]:
        """Write the container's files and environment; its `docker run` command."""
        name = f"butlers-pod-{launch.name}-{secrets.token_hex(4)}"
        root = self.workdir / name
        for path, content in launch.files.items():
            target = root / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
            target.chmod(0o644)
        env_file = self.workdir / f"{name}.env"
        merged = ContainerLaunch(launch.name, launch.argv, {**launch.env, **self.extra_env})
        env_file.write_text(build_env_file(merged))
        os.chmod(env_file, 0o600)
        return build_docker_run(
            self.deployment,
            launch,
            image=self._image(launch),
            name=name,
            env_file=str(env_file),
            files_root=str(root),
        )

    async def start(self, launch: ContainerLaunch) -> str:
        argv = self.run_argv(launch)
        name = argv[argv.index("--name") + 1]
        self.started.append(name)
        await asyncio.to_thread(docker, *argv[1:], timeout=60)
        return name

    async def run_init(self, launch: ContainerLaunch, timeout: float = INIT_TIMEOUT) -> str:
        """Run an init container to completion; its log. A non-zero exit is `PodFailed`."""
        name = await self.start(launch)
        result = await asyncio.to_thread(docker, "wait", name, timeout=timeout)
        code = int(result.stdout.strip() or -1)
        log = await self.logs(name, limit=None)
        if code != 0:
            raise PodFailed(f"init container {launch.name} exited with {code}:\n{log}")
        return log

    async def start_pod(self) -> str:
        """Init containers in order, then the main container (running): its name."""
        *inits, main = self.launches()
        for launch in inits:
            await self.run_init(launch)
        return await self.start(main)

    async def logs(self, name: str, limit: int | None = 20000) -> str:
        """The container's output (its last `limit` characters; None: all of it)."""
        result = await asyncio.to_thread(docker, "logs", name, check=False, timeout=30)
        output = result.stdout + result.stderr
        return output if limit is None else output[-limit:]

    async def running(self, name: str) -> bool:
        result = await asyncio.to_thread(
            docker, "inspect", "--format", "{{.State.Running}}", name, check=False, timeout=30
        )
        return result.stdout.strip() == "true"

    async def wait_http(self, name: str, url: str, timeout: float = 60.0) -> float:
        """Until `url` answers 200 (seconds waited); `PodFailed` if the container exits."""
        started = time.monotonic()
        deadline = started + timeout
        async with httpx.AsyncClient(timeout=2.0) as client:
            while True:
                try:
                    if (await client.get(url)).status_code == 200:
                        return time.monotonic() - started
                except httpx.HTTPError:
                    pass
                if not await self.running(name):
                    log = await self.logs(name)
                    raise PodFailed(f"{name} exited before {url} answered:\n{log}")
                if time.monotonic() > deadline:
                    log = await self.logs(name)
                    raise PodFailed(f"{url} not 200 after {timeout:.0f} s:\n{log}")
                await asyncio.sleep(0.05)

    async def remove(self) -> None:
        if self.started:
            await asyncio.to_thread(docker, "rm", "--force", *self.started, check=False)
            self.started.clear()
