"""The tool names models call out of habit (`Read`, `Edit`, `Grep`, `Glob`, `TodoWrite`,
`Task`… from other agents) and the exact `Bash(command="…")` that does the same here.

Synapse has one tool, `Bash`; a call to any other name is not run. Its tool_result
says so and, when the input allows, gives the precise equivalent call built from
that input, so the model's next call is right (the line is not run for it: the
model should see and own what runs).
"""

from __future__ import annotations

import json
from typing import Any

from synapse_lsp import catalog
from synapse_lsp.cmdline import quote

_MAX_EXAMPLE = 600  # characters of an example command shown back


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value != "" else None


def _grep(args: dict[str, Any]) -> str | None:
    pattern = _text(args.get("pattern"))
    if pattern is None:
        return None
    mode = args.get("output_mode")
    flags = (
        "-rlE" if mode in (None, "files_with_matches") else "-rcE" if mode == "count" else "-rnE"
    )
    if args.get("-i") is True:
        flags += "i"
    line = f"grep {flags}"
    glob = _text(args.get("glob"))
    if glob is not None:
        line += f" --include={quote(glob)}"
    where = _text(args.get("path")) or "."
    return f"{line} -e {quote(pattern)} {quote(where)}"


def _glob(args: dict[str, Any]) -> str | None:
    pattern = _text(args.get("pattern"))
    if pattern is None:
        return None
    where = _text(args.get("path"))
    cd = f"cd {quote(where)} && " if where is not None else ""
    # the glob itself stays unquoted: bash expands it; `**` needs globstar
    safe = pattern.replace("'", "").replace("$", "").replace("`", "")
    return f"(shopt -s globstar nullglob; {cd}printf '%s\\n' {safe})"


def _ls(args: dict[str, Any]) -> str | None:
    path = _text(args.get("path")) or "."
    return f"ls -la {quote(path)}"


# Other agents' native tools (case-insensitive) -> (the command, how to build it).
# Their tools that are Synapse built-ins come from the catalog (`Traits.claude_tool`).
_NATIVE: dict[str, tuple[str, Any]] = {
    "grep": ("grep", _grep),
    "glob": ("a bash glob", _glob),
    "ls": ("ls", _ls),
}
_NATIVE_EXAMPLES = {
    "grep": "Bash(command=\"grep -rnE 'pattern' .\")",
    "glob": "Bash(command=\"(shopt -s globstar nullglob; printf '%s\\\\n' **/*.py)\")",
    "ls": 'Bash(command="ls -la")',
}


def _equivalent(key: str) -> tuple[str, Any, str] | None:
    """(what it is here, a builder from the tool input, an example) for another
    agent's tool name (lower case, no dashes or spaces)."""
    if key in _NATIVE:
        ours, build = _NATIVE[key]
        return ours, build, _NATIVE_EXAMPLES[key]
    for name, builtin in catalog.entries():
        traits = catalog.traits(builtin)
        tool = traits.claude_tool
        if tool is not None and key in (tool.lower(), *traits.tool_aliases):
            ours = f"{name}:<type>" if traits.prefixed else name
            return ours, builtin.from_tool_input, traits.example
    return None


def as_bash_call(command: str) -> str:
    """`Bash(command="…")` with `command` as a JSON string (exact escaping)."""
    return f"Bash(command={json.dumps(command, ensure_ascii=False)})"


def unknown_tool_result(name: Any, tool_input: Any) -> str:
    """The tool_result text for a call to a tool that does not exist."""
    shown = name if isinstance(name, str) else json.dumps(name)
    args = tool_input if isinstance(tool_input, dict) else {}
    head = f"[Error] Unknown tool {shown!r}: the only tool is Bash. Not run."
    key = shown.lower().replace("-", "").replace(" ", "")
    found = _equivalent(key)
    if found is not None:
        ours, build, example = found
        line = build(args)
        if line is not None and len(line) <= _MAX_EXAMPLE:
            return (
                f"{head}\nHint: `{shown}` is `{ours}` here, run through Bash. The same call:\n"
                f"{as_bash_call(line)}\n"
            )
        return f"{head}\nHint: `{shown}` is `{ours}` here, run through Bash, e.g. {example}\n"
    command = args.get("command") or args.get("cmd")
    if isinstance(command, str) and command.strip():
        return f"{head}\nHint: Retry as {as_bash_call(command)}.\n"
    return (
        f"{head}\nHint: Every action is a shell command in Bash, e.g. "
        'Bash(command="ls -la"); built-ins: read, write, edit, plan, task:*; extension '
        "commands: `command:search <keyword>`.\n"
    )
