"""Serving the built web UI (a single-page app) from a directory, mounted last.

A built UI goes into `src/butlers/dashboard/static/` by default
(`BUTLERS_DASHBOARD_STATIC_DIR` overrides). Files are looked up per request; any
other path gets `index.html` (client-side routes). `dev.py` builds the UI from `frontend/`;
where it is not built, every page says so and points at the API.
"""

from __future__ import annotations

from pathlib import Path

from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.types import Receive, Scope, Send

from butlers.dashboard.errors import error_response

DEFAULT_STATIC_DIR = Path(__file__).parent / "static"

NOT_BUILT = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Butlers dashboard: UI not built</title>
</head><body><main><h1>The dashboard UI is not built</h1>
<p>The API is running (see <a href="/api/health">/api/health</a>), but there is no
built web UI in <code>{directory}</code>.</p>
<p>Build it with <code>python3 dev.py setup</code> (or <code>npm ci &amp;&amp; npm run
build</code> in <code>frontend/</code>). The HTTP API works without it: its routes are listed
in <code>docs/dashboard/routes.md</code> and described by <a href="/api/openapi.json">the
OpenAPI schema</a>.</p>
</main></body></html>
"""


class SpaFiles:
    def __init__(self, directory: Path | None = None) -> None:
        self.directory = (directory or DEFAULT_STATIC_DIR).resolve()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = self._response(scope)
        await response(scope, receive, send)

    def _response(self, scope: Scope) -> Response:
        path: str = scope["path"]
        if path == "/api" or path.startswith("/api/"):
            return error_response(404, "NOT_FOUND", "no such API route")
        if scope["method"] not in ("GET", "HEAD"):
            return error_response(405, "METHOD_NOT_ALLOWED", "the UI is read with GET")
        index = self.directory / "index.html"
        if not index.is_file():
            return HTMLResponse(
                NOT_BUILT.format(directory=self.directory),
                status_code=503,
                headers={"Cache-Control": "no-store"},
            )
        candidate = (self.directory / path.lstrip("/")).resolve()
        if candidate.is_file() and candidate.is_relative_to(self.directory):
            immutable = "/assets/" in path
            cache = "public, max-age=31536000, immutable" if immutable else "no-cache"
            return FileResponse(candidate, headers={"Cache-Control": cache})
        if Path(path).suffix and not path.endswith(".html"):
            return error_response(404, "NOT_FOUND", f"no file {path}")
        return FileResponse(index, headers={"Cache-Control": "no-cache"})
