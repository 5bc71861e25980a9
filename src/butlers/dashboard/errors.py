"""Domain errors of the dashboard and their error envelopes.

Every failure reaches the client as `{"error": {"code", "message", "butler",
"details"}}` with a status that says what kind of failure it was. Unexpected
exceptions become `INTERNAL_ERROR` (logged with their traceback) and never leak
their text.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError as PydanticValidationError
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from butlers import validation

log = logging.getLogger(__name__)


class DashboardError(Exception):
    code = "INTERNAL_ERROR"
    status = 500

    def __init__(
        self, message: str, *, butler: str | None = None, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.butler = butler
        self.details = details


class ValidationFailed(DashboardError):
    code, status = "VALIDATION_ERROR", 400


class Unauthorized(DashboardError):
    code, status = "UNAUTHORIZED", 401


class NotFound(DashboardError):
    code, status = "NOT_FOUND", 404


class ButlerNotFound(DashboardError):
    code, status = "BUTLER_NOT_FOUND", 404


class ToolFailed(DashboardError):
    """The butler ran the tool and it refused or failed (its message is passed on)."""

    code, status = "TOOL_ERROR", 422


class NotSupported(DashboardError):
    """Something the seed names that this project does not have."""

    code, status = "NOT_SUPPORTED", 501


class ButlerUnreachable(DashboardError):
    code, status = "BUTLER_UNREACHABLE", 502


class DatabaseUnavailable(DashboardError):
    code, status = "DATABASE_UNAVAILABLE", 503


# Statuses a client can be told about, for the OpenAPI schema of every route.
ERROR_STATUSES = (400, 401, 403, 404, 422, 500, 501, 502, 503)
_HTTP_CODES = {
    400: "VALIDATION_ERROR",
    401: "UNAUTHORIZED",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    413: "PAYLOAD_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE",
}


def error_body(
    code: str, message: str, butler: str | None = None, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "butler": butler, "details": details}}


def error_response(
    status: int,
    code: str,
    message: str,
    butler: str | None = None,
    details: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    return JSONResponse(error_body(code, message, butler, details), status, headers=headers)


async def _dashboard_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, DashboardError)
    if exc.status >= 500 and exc.status != 501:
        log.warning("%s: %s", exc.code, exc.message)
    headers = {"WWW-Authenticate": 'Bearer realm="butlers"'} if exc.status == 401 else None
    return error_response(exc.status, exc.code, exc.message, exc.butler, exc.details, headers)


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = [
        {"field": path, "message": message}
        for path, message in validation.problems(exc.errors(), "")
    ]
    summary = "; ".join(f"{p['field']}: {p['message']}" for p in problems)
    return error_response(400, "VALIDATION_ERROR", summary, details={"errors": problems})


async def _value_error(_request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, PydanticValidationError):
        # A model the server built itself is wrong: a bug, not the client's input.
        log.error("invalid server-side data", exc_info=exc)
        return error_response(500, "INTERNAL_ERROR", "Internal server error")
    return error_response(400, "VALIDATION_ERROR", str(exc))


async def _http_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    code = _HTTP_CODES.get(exc.status_code, "INTERNAL_ERROR" if exc.status_code >= 500 else "ERROR")
    message = exc.detail if isinstance(exc.detail, str) else "request failed"
    if exc.status_code == 404:
        message = "no such API route"
    headers = dict(exc.headers) if exc.headers else None
    return error_response(exc.status_code, code, message, headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(DashboardError, _dashboard_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(ValueError, _value_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_middleware(CatchAllErrorMiddleware)


class CatchAllErrorMiddleware:
    """Turns any exception the handlers above did not take into `INTERNAL_ERROR`."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception:
            log.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            if started:
                raise
            response = error_response(500, "INTERNAL_ERROR", "Internal server error")
            await response(scope, receive, send)
