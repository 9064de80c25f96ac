"""Parts of Claude Code's hook protocol beyond a verdict (policy/hooks.py).

`updatedInput` of a PreToolUse hook: `hookSpecificOutput.updatedInput.command`
replaces the command line of a Bash-shaped call (`Bash`, `mcp__*`; not the `Edit`,
`Write`, `Read` shapes, whose other fields Synapse cannot take back). The old line is
not run; the router (router/decide.py) routes the new one from the start — the deny
rules, the PreToolUse hooks, the sandbox mode, the `permission` policy and its
question all apply to it again, so a rewrite never bypasses the gate (a hook's
`allow` that comes with it counts for nothing). A rewrite of a rewritten line is
refused (no chains); a hook that answers the same line again has no word. A caller
other than the router (the permission check of a write built-in's expanded
arguments) sees a denial.
"""

from __future__ import annotations

from typing import Any, Protocol

REWRITTEN = "a PreToolUse hook replaced the command (updatedInput) with: "


class Rewrites(Protocol):
    """What a `hooks.HookScope` keeps of rewrites in its turn."""

    rewrites: dict[str, str]
    rewritten: set[str]


def rewrite(scope: Rewrites, line: str, updated: Any, tool_input: dict[str, Any]) -> str | None:
    """Note a hook's `updatedInput` for `line`; what is wrong with it, else None."""
    command = updated.get("command") if isinstance(updated, dict) else None
    if "command" not in tool_input or not isinstance(command, str) or not command.strip():
        return (
            "returned updatedInput without a `command` to run instead (only a Bash call's "
            "command line can be replaced): the call is not run"
        )
    new = command.strip()
    if new == line:
        return None
    if line in scope.rewritten:
        return "rewrote a command a hook had already rewritten (updatedInput): not run"
    if scope.rewrites.get(line, new) != new:
        return "and another PreToolUse hook replaced the command differently: not run"
    scope.rewrites[line] = new
    return None


def take(scope: Rewrites | None, line: str) -> str | None:
    """The line that replaces `line`, once (the router's)."""
    if scope is None or line not in scope.rewrites:
        return None
    new = scope.rewrites.pop(line)
    scope.rewritten.add(new)
    return new
