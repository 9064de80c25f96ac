"""What one `synapse chat` run is given besides its settings (the REPL's and `-p`'s):
`--continue` (the folder's latest stored session), `--append-system-prompt TEXT`, and
`--allow` / `--deny PREFIX` (command prefixes for this run only: policy/run_rules.py).

TEXT is the last block of the session's own system prompt
(`ChatSession.append_system_prompt`): not a sub-agent's, nor a compaction's, and
`/context` counts it. The run's API client (`RunModel`) counts the time spent on the
API (`duration_api_ms` of `-p`'s JSON result).
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from synapse_lsp.agent.model import ModelClient, StreamItem
from synapse_lsp.policy.rules import normalize_prefix

if TYPE_CHECKING:
    from synapse_lsp.agent.store import ChatStore
    from synapse_lsp.config import Settings
    from synapse_lsp.policy.run_rules import RunRules


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-c", "--continue", dest="continue_session", action="store_true",
        help="continue the latest stored session of this folder (as --resume ID does)",
    )  # fmt: skip
    parser.add_argument(
        "--append-system-prompt", metavar="TEXT",
        help="add TEXT at the end of the agent's system prompt, for this run",
    )  # fmt: skip
    parser.add_argument(
        "--allow", action="append", default=[], metavar="PREFIX",
        help="run commands that start with PREFIX (whole words, e.g. 'npm test') without "
        "asking, for this run only: never remembered (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--deny", action="append", default=[], metavar="PREFIX",
        help="refuse commands that start with PREFIX, also through sudo, env, bash -c ..., "
        "for this run only: never remembered (repeatable; a deny beats an allow)",
    )  # fmt: skip


def check(args: argparse.Namespace) -> str | None:
    """What is wrong with these flags (a usage error), else None."""
    if args.continue_session and args.resume:
        return "give --continue or --resume ID, not both"
    for flag, prefixes in (("--allow", args.allow), ("--deny", args.deny)):
        for prefix in prefixes:
            try:
                normalize_prefix(prefix)
            except ValueError as exc:
                return f"{flag} {exc}"
    return None


def latest_session(store: ChatStore, cwd: Path) -> str | None:
    """The id of the most recently updated stored session of the folder `cwd`."""
    for info in store.list():  # most recent first
        if info.workspace is not None and Path(info.workspace) == cwd:
            return info.id
    return None


def resolve_continue(args: argparse.Namespace, store: ChatStore, cwd: Path) -> str | None:
    """`--continue`: `args.resume` becomes the folder's latest session; what is wrong
    (no session to continue), else None."""
    if not args.continue_session:
        return None
    args.resume = latest_session(store, cwd)
    if args.resume is None:
        return f"--continue: no stored session of {cwd} to continue (`synapse chat --list`)"
    return None


def rules(args: argparse.Namespace, home: Path) -> RunRules | None:
    """The rule store with this run's `--allow`/`--deny` (None without them: the
    remembered rules alone). The flags were checked (`check`)."""
    if not args.allow and not args.deny:
        return None
    from synapse_lsp.policy.run_rules import RuleFile, RunRules

    return RunRules(RuleFile(home), args.allow, args.deny)


def model_factory() -> Callable[[Settings], ModelClient]:
    """How the run builds its API client: a `RunModel`, which times the API."""
    return RunModel.from_settings


class ApiClock:
    """Seconds spent on model requests (one per client, shared with its copies: a
    `task:* --model` sub-agent's client is a copy)."""

    def __init__(self) -> None:
        self.seconds = 0.0


class RunModel(ModelClient):
    """The API client of one `synapse chat` run (see the module doc)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.clock = ApiClock()

    async def stream(
        self,
        *,
        system: list[dict[str, Any]] | str,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        max_tokens: int | None = None,
    ) -> AsyncGenerator[StreamItem, None]:
        started = time.monotonic()
        inner = super().stream(system=system, messages=messages, tools=tools, max_tokens=max_tokens)
        try:
            async with contextlib.aclosing(inner):
                async for item in inner:
                    yield item
        finally:
            self.clock.seconds += time.monotonic() - started
