"""A chat session's model client and the system prompt it is given.

`ChatSession` owns one `SessionModel`. The client is the face's, or one built from
the settings on first use (the SDK is imported then, never when a session is made);
a client built here is the session's: it follows the live settings (model, output
limit, thinking budget) and is closed with the session. The system prompt holds the
tools, the folder and the AGENTS.md / CLAUDE.md instructions (instructions.py, read
once); the main conversation's is built once (once more at the first request after a
built-in's pending section, the skill list, is known: `prompts.PendingSection`), a
sub-agent type's each time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synapse_lsp.agent import instructions as instructions_
from synapse_lsp.agent import prompts
from synapse_lsp.agent.pricing import context_window

if TYPE_CHECKING:
    from synapse_lsp.agent.claude_code import ClaudeCode
    from synapse_lsp.agent.model import ModelClient
    from synapse_lsp.config import Settings
    from synapse_lsp.router import BashRouter


class SessionModel:
    """The model a session talks to, and what it tells it first."""

    def __init__(
        self,
        model: ModelClient | None,
        settings: Callable[[], Settings],
        window: int | None,
        router: Callable[[], BashRouter],
        cwd: Path,
        workspace_root: Callable[[], Path | None],
        claude: ClaudeCode | None = None,
    ) -> None:
        """`window`: the context window in tokens; None = the model's (per turn).
        `claude`: the Claude Code sub-agents the prompt lists (and whose prompts it is)."""
        self._claude = claude
        self.window = window
        self._client = model
        self._owns = False  # a client we built ourselves is ours to close
        self._settings = settings
        self._router = router
        self._cwd = cwd
        self._workspace_root = workspace_root
        self._system_cache: list[dict[str, Any]] | None = None
        self._pending = False  # the cached prompt lacks a section not known then
        self._instructions: instructions_.Found | None = None
        # Text the user appends to the main agent's system prompt for this run
        # (`synapse chat --append-system-prompt`); sub-agents do not get it.
        self.append = ""

    def client(self) -> ModelClient:
        """The client (built on first use; ModelError when it cannot be)."""
        settings = self._settings()
        if self._client is None:
            from synapse_lsp.agent.model import ModelClient

            self._client = ModelClient.from_settings(settings)
            self._owns = True
        elif self._owns:
            # Live settings: the next call uses the model, output limit and thinking
            # budget the user has just set (endpoint and key stay those of the client).
            self._client.model = settings.model
            self._client.max_tokens = settings.max_tokens
            self._client.thinking_budget = settings.thinking_budget or None
        return self._client

    def name(self) -> str:
        return self._client.model if self._client is not None else self._settings().model

    def context_window(self) -> int:
        return self.window or context_window(self.name())

    def turn_window(self) -> int:
        """A turn's context window: the client's model's (the client is built first)."""
        return self.window or context_window(self.client().model)

    def system(self, task_type: str | None = None) -> list[dict[str, Any]]:
        root = self._workspace_root()
        agents = self._claude.agents() if self._claude is not None else None
        if task_type is not None:
            agent = agents.get(task_type) if agents is not None else None
            return prompts.system_blocks(
                self._router().builtins.values(),
                cwd=self._cwd,
                workspace_root=root,
                task_type=task_type,
                instructions=self.instructions().prompt_text(root or self._cwd),
                subagent=agent.section() if agent is not None else None,
            )
        builtins = self._router().builtins.values()
        if self._system_cache is None or (self._pending and not prompts.sections_pending(builtins)):
            # Built once, or once more at the first request after the skills are indexed
            # (a prompt built before has no skill list); stable from then on.
            self._pending = prompts.sections_pending(builtins)
            self._system_cache = prompts.system_blocks(
                builtins,
                cwd=self._cwd,
                workspace_root=root,
                instructions=self.instructions().prompt_text(root or self._cwd),
                append=self.append,
                more_types=agents.prompt_section() if agents is not None else "",
            )
        return self._system_cache

    def set_append(self, text: str) -> None:
        """Append `text` to the main agent's system prompt from the next request on."""
        self.append, self._system_cache = text, None

    def instructions(self) -> instructions_.Found:
        """The AGENTS.md / CLAUDE.md files the prompt holds (read once)."""
        if self._instructions is None:
            root = self._workspace_root() or self._cwd
            self._instructions = instructions_.load(root, self._cwd, self._settings().synapse_home)
        return self._instructions

    async def aclose(self) -> None:
        """Close the client if it is ours (the next use builds another)."""
        if self._owns and self._client is not None:
            model, self._client, self._owns = self._client, None, False
            with contextlib.suppress(Exception):
                await model.close()
