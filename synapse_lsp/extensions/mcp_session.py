"""What Synapse offers an MCP server beyond calling its tools: the client side.

`Callers` keeps, per server, the chat sessions whose calls are in flight (a server's
sampling or elicitation request goes to the latest one; none in flight: declined).
`client_options` gives the SDK's `Client` the callbacks that declare and serve the
client capabilities: sampling (`McpHost.sample`: approved by the user, run on
Synapse's model), elicitation (`McpHost.elicit`: asked through the face), roots (the
workspace folders, as they are now) and a message handler for a 2025-era server's
`*/list_changed` notifications (a 2026 server's come through `subscriptions/listen`,
`McpServer._listen`). SDK types are converted here, both ways; `question.py` holds the
plain data the faces see. Also the listing of a server's tools, resources, templates
and prompts, and the end-of-output watch on a stdio transport.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synapse_lsp.commands import McpHost
from synapse_lsp.question import (
    Elicitation,
    ElicitField,
    SamplingMessage,
    SamplingRequest,
)

if TYPE_CHECKING:
    from mcp import Client

log = logging.getLogger(__name__)

_KINDS = ("string", "number", "integer", "boolean")
_STOP = {"endTurn", "stopSequence", "maxTokens", "toolUse"}


@dataclass(frozen=True)
class ToolSpec:
    """What Mcp2Bash needs of one tool (plain data: no SDK types leak out). `hint` is
    what the server says of it: "read-only" (`readOnlyHint`), "destructive"
    (`destructiveHint`, when not also read-only) or None."""

    server: str
    name: str
    description: str
    input_schema: dict[str, Any]
    hint: str | None = None

    @property
    def command_name(self) -> str:
        return f"mcp:{self.server}:{self.name}"


@dataclass(frozen=True)
class ResourceSpec:
    """A resource (`uri`) or a resource template (`uri` is its RFC 6570 template)."""

    uri: str
    name: str
    description: str = ""
    mime_type: str | None = None
    template: bool = False


@dataclass(frozen=True)
class PromptSpec:
    name: str
    description: str
    arguments: tuple[tuple[str, bool, str], ...] = ()  # (name, required, description)


class Callers:
    """The hosts of one server's calls in flight, latest last, each with the notes its
    command's output gets (why a form was declined: the user and the model are told)."""

    def __init__(self) -> None:
        self._calls: list[tuple[McpHost, list[str]]] = []

    @contextlib.contextmanager
    def calling(self, host: McpHost | None, notes: list[str] | None = None) -> Any:
        if host is None:
            yield
            return
        call = (host, notes if notes is not None else [])
        self._calls.append(call)
        try:
            yield
        finally:
            self._calls.remove(call)

    def current(self) -> McpHost | None:
        return self._calls[-1][0] if self._calls else None

    def note(self, text: str) -> None:
        """Logged, and added to the latest call's output."""
        log.info("%s", text)
        if self._calls:
            self._calls[-1][1].append(text)


def client_options(
    server: str,
    callers: Callers,
    roots: Callable[[], list[Path]],
    on_list_changed: Callable[[str], Awaitable[None]],
) -> dict[str, Any]:
    """The `Client(...)` keyword arguments for one server (module docstring)."""
    import mcp_types as t

    async def sampling(context: Any, params: Any) -> Any:
        host = callers.current()
        if host is None:
            return _error(f"no call of {server} is running a chat's command; nobody to approve it")
        reply = await host.sample(sampling_request(server, params))
        if isinstance(reply, str):
            return _error(f"sampling refused: {reply}")
        stop = reply.stop_reason if reply.stop_reason in _STOP else "endTurn"
        return t.CreateMessageResult(
            role="assistant",
            content=t.TextContent(type="text", text=reply.text),
            model=reply.model,
            stop_reason=stop,
        )

    async def elicitation(context: Any, params: Any) -> Any:
        host = callers.current()
        schema = getattr(params, "requested_schema", None)
        if schema is None:  # URL mode: open a page; not offered (no capability for it)
            return t.ElicitResult(action="decline")
        request = elicitation_request(server, str(getattr(params, "message", "")), schema)
        if host is None:
            log.info("%s asked for input with no chat command running: declined", server)
            return t.ElicitResult(action="decline")
        answer = await host.elicit(request)
        if answer.action != "accept":
            if answer.reason:  # not the user's own choice: say why
                said = f"{server} asked for input ({request.message!r}): {answer.action}"
                callers.note(f"{said}: {answer.reason}")
            return t.ElicitResult(action=answer.action)
        problem = check_answer(request, answer.content)
        if problem is not None:
            callers.note(f"{server} asked for input: the answer was not sent ({problem})")
            return t.ElicitResult(action="cancel")
        return t.ElicitResult(action="accept", content=dict(answer.content))

    async def list_roots(context: Any) -> Any:
        found = [t.Root(uri=p.resolve().as_uri(), name=p.name or str(p)) for p in roots()]  # type: ignore[arg-type]
        return t.ListRootsResult(roots=found)

    async def messages(message: Any) -> None:
        kinds: dict[type, str] = {
            t.ToolListChangedNotification: "tools",
            t.PromptListChangedNotification: "prompts",
            t.ResourceListChangedNotification: "resources",
        }
        kind = kinds.get(type(message))
        if kind is not None:
            await on_list_changed(kind)
        elif isinstance(message, Exception):
            log.debug("MCP server %s: %s", server, message)

    return {
        "sampling_callback": sampling,
        "elicitation_callback": elicitation,
        "list_roots_callback": list_roots,
        "message_handler": messages,
    }


def _error(message: str) -> Any:
    import mcp_types as t

    return t.ErrorData(code=-1, message=message)


def sampling_request(server: str, params: Any) -> SamplingRequest:
    """`CreateMessageRequestParams` as plain data: text kept, anything else named."""
    messages: list[SamplingMessage] = []
    for message in params.messages:
        content = message.content if isinstance(message.content, list) else [message.content]
        texts = [
            getattr(c, "text", None) or f"[{getattr(c, 'type', 'unknown')} content]"
            for c in content
        ]
        text = "\n".join(texts)
        messages.append(
            SamplingMessage("assistant", text)
            if message.role == "assistant"
            else SamplingMessage("user", text)
        )
    hints = getattr(getattr(params, "model_preferences", None), "hints", None) or []
    return SamplingRequest(
        server=server,
        messages=tuple(messages),
        system=params.system_prompt,
        max_tokens=max(1, min(int(params.max_tokens), 8192)),
        temperature=params.temperature,
        stop_sequences=tuple(params.stop_sequences or ()),
        model_hint=next((h.name for h in hints if getattr(h, "name", None)), None),
    )


def elicitation_request(server: str, message: str, schema: dict[str, Any]) -> Elicitation:
    """A form's schema (flat primitives, as MCP restricts it) as fields; a property of
    another shape is shown as a string."""
    required = set(schema.get("required") or ())
    fields: list[ElicitField] = []
    for name, prop in (schema.get("properties") or {}).items():
        prop = prop if isinstance(prop, dict) else {}
        kind: Any = prop.get("type") if prop.get("type") in _KINDS else "string"
        choices = prop.get("enum") or [
            o.get("const") for o in prop.get("oneOf") or [] if isinstance(o, dict)
        ]
        titles = prop.get("enumNames") or [
            o.get("title", o.get("const")) for o in prop.get("oneOf") or [] if isinstance(o, dict)
        ]
        fields.append(
            ElicitField(
                name=str(name),
                kind=kind,
                title=str(prop.get("title") or ""),
                description=str(prop.get("description") or ""),
                required=name in required,
                choices=tuple(str(c) for c in choices if c is not None),
                choice_titles=tuple(str(c) for c in titles if c is not None),
                default=prop.get("default"),
            )
        )
    return Elicitation(server=server, message=message, fields=tuple(fields))


def check_answer(request: Elicitation, content: dict[str, Any]) -> str | None:
    """Why an accepted answer does not fit the form, or None."""
    known = {f.name: f for f in request.fields}
    extra = sorted(set(content) - set(known))
    if extra:
        return f"unknown field(s) {', '.join(extra)}"
    for field in request.fields:
        if field.name not in content:
            if field.required:
                return f"{field.name} is required"
            continue
        value = content[field.name]
        ok = {
            "string": isinstance(value, str),
            "boolean": isinstance(value, bool),
            "integer": isinstance(value, int) and not isinstance(value, bool),
            "number": isinstance(value, int | float) and not isinstance(value, bool),
        }[field.kind]
        if not ok:
            return f"{field.name} must be a {field.kind}"
        if field.choices and value not in field.choices:
            return f"{field.name} must be one of {', '.join(field.choices)}"
    return None


async def list_tools(client: Client, server: str) -> list[ToolSpec]:
    out: list[ToolSpec] = []
    async for tool in _pages(client.list_tools, "tools"):
        notes = tool.annotations
        hint = None
        if notes is not None and notes.read_only_hint:
            hint = "read-only"
        elif notes is not None and notes.destructive_hint:
            hint = "destructive"
        description = (tool.description or tool.title or "").strip()
        schema = inline_refs(dict(tool.input_schema or {}))
        out.append(ToolSpec(server, tool.name, description, schema, hint))
    return out


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with its local `$ref`s (`#/$defs/X`, `#/definitions/X`: pydantic's
    nested models) replaced by what they name, so the argument parser and `--help` see
    an array of objects as one. A cycle or an unknown reference stays a `$ref`."""
    defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}

    def walk(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [walk(item, seen) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(("#/$defs/", "#/definitions/")):
            name = ref.rsplit("/", 1)[1]
            if name in defs and name not in seen and len(seen) < 8:
                rest = {k: v for k, v in node.items() if k != "$ref"}
                return walk({**defs[name], **rest}, (*seen, name))
        return {k: walk(v, seen) for k, v in node.items() if k not in ("$defs", "definitions")}

    inlined: dict[str, Any] = walk(schema, ())
    return inlined


async def list_resources(client: Client) -> list[ResourceSpec]:
    """Resources then templates; [] when the server offers none."""
    caps = client.server_capabilities
    if caps is None or caps.resources is None:
        return []
    out: list[ResourceSpec] = []
    async for r in _pages(client.list_resources, "resources"):
        out.append(ResourceSpec(str(r.uri), r.name, (r.description or "").strip(), r.mime_type))
    async for rt in _pages(client.list_resource_templates, "resource_templates"):
        description = (rt.description or "").strip()
        out.append(ResourceSpec(rt.uri_template, rt.name, description, rt.mime_type, True))
    return out


async def list_prompts(client: Client) -> list[PromptSpec]:
    caps = client.server_capabilities
    if caps is None or caps.prompts is None:
        return []
    out: list[PromptSpec] = []
    async for p in _pages(client.list_prompts, "prompts"):
        args = tuple(
            (a.name, bool(a.required), (a.description or "").strip()) for a in p.arguments or ()
        )
        out.append(PromptSpec(p.name, (p.description or p.title or "").strip(), args))
    return out


async def _pages(fetch: Callable[..., Awaitable[Any]], attr: str) -> Any:
    """Every item of a paginated list (at most 100 pages), fresh from the server."""
    cursor: str | None = None
    for _ in range(100):
        page = await fetch(cursor=cursor, cache_mode="refresh")
        for item in getattr(page, attr):
            yield item
        cursor = page.next_cursor
        if not cursor:
            break


@contextlib.asynccontextmanager
async def watch_end(transport: Any, on_end: Callable[[], None]) -> Any:
    """The transport's (read, write) streams, the read side wrapped to call `on_end` when
    the server's output ends - the only sign the SDK gives of a stdio server that exited
    between requests. A wrapper, not a pump: no extra hop per message."""
    async with transport as (read, write):
        yield _EndWatch(read, on_end), write


class _EndWatch:
    """Delegates to a receive stream; reports its end of stream once."""

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner = inner
        self._on_end: Callable[[], None] | None = on_end

    def _ended(self) -> None:
        on_end, self._on_end = self._on_end, None
        if on_end is not None:
            on_end()

    async def __aenter__(self) -> _EndWatch:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> Any:
        return await self._inner.__aexit__(*exc)

    def __aiter__(self) -> _EndWatch:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self._inner.__anext__()
        except StopAsyncIteration:
            self._ended()
            raise

    async def receive(self) -> Any:
        import anyio

        try:
            return await self._inner.receive()
        except anyio.EndOfStream:
            self._ended()
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
