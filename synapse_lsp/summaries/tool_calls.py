"""A tool call's header as every face shows it: title, ACP tool kind and the paths it names.

Shared by the LSP face (`lsp/updates.py`, inside `synapse/sessionUpdate`) and the ACP
face (`acp/updates.py`, `session/update`), so both show the same title, kind and
locations for the same command.
"""

from __future__ import annotations

from pathlib import Path


def tool_call_summary(command: str) -> tuple[str, str, list[str]]:
    """Title, ACP kind and paths from `summaries.titles` (the raw command if it fails)."""
    from synapse_lsp.summaries.titles import summarize

    try:
        summary = summarize(command)
    except Exception:  # a summary is decoration: never let it break a turn
        return command, "execute", []
    paths = [str(p["path"]) for p in summary.parsed if isinstance(p.get("path"), str)]
    return summary.title, summary.kind, paths


def located(path: str, cwd: Path | None) -> Path:
    """`path` as the command meant it: relative paths against the shell's `cwd`."""
    found = Path(path).expanduser()
    return cwd / found if not found.is_absolute() and cwd is not None else found
