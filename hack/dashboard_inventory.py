"""The route inventory: every API route with its response model and support status,
generated from the app's route table into `docs/dashboard/` (with the OpenAPI
schema the web UI's types are generated from).

    .venv/bin/python hack/dashboard_inventory.py           # rewrite the docs
    .venv/bin/python hack/dashboard_inventory.py --check   # exit 1 when they are stale

A development tool: it writes into the source tree, so it is not part of the wheel.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from butlers.dashboard.app import api_routes_with_origin, create_app
from butlers.dashboard.support import SUPPORT_KEY

DOCS = Path(__file__).resolve().parents[1] / "docs" / "dashboard"


def _model_name(route: Any) -> str:
    model = route.response_model
    if model is None:
        return "text/event-stream" if route.path == "/api/events" else "—"
    return getattr(model, "__name__", str(model)).replace("butlers.dashboard.", "")


def render_markdown(app: FastAPI) -> str:
    lines = [
        "# Dashboard API: route inventory",
        "",
        "Generated from the route table by `python hack/dashboard_inventory.py`; a test",
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
    app = create_app()
    stale = [
        path
        for path, text in documents(app).items()
        if not path.exists() or path.read_text() != text
    ]
    if "--check" in argv:
        for path in stale:
            print(f"{path} is stale: run python hack/dashboard_inventory.py", file=sys.stderr)
        return 1 if stale else 0
    for path, text in documents(app).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
