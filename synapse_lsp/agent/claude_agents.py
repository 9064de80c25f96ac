"""Claude Code's sub-agent definitions (`.claude/agents/*.md`) as `task:<name>` types.

Front matter `name` (else the file's name; lower-case letters, digits, `-`),
`description`, `tools`, `model`; the body is the sub-agent's instructions, appended to
Synapse's own system prompt (the one Bash tool and its built-ins stay described).

`tools` (Claude Code's tool names) maps onto what the sub-agent may run, since every
call is one Bash line (`Access`, enforced by `subagents.ExploreGate`):
- absent, or naming `Bash` (or `Task`, `BashOutput`, `KillShell`): every command, as
  `task:general`;
- else naming `Edit`, `MultiEdit`, `Write` or `NotebookEdit`: read-only commands plus
  the `write` / `edit` built-ins;
- else (only `Read`, `Grep`, `Glob`, `LS`, `WebFetch`, `WebSearch`, `TodoWrite`…):
  read-only, as `task:explore`.
`mcp__server__tool` names allow that extension command (`mcp:server:tool`) too.
`model`: `sonnet`, `opus`, `haiku` -> `MODEL_ALIASES`; `inherit` or none: the session's;
any other value is taken as a model id. A name of a built-in type (`general`,
`explore`…) is not used: the built-in wins (`shadowed`).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from synapse_lsp.agent import prompts
from synapse_lsp.agent.claude_files import read_text, replaced, split_list
from synapse_lsp.agent.subagents import Access
from synapse_lsp.builtins.task import TASK_TYPES, TaskRunner
from synapse_lsp.commands import CommandOutput
from synapse_lsp.frontmatter import parse_front_matter

MODEL_ALIASES = {
    "sonnet": "claude-sonnet-5-5",
    "opus": "claude-opus-4-5",
    "haiku": "claude-haiku-4-5",
}
READ_TOOLS = frozenset(
    {"Read", "Grep", "Glob", "LS", "NotebookRead", "WebFetch", "WebSearch"}
    | {"TodoWrite", "TodoRead", "ExitPlanMode"}
)
EDIT_TOOLS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})
ALL_TOOLS = frozenset({"Bash", "BashOutput", "KillShell", "KillBash", "Task", "SlashCommand"})
_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")


@dataclass(frozen=True)
class AgentDef:
    name: str
    description: str
    prompt: str
    path: Path
    scope: str  # "user" or "project"
    access: Access | None  # None: every command
    model: str | None  # None: the session's

    def section(self) -> str:
        """The sub-agent's part of its system prompt (after Synapse's own)."""
        return prompts.render(
            "subagent_custom",
            agent=self.name,
            source=str(self.path),
            access=self.label(),
            instructions=self.prompt or "(no instructions given)",
        )

    def label(self) -> str:
        if self.access is None:
            return "every command"
        return "reads and edits files only" if self.access.edits else "read-only"


def access_of(tools: tuple[str, ...]) -> tuple[Access | None, list[str]]:
    """What `tools` allows, and the names it does not know (ignored)."""
    if not tools or any(t in ALL_TOOLS or t == "*" for t in tools):
        return None, [t for t in tools if not _known(t)]
    extensions = frozenset(
        "mcp:" + ":".join(t.split("__")[1:3]) for t in tools if t.count("__") >= 2
    )
    edits = any(t in EDIT_TOOLS for t in tools)
    return Access(edits=edits, extensions=extensions), [t for t in tools if not _known(t)]


def _known(tool: str) -> bool:
    return tool in READ_TOOLS | EDIT_TOOLS | ALL_TOOLS or tool.startswith("mcp__")


def model_of(value: str) -> str | None:
    value = value.strip()
    if not value or value.lower() == "inherit":
        return None
    return MODEL_ALIASES.get(value.lower(), value)


@dataclass
class AgentSet:
    agents: dict[str, AgentDef] = field(default_factory=dict)
    shadowed: list[AgentDef] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    withheld: tuple[Path, str] | None = None  # the folder's own agents folder, unused: why

    def get(self, task_type: str) -> AgentDef | None:
        return self.agents.get(task_type)

    def types(self) -> dict[str, str]:
        return {a.name: f"{a.description} ({a.label()})" for a in self.agents.values()}

    def prompt_section(self) -> str:
        """Where the system prompt lists the task types: these, after the built-ins."""
        if not self.agents:
            return ""
        rows = "\n".join(f"  task:{n:<14} {text}" for n, text in self.types().items())
        return (
            "#### Sub-agent types of this user and folder (.claude/agents)\n\n"
            f"Run them as any task type: `task:<name> -p '…' -d '…'`.\n\n```\n{rows}\n```"
        )


def load_agents(places: list[tuple[str, Path]]) -> AgentSet:
    found: dict[str, AgentDef] = {}
    out = AgentSet()
    for scope, folder in places:
        if folder.is_dir():
            for path in sorted(folder.glob("*.md")):
                agent = _read(path, scope, out.problems)
                if agent is not None:
                    out.problems += replaced(found.get(agent.name), agent.path)
                    found[agent.name] = agent
    for name, agent in sorted(found.items()):
        if name in TASK_TYPES:
            out.shadowed.append(agent)
        else:
            out.agents[name] = agent
    return out


def _read(path: Path, scope: str, problems: list[str]) -> AgentDef | None:
    text = read_text(path)
    if text is None:
        problems.append(f"{path}: cannot be read (or larger than 256 KiB)")
        return None
    meta, body = parse_front_matter(text)
    name = meta.get("name") or path.stem
    if not _NAME.fullmatch(name):
        problems.append(f"{path}: name {name!r} is not lower-case letters, digits and '-'")
        return None
    access, unknown = access_of(split_list(meta.get("tools", "")))
    problems += [f"{path}: tool {t!r} is not known; ignored" for t in unknown]
    return AgentDef(
        name=name,
        description=meta.get("description", "") or f"the {name} sub-agent",
        prompt=body.strip(),
        path=path,
        scope=scope,
        access=access,
        model=model_of(meta.get("model", "")),
    )


Run = TaskRunner  # the session's own runner, which this one wraps


class AgentRunner:
    """A session's `task:<type>` runner (the router's `subagent`) that knows the Claude
    Code sub-agent types: `task_types()` for the task built-in, `access()` for the
    sub-agent's gate, and a definition's `model` when the call names none."""

    def __init__(self, run: Run, agents: Callable[[], AgentSet]) -> None:
        self._run = run
        self._agents = agents

    def task_types(self) -> dict[str, str]:
        return self._agents().types()

    def access(self, task_type: str) -> Access | None:
        agent = self._agents().get(task_type)
        return agent.access if agent is not None else None

    def __call__(
        self,
        task_type: str,
        prompt: str,
        description: str,
        *,
        model: str | None = None,
        max_turns: int | None = None,
    ) -> Awaitable[CommandOutput]:
        agent = self._agents().get(task_type)
        if model is None and agent is not None:
            model = agent.model
        return self._run(task_type, prompt, description, model=model, max_turns=max_turns)
