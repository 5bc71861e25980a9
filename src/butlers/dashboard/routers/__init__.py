"""The dashboard's core routers, in the order they are mounted."""

from __future__ import annotations

from fastapi import APIRouter


def core_routers() -> list[APIRouter]:
    from butlers.dashboard.routers import butlers, tools

    return [butlers.router, tools.router]
