"""Validating call arguments against a function's signature without calling it.

Tools and jobs declare their arguments as annotated parameters (pydantic `Field`
bounds included). `arguments_validator(fn)` checks a dict of arguments exactly as
pydantic would when calling `fn` (same annotations, same defaults, unknown keys
refused), for when the arguments must be judged before anything runs: an approval
gate before it holds a call, a schedule before it stores a job's arguments.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection
from typing import Any, get_type_hints

from pydantic import TypeAdapter, ValidationError

from butlers import validation

Validator = Callable[[dict[str, Any]], None]


def arguments_validator(fn: Callable[..., Any], skip: Collection[str] = ()) -> Validator:
    """Raises pydantic's ValidationError for arguments `fn` would refuse."""
    signature = inspect.signature(fn)
    parameters = [p for name, p in signature.parameters.items() if name not in skip]
    hints = get_type_hints(fn, include_extras=True)

    def shape(*args: Any, **kwargs: Any) -> None:
        return None

    shape.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=parameters, return_annotation=None
    )
    shape.__annotations__ = {p.name: hints[p.name] for p in parameters if p.name in hints}
    adapter: TypeAdapter[Any] = TypeAdapter(shape)  # type: ignore[arg-type]

    def validate(arguments: dict[str, Any]) -> None:
        adapter.validate_python(arguments)

    return validate


def describe(exc: ValidationError) -> str:
    """`field: problem; …`, naming each argument at fault."""
    return validation.describe(exc.errors(), "(arguments)")
