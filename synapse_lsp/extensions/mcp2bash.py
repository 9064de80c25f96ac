"""Mcp2Bash: one MCP tool as the command `mcp:<server>:<tool>`.

The tool's `inputSchema` is the argument parser: required properties are taken
positionally in schema order (then optional ones), every property is also
`--name value` (`--name=value`, `--kebab-name`), booleans are flags (`--x`,
`--no-x`), numbers and integers are checked, arrays and objects are JSON (an
array also accepts a repeated option), and one JSON object argument whose keys
are all properties is the whole input. Results: text printed, JSON pretty-printed,
images and binary resources summarised, `isError` -> exit 1.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from synapse_lsp.cmdline import quote
from synapse_lsp.commands import CommandContext, CommandOutput, FailureCategory, OutputSink
from synapse_lsp.extensions.mcp_results import format_result

if TYPE_CHECKING:
    from mcp.shared.dispatcher import ProgressFnT

    from synapse_lsp.extensions.mcp_client import McpServer, ToolSpec


class ArgError(ValueError):
    """Wrong arguments for a tool; shown with the usage line and the --help hint."""


_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def prop_types(prop: dict[str, Any]) -> list[str]:
    """JSON types a property accepts (`anyOf`/`oneOf` unions flattened, null dropped)."""
    types = [t for t in dict.fromkeys(_raw_types(prop)) if t != "null"]
    return types or ["string"]


def _raw_types(prop: dict[str, Any]) -> list[str]:
    found: list[str] = []
    kind = prop.get("type")
    if isinstance(kind, str):
        found.append(kind)
    elif isinstance(kind, list):
        found += [k for k in kind if isinstance(k, str)]
    for key in ("anyOf", "oneOf"):
        for alt in prop.get(key, []) or []:
            if isinstance(alt, dict):
                found += _raw_types(alt)
    if not found and "enum" in prop:
        found.append("string")
    if not found and "properties" in prop:
        found.append("object")
    return found


def _items(prop: dict[str, Any]) -> dict[str, Any]:
    """The item schema of an array property (also inside `anyOf`/`oneOf`)."""
    if isinstance(prop.get("items"), dict):
        return dict(prop["items"])
    for key in ("anyOf", "oneOf"):
        for alt in prop.get(key, []) or []:
            if isinstance(alt, dict) and isinstance(alt.get("items"), dict):
                return dict(alt["items"])
    return {}


def _enum(prop: dict[str, Any]) -> list[Any] | None:
    if isinstance(prop.get("enum"), list):
        return list(prop["enum"])
    for key in ("anyOf", "oneOf"):
        for alt in prop.get(key, []) or []:
            if isinstance(alt, dict) and isinstance(alt.get("enum"), list):
                return list(alt["enum"])
    return None


class Schema:
    """The parts of an inputSchema the parser and the help page use."""

    def __init__(self, schema: dict[str, Any]) -> None:
        props = schema.get("properties")
        self.props: dict[str, dict[str, Any]] = {
            k: (v if isinstance(v, dict) else {}) for k, v in (props or {}).items()
        }
        req = schema.get("required") or []
        self.required = [name for name in self.props if name in req]
        self.required += [r for r in req if isinstance(r, str) and r not in self.props]
        self.optional = [name for name in self.props if name not in self.required]
        self.open = schema.get("additionalProperties", False) is not False and not self.props
        self._by_flag = {}
        for name in self.props:
            self._by_flag[name] = name
            self._by_flag.setdefault(name.replace("_", "-"), name)

    def flag_target(self, flag: str) -> str | None:
        return self._by_flag.get(flag)

    def is_bool(self, name: str) -> bool:
        return prop_types(self.props.get(name, {})) == ["boolean"]

    def placeholder(self, name: str) -> str:
        prop = self.props.get(name, {})
        choices = _enum(prop)
        if choices:
            return "|".join(str(c) for c in choices)
        kind = prop_types(prop)[0]
        return {"integer": "N", "number": "X", "array": "JSON", "object": "JSON"}.get(
            kind, name.upper()
        )


def parse_tool_args(schema_dict: dict[str, Any], argv: list[str]) -> dict[str, Any]:
    """argv (without the command name) -> the tool's arguments object."""
    schema = Schema(schema_dict)
    if len(argv) == 1 and argv[0].lstrip().startswith("{"):
        whole = _whole_object(schema, argv[0])
        if whole is not None:
            return whole
    args: dict[str, Any] = {}
    positional: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            positional += argv[i + 1 :]
            break
        if word.startswith("--") and len(word) > 2:
            flag, eq, value = word[2:].partition("=")
            name = schema.flag_target(flag)
            if name is None and flag.startswith("no-") and not eq:
                negated = schema.flag_target(flag[3:])
                if negated is not None and schema.is_bool(negated):
                    args[negated] = False
                    i += 1
                    continue
            if name is None:
                raise ArgError(f"unknown option --{flag}{_known_hint(schema)}")
            if schema.is_bool(name) and not eq:
                args[name] = True
            else:
                if not eq:
                    if i + 1 >= len(argv):
                        raise ArgError(f"--{flag} needs a value ({schema.placeholder(name)})")
                    i += 1
                    value = argv[i]
                _assign(schema, args, name, value, repeated=True)
        else:
            positional.append(word)
        i += 1
    slots = [n for n in schema.required + schema.optional if n not in args]
    if len(positional) > len(slots):
        extra = positional[len(slots)]
        raise ArgError(
            f"unexpected argument {extra!r}"
            + (
                " (every parameter is already given)"
                if schema.props
                else " (this tool takes no arguments)"
            )
        )
    for name, value in zip(slots, positional, strict=False):
        _assign(schema, args, name, value, repeated=False)
    missing = [n for n in schema.required if n not in args]
    if missing:
        raise ArgError(_missing_message(missing))
    return args


def _missing_message(missing: list[str]) -> str:
    plural = "s" if len(missing) > 1 else ""
    return f"missing required argument{plural} " + ", ".join(f"<{m}>" for m in missing)


def _known_hint(schema: Schema) -> str:
    if not schema.props:
        return " (this tool takes no options)"
    return " (known: " + ", ".join(f"--{n}" for n in schema.props) + ")"


def _whole_object(schema: Schema, text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(value, dict):
        return None
    if schema.props and not set(value) <= set(schema.props):
        return None
    if not schema.props and not schema.open:
        return None
    missing = [n for n in schema.required if n not in value]
    if missing:
        raise ArgError(_missing_message(missing))
    for name, item in value.items():
        _check_type(schema, name, item)
    return value


def _assign(schema: Schema, args: dict[str, Any], name: str, raw: str, *, repeated: bool) -> None:
    prop = schema.props.get(name, {})
    types = prop_types(prop)
    if "array" in types and not raw.lstrip().startswith("[") and repeated:
        item = _convert(name, raw, prop_types(_items(prop)), None)
        current = args.get(name)
        args[name] = [*current, item] if isinstance(current, list) else [item]
        return
    args[name] = _convert(name, raw, types, _enum(prop))


def _convert(name: str, raw: str, types: list[str], choices: list[Any] | None) -> Any:
    value: Any = None
    errors: list[str] = []
    for kind in types:
        try:
            value = _as(kind, raw)
            break
        except ValueError as exc:
            errors.append(str(exc))
    else:
        raise ArgError(f"<{name}>: " + "; or ".join(errors))
    if choices is not None and value not in choices:
        raise ArgError(f"<{name}> must be one of {', '.join(map(str, choices))}; got {raw!r}")
    return value


def _as(kind: str, raw: str) -> Any:
    if kind == "string":
        return raw
    if kind == "integer":
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f"expected an integer, got {raw!r}") from None
    if kind == "number":
        try:
            number = float(raw)
        except ValueError:
            raise ValueError(f"expected a number, got {raw!r}") from None
        if number != number or number in (float("inf"), float("-inf")):
            raise ValueError(f"expected a finite number, got {raw!r}")
        return (
            int(number)
            if number.is_integer() and "." not in raw and "e" not in raw.lower()
            else number
        )
    if kind == "boolean":
        if raw.lower() in _TRUE:
            return True
        if raw.lower() in _FALSE:
            return False
        raise ValueError(f"expected true or false, got {raw!r}")
    if kind in ("array", "object"):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValueError(f"expected a JSON {kind} ({exc.msg} at column {exc.colno})") from None
        want = list if kind == "array" else dict
        if not isinstance(value, want):
            raise ValueError(f"expected a JSON {kind}, got {type(value).__name__}")
        return value
    return raw  # unknown schema type: pass the text through


def _check_type(schema: Schema, name: str, value: Any) -> None:
    if name not in schema.props:
        return
    checks: dict[str, Callable[[Any], bool]] = {
        "string": lambda v: isinstance(v, str),
        "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
        "array": lambda v: isinstance(v, list),
        "object": lambda v: isinstance(v, dict),
    }
    types = prop_types(schema.props[name])
    if value is None or any(checks.get(t, lambda _v: True)(value) for t in types):
        return
    raise ArgError(f"{name!r} must be {' or '.join(types)}, got {json.dumps(value)}")


# ------------------------------------------------------------- help text


def usage_line(name: str, schema_dict: dict[str, Any]) -> str:
    schema = Schema(schema_dict)
    parts = [name, *(f"<{r}>" for r in schema.required)]
    for opt in schema.optional:
        flag = f"--{opt}" if schema.is_bool(opt) else f"--{opt} {schema.placeholder(opt)}"
        parts.append(f"[{flag}]")
    return " ".join(parts)


def first_line(text: str) -> str:
    for line in text.strip().splitlines():
        if line.strip():
            return line.strip()
    return ""


def help_page(name: str, description: str, schema_dict: dict[str, Any]) -> str:
    schema = Schema(schema_dict)
    summary = first_line(description) or "(no description)"
    lines = [f"{name} - {summary}", "", "Usage:", f"  {usage_line(name, schema_dict)}"]
    rest = description.strip().splitlines()[1:]
    if any(line.strip() for line in rest):
        lines += ["", "Description:"] + [f"  {line.strip()}" for line in rest if line.strip()]
    lines += ["", "Parameters:"]
    if not schema.props:
        lines.append("  (none)")
    for prop_name in schema.required + schema.optional:
        prop = schema.props.get(prop_name, {})
        kind = prop_types(prop)
        shown = "|".join(kind)
        if "array" in kind and _items(prop):
            shown = shown.replace("array", f"array of {prop_types(_items(prop))[0]}")
        attrs = [shown, "required" if prop_name in schema.required else "optional"]
        if "default" in prop and prop["default"] is not None:
            attrs.append(f"default {json.dumps(prop['default'])}")
        choices = _enum(prop)
        if choices:
            attrs.append("one of " + ", ".join(map(str, choices)))
        label = f"<{prop_name}>" if prop_name in schema.required else f"--{prop_name}"
        if prop_name in schema.required:
            label += f" (or --{prop_name})"
        text = (prop.get("description") or prop.get("title") or "").strip()
        lines.append(f"  {label} ({', '.join(attrs)})" + (f": {text}" if text else ""))
    lines += [
        "",
        "Arguments: required ones by position in the order above (then optional ones), or any",
        "as --name value; booleans are flags (--x / --no-x); arrays and objects are JSON (an",
        "array option may also be repeated); one JSON object argument is taken as the whole input.",
        "",
        "Examples:",
        f"  {_example(name, schema, flags=False)}",
    ]
    if schema.optional:
        lines.append(f"  {_example(name, schema, flags=True)}")
    whole = {n: _sample(schema.props.get(n, {}), n) for n in schema.required}
    if whole:
        lines.append(f"  {name} {quote(json.dumps(whole))}")
    return "\n".join(lines) + "\n"


def _sample(prop: dict[str, Any], name: str, depth: int = 0) -> Any:
    """A value the schema accepts, for the examples: an array of objects shows one object
    with its required (else first two) properties; nested up to three levels."""
    if "default" in prop and prop["default"] is not None:
        return prop["default"]
    choices = _enum(prop)
    if choices:
        return choices[0]
    kind = prop_types(prop)[0]
    item = _items(prop)
    if kind == "array" and item and depth < 3 and prop_types(item)[0] != "string":
        return [_sample(item, name, depth + 1)]
    props = prop.get("properties")
    if kind == "object" and isinstance(props, dict) and props and depth < 3:
        keys = [k for k in prop.get("required") or () if k in props] or list(props)[:2]
        return {
            k: _sample(props[k] if isinstance(props[k], dict) else {}, k, depth + 1) for k in keys
        }
    return {
        "integer": 1,
        "number": 1.5,
        "boolean": True,
        "array": ["a", "b"],
        "object": {"key": "value"},
    }.get(kind, f"{name}-value")


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _example(name: str, schema: Schema, *, flags: bool) -> str:
    parts = [name]
    for req in schema.required:
        parts.append(quote(_render(_sample(schema.props.get(req, {}), req))))
    if flags:
        for opt in schema.optional[:3]:
            if schema.is_bool(opt):
                parts.append(f"--{opt}")
            else:
                value = _sample(schema.props.get(opt, {}), opt)
                parts.append(f"--{opt} {quote(_render(value))}")
    return " ".join(parts)


def _render(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


# ------------------------------------------------------------- the command


class McpToolCommand:
    """`mcp:<server>:<tool>`: parses argv by the tool's schema and calls it."""

    def __init__(self, server: McpServer, tool: ToolSpec) -> None:
        self.server = server
        self.tool = tool
        self.name = tool.command_name
        self.summary = first_line(tool.description) or f"MCP tool {tool.name} of {tool.server}"
        self.usage = usage_line(self.name, tool.input_schema)

    def help(self) -> str:
        return help_page(self.name, self.tool.description, self.tool.input_schema)

    async def run(self, argv: list[str], ctx: CommandContext) -> CommandOutput:
        args = argv[1:] if argv and argv[0] == self.name else argv
        if args[:1] == ["-h"]:
            return CommandOutput(f"Usage: {self.usage}\n{self.summary}\n")
        if args[:1] == ["--help"]:
            return CommandOutput(self.help())
        try:
            arguments = parse_tool_args(self.tool.input_schema, args)
        except ArgError as exc:
            return usage_failure(self.name, self.usage, str(exc))
        timeout = self.server.config.timeout or ctx.settings.command_timeout
        return await call_tool(self.server, self.tool.name, arguments, timeout, ctx)


def usage_failure(name: str, usage: str, message: str) -> CommandOutput:
    """`CommandOutput.usage_error` with the usage line added after the message."""
    out = CommandOutput.usage_error(name, message)
    head, _, rest = out.stderr.partition("\n")
    out.stderr = f"{head}\nUsage: {usage}\n{rest}"
    return out


async def call_tool(
    server: McpServer,
    tool: str,
    arguments: dict[str, Any],
    timeout: float,
    ctx: CommandContext | None = None,
) -> CommandOutput:
    """Call the tool; what the server asks while it runs goes to `ctx.mcp_host`, and its
    progress is shown live through `ctx.on_output` (`[progress 2/3] message`), not sent
    to the model."""
    from synapse_lsp.extensions.mcp_client import McpCallError

    host = ctx.mcp_host if ctx is not None else None
    sink = ctx.on_output if ctx is not None else None
    notes: list[str] = []
    try:
        result = await server.call(tool, arguments, timeout, host, _progress(sink), notes)
    except McpCallError as exc:
        category = {
            "timeout": FailureCategory.TIMEOUT,
            "unavailable": FailureCategory.DEPENDENCY_MISSING,
        }.get(exc.kind, FailureCategory.EXECUTION_ERROR)
        return CommandOutput(
            stderr=f"{exc}\n", exit_code=124 if exc.kind == "timeout" else 1, category=category
        )
    out = format_result(result, ctx.settings if ctx is not None else None)
    told = "".join(f"[{note}]\n" for note in notes)  # a declined form, and why
    if out.exit_code == 0:
        out.stdout += told
    else:
        out.stderr += told
    return out


def _progress(sink: OutputSink | None) -> ProgressFnT | None:
    """A progress callback showing each notification as one live line."""
    if sink is None:
        return None

    async def report(progress: float, total: float | None, message: str | None) -> None:
        done = f"{progress:g}/{total:g}" if total else f"{progress:g}"
        sink("stdout", f"[progress {done}]" + (f" {message}" if message else "") + "\n")

    return report
