"""The system prompt, assembled from `prompts/*.md` (SPEC §6).

Zone A's built-in documentation is generated from each built-in's own `help()`,
the same text `<cmd> --help` prints, so the prompt and the commands never drift.
The stable part (tool + system prompt) carries `cache_control` so the API can
cache it; what changes per session (cwd, date) comes after the breakpoint.
"""

from __future__ import annotations

import functools
import platform
import re
from collections.abc import Iterable
from datetime import date
from importlib import resources
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from synapse_lsp import catalog
from synapse_lsp.commands import Command

# SPEC §6 / seed 000: simple enough to use without --help.
SIMPLE_NATIVE_COMMANDS: tuple[str, ...] = (
    "ls", "pwd", "cd", "mkdir", "rmdir", "rm", "cp", "mv", "touch", "cat", "head", "tail",
    "echo", "env", "export", "which", "whoami", "date", "clear", "true", "false", "exit",
)  # fmt: skip
ZONE_B_EXAMPLES: tuple[str, ...] = ("git", "docker", "curl", "npm", "python", "jq", "tar", "ssh")
SUBAGENT_TEMPLATES = {
    "general": "subagent_general",
    "explore": "subagent_explore",
    "skill:search": "subagent_skill_search",
    "skill:enhance": "subagent_skill_enhance",
}
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")
CACHE = {"type": "ephemeral"}


@runtime_checkable
class PromptSection(Protocol):
    """A built-in that adds a section of its own to the prompt (`skill:search`: the
    installed skills, by name and one line each)."""

    def prompt_section(self) -> str: ...


@runtime_checkable
class PendingSection(Protocol):
    """A `PromptSection` whose text is not known yet (`skill:search` before the registry
    indexed the skills): a session builds its prompt again once none is pending."""

    def section_pending(self) -> bool: ...


class PromptError(Exception):
    """A template is missing or uses a placeholder the code does not fill."""


@functools.cache
def prompts_dir() -> Path:
    """`synapse_lsp/_prompts` in an installed wheel, else the repository's `prompts/`."""
    packaged = resources.files("synapse_lsp").joinpath("_prompts")
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "prompts"


@functools.cache
def template(name: str) -> str:
    path = prompts_dir() / f"{name}.md"
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PromptError(f"prompt template {path} cannot be read: {exc}") from None


def render(name: str, **values: str) -> str:
    """Fill `{{name}}` placeholders; an unknown or missing one is an error."""
    text = template(name)
    wanted = set(_PLACEHOLDER.findall(text))
    missing = wanted - set(values)
    if missing:
        raise PromptError(f"template {name}.md needs values for {sorted(missing)}")
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], text).strip() + "\n"


def ordered_builtins(commands: Iterable[Command]) -> list[Command]:
    """Each built-in once, by its `prompt_rank` (`catalog.Traits`), then by name."""
    unique: dict[str, Command] = {}
    for cmd in commands:
        unique.setdefault(cmd.name, cmd)
    return sorted(unique.values(), key=lambda c: (catalog.of(c).prompt_rank, c.name))


def builtins_section(commands: Iterable[Command]) -> str:
    """Each built-in's full `--help` page, as `#### name` sections."""
    parts = []
    for cmd in ordered_builtins(commands):
        title = f"{cmd.name}:<type>" if catalog.of(cmd).prefixed else cmd.name
        parts.append(f"#### {title}\n\n```\n{cmd.help().strip()}\n```")
    return "\n\n".join(parts)


def sections_text(commands: Iterable[Command]) -> str:
    """The sections built-ins add (`PromptSection`), in their prompt order."""
    parts = [c.prompt_section() for c in ordered_builtins(commands) if isinstance(c, PromptSection)]
    return "\n\n".join(p.strip() for p in parts if p.strip())


def sections_pending(commands: Iterable[Command]) -> bool:
    """Whether a built-in's prompt section is not known yet (`PendingSection`)."""
    return any(isinstance(c, PendingSection) and c.section_pending() for c in commands)


def system_text(
    commands: Iterable[Command],
    task_type: str | None = None,
    *,
    subagent: str | None = None,
    more_types: str = "",
) -> str:
    """The stable system prompt; with `task_type`, the sub-agent's section is appended
    (`subagent`: that section's text, a Claude Code sub-agent's). `more_types`: a
    section listing more task types, after the built-ins."""
    builtins = builtins_section(commands) + (f"\n\n{more_types}" if more_types else "")
    text = render(
        "system",
        builtins=builtins,
        whitelist=", ".join(SIMPLE_NATIVE_COMMANDS),
        zone_b=", ".join(ZONE_B_EXAMPLES),
    )
    if subagent is not None:
        text += "\n" + subagent
    elif task_type is not None:
        name = SUBAGENT_TEMPLATES.get(task_type, "subagent_general")
        text += "\n" + render(name)
    return text


def environment_text(cwd: Path, workspace_root: Path | None) -> str:
    return render(
        "environment",
        workspace=str(workspace_root or cwd),
        cwd=str(cwd),
        platform=f"{platform.system()} {platform.release()} ({platform.machine()})",
        date=date.today().isoformat(),
    )


def system_blocks(
    commands: Iterable[Command],
    *,
    cwd: Path,
    workspace_root: Path | None = None,
    task_type: str | None = None,
    instructions: str = "",
    append: str = "",
    subagent: str | None = None,
    more_types: str = "",
) -> list[dict[str, Any]]:
    """System prompt blocks: the stable one is a cache breakpoint, the project's
    instructions (`agent/instructions.py`) and the environment follow; `append` (the
    user's `--append-system-prompt`) comes last. `subagent`, `more_types`: `system_text`'s.
    The built-ins' own sections (`sections_text`: the installed skills) come right after
    the stable block, which stays the same whatever is installed."""
    commands = list(commands)
    stable = system_text(commands, task_type, subagent=subagent, more_types=more_types)
    blocks: list[dict[str, Any]] = [{"type": "text", "text": stable, "cache_control": CACHE}]
    if sections := sections_text(commands):
        blocks.append({"type": "text", "text": sections})
    if instructions:
        blocks.append({"type": "text", "text": instructions})
    blocks.append({"type": "text", "text": environment_text(cwd, workspace_root)})
    if append:
        blocks.append({"type": "text", "text": append})
    return blocks


def bash_tool() -> dict[str, Any]:
    """The one tool (SPEC §1)."""
    return {
        "name": "Bash",
        "description": render("bash_tool").strip(),
        "input_schema": {
            "type": "object",
            "properties": {
                "command": {
                    "type": "string",
                    "description": "The command line to run, exactly as typed in a shell.",
                },
                "restart": {
                    "type": "boolean",
                    "description": "Restart the shell session before running the command.",
                },
            },
            "required": ["command"],
        },
    }


def compaction_instructions() -> str:
    return render("compaction")


def editor_context_text(details: str) -> str:
    return render("editor_context", details=details.strip())
