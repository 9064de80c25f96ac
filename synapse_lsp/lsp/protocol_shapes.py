"""The protocol's classes as clients see them: lsp/protocol.py, read for protocol_gen.

Each attrs class of `lsp/protocol.py` becomes a `Shape`: its fields by camelCase wire key,
in TypeScript syntax, with the comments the class gives them; each module-level `Literal`
or union alias an `Alias`. How a field is written:

- optional (`key?:`) when it may be absent: in what the server sends, a field declared
  `omitted()`; in what a client sends, a field with a default (null counts as absent);
- `| null` when its type admits None and the key is there (`turn: number | null`);
- `Literal` -> a string union (a module-level alias by its name: `StopReason`), `list` ->
  an array, an attrs class -> its name, lsprotocol's `Position`, `Range` and `Diagnostic`
  -> `LSP_TYPES`; a `shown_as(T)` field as `T`.

A class is "sent by the server" or "sent by a client" by the messages that reach it
(`ROOTS`); one class in both directions, or a class no message reaches, is an error.
"""

from __future__ import annotations

import ast
import functools
import inspect
import io
import operator
import tokenize
import types as pytypes
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, Union

import attrs
from lsprotocol import types as lsp

from synapse_lsp.lsp import protocol
from synapse_lsp.lsp.wire import Wire, camel, is_omitted, shown_type

Direction = Literal["server", "client"]

# The messages, by who sends them; every class they reach is sent the same way.
ROOTS: dict[Direction, list[type[Wire]]] = {
    "client": [
        *(c.params for c in protocol.COMMANDS.values()),
        protocol.DiagnosticsParams,
        protocol.SaveDocumentsResult,
        protocol.RequestPermissionResult,
    ],
    "server": [
        *(c.result for c in protocol.COMMANDS.values()),
        protocol.SessionUpdateNotification,
        protocol.SaveDocumentsParams,
        protocol.RequestPermissionParams,
    ],
}
# LSP's own types in Synapse's messages, by the names the clients give them.
LSP_TYPES: dict[Any, str] = {
    lsp.Position: "Position",
    lsp.Range: "Range",
    lsp.Diagnostic: "WireDiagnostic",
}
_SIMPLE = {str: "string", bool: "boolean", int: "number", float: "number"}


@dataclass(frozen=True)
class Field:
    key: str  # on the wire
    type: str  # TypeScript
    optional: bool
    doc: str

    def ts(self) -> str:
        return f"{self.key}{'?' if self.optional else ''}: {self.type}"


@dataclass(frozen=True)
class Shape:
    """One attrs class as clients see it."""

    name: str
    doc: str
    fields: tuple[Field, ...]


@dataclass(frozen=True)
class Alias:
    """A module-level `Literal` or union alias (`StopReason`, `SessionUpdate`)."""

    name: str
    type: str
    doc: str
    values: tuple[str, ...]  # a Literal's strings; () for a union of classes


Declaration = Shape | Alias


def _comments(source: str) -> tuple[dict[int, str], dict[int, str]]:
    """Comments by line number: those alone on their line, and those after code."""
    alone: dict[int, str] = {}
    trailing: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            text = tok.string.lstrip("#").strip()
            line = tok.start[0]
            (alone if tok.line.strip().startswith("#") else trailing)[line] = text
    return alone, trailing


def _doc_at(node: ast.stmt, alone: dict[int, str], trailing: dict[int, str]) -> str:
    """The comment lines just above a statement, then the one after it on its lines."""
    above: list[str] = []
    line = node.lineno - 1
    while line in alone:
        above.insert(0, alone[line])
        line -= 1
    end = node.end_lineno or node.lineno
    after = [trailing[n] for n in range(node.lineno, end + 1) if n in trailing]
    return " ".join([*above, *after])


@functools.cache
def source_docs(module: pytypes.ModuleType) -> dict[str, str]:
    """A module's comments (and docstrings) on its names (`StopReason`, `PROTOCOL_VERSION`)
    and on its classes' fields (`ContextParts.system`)."""
    source = inspect.getsource(module)
    alone, trailing = _comments(source)
    docs: dict[str, str] = {}
    body = ast.parse(source).body
    for node, after in zip(body, [*body[1:], None], strict=True):
        if isinstance(node, ast.ClassDef):
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    docs[f"{node.name}.{stmt.target.id}"] = _doc_at(stmt, alone, trailing)
            continue
        target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
        if isinstance(target, ast.Name):
            doc = _doc_at(node, alone, trailing)
            if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
                doc = " ".join(filter(None, [doc, str(after.value.value)]))
            docs[target.id] = doc
    return docs


def _is_wire(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, Wire)


def _classes_in(tp: Any) -> Iterator[type[Wire]]:
    if _is_wire(tp):
        yield tp
    for arg in typing.get_args(tp):
        yield from _classes_in(arg)


def _fields(cls: type[Wire]) -> tuple[attrs.Attribute[Any], ...]:
    """The attrs fields of a class, their annotations resolved."""
    attrs_cls: Any = cls  # every Wire subclass is an attrs class
    attrs.resolve_types(attrs_cls)
    return tuple(attrs.fields(attrs_cls))


def _own(value: Any) -> bool:
    """A class of lsp/protocol.py itself (not one it imports)."""
    return _is_wire(value) and value.__module__ == protocol.__name__


def directions() -> dict[type[Wire], Direction]:
    """Who sends each class: the direction of the messages that reach it."""
    seen: dict[type[Wire], Direction] = {}
    for direction, roots in ROOTS.items():
        stack = list(roots)
        while stack:
            cls = stack.pop()
            if seen.get(cls) == direction:
                continue
            if cls in seen:
                raise ValueError(f"{cls.__name__} is sent by the server and by clients")
            seen[cls] = direction
            for f in _fields(cls):
                stack.extend(_classes_in(shown_type(f)))
    missing = [v.__name__ for v in vars(protocol).values() if _own(v) and v not in seen]
    if missing:
        raise ValueError(f"no message carries {', '.join(missing)}: add it to ROOTS")
    return seen


def _aliases() -> dict[str, Any]:
    """Module-level aliases: `Literal`s and unions of classes, by name."""
    return {
        name: value
        for name, value in vars(protocol).items()
        if not name.startswith("_")
        and not isinstance(value, type)
        and typing.get_origin(value) in (Literal, Union, pytypes.UnionType)
    }


def ts_type(tp: Any, aliases: dict[str, Any]) -> str:
    """`tp` in TypeScript syntax; an alias by its name."""
    for name, alias in aliases.items():
        if tp == alias:
            return name
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, pytypes.UnionType):
        parts = [ts_type(a, aliases) for a in args if a is not type(None)]
        return " | ".join(parts + (["null"] if type(None) in args else []))
    if origin is Literal:
        return " | ".join(f"'{a}'" for a in args)
    if origin is list:
        inner = ts_type(args[0], aliases)
        return f"({inner})[]" if " | " in inner else f"{inner}[]"
    if _is_wire(tp):
        return str(tp.__name__)
    if tp in LSP_TYPES:
        return LSP_TYPES[tp]
    if tp in _SIMPLE:
        return _SIMPLE[tp]
    raise TypeError(f"lsp/protocol.py: no TypeScript for {tp!r}")


def _without_null(tp: Any) -> Any:
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (Union, pytypes.UnionType) and type(None) in args:
        return functools.reduce(operator.or_, [a for a in args if a is not type(None)])
    return tp


def shape(cls: type[Wire], direction: Direction) -> Shape:
    """A class's fields as the side that receives it sees them."""
    docs = source_docs(protocol)
    aliases = _aliases()
    fields = []
    for f in _fields(cls):
        has_default = f.default is not attrs.NOTHING
        optional = is_omitted(f) if direction == "server" else has_default and f.init
        tp = shown_type(f)
        fields.append(
            Field(
                key=camel(f.name),
                type=ts_type(_without_null(tp) if optional else tp, aliases),
                optional=optional,
                doc=docs.get(f"{cls.__name__}.{f.name}", ""),
            )
        )
    doc = inspect.cleandoc(cls.__dict__.get("__doc__") or "")
    return Shape(cls.__name__, doc, tuple(fields))


@functools.cache
def declarations() -> tuple[Declaration, ...]:
    """Every alias and class of lsp/protocol.py, in the module's order."""
    docs = source_docs(protocol)
    sent_by = directions()
    aliases = _aliases()
    out: list[Declaration] = []
    for name, value in vars(protocol).items():
        if name in aliases:
            others = {k: v for k, v in aliases.items() if k != name}
            values = typing.get_args(value) if typing.get_origin(value) is Literal else ()
            out.append(Alias(name, ts_type(value, others), docs.get(name, ""), tuple(values)))
        elif _own(value):
            out.append(shape(value, sent_by[value]))
    return tuple(out)


def update_kinds() -> dict[str, str]:
    """`sessionUpdate` value -> class name."""
    return {kind: cls.__name__ for kind, cls in protocol.UPDATE_KINDS.items()}
