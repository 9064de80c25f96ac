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

from synapse_lsp.cmdline import quote

_MAX_EXAMPLE = 600  # characters of an example command shown back


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value != "" else None


def _number(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _heredoc(head: str, body: str) -> str:
    """`head <<'EOF'` with `body` (a delimiter the body does not contain)."""
    mark = "EOF"
    while mark in body.split("\n"):
        mark += "_"
    return f"{head} <<'{mark}'\n{body.rstrip(chr(10))}\n{mark}"


def _read(args: dict[str, Any]) -> str | None:
    path = _text(args.get("file_path")) or _text(args.get("path"))
    if path is None:
        return None
    line = f"read {quote(path)}"
    start = _number(args.get("offset"))  # their offset: the line number to start at
    if start is not None and start > 1:
        line += f" --offset {start - 1}"
    limit = _number(args.get("limit"))
    if limit is not None:
        line += f" --limit {limit}"
    return line


def _write(args: dict[str, Any]) -> str | None:
    path = _text(args.get("file_path")) or _text(args.get("path"))
    content = args.get("content")
    if path is None or not isinstance(content, str):
        return None
    if "\n" in content.rstrip("\n"):
        return _heredoc(f"write {quote(path)}", content)
    return f"write {quote(path)} -- {quote(content)}"


def _edit(args: dict[str, Any]) -> str | None:
    path = _text(args.get("file_path")) or _text(args.get("path"))
    old = args.get("old_string", args.get("old_str"))
    new = args.get("new_string", args.get("new_str"))
    if path is None or not isinstance(old, str) or not isinstance(new, str):
        return None
    line = f"edit {quote(path)} {quote(old)} {quote(new)}"
    return line + " --all" if args.get("replace_all") is True else line


def _multi_edit(args: dict[str, Any]) -> str | None:
    path = _text(args.get("file_path"))
    edits = args.get("edits")
    if path is None or not isinstance(edits, list) or not edits:
        return None
    lines = [_edit({"file_path": path, **e}) if isinstance(e, dict) else None for e in edits]
    if any(line is None for line in lines):
        return None
    return " && ".join(line for line in lines if line is not None)


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


def _todo_write(args: dict[str, Any]) -> str | None:
    """The same input as a `TodoWrite` command: its shape is accepted as it is (the
    command validates it and says what is wrong)."""
    if not isinstance(args.get("todos"), list):
        return None
    return f"TodoWrite {quote(json.dumps({'todos': args['todos']}, ensure_ascii=False))}"


def _task(args: dict[str, Any]) -> str | None:
    prompt = _text(args.get("prompt"))
    if prompt is None:
        return None
    kind = _text(args.get("subagent_type")) or "general"
    kind = {"general-purpose": "general", "Explore": "explore"}.get(kind, kind)
    description = _text(args.get("description")) or "sub-task"
    return f"task:{kind} --prompt {quote(prompt)} --description {quote(description)}"


# name (case-insensitive) -> (our command, how to build it from the input)
_EQUIVALENTS: dict[str, tuple[str, Any]] = {
    "read": ("read", _read),
    "view": ("read", _read),
    "write": ("write", _write),
    "edit": ("edit", _edit),
    "multiedit": ("edit", _multi_edit),
    "str_replace": ("edit", _edit),
    "grep": ("grep", _grep),
    "glob": ("a bash glob", _glob),
    "ls": ("ls", _ls),
    "todowrite": ("TodoWrite", _todo_write),
    "task": ("task:<type>", _task),
}
_GENERIC = {
    "read": 'Bash(command="read path/to/file")',
    "view": 'Bash(command="read path/to/file")',
    "write": "Bash(command=\"write path/to/file <<'EOF'\\n…\\nEOF\")",
    "edit": "Bash(command=\"edit path/to/file 'old text' 'new text'\")",
    "multiedit": "Bash(command=\"edit f 'a' 'b' && edit f 'c' 'd'\")",
    "str_replace": "Bash(command=\"edit path/to/file 'old text' 'new text'\")",
    "grep": "Bash(command=\"grep -rnE 'pattern' .\")",
    "glob": "Bash(command=\"(shopt -s globstar nullglob; printf '%s\\\\n' **/*.py)\")",
    "ls": 'Bash(command="ls -la")',
    "todowrite": (
        'Bash(command="TodoWrite \'{\\"todos\\": [{\\"content\\": \\"first step\\", '
        '\\"activeForm\\": \\"Doing the first step\\", \\"status\\": \\"pending\\"}]}\'")'
    ),
    "task": "Bash(command=\"task:explore --prompt '…' --description '…'\")",
}


def as_bash_call(command: str) -> str:
    """`Bash(command="…")` with `command` as a JSON string (exact escaping)."""
    return f"Bash(command={json.dumps(command, ensure_ascii=False)})"


def unknown_tool_result(name: Any, tool_input: Any) -> str:
    """The tool_result text for a call to a tool that does not exist."""
    shown = name if isinstance(name, str) else json.dumps(name)
    args = tool_input if isinstance(tool_input, dict) else {}
    head = f"[Error] Unknown tool {shown!r}: the only tool is Bash. Not run."
    key = shown.lower().replace("-", "").replace(" ", "")
    if key in _EQUIVALENTS:
        ours, build = _EQUIVALENTS[key]
        line = build(args)
        if line is not None and len(line) <= _MAX_EXAMPLE:
            return (
                f"{head}\nHint: `{shown}` is `{ours}` here, run through Bash. The same call:\n"
                f"{as_bash_call(line)}\n"
            )
        return f"{head}\nHint: `{shown}` is `{ours}` here, run through Bash, e.g. {_GENERIC[key]}\n"
    command = args.get("command") or args.get("cmd")
    if isinstance(command, str) and command.strip():
        return f"{head}\nHint: Retry as {as_bash_call(command)}.\n"
    return (
        f"{head}\nHint: Every action is a shell command in Bash, e.g. "
        'Bash(command="ls -la"); built-ins: read, write, edit, plan, task:*; extension '
        "commands: `command:search <keyword>`.\n"
    )
