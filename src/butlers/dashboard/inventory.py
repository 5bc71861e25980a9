"""The route inventory: every API route with its response model and support status,
generated from the app's route table into `docs/dashboard/` (with the OpenAPI
schema the web UI's types are generated from).

    python -m butlers.dashboard.inventory           # rewrite the docs
    python -m butlers.dashboard.inventory --check   # exit 1 when they are stale
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute

SUPPORT_KEY = "x-butlers-support"
DOCS = Path(__file__).resolve().parents[3] / "docs" / "dashboard"


def not_supported(reason: str) -> dict[str, Any]:
    """`openapi_extra` of a route that always answers 501 NOT_SUPPORTED."""
    return {SUPPORT_KEY: {"status": "501", "reason": reason}}


def empty_data(reason: str) -> dict[str, Any]:
    """`openapi_extra` of a route that answers honestly empty data (`meta.supported: false`)."""
    return {SUPPORT_KEY: {"status": "empty", "reason": reason}}


def api_routes_with_origin() -> list[tuple[str, APIRoute]]:
    """Every API route with its router's origin ("core" or a module's name), from the
    routers the app mounts (none of them nests another)."""
    from butlers.dashboard.app import api_routers
    from butlers.dashboard.routers.login import router as login_router

    routers = [*api_routers(), ("core", login_router)]
    routes = [(origin, r) for origin, router in routers for r in router.routes]
    return sorted(
        ((o, r) for o, r in routes if isinstance(r, APIRoute) and r.path.startswith("/api")),
        key=lambda item: (item[1].path, sorted(item[1].methods or ())),
    )


def api_routes() -> list[APIRoute]:
    return [route for _origin, route in api_routes_with_origin()]


def _model_name(route: APIRoute) -> str:
    model = route.response_model
    if model is None:
        return "text/event-stream" if route.path == "/api/events" else "—"
    return getattr(model, "__name__", str(model)).replace("butlers.dashboard.", "")


def render_markdown(app: FastAPI) -> str:
    lines = [
        "# Dashboard API: route inventory",
        "",
        "Generated from the route table by `python -m butlers.dashboard.inventory`; a test",
        "fails when this file is stale. Every JSON answer is an envelope: `ApiResponse`",
        "(`{data, meta}`), `PaginatedResponse` (`{data, meta: {total, offset, limit,",
        "has_more, next_cursor}}`) or `ErrorResponse` (`{error: {code, message, butler,",
        "details}}`). The OpenAPI schema is `openapi.json` beside this file.",
        "",
        "| method | path | router | response | status |",
        "|---|---|---|---|---|",
    ]
    for origin, route in api_routes_with_origin():
        support = (route.openapi_extra or {}).get(SUPPORT_KEY) or {}
        if support.get("status") == "501":
            status = f"501 NOT_SUPPORTED: {support['reason']}"
        elif support.get("status") == "empty":
            status = f"done (empty data: {support['reason']})"
        else:
            status = "done"
        for method in sorted(route.methods or ()):
            lines.append(
                f"| {method} | `{route.path}` | {origin} | `{_model_name(route)}` | {status} |"
            )
    return "\n".join(lines) + "\n"


def render_openapi(app: FastAPI) -> str:
    return json.dumps(app.openapi(), indent=2, sort_keys=True) + "\n"


def documents(app: FastAPI) -> dict[Path, str]:
    return {DOCS / "routes.md": render_markdown(app), DOCS / "openapi.json": render_openapi(app)}


def main(argv: list[str]) -> int:
    from butlers.dashboard.app import create_app

    app = create_app()
    stale = [
        path
        for path, text in documents(app).items()
        if not path.exists() or path.read_text() != text
    ]
    if "--check" in argv:
        for path in stale:
            print(f"{path} is stale: run python -m butlers.dashboard.inventory", file=sys.stderr)
        return 1 if stale else 0
    for path, text in documents(app).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
