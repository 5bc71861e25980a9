"""What a route says about its support status, for the generated route inventory
(`hack/dashboard_inventory.py`) and the OpenAPI schema (`x-butlers-support`)."""

from __future__ import annotations

from typing import Any

SUPPORT_KEY = "x-butlers-support"


def not_supported(reason: str) -> dict[str, Any]:
    """`openapi_extra` of a route that always answers 501 NOT_SUPPORTED."""
    return {SUPPORT_KEY: {"status": "501", "reason": reason}}


def empty_data(reason: str) -> dict[str, Any]:
    """`openapi_extra` of a route that answers honestly empty data (`meta.supported: false`)."""
    return {SUPPORT_KEY: {"status": "empty", "reason": reason}}
