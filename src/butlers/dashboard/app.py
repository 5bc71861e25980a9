"""`create_app()`: the dashboard's FastAPI application.

Middleware (outermost first): security headers, CORS, trailing-slash
normalisation, authentication, secret masking, error catch-all. Routers: the core
routers first, then each module's router (from the static module registry), so
no module route can shadow a core path; the built UI is mounted last. The
lifespan builds every service (`services.build_dashboard`) and stops them all.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import APIRouter, FastAPI
from fastapi.routing import APIRoute
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from butlers import __version__
from butlers.dashboard.auth import AuthMiddleware, SecurityHeadersMiddleware
from butlers.dashboard.directory import Directory
from butlers.dashboard.envelopes import ErrorResponse
from butlers.dashboard.errors import ERROR_STATUSES, install_error_handlers
from butlers.dashboard.logins import Logins
from butlers.dashboard.masking import FingerprintRedactor, MaskingMiddleware
from butlers.dashboard.module_views import module_routers
from butlers.dashboard.routers import core_routers
from butlers.dashboard.routers.login import router as login_router
from butlers.dashboard.services import build_dashboard
from butlers.dashboard.static import SpaFiles
from butlers.settings import LOOPBACK_HOSTS, DashboardSettings

ERROR_RESPONSES: dict[int | str, dict[str, object]] = {
    status: {"model": ErrorResponse} for status in ERROR_STATUSES
}
# State keys may end with "/": those paths are never rewritten.
_KEEP_SLASH = re.compile(r"^/api/butlers/[^/]+/state/.+")


class TrailingSlashMiddleware:
    """`/api/butlers/` is `/api/butlers`: served directly, never redirected."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if (
            scope["type"] == "http"
            and path.startswith("/api/")
            and path.endswith("/")
            and not _KEEP_SLASH.match(path)
        ):
            path = path.rstrip("/") or "/"
            scope = {**scope, "path": path, "raw_path": path.encode()}
        await self.app(scope, receive, send)


def create_app(
    settings: DashboardSettings | None = None,
    *,
    directory: Directory | None = None,
    cors_origins: list[str] | None = None,
    static_dir: Path | None = None,
) -> FastAPI:
    settings = settings or DashboardSettings()
    # Filled by the lifespan once the butlers are known.
    redactor = FingerprintRedactor(settings.mask_fingerprints)
    logins = Logins()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        dashboard = await build_dashboard(settings, directory, redactor)
        app.state.dashboard = dashboard
        try:
            yield
        finally:
            await dashboard.aclose()

    app = FastAPI(
        title="Butlers dashboard API",
        version=__version__,
        openapi_url="/api/openapi.json",
        docs_url=None,
        redoc_url=None,
        redirect_slashes=False,
        lifespan=lifespan,
    )

    def login_secret() -> str | None:
        # The dashboard's own token, else the user's token of the ecosystem it shows.
        if settings.token:
            return settings.token
        dashboard = getattr(app.state, "dashboard", None)
        return dashboard.directory.mcp_token if dashboard is not None else None

    app.state.logins = logins
    app.state.login_secret = login_secret
    app.state.login_required = settings.login
    app.state.identity = settings.identity()
    app.include_router(login_router)  # first, like every core route: no module shadows it
    for _origin, router in api_routers():
        app.include_router(router, responses=ERROR_RESPONSES)
    app.mount("/", SpaFiles(static_dir or settings.static_dir))

    install_error_handlers(app)
    data_dir = str(settings.data_dir) if settings.data_dir and not settings.kube_namespace else None
    app.add_middleware(MaskingMiddleware, redactor=redactor, data_dir=data_dir)
    app.add_middleware(
        AuthMiddleware,
        logins=logins,
        secret=login_secret,
        identity=settings.identity(),
        login=settings.login,
        check_host=settings.host in LOOPBACK_HOSTS,
        cors_origins=_origins(settings, cors_origins),
        allowed_hosts=[settings.host, *settings.allowed_hosts],
    )
    app.add_middleware(TrailingSlashMiddleware)
    app.add_middleware(
        CORSMiddleware,
        allow_origins=_origins(settings, cors_origins),
        allow_credentials=True,
        allow_methods=["*"],
        allow_headers=["*"],
    )
    app.add_middleware(SecurityHeadersMiddleware)
    return app


def api_routers() -> list[tuple[str, APIRouter]]:
    """Every `/api` router in mounting order with its origin: the core's, then each
    module's (so no module route can shadow a core path)."""
    return [*(("core", r) for r in core_routers()), *module_routers()]


def api_routes_with_origin() -> list[tuple[str, APIRoute]]:
    """Every API route with its router's origin ("core" or a module's name), from the
    routers the app mounts (none of them nests another), by path and method."""
    routers = [*api_routers(), ("core", login_router)]
    routes = [(origin, r) for origin, router in routers for r in router.routes]
    return sorted(
        ((o, r) for o, r in routes if isinstance(r, APIRoute) and r.path.startswith("/api")),
        key=lambda item: (item[1].path, sorted(item[1].methods or ())),
    )


def api_routes() -> list[APIRoute]:
    return [route for _origin, route in api_routes_with_origin()]


def _origins(settings: DashboardSettings, override: list[str] | None) -> list[str]:
    return list(override if override is not None else settings.cors_origins)
