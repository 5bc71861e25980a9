"""A module's webhook route finds its handler per push: gone while the module is off."""

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from starlette.testclient import TestClient

from butlers.daemon.http import _live


async def _first(_request: Request) -> Response:
    return PlainTextResponse("first")


async def _second(_request: Request) -> Response:
    return PlainTextResponse("second")


def test_a_push_reaches_the_handler_registered_now() -> None:
    webhooks = {"/hook": _first}
    app = Starlette(routes=[Route("/hook", _live(webhooks, "/hook"), methods=["POST"])])
    with TestClient(app) as client:
        assert client.post("/hook").text == "first"
        del webhooks["/hook"]  # its module switched off
        off = client.post("/hook")
        assert off.status_code == 404 and "switched off" in off.json()["error"]
        webhooks["/hook"] = _second  # switched on again: a new instance
        assert client.post("/hook").text == "second"
