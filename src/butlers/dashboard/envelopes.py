"""The response envelopes of every route: `ApiResponse`, `PaginatedResponse`, `ErrorResponse`."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, computed_field

T = TypeVar("T")


class Meta(BaseModel):
    """Extensible metadata of a response.

    `failed_butlers` names every butler whose part of a cross-butler answer is
    missing (unreachable schema, timeout); `supported`/`reason` mark data this
    project does not have (an honest empty answer, never a fake).
    """

    model_config = ConfigDict(extra="allow")

    failed_butlers: list[str] = Field(default_factory=list)
    supported: bool = True
    reason: str | None = None


class PaginationMeta(Meta):
    total: int
    offset: int
    limit: int
    next_cursor: str | None = Field(
        default=None, description="Opaque keyset cursor of the next page, where supported."
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def has_more(self) -> bool:
        return self.offset + self.limit < self.total


class ApiResponse(BaseModel, Generic[T]):
    data: T
    meta: Meta = Field(default_factory=Meta)


class PaginatedResponse(BaseModel, Generic[T]):
    data: list[T]
    meta: PaginationMeta


class ErrorDetail(BaseModel):
    code: str
    message: str
    butler: str | None = None
    details: dict[str, Any] | None = None


class ErrorResponse(BaseModel):
    error: ErrorDetail


def ok(data: Any, **meta: Any) -> dict[str, Any]:
    """An `ApiResponse` body."""
    return {"data": data, "meta": Meta(**meta)}


def page(data: list[Any], *, total: int, offset: int, limit: int, **meta: Any) -> dict[str, Any]:
    """A `PaginatedResponse` body."""
    return {"data": data, "meta": PaginationMeta(total=total, offset=offset, limit=limit, **meta)}
