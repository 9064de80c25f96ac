"""Claude Code's own locations, for one session: custom slash commands
(`.claude/commands/**/*.md`, claude_commands.py) and sub-agent definitions
(`.claude/agents/*.md`, claude_agents.py).

Two places each, as in Claude Code: the user's (`~/.claude/`, or `$CLAUDE_CONFIG_DIR`)
and the folder's (`<workspace>/.claude/`). The folder's are used only while the folder
is trusted — the trust its permission gate's hooks follow (policy/trust.py; a gate with
no hooks is an untrusted folder) — and unchanged since the user confirmed them (a
changed or new file: `trust.unconfirmed`, the workspace's list the hooks carry), so an
untrusted folder's commands are not offered and its sub-agents not loaded; the user's
always are. On a name both define, the user's own wins, as for skills (one rule:
docs/extensions.md, "Claude Code's locations: precedence"). A session owns one
`ClaudeCode`: commands are read at each use (an edit shows at once), sub-agents once per
session (the cached system prompt lists them).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from synapse_lsp.agent import claude_commands, prompts
from synapse_lsp.agent.claude_agents import AgentRunner, AgentSet, Run, load_agents
from synapse_lsp.agent.claude_files import PROJECT, USER
from synapse_lsp.agent.slash import SESSION_COMMANDS
from synapse_lsp.policy.claude_home import user_dir
from synapse_lsp.policy.hooks import of_gate
from synapse_lsp.policy.trust import CHANGED_HINT


class ClaudeCode:
    """One session's Claude Code commands and sub-agents, trust-gated."""

    def __init__(self, gate: object, root: Callable[[], Path]) -> None:
        self._gate = gate  # the session's permission gate: its hooks know the trust
        self._root = root
        self._agents: AgentSet | None = None
        self._told: set[str] = set()  # built-in names whose clash was said once

    def trusted(self) -> bool:
        hooks = of_gate(self._gate)
        # Hooks keeps the Workspace's live decision; it has no public accessor yet.
        return hooks is not None and hooks.trusted()

    def changed(self, kind: str) -> bool:
        """Whether the folder's `.claude/<kind>` changed since the user confirmed it."""
        hooks = of_gate(self._gate)
        return hooks is not None and self._root() / ".claude" / kind in hooks.unconfirmed()

    def locations(self, kind: str) -> list[tuple[str, Path]]:
        """(scope, folder) to read, lowest precedence first: Synapse's own commands
        (/init, prompts/commands/), the folder's when it is trusted and unchanged, then
        the user's (their own wins a name)."""
        places = [("synapse", prompts.prompts_dir() / "commands")] if kind == "commands" else []
        if self.trusted() and not self.changed(kind):
            places.append((PROJECT, self._root() / ".claude" / kind))
        return [*places, (USER, user_dir() / kind)]

    def withheld(self, kind: str) -> tuple[Path, str] | None:
        """The folder's own `.claude/<kind>` when it exists but is not used, and why."""
        own = self._root() / ".claude" / kind
        if not own.is_dir() or (self.trusted() and not self.changed(kind)):
            return None
        why = CHANGED_HINT if self.trusted() else "the folder is not trusted"
        return own, why

    # ---------------------------------------------------------------- commands

    def commands(self) -> claude_commands.CommandSet:
        found = claude_commands.load(self.locations("commands"), _builtin)
        found.withheld = self.withheld("commands")
        return found

    def expand(self, text: str) -> str:
        """The prompt a `/name args` line stands for (a custom command not shadowed by
        a built-in); any other text as it is."""
        match = claude_commands.LINE.match(text.strip())
        if match is None or _builtin(match.group(1)):
            return text
        command = self.commands().get(match.group(1))
        return command.expand(match.group(2) or "") if command is not None else text

    def clash_notice(self, name: str) -> str | None:
        """Once per session: a custom command named like built-in `/name` is not used."""
        builtin = SESSION_COMMANDS.get(name)
        if builtin is None or builtin.name in self._told:
            return None
        shadowed = [c for c in self.commands().shadowed if _builtin(c.name) is builtin]
        if not shadowed:
            return None
        self._told.add(builtin.name)
        files = ", ".join(str(c.path) for c in shadowed)
        return f"(/{builtin.name} is built in: the custom command in {files} is not used)"

    # --------------------------------------------------------------- sub-agents

    def agents(self) -> AgentSet:
        if self._agents is None:
            self._agents = load_agents(self.locations("agents"))
            self._agents.withheld = self.withheld("agents")
        return self._agents

    def tasks(self, run: Run) -> AgentRunner:
        """The session's `task:<type>` runner, knowing these sub-agent types."""
        return AgentRunner(run, self.agents)


def _builtin(name: str) -> object | None:
    return SESSION_COMMANDS.get(name)
