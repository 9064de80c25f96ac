"""How `Wire` classes cross the LSP boundary: rules added to pygls' own cattrs converter.

lsprotocol's converter already puts camelCase on the wire; for subclasses of
`Wire` (lsp/protocol.py) two rules of ours replace its defaults:

- structuring is strict: no coercion (`42` is not a string), null counts as
  absent, unknown keys are ignored; a bad value raises `ArgumentError` naming
  the field (`context.selection.uri`), which the server answers as InvalidParams;
- unstructuring keeps every field (null included) except those declared with
  `omitted()`, which leave the wire while they hold their default.
"""

from __future__ import annotations

import functools
import operator
import types as pytypes
import typing
from collections.abc import Callable
from typing import Any, Literal, TypeVar, Union

import attrs
import cattrs
from cattrs.gen import make_dict_unstructure_fn, override

_OMIT = "synapse.omit"
_SHOWN_AS = "synapse.shown_as"
T = TypeVar("T")


def omitted(default: Any = None) -> Any:
    """A field that is left off the wire while it holds `default` (absent, not null)."""
    return attrs.field(default=default, metadata={_OMIT: True})


def is_omitted(field: attrs.Attribute[Any]) -> bool:
    """Whether `field` was declared `omitted()`: absent from the wire at its default."""
    return bool(field.metadata.get(_OMIT))


def shown_as(shown: Any) -> Any:
    """A required field checked as its annotation says but described to clients as
    `shown` (a `Literal`): the generated TypeScript, Lua and tables (lsp/protocol_gen.py)
    show `shown`. For values the server passes on from elsewhere (a summary's tool kind)."""
    return attrs.field(metadata={_SHOWN_AS: shown})


def shown_type(field: attrs.Attribute[Any]) -> Any:
    """The type clients are told `field` has: its annotation, unless `shown_as()` says."""
    return field.metadata.get(_SHOWN_AS, field.type)


def kind(name: str) -> Any:
    """The `sessionUpdate` discriminator: fixed per class, always on the wire."""
    return attrs.field(default=name, init=False)


class Wire:
    """Base of every class on the wire; the converter's rules apply to its subclasses."""

    __slots__ = ()


class ArgumentError(ValueError):
    """A command argument that does not fit its class; `path` names the field."""

    def __init__(self, path: tuple[str, ...], problem: str, *, missing: bool = False) -> None:
        self.path = path
        self.problem = problem
        self.missing = missing
        super().__init__(str(self))

    def within(self, key: str) -> ArgumentError:
        return ArgumentError((key, *self.path), self.problem, missing=self.missing)

    def __str__(self) -> str:
        where = "".join(p if p.startswith("[") else f".{p}" for p in self.path).lstrip(".")
        if self.missing:
            return f"missing required argument `{where}`"
        return f"`{where}` {self.problem}" if where else f"the argument {self.problem}"


def json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return "a string" if isinstance(value, str) else "null"


def camel(name: str) -> str:
    """lsprotocol's rule: `workspace_uri` -> `workspaceUri`, a trailing `_` dropped."""
    first, *rest = name.removesuffix("_").split("_")
    return first + "".join(part.title() for part in rest)


Check = Callable[[Any], Any]


def _is_wire(cls: Any) -> bool:
    return isinstance(cls, type) and issubclass(cls, Wire)


def _checker(converter: cattrs.Converter, tp: Any) -> Check:
    """A strict structuring function for one field type (raises ArgumentError)."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, pytypes.UnionType):
        inner = tuple(a for a in args if a is not type(None))
        if len(inner) < len(args):  # X | None: null is None
            check = _checker(converter, functools.reduce(operator.or_, inner))
            return lambda value: None if value is None else check(value)
        if all(_is_wire(a) and "session_update" in attrs.fields_dict(a) for a in inner):
            return functools.partial(_tagged, converter, _kinds(inner))
    if origin is Literal:
        names = [f'"{a}"' for a in args]
        allowed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]

        def literal(value: Any) -> Any:
            if value in args and not isinstance(value, bool):
                return value
            shown = repr(value) if isinstance(value, str) else json_type(value)
            raise ArgumentError((), f"must be {allowed}, not {shown}")

        return literal
    if origin is list:
        item = _checker(converter, args[0]) if args else (lambda v: v)

        def array(value: Any) -> list[Any]:
            if not isinstance(value, list):
                raise ArgumentError((), f"must be an array, not {json_type(value)}")
            out = []
            for i, element in enumerate(value):
                try:
                    out.append(item(element))
                except ArgumentError as exc:
                    raise exc.within(f"[{i}]") from None
            return out

        return array
    if _is_wire(tp):
        return lambda value: converter.structure(value, tp)
    if attrs.has(tp):  # an lsprotocol type: its own hooks, our error
        return functools.partial(_lsp_structure, converter, tp)
    simple: dict[Any, tuple[Callable[[Any], bool], str]] = {
        str: (lambda v: isinstance(v, str), "a string"),
        bool: (lambda v: isinstance(v, bool), "a boolean"),
        int: (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
        float: (lambda v: isinstance(v, int | float) and not isinstance(v, bool), "a number"),
    }
    if tp in simple:
        ok, name = simple[tp]

        def primitive(value: Any) -> Any:
            if not ok(value):
                raise ArgumentError((), f"must be {name}, not {json_type(value)}")
            return float(value) if tp is float else value

        return primitive
    return lambda value: value  # Any, dict: JSON as it came


def _kinds(classes: tuple[Any, ...]) -> dict[str, type[Any]]:
    return {str(attrs.fields_dict(c)["session_update"].default): c for c in classes}


def _tagged(converter: cattrs.Converter, kinds: dict[str, type[Any]], value: Any) -> Any:
    """One of several update classes, chosen by the value's `sessionUpdate`."""
    if not isinstance(value, dict):
        raise ArgumentError((), f"must be an object, not {json_type(value)}")
    cls = kinds.get(value.get("sessionUpdate"))  # type: ignore[arg-type]
    if cls is None:
        known = ", ".join(kinds)
        raise ArgumentError(
            ("sessionUpdate",), f"must be one of {known}, not {value.get('sessionUpdate')!r}"
        )
    return converter.structure(value, cls)


def _lsp_structure(converter: cattrs.Converter, tp: type[Any], value: Any) -> Any:
    if not isinstance(value, dict):
        raise ArgumentError((), f"must be an object, not {json_type(value)}")
    try:
        return converter.structure(value, tp)
    except Exception as exc:
        detail = str(exc)
        if isinstance(exc, cattrs.ClassValidationError):
            detail = "; ".join(cattrs.transform_error(exc, path="value"))
        raise ArgumentError((), f"must be an LSP {tp.__name__} ({detail})") from None


def _structure_fn(converter: cattrs.Converter, cls: type[Any]) -> Callable[[Any, Any], Any]:
    attrs.resolve_types(cls)
    fields = [
        (
            f.name,
            camel(f.name),
            _checker(converter, f.type),
            f.default is not attrs.NOTHING,
            type(None) in typing.get_args(f.type),  # a required field that may be null
        )
        for f in attrs.fields(cls)
        if f.init
    ]

    def structure(value: Any, _type: Any) -> Any:
        if not isinstance(value, dict):
            raise ArgumentError((), f"must be an object, not {json_type(value)}")
        kwargs: dict[str, Any] = {}
        for name, key, check, has_default, nullable in fields:
            raw = value.get(key)
            if raw is None and has_default:
                continue  # null is absent: the default holds
            if raw is None and not (nullable and key in value):
                raise ArgumentError((key,), "is missing", missing=True)
            try:
                kwargs[name] = check(raw)
            except ArgumentError as exc:
                raise exc.within(key) from None
        return cls(**kwargs)

    return structure


def _unstructure_fn(converter: cattrs.Converter, cls: type[Any]) -> Callable[[Any], Any]:
    attrs.resolve_types(cls)
    overrides: dict[str, Any] = {
        f.name: override(rename=camel(f.name), omit_if_default=bool(f.metadata.get(_OMIT)))
        for f in attrs.fields(cls)
    }
    return make_dict_unstructure_fn(cls, converter, _cattrs_include_init_false=True, **overrides)


def register(converter: cattrs.Converter) -> cattrs.Converter:
    """Add the `Wire` rules to a converter (pygls' own, see `converter()`)."""
    converter.register_structure_hook_factory(_is_wire, lambda cls: _structure_fn(converter, cls))
    converter.register_unstructure_hook_factory(
        _is_wire, lambda cls: _unstructure_fn(converter, cls)
    )
    return converter


@functools.cache
def converter() -> cattrs.Converter:
    """pygls' converter (lsprotocol's hooks) with the `Wire` rules: the server's one converter."""
    from pygls.protocol import default_converter

    return register(default_converter())  # type: ignore[no-untyped-call]


def to_wire(value: Wire) -> Any:
    """The JSON-ready form of a wire object (what the client receives)."""
    return converter().unstructure(value)


def from_wire(data: Any, cls: type[T]) -> T:
    """Structure JSON into `cls` strictly; raises ArgumentError naming the bad field."""
    structured: T = converter().structure(data, cls)
    return structured
