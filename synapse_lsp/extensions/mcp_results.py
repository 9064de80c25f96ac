"""An MCP server's answers as a command's output: a tool's result (`format_result`),
a resource's contents (`format_contents`) and a prompt's messages (`prompt_text`)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import TYPE_CHECKING, Any

from synapse_lsp.commands import CommandOutput, FailureCategory
from synapse_lsp.output import BoundedCapture

if TYPE_CHECKING:
    from mcp_types import CallToolResult

    from synapse_lsp.config import Settings

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
IMAGE_MAX_BYTES = 5 * 1024 * 1024  # the Messages API's limit per image
IMAGES_MAX = 4  # per result: a screenshot tool's answer, not a gallery
_AUDIO_EXT = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/ogg": "ogg"}


def format_result(result: CallToolResult, settings: Settings | None = None) -> CommandOutput:
    """Text printed; JSON pretty-printed; blobs summarised; isError -> exit 1. An image
    (PNG, JPEG, GIF, WebP up to `IMAGE_MAX_BYTES`, at most `IMAGES_MAX` of them) is also
    attached for the model as an `image` block; audio, which the Messages API cannot
    take, is saved under `$SYNAPSE_HOME/outputs/` and its path named (`_media`).

    With `settings`, the text goes through `output.BoundedCapture` as a shell command's
    output does: the model gets `settings.output` (head and tail), and past it the whole
    text is written to `$SYNAPSE_HOME/outputs/`, whose path the cut marker names and
    `full_output_path` carries. The text is fed in slices, never copied whole."""
    parts: list[str] = []
    attachments: list[dict[str, Any]] = []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(_pretty(getattr(block, "text", "")))
        elif kind in ("image", "audio"):
            parts.append(_media(kind, block, attachments, settings))
        elif kind == "resource":
            res = getattr(block, "resource", None)
            uri = getattr(res, "uri", "?")
            mime = getattr(res, "mime_type", None) or "unknown type"
            text = getattr(res, "text", None)
            if isinstance(text, str):
                parts.append(f"[resource: {uri}, {mime}, {len(text)} chars]\n{_pretty(text)}")
            else:
                size = _b64_size(getattr(res, "blob", ""))
                parts.append(f"[resource: {uri}, {mime}, {size} bytes]")
        elif kind == "resource_link":
            link_size = getattr(block, "size", None)
            extra = f", {link_size} bytes" if link_size is not None else ""
            mime = getattr(block, "mime_type", None) or "unknown type"
            parts.append(f"[resource link: {getattr(block, 'uri', '?')} ({mime}{extra})]")
        else:
            parts.append(f"[{kind or 'unknown'} content]")
    structured = result.structured_content
    if not parts and structured is not None:
        parts.append(json.dumps(structured, indent=2, ensure_ascii=False))
    data: dict[str, Any] = {}
    if structured is not None:
        data["structured"] = structured
    if settings is not None:
        out = _bounded_result(parts, settings, data, is_error=bool(result.is_error))
        out.attachments = attachments
        return out
    text = "\n".join(p.rstrip("\n") for p in parts)
    text = text + "\n" if text else ""
    if result.is_error:
        return CommandOutput(
            stderr=text or "the tool reported an error (no message)\n",
            exit_code=1,
            category=FailureCategory.EXECUTION_ERROR,
            data=data,
        )
    return CommandOutput(stdout=text, data=data, attachments=attachments)


# Text blocks longer than this are printed as they come, not re-indented as JSON
# (parsing and dumping a 50 MB JSON text would cost several times its size).
PRETTY_MAX_CHARS = 1 << 20
_SLICE = 1 << 20


def _bounded_result(
    parts: list[str], settings: Settings, data: dict[str, Any], *, is_error: bool
) -> CommandOutput:
    """The parts, each without its trailing newlines, one per line, through a capture."""
    stream = "stderr" if is_error else "stdout"
    capture = BoundedCapture(settings.output, settings.synapse_home / "outputs", name=stream)
    try:
        for part in parts:
            end = len(part)
            while end and part[end - 1] == "\n":
                end -= 1
            for start in range(0, end, _SLICE):
                piece = part[start : min(end, start + _SLICE)]
                capture.feed(piece.encode("utf-8", "surrogatepass"))
            capture.feed(b"\n")
    finally:
        capture.close()
    text = capture.text()
    if not is_error:
        return CommandOutput(
            stdout=text,
            data=data,
            bounded=True,
            full_output_path=capture.full_output_path,
            stdout_path=capture.full_output_path if capture.truncated else None,
        )
    return CommandOutput(
        stderr=text or "the tool reported an error (no message)\n",
        exit_code=1,
        category=FailureCategory.EXECUTION_ERROR,
        data=data,
        bounded=True,
        full_output_path=capture.full_output_path,
    )


def _pretty(text: str) -> str:
    if len(text) > PRETTY_MAX_CHARS:
        return text
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
        try:
            return json.dumps(json.loads(stripped), indent=2, ensure_ascii=False)
        except json.JSONDecodeError:
            pass
    return text


def _b64_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (ValueError, TypeError):
        return len(data)


def _media(
    kind: str, block: Any, attachments: list[dict[str, Any]], settings: Settings | None
) -> str:
    """The line naming an image or audio block; an image the model can see is attached,
    an audio clip is saved to a file (when there are settings to say where)."""
    mime = str(getattr(block, "mime_type", "") or "?")
    data = str(getattr(block, "data", "") or "")
    size = _b64_size(data)
    if kind == "image":
        if mime not in IMAGE_TYPES:
            return (
                f"[image: {mime}, {size} bytes; not attached: the model takes PNG, JPEG, GIF, WebP]"
            )
        if size > IMAGE_MAX_BYTES:
            return f"[image: {mime}, {size} bytes; not attached: over {IMAGE_MAX_BYTES} bytes]"
        if len(attachments) >= IMAGES_MAX:
            return f"[image: {mime}, {size} bytes; not attached: {IMAGES_MAX} already are]"
        source = {"type": "base64", "media_type": mime, "data": data}
        attachments.append({"type": "image", "source": source})
        return f"[image: {mime}, {size} bytes, attached]"
    saved = _save(data, mime, settings) if settings is not None else None
    where = f", saved to {saved}" if saved else ""
    return f"[audio: {mime}, {size} bytes{where}; the model cannot listen to audio]"


def _save(data: str, mime: str, settings: Settings) -> str | None:
    try:
        raw = base64.b64decode(data, validate=True)
    except (ValueError, binascii.Error):
        return None
    folder = settings.synapse_home / "outputs"
    name = f"mcp-{hashlib.sha256(raw).hexdigest()[:16]}.{_AUDIO_EXT.get(mime, 'bin')}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / name
        if not path.exists():
            tmp = path.with_suffix(".part")
            tmp.write_bytes(raw)
            tmp.replace(path)
    except OSError:
        return None
    return str(path)


def format_contents(contents: list[Any], settings: Settings | None = None) -> CommandOutput:
    """A resource's contents: text printed (JSON pretty-printed), a blob saved to a file
    under `$SYNAPSE_HOME/outputs/` (an image also attached) and named."""
    parts: list[str] = []
    attachments: list[dict[str, Any]] = []
    for item in contents:
        uri = str(getattr(item, "uri", "?"))
        mime = getattr(item, "mime_type", None) or "unknown type"
        text = getattr(item, "text", None)
        if isinstance(text, str):
            parts.append(
                _pretty(text) if len(contents) == 1 else f"[{uri}, {mime}]\n{_pretty(text)}"
            )
            continue
        blob = str(getattr(item, "blob", "") or "")
        line = f"[resource: {uri}, {mime}, {_b64_size(blob)} bytes"
        if (
            mime in IMAGE_TYPES
            and _b64_size(blob) <= IMAGE_MAX_BYTES
            and len(attachments) < IMAGES_MAX
        ):
            attachments.append(
                {"type": "image", "source": {"type": "base64", "media_type": mime, "data": blob}}
            )
            line += ", attached"
        saved = _save(blob, mime, settings) if settings is not None else None
        parts.append(line + (f", saved to {saved}]" if saved else "]"))
    if settings is None:
        text = "\n".join(p.rstrip("\n") for p in parts)
        return CommandOutput(stdout=text + "\n" if text else "", attachments=attachments)
    out = _bounded_result(parts, settings, {}, is_error=False)
    out.attachments = attachments
    return out


def prompt_text(messages: list[Any]) -> str:
    """A prompt's messages as one user turn: the text of each (an assistant message is
    marked as such; an embedded resource's text included; anything else named)."""
    out: list[str] = []
    for message in messages:
        content = message.content
        kind = getattr(content, "type", "")
        if kind == "text":
            text = str(getattr(content, "text", ""))
        elif kind == "resource":
            res = getattr(content, "resource", None)
            text = str(getattr(res, "text", None) or f"[resource: {getattr(res, 'uri', '?')}]")
        else:
            text = f"[{kind or 'unknown'} content]"
        out.append(f"(assistant) {text}" if message.role == "assistant" else text)
    return "\n\n".join(out)
