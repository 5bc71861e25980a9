"""Routes of every registered module's views (`butlers.modules.views`), mounted after the
core routers so no module path can shadow a core one.

A view is data (path, a store's `Listing` or detail read, filters); this file turns it
into a route: the response model derived from the listing's record (a `butler` field
first; UUIDs as strings), the filters as query parameters, the rows read through the
module's store on the dashboard's read-only pools of the butlers enabling the module.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import types
import typing
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields, is_dataclass
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, create_model

from butlers.dashboard.context import Ctx, Dashboard
from butlers.dashboard.envelopes import ApiResponse, PaginatedResponse, ok, page
from butlers.dashboard.errors import NotFound
from butlers.dashboard.pagination import Limit, Offset
from butlers.dashboard.sql import parse_uuid, row_json
from butlers.jsonutil import to_json
from butlers.modules.view import Listing, View
from butlers.modules.views import ModuleViews, all_module_views
from butlers.stores.records import Record

# -- reading a listing across butlers ---------------------------------------------------


def butlers_of(dashboard: Dashboard, module: str, butler: str | None = None) -> list[str]:
    """The butlers enabling `module` (or only `butler`, which must exist)."""
    names = dashboard.with_module(module)
    if butler is not None:
        dashboard.butler(butler)
        names = [n for n in names if n == butler]
    return names


async def listing_page(
    dashboard: Dashboard,
    listing: Listing,
    names: Sequence[str],
    filters: Mapping[str, Any],
    *,
    offset: int,
    limit: int,
    build: Callable[[str, Any], Any] | None = None,
) -> dict[str, Any]:
    """One exact page of `listing` merged across `names`: each butler returns its first
    `offset + limit` rows in the page's order and its count; models are built for the page
    only (`build(butler, row)`, by default the row's JSON with a `butler` field)."""
    where, args = listing.where(filters)
    counts, rows = await asyncio.gather(
        dashboard.db.fan_out(listing.count_sql(where), *args, butler_names=names),
        dashboard.db.fan_out(listing.rows_sql(where, offset + limit), *args, butler_names=names),
    )
    has_id = any(f.name == "id" for f in fields(listing.record))

    def key(item: tuple[str, Any]) -> Any:
        row = item[1]
        return (row[listing.order_key], str(row["id"]) if has_id else "")

    merged = sorted(rows.rows(), key=key, reverse=not listing.oldest_first)
    total = sum(int(r[0]["count"]) for r in counts.results.values() if r)
    make = build or _row_with_butler
    return page(
        [make(name, row) for name, row in merged[offset : offset + limit]],
        total=total,
        offset=offset,
        limit=limit,
        failed_butlers=sorted(set(counts.failed_butlers) | set(rows.failed_butlers)),
    )


async def listing_all(
    dashboard: Dashboard, listing: Listing, names: Sequence[str], filters: Mapping[str, Any]
) -> dict[str, Any]:
    """Every row of an unpaged listing (bounded per butler), butler by butler."""
    where, args = listing.where(filters)
    fan = await dashboard.db.fan_out(
        listing.rows_sql(where, listing.limit), *args, butler_names=names
    )
    return ok([_row_with_butler(n, r) for n, r in fan.rows()], failed_butlers=fan.failed_butlers)


def _row_with_butler(name: str, row: Any) -> dict[str, Any]:
    return {"butler": name, **row_json(row)}


# -- response models from records --------------------------------------------------------


def _field_type(annotation: Any) -> Any:
    """A record field's type as the API shows it: UUIDs as strings, nested records as
    JSON objects, tuples as lists."""
    if annotation is uuid.UUID:
        return str
    if isinstance(annotation, type) and is_dataclass(annotation):
        return dict[str, Any]
    origin = typing.get_origin(annotation)
    if origin in (types.UnionType, typing.Union):
        parts = tuple(_field_type(a) for a in typing.get_args(annotation))
        return typing.Union[parts]  # noqa: UP007
    if origin is tuple:
        item = typing.get_args(annotation)[0]
        return list[_field_type(item)]  # type: ignore[misc]
    return annotation


def derive_model(name: str, record: type[Record], overrides: Mapping[str, Any]) -> type[BaseModel]:
    """The pydantic model of `record` as served: `butler` first, then the record's fields."""
    hints = typing.get_type_hints(record)
    definitions: dict[str, Any] = {"butler": (str, ...)}
    for f in fields(record):
        definitions[f.name] = (overrides.get(f.name, _field_type(hints[f.name])), ...)
    model: type[BaseModel] = create_model(name, **definitions)
    return model


# -- routes ------------------------------------------------------------------------------


def _operation(view: View) -> str:
    if view.kind == "detail":
        return view.what
    segment = [s for s in view.path.split("/") if s and not s.startswith("{")][-1]
    return segment.replace("-", "_")


def _filter_parameters(view: View) -> list[inspect.Parameter]:
    params = []
    for f in view.filters:
        kind: Any = Literal[f.choices] if f.choices else f.type
        query = Query(max_length=f.max_length, description=f.description or None)
        plain = f.choices or f.type is not str
        annotation = kind | None if plain else Annotated[kind | None, query]
        params.append(
            inspect.Parameter(
                f.name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation
            )
        )
    return params


def _with_signature(
    function: Callable[..., Any], name: str, params: list[inspect.Parameter]
) -> Any:
    function.__name__ = name
    function.__qualname__ = name
    function.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return function


def _keyword(name: str, annotation: Any, default: Any = inspect.Parameter.empty) -> Any:
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default
    )


def _page_route(router: APIRouter, module: str, view: View, model: type[BaseModel]) -> None:
    listing = view.listing
    assert listing is not None
    names = [f.name for f in view.filters]

    async def endpoint(**kwargs: Any) -> dict[str, Any]:
        dashboard: Dashboard = kwargs["dashboard"]
        filters = {n: kwargs[n] for n in names}
        return await listing_page(
            dashboard,
            listing,
            butlers_of(dashboard, module),
            filters,
            offset=kwargs["offset"],
            limit=kwargs["limit"],
        )

    params = [
        _keyword("dashboard", Ctx),
        *_filter_parameters(view),
        _keyword("offset", Offset, 0),
        _keyword("limit", Limit, 50),
    ]
    router.add_api_route(
        view.path,
        _with_signature(endpoint, _operation(view), params),
        methods=["GET"],
        response_model=PaginatedResponse[model],  # type: ignore[valid-type]
        description=view.summary or None,
    )


def _list_route(router: APIRouter, module: str, view: View, model: type[BaseModel]) -> None:
    listing = view.listing
    assert listing is not None
    names = [f.name for f in view.filters]

    async def endpoint(**kwargs: Any) -> dict[str, Any]:
        dashboard: Dashboard = kwargs["dashboard"]
        filters = {n: kwargs[n] for n in names}
        return await listing_all(dashboard, listing, butlers_of(dashboard, module), filters)

    params = [_keyword("dashboard", Ctx), *_filter_parameters(view)]
    router.add_api_route(
        view.path,
        _with_signature(endpoint, _operation(view), params),
        methods=["GET"],
        response_model=ApiResponse[list[model]],  # type: ignore[valid-type]
        description=view.summary or None,
    )


def _detail_route(router: APIRouter, module: str, view: View, model: type[BaseModel]) -> None:
    read = view.read
    assert read is not None
    butler_param, id_param = re.findall(r"{(\w+)}", view.path)[-2:]

    async def endpoint(**kwargs: Any) -> dict[str, Any]:
        dashboard: Dashboard = kwargs["dashboard"]
        butler: str = kwargs[butler_param]
        raw_id: str = kwargs[id_param]
        dashboard.butler(butler)
        key = parse_uuid(raw_id, f"{view.what} id")
        record = await dashboard.db.read(butler, lambda pool: read(pool, key))
        if record is None:
            raise NotFound(f"no {view.what} {raw_id} on butler {butler!r}", butler=butler)
        return ok(model(butler=butler, **to_json(record)))  # type: ignore[arg-type]

    params = [
        _keyword(butler_param, Annotated[str, Path()]),
        _keyword(id_param, Annotated[str, Path()]),
        _keyword("dashboard", Ctx),
    ]
    router.add_api_route(
        view.path,
        _with_signature(endpoint, _operation(view), params),
        methods=["GET"],
        response_model=ApiResponse[model],  # type: ignore[valid-type]
        description=view.summary or None,
    )


ROUTES = {"page": _page_route, "list": _list_route, "detail": _detail_route}


def module_router(views: ModuleViews) -> APIRouter:
    router = APIRouter(tags=[views.module])
    for view in views.views:
        model = derive_model(view.model, view.row_record(), view.field_types)
        ROUTES[view.kind](router, views.module, view, model)
    return router


def module_routers() -> list[tuple[str, APIRouter]]:
    """(module name, router) of every module with views, by module name."""
    return [(v.module, module_router(v)) for v in all_module_views() if v.views]
