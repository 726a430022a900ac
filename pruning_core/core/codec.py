"""A generic JSON codec for frozen dataclasses: field order is key order, no per-field code.

A :class:`JsonRecord` dataclass is written field by field in declaration order. Field metadata
adjusts the key: ``json`` renames it, ``flatten`` merges a nested record's keys into the parent,
``decode`` gives the function that reads a non-dataclass value (``HeadMask.from_lists``). Values
derived from others (a speed-up, a total) are ``init=False`` fields that ``__post_init__`` fills
with :meth:`JsonRecord._derive`: they are written, and recomputed (not read) when decoding.
Decoding follows the type hints: ``int``/``float``/``str``, ``X | None``, ``tuple[X, ...]``,
``Mapping`` (copied as a dict) and nested records. A missing key with a default takes the default.
"""
from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, fields
from typing import Any, ClassVar, TypeVar

from pruning_core.core.errors import FormatError

R = TypeVar("R", bound="JsonRecord")


def json_field(key: str) -> dict:
    """Field metadata renaming the JSON key: ``field(metadata=json_field("median_s"))``."""
    return {"json": key}


def encode(value: Any) -> Any:
    """A JSON-ready copy of ``value`` (records by field, ``to_json()`` objects, mappings, sequences)."""
    if isinstance(value, JsonRecord):
        out: dict[str, Any] = {}
        for f in fields(value):
            encoded = encode(getattr(value, f.name))
            if f.metadata.get("flatten"):
                out.update(encoded)
            else:
                out[f.metadata.get("json", f.name)] = encoded
        return out
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, Mapping):
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    return value


def decode(cls: type[R], data: Mapping) -> R:
    """Build ``cls`` from what :func:`encode` wrote (raises KeyError/TypeError/ValueError if malformed)."""
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        if not f.init:
            continue
        if f.metadata.get("flatten"):
            raw = data
        else:
            key = f.metadata.get("json", f.name)
            if key not in data and (f.default is not MISSING or f.default_factory is not MISSING):
                continue
            raw = data[key]
        reader = f.metadata.get("decode")
        kwargs[f.name] = reader(raw) if reader is not None else _value(hints[f.name], raw)
    return cls(**kwargs)


def _value(tp: Any, raw: Any) -> Any:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if raw is None and type(None) in args:
            return None
        return _value(next(a for a in args if a is not type(None)), raw)
    if origin is tuple:
        return tuple(_value(args[0], r) for r in raw)
    if tp is Mapping or origin is Mapping or tp is dict or origin is dict:
        return dict(raw or {})
    if isinstance(tp, type) and issubclass(tp, JsonRecord):
        return decode(tp, raw)
    if tp in (int, float, str, bool):
        return tp(raw)
    raise TypeError(f"no JSON reader for {tp!r}")


class JsonRecord:
    """Mixin for frozen dataclasses written and read by this codec."""

    _malformed: ClassVar[str] = "A JSON block is malformed"

    def to_json(self) -> dict:
        return encode(self)

    @classmethod
    def from_json(cls: type[R], data: Mapping) -> R:
        try:
            return decode(cls, data)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise FormatError(f"{cls._malformed} ({exc!r}).") from None

    def _derive(self, **values: Any) -> None:
        """Set ``init=False`` fields of a frozen dataclass (call from ``__post_init__``)."""
        for name, value in values.items():
            object.__setattr__(self, name, value)
