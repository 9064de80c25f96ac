"""The protocol's copies outside Python, generated from its one source, lsp/protocol.py.

The classes of `lsp/protocol.py` (as `protocol_shapes` reads them) and the names of
`lsp/names.py` are rendered as the VS Code client's TypeScript types
(`vscode-client/src/protocol.ts`), the Neovim plugin's names and field list
(`nvim-client/lua/synapse/protocol.lua`) and the message tables of `docs/protocol.md`,
each into a region between a `BEGIN GENERATED <name>` and an `END GENERATED <name>`
line; the rest of those files is written by hand. `tests/test_protocol_agreement.py`
fails, showing the diff, when a committed region is not what this module renders.

    python -m synapse_lsp.lsp.protocol_gen           # check: exit 1 and a diff when stale
    python -m synapse_lsp.lsp.protocol_gen --write   # rewrite the regions
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from synapse_lsp.lsp import names, protocol
from synapse_lsp.lsp.protocol_shapes import (
    LSP_TYPES,
    Alias,
    Field,
    Shape,
    declarations,
    source_docs,
    update_kinds,
)
from synapse_lsp.lsp.wire import camel

COMMAND = "python -m synapse_lsp.lsp.protocol_gen --write"
SOURCE = "synapse_lsp/lsp/protocol.py"
ROOT = Path(__file__).resolve().parents[2]  # the checkout this module lives in

# LSP's own types (protocol_shapes.LSP_TYPES) as the TypeScript client declares them.
_LSP_TS = {
    "Position": "/** LSP's `Position` (UTF-16 code units unless negotiated otherwise). */\n"
    "export interface Position {\n  line: number;\n  character: number;\n}",
    "Range": "/** LSP's `Range`. */\n"
    "export interface Range {\n  start: Position;\n  end: Position;\n}",
    "WireDiagnostic": "/** An LSP `Diagnostic`, the fields Synapse reads "
    "(severity 1 error … 4 hint). */\n"
    "export interface WireDiagnostic {\n  range: Range;\n  severity?: 1 | 2 | 3 | 4;\n"
    "  message: string;\n  source?: string;\n  code?: string | number;\n}",
}

# names.py constants the clients use, by their name in TypeScript and in Lua.
_CONSTANTS = (
    ("PROTOCOL_VERSION", "PROTOCOL_VERSION", "VERSION"),
    ("SESSION_UPDATE", "SESSION_UPDATE_METHOD", "SESSION_UPDATE"),
    ("DIAGNOSTICS_NOTIFICATION", "DIAGNOSTICS_NOTIFICATION", "DIAGNOSTICS"),
    ("SAVE_DOCUMENTS", "SAVE_DOCUMENTS_REQUEST", "SAVE_DOCUMENTS"),
    ("REQUEST_PERMISSION", "REQUEST_PERMISSION_REQUEST", "REQUEST_PERMISSION"),
)


def _command_key(name: str) -> str:
    """`synapse.session.new` -> `session_new` (Lua; TypeScript: `sessionNew`)."""
    return name.removeprefix("synapse.").replace(".", "_")


# ------------------------------------------------------------------ renderers


def _jsdoc(doc: str, indent: str = "") -> list[str]:
    if not doc:
        return []
    lines = doc.replace("*/", "*\\/").splitlines()
    if len(lines) == 1:  # a field's comment, however long its lines in Python were
        lines = textwrap.wrap(lines[0], 92 - len(indent))
    if len(lines) == 1:
        return [f"{indent}/** {lines[0]} */"]
    return [f"{indent}/**", *(f"{indent} * {line}".rstrip() for line in lines), f"{indent} */"]


def typescript() -> str:
    """The generated part of vscode-client/src/protocol.ts."""
    out: list[str] = []
    docs = source_docs(names)
    for py, ts, _lua in _CONSTANTS:
        value = getattr(names, py)
        out += _jsdoc(docs[py])
        out.append(f"export const {ts} = {value if isinstance(value, int) else repr(value)};")
    out += ["", "export const Commands = {"]
    for name in names.COMMAND_NAMES:
        out.append(f"  {camel(_command_key(name))}: '{name}',")
    out += ["} as const;", "", "/** Each command's one argument and its result. */"]
    out.append("export interface CommandTypes {")
    for name, command in protocol.COMMANDS.items():
        params, result = command.params.__name__, command.result.__name__
        out.append(f"  '{name}': {{ params: {params}; result: {result} }};")
    out += ["}", ""]
    for name in LSP_TYPES.values():
        out += [_LSP_TS[name], ""]
    for d in declarations():
        if isinstance(d, Alias):
            out += _jsdoc(d.doc)
            if len(d.type) > 80:
                out += [f"export type {d.name} =", *(f"  | {t}" for t in d.type.split(" | "))]
                out[-1] += ";"
            else:
                out.append(f"export type {d.name} = {d.type};")
            out.append("")
            continue
        out += _jsdoc(d.doc)
        if not d.fields:
            out += [f"export type {d.name} = Record<string, never>;", ""]
            continue
        out.append(f"export interface {d.name} {{")
        for f in d.fields:
            out += _jsdoc(f.doc, "  ")
            out.append(f"  {f.ts()};")
        out += ["}", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def _lua_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _lua_fields(s: Shape, indent: str) -> list[str]:
    return [
        f"{indent}{f.key} = {_lua_string(('optional ' if f.optional else '') + f.type)},"
        for f in s.fields
    ]


def lua() -> str:
    """The generated part of nvim-client/lua/synapse/protocol.lua."""
    decls = declarations()
    shapes = {d.name: d for d in decls if isinstance(d, Shape)}
    kinds = update_kinds()
    out = []
    docs = source_docs(names)
    for py, _ts, lua_name in _CONSTANTS:
        value = getattr(names, py)
        out += [f"-- {line}" for line in textwrap.wrap(docs[py], 86)]
        out.append(f"M.{lua_name} = {value if isinstance(value, int) else _lua_string(value)}")
    out += ["", "M.commands = {"]
    for name in names.COMMAND_NAMES:
        out.append(f"  {_command_key(name)} = {_lua_string(name)},")
    out += ["}", "", "-- Every `sessionUpdate` kind; synapse.state folds each of them."]
    out += ["M.update_kinds = {", *(f"  {_lua_string(k)}," for k in kinds), "}", ""]
    out += [
        "-- Each kind's fields by wire key: its type as docs/protocol.md writes it",
        '-- ("optional ...": the key may be absent).',
        "M.update_fields = {",
    ]
    for kind, cls_name in kinds.items():
        out += [f"  {kind} = {{", *_lua_fields(shapes[cls_name], "    "), "  },"]
    out += ["}", "", "-- The object types those fields name.", "M.types = {"]
    nested = _reached([shapes[c] for c in kinds.values()], shapes)
    for s in (shapes[n] for n in shapes if n in nested):
        out += [f"  {s.name} = {{", *_lua_fields(s, "    "), "  },"]
    out += ["}", "", "-- The string unions those fields name, by value.", "M.enums = {"]
    for d in decls:
        if isinstance(d, Alias) and d.values:
            out.append(f"  {d.name} = {{ {', '.join(_lua_string(v) for v in d.values)} }},")
    out.append("}")
    return "\n".join(out) + "\n"


def _reached(start: list[Shape], shapes: dict[str, Shape]) -> set[str]:
    """The names of the shapes the fields of `start` name, transitively."""
    found: set[str] = set()
    stack = list(start)
    while stack:
        for f in stack.pop().fields:
            for word in re.findall(r"\w+", f.type):
                if word in shapes and word not in found:
                    found.add(word)
                    stack.append(shapes[word])
    return found - {s.name for s in start}


def _cell(fields: tuple[Field, ...]) -> str:
    return ", ".join(f"`{f.ts()}`" for f in fields).replace("|", "\\|") or "—"


def doc_commands() -> str:
    """docs/protocol.md: the table of commands."""
    shapes = {d.name: d for d in declarations() if isinstance(d, Shape)}
    out = ["| command | argument | result |", "|---|---|---|"]
    for name, c in protocol.COMMANDS.items():
        params, result = shapes[c.params.__name__], shapes[c.result.__name__]
        out.append(f"| `{name}` | {_cell(params.fields)} | {_cell(result.fields)} |")
    return "\n".join(out) + "\n"


def doc_updates() -> str:
    """docs/protocol.md: the params of `synapse/sessionUpdate` and the table of kinds."""
    shapes = {d.name: d for d in declarations() if isinstance(d, Shape)}
    params = shapes[protocol.SessionUpdateNotification.__name__]
    out = [f"Params: {_cell(params.fields)}.", "", "| `sessionUpdate` | fields |", "|---|---|"]
    for kind, cls_name in update_kinds().items():
        fields = tuple(f for f in shapes[cls_name].fields if f.key != "sessionUpdate")
        out.append(f"| `{kind}` | {_cell(fields)} |")
    return "\n".join(out) + "\n"


def doc_types() -> str:
    """docs/protocol.md: the object types and unions the other tables name."""
    decls = declarations()
    tops = {c.__name__ for c in protocol.UPDATE_KINDS.values()}
    tops |= {c.params.__name__ for c in protocol.COMMANDS.values()}
    tops |= {c.result.__name__ for c in protocol.COMMANDS.values()}
    out = ["| type | fields or values |", "|---|---|"]
    for d in decls:
        if isinstance(d, Alias) and not d.values:  # the update kinds
            out.append(
                f"| `{d.name}` | one of the kinds of `synapse/sessionUpdate` (table above) |"
            )
        elif isinstance(d, Alias):
            values = d.type.replace("|", "\\|")
            out.append(f"| `{d.name}` | `{values}` |")
        elif d.name not in tops:
            out.append(f"| `{d.name}` | {_cell(d.fields)} |")
    for name in LSP_TYPES.values():
        out.append(f"| `{name}` | LSP's `{name.removeprefix('Wire')}` |")
    return "\n".join(out) + "\n"


# -------------------------------------------------------------- the regions


@dataclass(frozen=True)
class Region:
    path: str  # relative to the repository root
    name: str
    comment: tuple[str, str]  # around a marker line's text
    render: Callable[[], str]

    def markers(self) -> tuple[str, str]:
        before, after = self.comment
        note = f"from {SOURCE} by `{COMMAND}`; do not edit"
        return (
            f"{before}BEGIN GENERATED {self.name} {note}{after}",
            f"{before}END GENERATED {self.name}{after}",
        )


REGIONS = (
    Region("vscode-client/src/protocol.ts", "protocol", ("// ", ""), typescript),
    Region("nvim-client/lua/synapse/protocol.lua", "protocol", ("-- ", ""), lua),
    Region("docs/protocol.md", "commands", ("<!-- ", " -->"), doc_commands),
    Region("docs/protocol.md", "updates", ("<!-- ", " -->"), doc_updates),
    Region("docs/protocol.md", "types", ("<!-- ", " -->"), doc_types),
)


def splice(text: str, region: Region, body: str) -> str:
    """`text` with `region`'s marker lines and what lies between them made anew."""
    lines = text.splitlines(keepends=True)

    def marker(word: str) -> list[int]:
        pattern = re.compile(rf"\b{word} GENERATED {re.escape(region.name)}(?![\w-])")
        return [i for i, line in enumerate(lines) if pattern.search(line)]

    begin, end = marker("BEGIN"), marker("END")
    if len(begin) != 1 or len(end) != 1 or end[0] < begin[0]:
        raise ValueError(
            f"{region.path}: expected one `BEGIN GENERATED {region.name}` line and one "
            f"`END GENERATED {region.name}` line after it"
        )
    first, last = region.markers()
    new = [first + "\n", body, last + "\n"]
    return "".join(lines[: begin[0]] + new + lines[end[0] + 1 :])


def generated(root: Path = ROOT) -> dict[Path, tuple[str, str]]:
    """Each file with a region: (its committed text, the text with fresh regions)."""
    files: dict[Path, tuple[str, str]] = {}
    for region in REGIONS:
        path = root / region.path
        if path not in files:
            text = path.read_text(encoding="utf-8")
            files[path] = (text, text)
        committed, fresh = files[path]
        files[path] = (committed, splice(fresh, region, region.render()))
    return files


def stale(root: Path = ROOT) -> dict[str, str]:
    """The files whose regions differ from what the classes give, with the diff."""
    out: dict[str, str] = {}
    for path, (committed, fresh) in generated(root).items():
        if committed != fresh:
            name = str(path.relative_to(root))
            diff = difflib.unified_diff(
                committed.splitlines(keepends=True),
                fresh.splitlines(keepends=True),
                f"{name} (committed)",
                f"{name} (generated)",
            )
            out[name] = "".join(diff)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m synapse_lsp.lsp.protocol_gen",
        description=(
            f"Check (or with --write, rewrite) the generated regions of the clients and "
            f"docs/protocol.md from {SOURCE}."
        ),
    )
    parser.add_argument("--write", action="store_true", help="rewrite the stale regions")
    parser.add_argument("--root", type=Path, default=ROOT, help="the Synapse checkout")
    args = parser.parse_args(argv)
    if not (args.root / REGIONS[0].path).exists():
        parser.error(f"{args.root} is not a Synapse checkout (no {REGIONS[0].path}); see --root")
    if args.write:
        for path, (committed, fresh) in generated(args.root).items():
            if committed != fresh:
                path.write_text(fresh, encoding="utf-8")
                print(f"rewrote {path.relative_to(args.root)}")
        return 0
    diffs = stale(args.root)
    for diff in diffs.values():
        sys.stdout.write(diff)
    if diffs:
        print(f"\nstale: {', '.join(diffs)}; run `{COMMAND}`", file=sys.stderr)
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
