"""The `synapse` command: a thin dispatcher; each subcommand lives in its own module.

Subcommand modules are imported only when chosen, so `synapse lsp` does not pay
for the model SDK and `synapse exec` does not pay for pygls.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import os
import select
import sys

# name -> (module, one-line help). Each module exposes `main(argv: list[str]) -> int`.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "exec": ("synapse_lsp.cli.exec", "run command lines through the router and one shell session"),
    "chat": ("synapse_lsp.cli.chat", "interactive chat with the agent (or one-shot with -p)"),
    "lsp": ("synapse_lsp.lsp.server", "start the language server on stdio"),
    "acp": ("synapse_lsp.acp.server", "start the Agent Client Protocol agent on stdio"),
    "trust": ("synapse_lsp.cli.trust", "trust a folder: load its own mcp_servers.json"),
    "permissions": (
        "synapse_lsp.cli.permissions",
        "list, add and revoke remembered always-allow / always-deny command prefixes",
    ),
    "tools": ("synapse_lsp.cli.tools", "search and refresh extension commands (mcp:*, skill:*)"),
    "parse-command": (
        "synapse_lsp.summaries.parse_command",
        "print the summary of a command line as JSON",
    ),
    "fake-api": (
        "synapse_lsp.agent.scripted_api",
        "serve a scripted fake Anthropic Messages API on loopback",
    ),
}


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser: its help lists the subcommands; each has its own parser."""
    from synapse_lsp import __version__

    parser = argparse.ArgumentParser(
        prog="synapse",
        description="Synapse: an LLM coding agent whose one tool is Bash.",
        epilog="Run `synapse <command> --help` for a command's options.",
    )
    parser.add_argument(
        "--version", action="version", version=f"synapse {__version__}",
        help="print the version and exit",
    )  # fmt: skip
    sub = parser.add_subparsers(dest="command", metavar="<command>", title="commands")
    for name, (_, text) in SUBCOMMANDS.items():
        sub.add_parser(name, help=text, add_help=False)
    return parser


def usage() -> str:
    return build_parser().format_help()


# Exit status when the reader of stdout went away (`synapse -h | head`): what a shell
# reports for a process SIGPIPE ended (128 + 13).
BROKEN_PIPE_EXIT = 141


def main(argv: list[str] | None = None) -> int:
    """Run a subcommand. A reader of stdout that goes away (`synapse tools list | head`)
    ends the program quietly with 141, never a BrokenPipeError traceback."""
    as_program_chat = argv is None and sys.argv[1:2] == ["chat"]
    from synapse_lsp.policy.secrets import protect_process

    protect_process()  # the key in /proc/PID/environ is not a same-user command's to read
    try:
        try:
            code = _main(argv)
        except KeyboardInterrupt:  # chat: Ctrl-C before its handler was installed
            if not as_program_chat:
                raise
            code = 130
        except SystemExit as exc:  # argparse's help or usage error
            if not as_program_chat:
                raise
            if exc.code is not None and not isinstance(exc.code, int):
                print(exc.code, file=sys.stderr)  # what the interpreter would print
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            # Help printed by argparse (SystemExit) is flushed here too. `synapse lsp`
            # closes stdout when the editor goes: nothing is left to flush then.
            if not sys.stdout.closed:
                sys.stdout.flush()
            _fast_teardown()
        if as_program_chat:
            from synapse_lsp.cli import stop_signals

            # Also ends the SDK import thread (cli/preload.py) mid-import, if it runs.
            _exit_now(stop_signals.exit_code(code))  # a signal while closing: 130 / 143
        return code
    except BrokenPipeError:
        if not _stdout_closed():
            raise  # some other pipe or socket: a real error
        _quiet_stdout()
        return BROKEN_PIPE_EXIT


def _fast_teardown() -> None:
    """Make the interpreter's exit cheap. The subcommand has closed what it owns (session
    records written, shell and servers reaped); what is left is the interpreter freeing
    the SDK's ~100k objects, which cost 210-470 ms after `chat -p`'s last answer. Frozen
    objects are skipped by the collector at exit (refcounting still closes files):
    measured ~20 ms."""
    gc.freeze()


def _exit_now(code: int) -> None:
    """End `synapse chat` (run as a program, not called from Python) without the
    interpreter's teardown: `chat` has closed everything it owns by now (session
    records are written with unbuffered `os.write`, the shell and MCP servers are
    reaped), so what is left is freeing ~100k objects one by one, 20-60 ms even
    frozen. Streams and log handlers are flushed first."""
    import logging

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            if not stream.closed:
                stream.flush()
    os._exit(code)


def _stdout_closed() -> bool:
    """True when nobody reads our stdout any more (the pipe's reader closed it)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(event & (select.POLLERR | select.POLLHUP) for _, event in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return True  # stdout is unusable anyway


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush at exit cannot fail
    again and print "Exception ignored … BrokenPipeError"."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


def _main(argv: list[str] | None) -> int:
    args = sys.argv[1:] if argv is None else argv
    entry = SUBCOMMANDS.get(args[0]) if args else None
    if entry is None:  # no command, -h, --version or an unknown command: argparse answers
        parser = build_parser()
        if not args:
            parser.print_help(sys.stderr)
            return 2
        parser.parse_args(args[:1])  # exits: help/version 0, an unknown command 2
        return 2
    if args[0] == "chat":
        from synapse_lsp.cli.preload import start_sdk_import, wants_model

        if wants_model(args[1:]):
            from synapse_lsp.cli import stop_signals

            # SIGINT/SIGTERM are a cancel from here on (chat -p; the REPL removes it).
            stop_signals.install()
            start_sdk_import()  # before importing the chat face: it overlaps everything
    module = importlib.import_module(entry[0])
    result: int = module.main(args[1:])
    return result


if __name__ == "__main__":
    sys.exit(main())
