"""`synapse tools …`: list, search and refresh extension commands from the command line.

    synapse tools list [--type mcp|skill]
    synapse tools search [<keyword|glob|regex>] [--type mcp|skill] [--regex] [--limit N]
    synapse tools refresh [mcp|skills|all]

The workspace is the current directory (its `mcp_servers.json` is read first).
`list` and `search` print what `extensions.search.search_commands` finds, in its
order (the same search and ranking as `command:search`; `list` is the empty query).
`refresh` connects every MCP server, waits for them, regenerates the wrappers in
`$SYNAPSE_HOME/bin/` and prints what it found and every config problem; it exits 1
when a configured server is not ready at the end (failed, or still starting).

While they wait for MCP servers, all three say on stderr what they wait for once it
takes `PROGRESS_AFTER` seconds ("installing/starting github (npx), 12 s"): on a
terminal one line rewritten each second and erased when done, else one line every
`PROGRESS_EVERY` seconds (a log shows the wait without a line per second).
The MCP config files are those every other face starts: a folder's own
`mcp_servers.json` only when the folder is trusted (or `--trust` is given for the run),
and no file changed since the user confirmed it (`synapse_lsp.policy.trust`); a note names
the folder's servers that were not started and says how to trust the folder.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from synapse_lsp import __version__
from synapse_lsp.config import Settings
from synapse_lsp.policy import trust
from synapse_lsp.policy.folder_files import FOLDER_CONFIGS, withheld_servers_note

if TYPE_CHECKING:
    from synapse_lsp.extensions.registry import ExtensionRegistry

DEFAULT_LIMIT = 50  # command:search's default
PROGRESS_AFTER = 3.0  # a wait for MCP servers shorter than this prints nothing
PROGRESS_EVERY = 10.0  # seconds between progress lines when stderr is not a terminal


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="synapse tools", description="List, search and refresh mcp:* and skill:* commands."
    )
    parser.add_argument(
        "--version", action="version", version=f"synapse {__version__}",
        help="print the version and exit",
    )  # fmt: skip
    sub = parser.add_subparsers(dest="action", required=True)
    listing = sub.add_parser("list", help="list every extension command")
    listing.add_argument(
        "--type", choices=["mcp", "skill"], default=None, help="only mcp:* or skill:* commands"
    )
    search = sub.add_parser("search", help="search commands by keyword, glob or regex")
    search.add_argument(
        "query",
        nargs="?",
        default="",
        help="keywords; a glob when its only special characters are * and ? "
        "('mcp:github:*'); else a regex if it has regex characters; none lists all",
    )
    search.add_argument(
        "--type", choices=["mcp", "skill"], default=None, help="only mcp:* or skill:* commands"
    )
    search.add_argument("--regex", action="store_true", help="the query is a regular expression")
    search.add_argument(
        "--limit", type=_non_negative, default=DEFAULT_LIMIT,
        help=f"show at most this many results (default {DEFAULT_LIMIT})",
    )  # fmt: skip
    refresh = sub.add_parser(
        "refresh", help="reconnect MCP servers / rescan skills, rewrite wrappers"
    )
    refresh.add_argument(
        "kind", nargs="?", choices=["mcp", "skills", "all"], default="all",
        help="what to refresh (default: all)",
    )  # fmt: skip
    for p in (listing, search, refresh):
        p.add_argument(
            "--trust", action="store_true",
            help="also start this folder's own mcp_servers.json when the folder is not "
            "trusted (for this run only; `synapse trust` remembers it)",
        )  # fmt: skip
        p.add_argument(
            "--connect-timeout",
            type=float,
            default=30.0,
            help="seconds to wait for MCP servers (default 30)",
        )
    return parser


class _StatusLine:
    """The progress line of a wait: on a terminal one line rewritten in place (erased
    before anything else is printed), else plain lines."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.tty = out.isatty()
        self.shown = False

    def show(self, text: str) -> None:
        if self.tty:
            self.out.write(f"\r{text}\x1b[K")
            self.shown = True
        else:
            self.out.write(text + "\n")
        self.out.flush()

    def clear(self) -> None:
        if self.shown:
            self.out.write("\r\x1b[K")
            self.out.flush()
            self.shown = False


class _OncePerProblem(logging.Handler):
    """Prints each warning the run logs once, as `warning: …`, and remembers it, so the
    summary of problems at the end does not print it a second time."""

    def __init__(self, status: _StatusLine) -> None:
        super().__init__(logging.WARNING)
        self.seen: set[str] = set()
        self.status = status

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message not in self.seen:
            self.seen.add(message)
            self.status.clear()
            print(f"warning: {message}", file=sys.stderr)


async def _wait_for_mcp(registry: ExtensionRegistry, timeout: float, status: _StatusLine) -> None:
    """`registry.wait_for_mcp(timeout)`, showing what it waits for (module docstring)."""
    wait = asyncio.ensure_future(registry.wait_for_mcp(timeout))
    started = time.monotonic()
    due = PROGRESS_AFTER
    try:
        while not wait.done():
            await asyncio.wait({wait}, timeout=max(0.0, started + due - time.monotonic()))
            due += 1.0 if status.tty else PROGRESS_EVERY
            servers = registry.mcp.servers.values()
            pending = [s.starting() for s in servers if s.state in ("connecting", "idle")]
            if pending and not wait.done():
                status.show(f"{'; '.join(pending)}, {time.monotonic() - started:.0f} s")
    finally:
        status.clear()
        if not wait.done():
            wait.cancel()
    await wait


def _not_loaded(settings: Settings, cwd: Path, forced: bool, loaded: list[Path]) -> str | None:
    """Why this folder's own MCP configs (`mcp_servers.json`, `.mcp.json`) not among the
    `loaded` files were not started, naming each (None: none withheld): not trusted, or
    changed since the user confirmed them."""
    held = tuple(n for n in FOLDER_CONFIGS if (cwd / n).is_file() and cwd / n not in loaded)
    if forced or not held:
        return None
    if not trust.decide(settings.synapse_home, cwd):
        reason = f"{trust.NOT_TRUSTED_HINT} (or pass --trust for this run)"
    else:
        reason = trust.CHANGED_HINT
    return f"Note: {withheld_servers_note(cwd, reason, '', files=held)}"


def _skills_unreadable(settings: Settings) -> bool:
    """The skills folder exists but cannot be listed (not a folder, no permission)."""
    from synapse_lsp.extensions.skills import skills_dir

    try:
        next(iter(skills_dir(settings.synapse_home).iterdir()), None)
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return False


async def run(args: argparse.Namespace, settings: Settings, cwd: Path) -> int:
    logger = logging.getLogger("synapse_lsp")
    status = _StatusLine(sys.stderr)
    once = _OncePerProblem(status)
    logger.addHandler(once)
    propagate, logger.propagate = logger.propagate, False
    try:
        return await _run(args, settings, cwd, once.seen, status)
    finally:
        logger.removeHandler(once)
        logger.propagate = propagate


async def _run(
    args: argparse.Namespace, settings: Settings, cwd: Path, said: set[str], status: _StatusLine
) -> int:
    from synapse_lsp.extensions.mcp_client import config_paths
    from synapse_lsp.extensions.registry import ExtensionRegistry
    from synapse_lsp.extensions.search import (
        how_to_add,
        more_line,
        no_match_line,
        search_commands,
    )

    need_mcp = args.action != "refresh" or args.kind in ("mcp", "all")
    # The same files every other face starts: an untrusted folder's own servers are
    # programs the folder names, not started here either (listed as not loaded).
    trusted = args.trust or trust.decide(settings.synapse_home, cwd).trusted
    home = settings.synapse_home
    held = {home / n for n in trust.home_unconfirmed(home) if n == trust.HOME_MCP}
    if trusted and not args.trust:
        held |= set(trust.unconfirmed(home, cwd))
    files = [p for p in config_paths(settings, cwd, trusted=trusted) if p not in held]
    registry = ExtensionRegistry(
        settings,
        cwd,
        watch=False,
        serve_socket=False,
        only_servers=None if need_mcp else set(),
        config_files=files,
    )
    await registry.start()
    not_ready: list[str] = []
    try:
        if need_mcp:
            await _wait_for_mcp(registry, args.connect_timeout, status)
        kind = getattr(args, "type", None)
        if args.action in ("list", "search"):
            query = args.query if args.action == "search" else ""
            limit = args.limit if args.action == "search" else None
            try:
                shown = search_commands(
                    registry.search_index(), query, kind, limit, regex=getattr(args, "regex", False)
                )
            except ValueError as exc:
                print(f"synapse tools search: {exc}", file=sys.stderr)
                return 2
            for match in shown:
                print(match.line())
            if not shown.total:
                empty = f"No {kind or 'extension'} commands."
                print(no_match_line(query, kind) if query else empty, file=sys.stderr)
                adding = how_to_add(kind, settings.synapse_home, cwd)
                for line in adding if query or not registry.mcp.servers else []:
                    print(line, file=sys.stderr)
            elif shown.total > len(shown):
                print(more_line(shown.total - len(shown)), file=sys.stderr)
        else:
            mcp = [c for c in registry.commands() if c.name.startswith("mcp:")]
            skills = [c for c in registry.commands() if c.name.startswith("skill:")]
            if args.kind in ("mcp", "all"):
                print(f"MCP: {len(registry.mcp.servers)} server(s), {len(mcp)} command(s)")
                for server in registry.mcp.servers.values():
                    detail = f"{len(server.tools)} tools" if server.state == "ready" else ""
                    if server.state in ("connecting", "idle"):
                        detail = (
                            f"still {server.starting()} after {args.connect_timeout:g} s; "
                            "run `synapse tools refresh mcp` again, or with a longer "
                            "--connect-timeout"
                        )
                        print(f"  {server.name}: not ready: {detail}")
                        not_ready.append(server.name)
                        continue
                    if server.state != "ready":
                        detail = server.describe_failure()
                    if server.state not in ("ready", "disabled"):
                        not_ready.append(server.name)
                    print(f"  {server.name}: {server.state} {detail}".rstrip())
            if args.kind in ("skills", "all"):
                print(f"Skills: {len(registry.skills)} skill(s), {len(skills)} command(s)")
            print(f"Wrappers: {settings.bin_dir}")
        for note in registry.notes() if args.action != "refresh" else []:
            print(note, file=sys.stderr)
        elsewhere = _not_loaded(settings, cwd, args.trust, files) if need_mcp else None
        if elsewhere is not None and kind != "skill":
            print(elsewhere, file=sys.stderr)
        for problem in registry.problems:
            if problem not in said:
                said.add(problem)
                print(f"warning: {problem}", file=sys.stderr)
    finally:
        await registry.close()
    failed = bool(not_ready)
    if args.action == "refresh" and args.kind in ("skills", "all") and _skills_unreadable(settings):
        failed = True
    return 1 if args.action == "refresh" and (failed or registry.mcp.problems) else 0


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        return asyncio.run(run(args, Settings(), Path.cwd()))
    except KeyboardInterrupt:
        return 130
